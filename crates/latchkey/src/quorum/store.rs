//! The quorum store: one lock over N independent Redis masters (Redlock), with
//! fencing tokens that hold across the quorum.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};

use super::attempts::{Attempts, Hold, owner_of};
use super::report::{NodeAnswer, NodeReport};
use super::round::{self, Answers};
use super::tally::{self, FencePlan, majority};
use crate::error::{Error, Result};
use crate::key::LockKey;
use crate::lease::{MAX_TTL, Ttl};
use crate::scripts::{self, ScriptCall};
use crate::store::{
    AcquireRequest, Attempt, Inspect, LockStatus, LockStore, Pass, RESPONSE_TIMEOUT, RedisStore,
    WakeUps, Watch,
};
use crate::token::{OwnerToken, mask_owner};

/// The per-node deadline when none is set: this share of the lease (redsync's
/// default), so a slow node costs a small part of the validity...
const DEADLINE_SHARE: u32 = 20;
/// ...but never less than this (a loopback round trip under load)...
const MIN_DEADLINE: Duration = Duration::from_millis(2);
/// ...nor more than the reply timeout of the nodes' connections.
const MAX_DEADLINE: Duration = RESPONSE_TIMEOUT;
/// Proposals are at least the node's clock rounded down to this step (µs); see
/// `scripts/quorum/take.lua` and docs/quorum-fencing.md.
const CLOCK_STEP_US: u64 = 1_000_000;
/// How long a node's fencing counter outlives the last grant, extend or write-back
/// that touched it. Within it, tokens rest on the counters alone; past it, on the
/// nodes' clocks (as after a restart that lost the data).
const FENCE_MEMORY: Duration = Duration::from_secs(24 * 3600);

/// The companion key of the values released lately (`scripts/quorum/ended.lua`).
const ENDED: &str = "ended";

const FAIR_REFUSED: &str = "a fair (FIFO) lock needs one queue, and a quorum of independent \
     masters has none: use a plain lock with the quorum, or a fair lock on one Redis deployment";

/// A lock store over N independent Redis masters (N odd, at least 3): Redlock, done
/// with the details its users report.
///
/// - Every request goes to all nodes at once, each with its own deadline (by
///   default 5 % of the lease, from 2 ms to 1 s); an outcome is settled as soon as a
///   majority answered either way, so a slow or dead node never delays it.
/// - A lock is granted only while its validity lasts: the lease counted from when
///   the attempt was sent, less the time it took and 1 % + 2 ms for clock drift.
/// - A failed attempt is released on every node, the ones that did not answer
///   included, and a release never hands the lock to anyone.
/// - An extend needs a majority that still holds the lock, and takes it back on
///   nodes that lost it (a restart without data), so a long hold keeps its majority.
/// - Fencing tokens grow strictly across the quorum: the holder writes its token
///   back to a majority before using it (see docs/quorum-fencing.md). As on one
///   server, the token is made when first asked for unless the mutex fences on
///   grant ([`Fencing`](crate::Fencing)), so a plain take sets only the lock on
///   each node.
/// - Errors name every node and what it said ([`Error::NoQuorum`]).
///
/// A quorum has no wait queue: waiters listen on every node and retry when any of
/// them sees a release, and a fair lock is refused with a clear error.
///
/// A node that restarts without its data must stay out for a lease (the longest
/// TTL in use) before it serves again, as Redlock requires; see the
/// [crate docs](crate#a-quorum-of-independent-masters).
///
/// ```no_run
/// use latchkey::quorum::QuorumStore;
///
/// # async fn demo() -> latchkey::Result<()> {
/// let store = QuorumStore::open(&["redis://10.0.0.1", "redis://10.0.0.2", "redis://10.0.0.3"]).await?;
/// let client = latchkey::Client::with_store(store);
/// let guard = client.mutex("orders:42")?.lock().await?;
/// println!("fence {}", guard.fence().await?);
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct QuorumStore {
    inner: Arc<Inner>,
}

#[derive(Clone)]
struct Inner {
    nodes: Vec<RedisStore>,
    /// Every node's address, for errors about the quorum as a whole.
    names: String,
    node_deadline: Option<Duration>,
    attempts: Attempts,
}

/// One node's answer to a take.
enum Taken {
    /// With the node's proposal for the fencing token (0 when none was asked for).
    Granted(u64),
    Busy {
        pttl: Option<Duration>,
        holder: String,
    },
}

/// A node's proposal for a fencing token asked for on demand.
#[derive(Clone, Copy, Debug)]
struct Proposal {
    token: u64,
    /// How much longer the node holds the lock for the caller (a lock made endless
    /// by hand: the longest lease, ten years).
    left: Duration,
}

impl Proposal {
    /// Until when the node surely holds the lock, for a request sent at `sent`: what
    /// it had left, less the drift allowance, counted from the send.
    fn held_until(self, sent: Instant) -> Instant {
        let left = self.left.clamp(Duration::from_millis(1), MAX_TTL);
        Ttl::new(left).map_or(sent, |left| left.valid_until(sent))
    }
}

