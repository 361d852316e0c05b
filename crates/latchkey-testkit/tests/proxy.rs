//! The fault proxy against a real redis-server.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use latchkey_testkit::{FaultProxy, NewConnections, RedisServer};

/// Longer than any reply from a local server takes.
const NO_REPLY: Duration = Duration::from_millis(300);

/// A raw client socket through the proxy: byte-exact, so a held reply can be seen
/// arriving later without a client library's own timeouts in the way.
fn dial(proxy: &FaultProxy) -> TcpStream {
    let stream = TcpStream::connect(("127.0.0.1", proxy.port())).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    stream
}

fn send_ping(stream: &mut TcpStream) {
    stream.write_all(b"PING\r\n").unwrap();
}

/// Reads one reply line, or the error that came instead.
fn reply(stream: &mut TcpStream, within: Duration) -> std::io::Result<String> {
    stream.set_read_timeout(Some(within))?;
    let mut line = Vec::new();
    let mut byte = [0];
    while !line.ends_with(b"\r\n") {
        match stream.read(&mut byte)? {
            0 => return Err(ErrorKind::UnexpectedEof.into()),
            _ => line.push(byte[0]),
        }
    }
    Ok(String::from_utf8_lossy(&line).trim_end().to_owned())
}

fn ping(stream: &mut TcpStream) -> String {
    send_ping(stream);
    reply(stream, Duration::from_secs(5)).unwrap()
}

fn no_reply(stream: &mut TcpStream) {
    let error = reply(stream, NO_REPLY).unwrap_err();
    assert!(
        matches!(error.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut),
        "{error}"
    );
}

fn connected_clients(server: &RedisServer) -> u64 {
    let info: String = redis::cmd("INFO")
        .arg("clients")
        .query(&mut server.connection().unwrap())
        .unwrap();
    let line = info
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .unwrap();
    line.trim().parse().unwrap()
}

#[test]
fn forwards_a_redis_client() {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let mut conn = redis::Client::open(proxy.url())
        .unwrap()
        .get_connection()
        .unwrap();
    let pong: String = redis::cmd("PING").query(&mut conn).unwrap();
    assert_eq!(pong, "PONG");
    assert_eq!(proxy.accepted(), 1);
}

#[test]
fn a_stall_holds_replies_until_resumed() {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let mut client = dial(&proxy);
    assert_eq!(ping(&mut client), "+PONG");
    proxy.stall_all();
    send_ping(&mut client);
    no_reply(&mut client);
    proxy.resume_all();
    assert_eq!(reply(&mut client, Duration::from_secs(5)).unwrap(), "+PONG");
}

#[test]
fn one_connection_stalls_alone() {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let mut first = dial(&proxy);
    let mut second = dial(&proxy);
    assert_eq!(ping(&mut first), "+PONG");
    assert_eq!(ping(&mut second), "+PONG");
    proxy.stall_connection(1);
    assert_eq!(ping(&mut first), "+PONG");
    send_ping(&mut second);
    no_reply(&mut second);
    proxy.resume_all();
    assert_eq!(reply(&mut second, Duration::from_secs(5)).unwrap(), "+PONG");
}

#[test]
fn new_connections_can_start_stalled() {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    proxy.set_new_connections(NewConnections::Stall);
    let mut client = dial(&proxy);
    send_ping(&mut client);
    no_reply(&mut client);
    proxy.resume_all();
    assert_eq!(reply(&mut client, Duration::from_secs(5)).unwrap(), "+PONG");
}

#[test]
fn a_black_hole_accepts_and_never_answers() {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let before = connected_clients(&server);
    proxy.set_new_connections(NewConnections::BlackHole);
    let mut lost = dial(&proxy);
    send_ping(&mut lost);
    no_reply(&mut lost);
    assert_eq!(proxy.accepted(), 1);
    // It never reached the server.
    assert_eq!(connected_clients(&server), before);
    proxy.set_new_connections(NewConnections::Forward);
    assert_eq!(ping(&mut dial(&proxy)), "+PONG");
}

#[test]
fn a_reset_gives_the_client_a_connection_error() {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let mut client = dial(&proxy);
    assert_eq!(ping(&mut client), "+PONG");
    proxy.reset_all();
    let error = reply(&mut client, Duration::from_secs(5)).unwrap_err();
    assert_eq!(error.kind(), ErrorKind::ConnectionReset, "{error}");
    // The proxy itself goes on.
    assert_eq!(ping(&mut dial(&proxy)), "+PONG");
}

#[test]
fn latency_delays_replies() {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let mut client = dial(&proxy);
    proxy.set_latency(Duration::from_millis(100), Duration::from_millis(150));
    let started = Instant::now();
    assert_eq!(ping(&mut client), "+PONG");
    assert!(started.elapsed() >= Duration::from_millis(250));
    proxy.set_latency(Duration::ZERO, Duration::ZERO);
    let started = Instant::now();
    assert_eq!(ping(&mut client), "+PONG");
    assert!(started.elapsed() < Duration::from_millis(100));
}

#[test]
fn new_connections_follow_the_upstream() {
    let first = RedisServer::start().unwrap();
    let second = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(first.port()).unwrap();
    let port_behind = |client: &mut TcpStream| {
        client.write_all(b"CONFIG GET port\r\n").unwrap();
        // *2, $4, port, $N, then the number.
        (0..4).for_each(|_| drop(reply(client, Duration::from_secs(5)).unwrap()));
        reply(client, Duration::from_secs(5)).unwrap()
    };
    let mut old = dial(&proxy);
    // Answered: the proxy has accepted it (a connection still in the listen
    // backlog would count as new).
    assert_eq!(ping(&mut old), "+PONG");
    proxy.set_upstream(second.port());
    let mut new = dial(&proxy);
    assert_eq!(port_behind(&mut old), first.port().to_string());
    assert_eq!(port_behind(&mut new), second.port().to_string());
}

#[test]
fn dropping_the_proxy_closes_its_connections() {
    let server = RedisServer::start().unwrap();
    let proxy = FaultProxy::start(server.port()).unwrap();
    let mut client = dial(&proxy);
    assert_eq!(ping(&mut client), "+PONG");
    drop(proxy);
    assert!(reply(&mut client, Duration::from_secs(5)).is_err());
}
