//! Percentiles and server-side counters.

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use serde::Serialize;

use crate::BenchError;

/// Latency percentiles of one series, in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest sample.
    pub max: u64,
}

impl Percentiles {
    /// Sorts `samples` and reads the percentiles (all zero when empty).
    pub fn of(samples: &mut [Duration]) -> Self {
        if samples.is_empty() {
            return Percentiles::default();
        }
        samples.sort_unstable();
        let at = |q: f64| micros(samples[((samples.len() - 1) as f64 * q).round() as usize]);
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

/// Every command the server ran so far (scripts' inner calls included), from
/// INFO commandstats, less the INFO calls themselves.
pub(crate) async fn commands_run(conn: &mut MultiplexedConnection) -> Result<u64, BenchError> {
    calls(conn, |name| name != "info").await
}

/// Scripts the server ran so far (EVALSHA and EVAL calls, each one round trip).
pub(crate) async fn script_calls(conn: &mut MultiplexedConnection) -> Result<u64, BenchError> {
    calls(conn, |name| matches!(name, "evalsha" | "eval")).await
}

/// Calls of the commands `counted` picks (by name), from INFO commandstats.
async fn calls(
    conn: &mut MultiplexedConnection,
    counted: impl Fn(&str) -> bool,
) -> Result<u64, BenchError> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(conn)
        .await?;
    Ok(info
        .lines()
        .filter_map(|line| line.strip_prefix("cmdstat_")?.split_once(':'))
        .filter(|(name, _)| counted(name))
        .filter_map(|(_, stats)| {
            stats
                .strip_prefix("calls=")?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum())
}

/// Clients connected to the server right now.
pub(crate) async fn connected_clients(conn: &mut MultiplexedConnection) -> Result<u64, BenchError> {
    let info: String = redis::cmd("INFO").arg("clients").query_async(conn).await?;
    info.lines()
        .find_map(|line| line.strip_prefix("connected_clients:"))
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(|| BenchError::Redis("INFO clients has no connected_clients".into()))
}

/// PING round trips, for scale.
pub(crate) async fn ping_rtt(conn: &mut MultiplexedConnection) -> Result<Percentiles, BenchError> {
    let mut samples = Vec::with_capacity(200);
    for _ in 0..200 {
        let sent = Instant::now();
        let _: String = redis::cmd("PING").query_async(conn).await?;
        samples.push(sent.elapsed());
    }
    Ok(Percentiles::of(&mut samples))
}

/// This process's resident memory in bytes, from /proc/self/status.
pub(crate) fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))?;
    Some(
        kb.trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<u64>()
            .ok()?
            * 1024,
    )
}

/// CPU time (user + system) this process has used so far.
pub(crate) fn process_cpu() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    let Ok(usage) = getrusage(UsageWho::RUSAGE_SELF) else {
        return Duration::ZERO;
    };
    let micros = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec().max(0) as u64)
            + Duration::from_micros(t.tv_usec().max(0) as u64)
    };
    micros(usage.user_time()) + micros(usage.system_time())
}

/// CPU time (user + system) the Redis server has used so far, from INFO cpu.
pub(crate) async fn redis_cpu(conn: &mut MultiplexedConnection) -> Result<Duration, BenchError> {
    let info: String = redis::cmd("INFO").arg("cpu").query_async(conn).await?;
    let seconds = |field: &str| {
        info.lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|value| value.trim().parse::<f64>().ok())
    };
    match (seconds("used_cpu_sys:"), seconds("used_cpu_user:")) {
        (Some(sys), Some(user)) => Ok(Duration::from_secs_f64(sys + user)),
        _ => Err(BenchError::Redis(
            "INFO cpu has no used_cpu_sys/used_cpu_user".into(),
        )),
    }
}

/// Wall-clock time in µs since the Unix epoch: a timeline every bench process shares.
pub(crate) fn wall_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, micros)
}
