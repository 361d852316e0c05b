//! Local handoff: tasks of one process waiting for a lock another of its tasks holds.
//!
//! While a task of this process holds a plain lock (or waits for it in Redis), other
//! tasks of the process that want it queue here instead of in Redis. The holder's release then passes the lock
//! straight to the next of them in one script (new owner, new lease, and a new fencing
//! token for a task that asked for it on grant), without freeing it: one round trip
//! and four Redis commands per acquisition instead of a release and a wake-up to
//! another process. While other processes wait in the Redis queue, a process passes ahead of them for at most
//! [`MAX_TIME_AHEAD`] ([`MAX_PASSES_AHEAD`] passes), then releases to them. Local waiters also
//! re-check on a timer, so a lost turn costs at most that. The user-facing account is the crate docs'
//! `# Plain or fair` section.

use std::borrow::Borrow;
use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex as StdMutex, MutexGuard as StdGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::key::LockKey;
use crate::lease::Ttl;
use crate::token::OwnerToken;

/// Which of a process's tasks hold or wait for which lock; shared by a client's
/// mutex handles.
#[derive(Clone, Debug, Default)]
pub(crate) struct LocalLocks(Arc<StdMutex<Entries>>);

/// Every lock a task of this process holds or waits for. An uncontended lock cycle
/// looks its key up six times: hashed with foldhash (seeded per process), not
/// SipHash, they cost about 1 % of the cycle's client instructions instead of 3 %.
type Entries = HashMap<EntryKey, Local, foldhash::fast::RandomState>;

/// A lock's key as the table's: hashed and compared as its text, so a `&str` finds
/// it, and kept as the shared `LockKey` it is (a copy of the text cost an
/// allocation a cycle).
#[derive(Debug)]
struct EntryKey(LockKey);

impl PartialEq for EntryKey {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

impl Eq for EntryKey {}

impl Hash for EntryKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.0.as_str().hash(state);
    }
}

impl Borrow<str> for EntryKey {
    fn borrow(&self) -> &str {
        self.0.as_str()
    }
}

#[derive(Debug, Default)]
struct Local {
    /// A task of this process holds the lock.
    held: bool,
    /// Passes in a row ahead of other processes waiting in Redis, since when.
    passes_ahead: u32,
    ahead_since: Option<Instant>,
    /// Tasks of this process waiting for it through Redis.
    in_redis: usize,
    waiters: VecDeque<LocalWaiter>,
}

impl Local {
    fn is_idle(&self) -> bool {
        !self.represented() && self.waiters.is_empty()
    }

    /// A task of this process holds the lock or waits for it in Redis: queueing
    /// behind it costs Redis nothing, and it passes the lock on when done.
    fn represented(&self) -> bool {
        self.held || self.in_redis > 0
    }

    /// One task of this process waits for the lock through Redis no more.
    fn uncount_redis_waiter(&mut self) {
        self.in_redis = self.in_redis.saturating_sub(1);
    }

    /// Sends the oldest live local waiter to Redis, so the process keeps competing
    /// once nobody represents it there.
    fn send_one_to_redis(&mut self) {
        if self.represented() {
            return;
        }
        while let Some(waiter) = self.waiters.pop_front() {
            if waiter.tell(Turn::TryRedis).is_ok() {
                return;
            }
        }
    }
}

/// A task waiting for a local pass.
#[derive(Debug)]
pub(crate) struct LocalWaiter {
    pub(crate) owner: OwnerToken,
    pub(crate) ttl: Ttl,
    /// It wants its fencing token with the lock ([`crate::Fencing::OnGrant`]).
    pub(crate) fenced: bool,
    reply: oneshot::Sender<Turn>,
}

/// How many times in a row, and for how long, a process passes a lock among its
/// tasks while other processes wait for it in Redis, before it yields to them:
/// enough to spread the cost of a handoff between processes (a release and a
/// wake-up, most of a millisecond) over several short critical sections, little
/// enough that a waiting process loses at most 10 ms and one critical section to
/// each process ahead of it (the clock starts at the first pass ahead, so a long
/// critical section gets one pass ahead at most).
pub(crate) const MAX_PASSES_AHEAD: u32 = 64;
pub(crate) const MAX_TIME_AHEAD: Duration = Duration::from_millis(10);

/// What a local waiter is told.
#[derive(Debug)]
pub(crate) enum Turn {
    /// The lock is yours, passed as this says.
    Yours(Passed),
    /// Nobody here will pass it to you: take your turn through Redis.
    TryRedis,
}

