//! One proxied connection: two pipes (client to server, server to client) that obey
//! the connection's control, stalling, delaying or resetting on command.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use super::{NewConnections, Plan, Shared};

/// Bytes read from a socket at once.
const CHUNK: usize = 16 * 1024;
/// Chunks read but not yet delivered (delayed by latency) per direction; the reader
/// waits beyond this, so a slow direction pushes back on its sender like TCP does.
const CHUNKS_IN_FLIGHT: usize = 64;

/// What the test has asked of one connection.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Control {
    /// Forward nothing (hold the bytes) until cleared.
    pub(super) stalled: bool,
    /// Close both sides with a TCP RST.
    pub(super) reset: bool,
}

/// Which way bytes flow.
#[derive(Clone, Copy, Debug)]
pub(super) enum Direction {
    ToServer,
    ToClient,
}

/// Serves one accepted client until either side closes or a reset is asked for.
pub(super) async fn serve(mut client: TcpStream, plan: Plan, shared: Arc<Shared>) {
    let Plan {
        upstream,
        mode,
        control,
    } = plan;
    if mode == NewConnections::BlackHole {
        black_hole(client, control).await;
        return;
    }
    let connected = tokio::select! {
        connected = TcpStream::connect(("127.0.0.1", upstream)) => connected,
        () = reset_asked(control.clone()) => return abort(&client),
    };
    // The upstream is down: the client sees its connection torn down at once, as it
    // would see a refused connection without the proxy.
    let Ok(mut server) = connected else {
        return abort(&client);
    };
    // Small RESP commands must not wait for Nagle's algorithm.
    let _ = client.set_nodelay(true);
    let _ = server.set_nodelay(true);
    let reset = {
        let (from_client, to_client) = client.split();
        let (from_server, to_server) = server.split();
        let up = Pipe {
            direction: Direction::ToServer,
            control: control.clone(),
            shared: &shared,
        };
        let down = Pipe {
            direction: Direction::ToClient,
            ..up.clone()
        };
        tokio::select! {
            () = reset_asked(control) => true,
            () = up.run(from_client, to_server) => false,
            () = down.run(from_server, to_client) => false,
        }
    };
    if reset {
        abort(&client);
        abort(&server);
    }
}

/// Holds the client's socket open, reads and drops what it sends, never answers.
async fn black_hole(mut client: TcpStream, control: watch::Receiver<Control>) {
    let mut sink = vec![0; CHUNK];
    let drained = async { while matches!(client.read(&mut sink).await, Ok(n) if n > 0) {} };
    let reset = tokio::select! {
        () = reset_asked(control) => true,
        () = drained => false,
    };
    if reset {
        abort(&client);
    }
}

/// One direction of a connection.
#[derive(Clone)]
struct Pipe<'a> {
    direction: Direction,
    control: watch::Receiver<Control>,
    shared: &'a Shared,
}

impl Pipe<'_> {
    /// Reads chunks and delivers each after the latency of its direction, while the
    /// connection is not stalled; ends when the reader sees the end of the stream
    /// (once what it read is delivered) or either socket fails.
    async fn run(&self, mut from: impl AsyncRead + Unpin, mut to: impl AsyncWrite + Unpin) {
        let (chunks, mut due) = mpsc::channel::<(Instant, Vec<u8>)>(CHUNKS_IN_FLIGHT);
        let read = async move {
            let mut control = self.control.clone();
            let mut buffer = vec![0; CHUNK];
            loop {
                // A stalled connection leaves the bytes in the kernel's buffers.
                if !flowing(&mut control).await {
                    return;
                }
                let n = match from.read(&mut buffer).await {
                    Ok(n) if n > 0 => n,
                    _ => return,
                };
                let at = Instant::now() + self.shared.latency(self.direction);
                if chunks.send((at, buffer[..n].to_vec())).await.is_err() {
                    return;
                }
            }
        };
        // Owning the receiver: a writer that fails drops it, which ends the reader.
        let write = async move {
            let mut control = self.control.clone();
            while let Some((at, chunk)) = due.recv().await {
                tokio::time::sleep_until(at).await;
                // A chunk read just before a stall is held too.
                if !flowing(&mut control).await || to.write_all(&chunk).await.is_err() {
                    return;
                }
            }
        };
        tokio::join!(read, write);
    }
}

/// Waits until the connection may forward; false once the proxy is gone. A reset
/// never lets it forward again: the connection is being torn down.
async fn flowing(control: &mut watch::Receiver<Control>) -> bool {
    control
        .wait_for(|control| !control.stalled && !control.reset)
        .await
        .is_ok()
}

/// Resolves when a reset is asked for (or the proxy is gone).
async fn reset_asked(mut control: watch::Receiver<Control>) {
    let _ = control.wait_for(|control| control.reset).await;
}

/// Makes the coming close of `stream` a TCP RST instead of a FIN.
fn abort(stream: &TcpStream) {
    let _ = stream.set_zero_linger();
}
