//! How soon a waiter gets a lock after its holder lets go, when the holder is
//! latchkey (whose release wakes the waiter through pub/sub) and when it is another
//! library (a plain `SET NX PX` and `DEL`, as redis-py's Lock or redsync do, whose
//! release wakes nobody: the waiter must notice it by re-checking).
//!
//! One waiter and one holder, each its own client (so nothing passes in-process),
//! in rounds: the holder takes the lock, the waiter queues, the holder lets go after
//! a random 20–120 ms (so releases do not line up with any re-check period), and the
//! time from the release to the waiter holding the lock is one sample.

use std::time::{Duration, Instant};

use indicatif::ProgressBar;
use redis::aio::MultiplexedConnection;

use crate::BenchError;
use crate::figures::Figures;
use crate::stats::{Percentiles, commands_run};

const KEY: &str = "bench:wakeup";
/// How long the waiter may wait in one round before the run counts as broken.
const ROUND_LIMIT: Duration = Duration::from_secs(10);

/// Who holds the lock the waiter waits for.
#[derive(Clone, Copy)]
enum Holder {
    Latchkey,
    OtherLibrary,
}

impl Holder {
    fn name(self) -> &'static str {
        match self {
            Holder::Latchkey => "after-latchkey",
            Holder::OtherLibrary => "after-other-lib",
        }
    }
}

pub(crate) async fn run(
    url: &str,
    duration: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Figures>, BenchError> {
    let mut figures = Vec::new();
    for holder in [Holder::Latchkey, Holder::OtherLibrary] {
        progress.set_message(format!("wakeup: {}", holder.name()));
        figures.push(measure(url, duration, holder).await?);
        progress.inc(1);
    }
    Ok(figures)
}

async fn measure(url: &str, duration: Duration, holder: Holder) -> Result<Figures, BenchError> {
    let mut admin = crate::connect(url).await?;
    let mut theirs = crate::connect(url).await?;
    let holding = latchkey::Client::open(url).await?.mutex(KEY)?;
    let waiting = latchkey::Client::open(url).await?.mutex(KEY)?;
    let commands_before = commands_run(&mut admin).await?;
    let started = Instant::now();
    let mut gaps = Vec::new();
    let mut round: u64 = 0;
    while started.elapsed() < duration {
        round += 1;
        let release = take(holder, &holding, &mut theirs).await?;
        let mutex = waiting.clone();
        let waiter = tokio::spawn(async move {
            let guard = mutex.lock_timeout(ROUND_LIMIT).await?;
            let got = Instant::now();
            guard.release().await?;
            Ok::<_, BenchError>(got)
        });
        // A cheap spread of 20–120 ms, different every round.
        let hold = 20 + (round.wrapping_mul(2_654_435_761) >> 7) % 101;
        tokio::time::sleep(Duration::from_millis(hold)).await;
        let released = Instant::now();
        release.run(&mut theirs).await?;
        let got = waiter
            .await
            .map_err(|e| BenchError::Check(format!("the waiter failed: {e}")))??;
        gaps.push(got.saturating_duration_since(released));
    }
    let commands = commands_run(&mut admin).await? - commands_before;
    let rate = gaps.len() as f64 / started.elapsed().as_secs_f64().max(1e-9);
    Ok(Figures {
        redis_cmds_per_op: commands as f64 / round.max(1) as f64,
        ..Figures::timed("wakeup", holder.name(), rate, Percentiles::of(&mut gaps))
    })
}

/// A held lock, and how its holder lets go.
enum Release {
    Latchkey(latchkey::MutexGuard),
    OtherLibrary,
}

impl Release {
    async fn run(self, theirs: &mut MultiplexedConnection) -> Result<(), BenchError> {
        match self {
            Release::Latchkey(guard) => {
                guard.release().await?;
            }
            Release::OtherLibrary => {
                let _: i64 = redis::cmd("DEL").arg(KEY).query_async(theirs).await?;
            }
        }
        Ok(())
    }
}

async fn take(
    holder: Holder,
    holding: &latchkey::Mutex,
    theirs: &mut MultiplexedConnection,
) -> Result<Release, BenchError> {
    match holder {
        Holder::Latchkey => Ok(Release::Latchkey(holding.lock().await?)),
        Holder::OtherLibrary => {
            let _: () = redis::cmd("SET")
                .arg(KEY)
                .arg("their-token")
                .arg("PX")
                .arg(30_000)
                .query_async(theirs)
                .await?;
            Ok(Release::OtherLibrary)
        }
    }
}
