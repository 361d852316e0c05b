//! The lock servers in `--sentinel` mode: a primary, its replica and three
//! Sentinels (`latchkey_testkit::Sentinels`). Workers find the primary through the
//! Sentinels and follow its failovers; faults make Sentinel fail over: asked for
//! (`SENTINEL FAILOVER`), or because the primary was killed or paused past the
//! Sentinels' down-after time (1 s). The old primary then rejoins as a replica, but
//! only seconds later: until then it still takes writes from the clients connected
//! to it, which must move to the new primary by themselves.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use latchkey_testkit::{Restart, Sentinels};

use crate::faults::{Fault, FaultWindow};
use crate::record::now_us;

/// How long a paused primary stays paused after the Sentinels promoted its
/// replica: past the clients' 1 s reply timeout, as for a cluster.
const STALE_REQUESTS_GIVEN_UP: Duration = Duration::from_millis(1_500);

/// How often the watch asks the first Sentinel which server is the primary.
const WATCH_EVERY: Duration = Duration::from_millis(50);

/// How long the watch waits for the Sentinel's answer.
const WATCH_TIMEOUT: Duration = Duration::from_millis(500);

/// How long before a Sentinel names a new primary the failover may have begun to
/// lose writes: the down-after time (1 s), the vote and the promotion.
const FAILOVER_BEFORE_NAMED: Duration = Duration::from_secs(2);

pub struct SentinelServers {
    set: Sentinels,
    primary_port: Arc<AtomicU16>,
    watch: FailoverWatch,
    /// Make the old primary a replica of the new one as soon as the Sentinels
    /// name the new one (`--wait-replicas`), as an orchestrator would: Sentinel
    /// does it only 8 s or more later, and until then no grant can be confirmed.
    rejoin_at_once: bool,
}

impl SentinelServers {
    /// A primary and its replica; with `rejoin_at_once`, see the field.
    pub fn start(rejoin_at_once: bool) -> io::Result<Self> {
        let set = Sentinels::start()?;
        let primary_port = Arc::new(AtomicU16::new(set.primary_port()?));
        let watch = FailoverWatch::start(
            &set.urls()[0],
            set.master_name(),
            primary_port.clone(),
            rejoin_at_once,
        )?;
        Ok(SentinelServers {
            set,
            primary_port,
            watch,
            rejoin_at_once,
        })
    }

    /// The failovers the Sentinels made on their own: a change of primary seen
    /// outside every failover the harness injected (`injected`).
    pub fn unasked_failovers(&self, injected: &[FaultWindow]) -> Vec<FaultWindow> {
        let before = u64::try_from(FAILOVER_BEFORE_NAMED.as_micros()).unwrap_or(u64::MAX);
        let asked = |seen_us: u64| {
            injected.iter().any(|window| {
                matches!(
                    window.fault,
                    Fault::SentinelFailover | Fault::KillPrimary | Fault::PausePrimary
                ) && window.from_us <= seen_us
                    && seen_us <= window.to_us
            })
        };
        self.watch
            .changes()
            .into_iter()
            .filter(|&seen_us| !asked(seen_us))
            .map(|seen_us| FaultWindow {
                fault: Fault::UnaskedFailover,
                from_us: seen_us.saturating_sub(before),
                to_us: seen_us,
                worker: None,
                broke: None,
            })
            .collect()
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
        let old = self.primary_port.load(Ordering::Relaxed);
        tokio::task::block_in_place(|| {
            self.set.failover()?;
            self.settle()?;
            self.rejoin(old)
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
            self.set.servers_mut()[index].restart_from(Restart::Empty)?;
            self.rejoin(old)
        })
    }

    /// SIGSTOPs the primary until the Sentinels promoted the replica (its clients'
    /// connections stall, no reset), then SIGCONT: it rejoins as a replica.
    pub async fn pause_primary(&mut self) -> io::Result<()> {
        let old = self.primary_port.load(Ordering::Relaxed);
        let index = self.index_of(old)?;
        tokio::task::block_in_place(|| {
            self.set.servers()[index].pause()?;
            let promoted = match self.set.wait_for_new_primary(old) {
                // No replica good enough to promote (one still syncing after an
                // earlier fault, on a loaded machine): the primary was only paused.
                // A failover the Sentinels start later is seen as an unasked one.
                Err(error) if error.kind() == io::ErrorKind::TimedOut => Ok(false),
                waited => waited.and_then(|()| self.settle()).map(|()| true),
            };
            std::thread::sleep(STALE_REQUESTS_GIVEN_UP);
            self.set.servers()[index].resume()?;
            match promoted? {
                true => self.rejoin(old),
                false => Ok(()),
            }
        })
    }

