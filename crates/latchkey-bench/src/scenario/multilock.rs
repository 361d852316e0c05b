//! Several locks at once: what taking two locks together costs next to one, and
//! how callers naming the same two locks in opposite orders share them.
//!
//! - `one-lock`: one task, `lock()` + `release()` of one lock: the reference.
//! - `two-locks`: one task, a multi-lock of two free locks: `lock()` + `release()`.
//! - `opposite-orders`: four tasks on two clients, two naming `[a, b]` and two
//!   `[b, a]`, each in a loop: a sample is one acquisition's wait; a deadlock would
//!   stall the run (it fails after [`ROUND_LIMIT`]).

use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use super::timed::{TimedRun, counted_loop};
use crate::BenchError;
use crate::figures::Figures;
use crate::stats::process_cpu;

/// How long one acquisition may wait before the run counts as broken (deadlocked).
const ROUND_LIMIT: Duration = Duration::from_secs(10);
const SCENARIO: &str = "multilock";

pub(crate) const STEPS: u64 = 3;

pub(crate) async fn run(
    url: &str,
    duration: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Figures>, BenchError> {
    let client = latchkey::Client::open(url).await?;
    progress.set_message(format!("{SCENARIO}: one-lock"));
    let one = client.mutex("bench:multi:alone")?;
    let alone = counted_loop(url, duration, (SCENARIO, "one-lock"), || async {
        one.lock().await?.release().await?;
        Ok(())
    })
    .await?;
    progress.inc(1);
    progress.set_message(format!("{SCENARIO}: two-locks"));
    let two = client.multi_lock(["bench:multi:x", "bench:multi:y"])?;
    let both = counted_loop(url, duration, (SCENARIO, "two-locks"), || async {
        two.lock().await?.release().await?;
        Ok(())
    })
    .await?;
    progress.inc(1);
    progress.set_message(format!("{SCENARIO}: opposite-orders"));
    let crossed = opposite_orders(url, duration).await?;
    progress.inc(1);
    Ok(vec![alone, both, crossed])
}

async fn opposite_orders(url: &str, duration: Duration) -> Result<Figures, BenchError> {
    let clients = [
        latchkey::Client::open(url).await?,
        latchkey::Client::open(url).await?,
    ];
    let orders = [
        ["bench:multi:a", "bench:multi:b"],
        ["bench:multi:b", "bench:multi:a"],
    ];
    let (started, cpu_before) = (Instant::now(), process_cpu());
    let mut tasks = Vec::new();
    for task in 0..4 {
        let set = clients[task % 2].multi_lock(orders[task / 2])?;
        tasks.push(tokio::spawn(async move {
            let mut waits = Vec::new();
            while started.elapsed() < duration {
                let began = Instant::now();
                let both = set.lock_timeout(ROUND_LIMIT).await?;
                waits.push(began.elapsed());
                both.release().await?;
            }
            Ok::<_, latchkey::Error>(waits)
        }));
    }
    let run = TimedRun::gather(tasks, started, cpu_before).await?;
    Ok(run.figures(SCENARIO, "opposite-orders"))
}
