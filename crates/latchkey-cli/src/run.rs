//! `latchkey run`: a distributed flock(1).
//!
//! Takes the lock with a renewed lease, runs the command with `LATCHKEY_FENCE` and
//! `LATCHKEY_LOCK` in its environment, passes INT, TERM, HUP, QUIT, USR1, USR2 and
//! ALRM on to it, and releases the lock when it ends, however it ends (waiting, for
//! a bounded time, until Redis confirms the release).
//!
//! The command runs in a process group of its own, which is signalled as a whole
//! (as timeout(1) does): if the lease is lost mid-run, every process of the group
//! gets SIGTERM, then SIGKILL after `--kill-after`, and latchkey exits 70. The
//! command dies with latchkey, even of SIGKILL: the command itself through
//! `PR_SET_PDEATHSIG`, the rest of its group through a small reaper (see
//! [`Reaper`]). A signal that arrives while latchkey still waits for the lock makes
//! it leave the wait queue and exit 128 + N.

use std::pin::Pin;
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use futures_util::future::try_join_all;
use latchkey::store::{Pass, WakeUps};
use latchkey::{Fairness, Fencing, Lease, LockKey, MultiLock, MultiLockGuard, Mutex, MutexGuard};
use nix::sys::signal::{SigHandler, Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::{Global, HoldArgs, RunArgs, RwRunArgs, SemRunArgs, TakeArgs};
use crate::connect;
use crate::exit::{self, Failure};

/// Exit statuses when the command cannot be started, as shells use them.
const NOT_EXECUTABLE: u8 = 126;
const NOT_FOUND: u8 = 127;
/// How long the final release (or leaving the queue) may take, retries included,
/// before latchkey gives up on it (the lease, or the waiter lease, then ends on its
/// own).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(5);

pub async fn run(global: &Global, args: RunArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    for also in &args.and {
        connect::check_name(global, also)?;
    }
    let lease = args.hold.lease()?;
    let wait = Wait::from(&args.hold.take);
    // From here on those signals are ours to handle: while waiting, by leaving the
    // queue; while the command runs, by passing them on.
    let signals = Signals::listen()?;
    connect::with_client!(global, until wait.deadline(), client => {
        let fairness = match args.fair {
            true => Fairness::Fair,
            false => Fairness::Plain,
        };
        // The command gets its fencing tokens in its environment: with the grant.
        let mutex = |name: &str| -> latchkey::Result<Mutex<_>> {
            Ok(client
                .mutex(name)?
                .with_lease(lease)
                .with_fairness(fairness)
                .with_fencing(Fencing::OnGrant))
        };
        if args.and.is_empty() {
            let mutex = mutex(name)?;
            hold_and_run(take(&mutex, wait), wait, Named::one(name), &args.hold, signals).await
        } else {
            let named = std::iter::once(name)
                .chain(args.and.iter().map(String::as_str))
                .map(&mutex)
                .collect::<latchkey::Result<Vec<_>>>()?;
            let order = named.iter().map(|mutex| mutex.key().clone()).collect();
            let names = std::iter::once(name).chain(args.and.iter().map(String::as_str));
            let names: Vec<String> = names.map(str::to_owned).collect();
            let words = Named::several(name, &names);
            let set = MultiLock::new(named)?;
            let taking = async {
                let guard = take_all(&set, wait).await?;
                Ok::<_, latchkey::Error>(Several {
                    guard,
                    order,
                    names,
                })
            };
            hold_and_run(taking, wait, words, &args.hold, signals).await
        }
    })
}

/// Takes `mutex` as `wait` says.
pub async fn take<S: Pass + WakeUps>(
    mutex: &Mutex<S>,
    wait: Wait,
) -> latchkey::Result<MutexGuard<S>> {
    match wait {
        Wait::Now => mutex.try_lock().await,
        Wait::Until(deadline) => mutex.lock_timeout(deadline.left()).await,
        Wait::Forever => mutex.lock().await,
    }
}

/// Takes every lock of `set` as `wait` says.
async fn take_all<S: Pass + WakeUps>(
    set: &MultiLock<S>,
    wait: Wait,
) -> latchkey::Result<MultiLockGuard<S>> {
    match wait {
        Wait::Now => set.try_lock().await,
        Wait::Until(deadline) => set.lock_timeout(deadline.left()).await,
        Wait::Forever => set.lock().await,
    }
}

/// `sem run`: the same, holding `--weight` of a semaphore's `--permits`.
pub async fn sem_run(global: &Global, args: SemRunArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    let lease = args.hold.lease()?;
    latchkey::Semaphore::check_permits(args.permits)?;
    if args.weight > args.permits {
        return Err(Failure::usage(format!(
            "--weight {} is more than the semaphore's --permits {}",
            args.weight, args.permits
        )));
    }
    let wait = Wait::from(&args.hold.take);
    let signals = Signals::listen()?;
    let client = connect::retrying(wait.deadline(), || connect::client(global)).await?;
    let semaphore = client.semaphore(name, args.permits)?.with_lease(lease);
    let taking = async {
        match wait {
            Wait::Now => semaphore.try_acquire(args.weight).await,
            Wait::Until(deadline) => {
                semaphore
                    .acquire_timeout(args.weight, deadline.left())
                    .await
            }
            Wait::Forever => semaphore.acquire(args.weight).await,
        }
    };
    hold_and_run(taking, wait, Named::one(name), &args.hold, signals).await
}

/// `rw run`: the same, holding a read-write lock to read or to write.
pub async fn rw_run(global: &Global, args: RwRunArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    let lease = args.hold.lease()?;
    let wait = Wait::from(&args.hold.take);
    let signals = Signals::listen()?;
    let client = connect::retrying(wait.deadline(), || connect::client(global)).await?;
    let lock = client.rw_lock(name)?.with_lease(lease);
    let taking = async {
        match (args.write, wait) {
            (false, Wait::Now) => lock.try_read().await,
            (false, Wait::Until(deadline)) => lock.read_timeout(deadline.left()).await,
            (false, Wait::Forever) => lock.read().await,
            (true, Wait::Now) => lock.try_write().await,
            (true, Wait::Until(deadline)) => lock.write_timeout(deadline.left()).await,
            (true, Wait::Forever) => lock.write().await,
        }
    };
    hold_and_run(taking, wait, Named::one(name), &args.hold, signals).await
}

/// How long the options say to wait: for Redis (connecting), then for the lock.
#[derive(Clone, Copy)]
pub enum Wait {
    Now,
    Until(Deadline),
    Forever,
}

/// A `--wait`: when it began (the options read) and when it ends.
#[derive(Clone, Copy)]
pub struct Deadline {
    since: Instant,
    until: Instant,
}

impl Deadline {
    /// What is left of the wait.
    pub fn left(self) -> Duration {
        self.until.saturating_duration_since(Instant::now())
    }
}

impl Wait {
    /// A `--wait` of `wait` counted from now; without one (or one too long to
    /// count), for ever.
    pub fn at_most(wait: Option<Duration>) -> Self {
        let since = Instant::now();
        let until = wait.and_then(|wait| since.checked_add(wait));
        until.map_or(Wait::Forever, |until| {
            Wait::Until(Deadline { since, until })
        })
    }

    /// What is left of the wait; `None` for ever.
    pub fn left(self) -> Option<Duration> {
        match self {
            Wait::Now => Some(Duration::ZERO),
            Wait::Until(deadline) => Some(deadline.left()),
            Wait::Forever => None,
        }
    }

    /// Until when connecting may be retried: only within a `--wait`.
    pub fn deadline(self) -> Option<Instant> {
        match self {
            Wait::Until(deadline) => Some(deadline.until),
            Wait::Now | Wait::Forever => None,
        }
    }

    /// A busy lock's error, telling the whole `--wait` the user gave (connecting
    /// included), not only the part the library spent waiting for the lock.
    fn counted(self, mut error: latchkey::Error) -> latchkey::Error {
        if let (Wait::Until(deadline), latchkey::Error::Busy { waited, .. }) = (self, &mut error) {
            *waited = (*waited).max(deadline.since.elapsed());
        }
        error
    }
}

impl HoldArgs {
    /// The lease `--ttl`, `--max-hold` and `--lock-delay` ask for, renewed while
    /// the command runs. An option the library refuses is named in the error (its
    /// figures are the lease's, which the user may not recognise).
    pub fn lease(&self) -> Result<Lease, Failure> {
        let option = |name: &'static str| {
            move |error: latchkey::Error| Failure::usage(format!("{name}: {error}"))
        };
        let lease = Lease::renewed(self.take.ttl).map_err(option("--ttl"))?;
        let lease = lease
            .with_lock_delay(self.lock_delay)
            .map_err(option("--lock-delay"))?;
        match self.max_hold {
            Some(limit) => lease.with_max_hold(limit).map_err(option("--max-hold")),
            None => Ok(lease),
        }
    }
}

