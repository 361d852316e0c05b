//! Tasks taking turns at one lock, each hold recorded as its holder saw it, and
//! the check that no two holds overlapped and fences grew.

use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use latchkey::store::{Inspect, Pass, WakeUps};
use latchkey::{Client, Error, Fairness, Lease, Ttl};

/// One hold, as its holder saw it: when it got the lock, until when the lock was
/// surely its own (released, or its validity ran out), and its fencing token, if
/// one could be made (a quorum makes it on demand, from the nodes that hold the
/// lock when asked: a hold that lost its majority to a crash gets none).
#[derive(Clone, Copy, Debug)]
pub struct Hold {
    pub from: Instant,
    pub until: Instant,
    pub fence: Option<u64>,
}

/// The holds of one lock, from every task.
pub type Holds = Arc<StdMutex<Vec<Hold>>>;

/// How a task takes its turns.
#[derive(Clone, Debug)]
pub struct Turns {
    pub name: String,
    pub fair: bool,
    pub rounds: usize,
    /// How long each hold lasts.
    pub work: Duration,
    /// The renewed lease.
    pub ttl: Duration,
}

/// Takes the lock `turns.rounds` times through `client`, recording each hold in
/// `holds`; returns how many attempts failed (transiently: a failover in progress).
pub async fn take_turns<S: Pass + WakeUps>(client: Client<S>, turns: Turns, holds: Holds) -> usize {
    let fairness = if turns.fair {
        Fairness::Fair
    } else {
        Fairness::Plain
    };
    let mutex = client
        .mutex(&turns.name)
        .unwrap()
        .with_fairness(fairness)
        .with_lease(Lease::renewed(turns.ttl).unwrap());
    let mut failures = 0;
    for _ in 0..turns.rounds {
        let guard = match mutex.lock_timeout(Duration::from_secs(10)).await {
            Ok(guard) => guard,
            Err(error) => {
                assert!(error.is_transient(), "{error}");
                failures += 1;
                continue;
            }
        };
        let from = Instant::now();
        tokio::time::sleep(turns.work).await;
        let until = Instant::now().min(guard.valid_until());
        let fence = match guard.fence().await {
            Ok(fence) => Some(fence),
            Err(error) => {
                let lost = matches!(error, Error::LeaseLost { .. });
                assert!(lost || error.is_transient(), "{error}");
                None
            }
        };
        holds.lock().unwrap().push(Hold { from, until, fence });
        let _ = guard.release().await;
    }
    failures
}

/// No two holds overlap, every hold got a fence, and fences grow in the order the
/// holds started.
pub fn assert_exclusive_and_fenced(holds: &Holds) {
    assert_exclusive_outside(holds, None, None);
}

/// As [`assert_exclusive_and_fenced`], except that a hold overlapping `fault`
/// (from, until) may have got no fence: a quorum makes it on demand from the nodes
/// that hold the lock when asked, and a hold granted on a bare majority, one of
/// which crashed, cannot make one.
pub fn assert_exclusive_and_fenced_except_during(holds: &Holds, fault: (Instant, Instant)) {
    assert_exclusive_outside(holds, None, Some(fault));
}

/// As [`assert_exclusive_and_fenced`], except for two holds that overlap where the
/// later began within `split_brain` (from, until): the window in which a
/// deployment is documented to grant a lock twice (a Sentinel failover without
/// WAIT); and holds without a fence that overlap `fault`. Every pair of
/// overlapping holds is checked, not only neighbours, so an excused overlap cannot
/// hide another.
pub fn assert_exclusive_outside(
    holds: &Holds,
    split_brain: Option<(Instant, Instant)>,
    fault: Option<(Instant, Instant)>,
) {
    let mut holds = holds.lock().unwrap().clone();
    holds.sort_by_key(|h| h.from);
    let within = |window: Option<(Instant, Instant)>, instant: Instant| {
        window.is_some_and(|(from, until)| (from..=until).contains(&instant))
    };
    for (i, earlier) in holds.iter().enumerate() {
        for later in holds[i + 1..].iter().take_while(|h| h.from < earlier.until) {
            assert!(
                within(split_brain, later.from),
                "overlapping holds: {earlier:?} and {later:?}"
            );
        }
        let overlaps_fault =
            fault.is_some_and(|(from, until)| earlier.from <= until && from <= earlier.until);
        assert!(
            earlier.fence.is_some() || overlaps_fault,
            "a hold got no fence, away from any fault: {earlier:?}"
        );
    }
    // Fences grow from each fenced hold to the next one.
    let fenced: Vec<&Hold> = holds.iter().filter(|h| h.fence.is_some()).collect();
    for pair in fenced.windows(2) {
        let (earlier, next) = (pair[0], pair[1]);
        assert!(
            next.fence > earlier.fence || next.from < earlier.until,
            "fence did not grow: {earlier:?} then {next:?}"
        );
    }
}

