//! `latchkey run`: a distributed flock(1).
//!
//! Takes the lock with a renewed lease, runs the command with `LATCHKEY_FENCE` and
//! `LATCHKEY_LOCK` in its environment, passes INT, TERM and HUP on to it, and
//! releases the lock when it ends, however it ends. If the lease is lost mid-run the
//! command gets SIGTERM, then SIGKILL after `--kill-after`, and latchkey exits 70.

use std::process::ExitStatus;
use std::time::Duration;

use latchkey::{Fairness, Lease, MutexGuard};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use tokio::signal::unix::{SignalKind, signal};

use crate::cli::{Global, RunArgs};
use crate::connect;
use crate::exit::{self, Failure};

/// Exit status when the command cannot be started, as shells use.
const NOT_RUNNABLE: u8 = 127;
/// How long the final release may take before latchkey gives up on it (the lease
/// then ends on its own).
const RELEASE_TIMEOUT: Duration = Duration::from_secs(2);

pub async fn run(global: &Global, args: RunArgs) -> Result<u8, Failure> {
    let client = connect::client(global).await?;
    let fairness = match args.fair {
        true => Fairness::Fair,
        false => Fairness::Plain,
    };
    let mutex = client
        .mutex(&args.name)?
        .with_lease(Lease::renewed(args.ttl)?)
        .with_fairness(fairness);
    let guard = match (args.no_wait, args.wait) {
        (true, _) => mutex.try_lock().await?,
        (false, Some(wait)) => mutex.lock_timeout(wait).await?,
        (false, None) => mutex.lock().await?,
    };
    tracing::debug!(lock = %args.name, fence = guard.fence(), "lock taken");
    let child = match spawn(&args, &guard) {
        Ok(child) => child,
        Err(failure) => {
            release(guard).await;
            return Err(failure);
        }
    };
    let outcome = supervise(child, &guard, &args).await;
    release(guard).await;
    outcome
}

fn spawn(args: &RunArgs, guard: &MutexGuard) -> Result<Child, Failure> {
    let (program, rest) = args
        .command
        .split_first()
        .ok_or_else(|| Failure::usage("no command given after --".to_owned()))?;
    Command::new(program)
        .args(rest)
        .env("LATCHKEY_FENCE", guard.fence().to_string())
        .env("LATCHKEY_LOCK", &args.name)
        .spawn()
        .map_err(|e| Failure::with_status(NOT_RUNNABLE, format!("cannot run {program:?}: {e}")))
}

/// Waits for the child, forwarding signals, and stops it if the lease is lost.
async fn supervise(mut child: Child, guard: &MutexGuard, args: &RunArgs) -> Result<u8, Failure> {
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .map(Pid::from_raw);
    let mut interrupt = listen(SignalKind::interrupt())?;
    let mut terminate = listen(SignalKind::terminate())?;
    let mut hangup = listen(SignalKind::hangup())?;
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
                    true => Err(Failure::with_status(exit::SOFTWARE, format!("the lease on {:?} was lost; the command was stopped", args.name))),
                    false => Ok(exit_code(status)),
                };
            }
            _ = interrupt.recv() => forward(pid, Signal::SIGINT),
            _ = terminate.recv() => forward(pid, Signal::SIGTERM),
            _ = hangup.recv() => forward(pid, Signal::SIGHUP),
            () = &mut lost, if !lease_lost => {
                eprintln!("latchkey: the lease on {:?} was lost; sending SIGTERM (SIGKILL in {})", args.name, crate::output::human(args.kill_after));
                lease_lost = true;
                forward(pid, Signal::SIGTERM);
                kill_timer.as_mut().reset(tokio::time::Instant::now() + args.kill_after);
            }
            () = &mut kill_timer, if lease_lost => {
                forward(pid, Signal::SIGKILL);
                kill_timer.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(3600));
            }
        }
    }
}

fn listen(kind: SignalKind) -> Result<tokio::signal::unix::Signal, Failure> {
    signal(kind).map_err(|e| Failure::software(format!("cannot listen for signals: {e}")))
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

async fn release(guard: MutexGuard) {
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