/// The wait the options ask for, counted from now.
impl From<&TakeArgs> for Wait {
    fn from(take: &TakeArgs) -> Self {
        match take.no_wait {
            true => Wait::Now,
            false => Wait::at_most(take.wait),
        }
    }
}

/// What a command runs under: a hold of a lock (permits, a read or write lock are
/// holds too), of several locks, or a leadership; and how it is given up when the
/// command ends.
pub trait Held: Send + Sized {
    type Store: Pass + WakeUps;

    /// The hold of the lock under it (of the lock named first, for several).
    fn guard(&self) -> &MutexGuard<Self::Store>;

    /// Resolves when any lease under it is lost.
    fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard().lost()
    }

    /// Whether `--max-hold` ended it.
    fn hold_limit_reached(&self) -> bool {
        self.guard().hold_limit_reached()
    }

    /// Whether any lease under it is known lost or has run out by our clock.
    fn is_lost(&self) -> bool {
        self.guard().is_lost()
    }

    /// Releases it (a leadership resigns); whether it was still held.
    fn let_go(self) -> impl Future<Output = latchkey::Result<bool>> + Send;

    /// The lock whose lease was lost, as messages name it (quoted): `name`, or of
    /// several the first found lost; before any is, all of them.
    fn lost_name(&self, name: &str) -> String {
        format!("{name:?}")
    }

    /// What the command's environment says of it, besides `LATCHKEY_FENCE` and
    /// `LATCHKEY_LOCK`.
    fn environment(
        &self,
    ) -> impl Future<Output = latchkey::Result<Vec<(&'static str, String)>>> + Send {
        async { Ok(Vec::new()) }
    }
}

