//! Redis Sentinel: a primary, its replica and three Sentinels, real processes.
//! Locks go to the primary the Sentinels name; through a failover (asked for, or
//! the primary killed) holds stay exclusive, fences grow, and waiters are woken by
//! the new primary's releases.

mod common;

use std::time::{Duration, Instant};

use common::turns::{UnderLoad, assert_release_wakes};
use latchkey::{Client, Error};
use latchkey_testkit::Sentinels;

async fn client(set: &Sentinels) -> Client {
    Client::open_sentinel(set.master_name(), &set.urls())
        .await
        .unwrap()
}

/// How long after the Sentinels name the new primary a client may still be granted
/// a lock on the old one: the README's 500 ms (it asks them every 400 ms, and never
/// sends to a primary named more than 500 ms before), and 500 ms for a loaded
/// machine between a grant and its holder noting the time.
const STALE_PRIMARY: Duration = Duration::from_millis(1_000);

/// Locks under load while `fault` fails the primary over; every hold stays
/// exclusive but where the README says it may not (a grant on the old primary, or
/// one not yet replicated, from the fault until `STALE_PRIMARY` after the new
/// primary is named), fences grow, locks are taken again after, and a waiter
/// behind a holder on the new primary is woken by its release.
async fn under_failover(fault: impl FnOnce(&mut Sentinels)) {
    let mut set = Sentinels::start().unwrap();
    let mut clients = Vec::new();
    for _ in 0..3 {
        clients.push(client(&set).await);
    }
    let load = UnderLoad::start(clients, "nightly");
    // Made before the failover: its subscriber connection must follow it.
    let waiter = client(&set).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let old_primary = set.primary_port().unwrap();
    let failed_over_at = Instant::now();
    tokio::task::block_in_place(|| fault(&mut set));
    assert_ne!(set.primary_port().unwrap(), old_primary);
    let split_brain = (failed_over_at, Instant::now() + STALE_PRIMARY);
    load.assert_survived_outside(failed_over_at, Some(split_brain))
        .await;
    assert_release_wakes(&client(&set).await, &waiter, "wake").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_failover_keeps_locks_working() {
    under_failover(|set| set.failover().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_is_followed_to_the_new_one() {
    under_failover(|set| {
        let old = set.primary_port().unwrap();
        let primary = set.servers().iter().position(|s| s.port() == old).unwrap();
        set.servers_mut()[primary].kill().unwrap();
        set.wait_for_new_primary(old).unwrap();
    })
    .await;
}

#[tokio::test]
async fn an_unknown_master_name_is_a_clear_error() {
    let set = Sentinels::start().unwrap();
    let err = Client::open_sentinel("no-such-master", &set.urls())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("no-such-master"), "{err}");
    let err = Client::open_sentinel("", &set.urls()).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

/// After `SENTINEL FAILOVER` the old primary still answers as a master for seconds,
/// until the Sentinels demote it. A client connected to it must move to the new
/// primary by itself, not lock on the old one meanwhile (two holders of one lock).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failover_locks_go_to_the_new_primary_not_the_old_one_still_answering() {
    let set = Sentinels::start().unwrap();
    let client = client(&set).await;
    drop(client.mutex("before").unwrap().lock().await.unwrap());
    let old = set.primary_port().unwrap();
    tokio::task::block_in_place(|| set.failover().unwrap());
    // Within a couple of the client's checks (every 500 ms).
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let _guard = client.mutex("after").unwrap().lock().await.unwrap();
    assert_taken_on_the_new_primary(&set, old, "after");
}

/// A process frozen through a failover (SIGSTOP, a long GC pause) wakes with its
/// connection on the old primary, which may still answer as a master. Its first
/// command must go to the new primary, not wait for the next periodic check.
#[tokio::test(flavor = "current_thread")]
async fn a_client_frozen_through_a_failover_locks_on_the_new_primary_when_it_wakes() {
    let set = Sentinels::start().unwrap();
    let client = client(&set).await;
    drop(client.mutex("before").unwrap().lock().await.unwrap());
    let old = set.primary_port().unwrap();
    // Blocking the runtime's only thread freezes the client, its periodic check of
    // the primary included, as SIGSTOP would; for longer than the 500 ms within
    // which a grant may still go to the old primary.
    set.failover().unwrap();
    std::thread::sleep(Duration::from_millis(600));
    let _guard = client.mutex("after").unwrap().lock().await.unwrap();
    assert_taken_on_the_new_primary(&set, old, "after");
}

/// The lock `key` is on the primary the Sentinels name now, and not on the old
/// primary (on `old`) unless that was demoted and holds a replicated copy.
fn assert_taken_on_the_new_primary(set: &Sentinels, old: u16, key: &str) {
    let new = set.primary_port().unwrap();
    let server = |port: u16| set.servers().iter().find(|s| s.port() == port).unwrap();
    let holds = |port: u16| {
        let mut conn = server(port).connection().unwrap();
        redis::cmd("EXISTS")
            .arg(key)
            .query::<bool>(&mut conn)
            .unwrap()
    };
    assert!(holds(new), "the lock is on the primary the Sentinels name");
    let old_role = server(old).info_field("replication", "role").unwrap();
    if old_role.as_deref() == Some("master") {
        assert!(!holds(old), "the lock was taken on the old primary");
    }
}

/// Right after a failover, a Sentinel that has not heard of it yet still names the
/// old primary, which still answers as a master until it is demoted. Listed first,
/// such a Sentinel must not send the client back there: the answer of the Sentinel
/// that knows the newest configuration (highest epoch) wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_that_missed_the_failover_does_not_send_locks_to_the_old_primary() {
    let set = Sentinels::start().unwrap();
    let old = set.primary_port().unwrap();
    let stale = StaleSentinel::start(old).await;
    let mut urls = vec![stale.url()];
    urls.extend(set.urls());
    tokio::task::block_in_place(|| set.failover().unwrap());
    let client = Client::open_sentinel(set.master_name(), &urls)
        .await
        .unwrap();
    let _guard = client.mutex("after").unwrap().lock().await.unwrap();
    assert_taken_on_the_new_primary(&set, old, "after");
}

/// A Sentinel stuck before the first failover: it names the primary on `port`,
/// with configuration epoch 0, whatever happens.
struct StaleSentinel {
    port: u16,
    task: tokio::task::JoinHandle<()>,
}

impl StaleSentinel {
    async fn start(primary: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                tokio::spawn(answer_as_stale_sentinel(socket, primary));
            }
        });
        StaleSentinel { port, task }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