impl QuorumStore {
    /// Connects to every master in `urls` (N odd, at least 3, all different) and
    /// checks that a majority answers. Nodes that are down are tried again on every
    /// request.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] for a bad URL, fewer than 3 nodes, an even number
    /// or the same node twice; a configuration error of any node (authentication,
    /// ACL, TLS, not Redis) as that node's error; [`Error::NoQuorum`] when fewer than
    /// a majority answer.
    ///
    /// ```no_run
    /// # async fn demo() -> latchkey::Result<()> {
    /// let store = latchkey::quorum::QuorumStore::open(&[
    ///     "redis://127.0.0.1:7001",
    ///     "redis://127.0.0.1:7002",
    ///     "redis://127.0.0.1:7003",
    /// ])
    /// .await?;
    /// # Ok(()) }
    /// ```
    pub async fn open(urls: &[impl AsRef<str>]) -> Result<Self> {
        let (nodes, tls) = parse(urls)?;
        let checks = nodes.iter().zip(tls).map(|(node, tls)| {
            let node = node.clone();
            async move { node.checked(tls).await }
        });
        let checked = futures_util::future::join_all(checks).await;
        let mut reports = Vec::new();
        for (node, check) in nodes.iter().zip(checked) {
            let answer = match check {
                Ok(_) => NodeAnswer::Granted,
                Err(error) if !error.is_transient() => return Err(error),
                Err(error) => NodeAnswer::Failed(Box::new(error)),
            };
            reports.push(NodeReport::new(node.node(), answer));
        }
        let up = reports
            .iter()
            .filter(|r| matches!(r.answer, NodeAnswer::Granted))
            .count();
        if up < majority(nodes.len()) {
            return Err(Error::NoQuorum {
                key: String::new(),
                needed: majority(nodes.len()),
                nodes: reports,
                late: None,
            });
        }
        for report in reports.iter().filter(|r| r.answer.outcome_unknown()) {
            tracing::warn!(%report, "a quorum node is down; locking with the others");
        }
        let up: Vec<&RedisStore> = nodes
            .iter()
            .zip(&reports)
            .filter(|(_, r)| matches!(r.answer, NodeAnswer::Granted))
            .map(|(node, _)| node)
            .collect();
        independent(&up).await?;
        Ok(Self::from_nodes(nodes))
    }

    fn from_nodes(nodes: Vec<RedisStore>) -> Self {
        let names = nodes
            .iter()
            .map(RedisStore::node)
            .collect::<Vec<_>>()
            .join(", ");
        QuorumStore {
            inner: Arc::new(Inner {
                nodes,
                names,
                node_deadline: None,
                attempts: Attempts::default(),
            }),
        }
    }

    /// The same store with a fixed per-node deadline instead of 5 % of each lease.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`] outside 1 ms to 1 s (the nodes' reply timeout).
    ///
    /// ```no_run
    /// # async fn demo(store: latchkey::quorum::QuorumStore) -> latchkey::Result<()> {
    /// let store = store.with_node_deadline(std::time::Duration::from_millis(50))?;
    /// # Ok(()) }
    /// ```
    pub fn with_node_deadline(self, deadline: Duration) -> Result<Self> {
        if deadline < Duration::from_millis(1) || deadline > MAX_DEADLINE {
            return Err(Error::InvalidArgument(format!(
                "a per-node deadline of {deadline:?}: it must be from 1ms to {MAX_DEADLINE:?}"
            )));
        }
        let inner = Inner {
            node_deadline: Some(deadline),
            ..Inner::clone(&self.inner)
        };
        Ok(QuorumStore {
            inner: Arc::new(inner),
        })
    }

    /// The masters, in the order they were given.
    ///
    /// ```no_run
    /// # fn demo(store: latchkey::quorum::QuorumStore) {
    /// for node in store.nodes() {
    ///     println!("{}", node.node());
    /// }
    /// # }
    /// ```
    pub fn nodes(&self) -> &[RedisStore] {
        &self.inner.nodes
    }

    /// How long one node may take to answer a request about a lease of `ttl`.
    ///
    /// ```no_run
    /// # fn demo(store: latchkey::quorum::QuorumStore) {
    /// println!("{:?}", store.node_deadline(latchkey::Ttl::DEFAULT)); // 1s: 5 % of 30 s, capped
    /// # }
    /// ```
    pub fn node_deadline(&self, ttl: Ttl) -> Duration {
        self.inner.node_deadline.unwrap_or_else(|| {
            (ttl.as_duration() / DEADLINE_SHARE).clamp(MIN_DEADLINE, MAX_DEADLINE)
        })
    }

    pub(crate) fn majority(&self) -> usize {
        majority(self.inner.nodes.len())
    }

