//! The lock servers in `--quorum N` mode: N independent masters, each behind a
//! proxy of its own (so the network to one master can fail), each keeping an
//! append-only file. Faults hit one master, or a minority of them at once.

use std::io;
use std::time::Duration;

use latchkey_testkit::{FaultProxy, RedisServer, Restart};
use rand::Rng;
use rand::seq::index::sample;

use crate::lock_servers::retried;

/// The clock step of the quorum's fencing proposals: a master that restarted empty
/// stays out for a lease plus this (docs/quorum-fencing.md).
const CLOCK_STEP: Duration = Duration::from_secs(1);

pub struct QuorumServers {
    masters: Vec<RedisServer>,
    proxies: Vec<FaultProxy>,
}

impl QuorumServers {
    pub fn start(count: usize) -> io::Result<Self> {
        let masters = (0..count)
            .map(|_| RedisServer::builder().aof().start())
            .collect::<io::Result<Vec<_>>>()?;
        let proxies = masters
            .iter()
            .map(|master| FaultProxy::start(master.port()))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(QuorumServers { masters, proxies })
    }

    /// Where workers connect: `quorum:` and the proxies' URLs, comma-separated.
    pub fn url(&self) -> String {
        let urls: Vec<String> = self.proxies.iter().map(FaultProxy::url).collect();
        format!("quorum:{}", urls.join(","))
    }

    /// The masters' own ports, for the sampler (not through the proxies).
    pub fn ports(&self) -> Vec<u16> {
        self.masters.iter().map(RedisServer::port).collect()
    }

    /// A random master's index.
    pub fn pick(&self, rng: &mut impl Rng) -> usize {
        rng.random_range(0..self.masters.len())
    }

    pub fn proxy(&self, master: usize) -> &FaultProxy {
        &self.proxies[master]
    }

    pub fn proxies(&self) -> &[FaultProxy] {
        &self.proxies
    }

    /// SIGSTOPs as many masters as a quorum can lose (a minority) for `long`.
    pub async fn pause_minority(&self, long: Duration, rng: &mut impl Rng) -> io::Result<()> {
        let count = self.masters.len();
        let paused: Vec<usize> = sample(rng, count, (count - 1) / 2).into_vec();
        for &master in &paused {
            self.masters[master].pause()?;
        }
        tokio::time::sleep(long).await;
        for &master in &paused {
            self.masters[master].resume()?;
        }
        Ok(())
    }

    /// SIGSTOPs one master for `long`.
    pub async fn pause_one(&self, long: Duration, rng: &mut impl Rng) -> io::Result<()> {
        let master = self.pick(rng);
        self.masters[master].pause()?;
        tokio::time::sleep(long).await;
        self.masters[master].resume()
    }

    /// Kills one master and restarts it empty after the documented delay: longer
    /// than a lease (`ttl`, renewed leases included) plus the clock step.
    pub async fn restart_late(&mut self, ttl: Duration, rng: &mut impl Rng) -> io::Result<()> {
        let master = self.pick(rng);
        tokio::task::block_in_place(|| self.masters[master].kill())?;
        tokio::time::sleep(ttl * 3 + CLOCK_STEP).await;
        let master = &mut self.masters[master];
        retried(|| master.restart_from(Restart::Empty)).await
    }

    /// Kills one master and restarts it at once from its append-only file (a SIGKILL
    /// loses nothing the OS had been handed).
    pub async fn kill_one(&mut self, rng: &mut impl Rng) -> io::Result<()> {
        let master = self.pick(rng);
        let master = &mut self.masters[master];
        retried(|| master.restart_from(Restart::Aof)).await
    }

    /// CLIENT KILL every normal and pub/sub connection of every master.
    pub fn client_kill(&self) {
        self.masters.iter().for_each(crate::faults::client_kill);
    }
}
