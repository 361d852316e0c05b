//! Leader election against a real server: one leader at a time, terms that grow
//! (across a restart too), observers woken by every change, a paused leader that
//! learns it lost before a successor leads, and records of gone leaders ignored.

mod common;

use std::time::{Duration, Instant};

use latchkey::election::{Leader, MAX_VALUE_LEN, Observer};
use latchkey::{Client, Error, Kind, Lease};
use latchkey_testkit::FaultProxy;
use redis::Commands;

/// How long an observer may take to see a change it was told of: well under its
/// 10 s recheck, so a pass shows it was woken, not that it polled.
const TOLD_WITHIN: Duration = Duration::from_secs(3);

fn leader(value: &str, term: u64) -> Option<Leader> {
    Some(Leader {
        value: value.to_owned(),
        term,
    })
}

/// The next leader `observer` is told of, maybe after a moment without one (the
/// old one stepped down before the next proclaimed).
async fn next_leader(observer: &mut Observer) -> Option<Leader> {
    let mut seen = observer.changed().await.unwrap();
    if seen.is_none() {
        seen = tokio::time::timeout(TOLD_WITHIN, observer.changed())
            .await
            .unwrap()
            .unwrap();
    }
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_the_next_one_has_a_greater_term() {
    let (server, a) = common::start().await;
    let b = Client::open(&server.url()).await.unwrap();
    let first = a
        .election("jobs")
        .unwrap()
        .campaign("host-a")
        .await
        .unwrap();
    assert_eq!(first.value(), "host-a");
    let election = b.election("jobs").unwrap();
    assert_eq!(
        election.leader().await.unwrap(),
        leader("host-a", first.term())
    );
    // Busy as an election, not as the lock under it.
    let tries = [
        election.try_campaign("host-b").await,
        election
            .campaign_timeout("host-b", Duration::from_millis(200))
            .await,
    ];
    for tried in tries {
        let err = tried.unwrap_err();
        assert!(
            matches!(
                err,
                Error::Busy {
                    kind: Kind::Election,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().starts_with("election \"jobs\" is busy"),
            "{err}"
        );
    }

    let waiting = tokio::spawn(async move { election.campaign("host-b").await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !waiting.is_finished(),
        "a second leader while the first leads"
    );
    let first_term = first.term();
    assert!(first.resign().await.unwrap());
    let second = waiting.await.unwrap().unwrap();
    assert!(
        second.term() > first_term,
        "{} after {first_term}",
        second.term()
    );
    let seen = a.election("jobs").unwrap().leader().await.unwrap();
    assert_eq!(seen, leader("host-b", second.term()));
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_observer_is_told_of_every_change_without_polling() {
    let (_server, client) = common::start().await;
    let election = client.election("scheduler").unwrap();
    let mut observer = election.observe().unwrap();
    assert_eq!(observer.changed().await.unwrap(), None);

    let leading = election.campaign("host-a").await.unwrap();
    let seen = tokio::time::timeout(TOLD_WITHIN, observer.changed()).await;
    assert_eq!(seen.unwrap().unwrap(), leader("host-a", leading.term()));
    // Nothing changes: nothing is returned (the lease is 30 s, the recheck 10 s).
    let idle = tokio::time::timeout(Duration::from_millis(500), observer.changed()).await;
    assert!(
        idle.is_err(),
        "a change reported while nothing changed: {idle:?}"
    );

    leading.resign().await.unwrap();
    let seen = tokio::time::timeout(TOLD_WITHIN, observer.changed()).await;
    assert_eq!(seen.unwrap().unwrap(), None);
}

/// A leader dropped without resigning resigns in the background: observers hear
/// of it and the next candidate leads at once, not a lease later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_leadership_resigns() {
    let (_server, client) = common::start().await;
    let election = client.election("dropped").unwrap();
    let mut observer = election.observe().unwrap();
    let leading = election.campaign("host-a").await.unwrap();
    let term = leading.term();
    let next = election.clone();
    let waiting = tokio::spawn(async move { next.campaign("host-b").await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(observer.changed().await.unwrap(), leader("host-a", term));
    drop(leading);
    let second = tokio::time::timeout(TOLD_WITHIN, waiting)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(second.term() > term);
    assert_eq!(
        next_leader(&mut observer).await,
        leader("host-b", second.term())
    );
}

/// A leader cut off from Redis (its connection stalled: a partition, a pause)
/// learns it lost before its successor leads; the successor is elected once the
/// lease ends, and observers are told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_leader_learns_it_lost_before_a_successor_leads() {
    let (server, direct) = common::start().await;
    let proxy = FaultProxy::start(server.port()).unwrap();
    let cut_off = Client::open(&proxy.url()).await.unwrap();
    let lease = Lease::renewed(Duration::from_millis(600)).unwrap();
    let leading = cut_off
        .election("partitioned")
        .unwrap()
        .with_lease(lease)
        .campaign("host-a")
        .await
        .unwrap();
    let first_term = leading.term();
    let lost = tokio::spawn({
        let lost = leading.lost();
        async move {
            lost.await;
            Instant::now()
        }
    });
    let election = direct.election("partitioned").unwrap().with_lease(lease);
    let mut observer = election.observe().unwrap();
    assert_eq!(
        observer.changed().await.unwrap(),
        leader("host-a", first_term)
    );

    proxy.stall_all();
    let successor = election.campaign("host-b").await.unwrap();
    let led_at = Instant::now();
    let lost_at = tokio::time::timeout(Duration::from_secs(5), lost)
        .await
        .unwrap()
        .unwrap();
    assert!(
        lost_at <= led_at,
        "the old leader learned it lost {:?} after the new one led",
        lost_at - led_at
    );
    assert!(leading.is_lost());
    assert!(successor.term() > first_term);
    assert_eq!(
        next_leader(&mut observer).await,
        leader("host-b", successor.term())
    );
    proxy.resume_all();
}

/// A leader that crashed (its lease left to run out: nothing is published) is
/// seen gone by observers when its lease ends, not 10 s later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn observers_see_a_crashed_leader_gone_when_its_lease_ends() {
    let (server, client) = common::start().await;
    let election = client
        .election("crashed")
        .unwrap()
        .with_lease(Lease::fixed(Duration::from_millis(800)).unwrap());
    let leading = election.campaign("host-a").await.unwrap();
    let mut observer = election.observe().unwrap();
    assert_eq!(
        observer.changed().await.unwrap(),
        leader("host-a", leading.term())
    );
    // As a crash: the guard forgotten (no release, no record withdrawn, nothing
    // published); a fixed lease is not renewed.
    std::mem::forget(leading);
    let seen = tokio::time::timeout(TOLD_WITHIN, observer.changed()).await;
    assert_eq!(seen.unwrap().unwrap(), None);
    let mut conn = server.connection().unwrap();
    let record: Option<String> = conn.get("{crashed}:lk:elect:lk:leader").unwrap();
    assert!(
        record.is_some(),
        "the record outlives the lease, and counts for nothing"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terms_grow_across_a_restart_that_kept_nothing() {
    let (mut server, client) = common::start().await;
    let election = client.election("restarted").unwrap();
    let before = election.campaign("host-a").await.unwrap();
    let term = before.term();
    before.resign().await.unwrap();
    server.restart().unwrap();
    let after = retry_campaign(&election, "host-b").await;
    assert!(after.term() > term, "{} after {term}", after.term());
}

async fn retry_campaign(
    election: &latchkey::election::Election,
    value: &str,
) -> latchkey::election::Leadership {
    let started = Instant::now();
    loop {
        match election
            .campaign_timeout(value, Duration::from_secs(5))
            .await
        {
            Ok(leadership) => return leadership,
            Err(e) if e.is_transient() && started.elapsed() < Duration::from_secs(10) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{e}"),
        }
    }
}

/// A record counts only while the lock holds its writer's token: an operator who
/// breaks the lock leaves no leader behind. An election and a lock of one name are
/// apart; an oversized value is refused before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_lock_holder_s_record_counts() {
    let (server, client) = common::start().await;
    let election = client.election("broken").unwrap();
    let leading = election.campaign("host-a").await.unwrap();
    let lock = client.mutex("broken").unwrap().try_lock().await;
    assert!(lock.is_ok(), "a lock of the election's name is another key");
    let mut conn = server.connection().unwrap();
    let _: () = conn.del("{broken}:lk:elect").unwrap();
    assert_eq!(election.leader().await.unwrap(), None);
    assert!(!leading.resign().await.unwrap());

    let huge = "x".repeat(MAX_VALUE_LEN + 1);
    let err = election.campaign(&huge).await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert!(err.to_string().contains("limit"), "{err}");
    let err = election.campaign("").await.unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
}

/// A wait so long that the grace to proclaim past it overflows the clock is no
/// panic: the campaign then waits without a cut-off.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_campaign_with_the_longest_wait_does_not_overflow() {
    let (_server, client) = common::start().await;
    // The longest wait the clock can add to now, found by halving.
    let now = tokio::time::Instant::now();
    let (mut fits, mut overflows) = (Duration::ZERO, Duration::MAX);
    while overflows - fits > Duration::from_millis(1) {
        let mid = fits + (overflows - fits) / 2;
        match now.checked_add(mid) {
            Some(_) => fits = mid,
            None => overflows = mid,
        }
    }
    // 50 ms short of it: the deadline fits, the 100 ms grace after it does not.
    let wait = fits - Duration::from_millis(50);
    let election = client.election("longest").unwrap();
    let leading = election.campaign_timeout("me", wait).await.unwrap();
    assert!(leading.resign().await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_keep_colons_and_unicode() {
    let (_server, client) = common::start().await;
    let election = client.election("values").unwrap();
    let value = "http://10.0.0.7:8080/ – ñ";
    let leading = election.campaign(value).await.unwrap();
    assert_eq!(
        election.leader().await.unwrap(),
        leader(value, leading.term())
    );
}

/// A resignation cancelled at any point (before it ran, or a few polls in) still
/// frees the election at once, as a dropped leadership does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_resignation_still_frees_the_election() {
    let (_server, client) = common::start().await;
    let election = client.election("cancelled").unwrap();
    for polls in 0..6 {
        let leading = election.campaign("host-a").await.unwrap();
        let resigning = tokio::spawn(leading.resign());
        for _ in 0..polls {
            tokio::task::yield_now().await;
        }
        resigning.abort();
        let _ = resigning.await;
        let next = election
            .campaign_timeout("host-b", Duration::from_secs(2))
            .await;
        assert!(next.is_ok(), "after {polls} polls: {:?}", next.err());
        next.unwrap().resign().await.unwrap();
    }
}

/// The same for a leadership that came by a handover from the previous leader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_resignation_after_a_handover_still_frees_the_election() {
    let (server, client) = common::start().await;
    let other = Client::open(&server.url()).await.unwrap();
    let lease = Lease::renewed(Duration::from_millis(600)).unwrap();
    for polls in 0..12 {
        let election = client.election("handed").unwrap().with_lease(lease);
        let first = election.campaign("host-a").await.unwrap();
        let waiting = {
            let election = other.election("handed").unwrap().with_lease(lease);
            tokio::spawn(async move { election.campaign("host-b").await })
        };
        tokio::time::sleep(Duration::from_millis(50)).await;
        first.resign().await.unwrap();
        let second = waiting.await.unwrap().unwrap();
        let resigning = tokio::spawn(second.resign());
        for _ in 0..polls {
            tokio::task::yield_now().await;
        }
        resigning.abort();
        let _ = resigning.await;
        let started = Instant::now();
        let next = election
            .campaign_timeout("host-c", Duration::from_secs(2))
            .await;
        assert!(next.is_ok(), "after {polls} polls: {:?}", next.err());
        assert!(
            started.elapsed() < Duration::from_millis(300),
            "after {polls} polls: free only after {:?}",
            started.elapsed()
        );
        next.unwrap().resign().await.unwrap();
    }
}

/// A record lost while its leader keeps the lock (an operator, an eviction, a
/// restart or failover that kept the lock but not the record) is written again by
/// the leader's keeper within half a lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_record_is_proclaimed_again_while_its_leader_leads() {
    let (server, client) = common::start().await;
    let election = client
        .election("evicted")
        .unwrap()
        .with_lease(Lease::renewed(Duration::from_millis(400)).unwrap());
    let leading = election.campaign("host-a").await.unwrap();
    let mut conn = server.connection().unwrap();
    let _: () = conn.del("{evicted}:lk:elect:lk:leader").unwrap();
    assert_eq!(election.leader().await.unwrap(), None, "the record is gone");
    let started = Instant::now();
    while election.leader().await.unwrap().is_none() {
        assert!(started.elapsed() < TOLD_WITHIN, "never proclaimed again");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        election.leader().await.unwrap(),
        leader("host-a", leading.term())
    );
    assert!(!leading.is_lost());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_value_that_could_forge_a_line_is_refused() {
    let (_server, client) = common::start().await;
    let election = client.election("forged").unwrap();
    let err = election
        .campaign("host-a\nhost-b term 1")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    assert_eq!(election.leader().await.unwrap(), None);
}

/// `inspect`, `list_all` and `force_release` see an election (its leader, its term,
/// its lease) and a latch (its count), beside a lock of the same name; and an
/// operator breaking the election by kind deposes the leader.
#[tokio::test]
async fn inspect_and_list_see_elections_and_latches() {
    use latchkey::Kind;
    use latchkey::inspect::Primitive;

    let (server, client) = common::start().await;
    let leadership = client
        .election("nightly")
        .unwrap()
        .campaign("host-a")
        .await
        .unwrap();
    let term = leadership.leader().term;
    let gate = client.latch("gate", 3).unwrap();
    gate.count_down().await.unwrap();
    let _lock = client.mutex("nightly").unwrap().lock().await.unwrap();

    let found = client.inspect("nightly").await.unwrap();
    let kinds: Vec<Kind> = found.iter().map(Primitive::kind).collect();
    assert_eq!(kinds, [Kind::Lock, Kind::Election], "{found:?}");
    let Primitive::Election(election) = &found[1] else {
        unreachable!()
    };
    assert_eq!(election.leader, leader("host-a", term));
    assert!(election.held && found[1].is_held());
    assert!(
        election
            .lease_left
            .is_some_and(|left| left > Duration::ZERO)
    );
    assert_eq!(election.waiters, 0);
    // Two candidates in line (clients of their own, as two hosts would be):
    // inspect and the election's status count them.
    let mut candidates = Vec::new();
    for value in ["host-b", "host-c"] {
        let other = Client::open(&server.url()).await.unwrap();
        let election = other.election("nightly").unwrap();
        candidates.push(tokio::spawn(async move {
            election.campaign(value).await.map(drop)
        }));
    }
    let started = Instant::now();
    loop {
        let found = client.inspect("nightly").await.unwrap();
        let Some(Primitive::Election(election)) = found.get(1) else {
            panic!("{found:?}")
        };
        if election.waiters == 2 {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(5), "{found:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let status = client.election("nightly").unwrap().status().await.unwrap();
    assert_eq!(status.waiters, 2);
    for candidate in candidates {
        candidate.abort();
    }

    let found = client.inspect("gate").await.unwrap();
    let [Primitive::Latch(latch)] = found.as_slice() else {
        panic!("{found:?}")
    };
    assert_eq!((latch.left, latch.count, latch.is_open()), (2, 3, false));
    assert!(!found[0].is_held(), "a latch is a count, not a hold");

    let listed = common::listed(&client, "*").await;
    let expected = [
        ("gate", Kind::Latch),
        ("nightly", Kind::Lock),
        ("nightly", Kind::Election),
    ];
    assert_eq!(
        listed,
        expected.map(|(name, kind)| (name.to_owned(), kind)),
        "{listed:?}"
    );

    let broken = client.force_release("nightly", Kind::Election).await;
    let Ok(Some(Primitive::Election(was))) = broken else {
        panic!("{broken:?}")
    };
    assert_eq!(was.leader, leader("host-a", term));
    let election = client.election("nightly").unwrap();
    assert_eq!(election.status().await.unwrap().leader, None);
    // The lock of the same name is untouched.
    assert!(client.mutex("nightly").unwrap().is_locked().await.unwrap());
    let latch = client.force_release("gate", Kind::Latch).await;
    assert!(
        matches!(&latch, Err(Error::InvalidArgument(m)) if m.contains("cannot be broken")),
        "{latch:?}"
    );
    drop(leadership);
}

/// Keys another program wrote under an election's or a latch's names (a leader
/// record whose term is no number, a latch count past its count) hide what they
/// garble, never the rest of the list: the election is listed without its leader,
/// the latch (which latchkey never writes so) not at all, and a look at its name
/// says whose data it is.
#[tokio::test]
async fn a_garbled_election_or_latch_does_not_fail_the_list() {
    use latchkey::Kind;

    let (server, client) = common::start().await;
    let mut raw = common::connect(&server.url()).await;
    let holder = "another-library";
    let sha: String = redis::cmd("EVAL")
        .arg("return redis.sha1hex(ARGV[1])")
        .arg(0)
        .arg(holder)
        .query_async(&mut raw)
        .await
        .unwrap();
    let _: () = redis::pipe()
        .set("{odd}:lk:elect", holder)
        .set(
            "{odd}:lk:elect:lk:leader",
            format!("{sha}:99999999999999999999999:x"),
        )
        .set("{gate}:lk:latch", "5:3")
        .query_async(&mut raw)
        .await
        .unwrap();
    let listed = common::listed(&client, "*").await;
    assert_eq!(listed, [("odd".to_owned(), Kind::Election)], "{listed:?}");
    match client.inspect("gate").await {
        Err(latchkey::Error::WrongType { key }) => assert_eq!(key, "{gate}:lk:latch"),
        other => panic!("{other:?}"),
    }
    // A leader record of another type where nobody leads: named too.
    let record = "{free}:lk:elect:lk:leader";
    let _: () = redis::cmd("HSET")
        .arg(&[record, "f", "v"])
        .query_async(&mut raw)
        .await
        .unwrap();
    match client.inspect("free").await {
        Err(latchkey::Error::WrongType { key }) => assert_eq!(key, record),
        other => panic!("{other:?}"),
    }
    let found = client.inspect("odd").await.unwrap();
    let [latchkey::inspect::Primitive::Election(odd)] = found.as_slice() else {
        panic!("{found:?}")
    };
    assert!(odd.held && odd.leader.is_none(), "{odd:?}");
}
