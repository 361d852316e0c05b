//! Optimistic transactions against a real server: conflicts under concurrency, a
//! connection killed between WATCH and EXEC, bounded retries, slots, and guards
//! whose lock changed hands.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use latchkey::{Error, Lease};
use redis::AsyncCommands;

const COUNTER: &str = "{c}:n";

/// One increment of `COUNTER` by read-then-write, which loses updates unless the
/// EXEC is refused whenever someone else wrote in between.
async fn increment(tx: &latchkey::transaction::Transaction) -> latchkey::Result<Option<()>> {
    tx.run(|reads| async move {
        let n: Option<i64> = reads.get(COUNTER).await?;
        tokio::task::yield_now().await; // let the others read the same value
        let mut writes = redis::pipe();
        writes.set(COUNTER, n.unwrap_or(0) + 1).ignore();
        Ok(Some(writes))
    })
    .await
}

#[tokio::test]
async fn concurrent_read_modify_writes_lose_nothing() {
    let (server, client) = common::start().await;
    let tx = client
        .transaction(&[COUNTER])
        .unwrap()
        .with_attempts(10_000)
        .with_deadline(Duration::from_secs(60));
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let tx = tx.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                increment(&tx).await.unwrap().unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let mut conn = common::connect(&server.url()).await;
    let n: i64 = conn.get(COUNTER).await.unwrap();
    assert_eq!(n, 16 * 20);
}

#[tokio::test]
async fn a_connection_killed_between_watch_and_exec_never_writes_unguarded() {
    let (server, client) = common::start().await;
    let mut admin = common::connect(&server.url()).await;
    let _: () = admin.set(COUNTER, 10).await.unwrap();
    let tx = client.transaction(&[COUNTER]).unwrap();
    let admin_url = server.url();
    let admin_url = admin_url.as_str();
    let outcome: latchkey::Result<Option<()>> = tx
        .run(|reads| async move {
            let n: i64 = reads.get(COUNTER).await?;
            let id = reads.client_id().await?;
            // Someone else writes, and our connection dies: a client that
            // reconnected and sent MULTI/EXEC on the new socket would overwrite it.
            let mut other = common::connect(admin_url).await;
            let _: () = other.set(COUNTER, 100).await.unwrap();
            let _: () = redis::cmd("CLIENT")
                .arg("KILL")
                .arg("ID")
                .arg(id)
                .query_async(&mut other)
                .await
                .unwrap();
            let mut writes = redis::pipe();
            writes.set(COUNTER, n + 1).ignore();
            Ok(Some(writes))
        })
        .await;
    let error = outcome.unwrap_err();
    assert!(matches!(error, Error::Unreachable { .. }), "{error:?}");
    let n: i64 = admin.get(COUNTER).await.unwrap();
    assert_eq!(n, 100, "the EXEC ran without its WATCH");
}

#[tokio::test]
async fn a_connection_killed_during_the_reads_is_retried_on_a_new_one() {
    let (server, client) = common::start().await;
    let mut admin = common::connect(&server.url()).await;
    let tx = client.transaction(&[COUNTER]).unwrap();
    let url = server.url();
    let url = url.as_str();
    let done: Option<()> = tx
        .run(|reads| async move {
            if reads.attempt() == 1 {
                let id = reads.client_id().await?;
                let mut other = common::connect(url).await;
                let _: () = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("ID")
                    .arg(id)
                    .query_async(&mut other)
                    .await
                    .unwrap();
            }
            let n: Option<i64> = reads.get(COUNTER).await?;
            let mut writes = redis::pipe();
            writes.set(COUNTER, n.unwrap_or(0) + 1).ignore();
            Ok(Some(writes))
        })
        .await
        .unwrap();
    assert!(done.is_some());
    let n: i64 = admin.get(COUNTER).await.unwrap();
    assert_eq!(n, 1);
}

