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

/// Locks under load while `fault` fails the primary over; every hold stays
/// exclusive, fences grow, locks are taken again after, and a waiter behind a
/// holder on the new primary is woken by its release.
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
    load.assert_survived(failed_over_at).await;
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
