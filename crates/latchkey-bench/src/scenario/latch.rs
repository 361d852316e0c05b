//! Count-down latches: what a count down costs, and how soon a waiter on another
//! client returns once the last count down opened the latch.
//!
//! - `count-down`: one task, one latch of a count it never reaches, count downs
//!   in a loop: the latency of one, and the Redis commands it takes.
//! - `opened-to-waiter`: rounds on a fresh latch of 2, a waiter (its own client)
//!   waiting on it; one sample is the time from the start of the count down that
//!   opens it to the waiter's return.

use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use super::timed::counted_loop;
use crate::BenchError;
use crate::figures::Figures;
use crate::stats::Percentiles;

/// How long one round may take before the run counts as broken.
const ROUND_LIMIT: Duration = Duration::from_secs(10);

pub(crate) const STEPS: u64 = 2;

pub(crate) async fn run(
    url: &str,
    duration: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Figures>, BenchError> {
    progress.set_message("latch: count-down");
    let counting = count_down(url, duration).await?;
    progress.inc(1);
    progress.set_message("latch: opened-to-waiter");
    let waking = opened_to_waiter(url, duration).await?;
    progress.inc(1);
    Ok(vec![counting, waking])
}

async fn count_down(url: &str, duration: Duration) -> Result<Figures, BenchError> {
    let latch = latchkey::Client::open(url)
        .await?
        .latch("bench:latch:count-down", latchkey::latch::MAX_COUNT)?;
    counted_loop(url, duration, ("latch", "count-down"), || async {
        latch.count_down().await?;
        Ok(())
    })
    .await
}

async fn opened_to_waiter(url: &str, duration: Duration) -> Result<Figures, BenchError> {
    let counter = latchkey::Client::open(url).await?;
    let waiter = latchkey::Client::open(url).await?;
    let started = Instant::now();
    let mut gaps = Vec::new();
    let mut round: u64 = 0;
    while started.elapsed() < duration {
        round += 1;
        let name = format!("bench:latch:{round}");
        let waiting = waiter.latch(&name, 2)?;
        let woken = tokio::spawn(async move {
            let open = waiting.wait_timeout(ROUND_LIMIT).await?;
            Ok::<_, latchkey::Error>((open, Instant::now()))
        });
        let latch = counter.latch(&name, 2)?;
        latch.count_down().await?;
        // Let the waiter listen first.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let opening = Instant::now();
        latch.count_down().await?;
        let (open, at) = woken
            .await
            .map_err(|e| BenchError::Check(format!("the waiter failed: {e}")))??;
        if !open {
            return Err(BenchError::Check(format!(
                "the latch {name} never opened for its waiter"
            )));
        }
        gaps.push(at.saturating_duration_since(opening));
    }
    let rate = gaps.len() as f64 / started.elapsed().as_secs_f64().max(1e-9);
    Ok(Figures::timed(
        "latch",
        "opened-to-waiter",
        rate,
        Percentiles::of(&mut gaps),
    ))
}
