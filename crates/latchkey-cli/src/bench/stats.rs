//! Percentiles and counters for the benchmark report.

use std::time::Duration;

/// Latency percentiles of one series, in microseconds.
#[derive(Clone, Copy, Debug, Default)]
pub struct Percentiles {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl Percentiles {
    pub fn of(samples: &mut [Duration]) -> Self {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort_unstable();
        let at = |q: f64| {
            let index = ((samples.len() - 1) as f64 * q).round() as usize;
            micros(samples[index])
        };
        Percentiles {
            p50: at(0.50),
            p99: at(0.99),
            max: micros(samples[samples.len() - 1]),
        }
    }
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Every command the server ran (scripts' inner calls included), from INFO commandstats.
pub async fn commands_run(conn: &mut redis::aio::MultiplexedConnection) -> redis::RedisResult<u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    Ok(info
        .lines()
        .filter(|line| line.starts_with("cmdstat_") && !line.starts_with("cmdstat_info:"))
        .filter_map(|line| {
            line.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum())
}