impl<S: Pass + WakeUps> Held for MutexGuard<S> {
    type Store = S;

    fn guard(&self) -> &MutexGuard<S> {
        self
    }

    fn let_go(self) -> impl Future<Output = latchkey::Result<bool>> + Send {
        self.release()
    }
}

/// Several locks held together (`run NAME --and NAME2`), and the order they were
/// named in, for the command's `LATCHKEY_FENCES`.
struct Several<S: Pass + WakeUps> {
    guard: MultiLockGuard<S>,
    /// The locks' keys as named: NAME first, then each `--and`.
    order: Vec<LockKey>,
    /// Their names, in the same order.
    names: Vec<String>,
}

impl<S: Pass + WakeUps> Several<S> {
    /// The guard of a lock of the set, by key.
    fn get(&self, key: &LockKey) -> latchkey::Result<&MutexGuard<S>> {
        self.guard.get(key.as_str()).ok_or_else(|| {
            latchkey::Error::InvalidArgument(format!("{key} is not one of the locks held"))
        })
    }
}

impl<S: Pass + WakeUps> Held for Several<S> {
    type Store = S;

    fn guard(&self) -> &MutexGuard<S> {
        // The set is never empty, and NAME is in it.
        self.get(&self.order[0])
            .unwrap_or_else(|_| &self.guard.guards()[0])
    }

    fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        self.guard.lost()
    }

    fn hold_limit_reached(&self) -> bool {
        self.guard.hold_limit_reached()
    }

    fn is_lost(&self) -> bool {
        self.guard.is_lost()
    }

    fn let_go(self) -> impl Future<Output = latchkey::Result<bool>> + Send {
        self.guard.release()
    }

    fn lost_name(&self, _: &str) -> String {
        let lost = self
            .order
            .iter()
            .zip(&self.names)
            .find(|(key, _)| self.get(key).is_ok_and(MutexGuard::is_lost));
        match lost {
            Some((_, name)) => format!("{name:?}"),
            None => format!("one of {:?}", self.names),
        }
    }

    async fn environment(&self) -> latchkey::Result<Vec<(&'static str, String)>> {
        let guards = self
            .order
            .iter()
            .map(|key| self.get(key))
            .collect::<latchkey::Result<Vec<_>>>()?;
        let fences = try_join_all(guards.into_iter().map(MutexGuard::fence)).await?;
        let fences: Vec<String> = fences.iter().map(u64::to_string).collect();
        Ok(vec![("LATCHKEY_FENCES", fences.join(" "))])
    }
}

/// What a run waits for and holds: the name its command's environment gives
/// (`LATCHKEY_LOCK`), and the words its messages use.
pub struct Named<'a> {
    name: &'a str,
    /// Quoted: `"a"`, or `"a" and "b"` for `run a --and b`.
    waited: String,
}

impl<'a> Named<'a> {
    pub fn one(name: &'a str) -> Self {
        Named {
            name,
            waited: format!("{name:?}"),
        }
    }

    /// `name` first of `all`, the locks taken together.
    fn several(name: &'a str, all: &[String]) -> Self {
        let quoted: Vec<String> = all.iter().map(|each| format!("{each:?}")).collect();
        Named {
            name,
            waited: quoted.join(" and "),
        }
    }
}

