//! Leader election: what a leadership costs, and how soon the next leader leads and
//! followers hear of it when a leader resigns.
//!
//! - `campaign-resign`: one candidate alone, campaign + resign in a loop: the
//!   latency of a whole term, and the Redis commands it takes.
//! - `takeover`: a leader resigns while another candidate waits in line (its own
//!   client, so nothing passes in-process); one sample is the time from the
//!   resignation's start to the successor holding its leadership.
//! - `observer-told`: the time from that resignation's start to an observer (a
//!   third client) returning the successor.

use std::time::{Duration, Instant};

use indicatif::ProgressBar;

use super::timed::counted_loop;
use crate::BenchError;
use crate::figures::Figures;
use crate::stats::Percentiles;

const NAME: &str = "bench:election";
/// How long one round may take before the run counts as broken.
const ROUND_LIMIT: Duration = Duration::from_secs(10);

pub(crate) const STEPS: u64 = 2;

pub(crate) async fn run(
    url: &str,
    duration: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Figures>, BenchError> {
    progress.set_message("election: campaign-resign");
    let alone = campaign_resign(url, duration).await?;
    progress.inc(1);
    progress.set_message("election: takeover");
    let (takeover, told) = takeover(url, duration).await?;
    progress.inc(1);
    Ok(vec![alone, takeover, told])
}

async fn campaign_resign(url: &str, duration: Duration) -> Result<Figures, BenchError> {
    let election = latchkey::Client::open(url).await?.election(NAME)?;
    counted_loop(url, duration, ("election", "campaign-resign"), || async {
        election.campaign("bench").await?.resign().await?;
        Ok(())
    })
    .await
}

/// Rounds of a leader resigning to a waiting successor, watched by an observer.
async fn takeover(url: &str, duration: Duration) -> Result<(Figures, Figures), BenchError> {
    let leader = latchkey::Client::open(url).await?.election(NAME)?;
    let successor = latchkey::Client::open(url).await?.election(NAME)?;
    let mut observer = latchkey::Client::open(url)
        .await?
        .election(NAME)?
        .observe()?;
    expect(&mut observer, None).await?;
    let started = Instant::now();
    let (mut takeovers, mut told) = (Vec::new(), Vec::new());
    while started.elapsed() < duration {
        let leading = leader.campaign("first").await?;
        expect(&mut observer, Some("first")).await?;
        let next = successor.clone();
        let waiting = tokio::spawn(async move {
            let leadership = next.campaign_timeout("second", ROUND_LIMIT).await?;
            Ok::<_, latchkey::Error>((leadership, Instant::now()))
        });
        // Let the successor queue behind the leader.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let resigned = Instant::now();
        leading.resign().await?;
        let heard = expect(&mut observer, Some("second")).await?;
        let (second, led) = waiting
            .await
            .map_err(|e| BenchError::Check(format!("the successor failed: {e}")))??;
        takeovers.push(led.saturating_duration_since(resigned));
        told.push(heard.saturating_duration_since(resigned));
        second.resign().await?;
        expect(&mut observer, None).await?;
    }
    let rate = takeovers.len() as f64 / started.elapsed().as_secs_f64().max(1e-9);
    Ok((
        Figures::timed(
            "election",
            "takeover",
            rate,
            Percentiles::of(&mut takeovers),
        ),
        Figures::timed(
            "election",
            "observer-told",
            rate,
            Percentiles::of(&mut told),
        ),
    ))
}

/// Waits until `observer` returns the leader campaigning with `value` (`None`:
/// nobody leads); when it did.
async fn expect(
    observer: &mut latchkey::election::Observer,
    value: Option<&str>,
) -> Result<Instant, BenchError> {
    let deadline = tokio::time::Instant::now() + ROUND_LIMIT;
    loop {
        let changed = tokio::time::timeout_at(deadline, observer.changed())
            .await
            .map_err(|_| BenchError::Check(format!("the observer was not told of {value:?}")))??;
        if changed.as_ref().map(|leader| leader.value.as_str()) == value {
            return Ok(Instant::now());
        }
    }
}
