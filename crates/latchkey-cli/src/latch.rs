//! `latchkey latch`: a count-down latch (or a barrier) from the shell.
//!
//! `--arrive` counts the latch down; `--wait D` waits for it to open (both: a
//! barrier, arrive then wait). Exit 0 when open (or after an arrival without
//! `--wait`), 75 when `--wait` ran out, 1 for a plain read of a closed latch.

use crate::cli::{Global, LatchArgs};
use crate::connect;
use crate::exit::{self, Failure};
use crate::output::outln;
use crate::run::Wait;

/// `latchkey latch NAME --count N [--arrive] [--wait D]`.
pub async fn latch(global: &Global, args: LatchArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    // One --wait for connecting, arriving and waiting.
    let wait = Wait::at_most(args.wait);
    let client = connect::retrying(wait.deadline(), || connect::client(global)).await?;
    let latch = client.latch(name, args.count)?;
    if args.arrive {
        print_left(name, latch.count_down().await?.left, args.count);
    }
    if let Some(given) = args.wait {
        // What is left of it (all of a wait too long to count).
        let left = wait.left().unwrap_or(given);
        return match latch.wait_timeout(left).await? {
            true => Ok(0),
            false => Err(Failure::with_status(
                exit::TEMPFAIL,
                format!(
                    "{name}: still closed after {}{}",
                    crate::output::human(given),
                    match args.arrive {
                        true => " (this arrival counted: wait again without --arrive)",
                        false => "",
                    }
                ),
            )),
        };
    }
    if args.arrive {
        return Ok(0);
    }
    let left = latch.left().await?;
    print_left(name, left, args.count);
    Ok(if left == 0 { 0 } else { 1 })
}

/// `NAME: open`, or `NAME: L of N left`.
fn print_left(name: &str, left: u64, count: u64) {
    match left {
        0 => outln!("{name}: open"),
        left => outln!("{name}: {left} of {count} left"),
    }
}