/// Waits for `taking` (a lock, permits, a read or write lock, a leadership), then
/// runs the command under what it gives.
pub async fn hold_and_run<H: Held>(
    taking: impl Future<Output = latchkey::Result<H>>,
    wait: Wait,
    Named { name, waited }: Named<'_>,
    hold: &HoldArgs,
    mut signals: Signals,
) -> Result<u8, Failure> {
    let held = wait_for(taking, wait, &waited, &mut signals).await?;
    let child = match start(&held, name, hold).await {
        Ok(child) => child,
        Err(failure) => {
            let _ = release(held).await;
            return Err(failure);
        }
    };
    let group = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let reaper = group.and_then(Reaper::start);
    let outcome = supervise(child, group, &held, name, hold, &mut signals).await;
    let lost_name = held.lost_name(name);
    let held_to_the_end = release(held).await;
    if let Some(reaper) = reaper {
        reaper.dismiss().await;
    }
    match outcome {
        // The lease ran out (or the lock was broken) while the command ran, and it
        // ended before latchkey heard: the release found the lock no longer ours.
        Ok(_) if !held_to_the_end => Err(Failure::with_status(
            exit::SOFTWARE,
            format!(
                "the lease on {lost_name} was lost before latchkey could release it (broken, or run out while Redis could not be reached); the command's work may overlap the next holder's"
            ),
        )),
        outcome => outcome,
    }
}

/// Waits for `taking`; a signal meanwhile (INT, TERM, HUP) abandons the wait and
/// ends latchkey with 128 + N, after leaving the queue. `waited` names what is
/// waited for (quoted, as `{name:?}` prints it).
pub async fn wait_for<H>(
    taking: impl Future<Output = latchkey::Result<H>>,
    wait: Wait,
    waited: &str,
    signals: &mut Signals,
) -> Result<H, Failure> {
    tokio::select! {
        taken = taking => match taken {
            Ok(held) => Ok(held),
            // A wait that gave up may leave releases in the background (a multi-lock
            // giving back what it took, a waiter leaving its queue): let them land
            // before the process exits.
            Err(error) => {
                let error = wait.counted(error);
                latchkey::finish_background_releases(RELEASE_TIMEOUT).await;
                Err(error.into())
            }
        },
        signal = signals.recv() => Err(interrupted(signal, waited).await),
    }
}

/// A signal ended the wait: the dropped wait leaves the queue in the background;
/// let it finish before the process exits, and exit as a shell would, 128 + N.
async fn interrupted(signal: Signal, waited: &str) -> Failure {
    let left = latchkey::finish_background_releases(RELEASE_TIMEOUT).await;
    let queue = match left {
        true => "left the wait queue",
        false => {
            "Redis did not confirm leaving the wait queue; the entry expires with its waiter lease"
        }
    };
    Failure::with_status(
        128 + signal as u8,
        format!("{signal} while waiting for {waited}: {queue}"),
    )
}

/// The command, started with the hold's fencing token in its environment.
async fn start<H: Held>(held: &H, name: &str, hold: &HoldArgs) -> Result<Child, Failure> {
    let fence = held.guard().fence().await?;
    tracing::debug!(lock = %name, fence, "taken");
    let mut environment = vec![
        ("LATCHKEY_FENCE", fence.to_string()),
        ("LATCHKEY_LOCK", name.to_owned()),
    ];
    environment.extend(held.environment().await?);
    spawn(hold, &environment)
}

fn spawn(hold: &HoldArgs, environment: &[(&str, String)]) -> Result<Child, Failure> {
    let (program, rest) = hold
        .command
        .split_first()
        .ok_or_else(|| Failure::usage("no command given after --".to_owned()))?;
    let started = command(program, rest, environment).spawn();
    // A script without a `#!` line: run it with /bin/sh, as execvp(3) and shells do.
    let started = match started {
        Err(e) if e.raw_os_error() == Some(nix::errno::Errno::ENOEXEC as i32) => {
            let script = std::iter::once(program).chain(rest);
            command("/bin/sh", &script.cloned().collect::<Vec<_>>(), environment).spawn()
        }
        started => started,
    };
    started.map_err(|e| {
        let status = match e.kind() {
            std::io::ErrorKind::PermissionDenied => NOT_EXECUTABLE,
            _ => NOT_FOUND,
        };
        Failure::with_status(status, format!("cannot run {program:?}: {e}"))
    })
}

