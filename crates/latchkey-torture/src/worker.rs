//! A worker process: T tasks contend for a few locks, do a fenced write to the
//! resource in each critical section, and log every attempt and acquisition.

use std::io::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use latchkey::store::{Pass, RedisStore, WakeUps};
use latchkey::{Client, Fairness, Fencing, Lease, LockKey, MultiLock, Mutex, MutexGuard, Ttl};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use redis::aio::MultiplexedConnection;

use crate::attempt::{
    Acquire, Attempted, Candidate, Hold, Permits, RwSide, Side, attempt, release_aborted,
    release_to_aborted_waiter,
};
use crate::ratelimits::Rate;
use crate::record::{
    Call, HoldEnd, Holder, LatchCall, LatchCallKind, Mode, Observed, Outcome, Record, now_us,
    wall_us,
};
use crate::{WorkerArgs, Workload};

/// Share of acquisitions that take a fixed lease and then outlive it, as a process
/// stalled by a long GC pause would.
const OUTLIVE_SHARE: f64 = 0.1;
/// Share of acquisitions with a long renewed lease (the library's default is 30 s):
/// a lock such a holder leaves behind, or a release of it tried only once, would
/// stay for nobody for [`LONG_TTL`], which the checker's bounds do not allow.
const LONG_SHARE: f64 = 0.05;
pub const LONG_TTL: Duration = Duration::from_secs(10);
/// Share of short-lease sections that end about when the watchdog renews (a third
/// of the lease): the release races a renewal, which must never recreate the lock.
const RENEWAL_DUE_SHARE: f64 = 0.15;
/// Share of short-lease sections held through several renewals.
const RENEWED_SHARE: f64 = 0.05;
/// Share of locks that compute the fencing token with every grant
/// (`Fencing::OnGrant`); the others compute it when the holder asks.
const ON_GRANT_SHARE: f64 = 0.25;
/// Share of lock acquisitions in fair (strict FIFO) mode, beside plain ones on the
/// same locks: the fair first try, the fair head of the line and the handovers to
/// it (never on a quorum, which refuses fair locks, nor in a multi-lock).
const FAIR_SHARE: f64 = 0.25;
/// Share of sections that ask for the fencing token as soon as they hold the lock;
/// a fenced section asks just before its write (after its hold, maybe after a
/// pause that outlived the lease), the rest never ask.
const EARLY_FENCE_SHARE: f64 = 0.5;
/// Share of lock acquisitions through a `Mutex` handle with a local line of its own.
const OWN_LINE_SHARE: f64 = 0.3;
/// How long a queued waiter that stopped renewing keeps its place, set explicitly
/// so the checker's bounds do not move with the library's default.
pub const WAITER_LEASE: Duration = Duration::from_secs(1);

static FENCED_WRITE: std::sync::LazyLock<redis::Script> =
    std::sync::LazyLock::new(|| redis::Script::new(include_str!("fenced_write.lua")));

/// What every task of a worker shares.
#[derive(Clone)]
struct Shared<S> {
    client: Client<S>,
    resource: MultiplexedConnection,
    log: Arc<StdMutex<std::fs::File>>,
    stopping: Arc<AtomicBool>,
    args: WorkerArgs,
}

/// The permits of the semaphore of lock index `lock` in the semaphore workload:
/// one of each kind (a few, one, many) with the default three.
pub fn permits(lock: usize) -> u64 {
    [3, 1, 8][lock % 3]
}

/// The weight of a read-write lock's writer in the checker's terms: the lock's
/// whole capacity, so a writer is alone and any number of readers (weight 1) share.
pub const WRITER: u64 = 1 << 20;
/// Share of read-write lock acquisitions that write.
const WRITE_SHARE: f64 = 0.3;
/// Share of those writes downgraded to a read as soon as they are granted.
const DOWNGRADE_SHARE: f64 = 0.3;

