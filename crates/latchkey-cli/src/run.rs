//! `latchkey run`: a distributed flock(1).
//!
//! Takes the lock with a renewed lease, runs the command with `LATCHKEY_FENCE` and
//! `LATCHKEY_LOCK` in its environment, passes INT, TERM, HUP, QUIT, USR1, USR2 and
//! ALRM on to it, and
//! releases the lock when it ends, however it ends. If the lease is lost mid-run the
//! command gets SIGTERM, then SIGKILL after `--kill-after`, and latchkey exits 70.
//! A signal that arrives while latchkey still waits for the lock makes it leave the
//! wait queue and exit 128 + N.

use std::process::ExitStatus;
use std::time::Duration;

use latchkey::store::{Pass, WakeUps};
use latchkey::{Fairness, Lease, MutexGuard};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::{Global, HoldArgs, RunArgs, RwRunArgs, SemRunArgs};
use crate::connect;
use crate::exit::{self, Failure};

/// Exit statuses when the command cannot be started, as shells use them.
const NOT_EXECUTABLE: u8 = 126;
const NOT_FOUND: u8 = 127;
/// How long the final release (or leaving the queue) may take before latchkey gives
/// up on it (the lease, or the waiter lease, then ends on its own).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn run(global: &Global, args: RunArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    let lease = Lease::renewed(args.hold.ttl)?;
    // From here on those signals are ours to handle: while waiting, by leaving the
    // queue; while the command runs, by passing them on.
    let signals = Signals::listen()?;
    connect::with_client!(global, client => {
        let fairness = match args.fair {
            true => Fairness::Fair,
            false => Fairness::Plain,
        };
        let mutex = client.mutex(name)?.with_lease(lease).with_fairness(fairness);
        let taking = async {
            match wait(&args.hold) {
                Wait::Now => mutex.try_lock().await,
                Wait::Within(wait) => mutex.lock_timeout(wait).await,
                Wait::Forever => mutex.lock().await,
            }
        };
        hold_and_run(taking, name, &args.hold, signals).await
    })
}

/// `sem run`: the same, holding `--weight` of a semaphore's `--permits`.
pub async fn sem_run(global: &Global, args: SemRunArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    let lease = Lease::renewed(args.hold.ttl)?;
    if args.weight > args.permits {
        return Err(Failure::usage(format!(
            "--weight {} is more than the semaphore's --permits {}",
            args.weight, args.permits
        )));
    }
    let signals = Signals::listen()?;
    let client = connect::client(global).await?;
    let semaphore = client.semaphore(name, args.permits)?.with_lease(lease);
    let taking = async {
        match wait(&args.hold) {
            Wait::Now => semaphore.try_acquire(args.weight).await,
            Wait::Within(wait) => semaphore.acquire_timeout(args.weight, wait).await,
            Wait::Forever => semaphore.acquire(args.weight).await,
        }
    };
    hold_and_run(taking, name, &args.hold, signals).await
}

/// `rw run`: the same, holding a read-write lock to read or to write.
pub async fn rw_run(global: &Global, args: RwRunArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    let lease = Lease::renewed(args.hold.ttl)?;
    let signals = Signals::listen()?;
    let client = connect::client(global).await?;
    let lock = client.rw_lock(name)?.with_lease(lease);
    let taking = async {
        match (args.write, wait(&args.hold)) {
            (false, Wait::Now) => lock.try_read().await,
            (false, Wait::Within(wait)) => lock.read_timeout(wait).await,
            (false, Wait::Forever) => lock.read().await,
            (true, Wait::Now) => lock.try_write().await,
            (true, Wait::Within(wait)) => lock.write_timeout(wait).await,
            (true, Wait::Forever) => lock.write().await,
        }
    };
    hold_and_run(taking, name, &args.hold, signals).await
}

/// How long the options say to wait.
enum Wait {
    Now,
    Within(Duration),
    Forever,
}

fn wait(hold: &HoldArgs) -> Wait {
    match (hold.no_wait, hold.wait) {
        (true, _) => Wait::Now,
        (false, Some(wait)) => Wait::Within(wait),
        (false, None) => Wait::Forever,
    }
}

/// Waits for `taking` (a lock, permits, a read or write lock), then runs the
/// command under the guard it gives.
async fn hold_and_run<S: Pass + WakeUps>(
    taking: impl Future<Output = latchkey::Result<MutexGuard<S>>>,
    name: &str,
    hold: &HoldArgs,
    mut signals: Signals,
) -> Result<u8, Failure> {
    let guard = tokio::select! {
        taken = taking => taken?,
        signal = signals.recv() => return Err(interrupted(signal, name).await),
    };
    tracing::debug!(lock = %name, fence = guard.fence(), "taken");
    let child = match spawn(name, hold, &guard) {
        Ok(child) => child,
        Err(failure) => {
            release(guard).await;
            return Err(failure);
        }
    };
    let outcome = supervise(child, &guard, name, hold, &mut signals).await;
    release(guard).await;
    outcome
}

