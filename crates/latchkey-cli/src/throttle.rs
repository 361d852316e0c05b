//! `throttle`: one rate-limit decision, as an exit status.

use latchkey::ratelimit::{Decision, Policy};
use serde::Serialize;

use crate::cli::{Algo, Global, ThrottleArgs};
use crate::connect;
use crate::exit::Failure;
use crate::output;
use crate::run::Wait;

/// Exit status of a call over the limit.
const DENIED: u8 = 1;

#[derive(Serialize)]
struct Report<'a> {
    key: &'a str,
    algo: Algo,
    allowed: bool,
    limit: u64,
    remaining: u64,
    retry_after_ms: Option<u64>,
    reset_after_ms: u64,
}

pub async fn throttle(global: &Global, args: ThrottleArgs) -> Result<u8, Failure> {
    connect::check_name(global, &args.key)?;
    let policy = policy(&args)?;
    if !args.peek {
        policy.check_cost(args.cost)?;
    }
    // With --wait, a Redis that is down or failing over is waited for within it.
    let wait = Wait::at_most(args.wait);
    let client = connect::retrying(wait.deadline(), || connect::client(global)).await?;
    let limiter = client.rate_limiter(&args.key, policy)?;
    let decision = match (args.peek, args.wait) {
        (true, _) => limiter.peek().await?,
        (false, Some(_)) => match wait.left() {
            Some(left) => limiter.acquire_timeout(args.cost, left).await?,
            None => limiter.acquire(args.cost).await?,
        },
        (false, None) => limiter.check(args.cost).await?,
    };
    let status = if decision.allowed { 0 } else { DENIED };
    if args.json {
        output::json(&Report {
            key: &args.key,
            algo: args.algo,
            allowed: decision.allowed,
            limit: decision.limit,
            remaining: decision.remaining,
            retry_after_ms: decision.retry_after.map(output::millis),
            reset_after_ms: output::millis(decision.reset_after),
        })?;
        return Ok(status);
    }
    crate::output::outln!("{}", summary(&args, &decision));
    if args.headers {
        for (name, value) in limiter.headers(&decision).pairs() {
            crate::output::outln!("{name}: {value}");
        }
    }
    Ok(status)
}

/// The policy the flags describe, or a usage error naming the flag that does not fit.
fn policy(args: &ThrottleArgs) -> Result<Policy, Failure> {
    if args.burst.is_some() && args.algo != Algo::Gcra {
        return Err(Failure::usage("--burst applies to --algo gcra only".into()));
    }
    let limit = match (args.algo, args.limit) {
        (Algo::Cooldown, Some(_)) => {
            return Err(Failure::usage(
                "--algo cooldown allows one call per --per; drop --limit".into(),
            ));
        }
        (Algo::Cooldown, None) => 1,
        (_, Some(limit)) => limit,
        (_, None) => {
            return Err(Failure::usage(
                "--limit is required (calls per --per)".into(),
            ));
        }
    };
    let policy = match args.algo {
        Algo::Cooldown => Policy::cooldown(args.per),
        Algo::Fixed => Policy::fixed_window(limit, args.per),
        Algo::Sliding => Policy::sliding_window(limit, args.per),
        Algo::Gcra => Policy::gcra(limit, args.per, args.burst.unwrap_or(0)),
    }?;
    Ok(policy)
}

/// One line for people: allowed or not, what is left, and when to come back.
fn summary(args: &ThrottleArgs, decision: &Decision) -> String {
    let verb = match (args.peek, decision.allowed) {
        (true, true) => "would be allowed",
        (true, false) => "would be denied",
        (false, true) => "allowed",
        (false, false) => "denied",
    };
    let rule = match args.algo {
        Algo::Cooldown => format!("1 per {}", output::human(args.per)),
        Algo::Gcra => format!(
            "{} per {}, burst {}",
            args.limit.unwrap_or(1),
            output::human(args.per),
            args.burst.unwrap_or(0)
        ),
        Algo::Fixed | Algo::Sliding => {
            format!(
                "{} per {}",
                args.limit.unwrap_or(1),
                output::human(args.per)
            )
        }
    };
    match decision.retry_after {
        None => format!(
            "{verb}: {} of {} left ({rule}); full again in {}",
            decision.remaining,
            decision.limit,
            output::human(decision.reset_after)
        ),
        Some(wait) => format!(
            "{verb}: limit reached ({rule}); retry after {}",
            output::human(wait)
        ),
    }
}