/// How long a grant or renewal waits for the replica with `--wait-replicas`.
const WAIT_REPLICAS_TIMEOUT: Duration = Duration::from_millis(100);

/// What a task asks for on lock index `lock`, and the weight it takes.
type Target<S, A> = fn(&Shared<S>, usize, Held, &mut StdRng) -> Option<(A, u64)>;

pub async fn run(args: WorkerArgs) {
    let url = args.lock_url.clone();
    if let Some(masters) = url.strip_prefix("quorum:") {
        let masters: Vec<&str> = masters.split(',').collect();
        let client = connect(|| Client::open_quorum(&masters)).await;
        return run_with(client, args, lock).await;
    }
    let mut client = connect(|| open(&url)).await;
    if args.wait_replicas {
        client = match client.with_wait_replicas(1, WAIT_REPLICAS_TIMEOUT) {
            Ok(client) => client,
            Err(error) => {
                eprintln!("latchkey-torture worker: --wait-replicas: {error}");
                std::process::exit(64);
            }
        };
    }
    match args.workload {
        Workload::Mutex => run_with(client, args, fair_or_plain).await,
        Workload::Semaphore => run_with(client, args, permits_of).await,
        Workload::RwLock => run_with(client, args, side_of).await,
        Workload::RateLimit => run_tasks(client, args, call_loop).await,
        Workload::Transaction => run_tasks(client, args, tx_loop).await,
        Workload::Election => run_tasks(client, args, election_task).await,
        Workload::MultiLock => run_tasks(client, args, multi_loop).await,
        Workload::Latch => run_tasks(client, args, latch_loop).await,
    }
}

/// A client of the one Redis deployment a `--lock-url` names: `cluster:SEED,SEED…`,
/// `sentinel:MASTER@URL,URL…` or one server's URL (not a quorum).
pub async fn open(url: &str) -> latchkey::Result<Client<RedisStore>> {
    if let Some(seeds) = url.strip_prefix("cluster:") {
        return Client::open_cluster(&seeds.split(',').collect::<Vec<_>>()).await;
    }
    if let Some((master, sentinels)) = url
        .strip_prefix("sentinel:")
        .and_then(|s| s.split_once('@'))
    {
        return Client::open_sentinel(master, &sentinels.split(',').collect::<Vec<_>>()).await;
    }
    Client::open(url).await
}

/// The lock `torture:{l}`, as `held` wants it.
fn lock<S: Pass + WakeUps>(
    shared: &Shared<S>,
    l: usize,
    held: Held,
    rng: &mut StdRng,
) -> Option<(Mutex<S>, u64)> {
    let fencing = match rng.random_bool(ON_GRANT_SHARE) {
        true => Fencing::OnGrant,
        false => Fencing::OnDemand,
    };
    let mutex = mutex(shared, l, held, rng)?.with_fencing(fencing);
    Some((mutex, 1))
}

/// The lock `torture:{l}` as [`lock`] makes it, fair a [`FAIR_SHARE`] of the time:
/// the lock workload's, on one deployment (a quorum refuses fair locks; multi-locks
/// take [`lock`]'s plain ones).
fn fair_or_plain<S: Pass + WakeUps>(
    shared: &Shared<S>,
    l: usize,
    held: Held,
    rng: &mut StdRng,
) -> Option<(Mutex<S>, u64)> {
    let (mutex, weight) = lock(shared, l, held, rng)?;
    let fairness = match rng.random_bool(FAIR_SHARE) {
        true => Fairness::Fair,
        false => Fairness::Plain,
    };
    Some((mutex.with_fairness(fairness), weight))
}

