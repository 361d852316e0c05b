//! A fault-injecting TCP proxy: clients connect to it instead of the server, and a
//! test stalls, black-holes, delays or resets their connections at will.
//!
//! It runs on its own thread with its own small runtime, so it serves sync tests,
//! async tests and whole worker processes alike, and keeps forwarding while the
//! caller's runtime is busy or blocked.
//!
//! ```no_run
//! use latchkey_testkit::{FaultProxy, RedisServer};
//!
//! let server = RedisServer::start()?;
//! let proxy = FaultProxy::start(server.port())?;
//! // ... connect to proxy.url() ...
//! proxy.stall_all(); // replies stop coming; sockets stay open
//! proxy.resume_all(); // what was held is delivered, in order
//! # Ok::<(), std::io::Error>(())
//! ```

mod connection;

use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};

use connection::{Control, Direction};

/// What the proxy does with the connections it accepts from now on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NewConnections {
    /// Connect to the upstream port and forward both ways (the default).
    #[default]
    Forward,
    /// Accept, never connect upstream, never answer, keep the socket open: a peer
    /// that vanished from the network.
    BlackHole,
    /// Connect upstream but forward nothing until [`FaultProxy::resume_all`].
    Stall,
}

/// A TCP proxy on a free loopback port in front of one upstream port, with faults
/// on command. Dropping it closes every connection.
pub struct FaultProxy {
    port: u16,
    shared: Arc<Shared>,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

/// What the caller's thread and the proxy's thread share.
#[derive(Default)]
struct Shared {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    upstream: u16,
    new_connections: NewConnections,
    to_server: Duration,
    to_client: Duration,
    accepted: usize,
    /// The controls of connections that may still be open, by accept order.
    connections: Vec<(usize, watch::Sender<Control>)>,
}

/// How one accepted connection starts out.
struct Plan {
    upstream: u16,
    mode: NewConnections,
    control: watch::Receiver<Control>,
}

impl FaultProxy {
    /// Starts forwarding from a free loopback port to `127.0.0.1:upstream_port`.
    pub fn start(upstream_port: u16) -> io::Result<FaultProxy> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let listener = {
            let _entered = runtime.enter();
            TcpListener::from_std(listener)?
        };
        let shared = Arc::new(Shared::default());
        shared.state().upstream = upstream_port;
        let (shutdown, stopped) = oneshot::channel();
        let accepting = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!("fault-proxy-{port}"))
            .spawn(move || {
                runtime.block_on(async {
                    tokio::select! {
                        _ = stopped => {}
                        () = accept_loop(listener, accepting) => {}
                    }
                });
                // Dropping the runtime here drops every connection task: all closed.
            })?;
        Ok(FaultProxy {
            port,
            shared,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The loopback port clients connect to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `redis://127.0.0.1:PORT` (no password).
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// New connections go to this upstream port from now on; existing ones stay
    /// where they are (reset them to move them).
    pub fn set_upstream(&self, port: u16) {
        self.shared.state().upstream = port;
    }

    /// How many client connections were accepted so far.
    pub fn accepted(&self) -> usize {
        self.shared.state().accepted
    }

    /// Existing connections stop forwarding in both directions; sockets stay open
    /// (a "stall", as behind a dead switch). Bytes sent meanwhile are held.
    pub fn stall_all(&self) {
        self.control_all(|control| control.stalled = true);
    }

    /// Only the `n`-th accepted connection (0-based) stalls, if it is still open.
    pub fn stall_connection(&self, n: usize) {
        let state = self.shared.state();
        for (_, control) in state.connections.iter().filter(|(i, _)| *i == n) {
            control.send_modify(|control| control.stalled = true);
        }
    }

    /// Stalled connections forward again: bytes held meanwhile are then delivered,
    /// in order. Connections accepted later still follow
    /// [`set_new_connections`](Self::set_new_connections).
    pub fn resume_all(&self) {
        self.control_all(|control| control.stalled = false);
    }

    /// What happens to connections accepted from now on.
    pub fn set_new_connections(&self, mode: NewConnections) {
        self.shared.state().new_connections = mode;
    }

    /// Delay added before forwarding each chunk, per direction, as a longer wire
    /// would: chunks keep their order and the delays of chunks in flight overlap.
    pub fn set_latency(&self, to_server: Duration, to_client: Duration) {
        let mut state = self.shared.state();
        state.to_server = to_server;
        state.to_client = to_client;
    }

    /// Closes every current connection, both sides, with a TCP RST (SO_LINGER 0).
    pub fn reset_all(&self) {
        self.control_all(|control| control.reset = true);
    }

    fn control_all(&self, change: impl Fn(&mut Control)) {
        for (_, control) in &self.shared.state().connections {
            control.send_modify(&change);
        }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl std::fmt::Debug for FaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FaultProxy")
            .field("port", &self.port)
            .field("upstream", &self.shared.state().upstream)
            .finish()
    }
}

impl Shared {
    /// The state; a panic elsewhere while it was locked leaves it usable.
    fn state(&self) -> MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Counts a new connection, gives it a control, and says how it starts.
    fn register(&self) -> Plan {
        let mut state = self.state();
        let stalled = state.new_connections == NewConnections::Stall;
        let (sender, control) = watch::channel(Control {
            stalled,
            reset: false,
        });
        // Connections that ended dropped their receiver.
        state
            .connections
            .retain(|(_, control)| !control.is_closed());
        let n = state.accepted;
        state.accepted += 1;
        state.connections.push((n, sender));
        Plan {
            upstream: state.upstream,
            mode: state.new_connections,
            control,
        }
    }

    /// The latency of one direction now.
    fn latency(&self, direction: Direction) -> Duration {
        let state = self.state();
        match direction {
            Direction::ToServer => state.to_server,
            Direction::ToClient => state.to_client,
        }
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            // Out of file descriptors, or the client gave up: try again shortly.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let plan = shared.register();
        tokio::spawn(connection::serve(client, plan, shared.clone()));
    }
}