/// `program` with `args` and `environment`, in a process group of its own
/// (signalled as a whole, grandchildren included), dying with latchkey.
fn command(program: &str, args: &[String], environment: &[(&str, String)]) -> Command {
    let mut command = Command::new(program);
    command
        .args(args)
        .envs(environment.iter().map(|(name, value)| (name, value)))
        .process_group(0);
    die_with_parent(&mut command);
    command
}

/// The signals whose default is to end a process (and that can be caught): caught
/// instead, so latchkey never dies leaving its command running without a renewed
/// lease, or its queue entry behind.
const CAUGHT: [Signal; 7] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGALRM,
];

/// Signals that would stop latchkey (Ctrl-Z): caught, so that the command's group
/// stops with it. A command left running while latchkey is stopped would outlive
/// its lease, which nothing renews meanwhile, and overlap the next holder.
/// (latchkey never reads the terminal, so SIGTTIN cannot stop it; SIGTTOU, which a
/// write from the background may raise, is ignored: see [`Signals::listen`].)
const SUSPENDING: [Signal; 1] = [Signal::SIGTSTP];

/// The caught signals, as they arrive.
pub struct Signals(tokio::sync::mpsc::UnboundedReceiver<Signal>);

impl Signals {
    pub fn listen() -> Result<Self, Failure> {
        // A message written to the terminal from the background (`stty tostop`)
        // raises SIGTTOU: by default it would stop latchkey with the command
        // running on; caught, the write would be restarted and raise it again, for
        // ever. Ignored, the write goes through. The command gets the default back
        // (`command`).
        // SAFETY: SIG_IGN installs no handler; nothing else in latchkey sets one
        // for SIGTTOU.
        if let Err(error) = unsafe { nix::sys::signal::signal(Signal::SIGTTOU, SigHandler::SigIgn) }
        {
            tracing::debug!(%error, "cannot ignore SIGTTOU");
        }
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        for caught in CAUGHT.into_iter().chain(SUSPENDING) {
            let mut stream = signal(SignalKind::from_raw(caught as i32))
                .map_err(|e| Failure::software(format!("cannot listen for {caught}: {e}")))?;
            let sender = sender.clone();
            tokio::spawn(async move {
                while stream.recv().await.is_some() && sender.send(caught).is_ok() {}
            });
        }
        Ok(Signals(receiver))
    }

    /// A stop signal (INT, TERM, QUIT) received and not yet read, passing on every
    /// signal read to `group` as it runs.
    fn pending_stop(&mut self, group: Option<Pid>) -> Option<Signal> {
        let mut stopping = None;
        while let Ok(signal) = self.0.try_recv() {
            if pass_on(group, signal) {
                stopping.get_or_insert(signal);
            }
        }
        stopping
    }

    /// The next signal that ends what latchkey does (waiting, watching). One that
    /// would suspend it (Ctrl-Z) suspends it meanwhile, as by default: no command
    /// runs under it yet.
    pub async fn recv(&mut self) -> Signal {
        loop {
            let signal = self.next().await;
            if !SUSPENDING.contains(&signal) {
                return signal;
            }
            suspend(None);
        }
    }

    /// The next signal, suspending ones included (for [`supervise`], which stops
    /// the command with latchkey).
    async fn next(&mut self) -> Signal {
        // The listening tasks live as long as the runtime, so the channel stays open.
        self.0.recv().await.unwrap_or(Signal::SIGTERM)
    }
}

/// Makes the command die (SIGKILL) when latchkey does, on Linux. The signal comes
/// when the thread that spawned it ends: here the thread running latchkey's main
/// future, which lives as long as latchkey.
#[cfg(target_os = "linux")]
fn die_with_parent(command: &mut Command) {
    let parent = nix::unistd::getpid();
    let arm = move || {
        // SAFETY (as below): sigaction is async-signal-safe. latchkey ignores
        // SIGTTOU (`Signals::listen`); the command gets it as any program does.
        unsafe { nix::sys::signal::signal(Signal::SIGTTOU, SigHandler::SigDfl) }?;
        nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
        // latchkey died between the fork and the prctl: nobody would kill us later.
        if nix::unistd::getppid() != parent {
            return Err(std::io::Error::other(
                "latchkey exited while starting the command",
            ));
        }
        Ok(())
    };
    // SAFETY: the closure only makes two system calls (prctl, getppid), both
    // async-signal-safe, and allocates only on the error path, which ends the child.
    unsafe {
        command.pre_exec(arm);
    }
}

#[cfg(not(target_os = "linux"))]
fn die_with_parent(_command: &mut Command) {}

