//! What the figures were measured on.

use std::fmt;

use serde::Serialize;

use crate::BenchError;

/// The machine and server a report was measured on.
#[derive(Clone, Debug, Serialize)]
pub struct Machine {
    /// CPU model, from /proc/cpuinfo.
    pub cpu: String,
    /// Logical cores available to this process.
    pub cores: usize,
    /// Total memory in bytes, from /proc/meminfo.
    pub memory_bytes: u64,
    /// `os` and `arch` as Rust sees them.
    pub os: String,
    /// The Redis server's version.
    pub redis_version: String,
}

impl Machine {
    pub(crate) async fn read(url: &str) -> Result<Self, BenchError> {
        let mut conn = crate::connect(url).await?;
        let info: String = redis::cmd("INFO")
            .arg("server")
            .query_async(&mut conn)
            .await?;
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
        Ok(Machine {
            cpu: field(&cpuinfo, "model name", ':').unwrap_or_else(|| "unknown".into()),
            cores: std::thread::available_parallelism().map_or(1, usize::from),
            memory_bytes: field(&meminfo, "MemTotal", ':')
                .and_then(|kb| kb.trim_end_matches(" kB").parse::<u64>().ok())
                .map_or(0, |kb| kb * 1024),
            os: format!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
            redis_version: field(&info, "redis_version", ':').unwrap_or_else(|| "unknown".into()),
        })
    }
}

fn field(text: &str, name: &str, separator: char) -> Option<String> {
    text.lines()
        .find(|line| line.starts_with(name))
        .and_then(|line| line.split_once(separator))
        .map(|(_, value)| value.trim().to_owned())
}

impl fmt::Display for Machine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "machine: {}, {} cores, {} GiB, {}; redis {}",
            self.cpu,
            self.cores,
            self.memory_bytes >> 30,
            self.os,
            self.redis_version
        )
    }
}