impl Drop for StaleSentinel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads RESP commands (arrays of bulk strings) and answers `SENTINEL MASTER` and
/// `SENTINEL GET-MASTER-ADDR-BY-NAME` with the stale primary, anything else (the connection's handshake) with `+OK`.
async fn answer_as_stale_sentinel(socket: tokio::net::TcpStream, primary: u16) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
    let (read, mut write) = socket.into_split();
    let mut read = BufReader::new(read);
    loop {
        let mut line = String::new();
        if read.read_line(&mut line).await.unwrap_or(0) == 0 {
            return;
        }
        let Some(count) = line.trim().strip_prefix('*').and_then(|n| n.parse().ok()) else {
            return;
        };
        let mut args = Vec::new();
        for _ in 0..count {
            let mut header = String::new();
            read.read_line(&mut header).await.unwrap_or(0);
            let len: usize = header.trim().trim_start_matches('$').parse().unwrap_or(0);
            let mut arg = vec![0; len + 2];
            if read.read_exact(&mut arg).await.is_err() {
                return;
            }
            arg.truncate(len);
            args.push(String::from_utf8_lossy(&arg).to_uppercase());
        }
        let reply = match args.get(1).map(String::as_str) {
            Some("GET-MASTER-ADDR-BY-NAME") => {
                let port = primary.to_string();
                format!("*2\r\n$9\r\n127.0.0.1\r\n${}\r\n{port}\r\n", port.len())
            }
            Some("MASTER") => {
                let fields = [
                    ("name", "latchkey".to_owned()),
                    ("ip", "127.0.0.1".to_owned()),
                    ("port", primary.to_string()),
                    ("flags", "master".to_owned()),
                    ("config-epoch", "0".to_owned()),
                ];
                let mut reply = format!("*{}\r\n", fields.len() * 2);
                for (key, value) in fields {
                    for item in [key, value.as_str()] {
                        reply += &format!("${}\r\n{item}\r\n", item.len());
                    }
                }
                reply
            }
            _ => "+OK\r\n".to_owned(),
        };
        if write.write_all(reply.as_bytes()).await.is_err() {
            return;
        }
    }
}