    /// Asks every node in `asked`; settled once `yes` answers (by `is_yes`) reach
    /// `needed`, or the others make that impossible.
    async fn ask<'a, T, Fut>(
        &'a self,
        asked: &[usize],
        deadline: Duration,
        needed: usize,
        call: impl Fn(&'a RedisStore) -> Fut,
        is_yes: impl Fn(&T) -> bool,
    ) -> Answers<T>
    where
        Fut: std::future::Future<Output = Result<T>>,
    {
        let settled = round::until_decided(asked.len(), needed, is_yes);
        round::ask(&self.inner.nodes, asked, deadline, call, settled).await
    }

    /// Releases `value` on the nodes `asked`, each within `deadline`, until
    /// `settled` says the answers are enough. The requests to the nodes not waited
    /// for are sent all the same (in the round's task, [`round::ask_detached`]),
    /// and a stopped node runs its own when it wakes.
    async fn release_on(
        &self,
        key: &LockKey,
        hold: &Hold,
        asked: &[usize],
        settled: impl FnMut(&Answers<bool>) -> bool,
    ) -> Answers<bool> {
        let deadline = self.node_deadline(hold.ttl);
        let call = Arc::new(release_call(key, &hold.value, hold.ttl));
        round::ask_detached(
            &self.inner.nodes,
            asked,
            deadline,
            |node| {
                let (call, key) = (call.clone(), key.clone());
                async move { node.run(&call, &key).await }
            },
            settled,
        )
        .await
    }

    /// Undoes a failed attempt on every node that may hold it (all but those that
    /// answered busy), and forgets it.
    async fn undo(&self, key: &LockKey, owner: &OwnerToken, hold: &Hold, busy: &[usize]) {
        let asked: Vec<usize> = (0..self.inner.nodes.len())
            .filter(|node| !busy.contains(node))
            .collect();
        // Nothing waits on the outcome: a majority of `asked` (all, if fewer) is
        // enough to go on with.
        let enough = asked.len().min(self.majority());
        let answers = self
            .release_on(key, hold, &asked, |answers| {
                round::count(answers, |_| true) >= enough
            })
            .await;
        if round::count(&answers, |_| true) < asked.len() {
            tracing::debug!(key = %key, "a failed quorum attempt was not undone on every node; it expires with its lease there");
        }
        self.inner.attempts.forget(key, owner);
    }

    /// Reads from every node (each within the reply timeout) what `call` returns;
    /// the answers, or [`Error::NoQuorum`] about `what` if fewer than a majority
    /// answered.
    async fn read<'a, T, Fut>(
        &'a self,
        what: &str,
        call: impl Fn(&'a RedisStore) -> Fut,
    ) -> Result<Vec<T>>
    where
        Fut: std::future::Future<Output = Result<T>>,
    {
        let all = round::all(&self.inner.nodes);
        let answers = round::ask(&self.inner.nodes, &all, MAX_DEADLINE, call, |_| false).await;
        if round::count(&answers, |_| true) < self.majority() {
            let reports = self.reports(answers, |_| NodeAnswer::Granted);
            return Err(Error::NoQuorum {
                key: what.to_owned(),
                needed: self.majority(),
                nodes: reports,
                late: None,
            });
        }
        Ok(answers.into_iter().flatten().flatten().collect())
    }

    fn no_quorum(&self, key: &LockKey, reports: Vec<NodeReport>, late: Option<Duration>) -> Error {
        Error::NoQuorum {
            key: key.to_string(),
            needed: self.majority(),
            nodes: reports,
            late,
        }
    }

    /// Each node's answer for an error, by `describe` for the ones that answered.
    fn reports<T>(
        &self,
        answers: Answers<T>,
        describe: impl Fn(T) -> NodeAnswer,
    ) -> Vec<NodeReport> {
        self.inner
            .nodes
            .iter()
            .zip(answers)
            .map(|(node, answer)| {
                let answer = match answer {
                    None => NodeAnswer::Unanswered,
                    Some(Ok(value)) => describe(value),
                    Some(Err(error)) => NodeAnswer::Failed(Box::new(error)),
                };
                NodeReport::new(node.node(), answer)
            })
            .collect()
    }

    /// Raises the counters of the nodes in `plan` that proposed less than the fence,
    /// until a majority carries it; false if that majority was not reached.
    async fn write_back(
        &self,
        key: &LockKey,
        hold: &Hold,
        plan: &FencePlan,
    ) -> (bool, Answers<bool>) {
        let needed = plan.still_needed(self.inner.nodes.len());
        if needed == 0 {
            return (true, Vec::new());
        }
        let deadline = self.node_deadline(hold.ttl);
        let call = raise_call(key, hold, plan.fence);
        let answers = self
            .ask(
                &plan.raise,
                deadline,
                needed,
                |node| node.run::<bool>(&call, key),
                |held| *held,
            )
            .await;
        let confirmed = round::count(&answers, |held| *held);
        (confirmed >= needed, answers)
    }

