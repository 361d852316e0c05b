//! The synchronous semaphore, read-write lock and quorum client, against real
//! redis-server processes.

use std::time::{Duration, Instant};

use latchkey::blocking::{Client, Semaphore};
use latchkey::{Error, Lease, Ttl};
use latchkey_testkit::RedisServer;

/// A blocking client of `server`, under its own prefix.
fn client(server: &RedisServer) -> Client {
    Client::open(&server.url())
        .unwrap()
        .with_prefix("sync:")
        .unwrap()
}

/// Waits (at most 5 s) until `condition` holds.
fn until(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_blocking_semaphore_counts_queues_and_gives_permits_back() {
    let server = RedisServer::start().unwrap();
    let client = client(&server);
    let pool = client
        .semaphore("pool", 3)
        .unwrap()
        .with_lease(Lease::fixed(Duration::from_secs(10)).unwrap())
        .with_waiter_lease(Ttl::new(Duration::from_secs(3)).unwrap());
    assert_eq!(pool.permits(), 3);
    assert_eq!(pool.available().unwrap(), 3);
    assert_eq!(pool.waiting().unwrap(), 0);
    assert!(Semaphore::check_permits(3).is_ok());
    assert!(matches!(
        client.semaphore("pool", 0),
        Err(Error::InvalidArgument(_))
    ));

    // Weighted permits, each with its own lease and a growing fencing token.
    let two = pool.acquire(2).unwrap();
    assert_eq!(pool.available().unwrap(), 1);
    let one = pool.try_acquire(1).unwrap();
    assert_eq!(pool.available().unwrap(), 0);
    // Tokens computed on demand grow in the order they are asked for.
    let two_fence = two.fence().unwrap();
    assert!(one.fence().unwrap() > two_fence);
    assert!(one.is_held().unwrap() && two.is_held().unwrap());
    assert_ne!(one.owner().as_str(), two.owner().as_str());
    one.extend(Duration::from_secs(20)).unwrap();
    assert!(one.validity() > Duration::from_secs(10));

    // Full: no permit now, nor within a short wait; impossible weights are refused.
    assert!(matches!(pool.try_acquire(1), Err(Error::Busy { .. })));
    let started = Instant::now();
    assert!(matches!(
        pool.acquire_timeout(1, Duration::from_millis(200)),
        Err(Error::Busy { .. })
    ));
    assert!(started.elapsed() < Duration::from_secs(2));
    assert!(matches!(pool.acquire(0), Err(Error::InvalidArgument(_))));
    assert!(matches!(pool.acquire(4), Err(Error::InvalidArgument(_))));

    // A waiter on another thread queues, and the release of two permits lets it in.
    let waiter = std::thread::spawn({
        let pool = pool.clone();
        move || pool.acquire_timeout(2, Duration::from_secs(10))
    });
    until("the waiter queues", || pool.waiting().unwrap() == 1);
    assert!(matches!(pool.try_acquire(1), Err(Error::Busy { .. })));
    assert!(two.release().unwrap());
    let waited = waiter.join().unwrap().unwrap();
    assert!(waited.fence().unwrap() > one.fence().unwrap());
    assert_eq!(pool.waiting().unwrap(), 0);
    assert_eq!(pool.available().unwrap(), 0);

    // A dropped permit is given back before the drop returns.
    drop(waited);
    assert_eq!(pool.available().unwrap(), 2);
    drop(one);
    assert_eq!(pool.available().unwrap(), 3);
}

#[test]
fn a_blocking_semaphore_permit_is_renewed_while_it_lives() {
    let server = RedisServer::start().unwrap();
    let pool = client(&server)
        .semaphore("renewed", 1)
        .unwrap()
        .with_lease(Lease::renewed(Duration::from_millis(300)).unwrap());
    let permit = pool.acquire(1).unwrap();
    std::thread::sleep(Duration::from_millis(700));
    assert!(!permit.is_lost());
    assert!(
        permit.is_held().unwrap(),
        "the watchdog did not renew the lease"
    );
    assert_eq!(pool.available().unwrap(), 0);
    assert!(permit.release().unwrap());
    assert_eq!(pool.available().unwrap(), 1);
}

#[test]
fn a_blocking_rw_lock_shares_reads_and_puts_a_waiting_writer_first() {
    let server = RedisServer::start().unwrap();
    let config = client(&server)
        .rw_lock("config")
        .unwrap()
        .with_lease(Lease::fixed(Duration::from_secs(10)).unwrap())
        .with_waiter_lease(Ttl::new(Duration::from_secs(3)).unwrap());
    assert_eq!(config.readers().unwrap(), 0);

    // Readers share it; a writer cannot come in while they read.
    let first = config.read().unwrap();
    let second = config.try_read().unwrap();
    let third = config.read_timeout(Duration::from_secs(1)).unwrap();
    assert_eq!(config.readers().unwrap(), 3);
    assert!(matches!(config.try_write(), Err(Error::Busy { .. })));
    assert!(matches!(
        config.write_timeout(Duration::from_millis(200)),
        Err(Error::Busy { .. })
    ));
    drop(third);
    assert_eq!(config.readers().unwrap(), 2);

    // A waiting writer goes first: readers that come after it queue behind it.
    let writer = std::thread::spawn({
        let config = config.clone();
        move || config.write()
    });
    until("the writer queues", || config.waiting().unwrap() == 1);
    assert!(matches!(config.try_read(), Err(Error::Busy { .. })));
    assert!(matches!(
        config.read_timeout(Duration::from_millis(200)),
        Err(Error::Busy { .. })
    ));
    assert!(first.release().unwrap());
    drop(second);
    let write = writer.join().unwrap().unwrap();
    assert_eq!(config.readers().unwrap(), u64::MAX);
    assert_eq!(config.waiting().unwrap(), 0);
    assert!(matches!(config.try_read(), Err(Error::Busy { .. })));
    assert!(matches!(config.try_write(), Err(Error::Busy { .. })));
    let write_fence = write.fence().unwrap();
    assert!(write.release().unwrap());

    // Free again: a writer alone, then readers after it with larger fences.
    let alone = config.write_timeout(Duration::from_secs(1)).unwrap();
    assert!(alone.fence().unwrap() > write_fence);
    drop(alone);
    let read = config.try_read().unwrap();
    assert!(read.fence().unwrap() > write_fence);
    assert_eq!(config.readers().unwrap(), 1);
    drop(read);
    assert_eq!(config.readers().unwrap(), 0);
}

#[test]
fn a_blocking_quorum_client_locks_on_a_majority() {
    let masters: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = masters.iter().map(RedisServer::url).collect();
    let (a, b) = (
        Client::open_quorum(&urls).unwrap(),
        Client::open_quorum(&urls).unwrap(),
    );
    let lease = Lease::fixed(Duration::from_secs(10)).unwrap();
    let report = a.mutex("report").unwrap().with_lease(lease);
    let guard = report.lock_timeout(Duration::from_secs(2)).unwrap();
    let other = b.mutex("report").unwrap().with_lease(lease);
    assert!(matches!(other.try_lock(), Err(Error::Busy { .. })));
    assert!(other.is_locked().unwrap());
    assert!(guard.release().unwrap());
    let taken = other.lock_timeout(Duration::from_secs(2)).unwrap();
    drop(taken);
    assert!(!report.is_locked().unwrap());
}

#[test]
fn a_blocking_election_leads_one_at_a_time_and_resigns_on_drop() {
    let server = RedisServer::start().unwrap();
    let (a, b) = (client(&server), client(&server));
    let election = a.election("jobs").unwrap();
    let mut observer = b.election("jobs").unwrap().observe().unwrap();
    assert_eq!(observer.changed().unwrap(), None);
    let leading = election.campaign("host-a").unwrap();
    assert!(!leading.is_lost());
    assert!(leading.validity() > Duration::from_secs(20));
    let seen = observer.changed().unwrap().unwrap();
    assert_eq!((seen.value.as_str(), seen.term), ("host-a", leading.term()));
    let other = b.election("jobs").unwrap();
    assert!(matches!(
        other.try_campaign("host-b"),
        Err(Error::Busy { .. })
    ));
    let term = leading.term();
    drop(leading);
    let next = other
        .campaign_timeout("host-b", Duration::from_secs(1))
        .unwrap();
    assert!(next.term() > term);
    assert_eq!(other.leader().unwrap().unwrap().value, "host-b");
    assert!(next.resign().unwrap());
    assert_eq!(election.leader().unwrap(), None);
}

#[test]
fn a_blocking_latch_and_barrier_open_once_everyone_arrived() {
    let server = RedisServer::start().unwrap();
    let (a, b) = (client(&server), client(&server));
    let latch = a.latch("loaded", 2).unwrap();
    let other = b.latch("loaded", 2).unwrap();
    let waiting = std::thread::spawn(move || other.wait_timeout(Duration::from_secs(10)).unwrap());
    assert_eq!(latch.count_down().unwrap().left, 1);
    assert_eq!(latch.left().unwrap(), 1);
    assert!(!latch.wait_timeout(Duration::from_millis(50)).unwrap());
    assert!(latch.count_down().unwrap().opened);
    assert!(waiting.join().unwrap());
    latch.wait().unwrap();
    let barrier = b.barrier("stage", 2).unwrap();
    let party = std::thread::spawn(move || {
        assert!(
            barrier
                .arrive_and_wait_timeout(Duration::from_secs(10))
                .unwrap()
        );
    });
    assert!(
        a.barrier("stage", 2)
            .unwrap()
            .arrive_and_wait_timeout(Duration::from_secs(10))
            .unwrap()
    );
    party.join().unwrap();
}

#[test]
fn a_blocking_multi_lock_takes_all_or_none_and_releases_on_drop() {
    let server = RedisServer::start().unwrap();
    let (a, b) = (client(&server), client(&server));
    let held_b = b.mutex("b").unwrap().lock().unwrap();
    let set = a.multi_lock(["a", "b"]).unwrap();
    assert!(matches!(set.try_lock(), Err(Error::Busy { .. })));
    until("a is given back", || {
        !a.mutex("a").unwrap().is_locked().unwrap()
    });
    let busy = set.lock_timeout(Duration::from_millis(200));
    assert!(matches!(busy, Err(Error::Busy { .. })));
    held_b.release().unwrap();
    let both = set.lock_timeout(Duration::from_secs(2)).unwrap();
    assert_eq!(both.fences().unwrap().len(), 2);
    assert!(!both.is_lost());
    drop(both);
    // The drop released both before it returned.
    assert!(!a.mutex("a").unwrap().is_locked().unwrap());
    assert!(!b.mutex("b").unwrap().is_locked().unwrap());
}

#[test]
fn a_blocking_write_guard_downgrades_to_a_read() {
    let server = RedisServer::start().unwrap();
    let client = client(&server);
    let config = client.rw_lock("config").unwrap();
    let write = config.write().unwrap();
    let read = config.downgrade(write).unwrap();
    assert_eq!(config.readers().unwrap(), 1);
    let other = config.try_read().unwrap();
    assert!(matches!(config.try_write(), Err(Error::Busy { .. })));
    drop((read, other));
    assert_eq!(config.readers().unwrap(), 0);
}

#[test]
fn a_blocking_upgradeable_read_upgrades_and_releases_on_drop() {
    let server = RedisServer::start().unwrap();
    let client = client(&server);
    let config = client.rw_lock("config").unwrap();
    let mut guard = config.upgradeable_read().unwrap();
    let reader = config.try_read().unwrap();
    assert!(matches!(
        guard.upgrade_timeout(Duration::from_millis(100)),
        Err(Error::Busy { .. })
    ));
    drop(reader);
    guard.upgrade_timeout(Duration::from_secs(2)).unwrap();
    assert!(guard.is_upgraded());
    assert!(matches!(config.try_read(), Err(Error::Busy { .. })));
    drop(guard);
    assert_eq!(config.readers().unwrap(), 0);
}
