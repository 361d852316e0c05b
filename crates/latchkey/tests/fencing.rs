//! Fencing tokens on demand: an uncontended take is a bare `SET NX PX`, the token is
//! computed when the holder first asks, and only while the lock is still its own.

mod common;

use std::collections::HashMap;
use std::time::Duration;

use latchkey::store::{AcquireRequest, Attempt, LockStore};
use latchkey::{Error, Fencing, LockKey, OwnerToken, Prefix, Ttl};
use redis::AsyncCommands;

/// `INFO commandstats` as command name → calls.
async fn command_calls(raw: &mut redis::aio::MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(raw)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let (name, stats) = line.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = stats.strip_prefix("calls=")?.split(',').next()?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

async fn reset_stats(raw: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async(raw)
        .await
        .unwrap();
}

#[tokio::test]
async fn an_uncontended_lock_costs_one_set_and_one_script_and_no_counter() {
    let (server, client) = common::start().await;
    let mut raw = common::connect(&server.url()).await;
    let mutex = client.mutex("cheap").unwrap();
    // Warm up: the release script is loaded once.
    mutex.lock().await.unwrap().release().await.unwrap();
    reset_stats(&mut raw).await;

    let guard = mutex.lock().await.unwrap();
    assert_eq!(guard.known_fence(), None, "no token until asked for");
    let counter: Option<u64> = raw.get("{cheap}:lk:fence").await.unwrap();
    assert_eq!(counter, None, "an unfenced take writes no counter");
    assert!(guard.release().await.unwrap());

    let calls = command_calls(&mut raw).await;
    assert_eq!(calls.get("set"), Some(&1), "{calls:?}");
    assert_eq!(
        calls.get("evalsha"),
        Some(&1),
        "only the release: {calls:?}"
    );
}

#[tokio::test]
async fn a_token_asked_for_is_computed_once_and_exceeds_every_earlier_holders() {
    let (server, client) = common::start().await;
    let mut raw = common::connect(&server.url()).await;
    let mutex = common::fixed(&client, "ordered", Duration::from_secs(5));
    let mut last = 0;
    for round in 0..20 {
        // Holders that never ask, ask, or had it with the grant, mixed.
        let fencing = match round % 3 {
            0 => Fencing::OnGrant,
            _ => Fencing::OnDemand,
        };
        let guard = mutex.clone().with_fencing(fencing).lock().await.unwrap();
        if round % 3 == 1 {
            assert!(guard.release().await.unwrap());
            continue;
        }
        let fence = guard.fence().await.unwrap();
        assert!(fence > last, "{fence} after {last}");
        assert_eq!(guard.fence().await.unwrap(), fence, "kept, not recomputed");
        assert_eq!(guard.reenter().known_fence(), Some(fence));
        // The counter lives with the lease it fenced.
        let counter: u64 = raw.get("{ordered}:lk:fence").await.unwrap();
        assert_eq!(counter, fence);
        let left: i64 = redis::cmd("PTTL")
            .arg("{ordered}:lk:fence")
            .query_async(&mut raw)
            .await
            .unwrap();
        assert!(left > 0 && left <= 5_000, "counter pttl {left}");
        last = fence;
        assert!(guard.release().await.unwrap());
    }
}

#[tokio::test]
async fn a_holder_that_lost_its_lock_gets_no_token_and_is_told() {
    let (server, client) = common::start().await;
    let mut raw = common::connect(&server.url()).await;
    let mutex = common::renewed(&client, "broken", Duration::from_secs(30));
    let guard = mutex.lock().await.unwrap();
    // Broken behind its back (an operator, a failover that lost it, a clock jump).
    let _: () = raw.del("broken").await.unwrap();
    // Another process takes it (a task of this one would wait behind the guard).
    let elsewhere = latchkey::Client::open(&server.url()).await.unwrap();
    let next = elsewhere.mutex("broken").unwrap().lock().await.unwrap();
    let next_fence = next.fence().await.unwrap();

    let refused = guard.fence().await;
    assert!(
        matches!(refused, Err(Error::LeaseLost { .. })),
        "{refused:?}"
    );
    assert!(guard.is_lost(), "asking told the holder its lease is gone");
    tokio::time::timeout(Duration::from_secs(1), guard.lost())
        .await
        .expect("lost() fires");
    // The refusal handed out nothing: the next holder's token is still the last.
    let counter: u64 = raw.get("{broken}:lk:fence").await.unwrap();
    assert_eq!(counter, next_fence);
    assert!(next.release().await.unwrap());
}

#[tokio::test]
async fn a_holder_past_its_own_lease_gets_no_token_without_asking_redis() {
    let (_server, client) = common::start().await;
    let mutex = common::fixed(&client, "expired", Duration::from_millis(100));
    let stale = mutex.lock().await.unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let refused = stale.fence().await;
    assert!(
        matches!(refused, Err(Error::LeaseLost { .. })),
        "{refused:?}"
    );
    assert_eq!(stale.known_fence(), None);
}

#[tokio::test]
async fn on_grant_fencing_and_handovers_bring_the_token_with_the_lock() {
    let (server, client) = common::start().await;
    let eager = client
        .mutex("eager")
        .unwrap()
        .with_fencing(Fencing::OnGrant);
    assert_eq!(eager.fencing(), Fencing::OnGrant);
    let guard = eager.lock().await.unwrap();
    let granted = guard.known_fence().expect("computed with the grant");

    // A waiter of another process that asks on grant, woken by a handover from the
    // queue, holds a token too (one that asks on demand gets none: see
    // tests/waiting.rs, a_lock_handed_over_is_fenced_on_demand_without_a_claim).
    let other = latchkey::Client::open(&server.url()).await.unwrap();
    let waiting = other.mutex("eager").unwrap().with_fencing(Fencing::OnGrant);
    let waiter = tokio::spawn(async move { waiting.lock_timeout(Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(guard.release().await.unwrap());
    let handed = waiter.await.unwrap().unwrap();
    let fence = handed
        .known_fence()
        .expect("the release fenced its handover");
    assert!(fence > granted);
}

#[tokio::test]
async fn a_take_that_finds_its_own_token_resets_the_lease_and_fences() {
    let (server, _client) = common::start().await;
    let mut raw = common::connect(&server.url()).await;
    let store = latchkey::store::RedisStore::open(&server.url())
        .await
        .unwrap();
    let key = LockKey::new(&Prefix::default(), "again").unwrap();
    let owner = OwnerToken::generate().unwrap();
    let once = AcquireRequest::new(Ttl::new(Duration::from_millis(1_000)).unwrap());
    let first = store.try_acquire(&key, &owner, once).await.unwrap();
    assert!(matches!(first, Attempt::Acquired { fence: None, .. }));
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The same token again: an earlier try whose reply was lost had set it.
    let again = store.try_acquire(&key, &owner, once).await.unwrap();
    assert!(
        matches!(again, Attempt::Acquired { fence: Some(_), .. }),
        "{again:?}"
    );
    let left: i64 = redis::cmd("PTTL")
        .arg("again")
        .query_async(&mut raw)
        .await
        .unwrap();
    assert!(
        left > 700,
        "the lease was reset from this try: {left} ms left"
    );

    // On demand through the store: a token while ours, none once not.
    let fence = store.fence(&key, &owner).await.unwrap().unwrap();
    assert!(store.fence(&key, &owner).await.unwrap().unwrap() > fence);
    let stranger = OwnerToken::generate().unwrap();
    assert_eq!(store.fence(&key, &stranger).await.unwrap(), None);
    let busy = store.try_acquire(&key, &stranger, once).await.unwrap();
    let Attempt::Busy { pttl, holder, .. } = busy else {
        panic!("held: {busy:?}");
    };
    assert_eq!(holder.as_deref(), Some(owner.as_str()));
    assert!(
        pttl.is_some_and(|left| left > Duration::from_millis(300)),
        "{pttl:?}"
    );
}

#[tokio::test]
async fn a_key_of_another_type_is_refused_before_anything_is_written() {
    let (server, client) = common::start().await;
    let mut raw = common::connect(&server.url()).await;
    let _: () = raw.rpush("listy", "x").await.unwrap();
    let taken = client.mutex("listy").unwrap().try_lock().await;
    assert!(matches!(taken, Err(Error::WrongType { .. })), "{taken:?}");
    let len: u64 = raw.llen("listy").await.unwrap();
    assert_eq!(len, 1);
}

#[test]
fn the_blocking_guard_computes_its_token_on_demand_too() {
    let server = latchkey_testkit::RedisServer::start().unwrap();
    let client = latchkey::blocking::Client::open(&server.url()).unwrap();
    let guard = client.mutex("blocking").unwrap().lock().unwrap();
    assert_eq!(guard.known_fence(), None);
    let fence = guard.fence().unwrap();
    assert_eq!(guard.known_fence(), Some(fence));
    assert!(guard.release().unwrap());
}

#[tokio::test]
async fn permits_compute_their_tokens_on_demand_or_with_the_grant() {
    let (server, client) = common::start().await;
    let mut raw = common::connect(&server.url()).await;
    let pool = client.semaphore("pool", 3).unwrap();
    let first = pool.acquire(1).await.unwrap();
    assert_eq!(
        first.known_fence(),
        None,
        "an uncontended permit has no token yet"
    );
    let fence = first.fence().await.unwrap();
    let eager = pool.clone().with_fencing(Fencing::OnGrant);
    let second = eager.acquire(1).await.unwrap();
    let granted = second.known_fence().expect("computed with the grant");
    assert!(granted > fence);
    // A permit that is no longer live gets no token.
    let third = pool.acquire(1).await.unwrap();
    let _: () = raw.del("{pool}:lk:sem").await.unwrap();
    let refused = third.fence().await;
    assert!(
        matches!(refused, Err(Error::LeaseLost { .. })),
        "{refused:?}"
    );
    drop((first, second));
}

/// A lock passed between tasks of one process is fenced on demand too: the pass
/// reads neither the counter nor the clock (`GET`, `EXISTS` on the queue, `SET`);
/// with `Fencing::OnGrant` it comes with its token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lock_passed_between_tasks_is_fenced_on_demand_unless_asked_on_grant() {
    let (server, client) = common::start().await;
    let mut raw = common::connect(&server.url()).await;
    for fencing in [Fencing::OnDemand, Fencing::OnGrant] {
        let name = format!("passed-{fencing:?}");
        let mutex = client.mutex(&name).unwrap().with_fencing(fencing);
        let holder = mutex.lock().await.unwrap();
        let first = holder.fence().await.unwrap();
        let waiter = {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.lock().await })
        };
        // The waiter queues behind the holder in this process, not in Redis.
        tokio::time::sleep(Duration::from_millis(200)).await;
        let counter = format!("{{{name}}}:lk:fence");
        let stored: Option<String> = raw.get(&counter).await.unwrap();
        reset_stats(&mut raw).await;
        assert!(holder.release().await.unwrap());
        let passed = waiter.await.unwrap().unwrap();
        let calls = command_calls(&mut raw).await;
        // Passed in this process, in one script: no handover through Redis's queue,
        // and no release and take again (a release deletes the key).
        assert_eq!(calls.get("publish"), None, "{calls:?}");
        assert_eq!(calls.get("del"), None, "{calls:?}");
        match fencing {
            Fencing::OnDemand => {
                assert_eq!(passed.known_fence(), None, "no token until asked for");
                assert_eq!(
                    raw.get::<_, Option<String>>(&counter).await.unwrap(),
                    stored
                );
                assert_eq!(calls.get("time"), None, "{calls:?}");
                assert_eq!(calls.get("set"), Some(&1), "the lock's only: {calls:?}");
            }
            Fencing::OnGrant => {
                let granted = passed.known_fence().expect("passed with its token");
                assert!(granted > first);
            }
        }
        assert!(passed.fence().await.unwrap() > first);
        assert!(passed.release().await.unwrap());
    }
}