    /// The first round of a token on demand: the proposals of the nodes that hold
    /// the lock for `hold` (asked at `sent`), at least a majority of them; `None`
    /// when a majority says it is no longer the caller's. Settled once a majority
    /// proposed and surely holds the lock for longer than the write-back can take;
    /// until then every node is heard (within its deadline), so that a lagging
    /// node's short lease among the first answers does not decide.
    async fn proposals(
        &self,
        key: &LockKey,
        hold: &Hold,
        sent: Instant,
    ) -> Result<Option<Vec<(usize, Proposal)>>> {
        let (nodes, majority) = (self.inner.nodes.len(), self.majority());
        let deadline = self.node_deadline(hold.ttl);
        let settled = |answers: &Answers<Option<Proposal>>| {
            let proposals = proposals_in(answers);
            let answered = answers.iter().flatten().count();
            match tally::settled(nodes, majority, proposals.len(), answered - proposals.len()) {
                None => false,
                Some(false) => true,
                Some(true) if answered == nodes => true,
                Some(true) => held_until(&proposals, majority, sent) > Instant::now() + deadline,
            }
        };
        let all = round::all(&self.inner.nodes);
        let call = propose_call(key, hold);
        let ask = |node| propose(node, &call, key);
        let answers = round::ask(&self.inner.nodes, &all, deadline, ask, settled).await;
        let proposals = proposals_in(&answers);
        if proposals.len() >= majority {
            return Ok(Some(proposals));
        }
        if round::count(&answers, Option::is_none) > nodes - majority {
            return Ok(None);
        }
        let reports = self.reports(answers, |p| describe_held(p.is_some()));
        Err(self.no_quorum(key, reports, None))
    }

    /// After an extend that a majority renewed, takes the lock back on the nodes that
    /// answered free (restarted empty, or their copy ran out), so restarts do not
    /// wear the majority down over a long hold; only while the renewal makes the
    /// lock surely ours (`valid_until`). A node where the value was released since
    /// refuses (`ended.lua`). What this round takes back does not count towards the
    /// extend: it adds to the hold, it does not prove it.
    async fn take_back(
        &self,
        key: &LockKey,
        hold: &Hold,
        ttl: Ttl,
        answers: &Answers<i64>,
        valid_until: Instant,
    ) {
        let free: Vec<usize> = (0..answers.len())
            .filter(|&i| matches!(answers[i], Some(Ok(r)) if r == Extended::Free as i64))
            .collect();
        if free.is_empty() || Instant::now() >= valid_until {
            return;
        }
        let deadline = self.node_deadline(ttl);
        let call = extend_call(key, hold, ttl, Extend::TakingBack);
        let taken = self
            .ask(
                &free,
                deadline,
                free.len(),
                |node| node.run::<i64>(&call, key),
                |reply| *reply == Extended::TakenBack as i64,
            )
            .await;
        let count = round::count(&taken, |r| *r == Extended::TakenBack as i64);
        tracing::debug!(key = %key, count, "quorum nodes taken back");
    }

    /// The refusal of a take that did not reach a majority: busy when others hold
    /// enough nodes, an error naming every node when failures alone decided it.
    fn refused(&self, key: &LockKey, granted: usize, answers: Answers<Taken>) -> Result<Attempt> {
        let nodes = self.inner.nodes.len();
        let failed = answers.iter().filter(|a| matches!(a, Some(Err(_)))).count();
        let mut busy: Vec<(Option<Duration>, String)> = answers
            .iter()
            .filter_map(|a| match a {
                Some(Ok(Taken::Busy { pttl, holder })) => Some((*pttl, holder.clone())),
                _ => None,
            })
            .collect();
        if failed > nodes - self.majority() || busy.is_empty() {
            let reports = self.reports(answers, describe_take);
            return Err(self.no_quorum(key, reports, None));
        }
        // The lock comes free for us when enough of its holders' copies end: the
        // k-th shortest, for the k more nodes a majority needs.
        busy.sort_by_key(|(pttl, _)| pttl.unwrap_or(Duration::MAX));
        let more = self.majority().saturating_sub(granted).clamp(1, busy.len());
        let (pttl, _) = busy[more - 1].clone();
        let holder = most_common(busy.into_iter().map(|(_, holder)| holder)).map(|(h, _)| h);
        Ok(Attempt::busy(pttl, holder))
    }
}

impl std::fmt::Debug for QuorumStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuorumStore")
            .field("nodes", &self.inner.names)
            .finish()
    }
}

impl LockStore for QuorumStore {
    fn node(&self) -> &str {
        &self.inner.names
    }

