//! The store seam, proved with a backend that is not Redis: the waiting, guard,
//! watchdog, fencing and rate-limit logic run unchanged on `MemoryStore`.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use common::turns::assert_fair_order;
use latchkey::{Client, Error, Fairness, Lease, Ttl};
use latchkey_testkit::MemoryStore;

fn client(store: &MemoryStore) -> Client<MemoryStore> {
    Client::with_store(store.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_of_separate_clients_take_turns() {
    let store = MemoryStore::new();
    let counter = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..6 {
        // A client each: no local line between them, only the store keeps them apart.
        let mutex = client(&store).mutex("counter").unwrap();
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..20 {
                let guard = mutex.lock_timeout(Duration::from_secs(20)).await.unwrap();
                // A read-modify-write that loses updates unless it runs alone.
                let seen = counter.load(Ordering::SeqCst);
                tokio::task::yield_now().await;
                counter.store(seen + 1, Ordering::SeqCst);
                assert!(guard.release().await.unwrap());
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    assert_eq!(counter.load(Ordering::SeqCst), 120);
}

#[tokio::test]
async fn a_busy_lock_says_who_holds_it_and_fences_grow() {
    let store = MemoryStore::new();
    let mutex = client(&store).mutex("report").unwrap();
    let first = mutex.try_lock().await.unwrap();
    let Err(Error::Busy {
        holder,
        retry_after,
        ..
    }) = client(&store).mutex("report").unwrap().try_lock().await
    else {
        panic!("a second holder got the lock");
    };
    assert!(holder.is_some() && retry_after.is_some());
    let fence = first.fence().await.unwrap();
    assert!(first.release().await.unwrap());
    let second = mutex.try_lock().await.unwrap();
    assert!(second.fence().await.unwrap() > fence);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_wakes_the_waiter_instead_of_its_timer() {
    let store = MemoryStore::new();
    let held = client(&store)
        .mutex("wake")
        .unwrap()
        .try_lock()
        .await
        .unwrap();
    // With a 30 s waiter lease and a 30 s holder lease, a waiter that is not woken
    // re-checks only after 10 s: well past its 5 s wait.
    let waiter = client(&store)
        .mutex("wake")
        .unwrap()
        .with_waiter_lease(Ttl::new(Duration::from_secs(30)).unwrap());
    let waiting = tokio::spawn(async move { waiter.lock_timeout(Duration::from_secs(5)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(held.release().await.unwrap());
    let guard = waiting.await.unwrap().expect("the release woke the waiter");
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fair_waiters_get_the_lock_in_arrival_order() {
    let store = MemoryStore::new();
    let waiters = (0..4).map(|_| client(&store)).collect();
    assert_fair_order(&client(&store), waiters, "fifo").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_watchdog_keeps_a_short_lease_alive() {
    let store = MemoryStore::new();
    let mutex = client(&store)
        .mutex("long-job")
        .unwrap()
        .with_lease(Lease::renewed(Duration::from_millis(300)).unwrap());
    let guard = mutex.try_lock().await.unwrap();
    // Five leases long: only renewals keep it.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    assert!(
        client(&store)
            .mutex("long-job")
            .unwrap()
            .try_lock()
            .await
            .is_err()
    );
    assert!(!guard.is_lost());
    assert!(guard.is_held().await.unwrap());
    assert!(guard.release().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_fires_the_lost_signal_and_the_next_fence_is_larger() {
    let store = MemoryStore::new();
    let mutex = client(&store)
        .mutex("paused")
        .unwrap()
        .with_lease(Lease::renewed(Duration::from_millis(300)).unwrap());
    let guard = mutex.try_lock().await.unwrap();
    store.expire(mutex.key());
    let next = client(&store)
        .mutex("paused")
        .unwrap()
        .try_lock()
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(5), guard.lost())
        .await
        .expect("the watchdog noticed the lock was taken");
    assert!(next.fence().await.unwrap() > guard.fence().await.unwrap());
    assert!(
        !guard.release().await.unwrap(),
        "released someone else's lock"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_waiter_leaves_the_queue() {
    let store = MemoryStore::new();
    let held = client(&store)
        .mutex("cancel")
        .unwrap()
        .try_lock()
        .await
        .unwrap();
    let waiter = client(&store)
        .mutex("cancel")
        .unwrap()
        .with_fairness(Fairness::Fair);
    let waiting = tokio::spawn(async move { waiter.lock().await });
    let status = || async {
        client(&store)
            .mutex("cancel")
            .unwrap()
            .status()
            .await
            .unwrap()
    };
    while status().await.waiters == 0 {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    waiting.abort();
    let _ = waiting.await;
    latchkey::finish_background_releases(Duration::from_secs(5)).await;
    assert_eq!(status().await.waiters, 0);
    held.release().await.unwrap();
    // A fair newcomer is not held back by the cancelled waiter.
    let fair = client(&store)
        .mutex("cancel")
        .unwrap()
        .with_fairness(Fairness::Fair);
    fair.try_lock().await.unwrap().release().await.unwrap();
}

#[tokio::test]
async fn list_uses_its_own_seam() {
    let store = MemoryStore::new();
    let client = client(&store).with_prefix("app:").unwrap();
    let guard = client.mutex("deploy").unwrap().try_lock().await.unwrap();
    let listed = client.list("*").await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].0, "deploy");
    assert!(listed[0].1.is_held_by_latchkey());
    guard.release().await.unwrap();
}
