//! The lock servers in `--sentinel` mode: a primary, its replica and three
//! Sentinels (`latchkey_testkit::Sentinels`). Workers find the primary through the
//! Sentinels and follow its failovers; faults make Sentinel fail over: asked for
//! (`SENTINEL FAILOVER`), or because the primary was killed or paused past the
//! Sentinels' down-after time (1 s). The old primary then rejoins as a replica, but
//! only seconds later: until then it still takes writes from the clients connected
//! to it, which must move to the new primary by themselves.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use latchkey_testkit::{Restart, Sentinels};

/// How long a paused primary stays paused after the Sentinels promoted its
/// replica: past the clients' 1 s reply timeout, as for a cluster.
const STALE_REQUESTS_GIVEN_UP: Duration = Duration::from_millis(1_500);

pub struct SentinelServers {
    set: Sentinels,
    primary_port: Arc<AtomicU16>,
}

impl SentinelServers {
    pub fn start() -> io::Result<Self> {
        let set = Sentinels::start()?;
        let primary_port = Arc::new(AtomicU16::new(set.primary_port()?));
        Ok(SentinelServers { set, primary_port })
    }

    /// Where workers connect: `sentinel:MASTER@URL,URL…`.
    pub fn url(&self) -> String {
        format!(
            "sentinel:{}@{}",
            self.set.master_name(),
            self.set.urls().join(",")
        )
    }

    /// The primary's port, kept current across failovers, for the sampler.
    pub fn primary_port(&self) -> Arc<AtomicU16> {
        self.primary_port.clone()
    }

    /// `SENTINEL FAILOVER`: the replica is promoted at once, without waiting for it
    /// to have every write (Sentinel fails over asynchronously replicated data).
    pub async fn fail_over(&mut self) -> io::Result<()> {
        tokio::task::block_in_place(|| {
            self.set.failover()?;
            self.settle()
        })
    }

    /// SIGKILLs the primary; once the Sentinels promoted the replica, it comes back
    /// empty and the Sentinels make it a replica of the new primary.
    pub async fn kill_primary(&mut self) -> io::Result<()> {
        let old = self.primary_port.load(Ordering::Relaxed);
        let index = self.index_of(old)?;
        tokio::task::block_in_place(|| {
            self.set.servers_mut()[index].kill()?;
            self.set.wait_for_new_primary(old)?;
            self.settle()?;
            self.set.servers_mut()[index].restart_from(Restart::Empty)
        })
    }

    /// SIGSTOPs the primary until the Sentinels promoted the replica (its clients'
    /// connections stall, no reset), then SIGCONT: it rejoins as a replica.
    pub async fn pause_primary(&mut self) -> io::Result<()> {
        let old = self.primary_port.load(Ordering::Relaxed);
        let index = self.index_of(old)?;
        tokio::task::block_in_place(|| {
            self.set.servers()[index].pause()?;
            let promoted = self
                .set
                .wait_for_new_primary(old)
                .and_then(|()| self.settle());
            std::thread::sleep(STALE_REQUESTS_GIVEN_UP);
            self.set.servers()[index].resume()?;
            promoted
        })
    }

    /// Points the sampler at the primary the Sentinels name, as soon as they name
    /// it (an old primary that is paused or not yet demoted holds stale keys).
    fn settle(&self) -> io::Result<()> {
        let port = self.set.primary_port()?;
        self.primary_port.store(port, Ordering::Relaxed);
        Ok(())
    }

    fn index_of(&self, port: u16) -> io::Result<usize> {
        self.set
            .servers()
            .iter()
            .position(|server| server.port() == port)
            .ok_or_else(|| io::Error::other(format!("no data server on port {port}")))
    }
}
