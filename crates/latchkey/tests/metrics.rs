//! The library's metrics, read back through a real exporter (the Prometheus text
//! format, as a scrape sees it) after real calls against a real server: outcomes,
//! waits, holds, the held gauge, handoffs, renewals, lost leases, rate-limit
//! decisions and transaction attempts. The tests share the process's one recorder,
//! so each uses locks of its own names with named metrics.

#![cfg(feature = "metrics")]

mod common;

use std::sync::OnceLock;
use std::time::Duration;

use latchkey::ratelimit::Policy;
use latchkey::{Error, Semaphore};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use redis::AsyncCommands;

/// The recorder every test of this binary records to.
fn exporter() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        let handle = PrometheusBuilder::new().install_recorder().unwrap();
        latchkey::metrics::describe();
        handle
    })
}

/// The value of the series `metric` whose labels include every one of `labels`
/// (`key="value"`), summed over the series that match; 0 if none does.
fn value(metric: &str, labels: &[&str]) -> f64 {
    exporter()
        .render()
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, rest) = series.split_once('{').unwrap_or((series, ""));
            (name == metric && labels.iter().all(|label| rest.contains(label)))
                .then(|| value.parse::<f64>().unwrap())
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquisitions_are_counted_by_outcome_with_their_waits_and_holds() {
    exporter();
    let (server, client) = common::start().await;
    let mutex = client.mutex("m-outcomes").unwrap().with_named_metrics();
    let other = client.mutex("m-outcomes").unwrap().with_named_metrics();
    let name = r#"name="m-outcomes""#;

    let guard = mutex.lock().await.unwrap();
    assert_eq!(value("latchkey_held", &[name]), 1.0);
    // From another client, so no local pass: a try finds it busy, a timed wait times out.
    let elsewhere = latchkey::Client::open(&server.url()).await.unwrap();
    let far = elsewhere.mutex("m-outcomes").unwrap().with_named_metrics();
    assert!(matches!(far.try_lock().await, Err(Error::Busy { .. })));
    assert!(matches!(
        far.lock_timeout(Duration::from_millis(100)).await,
        Err(Error::Busy { .. })
    ));
    // A wait dropped before its outcome is cancelled.
    let cancelled = tokio::time::timeout(Duration::from_millis(50), other.lock()).await;
    assert!(cancelled.is_err());
    tokio::time::sleep(Duration::from_millis(20)).await;
    guard.release().await.unwrap();
    assert_eq!(value("latchkey_held", &[name]), 0.0);

    let count = |outcome: &str| {
        value(
            "latchkey_acquisitions_total",
            &[name, &format!(r#"outcome="{outcome}""#)],
        )
    };
    assert_eq!(count("granted"), 1.0);
    assert_eq!(count("busy"), 1.0);
    assert_eq!(count("timed_out"), 1.0);
    assert_eq!(count("cancelled"), 1.0);
    let granted = [
        name,
        r#"primitive="lock""#,
        r#"deployment="single""#,
        r#"outcome="granted""#,
    ];
    assert_eq!(value("latchkey_acquisitions_total", &granted), 1.0);
    // Every outcome has its wait; the timed-out one waited at least its 100 ms.
    assert_eq!(value("latchkey_wait_seconds_count", &[name]), 4.0);
    let timed_out = [name, r#"outcome="timed_out""#];
    assert!(value("latchkey_wait_seconds_sum", &timed_out) >= 0.1);
    // One hold, which lasted past the 150 ms of waits made during it.
    assert_eq!(value("latchkey_hold_seconds_count", &[name]), 1.0);
    assert!(value("latchkey_hold_seconds_sum", &[name]) >= 0.15);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_labels_only_when_asked_for() {
    exporter();
    let (_server, client) = common::start().await;
    client
        .mutex("m-unnamed")
        .unwrap()
        .lock()
        .await
        .unwrap()
        .release()
        .await
        .unwrap();
    let scrape = exporter().render();
    assert!(!scrape.contains("m-unnamed"), "{scrape}");
    assert!(value("latchkey_acquisitions_total", &[r#"outcome="granted""#]) >= 1.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_and_a_lost_lease_are_counted() {
    exporter();
    let (server, client) = common::start().await;
    let name = r#"name="m-renewed""#;
    let mutex =
        common::renewed(&client, "m-renewed", Duration::from_millis(300)).with_named_metrics();
    let guard = mutex.lock().await.unwrap();
    // Renewed every 100 ms.
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(value("latchkey_renewals_total", &[name, r#"result="ok""#]) >= 2.0);
    assert_eq!(value("latchkey_leases_lost_total", &[name]), 0.0);
    // An operator deletes the key: the next renewal finds it gone.
    let mut conn = common::connect(&server.url()).await;
    let _: () = conn.del("m-renewed").await.unwrap();
    tokio::time::timeout(Duration::from_secs(2), guard.lost())
        .await
        .unwrap();
    assert_eq!(value("latchkey_leases_lost_total", &[name]), 1.0);
    assert_eq!(
        value("latchkey_renewals_total", &[name, r#"result="failed""#]),
        1.0
    );
    drop(guard);
    assert_eq!(value("latchkey_held", &[name]), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handoffs_are_counted_by_way() {
    exporter();
    let (server, client) = common::start().await;
    let name = r#"name="m-handoff""#;
    let mutex = client.mutex("m-handoff").unwrap().with_named_metrics();
    // A task of this process waits behind the holder: the release passes it on.
    let guard = mutex.lock().await.unwrap();
    let local = mutex.clone();
    let waiter = tokio::spawn(async move { local.lock().await.unwrap().release().await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    guard.release().await.unwrap();
    waiter.await.unwrap().unwrap();
    assert_eq!(
        value("latchkey_handoffs_total", &[name, r#"via="local""#]),
        1.0
    );
    // Another process's waiter in the queue: the release hands it over in Redis.
    let guard = mutex.lock().await.unwrap();
    let other = latchkey::Client::open(&server.url()).await.unwrap();
    let far = other.mutex("m-handoff").unwrap().with_named_metrics();
    let waiter = tokio::spawn(async move { far.lock().await.unwrap().release().await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    guard.release().await.unwrap();
    waiter.await.unwrap().unwrap();
    assert_eq!(
        value("latchkey_handoffs_total", &[name, r#"via="redis""#]),
        1.0
    );
    assert_eq!(
        value(
            "latchkey_acquisitions_total",
            &[name, r#"outcome="granted""#]
        ),
        4.0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn permits_held_count_their_weight() {
    exporter();
    let (_server, client) = common::start().await;
    let pool: Semaphore = client.semaphore("m-pool", 5).unwrap().with_named_metrics();
    let name = r#"name="m-pool""#;
    let three = pool.acquire(3).await.unwrap();
    let one = pool.acquire(1).await.unwrap();
    let labels = [name, r#"primitive="semaphore""#];
    assert_eq!(value("latchkey_held", &labels), 4.0);
    assert!(matches!(pool.try_acquire(2).await, Err(Error::Busy { .. })));
    three.release().await.unwrap();
    assert_eq!(value("latchkey_held", &labels), 1.0);
    drop(one);
    assert_eq!(value("latchkey_held", &labels), 0.0);
    let busy = [name, r#"outcome="busy""#];
    assert_eq!(value("latchkey_acquisitions_total", &busy), 1.0);
    // A read-write lock's holds count one each, whatever their internal weights.
    let config = client.rw_lock("m-config").unwrap().with_named_metrics();
    let rw = [r#"name="m-config""#, r#"primitive="rwlock""#];
    let write = config.write().await.unwrap();
    assert_eq!(value("latchkey_held", &rw), 1.0);
    let read = config.downgrade(write).await.unwrap();
    assert_eq!(value("latchkey_held", &rw), 1.0);
    read.release().await.unwrap();
    assert_eq!(value("latchkey_held", &rw), 0.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rate_limit_decisions_are_counted_by_policy() {
    exporter();
    let (_server, client) = common::start().await;
    let policy = Policy::fixed_window(2, Duration::from_secs(60))
        .unwrap()
        .named("m-sms")
        .unwrap();
    let sms = client.rate_limiter("m-phone", policy).unwrap();
    for _ in 0..3 {
        sms.check(1).await.unwrap();
    }
    let policy = r#"policy="m-sms""#;
    let algorithm = r#"algorithm="fixed_window""#;
    let decided = |decision: &str| {
        value(
            "latchkey_ratelimit_decisions_total",
            &[policy, algorithm, &format!(r#"decision="{decision}""#)],
        )
    };
    assert_eq!(decided("allowed"), 2.0);
    assert_eq!(decided("denied"), 1.0);
    // The limiter's own name only when asked for.
    assert!(!exporter().render().contains("m-phone"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_attempts_are_counted_by_result() {
    exporter();
    let (server, client) = common::start().await;
    let tx = client.transaction(&["{m-tx}:n"]).unwrap();
    let committed = r#"result="committed""#;
    let conflict = r#"result="conflict""#;
    let before = (
        value("latchkey_transaction_attempts_total", &[committed]),
        value("latchkey_transaction_attempts_total", &[conflict]),
    );
    let url = server.url();
    let mut first = true;
    let done: Option<()> = tx
        .run(|reads| {
            let url = url.clone();
            let meddle = std::mem::take(&mut first);
            async move {
                let n: Option<i64> = reads.get("{m-tx}:n").await?;
                if meddle {
                    // Another writer changes the key between WATCH and EXEC, once.
                    let mut conn = common::connect(&url).await;
                    let _: () = conn.set("{m-tx}:n", 100).await.unwrap();
                }
                let mut writes = redis::pipe();
                writes.set("{m-tx}:n", n.unwrap_or(0) + 1).ignore();
                Ok(Some(writes))
            }
        })
        .await
        .unwrap();
    assert!(done.is_some());
    // Other tests of this binary commit no transactions: the counts are ours.
    assert_eq!(
        value("latchkey_transaction_attempts_total", &[committed]) - before.0,
        1.0
    );
    assert_eq!(
        value("latchkey_transaction_attempts_total", &[conflict]) - before.1,
        1.0
    );
}
