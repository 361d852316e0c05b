//! Primary and replica: one server follows another, and can be promoted.

use std::io;

use crate::{RedisServer, wait_for};

impl RedisServer {
    /// Makes this server a replica of `primary` (`REPLICAOF 127.0.0.1 port`) and
    /// waits until the link is up, i.e. the first full sync is done, and the primary
    /// counts it (a `WAIT 1` on the primary returns 1).
    pub fn replicate(&self, primary: &RedisServer) -> io::Result<()> {
        self.replicate_via(primary, primary.port)
    }

    /// As [`replicate`](Self::replicate), through `port` (a proxy in front of
    /// `primary`, to cut the replication link).
    ///
    /// ```no_run
    /// use latchkey_testkit::{FaultProxy, RedisServer};
    /// let (primary, replica) = (RedisServer::start()?, RedisServer::start()?);
    /// let link = FaultProxy::start(primary.port())?;
    /// replica.replicate_via(&primary, link.port())?;
    /// link.stall_all(); // the replica stops receiving writes
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn replicate_via(&self, primary: &RedisServer, port: u16) -> io::Result<()> {
        if primary.tls.is_some() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the test kit does not set up replication over TLS",
            ));
        }
        if let Some(password) = &primary.options.password {
            self.admin::<()>(
                redis::cmd("CONFIG")
                    .arg("SET")
                    .arg("masterauth")
                    .arg(password),
            )?;
        }
        self.admin::<()>(redis::cmd("REPLICAOF").arg("127.0.0.1").arg(port))?;
        wait_for(
            &format!("replication link up on port {}", self.port),
            || {
                Ok(self
                    .info_field("replication", "master_link_status")?
                    .as_deref()
                    == Some("up"))
            },
        )?;
        // For a while after the sync, the primary does not count the replica's
        // acknowledgements: wait until a write (of a key deleted at once) is.
        let mut conn = primary
            .connection()
            .map_err(|e| io::Error::other(format!("primary on port {}: {e}", primary.port)))?;
        let probe = "latchkey-testkit:replication-probe";
        wait_for(
            &format!("port {} acknowledging writes to WAIT", self.port),
            || {
                let (acked,): (i64,) = redis::pipe()
                    .cmd("SET")
                    .arg(probe)
                    .arg(1)
                    .ignore()
                    .cmd("DEL")
                    .arg(probe)
                    .ignore()
                    .cmd("WAIT")
                    .arg(1)
                    .arg(50)
                    .query(&mut conn)
                    .map_err(io::Error::other)?;
                Ok(acked >= 1)
            },
        )
    }

    /// `REPLICAOF NO ONE`: a replica becomes a primary and takes writes, with
    /// whatever it had received.
    pub fn promote(&self) -> io::Result<()> {
        self.admin::<()>(redis::cmd("REPLICAOF").arg("NO").arg("ONE"))
    }
}
