//! The rate limits from the seed post: one SMS code per phone per minute, and 5
//! downloads per IP per 10 minutes, under a burst of requests from all at once.
//!
//! The naive recipe (GET the count, compare, INCR, then EXPIRE) lets a burst
//! through: every request reads the count before any of them adds to it. latchkey's
//! limiters decide in one script, so the limit holds however many ask at once.

use std::time::Duration;

use latchkey::Client;
use latchkey::ratelimit::Policy;
use redis::AsyncCommands;

use super::redis_failure;
use crate::exit::Failure;

const PHONES: [&str; 3] = ["+15550101", "+15550102", "+15550103"];
const CODE_REQUESTS: usize = 4;
const IPS: [&str; 2] = ["10.0.0.7", "10.0.0.8"];
const DOWNLOADS: usize = 8;
const PER_IP: u64 = 5;
/// Between the naive recipe's read and its write: the window a burst needs.
const CHECKING: Duration = Duration::from_millis(20);

/// One request to a limit: which limit, whose, and whether it passed.
struct Asked {
    what: &'static str,
    who: &'static str,
    allowed: bool,
    note: String,
}

pub async fn run(url: &str, quiet: bool, unprotected: bool) -> Result<(), Failure> {
    let how = match unprotected {
        true => "the naive recipe (GET, compare, INCR, EXPIRE)",
        false => "latchkey's rate limiters",
    };
    crate::output::outln!(
        "throttle: {} SMS-code requests for each of {} phones (1 per minute), {DOWNLOADS} downloads from each of {} IPs ({PER_IP} per 10 minutes), all at once, with {how}",
        CODE_REQUESTS,
        PHONES.len(),
        IPS.len()
    );
    // Keys of this run only: a second run does not find the first one's counts.
    let run = format!("latchkey-demo:throttle:{}:", std::process::id());
    let client = Client::open(url).await?.with_prefix(&run)?;
    let mut requests = Vec::new();
    for who in PHONES {
        for _ in 0..CODE_REQUESTS {
            requests.push(("sms", who));
        }
    }
    for who in IPS {
        for _ in 0..DOWNLOADS {
            requests.push(("download", who));
        }
    }
    let tasks: Vec<_> = requests
        .into_iter()
        .map(|(what, who)| {
            let (client, url, run) = (client.clone(), url.to_owned(), run.clone());
            tokio::spawn(async move {
                match unprotected {
                    true => naive(&url, &run, what, who).await,
                    false => limited(&client, what, who).await,
                }
            })
        })
        .collect();
    let mut answers = Vec::new();
    for task in tasks {
        answers.push(
            task.await
                .map_err(|e| Failure::software(format!("a request task failed: {e}")))??,
        );
    }
    answers.sort_by_key(|a| (a.what, a.who, !a.allowed));
    for asked in answers.iter().filter(|_| !quiet) {
        let verdict = match asked.allowed {
            true => "allowed",
            false => "refused",
        };
        crate::output::outln!(
            "  {:<8} {:<10} {verdict}{}",
            asked.what,
            asked.who,
            asked.note
        );
    }
    let most = |what: &str, who: &str| {
        answers
            .iter()
            .filter(|a| a.what == what && a.who == who && a.allowed)
            .count() as u64
    };
    let sms = PHONES.map(|p| most("sms", p));
    let downloads = IPS.map(|ip| most("download", ip));
    let held = sms.iter().all(|&n| n <= 1) && downloads.iter().all(|&n| n <= PER_IP);
    if unprotected {
        cleanup(url, &run).await?;
    }
    let verdict = match held {
        true => "invariant held",
        false => "invariant broken",
    };
    crate::output::outln!(
        "{verdict}: codes sent per phone {sms:?} (at most 1 each), downloads per IP {downloads:?} (at most {PER_IP} each)"
    );
    match (held, unprotected) {
        (false, false) => Err(Failure::software("a limit let too many through".to_owned())),
        _ => Ok(()),
    }
}

/// One request through latchkey's limiter for `what`.
async fn limited(client: &Client, what: &'static str, who: &'static str) -> Result<Asked, Failure> {
    let policy = match what {
        "sms" => Policy::cooldown(Duration::from_secs(60))?.named("sms")?,
        _ => Policy::sliding_window(PER_IP, Duration::from_secs(600))?.named("downloads")?,
    };
    let limiter = client.rate_limiter(&format!("{what}:{who}"), policy)?;
    let decision = limiter.check(1).await?;
    let note = match decision.retry_after {
        Some(wait) => format!(" (retry in {})", crate::output::human(wait)),
        None => format!(" ({} left)", decision.remaining),
    };
    Ok(Asked {
        what,
        who,
        allowed: decision.allowed,
        note,
    })
}

/// One request through the naive recipe: read, compare, then count.
async fn naive(
    url: &str,
    run: &str,
    what: &'static str,
    who: &'static str,
) -> Result<Asked, Failure> {
    let (limit, window) = match what {
        "sms" => (1, 60),
        _ => (PER_IP, 600),
    };
    let key = format!("{run}naive:{what}:{who}");
    let mut conn = redis::Client::open(url)
        .map_err(redis_failure)?
        .get_multiplexed_async_connection()
        .await
        .map_err(redis_failure)?;
    let count: Option<u64> = conn.get(&key).await.map_err(redis_failure)?;
    let allowed = count.unwrap_or(0) < limit;
    if allowed {
        tokio::time::sleep(CHECKING).await;
        let _: u64 = conn.incr(&key, 1).await.map_err(redis_failure)?;
        let _: bool = conn.expire(&key, window).await.map_err(redis_failure)?;
    }
    Ok(Asked {
        what,
        who,
        allowed,
        note: String::new(),
    })
}

/// Deletes the naive recipe's counters (latchkey's expire on their own).
async fn cleanup(url: &str, run: &str) -> Result<(), Failure> {
    let mut conn = redis::Client::open(url)
        .map_err(redis_failure)?
        .get_multiplexed_async_connection()
        .await
        .map_err(redis_failure)?;
    let keys: Vec<String> = PHONES
        .iter()
        .map(|p| format!("{run}naive:sms:{p}"))
        .chain(IPS.iter().map(|ip| format!("{run}naive:download:{ip}")))
        .collect();
    let _: () = conn.del(&keys).await.map_err(redis_failure)?;
    Ok(())
}
