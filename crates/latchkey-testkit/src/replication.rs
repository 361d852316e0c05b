//! Primary and replica: one server follows another, and can be promoted.

use std::io;

use crate::{RedisServer, wait_for};

impl RedisServer {
    /// Makes this server a replica of `primary` (`REPLICAOF 127.0.0.1 port`) and
    /// waits until the link is up, i.e. the first full sync is done.
    pub fn replicate(&self, primary: &RedisServer) -> io::Result<()> {
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
        self.admin::<()>(redis::cmd("REPLICAOF").arg("127.0.0.1").arg(primary.port))?;
        wait_for(
            &format!("replication link up on port {}", self.port),
            || {
                Ok(self
                    .info_field("replication", "master_link_status")?
                    .as_deref()
                    == Some("up"))
            },
        )
    }

    /// `REPLICAOF NO ONE`: a replica becomes a primary and takes writes, with
    /// whatever it had received.
    pub fn promote(&self) -> io::Result<()> {
        self.admin::<()>(redis::cmd("REPLICAOF").arg("NO").arg("ONE"))
    }
}