    fn deployment(&self) -> &'static str {
        "quorum"
    }

    async fn try_acquire(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        request: AcquireRequest,
    ) -> Result<Attempt> {
        if request.fair {
            return Err(Error::InvalidArgument(FAIR_REFUSED.to_owned()));
        }
        let sent = Instant::now();
        let hold = self.inner.attempts.start(key, owner, request.ttl);
        let deadline = self.node_deadline(request.ttl);
        let all = round::all(&self.inner.nodes);
        let ttl = request.ttl;
        let majority = self.majority();
        // Each take runs to its end on its node even after the round settled: one
        // cut short there (between a NOSCRIPT and the script's load, or before the
        // connection wrote it) leaves the lock on a bare majority, and one restart
        // later the holder has lost it. A take landing after this attempt's undo or
        // release sets nothing (`ended.lua`).
        let propose = request.fenced;
        let call = Arc::new(take_call(key, &hold.value, ttl, propose));
        let answers = round::ask_detached(
            &self.inner.nodes,
            &all,
            deadline,
            |node| {
                let (call, key) = (call.clone(), key.clone());
                async move { take(&node, &call, &key).await }
            },
            round::until_decided(all.len(), majority, |t| matches!(t, Taken::Granted(_))),
        )
        .await;
        let proposals: Vec<(usize, u64)> = answers
            .iter()
            .enumerate()
            .filter_map(|(i, a)| match a {
                Some(Ok(Taken::Granted(proposal))) => Some((i, *proposal)),
                _ => None,
            })
            .collect();
        // Nodes that refused never held this attempt's value: nothing to undo there.
        let busy: Vec<usize> = (0..answers.len())
            .filter(|&i| matches!(answers[i], Some(Ok(Taken::Busy { .. }))))
            .collect();
        if proposals.len() < self.majority() {
            let refusal = self.refused(key, proposals.len(), answers);
            self.undo(key, owner, &hold, &busy).await;
            return refusal;
        }
        // Fencing on demand: the token is made when first asked for (`fence`).
        let plan = propose.then(|| FencePlan::new(&proposals));
        let (carried, raised) = match &plan {
            Some(plan) => self.write_back(key, &hold, plan).await,
            None => (true, Vec::new()),
        };
        let failure = match carried {
            false => Some(self.no_quorum(key, self.reports(raised, describe_held), None)),
            // Granted too late: what is left of the lease cannot be trusted.
            true if ttl.valid_until(sent) <= Instant::now() => {
                let late = Some(sent.elapsed());
                Some(self.no_quorum(key, self.reports(answers, describe_take), late))
            }
            true => None,
        };
        if let Some(failure) = failure {
            self.undo(key, owner, &hold, &busy).await;
            return Err(failure);
        }
        let valid_until = ttl.valid_until(sent);
        let fence = plan.map(|plan| plan.fence);
        self.inner
            .attempts
            .granted(key, owner, fence.unwrap_or(0), valid_until);
        Ok(match fence {
            Some(fence) => Attempt::acquired(fence, 0),
            None => Attempt::unfenced(0),
        })
    }

    async fn release(
        &self,
        key: &LockKey,
        owner: &OwnerToken,
        _leaving: Option<Ttl>,
    ) -> Result<bool> {
        let hold = self.inner.attempts.latest(key, owner);
        let all = round::all(&self.inner.nodes);
        let majority = self.majority();
        // Waits until the nodes yet to answer cannot change the outcome: a node
        // that never held the lock answering first must not make an operator's
        // release of a lock held on the other two look like it found nothing.
        let answers = self
            .release_on(
                key,
                &hold,
                &all,
                round::until_decided(all.len(), majority, |r| *r),
            )
            .await;
        let released = round::count(&answers, |released| *released);
        let answered = round::count(&answers, |_| true);
        if released >= self.majority() {
            self.inner.attempts.forget(key, owner);
            return Ok(true);
        }
        if answered < self.majority() {
            // Too few answers to say anything: the caller retries.
            let reports = self.reports(answers, describe_held);
            return Err(self.no_quorum(key, reports, None));
        }
        self.inner.attempts.forget(key, owner);
        // While the lease lasts, it was ours unless a majority says otherwise: a node
        // that did not answer may still hold its copy (it expires with the lease).
        let valid = hold.valid_until.is_some_and(|until| Instant::now() < until);
        let unknown = if valid {
            self.inner.nodes.len() - answered
        } else {
            0
        };
        Ok(released + unknown >= self.majority())
    }

    async fn extend(&self, key: &LockKey, owner: &OwnerToken, ttl: Ttl) -> Result<bool> {
        let sent = Instant::now();
        // Released already (a renewal racing the release), or never ours here.
        let Some(hold) = self.inner.attempts.get(key, owner) else {
            return Ok(false);
        };
        let deadline = self.node_deadline(ttl);
        let all = round::all(&self.inner.nodes);
        // Every node is heard (each within its deadline), not just a majority: the
        // free ones are taken back next, and a renewal runs in the background, so
        // waiting for the slowest costs no caller anything.
        let call = extend_call(key, &hold, ttl, Extend::WhereHeld);
        let answers = round::ask(
            &self.inner.nodes,
            &all,
            deadline,
            |node| node.run::<i64>(&call, key),
            |_| false,
        )
        .await;
        let renewed = round::count(&answers, |r| *r == Extended::Renewed as i64);
        if renewed >= self.majority() {
            let valid_until = ttl.valid_until(sent);
            self.inner.attempts.renewed(key, owner, valid_until);
            self.take_back(key, &hold, ttl, &answers, valid_until).await;
            // Renewed on a majority, but only within the new validity does it count.
            return Ok(valid_until > Instant::now());
        }
        let unknown = self.inner.nodes.len() - round::count(&answers, |_| true);
        if renewed + unknown < self.majority() {
            return Ok(false);
        }
        let reports = self.reports(answers, |reply| match reply {
            1 => NodeAnswer::Granted,
            _ => NodeAnswer::NotHeld,
        });
        Err(self.no_quorum(key, reports, None))
    }

    async fn owner(&self, key: &LockKey) -> Result<Option<String>> {
        let holders = self.read(key.as_str(), |node| node.owner(key)).await?;
        // The owner token, as the guard knows it (each attempt writes `N/` before it).
        let holder = majority_holder(holders.into_iter().flatten(), self.majority());
        Ok(holder.map(|value| owner_of(&value).to_owned()))
    }

    /// The token of a lock granted without one, in the two rounds a fenced grant
    /// takes (see docs/quorum-fencing.md): every node that still holds the lock for
    /// the caller proposes, and the largest proposal of those that hold it as long
    /// as a majority does is written back to a majority.
    /// It is handed out only while a majority of the nodes that carry it surely
    /// still hold the lock (by the leases they reported, counted from when the
    /// proposals were sent): then no later holder can have been granted on them
    /// yet. `None` when a majority says the lock is no longer the caller's, or that
    /// time ran out; [`Error::NoQuorum`] when too few answered to tell.
    async fn fence(&self, key: &LockKey, owner: &OwnerToken) -> Result<Option<u64>> {
        let Some(hold) = self.inner.attempts.get(key, owner) else {
            return Ok(None);
        };
        let sent = Instant::now();
        let majority = self.majority();
        let Some(proposals) = self.proposals(key, &hold, sent).await? else {
            return Ok(None);
        };
        // Past `cut`, fewer than a majority may still hold the lock for us: it can
        // no longer be shown ours. (Checked before the write-back too, which would
        // only find the lock gone.) Only nodes that hold it at least that long carry
        // the token: a lagging node's short lease must not be what the hand-out
        // waits on.
        let gone = |until: Instant| until <= Instant::now();
        let cut = held_until(&proposals, majority, sent);
        if gone(cut) {
            return Ok(None);
        }
        let lasting: Vec<(usize, Proposal)> = proposals
            .into_iter()
            .filter(|&(_, p)| p.held_until(sent) >= cut)
            .collect();
        let tokens: Vec<(usize, u64)> = lasting.iter().map(|&(i, p)| (i, p.token)).collect();
        let plan = FencePlan::new(&tokens);
        let (carried, raised) = self.write_back(key, &hold, &plan).await;
        if !carried {
            if gone(cut) {
                return Ok(None);
            }
            return Err(self.no_quorum(key, self.reports(raised, describe_held), None));
        }
        // The nodes that carry the token: they proposed it, or confirmed its raise.
        let confirmed = |node: usize| matches!(raised.get(node), Some(Some(Ok(true))));
        let carriers: Vec<(usize, Proposal)> = lasting
            .into_iter()
            .filter(|&(node, p)| p.token == plan.fence || confirmed(node))
            .collect();
        if gone(held_until(&carriers, majority, sent)) {
            return Ok(None);
        }
        self.inner.attempts.fenced(key, owner, plan.fence);
        Ok(Some(plan.fence))
    }
}

