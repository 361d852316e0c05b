//! `acquire`, `extend` and `release --token`: a hold that outlives one process, for
//! scripts whose steps run as separate commands (and jobs handed between hosts).

use std::io::Write;

use latchkey::{Error, Fairness, Fencing, HoldToken, Lease};
use serde::Serialize;

use crate::cli::{AcquireArgs, ExtendArgs, Global, ReleaseArgs};
use crate::connect;
use crate::exit::Failure;
use crate::output;
use crate::run::{self, Wait};

/// What `acquire --json` prints.
#[derive(Serialize)]
struct Acquired<'a> {
    name: &'a str,
    token: String,
    fence: Option<u64>,
    ttl_ms: u64,
}

/// `acquire NAME`: takes the lock with a fixed lease of `--ttl` and leaves it held,
/// printing the hold's token.
pub async fn acquire(global: &Global, args: AcquireArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    one_deployment(global)?;
    let lease = Lease::fixed(args.take.ttl)?;
    let wait = Wait::from(&args.take);
    // A signal while waiting leaves the queue, as `run` does.
    let mut signals = run::Signals::listen()?;
    let fairness = match args.fair {
        true => Fairness::Fair,
        false => Fairness::Plain,
    };
    connect::with_client!(global, until wait.deadline(), client => {
        // The token printed carries the fencing token: computed with the grant.
        let mutex = client
            .mutex(name)?
            .with_lease(lease)
            .with_fairness(fairness)
            .with_fencing(Fencing::OnGrant);
        let token = run::wait_for(run::take(&mutex, wait), wait, &format!("{name:?}"), &mut signals).await?.detach()?;
        if let Err(error) = print_token(name, &token, &args) {
            // Nobody will ever have the token: give the lock back now.
            let _ = mutex.release_held(&token).await;
            return Err(error);
        }
    });
    Ok(0)
}

/// Prints the token (or the JSON object), failing if stdout does not take it.
fn print_token(name: &str, token: &HoldToken, args: &AcquireArgs) -> Result<(), Failure> {
    let line = match args.json {
        false => token.to_string(),
        true => serde_json::to_string(&Acquired {
            name,
            token: token.to_string(),
            fence: token.fence(),
            ttl_ms: output::millis(args.take.ttl),
        })
        .map_err(|e| Failure::software(format!("cannot encode JSON: {e}")))?,
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{line}")
        .and_then(|()| stdout.flush())
        .map_err(|e| {
            Failure::software(format!(
                "cannot print the hold token ({e}); the lock was released"
            ))
        })
}

/// `extend NAME --token T`: resets the hold's lease to `--ttl` from now.
pub async fn extend(global: &Global, args: ExtendArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    one_deployment(global)?;
    let token = parse(&args.token)?;
    // The bounds extend_held checks, checked before connecting as every value is.
    Lease::fixed(args.ttl).map_err(|error| Failure::usage(format!("--ttl: {error}")))?;
    connect::with_client!(global, client => {
        client.mutex(name)?.extend_held(&token, args.ttl).await.map_err(|error| match error {
            Error::LeaseLost { .. } => lost(name),
            other => other.into(),
        })?
    });
    Ok(0)
}

/// `release NAME --token T`: frees the hold, handing the lock to the next waiter.
pub async fn release(global: &Global, args: &ReleaseArgs, token: &str) -> Result<u8, Failure> {
    let name = args.name.as_str();
    if args.kind.is_some() {
        return Err(Failure::usage(
            "--kind goes with --force; a hold token releases the lock it was printed for"
                .to_owned(),
        ));
    }
    connect::check_name(global, name)?;
    one_deployment(global)?;
    let token = parse(token)?;
    let released = connect::with_client!(global, client => {
        client.mutex(name)?.release_held(&token).await?
    });
    if args.json {
        output::json(&serde_json::json!({ "name": name, "released": released }))?;
    }
    match released {
        true => Ok(0),
        false => Err(lost(name)),
    }
}

fn parse(token: &str) -> Result<HoldToken, Failure> {
    token
        .parse()
        .map_err(|e: Error| Failure::usage(e.to_string()))
}

/// A hold that is gone, said for an operator: the work done under it may overlap
/// the next holder's.
fn lost(name: &str) -> Failure {
    Failure::software(format!(
        "lock {name:?} is no longer held by this token (its lease ended, or it was broken): \
         work done under it may overlap the next holder's"
    ))
}

/// A hold handed between processes lives on one Redis deployment: a quorum's cannot
/// be (its value and proposals live in the client that took it). Checked before
/// connecting, so `acquire` never takes a lock it must then give back.
fn one_deployment(global: &Global) -> Result<(), Failure> {
    match connect::deployment(global)? {
        connect::Deployment::Quorum(_) => Err(Failure::usage(
            "a hold token works on one Redis deployment, not a quorum of masters: on a quorum, use `latchkey run`".to_owned(),
        )),
        _ => Ok(()),
    }
}
