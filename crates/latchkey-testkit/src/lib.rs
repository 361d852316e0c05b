//! Real `redis-server` processes for latchkey's tests, demos and benchmarks.
//!
//! Each [`RedisServer`] runs in its own temp dir on a free loopback port, with no
//! persistence unless asked, and is killed when dropped. It can be paused (SIGSTOP),
//! resumed, killed with SIGKILL and restarted on the same port, empty or from its last
//! snapshot or append-only file ([`Restart`]), made a replica of another server and
//! promoted. A [`FaultProxy`] in front of a server stalls, black-holes, delays and
//! resets connections. So tests exercise real failures instead of mocks.
//!
//! [`MemoryStore`] is a lock store with no Redis at all: the proof that latchkey's
//! store seam takes another backend, and a fast ground for the logic above it.
//!
//! ```no_run
//! let server = latchkey_testkit::RedisServer::start()?;
//! println!("redis at {}", server.url());
//! # Ok::<(), std::io::Error>(())
//! ```

mod cluster;
mod memory;
mod proxy;
mod replication;
mod restart;
mod sentinel;
mod slot_migration;
mod tls;
pub mod worker;

pub use cluster::RedisCluster;
pub use memory::MemoryStore;
pub use proxy::{FaultProxy, NewConnections};
pub use restart::Restart;
pub use sentinel::Sentinels;
pub use tls::TlsFiles;

use std::io::{self, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Overrides the `redis-server` binary found on the PATH.
pub const SERVER_BINARY_VAR: &str = "LATCHKEY_REDIS_SERVER";

/// How long a starting server may take to answer PING.
const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a cluster node may be silent before the others call it failed.
const CLUSTER_NODE_TIMEOUT_MS: u64 = 1_000;
/// Attempts at finding a port nobody else grabbed between our probe and the bind.
const PORT_ATTEMPTS: usize = 10;

/// An ACL user to create on the server.
#[derive(Clone, Debug)]
pub struct AclUser {
    /// The user name.
    pub name: String,
    /// Its password.
    pub password: String,
    /// ACL rules after the password, e.g. `~* &* +@all`.
    pub rules: String,
}

/// Options for a server; start it with [`ServerBuilder::start`].
///
/// ```no_run
/// let server = latchkey_testkit::RedisServer::builder().password("s3cret").start()?;
/// assert!(server.url().contains(":s3cret@"));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone, Debug, Default)]
pub struct ServerBuilder {
    password: Option<String>,
    users: Vec<AclUser>,
    tls: bool,
    aof: bool,
    cluster: bool,
    /// Run as a Sentinel watching this master name at this port.
    sentinel: Option<(String, u16)>,
}

impl ServerBuilder {
    /// Require this password for the `default` user.
    pub fn password(mut self, password: &str) -> Self {
        self.password = Some(password.to_owned());
        self
    }

    /// Add an ACL user, e.g. `user("app", "pw", "~app:* ~{app:* +@all")`.
    pub fn user(mut self, name: &str, password: &str, rules: &str) -> Self {
        self.users.push(AclUser {
            name: name.to_owned(),
            password: password.to_owned(),
            rules: rules.to_owned(),
        });
        self
    }

    /// Serve TLS only (`rediss://`), with a certificate from a CA made for this server.
    pub fn tls(mut self) -> Self {
        self.tls = true;
        self
    }

    /// Persist every write to an append-only file (`appendonly yes`, `appendfsync
    /// everysec`), so [`RedisServer::restart_from`]`(`[`Restart::Aof`]`)` can load it.
    pub fn aof(mut self) -> Self {
        self.aof = true;
        self
    }

    /// Run as a Redis Cluster node (`cluster-enabled yes`); [`RedisCluster`] makes
    /// such nodes into a cluster.
    pub fn cluster_node(mut self) -> Self {
        self.cluster = true;
        self
    }

    /// Run as a Redis Sentinel (`redis-server --sentinel`) watching the primary on
    /// `primary_port` as `master` (quorum 2, down after 1 s); [`Sentinels`] starts
    /// three.
    pub fn sentinel_for(mut self, master: &str, primary_port: u16) -> Self {
        self.sentinel = Some((master.to_owned(), primary_port));
        self
    }

    /// Starts the server on a free loopback port and waits until it answers.
    pub fn start(self) -> io::Result<RedisServer> {
        let mut last_error = io::Error::other("no port tried");
        for _ in 0..PORT_ATTEMPTS {
            match self.clone().start_on(free_port()?) {
                Ok(server) => return Ok(server),
                Err(e) => last_error = e,
            }
        }
        Err(last_error)
    }

    /// Starts the server on `port` and waits until it answers: a port from
    /// [`free_port`], for a client started before its server.
    ///
    /// ```no_run
    /// let port = latchkey_testkit::free_port()?;
    /// // … start a client of redis://127.0.0.1:{port} …
    /// let server = latchkey_testkit::RedisServer::builder().start_on(port)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn start_on(self, port: u16) -> io::Result<RedisServer> {
        let dir = tempfile::Builder::new()
            .prefix("latchkey-redis-")
            .tempdir()?;
        let tls = match self.tls {
            true => Some(TlsFiles::generate(dir.path())?),
            false => None,
        };
        let mut server = RedisServer {
            port,
            dir: dir.path().to_path_buf(),
            _dir: None,
            child: None,
            options: self.clone(),
            tls,
        };
        server.spawn(self.aof)?;
        server._dir = Some(dir);
        Ok(server)
    }
}