/// Permits of the semaphore `torture:{l}`: mostly one or two, sometimes all.
fn permits_of(
    shared: &Shared<RedisStore>,
    l: usize,
    held: Held,
    rng: &mut StdRng,
) -> Option<(Permits, u64)> {
    let permits = permits(l);
    let weight = match rng.random_bool(0.1) {
        true => permits,
        false => rng.random_range(1..=permits.min(2)),
    };
    let semaphore = shared
        .client
        .semaphore(&format!("torture:{l}"), permits)
        .ok()?
        .with_lease(lease(shared, held, l)?)
        .with_waiter_lease(Ttl::new(WAITER_LEASE).ok()?);
    Some((Permits { semaphore, weight }, weight))
}

/// A read or a write of the read-write lock `torture:{l}`.
fn side_of(
    shared: &Shared<RedisStore>,
    l: usize,
    held: Held,
    rng: &mut StdRng,
) -> Option<(RwSide, u64)> {
    let side = match rng.random_bool(WRITE_SHARE) {
        false => Side::Read,
        true if rng.random_bool(DOWNGRADE_SHARE) => Side::Downgrade,
        true => Side::Write,
    };
    let lock = shared
        .client
        .rw_lock(&format!("torture:{l}"))
        .ok()?
        .with_lease(lease(shared, held, l)?)
        .with_waiter_lease(Ttl::new(WAITER_LEASE).ok()?);
    let weight = if side == Side::Write { WRITER } else { 1 };
    Some((RwSide { lock, side }, weight))
}

/// A candidate in the election `torture:{l}`, campaigning as its worker (`w<slot>`).
fn candidate_of(
    shared: &Shared<RedisStore>,
    l: usize,
    held: Held,
    _rng: &mut StdRng,
) -> Option<(Candidate, u64)> {
    let election = shared
        .client
        .election(&format!("torture:{l}"))
        .ok()?
        .with_lease(lease(shared, held, l)?)
        .with_waiter_lease(Ttl::new(WAITER_LEASE).ok()?);
    let value = format!("w{}", shared.args.worker);
    Some((Candidate { election, value }, 1))
}

/// A task of the election workload: it campaigns as the lock workload's tasks take
/// locks; the first `--locks` tasks of each worker also observe one election each.
async fn election_task(shared: Shared<RedisStore>, holder: Holder) {
    let observing = async {
        if holder.task < shared.args.locks {
            observe(&shared, holder, holder.task).await;
        }
    };
    tokio::join!(task_loop(shared.clone(), holder, candidate_of), observing);
}

/// Resolves once the run is stopping.
async fn stopping<S>(shared: &Shared<S>) {
    while !shared.stopping.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Logs every leader an observer of election `l` returns, until the run stops.
async fn observe(shared: &Shared<RedisStore>, holder: Holder, l: usize) {
    let lock = format!("torture:{l}");
    let Ok(mut observer) = shared.client.election(&lock).and_then(|e| e.observe()) else {
        return;
    };
    while !shared.stopping.load(Ordering::Relaxed) {
        // Not cut off by a timer: a timer would make it re-read on its own, and hide
        // an observer that fails to re-read when a leader's lease ends.
        let changed = tokio::select! {
            changed = observer.changed() => changed,
            () = stopping(shared) => return,
        };
        let Ok(leader) = changed else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        shared.write(&Record::Observed(Observed {
            holder,
            lock: lock.clone(),
            at_us: now_us(),
            leader: leader.map(|leader| (leader.value, leader.term)),
        }));
    }
}

async fn run_with<S, G, A>(client: Client<S>, args: WorkerArgs, target: Target<S, A>)
where
    S: Pass + WakeUps,
    G: Pass + WakeUps,
    A: Acquire<G>,
{
    run_tasks(client, args, move |shared, holder| {
        task_loop(shared, holder, target)
    })
    .await;
}

/// Runs `--tasks` copies of `task` until SIGTERM, each with a holder of its own.
async fn run_tasks<S, Fut>(
    client: Client<S>,
    args: WorkerArgs,
    task: impl Fn(Shared<S>, Holder) -> Fut,
) where
    S: Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let shared = Shared::new(client, args).await;
    let tasks = (0..shared.args.tasks)
        .map(|n| tokio::spawn(task(shared.clone(), shared.holder(n))))
        .collect();
    shared.until_terminated(tasks).await;
}