/// A quorum never passes a lock in-process: the next task takes it on the nodes.
impl Pass for QuorumStore {}

/// Waiters listen on every master: a release is sent to all of them, so hearing
/// any one is enough. A watch is ready once a majority confirmed its subscription;
/// a master that is down or stopped is not waited for (its watch is dropped).
impl WakeUps for QuorumStore {
    async fn watch(&self, key: &LockKey, owner: &OwnerToken) -> Result<Watch> {
        let mut pending: FuturesUnordered<_> = self
            .inner
            .nodes
            .iter()
            .map(|node| node.watch(key, owner))
            .collect();
        let mut watches = Vec::new();
        while let Some(watch) = pending.next().await {
            watches.push(watch?);
            if watches.iter().filter(|w| w.is_live()).count() >= self.majority() {
                break;
            }
        }
        Ok(Watch::any(watches))
    }

    fn join_watch(&self, key: &LockKey, owner: &OwnerToken) -> Option<Watch> {
        let watches: Vec<Watch> = self
            .inner
            .nodes
            .iter()
            .filter_map(|node| node.join_watch(key, owner))
            .collect();
        (watches.len() >= self.majority()).then(|| Watch::any(watches))
    }
}

impl Inspect for QuorumStore {
    async fn inspect(&self, key: &LockKey) -> Result<LockStatus> {
        let seen = self.read(key.as_str(), |node| node.inspect(key)).await?;
        let holder = majority_holder(
            seen.iter().filter_map(|s| s.holder.clone()),
            self.majority(),
        );
        // Held for as long as a majority of the holder's copies last.
        let mut left: Vec<Duration> = seen
            .iter()
            .filter(|s| s.holder.is_some() && s.holder == holder)
            .map(|s| s.ttl.unwrap_or(Duration::MAX))
            .collect();
        left.sort_unstable_by(|a, b| b.cmp(a));
        let ttl = holder
            .as_ref()
            .and_then(|_| left.get(self.majority() - 1).copied())
            .filter(|left| *left != Duration::MAX);
        let fence = seen.iter().filter_map(|s| s.fence).max();
        Ok(LockStatus::new(holder, ttl, fence, 0))
    }

