//! A read-write lock's trades: what a writer's downgrade and an upgradeable read's
//! upgrade cost, uncontended.
//!
//! - `write-downgrade-release`: one task, `write()`, `downgrade()`, `release()`.
//! - `upgradeable-upgrade-release`: one task, `upgradeable_read()`, `upgrade()`,
//!   `release()` (the read and the rest of the permits).

use std::time::Duration;

use indicatif::ProgressBar;

use super::timed::counted_loop;
use crate::BenchError;
use crate::figures::Figures;

const SCENARIO: &str = "rwlock";

pub(crate) const STEPS: u64 = 2;

pub(crate) async fn run(
    url: &str,
    duration: Duration,
    progress: &ProgressBar,
) -> Result<Vec<Figures>, BenchError> {
    let lock = latchkey::Client::open(url).await?.rw_lock("bench:rw")?;
    progress.set_message(format!("{SCENARIO}: write-downgrade-release"));
    let downgrade = counted_loop(
        url,
        duration,
        (SCENARIO, "write-downgrade-release"),
        || async {
            let write = lock.write().await?;
            lock.downgrade(write).await?.release().await?;
            Ok(())
        },
    )
    .await?;
    progress.inc(1);
    progress.set_message(format!("{SCENARIO}: upgradeable-upgrade-release"));
    let upgrade = counted_loop(
        url,
        duration,
        (SCENARIO, "upgradeable-upgrade-release"),
        || async {
            let mut guard = lock.upgradeable_read().await?;
            guard.upgrade().await?;
            guard.release().await?;
            Ok(())
        },
    )
    .await?;
    progress.inc(1);
    Ok(vec![downgrade, upgrade])
}