#[tokio::test]
async fn killing_connections_at_random_loses_no_update() {
    let (server, client) = common::start().await;
    let tx = client
        .transaction(&[COUNTER])
        .unwrap()
        .with_attempts(10_000)
        .with_deadline(Duration::from_secs(60));
    let (committed, unknown) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (tx, committed, unknown) = (tx.clone(), committed.clone(), unknown.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..40 {
                match increment(&tx).await {
                    Ok(_) => committed.fetch_add(1, Ordering::Relaxed),
                    Err(Error::Unreachable { .. }) => unknown.fetch_add(1, Ordering::Relaxed),
                    Err(other) => panic!("{other:?}"),
                };
            }
        }));
    }
    let killer = tokio::spawn({
        let url = server.url();
        async move {
            let mut admin = common::connect(&url).await;
            loop {
                // Every normal client but the store's and this one: the dedicated ones.
                let _: redis::RedisResult<i64> = redis::cmd("CLIENT")
                    .arg("KILL")
                    .arg("TYPE")
                    .arg("normal")
                    .arg("SKIPME")
                    .arg("yes")
                    .query_async(&mut admin)
                    .await;
                tokio::time::sleep(Duration::from_millis(7)).await;
            }
        }
    });
    for task in tasks {
        task.await.unwrap();
    }
    killer.abort();
    let mut conn = common::connect(&server.url()).await;
    let n: u64 = conn
        .get::<_, Option<u64>>(COUNTER)
        .await
        .unwrap()
        .unwrap_or(0);
    let (committed, unknown) = (
        committed.load(Ordering::Relaxed),
        unknown.load(Ordering::Relaxed),
    );
    assert_eq!(committed + unknown, 8 * 40);
    assert!(n >= committed, "lost updates: {n} < {committed} committed");
    assert!(
        n <= committed + unknown,
        "{n} > {committed} committed + {unknown} unknown"
    );
}

#[tokio::test]
async fn a_key_that_changes_every_time_ends_in_contended() {
    let (server, client) = common::start().await;
    let tx = client.transaction(&[COUNTER]).unwrap().with_attempts(3);
    let url = server.url();
    let url = url.as_str();
    let outcome: latchkey::Result<Option<()>> = tx
        .run(|reads| async move {
            let _: Option<i64> = reads.get(COUNTER).await?;
            let mut other = common::connect(url).await;
            let _: () = other.set(COUNTER, reads.attempt() * 1000).await.unwrap();
            let mut writes = redis::pipe();
            writes.set(COUNTER, -1).ignore();
            Ok(Some(writes))
        })
        .await;
    let error = outcome.unwrap_err();
    assert!(
        matches!(error, Error::Contended { attempts: 3, .. }),
        "{error:?}"
    );
    assert!(error.is_transient());
    let mut admin = common::connect(&server.url()).await;
    let n: i64 = admin.get(COUNTER).await.unwrap();
    assert_eq!(n, 3000, "one of our writes went through");
}

#[tokio::test]
async fn keys_in_different_slots_are_refused_and_writing_nothing_is_fine() {
    let (server, client) = common::start().await;
    let split = client.transaction(&["a", "b"]).unwrap_err();
    assert!(matches!(split, Error::InvalidArgument(_)), "{split}");
    assert!(split.to_string().contains("slot"), "{split}");
    assert!(client.transaction(&[]).is_err());
    let nothing: Option<()> = client
        .transaction(&["{x}:a", "{x}:b"])
        .unwrap()
        .run(|_| async { Ok(None) })
        .await
        .unwrap();
    assert!(nothing.is_none());
    let mut admin = common::connect(&server.url()).await;
    let keys: Vec<String> = admin.keys("*").await.unwrap();
    assert!(keys.is_empty(), "{keys:?}");
}

