//! Snapshots and restarts from what a server kept on disk: nothing, its last
//! snapshot, or its append-only file.

use std::io;

use crate::{RedisServer, wait_for};

/// The RDB file `SAVE` writes (Redis's default `dbfilename`).
const SNAPSHOT_FILE: &str = "dump.rdb";
/// The directory of the append-only file (Redis 7's default `appenddirname`).
const AOF_DIR: &str = "appendonlydir";

/// What a server restarted with [`RedisServer::restart_from`] comes back with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Restart {
    /// Files wiped: the server comes back empty.
    Empty,
    /// Loads the last [`RedisServer::save`] snapshot (`dump.rdb`); the append-only
    /// file is ignored for this load, then rewritten from the loaded data if the
    /// server runs with [`aof`](crate::ServerBuilder::aof).
    Snapshot,
    /// Loads the append-only file (needs [`aof`](crate::ServerBuilder::aof)). With
    /// `appendfsync everysec` a machine crash loses up to about a second of writes; a
    /// SIGKILL loses none, since what Redis wrote is in the OS's page cache.
    Aof,
}

impl RedisServer {
    /// `SAVE`: a snapshot of the current data on disk, which
    /// [`Restart::Snapshot`] loads.
    ///
    /// Redis refuses `SAVE` while a background save runs (as after an AOF rewrite
    /// starts): this waits for that one to finish first.
    pub fn save(&self) -> io::Result<()> {
        wait_for("a snapshot", || {
            match self.admin::<()>(&redis::cmd("SAVE")) {
                Ok(()) => Ok(true),
                Err(error) if error.to_string().contains("in progress") => Ok(false),
                Err(error) => Err(error),
            }
        })
    }

    /// SIGKILLs the server (if it runs) and starts it again on the same port from
    /// `from`; returns once it answers PING (a server still loading its data does
    /// not). A server that was a replica comes back as a primary.
    pub fn restart_from(&mut self, from: Restart) -> io::Result<()> {
        self.kill()?;
        match from {
            Restart::Empty => {
                self.wipe_files()?;
                self.spawn(self.options.aof)
            }
            // With appendonly on, Redis would load the AOF and ignore the snapshot.
            Restart::Snapshot => {
                self.spawn(false)?;
                match self.options.aof {
                    true => self.enable_aof(),
                    false => Ok(()),
                }
            }
            Restart::Aof if !self.options.aof => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "Restart::Aof needs a server built with ServerBuilder::aof()",
            )),
            Restart::Aof => self.spawn(true),
        }
    }

    /// Removes the snapshot and the append-only file, so nothing survives a restart.
    fn wipe_files(&self) -> io::Result<()> {
        remove_if_present(std::fs::remove_file(self.dir.join(SNAPSHOT_FILE)))?;
        remove_if_present(std::fs::remove_dir_all(self.dir.join(AOF_DIR)))
    }

    /// Turns the append-only file on in a running server and waits until Redis has
    /// rewritten it from the current data: until then the files on disk still hold
    /// the state from before the restart, which a later `Restart::Aof` would load.
    fn enable_aof(&self) -> io::Result<()> {
        self.admin::<()>(redis::cmd("CONFIG").arg("SET").arg("appendonly").arg("yes"))?;
        wait_for("end of the append-only file rewrite", || {
            let busy = ["aof_rewrite_in_progress", "aof_rewrite_scheduled"]
                .into_iter()
                .map(|field| self.info_field("persistence", field))
                .collect::<io::Result<Vec<_>>>()?;
            Ok(busy.iter().all(|value| value.as_deref() == Some("0")))
        })
    }
}

/// A file that was never written is as good as removed.
fn remove_if_present(removed: io::Result<()>) -> io::Result<()> {
    match removed {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
