//! `throttle`: one rate-limit decision, as an exit status.

use serde::Serialize;

use crate::cli::{Global, ThrottleArgs};
use crate::connect;
use crate::exit::Failure;
use crate::output;

/// Exit status of a call over the limit.
const DENIED: u8 = 1;

#[derive(Serialize)]
struct Report<'a> {
    key: &'a str,
    allowed: bool,
    count: u64,
    limit: u64,
    remaining: u64,
    retry_after_ms: Option<u64>,
    resets_in_ms: u64,
}

pub async fn throttle(global: &Global, args: ThrottleArgs) -> Result<u8, Failure> {
    connect::check_name(global, &args.key)?;
    latchkey::Ttl::new(args.per)?;
    let client = connect::client(global).await?;
    let decision = client
        .fixed_window(&args.key, args.limit, args.per)?
        .check()
        .await?;
    let status = if decision.allowed { 0 } else { DENIED };
    if args.json {
        output::json(&Report {
            key: &args.key,
            allowed: decision.allowed,
            count: decision.count,
            limit: decision.limit,
            remaining: decision.remaining(),
            retry_after_ms: decision.retry_after.map(output::millis),
            resets_in_ms: output::millis(decision.resets_in),
        })?;
        return Ok(status);
    }
    let window = output::human(args.per);
    match decision.retry_after {
        None => println!(
            "allowed: call {} of {} per {window}; window resets in {}",
            decision.count,
            decision.limit,
            output::human(decision.resets_in)
        ),
        Some(wait) => println!(
            "denied: limit of {} per {window} reached; retry after {}",
            decision.limit,
            output::human(wait)
        ),
    }
    Ok(status)
}