#[tokio::test]
async fn a_guards_transaction_is_refused_once_the_lock_changed_hands() {
    let (server, client) = common::start().await;
    let mutex = client
        .mutex("{acct}:lock")
        .unwrap()
        .with_lease(Lease::fixed(Duration::from_secs(30)).unwrap());
    let guard = mutex.lock().await.unwrap();
    let balance = "{acct}:balance";
    // While ours: commits.
    let ok: Option<()> = guard
        .transaction(&[balance])
        .unwrap()
        .run(|_| async move {
            let mut writes = redis::pipe();
            writes.set(balance, 50).ignore();
            Ok(Some(writes))
        })
        .await
        .unwrap();
    assert!(ok.is_some());
    // The lock is broken and taken by someone else between the reads and the EXEC.
    let url = server.url();
    let url = url.as_str();
    let stolen: latchkey::Result<Option<()>> = guard
        .transaction(&[balance])
        .unwrap()
        .run(|reads| async move {
            let b: i64 = reads.get(balance).await?;
            let thief = latchkey::Client::open(url).await?;
            let lock = thief.mutex("{acct}:lock")?;
            lock.force_release().await?;
            std::mem::forget(lock.try_lock().await?);
            let mut writes = redis::pipe();
            writes.set(balance, b - 10).ignore();
            Ok(Some(writes))
        })
        .await;
    assert!(matches!(stolen, Err(Error::LeaseLost { .. })), "{stolen:?}");
    // And a new transaction on the lost guard is refused before any write.
    let late: latchkey::Result<Option<()>> = guard
        .transaction(&[balance])
        .unwrap()
        .run(|_| async { Ok(Some(redis::pipe())) })
        .await;
    assert!(matches!(late, Err(Error::LeaseLost { .. })), "{late:?}");
    let mut admin = common::connect(&server.url()).await;
    let b: i64 = admin.get(balance).await.unwrap();
    assert_eq!(b, 50);
    let outside = guard.transaction(&["elsewhere"]).unwrap_err();
    assert!(matches!(outside, Error::InvalidArgument(_)));
}

#[tokio::test]
async fn a_failed_command_inside_exec_says_the_writes_ran() {
    let (server, client) = common::start().await;
    let mut admin = common::connect(&server.url()).await;
    let _: () = admin.lpush("{w}:list", "x").await.unwrap();
    let tx = client.transaction(&["{w}:n", "{w}:list"]).unwrap();
    // Whether the failing write's reply is wanted or ignored.
    for ignored in [false, true] {
        let outcome: latchkey::Result<Option<Vec<i64>>> = tx
            .run(|_| async move {
                let mut writes = redis::pipe();
                writes.incr("{w}:n", 7).incr("{w}:list", 1);
                if ignored {
                    writes.ignore();
                }
                Ok(Some(writes))
            })
            .await;
        let error = outcome.unwrap_err();
        assert!(error.to_string().contains("the transaction ran"), "{error}");
        assert!(!error.is_transient());
    }
    let n: i64 = admin.get("{w}:n").await.unwrap();
    assert_eq!(
        n, 14,
        "the first write of each should be in: Redis does not roll back"
    );
}

#[tokio::test]
async fn a_write_refused_when_queued_runs_nothing() {
    let (server, client) = common::start().await;
    let mut admin = common::connect(&server.url()).await;
    let outcome: latchkey::Result<Option<()>> = client
        .transaction(&["{q}:n"])
        .unwrap()
        .run(|_| async {
            let mut writes = redis::pipe();
            // A wrong number of arguments is refused when queued: EXECABORT.
            writes.set("{q}:n", 1).ignore().cmd("INCR").ignore();
            Ok(Some(writes))
        })
        .await;
    let error = outcome.unwrap_err();
    assert!(error.to_string().contains("nothing ran"), "{error}");
    let n: Option<i64> = admin.get("{q}:n").await.unwrap();
    assert_eq!(n, None, "a write of a refused transaction ran");
}

#[tokio::test]
async fn stale_idle_connections_after_a_restart_are_replaced_not_counted_against_the_run() {
    let (mut server, client) = common::start().await;
    let tx = client.transaction(&[COUNTER]).unwrap().with_attempts(1_000);
    // Fill the idle list with several connections, used at once.
    let runs: Vec<_> = (0..6)
        .map(|_| {
            let tx = tx.clone();
            tokio::spawn(async move { increment(&tx).await })
        })
        .collect();
    for run in runs {
        run.await.unwrap().unwrap();
    }
    server.restart().unwrap();
    // Every idle connection is dead now; two attempts are enough anyway: the first
    // finds one dead and drops them all, the second opens a new one.
    let once = tx.with_attempts(2);
    increment(&once).await.unwrap().unwrap();
}