/// A signal ended the wait: the dropped wait leaves the queue in the background;
/// let it finish before the process exits, and exit as a shell would, 128 + N.
async fn interrupted(signal: Signal, name: &str) -> Failure {
    let left = latchkey::finish_background_releases(RELEASE_TIMEOUT).await;
    let queue = match left {
        true => "left the wait queue",
        false => {
            "Redis did not confirm leaving the wait queue; the entry expires with its waiter lease"
        }
    };
    Failure::with_status(
        128 + signal as u8,
        format!("{signal} while waiting for {name:?}: {queue}"),
    )
}

fn spawn<S: Pass + WakeUps>(
    name: &str,
    hold: &HoldArgs,
    guard: &MutexGuard<S>,
) -> Result<Child, Failure> {
    let (program, rest) = hold
        .command
        .split_first()
        .ok_or_else(|| Failure::usage("no command given after --".to_owned()))?;
    Command::new(program)
        .args(rest)
        .env("LATCHKEY_FENCE", guard.fence().to_string())
        .env("LATCHKEY_LOCK", name)
        .spawn()
        .map_err(|e| {
            let status = match e.kind() {
                std::io::ErrorKind::PermissionDenied => NOT_EXECUTABLE,
                _ => NOT_FOUND,
            };
            Failure::with_status(status, format!("cannot run {program:?}: {e}"))
        })
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

/// The caught signals, as they arrive.
struct Signals(tokio::sync::mpsc::UnboundedReceiver<Signal>);

impl Signals {
    fn listen() -> Result<Self, Failure> {
        let (sender, receiver) = tokio::sync::mpsc::unbounded_channel();
        for caught in CAUGHT {
            let mut stream = signal(SignalKind::from_raw(caught as i32))
                .map_err(|e| Failure::software(format!("cannot listen for {caught}: {e}")))?;
            let sender = sender.clone();
            tokio::spawn(async move {
                while stream.recv().await.is_some() && sender.send(caught).is_ok() {}
            });
        }
        Ok(Signals(receiver))
    }

    async fn recv(&mut self) -> Signal {
        // The listening tasks live as long as the runtime, so the channel stays open.
        self.0.recv().await.unwrap_or(Signal::SIGTERM)
    }
}

/// Waits for the child, forwarding signals, and stops it if the lease is lost.
async fn supervise<S: Pass + WakeUps>(
    mut child: Child,
    guard: &MutexGuard<S>,
    name: &str,
    hold: &HoldArgs,
    signals: &mut Signals,
) -> Result<u8, Failure> {
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let lost = guard.lost();
    tokio::pin!(lost);
    let mut lease_lost = false;
    let kill_timer = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(kill_timer);
    loop {
        tokio::select! {
            status = child.wait() => {
                let status = status.map_err(|e| Failure::software(format!("lost track of the command: {e}")))?;
                return match lease_lost {
                    true => Err(Failure::with_status(exit::SOFTWARE, format!("the lease on {name:?} was lost; the command was stopped"))),
                    false => Ok(exit_code(status)),
                };
            }
            signal = signals.recv() => forward(pid, signal),
            () = &mut lost, if !lease_lost => {
                eprintln!("latchkey: the lease on {name:?} was lost; sending SIGTERM (SIGKILL in {})", crate::output::human(hold.kill_after));
                lease_lost = true;
                forward(pid, Signal::SIGTERM);
                kill_timer.as_mut().reset(tokio::time::Instant::now() + hold.kill_after);
            }
            () = &mut kill_timer, if lease_lost => {
                forward(pid, Signal::SIGKILL);
                kill_timer.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(3600));
            }
        }
    }
}

fn forward(pid: Option<Pid>, signal: Signal) {
    let Some(pid) = pid else {
        return;
    };
    if let Err(error) = kill(pid, signal) {
        tracing::debug!(%error, ?signal, "could not signal the command (it may have exited)");
    }
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

async fn release<S: Pass + WakeUps>(guard: MutexGuard<S>) {
    match tokio::time::timeout(RELEASE_TIMEOUT, guard.release()).await {
        Ok(Ok(_)) => {}
        Ok(Err(error)) => eprintln!(
            "latchkey: could not release the lock ({error}); it frees itself when its lease ends"
        ),
        Err(_) => eprintln!(
            "latchkey: Redis did not answer the release; the lock frees itself when its lease ends"
        ),
    }
}