/// A lock passed to a local waiter: its fencing token (`None`: fenced on demand),
/// when the pass was sent, and whether other processes wait in Redis.
#[derive(Debug)]
pub(crate) struct Passed {
    pub(crate) fence: Option<u64>,
    pub(crate) sent: Instant,
    pub(crate) others_queued: bool,
}

impl LocalWaiter {
    /// Tells the waiter; gives the turn back if the waiter is gone.
    pub(crate) fn tell(self, turn: Turn) -> Result<(), Turn> {
        self.reply.send(turn)
    }
}

impl LocalLocks {
    fn entries(&self) -> StdGuard<'_, Entries> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies `change` to `key`'s entry, made first if there is none.
    fn update<T>(&self, key: &LockKey, change: impl FnOnce(&mut Local) -> T) -> T {
        let mut entries = self.entries();
        if let Some(local) = entries.get_mut(key.as_str()) {
            return change(local);
        }
        change(entries.entry(EntryKey(key.clone())).or_default())
    }

    /// Queues `owner` behind this process's holder of `key` (or its task waiting in
    /// Redis), if there is one.
    pub(crate) fn wait_behind_holder(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        (ttl, fenced): (Ttl, bool),
    ) -> Option<oneshot::Receiver<Turn>> {
        let mut entries = self.entries();
        let local = entries.get_mut(key.as_str()).filter(|l| l.represented())?;
        let (reply, turn) = oneshot::channel();
        local.waiters.push_back(LocalWaiter {
            owner: owner.clone(),
            ttl,
            fenced,
            reply,
        });
        Some(turn)
    }

    /// Whether a task of this process holds `key` or waits for it in Redis.
    pub(crate) fn is_represented(&self, key: &LockKey) -> bool {
        self.entries()
            .get(key.as_str())
            .is_some_and(Local::represented)
    }

    /// A task of this process took `key` through Redis.
    pub(crate) fn mark_held(&self, key: &LockKey) {
        self.update(key, |local| local.held = true);
    }

    /// Counts a task of this process waiting for `key` through Redis, until dropped.
    pub(crate) fn redis_waiter(&self, key: &LockKey) -> RedisWaiter {
        self.update(key, |local| local.in_redis += 1);
        RedisWaiter {
            locks: self.clone(),
            key: key.clone(),
            counted: true,
        }
    }

    /// The oldest local waiter still waiting, for the holder to pass the lock to.
    pub(crate) fn next_waiter(&self, key: &LockKey) -> Option<LocalWaiter> {
        let mut entries = self.entries();
        let local = entries.get_mut(key.as_str())?;
        while let Some(waiter) = local.waiters.pop_front() {
            if !waiter.reply.is_closed() {
                return Some(waiter);
            }
        }
        None
    }

    /// Puts back at the head of the line a waiter the holder could not pass to.
    pub(crate) fn put_back(&self, key: &LockKey, waiter: LocalWaiter) {
        self.update(key, |local| local.waiters.push_front(waiter));
    }

    /// This process no longer holds `key`. If none of its tasks waits through Redis,
    /// the oldest local waiter is sent there, so the process keeps competing.
    pub(crate) fn released(&self, key: &LockKey) {
        self.settle(key.as_str(), |local| {
            local.held = false;
            local.passes_ahead = 0;
            local.ahead_since = None;
        });
    }

    /// Whether the holder may pass `key` to a local waiter once more ahead of other
    /// processes waiting in Redis; counts the pass if so.
    pub(crate) fn pass_ahead(&self, key: &LockKey) -> bool {
        let mut entries = self.entries();
        let Some(local) = entries.get_mut(key.as_str()) else {
            return false;
        };
        let since = *local.ahead_since.get_or_insert_with(Instant::now);
        local.passes_ahead += 1;
        local.passes_ahead <= MAX_PASSES_AHEAD && since.elapsed() < MAX_TIME_AHEAD
    }

    /// A waiter leaves the line behind `key`'s holder without its turn (its deadline
    /// passed, it was cancelled). Returns a lock passed to it in the meantime, which
    /// it now holds; a turn to go to Redis it did not use goes to the next waiter.
    pub(crate) fn leave_line(
        &self,
        key: &LockKey,
        mut turn: oneshot::Receiver<Turn>,
    ) -> Option<Passed> {
        // After `close`, a send either happened before (and `try_recv` sees it) or
        // fails, and the holder keeps the lock: no word is lost in between.
        turn.close();
        match turn.try_recv().ok()? {
            Turn::Yours(passed) => Some(passed),
            Turn::TryRedis => {
                self.settle(key.as_str(), |_| {});
                None
            }
        }
    }