/// Fails the primary over, then makes the old primary answer as a writable master
/// again, as one paused through the failover does until the Sentinels demote it;
/// waits past the client's check of the primary (every 500 ms).
async fn fail_over_leaving_the_old_primary_writable(set: &Sentinels) {
    let old = set.primary_port().unwrap();
    tokio::task::block_in_place(|| set.failover().unwrap());
    let old_server = set.servers().iter().find(|s| s.port() == old).unwrap();
    let _: () = redis::cmd("REPLICAOF")
        .arg("NO")
        .arg("ONE")
        .query(&mut old_server.connection().unwrap())
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
}

/// The balance on the primary the Sentinels name now.
fn balance_on_the_primary(set: &Sentinels) -> Option<i64> {
    let new = set.primary_port().unwrap();
    let new_server = set.servers().iter().find(|s| s.port() == new).unwrap();
    redis::cmd("GET")
        .arg("balance")
        .query(&mut new_server.connection().unwrap())
        .unwrap()
}

/// One increment of the balance, in a transaction; `between` runs in the body,
/// between the read and the write.
async fn increment<F: Future<Output = ()>>(client: &Client, between: impl Fn() -> F) {
    let tx = client.transaction(&["balance"]).unwrap();
    let _: Option<()> = tx
        .run(|reads| {
            let between = between();
            async move {
                let n: Option<i64> = reads.get("balance").await?;
                between.await;
                let mut writes = redis::pipe();
                writes.set("balance", n.unwrap_or(0) + 1).ignore();
                Ok(Some(writes))
            }
        })
        .await
        .unwrap();
}

/// A transaction's idle connection (kept for the next one) to a primary that a
/// failover replaced, and that still answers as a master: the next transaction must
/// commit on the new primary, not there, where the demotion throws it away.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_after_a_failover_commits_on_the_new_primary() {
    let set = Sentinels::start().unwrap();
    let client = client(&set).await;
    increment(&client, || async {}).await;
    fail_over_leaving_the_old_primary_writable(&set).await;
    increment(&client, || async {}).await;
    assert_eq!(
        balance_on_the_primary(&set),
        Some(2),
        "the second commit went to the old primary"
    );
}

/// A failover while a transaction's body runs (between its reads and its EXEC): the
/// EXEC must not go to the old primary, still writable; the transaction runs again
/// on the new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_during_a_transaction_s_body_does_not_commit_on_the_old_primary() {
    let set = Sentinels::start().unwrap();
    let client = client(&set).await;
    increment(&client, || async {}).await;
    let failed_over = std::sync::atomic::AtomicBool::new(false);
    increment(&client, || async {
        if !failed_over.swap(true, std::sync::atomic::Ordering::SeqCst) {
            fail_over_leaving_the_old_primary_writable(&set).await;
        }
    })
    .await;
    assert_eq!(
        balance_on_the_primary(&set),
        Some(2),
        "the commit went to the old primary"
    );
}

/// A waiter's subscription follows the primary as its commands do: after a
/// failover that leaves the old primary answering as a master (paused through it,
/// not yet demoted), a client whose subscriber was on the old primary still hears
/// the new primary's releases, instead of waiting out its timer (10 s here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_failover_a_waiter_hears_the_new_primary_s_releases() {
    let set = Sentinels::start().unwrap();
    let holder = client(&set).await;
    let waiting = client(&set).await;
    let long = |client: &Client| {
        client
            .mutex("job")
            .unwrap()
            .with_lease(latchkey::Lease::renewed(Duration::from_secs(30)).unwrap())
            .with_waiter_lease(latchkey::Ttl::new(Duration::from_secs(30)).unwrap())
    };
    // The waiting client's subscriber connects to the primary of the moment.
    let first = long(&holder).lock().await.unwrap();
    let busy = long(&waiting)
        .lock_timeout(Duration::from_millis(200))
        .await;
    assert!(matches!(busy, Err(Error::Busy { .. })), "{busy:?}");
    first.release().await.unwrap();
    fail_over_leaving_the_old_primary_writable(&set).await;
    let guard = long(&holder).lock().await.unwrap();
    let waiter = long(&waiting);
    let waited = tokio::spawn(async move { waiter.lock_timeout(Duration::from_secs(20)).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    let released = Instant::now();
    guard.release().await.unwrap();
    let taken = waited.await.unwrap().unwrap();
    let woken_after = released.elapsed();
    assert!(
        woken_after < Duration::from_millis(1_500),
        "woken {woken_after:?} after the release: not by it"
    );
    taken.release().await.unwrap();
}