    async fn scan(&self, pattern: &str) -> Result<Vec<String>> {
        let found = self.read(pattern, |node| node.scan(pattern)).await?;
        let mut keys: Vec<String> = found.into_iter().flatten().collect();
        keys.sort();
        keys.dedup();
        Ok(keys)
    }
}

/// Checks that the masters that answer are independent masters: no replica (its
/// writes are refused, or it copies another master of the quorum), and no server
/// given twice under two names (`127.0.0.1` and `localhost`), by run id. A server
/// that does not let us ask (`INFO` denied) is taken at its word.
async fn independent(nodes: &[&RedisStore]) -> Result<()> {
    let about = futures_util::future::join_all(nodes.iter().map(|node| node.about())).await;
    let mut seen: Vec<(&str, &str)> = Vec::new();
    for (node, about) in nodes.iter().zip(&about) {
        let Some(about) = about else { continue };
        if about.replica {
            return Err(Error::InvalidArgument(format!(
                "{} is a replica: each node of a quorum must be an independent master",
                node.node()
            )));
        }
        let Some(run_id) = about.run_id.as_deref() else {
            continue;
        };
        if let Some((other, _)) = seen.iter().find(|(_, id)| *id == run_id) {
            return Err(Error::InvalidArgument(format!(
                "{other} and {} are the same server (run id {run_id}): each node of a quorum must be a different master",
                node.node()
            )));
        }
        seen.push((node.node(), run_id));
    }
    Ok(())
}

/// The nodes for `urls`, and whether each asked for TLS; checked for count and
/// duplicates before anything is sent.
fn parse(urls: &[impl AsRef<str>]) -> Result<(Vec<RedisStore>, Vec<bool>)> {
    let count = urls.len();
    if count < 3 || count % 2 == 0 {
        return Err(Error::InvalidArgument(format!(
            "a quorum of {count} node(s): it needs an odd number, at least 3 (an even one \
             tolerates no more failures than one node fewer); for one Redis server, give one URL"
        )));
    }
    let mut nodes = Vec::with_capacity(count);
    let mut tls = Vec::with_capacity(count);
    for url in urls {
        let client =
            redis::Client::open(url.as_ref()).map_err(|e| crate::store::invalid_url(&e))?;
        let info = client.get_connection_info();
        let name = format!("{}/{}", info.addr(), info.redis_settings().db());
        tls.push(crate::store::any_tls([info]));
        let node = info.addr().to_string();
        if nodes.iter().any(|n: &(String, RedisStore)| n.0 == name) {
            return Err(Error::InvalidArgument(format!(
                "{node} is given twice: each node of a quorum must be a different master"
            )));
        }
        nodes.push((name, RedisStore::server(client, node)));
    }
    Ok((nodes.into_iter().map(|(_, node)| node).collect(), tls))
}

/// A take of `key` for `value`, built once for every node: each node's request only
/// sends it (building it per node cost the client ten allocations a node).
fn take_call(key: &LockKey, value: &OwnerToken, ttl: Ttl, propose: bool) -> ScriptCall<'static> {
    let mut call = ScriptCall::new(
        &scripts::QUORUM_TAKE,
        &[key.as_str(), key.fence(), &key.companion(ENDED)],
    );
    call.arg(value.as_str())
        .arg(ttl.as_millis())
        .arg(CLOCK_STEP_US)
        .arg(memory(ttl))
        .arg(if propose { "1" } else { "0" });
    call
}

async fn take(node: &RedisStore, call: &ScriptCall<'_>, key: &LockKey) -> Result<Taken> {
    let (taken, value, holder): (i64, i64, Option<String>) = node.run(call, key).await?;
    if taken == 1 {
        return Ok(Taken::Granted(u64::try_from(value).unwrap_or(0)));
    }
    Ok(Taken::Busy {
        pttl: u64::try_from(value).ok().map(Duration::from_millis),
        holder: holder.unwrap_or_default(),
    })
}

/// The proposals among `answers`, by node index.
fn proposals_in(answers: &Answers<Option<Proposal>>) -> Vec<(usize, Proposal)> {
    (0..answers.len())
        .filter_map(|i| match answers[i] {
            Some(Ok(Some(proposal))) => Some((i, proposal)),
            _ => None,
        })
        .collect()
}