    /// Applies `change` to `key`'s entry, then keeps the process competing (a local
    /// waiter goes to Redis if nobody here represents it there) and forgets the entry
    /// once nobody holds, waits or queues for the lock.
    fn settle(&self, key: &str, change: impl FnOnce(&mut Local)) {
        let mut entries = self.entries();
        let Some(local) = entries.get_mut(key) else {
            return;
        };
        change(local);
        local.send_one_to_redis();
        if local.is_idle() {
            entries.remove(key);
        }
    }

    /// Whether the process keeps no state for `key` (nobody holds, waits or queues).
    #[cfg(test)]
    pub(crate) fn is_forgotten(&self, key: &LockKey) -> bool {
        !self.entries().contains_key(key.as_str())
    }
}

/// A task of this process waiting through Redis; uncounted when dropped.
#[derive(Debug)]
pub(crate) struct RedisWaiter {
    locks: LocalLocks,
    key: LockKey,
    /// Still counted in `in_redis` (until it took the lock, or is dropped).
    counted: bool,
}

impl RedisWaiter {
    /// The task took the lock through Redis: it holds it now and waits no more, in
    /// one look-up (an uncontended lock cycle makes six).
    pub(crate) fn took_the_lock(mut self) {
        self.counted = false;
        self.locks.update(&self.key, |local| {
            local.held = true;
            local.uncount_redis_waiter();
        });
    }
}

impl Drop for RedisWaiter {
    fn drop(&mut self) {
        if !self.counted {
            return;
        }
        self.locks
            .settle(self.key.as_str(), Local::uncount_redis_waiter);
    }
}

