//! The lock server the workers reach through the harness's proxy: a primary with one
//! replica, both keeping an append-only file, so a fault can restart the primary from
//! any state, fail over to the replica, or cut the network in between.

use std::io;
use std::sync::Arc;
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::Duration;

use latchkey_testkit::{FaultProxy, RedisServer, Restart};

/// Attempts at a restart before the run gives up (a port may linger for a moment).
const RESTART_ATTEMPTS: usize = 20;

pub struct LockServers {
    primary: RedisServer,
    replica: RedisServer,
    proxy: FaultProxy,
    /// The replication link: the replica follows the primary through it, so a
    /// fault can cut it.
    link: FaultProxy,
    /// The primary's port, for the sampler, which follows failovers.
    primary_port: Arc<AtomicU16>,
}

impl LockServers {
    /// Starts both servers, links the replica and puts the proxy in front.
    pub fn start() -> io::Result<Self> {
        let primary = RedisServer::builder().aof().start()?;
        let replica = RedisServer::builder().aof().start()?;
        let link = FaultProxy::start(primary.port())?;
        replica.replicate_via(&primary, link.port())?;
        let proxy = FaultProxy::start(primary.port())?;
        Ok(LockServers {
            primary_port: Arc::new(AtomicU16::new(primary.port())),
            primary,
            replica,
            proxy,
            link,
        })
    }

    /// Where workers connect: the proxy.
    pub fn url(&self) -> String {
        self.proxy.url()
    }

    pub fn proxy(&self) -> &FaultProxy {
        &self.proxy
    }

    /// The current primary: every fault but a failover targets it.
    pub fn primary(&mut self) -> &mut RedisServer {
        &mut self.primary
    }

    pub fn primary_port(&self) -> Arc<AtomicU16> {
        self.primary_port.clone()
    }

    /// Kills the primary and starts it again from `from`. The replica reconnects by
    /// itself.
    pub async fn restart(&mut self, from: Restart) -> io::Result<()> {
        let primary = &mut self.primary;
        retried(|| primary.restart_from(from)).await
    }

    /// Kills the primary, promotes the replica, points the proxy at it and resets
    /// every connection (as a virtual IP moving would); then the old primary comes
    /// back empty as the new one's replica. The replica is promoted `lag` before the
    /// kill, so it misses the writes the primary took meanwhile, as a replica behind
    /// would (a frozen replica would not: the writes wait in its socket buffer).
    pub async fn fail_over(&mut self, lag: Duration) -> io::Result<()> {
        tokio::task::block_in_place(|| {
            // A replica still resyncing after a restart could not be promoted.
            self.replica.replicate_via(&self.primary, self.link.port())
        })?;
        self.promote_replica(lag).await
    }

    /// Cuts the replication link (the replica's connection stalls, no reset) for
    /// `cut` while the primary goes on granting, then fails over to the replica,
    /// which missed every write of that time, as a replica behind a partition would.
    pub async fn fail_over_partitioned(&mut self, cut: Duration) -> io::Result<()> {
        self.link.stall_all();
        tokio::time::sleep(cut).await;
        self.promote_replica(Duration::ZERO).await
    }

    /// Promotes the replica, kills the primary `lag` later, points the proxy at the
    /// new primary and resets every connection (as a virtual IP moving would); then
    /// the old primary comes back empty as the new one's replica.
    async fn promote_replica(&mut self, lag: Duration) -> io::Result<()> {
        tokio::task::block_in_place(|| self.replica.promote())?;
        tokio::time::sleep(lag).await;
        tokio::task::block_in_place(|| {
            self.primary.kill()?;
            std::mem::swap(&mut self.primary, &mut self.replica);
            self.primary_port
                .store(self.primary.port(), Ordering::Relaxed);
            self.proxy.set_upstream(self.primary.port());
            self.proxy.reset_all();
            self.link.set_upstream(self.primary.port());
            self.link.resume_all();
            self.link.reset_all();
            Ok::<_, io::Error>(())
        })?;
        self.rejoin_replica().await
    }

    /// Restarts the old primary empty and makes it follow the new one.
    async fn rejoin_replica(&mut self) -> io::Result<()> {
        let (primary, replica, link) = (&self.primary, &mut self.replica, self.link.port());
        retried(|| {
            replica.restart_from(Restart::Empty)?;
            replica.replicate_via(primary, link)
        })
        .await
    }
}

/// Runs a blocking server operation until it succeeds: a port may linger for a moment
/// after a kill.
pub(crate) async fn retried(mut operation: impl FnMut() -> io::Result<()>) -> io::Result<()> {
    let mut last = io::Error::other("not attempted");
    for _ in 0..RESTART_ATTEMPTS {
        match tokio::task::block_in_place(&mut operation) {
            Ok(()) => return Ok(()),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(last)
}