    /// Points the sampler at the primary the Sentinels name, as soon as they name
    /// it (an old primary that is paused or not yet demoted holds stale keys).
    fn settle(&self) -> io::Result<()> {
        let port = self.set.primary_port()?;
        self.primary_port.store(port, Ordering::Relaxed);
        Ok(())
    }

    /// With `rejoin_at_once`, makes the server on `old` a replica of the primary.
    fn rejoin(&self, old: u16) -> io::Result<()> {
        if !self.rejoin_at_once {
            return Ok(());
        }
        let primary = self.index_of(self.primary_port.load(Ordering::Relaxed))?;
        let servers = self.set.servers();
        servers[self.index_of(old)?].replicate(&servers[primary])
    }

    fn index_of(&self, port: u16) -> io::Result<usize> {
        self.set
            .servers()
            .iter()
            .position(|server| server.port() == port)
            .ok_or_else(|| io::Error::other(format!("no data server on port {port}")))
    }
}

/// Asks the first Sentinel every [`WATCH_EVERY`] which server is the primary: keeps
/// the sampler on it and notes when it changed, so that failovers the Sentinels
/// made on their own are seen too. Stops when dropped.
struct FailoverWatch {
    changes: Arc<Mutex<Vec<u64>>>,
    stop: Arc<AtomicBool>,
}

impl FailoverWatch {
    fn start(
        sentinel_url: &str,
        master: &str,
        primary_port: Arc<AtomicU16>,
        rejoin_at_once: bool,
    ) -> io::Result<Self> {
        let master = master.to_owned();
        let client = redis::Client::open(sentinel_url).map_err(io::Error::other)?;
        let changes = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen, stopped) = (changes.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut conn = None;
            while !stopped.load(Ordering::Relaxed) {
                std::thread::sleep(WATCH_EVERY);
                let Some(port) = primary_named(&client, &master, &mut conn) else {
                    continue;
                };
                let old = primary_port.swap(port, Ordering::Relaxed);
                if old == port {
                    continue;
                }
                seen.lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(now_us());
                if rejoin_at_once {
                    replicate(old, port);
                }
            }
        });
        Ok(FailoverWatch { changes, stop })
    }

    /// When the named primary changed (wall µs), injected failovers included.
    fn changes(&self) -> Vec<u64> {
        self.changes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl Drop for FailoverWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Makes the server on `old` a replica of the one on `primary` (best effort: one
/// that is down rejoins through Sentinel later).
fn replicate(old: u16, primary: u16) {
    let Ok(client) = redis::Client::open(format!("redis://127.0.0.1:{old}")) else {
        return;
    };
    if let Ok(mut conn) = client.get_connection_with_timeout(WATCH_TIMEOUT) {
        let _: redis::RedisResult<()> = redis::cmd("REPLICAOF")
            .arg("127.0.0.1")
            .arg(primary)
            .query(&mut conn);
    }
}

/// The port of the primary the Sentinel names (`None` when it does not answer; the
/// connection is made afresh next time).
fn primary_named(
    client: &redis::Client,
    master: &str,
    conn: &mut Option<redis::Connection>,
) -> Option<u16> {
    if conn.is_none() {
        let fresh = client.get_connection_with_timeout(WATCH_TIMEOUT).ok()?;
        fresh.set_read_timeout(Some(WATCH_TIMEOUT)).ok()?;
        *conn = Some(fresh);
    }
    let reply: redis::RedisResult<(String, u16)> = redis::cmd("SENTINEL")
        .arg("GET-MASTER-ADDR-BY-NAME")
        .arg(master)
        .query(conn.as_mut()?);
    match reply {
        Ok((_, port)) => Some(port),
        Err(_) => {
            *conn = None;
            None
        }
    }
}