/// Every interleaving of a holder, two local waiters (each either taking its turn or
/// leaving, as a cancelled or timed-out waiter does) and a task waiting in Redis,
/// each run from scratch against the real `LocalLocks` and oneshot channels, the way
/// tokio's loom tests check its sync primitives. The holder's release mirrors
/// `ReleaseOnDrop::pass_locally` with a store whose pass always succeeds.
#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::Prefix;

    #[derive(Clone, Copy, Debug)]
    enum Step {
        /// The holder releases: passes to the next local waiter, or lets go.
        Release,
        /// Waiter `i` queues behind the local holder (or goes to Redis).
        Queue(usize),
        /// Waiter `i` takes its turn if told, else gives up.
        Take(usize),
        /// Waiter `i` leaves the line (deadline, cancellation).
        Leave(usize),
        /// A task of this process starts / stops waiting through Redis.
        RedisStart,
        RedisStop,
    }

    #[derive(Default)]
    struct World {
        turns: [Option<oneshot::Receiver<Turn>>; 2],
        /// Who holds the lock: `Some(None)` the first holder, `Some(Some(i))` waiter i.
        holder: Option<Option<usize>>,
        /// The waiter a pass was sent to and not yet read.
        in_flight: Option<usize>,
        redis_waiter: Option<RedisWaiter>,
    }

    struct Model {
        locks: LocalLocks,
        key: LockKey,
        owners: [OwnerToken; 2],
        world: World,
    }

    impl Model {
        fn new() -> Self {
            let locks = LocalLocks::default();
            let key = LockKey::new(&Prefix::default(), "model").unwrap();
            locks.mark_held(&key);
            let world = World {
                holder: Some(None),
                ..World::default()
            };
            let owners = [
                OwnerToken::generate().unwrap(),
                OwnerToken::generate().unwrap(),
            ];
            Model {
                locks,
                key,
                owners,
                world,
            }
        }

        /// The lock becomes waiter `i`'s (or, for `None`, a Redis acquisition's).
        fn take(&mut self, who: Option<usize>) {
            let world = &self.world;
            assert!(
                world.holder.is_none(),
                "two holders: {:?} and {who:?}",
                world.holder
            );
            assert!(
                world.in_flight.is_none(),
                "{who:?} took a lock passed to another"
            );
            self.world.holder = Some(who);
        }

        /// The current holder releases, as `ReleaseOnDrop::pass_locally` does.
        fn release(&mut self) {
            self.world.holder = None;
            while let Some(next) = self.locks.next_waiter(&self.key) {
                let i = self.owners.iter().position(|o| *o == next.owner).unwrap();
                let turn = Turn::Yours(Passed {
                    fence: Some(1),
                    sent: Instant::now(),
                    others_queued: false,
                });
                if next.tell(turn).is_ok() {
                    self.world.in_flight = Some(i);
                    return;
                }
            }
            self.locks.released(&self.key);
        }

        /// A waiter sent to Redis takes the lock there (the model has no other process)
        /// and releases it at once.
        fn through_redis(&mut self) {
            let counted = self.locks.redis_waiter(&self.key);
            self.take(None);
            counted.took_the_lock();
            self.release();
        }

        /// Waiter `i` holds a lock passed to it, and releases it at once.
        fn passed(&mut self, i: usize) {
            assert_eq!(self.world.in_flight.take(), Some(i), "a pass nobody sent");
            self.take(Some(i));
            self.release();
        }

        fn run(&mut self, step: Step) {
            match step {
                Step::Release => {
                    assert_eq!(self.world.holder, Some(None));
                    self.release();
                }
                Step::Queue(i) => {
                    let ttl = Ttl::DEFAULT;
                    match self
                        .locks
                        .wait_behind_holder(&self.key, &self.owners[i], (ttl, true))
                    {
                        Some(turn) => self.world.turns[i] = Some(turn),
                        None => self.through_redis(),
                    }
                }
                Step::Take(i) => {
                    let Some(mut turn) = self.world.turns[i].take() else {
                        return;
                    };
                    match turn.try_recv() {
                        Ok(Turn::Yours(_)) => self.passed(i),
                        Ok(Turn::TryRedis) | Err(oneshot::error::TryRecvError::Closed) => {
                            self.through_redis()
                        }
                        // Not told yet: it gives up, as at its deadline.
                        Err(oneshot::error::TryRecvError::Empty) => self.leave(i, turn),
                    }
                }
                Step::Leave(i) => {
                    if let Some(turn) = self.world.turns[i].take() {
                        self.leave(i, turn);
                    }
                }
                Step::RedisStart => {
                    self.world.redis_waiter = Some(self.locks.redis_waiter(&self.key))
                }
                Step::RedisStop => self.world.redis_waiter = None,
            }
        }

        fn leave(&mut self, i: usize, turn: oneshot::Receiver<Turn>) {
            if self.locks.leave_line(&self.key, turn).is_some() {
                self.passed(i);
            }
        }
    }

    /// Every way to interleave `actors`' step sequences, keeping each one's order.
    fn interleavings(actors: &[Vec<Step>]) -> Vec<Vec<Step>> {
        if actors.iter().all(Vec::is_empty) {
            return vec![Vec::new()];
        }
        let mut all = Vec::new();
        for (a, steps) in actors.iter().enumerate().filter(|(_, s)| !s.is_empty()) {
            let mut rest = actors.to_vec();
            rest[a] = steps[1..].to_vec();
            for mut tail in interleavings(&rest) {
                tail.insert(0, steps[0]);
                all.push(tail);
            }
        }
        all
    }

    #[test]
    fn passes_ahead_of_other_processes_are_bounded_and_restart_after_a_release() {
        let locks = LocalLocks::default();
        let key = LockKey::new(&Prefix::default(), "ahead").unwrap();
        locks.mark_held(&key);
        let allowed = (0..MAX_PASSES_AHEAD + 5)
            .filter(|_| locks.pass_ahead(&key))
            .count();
        // All of them unless this thread was held up past the time bound.
        assert!(
            allowed >= 1 && allowed <= MAX_PASSES_AHEAD as usize,
            "{allowed}"
        );
        // Once the lock went to Redis, the next holder of this process may pass again,
        // but not once the passes ahead have taken their time.
        locks.released(&key);
        locks.mark_held(&key);
        assert!(locks.pass_ahead(&key));
        std::thread::sleep(MAX_TIME_AHEAD + Duration::from_millis(1));
        assert!(!locks.pass_ahead(&key));
    }

    #[test]
    fn no_interleaving_loses_a_pass_strands_a_waiter_or_leaves_a_ghost_holder() {
        let mut runs = 0;
        for finish in [
            [Step::Take(0), Step::Take(1)],
            [Step::Take(0), Step::Leave(1)],
            [Step::Leave(0), Step::Take(1)],
            [Step::Leave(0), Step::Leave(1)],
        ] {
            let actors = vec![
                vec![Step::Release],
                vec![Step::Queue(0), finish[0]],
                vec![Step::Queue(1), finish[1]],
                vec![Step::RedisStart, Step::RedisStop],
            ];
            for schedule in interleavings(&actors) {
                let mut model = Model::new();
                for step in &schedule {
                    model.run(*step);
                }
                let world = &model.world;
                assert_eq!(world.holder, None, "{schedule:?}: still held");
                assert_eq!(world.in_flight, None, "{schedule:?}: a pass was lost");
                assert!(
                    model.locks.is_forgotten(&model.key),
                    "{schedule:?}: state left behind: {:?}",
                    model.locks
                );
                runs += 1;
            }
        }
        assert_eq!(runs, 4 * 630);
    }
}