/// Kills the command's process group if latchkey dies without dismissing it.
///
/// `PR_SET_PDEATHSIG` reaches only the command itself; its children (a shell's
/// `sleep`, a build's workers) would run on, reparented, without the lock. The
/// reaper is a `sh` in a process group of its own, so signals meant for latchkey's
/// group miss it, blocked reading a pipe that only latchkey writes: if latchkey
/// exits without a word (SIGKILL, the OOM killer), the read ends and the reaper
/// sends SIGKILL to the command's group.
struct Reaper {
    child: Child,
}

impl Reaper {
    fn start(group: Pid) -> Option<Reaper> {
        let started = Command::new("/bin/sh")
            .arg("-c")
            // `-9 -PGID`: the one spelling every sh (dash included) reads as a group.
            .arg(r#"read _ || kill -9 "-$1""#)
            .arg("latchkey-reaper")
            .arg(group.to_string())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .process_group(0)
            // Dropped without `dismiss` (a panic unwinding): its pipe closes, and it
            // stops the group, as when latchkey dies.
            .kill_on_drop(false)
            .spawn();
        match started {
            Ok(child) => Some(Reaper { child }),
            Err(error) => {
                tracing::warn!(%error, "cannot start the reaper: if latchkey is killed, the command's children may outlive it");
                None
            }
        }
    }

    /// latchkey is done with the command: the reaper leaves its group alone.
    async fn dismiss(mut self) {
        use tokio::io::AsyncWriteExt;
        if let Some(mut stdin) = self.child.stdin.take() {
            let _ = stdin.write_all(b"done\n").await;
        }
        let _ = tokio::time::timeout(Duration::from_secs(1), self.child.wait()).await;
    }
}

/// Signals that tell latchkey to stop the command: passed on, then SIGKILL after
/// `--kill-after`, and what is left of its group is stopped before the lock is
/// released. (HUP, USR1, USR2 and ALRM are only passed on: a command may take them
/// as a request to reload or report.)
const STOPPING: [Signal; 3] = [Signal::SIGINT, Signal::SIGTERM, Signal::SIGQUIT];

/// How long processes of the group that got SIGKILL are waited for: it cannot be
/// caught, so what is left is the kernel's work, or zombies another parent has yet
/// to reap (which keep the group in existence, and are not worth waiting for).
const KILL_GRACE: Duration = Duration::from_secs(1);

/// Waits for the child, forwarding signals to its group, and stops the group if the
/// lease is lost or latchkey is told to stop.
async fn supervise<H: Held>(
    mut child: Child,
    group: Option<Pid>,
    held: &H,
    name: &str,
    hold: &HoldArgs,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let lost = held.lost();
    tokio::pin!(lost);
    let mut run = Supervision {
        group,
        held,
        name,
        hold,
        lease_lost: false,
        told_to_stop: None,
        kill_timer: Box::pin(tokio::time::sleep(Duration::MAX / 4)),
        killed: false,
    };
    loop {
        tokio::select! {
            status = child.wait() => return run.ended(status, signals).await,
            signal = signals.next() => run.signalled(signal),
            () = &mut lost, if !run.lease_lost => run.lease_ended(),
            () = &mut run.kill_timer, if run.kill_pending() => run.kill(),
        }
    }
}

/// A command under supervision: what happened to its hold and to latchkey so far,
/// and when its group gets SIGKILL.
struct Supervision<'a, H: Held> {
    group: Option<Pid>,
    held: &'a H,
    name: &'a str,
    hold: &'a HoldArgs,
    lease_lost: bool,
    /// A stopping signal latchkey received, passed on to the group.
    told_to_stop: Option<Signal>,
    kill_timer: Pin<Box<tokio::time::Sleep>>,
    killed: bool,
}