/// Holds that started after `instant`.
fn started_after(holds: &Holds, instant: Instant) -> usize {
    holds
        .lock()
        .unwrap()
        .iter()
        .filter(|h| h.from > instant)
        .count()
}

/// A client per task taking turns at one lock (the first fair), 60 rounds of 20 ms
/// holds on renewed 500 ms leases, while the caller fails Redis over.
pub struct UnderLoad {
    tasks: Vec<tokio::task::JoinHandle<usize>>,
    holds: Holds,
}

impl UnderLoad {
    pub fn start(clients: Vec<Client>, name: &str) -> Self {
        let holds = Holds::default();
        let tasks = clients
            .into_iter()
            .enumerate()
            .map(|(i, client)| {
                let turns = Turns {
                    name: name.to_owned(),
                    fair: i == 0,
                    rounds: 60,
                    work: Duration::from_millis(20),
                    ttl: Duration::from_millis(500),
                };
                tokio::spawn(take_turns(client, turns, holds.clone()))
            })
            .collect();
        UnderLoad { tasks, holds }
    }

    /// Waits for every task: no two holds overlapped, fences grew, and locks were
    /// taken again after the fault that began at `fault_at`.
    pub async fn assert_survived(self, fault_at: Instant) {
        self.assert_survived_outside(fault_at, None).await;
    }

    /// As [`UnderLoad::assert_survived`], except for overlaps in `split_brain`
    /// (see [`assert_exclusive_outside`]).
    pub async fn assert_survived_outside(
        self,
        fault_at: Instant,
        split_brain: Option<(Instant, Instant)>,
    ) {
        for task in self.tasks {
            task.await.unwrap();
        }
        // A hold the failover cut short may have got no fence.
        assert_exclusive_outside(&self.holds, split_brain, Some((fault_at, Instant::now())));
        let after = started_after(&self.holds, fault_at);
        assert!(after > 0, "no lock was taken after the failover");
    }
}

/// A waiter with a 30 s waiter lease (without a wake-up it would re-check only
/// after 10 s) gets `name` within 5 s of `holder` releasing it: the release woke it.
pub async fn assert_release_wakes<S: Pass + WakeUps>(
    holder: &Client<S>,
    waiter: &Client<S>,
    name: &str,
) {
    let held = holder
        .mutex(name)
        .unwrap()
        .lock_timeout(Duration::from_secs(10))
        .await
        .unwrap();
    let waiter = waiter
        .mutex(name)
        .unwrap()
        .with_waiter_lease(Ttl::new(Duration::from_secs(30)).unwrap());
    let waiting = tokio::spawn(async move { waiter.lock_timeout(Duration::from_secs(5)).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(held.release().await.unwrap());
    let guard = waiting.await.unwrap().expect("the release woke the waiter");
    guard.release().await.unwrap();
}

/// `holder` takes `name`, then each of `waiters` queues behind it, fair, one after
/// the other; once the holder lets go, they get the lock in the order they queued.
pub async fn assert_fair_order<S: Pass + WakeUps + Inspect>(
    holder: &Client<S>,
    waiters: Vec<Client<S>>,
    name: &str,
) {
    let held = holder.mutex(name).unwrap().try_lock().await.unwrap();
    let order = Arc::new(StdMutex::new(Vec::new()));
    let count = waiters.len();
    let mut tasks = Vec::new();
    for (n, client) in waiters.into_iter().enumerate() {
        let mutex = client.mutex(name).unwrap().with_fairness(Fairness::Fair);
        let order = order.clone();
        tasks.push(tokio::spawn(async move {
            let guard = mutex.lock_timeout(Duration::from_secs(20)).await.unwrap();
            order.lock().unwrap().push(n);
            tokio::time::sleep(Duration::from_millis(20)).await;
            guard.release().await.unwrap();
        }));
        // Queued one after the other.
        let status = holder.mutex(name).unwrap();
        while status.status().await.unwrap().waiters < n as u64 + 1 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    held.release().await.unwrap();
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(
        *order.lock().unwrap(),
        (0..count).collect::<Vec<_>>(),
        "on {name}"
    );
}