/// Runs transactions on random locks' counters, logging each.
async fn tx_loop(shared: Shared<RedisStore>, mut holder: Holder) {
    let mut rng = StdRng::seed_from_u64(holder.seed(shared.args.seed));
    while !shared.stopping.load(Ordering::Relaxed) {
        holder.seq += 1;
        let lock = format!("torture:{}", rng.random_range(0..shared.args.locks));
        let tx =
            crate::transactions::run_one(&shared.client, holder, &lock, shared.args.ttl, &mut rng)
                .await;
        let failed = tx.outcome == crate::transactions::TxOutcome::Unknown;
        shared.write(&Record::Tx(tx));
        let pause = if failed { 50 } else { rng.random_range(0..5) };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// The count of every latch of the latch workload.
pub const LATCH_COUNT: u64 = 4;
/// A new latch per lock index every round.
pub const LATCH_ROUND_US: u64 = 1_000_000;

/// Counts down the current round's latch of a random lock index, then waits (with
/// a timeout) for the next round's, logging each call.
async fn latch_loop(shared: Shared<RedisStore>, mut holder: Holder) {
    let mut rng = StdRng::seed_from_u64(holder.seed(shared.args.seed));
    while !shared.stopping.load(Ordering::Relaxed) {
        holder.seq += 1;
        let lock = format!("torture:{}", rng.random_range(0..shared.args.locks));
        let round = now_us() / LATCH_ROUND_US;
        let call = |round: u64| -> Option<latchkey::latch::Latch> {
            shared
                .client
                .latch(&format!("{lock}:{round}"), LATCH_COUNT)
                .ok()
        };
        let (Some(now), Some(next)) = (call(round), call(round + 1)) else {
            return;
        };
        let sent_us = now_us();
        let counted = now.count_down().await.ok();
        let failed = counted.is_none();
        shared.write(&Record::Latch(LatchCall {
            holder,
            lock: lock.clone(),
            round,
            sent_us,
            recv_us: now_us(),
            call: LatchCallKind::CountDown {
                answer: counted.map(|c| (c.left, c.opened)),
            },
        }));
        let timeout = Duration::from_millis(rng.random_range(0..1_500));
        let sent_us = now_us();
        let open = next.wait_timeout(timeout).await.ok();
        shared.write(&Record::Latch(LatchCall {
            holder,
            lock,
            round: round + 1,
            sent_us,
            recv_us: now_us(),
            call: LatchCallKind::Wait {
                timeout_us: crate::record::micros(timeout),
                open,
            },
        }));
        let pause = if failed || open.is_none() {
            50
        } else {
            rng.random_range(0..20)
        };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

/// Calls `check(cost)` on a random key, a few ms apart, logging each call.
async fn call_loop(shared: Shared<RedisStore>, mut holder: Holder) {
    let mut rng = StdRng::seed_from_u64(holder.seed(shared.args.seed));
    while !shared.stopping.load(Ordering::Relaxed) {
        holder.seq += 1;
        let l = rng.random_range(0..shared.args.locks);
        let rate = Rate::of(l);
        let lock = format!("torture:{l}");
        let Some(limiter) = rate
            .policy()
            .ok()
            .and_then(|p| shared.client.rate_limiter(&lock, p).ok())
        else {
            return;
        };
        let cost = rate.cost(&mut rng);
        let sent_us = now_us();
        let decision = limiter.check(cost).await;
        shared.write(&Record::Call(Call {
            holder,
            lock,
            sent_us,
            recv_us: now_us(),
            cost,
            allowed: decision.as_ref().ok().map(|d| d.allowed),
        }));
        let pause = match decision {
            Ok(_) => rng.random_range(0..8),
            // Do not hammer a server that is down.
            Err(_) => 50,
        };
        tokio::time::sleep(Duration::from_millis(pause)).await;
    }
}

impl<S> Shared<S> {
    async fn new(client: Client<S>, args: WorkerArgs) -> Self {
        Shared {
            client,
            resource: redis::Client::open(args.resource_url.as_str())
                .expect("resource URL")
                .get_multiplexed_async_connection()
                .await
                .expect("the resource server is never faulted"),
            log: Arc::new(StdMutex::new(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&args.log)
                    .expect("log file"),
            )),
            stopping: Arc::new(AtomicBool::new(false)),
            args,
        }
    }

    /// The lock delay of lock index `l`: `--lock-delay` for the odd ones, so one run
    /// has locks with and without.
    fn lock_delay(&self, l: usize) -> Duration {
        match l % 2 {
            1 => self.args.lock_delay,
            _ => Duration::ZERO,
        }
    }

    /// Task `task` of this worker, before its first attempt.
    fn holder(&self, task: usize) -> Holder {
        Holder {
            worker: self.args.worker,
            incarnation: self.args.incarnation,
            task,
            seq: 0,
        }
    }

    /// Waits for SIGTERM, then lets the tasks finish what is under way and log it.
    async fn until_terminated(&self, tasks: Vec<tokio::task::JoinHandle<()>>) {
        if let Ok(mut terminate) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            terminate.recv().await;
        }
        self.stopping.store(true, Ordering::Relaxed);
        for task in tasks {
            let _ = task.await;
        }
        // As the docs ask of a process that exits: the releases of dropped guards
        // (an aborted release's) must land, not die with the runtime.
        latchkey::finish_background_releases(Duration::from_secs(3)).await;
    }
}

/// Redis may be down (a restart fault) when a worker starts: keep trying. A URL
/// `cluster:SEED,SEED…` is a cluster, `quorum:URL,URL…` a quorum of masters.
async fn connect<S, Fut>(open: impl Fn() -> Fut) -> Client<S>
where
    Fut: std::future::Future<Output = latchkey::Result<Client<S>>>,
{
    loop {
        match open().await {
            Ok(client) => return client,
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

async fn task_loop<S, G, A>(mut shared: Shared<S>, mut holder: Holder, target: Target<S, A>)
where
    S: Pass + WakeUps,
    G: Pass + WakeUps,
    A: Acquire<G>,
{
    let mut rng = StdRng::seed_from_u64(holder.seed(shared.args.seed));
    while !shared.stopping.load(Ordering::Relaxed) {
        holder.seq += 1;
        let l = rng.random_range(0..shared.args.locks);
        let lease = Held::pick(&mut rng);
        let Some((mutex, weight)) = target(&shared, l, lease, &mut rng) else {
            return;
        };
        let start_us = now_us();
        let attempted = attempt(&mutex, &mut rng).await;
        let fair = mutex.fair();
        shared.log_attempt(holder, l, lease, (start_us, fair), &attempted);
        let Some(guard) = shared.won(attempted.result).await else {
            continue;
        };
        // A downgraded read holds the lock from its write's grant on.
        let acquired_us = guard.held_since_us().unwrap_or(attempted.end_us);
        let timing = (attempted.mode, start_us, acquired_us);
        let section = Section {
            fair,
            ..shared.section(holder, l, lease, weight, timing, &mut rng)
        };
        section.run(&mut shared, guard, &mutex, &mut rng).await;
    }
}

/// Takes two or three locks at once (in every mode `attempt` asks), then runs each
/// lock's section as [`task_loop`] does, side by side: each releases its own lock.
async fn multi_loop<S: Pass + WakeUps>(shared: Shared<S>, mut holder: Holder) {
    let mut rng = StdRng::seed_from_u64(holder.seed(shared.args.seed));
    let most = shared.args.locks.clamp(1, 3);
    while !shared.stopping.load(Ordering::Relaxed) {
        holder.seq += 1;
        let count = rng.random_range(most.min(2)..=most);
        let picked = rand::seq::index::sample(&mut rng, shared.args.locks, count).into_vec();
        let lease = Held::pick(&mut rng);
        let Some(mutexes) = picked
            .iter()
            // Plain: a multi-lock of fair locks may go back to waiting round after
            // round while others queue (the `multilock` module's docs say so), which
            // the liveness check would rightly report.
            .map(|&l| lock(&shared, l, lease, &mut rng).map(|(mutex, _)| mutex))
            .collect::<Option<Vec<_>>>()
        else {
            return;
        };
        let Ok(set) = MultiLock::new(mutexes.clone()) else {
            return;
        };
        let start_us = now_us();
        let attempted = attempt(&set, &mut rng).await;
        // Not in any line: a multi-lock takes all its locks at once or none.
        for &l in &picked {
            shared.log_attempt(holder, l, lease, (start_us, false), &attempted);
        }
        let Some(guard) = shared.won(attempted.result).await else {
            continue;
        };
        let timing = (attempted.mode, start_us, attempted.end_us);
        let sections = guard.into_guards().into_iter().filter_map(|guard| {
            let i = mutexes.iter().position(|m| m.key() == guard.key())?;
            let section = shared.section(holder, picked[i], lease, 1, timing, &mut rng);
            let (mut shared, mutex) = (shared.clone(), mutexes[i].clone());
            let mut rng = StdRng::seed_from_u64(rng.random());
            Some(async move { section.run(&mut shared, guard, &mutex, &mut rng).await })
        });
        futures_util::future::join_all(sections.collect::<Vec<_>>()).await;
    }
}

impl<S> Shared<S> {
    /// Logs an attempt on lock index `l` that began at `start_us` (`fair`: a fair
    /// lock's own).
    fn log_attempt<H>(
        &self,
        holder: Holder,
        l: usize,
        lease: Held,
        (start_us, fair): (u64, bool),
        attempted: &Attempted<H>,
    ) {
        let in_redis = lease.ttl(self.args.ttl) + self.lock_delay(l);
        self.write(&Record::Attempt {
            holder,
            lock: format!("torture:{l}"),
            mode: attempted.mode,
            start_us,
            end_us: attempted.end_us,
            timeout_us: attempted.timeout.map(crate::record::micros),
            ttl_us: crate::record::micros(in_redis),
            outcome: attempted.outcome(),
            fair,
        });
    }

    /// What an attempt won, if anything; after an error, a pause first, so as not
    /// to hammer a server that is down.
    async fn won<H>(&self, result: Result<H, Outcome>) -> Option<H> {
        match result {
            Ok(won) => Some(won),
            Err(Outcome::Error { .. }) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                None
            }
            Err(_) => None,
        }
    }

    /// The critical section of a hold of lock index `l`, taken with `weight`, by an
    /// attempt in `mode` that started and won at `(mode, start_us, won_us)`.
    fn section(
        &self,
        holder: Holder,
        l: usize,
        lease: Held,
        weight: u64,
        (mode, start_us, won_us): (Mode, u64, u64),
        rng: &mut StdRng,
    ) -> Section {
        let ttl = self.args.ttl;
        let lock_delay = self.lock_delay(l);
        Section {
            holder,
            lock: format!("torture:{l}"),
            mode,
            attempt_start_us: start_us,
            acquired_us: won_us,
            ttl: lease.ttl(ttl) + lock_delay,
            lock_delay,
            weight,
            // Concurrent holders of a semaphore write in any order: only a holder
            // alone can be fenced.
            fenced: match self.args.workload {
                Workload::Mutex | Workload::Election | Workload::MultiLock => true,
                Workload::Semaphore => permits(l) == 1,
                Workload::RwLock => weight == WRITER,
                Workload::RateLimit | Workload::Transaction | Workload::Latch => false,
            },
            hold: match lease {
                Held::Outlived => ttl * 2,
                // A renewal is due (or in flight) just as the release goes out.
                Held::Short if rng.random_bool(RENEWAL_DUE_SHARE) => {
                    ttl / 3 + Duration::from_millis(rng.random_range(0..15))
                }
                // Through several renewals: a lease that ends under it (a clock
                // jump, an operator) must be heard of at the next one.
                Held::Short if rng.random_bool(RENEWED_SHARE) => ttl * 3 / 2,
                Held::Short | Held::Long => Duration::from_millis(rng.random_range(1..20)),
            },
            // A fair lock's own attempt says so (see `task_loop`).
            fair: false,
        }
    }
}

/// The lease an acquisition asks for.
#[derive(Clone, Copy)]
pub enum Held {
    /// Renewed, the run's `--ttl`.
    Short,
    /// Renewed, [`LONG_TTL`].
    Long,
    /// Fixed, the run's `--ttl`, and the section outlives it.
    Outlived,
}

impl Held {
    /// A lease picked at random, in the shares above.
    fn pick(rng: &mut StdRng) -> Self {
        match (rng.random_bool(OUTLIVE_SHARE), rng.random_bool(LONG_SHARE)) {
            (true, _) => Held::Outlived,
            (false, true) => Held::Long,
            (false, false) => Held::Short,
        }
    }

    fn ttl(self, run_ttl: Duration) -> Duration {
        match self {
            Held::Long => LONG_TTL,
            Held::Short | Held::Outlived => run_ttl,
        }
    }
}

/// Lock `l` as this acquisition wants it: renewed, or a fixed lease it will outlive.
/// Most through the client (whose handles share a local line, so one task of the
/// process waits in Redis); some through a handle of their own (`Mutex::new`), so
/// several tasks of one process wait in the Redis line and hear their turns on one
/// subscriber.
fn mutex<S: Pass + WakeUps>(
    shared: &Shared<S>,
    l: usize,
    held: Held,
    rng: &mut StdRng,
) -> Option<Mutex<S>> {
    let name = format!("torture:{l}");
    let mutex = match rng.random_bool(OWN_LINE_SHARE) {
        true => Mutex::new(
            shared.client.store().clone(),
            LockKey::new(shared.client.prefix(), &name).ok()?,
        ),
        false => shared.client.mutex(&name).ok()?,
    };
    let waiter_lease = Ttl::new(WAITER_LEASE).ok()?;
    Some(
        mutex
            .with_lease(lease(shared, held, l)?)
            .with_waiter_lease(waiter_lease),
    )
}

/// The lease `held` asks for, of lock index `l`.
fn lease<S>(shared: &Shared<S>, held: Held, l: usize) -> Option<Lease> {
    let ttl = held.ttl(shared.args.ttl);
    match held {
        Held::Outlived => Lease::fixed(ttl),
        Held::Short | Held::Long => Lease::renewed(ttl),
    }
    .and_then(|lease| lease.with_lock_delay(shared.lock_delay(l)))
    .ok()
}

/// One critical section, from the acquisition to the end of the release.
struct Section {
    holder: Holder,
    lock: String,
    mode: Mode,
    attempt_start_us: u64,
    acquired_us: u64,
    /// How long Redis keeps the lock: the lease asked for and its lock delay.
    ttl: Duration,
    lock_delay: Duration,
    /// Permits taken (1 for a lock).
    weight: u64,
    /// Whether the section does a fenced write (only a holder alone can).
    fenced: bool,
    hold: Duration,
    /// Taken by a fair lock's attempt of its own.
    fair: bool,
}

impl Section {
    async fn run<S, G: Pass + WakeUps, A: Acquire<G>>(
        self,
        shared: &mut Shared<S>,
        held: A::Held,
        mutex: &A,
        rng: &mut StdRng,
    ) {
        let guard = held.guard();
        let mut fence_computed = None;
        let early = match rng.random_bool(EARLY_FENCE_SHARE) {
            true => ask_fence(guard, &mut fence_computed).await,
            false => guard.known_fence(),
        };
        shared.write(&Record::Acquired {
            holder: self.holder,
            lock: self.lock.clone(),
            owner: guard.owner().as_str().to_owned(),
            fence: early,
            attempt_start_us: self.attempt_start_us,
            at_us: self.acquired_us,
            ttl_us: crate::record::micros(self.ttl),
            weight: self.weight,
            lock_delay_us: crate::record::micros(self.lock_delay),
            fair: self.fair,
        });
        let section_start = now_us();
        tokio::time::sleep(self.hold).await;
        let (fence, write_sent_us, write_accepted) =
            self.write(shared, guard, &mut fence_computed).await;
        let section_end = now_us();
        let valid_until = guard.valid_until();
        let lost_token = guard.lost_token();
        let release_us = now_us();
        let (released, aborted) = match self.mode {
            Mode::AbortRelease => release_aborted(held, rng).await,
            Mode::AbortHandoff => (release_to_aborted_waiter(held, mutex, rng).await, false),
            _ => (held.release().await.ok(), false),
        };
        let release_end_us = now_us();
        // Lost: the signal fired, or the lease had run out by the holder's clock.
        let lost = lost_token.is_cancelled() || std::time::Instant::now() >= valid_until;
        shared.write(&Record::Ended {
            holder: self.holder,
            lock: self.lock,
            fence,
            end: HoldEnd {
                section: (section_start, section_end),
                valid_until_us: wall_us(valid_until),
                release_us,
                release_end_us,
                released,
                release_aborted: aborted,
                lost,
                write_accepted,
                fence_computed,
                write_sent_us,
            },
        });
    }
}

impl Section {
    /// The section's last step: its fencing token and, if it writes, the fenced
    /// write: (token, when the write was sent, whether the resource accepted it).
    /// Asked for here, the token is computed (unless the grant brought it) after a
    /// hold that may have outlived the lease: the script must then refuse it.
    async fn write<S, G: Pass + WakeUps>(
        &self,
        shared: &mut Shared<S>,
        guard: &MutexGuard<G>,
        computed: &mut Option<(u64, u64)>,
    ) -> (Option<u64>, Option<u64>, Option<bool>) {
        if !self.fenced {
            return (guard.known_fence(), None, None);
        }
        let Some(fence) = ask_fence(guard, computed).await else {
            return (None, None, None);
        };
        let sent_us = now_us();
        let accepted = fenced_write(&mut shared.resource, &self.lock, fence).await;
        (Some(fence), Some(sent_us), accepted)
    }
}

/// The guard's fencing token; when the server computed it for this call (the grant
/// had not brought it), `computed` says when the call was sent and answered.
async fn ask_fence<G: Pass + WakeUps>(
    guard: &MutexGuard<G>,
    computed: &mut Option<(u64, u64)>,
) -> Option<u64> {
    if let Some(known) = guard.known_fence() {
        return Some(known);
    }
    let asked_us = now_us();
    let fence = guard.fence().await.ok()?;
    *computed = Some((asked_us, now_us()));
    Some(fence)
}

async fn fenced_write(
    resource: &mut MultiplexedConnection,
    lock: &str,
    fence: u64,
) -> Option<bool> {
    let accepted: redis::RedisResult<i64> = FENCED_WRITE
        .key(format!("resource:{lock}:last"))
        .key(format!("resource:{lock}:accepted"))
        .arg(fence)
        .invoke_async(resource)
        .await;
    accepted.ok().map(|n| n == 1)
}

impl<S> Shared<S> {
    fn write(&self, record: &Record) {
        let Ok(line) = serde_json::to_string(record) else {
            return;
        };
        if let Ok(mut file) = self.log.lock() {
            let _ = writeln!(file, "{line}");
        }
    }
}