/// Until when at least `needed` of the nodes that made `proposals` surely hold the
/// lock, by the leases they reported to requests sent at `sent`: the `needed`-th
/// latest of their ends; `sent` when fewer than `needed` proposed.
fn held_until(proposals: &[(usize, Proposal)], needed: usize, sent: Instant) -> Instant {
    let mut ends: Vec<Instant> = proposals.iter().map(|(_, p)| p.held_until(sent)).collect();
    ends.sort_unstable_by(|a, b| b.cmp(a));
    ends.get(needed.saturating_sub(1)).copied().unwrap_or(sent)
}

/// A proposal request for `hold`, built once for every node (as [`take_call`]).
fn propose_call(key: &LockKey, hold: &Hold) -> ScriptCall<'static> {
    let mut call = ScriptCall::new(&scripts::QUORUM_PROPOSE, &[key.as_str(), key.fence()]);
    call.arg(hold.value.as_str())
        .arg(CLOCK_STEP_US)
        .arg(memory(hold.ttl));
    call
}

/// A node's proposal for a token on demand (`scripts/quorum/propose.lua`): the
/// proposal, and how long the node said it still holds the lock for the caller;
/// `None` when it does not hold it for the caller.
async fn propose(
    node: &RedisStore,
    call: &ScriptCall<'_>,
    key: &LockKey,
) -> Result<Option<Proposal>> {
    let (ours, proposal, pttl): (i64, u64, i64) = node.run(call, key).await?;
    Ok((ours == 1).then(|| Proposal {
        token: proposal,
        // PTTL -1: made endless by hand.
        left: u64::try_from(pttl).map_or(MAX_TTL, Duration::from_millis),
    }))
}

/// A write-back of `fence` for `hold`, built once for every node (as [`take_call`]).
fn raise_call(key: &LockKey, hold: &Hold, fence: u64) -> ScriptCall<'static> {
    let mut call = ScriptCall::new(&scripts::QUORUM_FENCE, &[key.as_str(), key.fence()]);
    call.arg(hold.value.as_str())
        .arg(fence)
        .arg(memory(hold.ttl));
    call
}

/// What an extend asks of a node (see `scripts/quorum/extend.lua`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Extend {
    /// Renew where the lock is still ours; say whether the node is free.
    WhereHeld,
    /// Take a free node back (a majority renewed the lock just now).
    TakingBack,
}

/// A node's reply to an extend (0: someone else's here, or released here).
#[derive(Clone, Copy)]
enum Extended {
    Renewed = 1,
    TakenBack = 2,
    /// Free, and not released here: may be taken back.
    Free = 3,
}

/// An extend of `hold`, built once for every node (as [`take_call`]).
fn extend_call(key: &LockKey, hold: &Hold, ttl: Ttl, how: Extend) -> ScriptCall<'static> {
    let mut call = ScriptCall::new(
        &scripts::QUORUM_EXTEND,
        &[key.as_str(), key.fence(), &key.companion(ENDED)],
    );
    call.arg(hold.value.as_str())
        .arg(ttl.as_millis())
        .arg(hold.fence)
        .arg(memory(ttl))
        .arg(if how == Extend::TakingBack { "1" } else { "0" });
    call
}

/// A release of `value`, built once for every node (as [`take_call`]).
fn release_call(key: &LockKey, value: &OwnerToken, ttl: Ttl) -> ScriptCall<'static> {
    let mut call = ScriptCall::new(
        &scripts::QUORUM_RELEASE,
        &[key.as_str(), key.channel(), &key.companion(ENDED)],
    );
    call.arg(value.as_str()).arg(ttl.as_millis());
    call
}

/// How long a counter is kept: [`FENCE_MEMORY`], or the lease if that is longer.
fn memory(ttl: Ttl) -> u64 {
    ttl.as_millis().max(FENCE_MEMORY.as_millis() as u64)
}

fn describe_take(taken: Taken) -> NodeAnswer {
    match taken {
        Taken::Granted(_) => NodeAnswer::Granted,
        Taken::Busy { pttl, holder } => NodeAnswer::Busy {
            holder: Some(mask_owner(&holder)),
            left: pttl,
        },
    }
}

fn describe_held(held: bool) -> NodeAnswer {
    match held {
        true => NodeAnswer::Granted,
        false => NodeAnswer::NotHeld,
    }
}

/// The value at least `needed` of `holders` agree on.
fn majority_holder(holders: impl Iterator<Item = String>, needed: usize) -> Option<String> {
    let (holder, count) = most_common(holders)?;
    (count >= needed).then_some(holder)
}

/// The most frequent of `holders`, and how often it came.
fn most_common(holders: impl Iterator<Item = String>) -> Option<(String, usize)> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for holder in holders {
        match counts.iter_mut().find(|(h, _)| *h == holder) {
            Some((_, count)) => *count += 1,
            None => counts.push((holder, 1)),
        }
    }
    counts.into_iter().max_by_key(|(_, count)| *count)
}