impl<H: Held> Supervision<'_, H> {
    /// The command ended with `status`: what is left of its group is stopped if the
    /// lease was lost or latchkey was told to stop, and latchkey exits accordingly.
    async fn ended(
        &mut self,
        status: std::io::Result<ExitStatus>,
        signals: &mut Signals,
    ) -> Result<u8, Failure> {
        let status =
            status.map_err(|e| Failure::software(format!("lost track of the command: {e}")))?;
        // A stop signal that came as the command ended counts too.
        if let Some(signal) = signals.pending_stop(self.group) {
            self.told(signal);
        }
        let deadline = self.kill_timer.deadline();
        if self.lease_lost {
            // The rest of the group gets what is left of --kill-after, then SIGKILL.
            stop_group(self.group, deadline, signals).await;
            let why = self.stop_reason();
            return Err(Failure::with_status(
                exit::SOFTWARE,
                format!("{why}; the command was stopped"),
            ));
        }
        if let Some(signal) = self.told_to_stop {
            // Processes it left behind may ignore that signal (a shell's `&` jobs
            // ignore INT and QUIT): they get SIGTERM, then SIGKILL.
            if signal != Signal::SIGTERM {
                stop(self.group, Signal::SIGTERM);
            }
            stop_group(self.group, deadline, signals).await;
        }
        Ok(exit_code(status))
    }

    /// latchkey got `signal`: Ctrl-Z suspends the command with it, a stopping
    /// signal stops the command, any other is passed on.
    fn signalled(&mut self, signal: Signal) {
        if SUSPENDING.contains(&signal) {
            self.suspended(signal);
            return;
        }
        if pass_on(self.group, signal) {
            self.told(signal);
        }
    }

    /// Suspends the command and latchkey; once continued, the command goes on only
    /// if the lease did not end meanwhile.
    fn suspended(&mut self, signal: Signal) {
        suspend(self.group);
        if self.lease_lost || !self.held.is_lost() {
            forward(self.group, Signal::SIGCONT);
            return;
        }
        // Stopped since before its lease ended: it must not run again.
        forward(self.group, Signal::SIGKILL);
        (self.lease_lost, self.killed) = (true, true);
        self.kill_timer.as_mut().reset(tokio::time::Instant::now());
        crate::output::errln!(
            "latchkey: {signal} suspended the command past the lease on {}; it was killed (SIGKILL) before it could run on",
            self.held.lost_name(self.name)
        );
    }

    /// A stopping signal was passed on: SIGKILL follows `--kill-after` after the
    /// first, at once after a second; a lost lease's timer is kept.
    fn told(&mut self, signal: Signal) {
        let at = match self.told_to_stop.replace(signal) {
            Some(_) => tokio::time::Instant::now(),
            None if self.lease_lost => return,
            None => after(self.hold.kill_after),
        };
        self.kill_timer.as_mut().reset(at);
    }

    /// The lease was lost (or `--max-hold` ran out): SIGTERM now, SIGKILL after
    /// `--kill-after` unless a signal already set an earlier one.
    fn lease_ended(&mut self) {
        let why = self.stop_reason();
        self.lease_lost = true;
        stop(self.group, Signal::SIGTERM);
        if self.told_to_stop.is_none() {
            self.kill_timer.as_mut().reset(after(self.hold.kill_after));
        }
        let left = self
            .kill_timer
            .deadline()
            .saturating_duration_since(tokio::time::Instant::now());
        crate::output::errln!(
            "latchkey: {why}; sending SIGTERM (SIGKILL in {})",
            crate::output::human(left)
        );
    }

    /// Whether the kill timer is set and has not fired yet.
    fn kill_pending(&self) -> bool {
        (self.lease_lost || self.told_to_stop.is_some()) && !self.killed
    }

    fn kill(&mut self) {
        forward(self.group, Signal::SIGKILL);
        self.killed = true;
    }

    /// Why the command is being stopped: its lease was lost, or `--max-hold` ran out.
    fn stop_reason(&self) -> String {
        match (self.held.hold_limit_reached(), self.hold.max_hold) {
            (true, Some(limit)) => format!(
                "{:?} was held for --max-hold {}",
                self.name,
                crate::output::human(limit)
            ),
            _ => format!("the lease on {} was lost", self.held.lost_name(self.name)),
        }
    }
}

/// `kill_after` from now; far in the future if that overflows.
fn after(kill_after: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(kill_after)
        .unwrap_or_else(|| now + Duration::from_secs(86_400 * 365))
}

/// Passes `signal` on to the command's group; whether it is one that stops it (sent
/// as [`stop`] sends it).
fn pass_on(group: Option<Pid>, signal: Signal) -> bool {
    // Only `supervise` suspends the group; while it is being stopped, no more.
    if SUSPENDING.contains(&signal) {
        return false;
    }
    if !STOPPING.contains(&signal) {
        forward(group, signal);
        return false;
    }
    stop(group, signal);
    true
}

/// Sends a signal that stops the command to its group, and SIGCONT after it: a
/// process stopped (a command reading the terminal gets SIGTTIN) would otherwise
/// hold the signal until SIGKILL.
fn stop(group: Option<Pid>, signal: Signal) {
    forward(group, signal);
    forward(group, Signal::SIGCONT);
}

/// Stops the command's group (SIGSTOP, which it cannot ignore as it could SIGTSTP),
/// then latchkey, as the signal's default would have; returns once latchkey is
/// continued (`fg`, `bg`, SIGCONT).
fn suspend(group: Option<Pid>) {
    if !stoppable() {
        return;
    }
    forward(group, Signal::SIGSTOP);
    if let Err(error) = nix::sys::signal::raise(Signal::SIGSTOP) {
        tracing::debug!(%error, "could not stop latchkey");
    }
}