/// A running `redis-server`, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    dir: PathBuf,
    // Keeps the temp dir alive as long as the server; removed on drop.
    _dir: Option<tempfile::TempDir>,
    child: Option<Child>,
    options: ServerBuilder,
    tls: Option<TlsFiles>,
}

impl RedisServer {
    /// Starts a server with no password.
    pub fn start() -> io::Result<Self> {
        ServerBuilder::default().start()
    }

    /// Options for a server with a password or ACL users.
    pub fn builder() -> ServerBuilder {
        ServerBuilder::default()
    }

    /// The loopback port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process id, while running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `redis://127.0.0.1:PORT` (`rediss://` with TLS), with the default user's
    /// password if one is set.
    pub fn url(&self) -> String {
        match &self.options.password {
            Some(password) => self.url_as("", password),
            None => format!("{}://127.0.0.1:{}", self.scheme(), self.port),
        }
    }

    /// The URL for an ACL user.
    pub fn url_as(&self, user: &str, password: &str) -> String {
        format!(
            "{}://{user}:{password}@127.0.0.1:{}",
            self.scheme(),
            self.port
        )
    }

    /// The certificate files, for a TLS server.
    pub fn tls_files(&self) -> Option<&TlsFiles> {
        self.tls.as_ref()
    }

    /// A redis-rs client for [`url`](Self::url) that trusts this server's CA.
    pub fn client(&self) -> redis::RedisResult<redis::Client> {
        let Some(tls) = &self.tls else {
            return redis::Client::open(self.url());
        };
        let root_cert = std::fs::read(&tls.ca_cert)?;
        let certs = redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(root_cert),
        };
        redis::Client::build_with_tls(self.url(), certs)
    }

    /// A synchronous admin connection, for setting up and checking state.
    pub fn connection(&self) -> redis::RedisResult<redis::Connection> {
        self.client()?
            .get_connection_with_timeout(Duration::from_secs(5))
    }

    fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "rediss"
        } else {
            "redis"
        }
    }

    /// Freezes the server (SIGSTOP): connections stay open, nothing is answered.
    pub fn pause(&self) -> io::Result<()> {
        self.signal(Signal::SIGSTOP)
    }

    /// Thaws a paused server (SIGCONT).
    pub fn resume(&self) -> io::Result<()> {
        self.signal(Signal::SIGCONT)
    }

    /// Kills the server with SIGKILL; everything it held is gone.
    pub fn kill(&mut self) -> io::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        // SIGKILL works on a stopped process too.
        child.kill()?;
        child.wait()?;
        Ok(())
    }

    /// Kills the server if it runs and starts a new, empty one on the same port:
    /// [`restart_from`](Self::restart_from)`(`[`Restart::Empty`]`)`.
    pub fn restart(&mut self) -> io::Result<()> {
        self.restart_from(Restart::Empty)
    }

    fn signal(&self, signal: Signal) -> io::Result<()> {
        let pid = self
            .pid()
            .ok_or_else(|| io::Error::other("server is not running"))?;
        let pid = i32::try_from(pid).map_err(io::Error::other)?;
        kill(Pid::from_raw(pid), signal).map_err(io::Error::from)
    }

    /// Starts `redis-server` on this server's port and dir; `appendonly` decides
    /// whether it loads (and keeps writing) the append-only file.
    fn spawn(&mut self, appendonly: bool) -> io::Result<()> {
        let config = self.write_config(appendonly)?;
        let mut command = Command::new(server_binary());
        command.arg(&config);
        if self.options.sentinel.is_some() {
            command.arg("--sentinel");
        }
        let child = command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| not_installed("redis-server", &e))?;
        self.child = Some(child);
        self.wait_ready().inspect_err(|_| {
            let _ = self.kill();
        })
    }

    fn write_config(&self, appendonly: bool) -> io::Result<PathBuf> {
        let path = self.dir.join("redis.conf");
        let mut file = std::fs::File::create(&path)?;
        match &self.tls {
            None => writeln!(file, "port {}", self.port)?,
            Some(tls) => {
                writeln!(file, "port 0")?;
                writeln!(file, "tls-port {}", self.port)?;
                writeln!(file, "tls-cert-file {}", tls.server_cert.display())?;
                writeln!(file, "tls-key-file {}", tls.server_key.display())?;
                writeln!(file, "tls-ca-cert-file {}", tls.ca_cert.display())?;
                writeln!(file, "tls-auth-clients no")?;
            }
        }
        writeln!(file, "bind 127.0.0.1")?;
        // Snapshots only when asked (`save()`), never on a timer.
        writeln!(file, "save \"\"")?;
        match appendonly {
            true => writeln!(file, "appendonly yes\nappendfsync everysec")?,
            false => writeln!(file, "appendonly no")?,
        }
        // A replica's full sync starts at once instead of waiting 5 s for others.
        writeln!(file, "repl-diskless-sync-delay 0")?;
        writeln!(file, "daemonize no")?;
        writeln!(file, "protected-mode no")?;
        writeln!(file, "dir {}", self.dir.display())?;
        writeln!(file, "logfile {}", self.dir.join("redis.log").display())?;
        if let Some((master, port)) = &self.options.sentinel {
            writeln!(file, "sentinel monitor {master} 127.0.0.1 {port} 2")?;
            writeln!(file, "sentinel down-after-milliseconds {master} 1000")?;
            writeln!(file, "sentinel failover-timeout {master} 10000")?;
            return Ok(path);
        }
        if self.options.cluster {
            writeln!(file, "cluster-enabled yes\ncluster-config-file nodes.conf")?;
            // Failures are noticed (and replicas promoted) within a couple of seconds.
            writeln!(file, "cluster-node-timeout {CLUSTER_NODE_TIMEOUT_MS}")?;
        }
        if let Some(password) = &self.options.password {
            writeln!(file, "requirepass {password}")?;
        }
        for user in &self.options.users {
            writeln!(
                file,
                "user {} on >{} {}",
                user.name, user.password, user.rules
            )?;
        }
        Ok(path)
    }

    fn wait_ready(&mut self) -> io::Result<()> {
        let port = self.port;
        wait_for(
            &format!("redis-server on port {port} answering PING"),
            || {
                if let Some(status) = self
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                {
                    return Err(io::Error::other(format!(
                        "redis-server exited with {status} (port {port} taken?); log: {}",
                        self.log_tail()
                    )));
                }
                Ok(self.answers_ping())
            },
        )
    }

    /// One admin command, its error as an `io::Error` naming the server.
    pub(crate) fn admin<T: redis::FromRedisValue>(&self, command: &redis::Cmd) -> io::Result<T> {
        self.connection()
            .and_then(|mut conn| command.query(&mut conn))
            .map_err(|e| io::Error::other(format!("redis-server on port {}: {e}", self.port)))
    }

    /// One `field:value` line of `INFO section`.
    ///
    /// ```no_run
    /// let server = latchkey_testkit::RedisServer::start()?;
    /// assert_eq!(server.info_field("replication", "role")?.as_deref(), Some("master"));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn info_field(&self, section: &str, field: &str) -> io::Result<Option<String>> {
        self.reply_field(redis::cmd("INFO").arg(section), field)
    }

    /// One `field:value` line of a reply made of such lines (`INFO`, `CLUSTER INFO`).
    fn reply_field(&self, command: &redis::Cmd, field: &str) -> io::Result<Option<String>> {
        let reply: String = self.admin(command)?;
        let prefix = format!("{field}:");
        Ok(reply
            .lines()
            .find_map(|line| line.strip_prefix(&prefix))
            .map(|value| value.trim().to_owned()))
    }

    fn answers_ping(&self) -> bool {
        let Ok(mut conn) = self.connection() else {
            return false;
        };
        redis::cmd("PING").query::<String>(&mut conn).is_ok()
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("redis.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().rev().take(3).collect();
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.kill();
    }
}

/// Whether a `redis-server` binary can be run here.
pub fn server_available() -> bool {
    Command::new(server_binary())
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn server_binary() -> PathBuf {
    std::env::var_os(SERVER_BINARY_VAR)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("redis-server"))
}

/// A program the test kit runs could not be started: say how to install it.
fn not_installed(program: &str, error: &io::Error) -> io::Error {
    io::Error::new(
        error.kind(),
        format!("cannot run {program} ({error}); install it with `apt-get install -y {program}`"),
    )
}

/// Polls `ready` every 10 ms until it says yes, fails, or [`READY_TIMEOUT`] passes
/// (`what` names what is awaited, for the error).
fn wait_for(what: &str, mut ready: impl FnMut() -> io::Result<bool>) -> io::Result<()> {
    let started = Instant::now();
    while !ready()? {
        if started.elapsed() > READY_TIMEOUT {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("gave up waiting for {what} after {READY_TIMEOUT:?}"),
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// A loopback port nobody listens on now, for a server to start on.
pub fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}