/// Whether anyone could continue latchkey if it stopped: its parent is in another
/// process group of its session (a shell with job control). The kernel discards
/// a terminal stop signal sent to an orphaned group (under systemd, nohup, a
/// script); so does latchkey, instead of stopping where nobody would continue it.
fn stoppable() -> bool {
    use nix::unistd::{getpgid, getpgrp, getppid, getsid};
    let parent = getppid();
    match (getpgid(Some(parent)), getsid(Some(parent)), getsid(None)) {
        (Ok(group), Ok(session), Ok(own)) => group != getpgrp() && session == own,
        _ => false,
    }
}

/// Sends `signal` to the command's process group (its leader is the command).
fn forward(group: Option<Pid>, signal: Signal) {
    let Some(group) = group else {
        return;
    };
    if let Err(error) = killpg(group, signal) {
        tracing::debug!(%error, ?signal, "could not signal the command (it may have exited)");
    }
}

/// Waits until the command's group is empty, or `deadline` (sooner if latchkey is
/// told to stop once more), then kills what is left, waiting [`KILL_GRACE`] at most
/// for that.
async fn stop_group(group: Option<Pid>, deadline: tokio::time::Instant, signals: &mut Signals) {
    let Some(group) = group else {
        return;
    };
    if group_ends_by(group, deadline, signals).await {
        return;
    }
    forward(Some(group), Signal::SIGKILL);
    group_ends_by(group, tokio::time::Instant::now() + KILL_GRACE, signals).await;
}

/// Whether the group is gone by `deadline`; false at once on a stopping signal
/// (passed on to the group, as every signal is).
async fn group_ends_by(group: Pid, deadline: tokio::time::Instant, signals: &mut Signals) -> bool {
    while group_lives(group) {
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(20)) => {}
            signal = signals.next() => {
                if pass_on(Some(group), signal) {
                    return false;
                }
            }
        }
    }
    true
}

/// Whether a process of the group still runs. Processes that ended but were not
/// reaped yet (zombies) do not count: latchkey reaps those that are its own (as a
/// container's PID 1 it inherits the command's orphans), and another parent may
/// take its time with the rest.
fn group_lives(group: Pid) -> bool {
    use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
    // Its own: only orphans of the group it inherited (the command was reaped).
    while let Ok(status) = waitpid(Pid::from_raw(-group.as_raw()), Some(WaitPidFlag::WNOHANG)) {
        if status == WaitStatus::StillAlive {
            break;
        }
    }
    if killpg(group, None).is_err() {
        return false;
    }
    running_in(group).unwrap_or(true)
}

/// Whether a process of `group` runs, by /proc (Linux); `None` if it cannot tell.
fn running_in(group: Pid) -> Option<bool> {
    let processes = std::fs::read_dir("/proc").ok()?;
    let group = group.as_raw().to_string();
    Some(processes.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // `pid (comm) state ppid pgrp …`: comm may hold spaces and parentheses.
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            return false;
        };
        let mut fields = rest.split(' ');
        let state = fields.next().unwrap_or("Z");
        let in_group = fields.nth(1) == Some(group.as_str());
        in_group && !matches!(state, "Z" | "X")
    }))
}

/// The command's own status; a command killed by a signal gives 128 + its number,
/// as shells report it.
fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    if let Some(code) = status.code() {
        return u8::try_from(code).unwrap_or(1);
    }
    status
        .signal()
        .and_then(|signal| u8::try_from(128 + signal).ok())
        .unwrap_or(1)
}

/// Releases the lock (resigns), retrying through resets and restarts for up to
/// [`RELEASE_TIMEOUT`] in all: a release that fails at first goes on in the
/// background, and latchkey waits for it before exiting. False if the release
/// found the lock no longer ours (true when it could not tell).
async fn release<H: Held>(held: H) -> bool {
    let deadline = tokio::time::Instant::now() + RELEASE_TIMEOUT;
    let failed = match tokio::time::timeout_at(deadline, held.let_go()).await {
        Ok(Ok(still_ours)) => return still_ours,
        Ok(Err(error)) => error.to_string(),
        Err(_) => "Redis did not answer".to_owned(),
    };
    let rest = deadline.saturating_duration_since(tokio::time::Instant::now());
    if !latchkey::finish_background_releases(rest).await {
        crate::output::errln!(
            "latchkey: could not release the lock ({failed}); it frees itself when its lease ends"
        );
    }
    true
}
