//! `Client::survey`: a deployment's state refreshed in bounded steps, on real
//! servers (one server, a quorum).

use std::time::Duration;

use latchkey::inspect::{Budget, Primitive, Sighting};
use latchkey::ratelimit::Policy;
use latchkey::{Client, Kind};
use latchkey_testkit::RedisServer;
use redis::Commands;

fn kinds(seen: &[Sighting]) -> Vec<(String, Kind)> {
    seen.iter()
        .map(|s| (s.name.clone(), s.primitive.kind()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_survey_sees_every_primitive_in_use_and_forgets_what_is_released() {
    let server = RedisServer::start().unwrap();
    let client = Client::open(&server.url())
        .await
        .unwrap()
        .with_prefix("app:")
        .unwrap();
    let job = client.mutex("job").unwrap().lock().await.unwrap();
    let pool = client.semaphore("pool", 3).unwrap();
    let two = pool.acquire(2).await.unwrap();
    let config = client.rw_lock("config").unwrap();
    let _reader = config.read().await.unwrap();
    let sms = client
        .rate_limiter("sms", Policy::cooldown(Duration::from_secs(30)).unwrap())
        .unwrap();
    assert!(sms.check(1).await.unwrap().allowed);
    // Outside the prefix, and another application's hash: not in the survey.
    let other = Client::open(&server.url()).await.unwrap();
    let _elsewhere = other.mutex("elsewhere").unwrap().lock().await.unwrap();
    let mut conn = server.connection().unwrap();
    let _: () = conn.hset("app:user:1", "name", "ada").unwrap();

    let mut survey = client.survey();
    let done = survey.refresh().await.unwrap();
    assert!(done.walk_completed, "{done:?}");
    assert_eq!(done.scans, 1);
    let seen: Vec<Sighting> = survey.sightings().collect();
    assert_eq!(
        kinds(&seen),
        vec![
            ("config".to_owned(), Kind::RwLock),
            ("job".to_owned(), Kind::Lock),
            ("pool".to_owned(), Kind::Semaphore),
            ("sms".to_owned(), Kind::RateLimit),
        ]
    );
    let Primitive::Semaphore(permits) = &seen[2].primitive else {
        panic!("{seen:?}")
    };
    assert_eq!((permits.used, permits.permits), (2, Some(3)));
    let job_since = seen[1].held_since.expect("the lock is held");

    // The same holder keeps its first sighting; a released lock is forgotten.
    tokio::time::sleep(Duration::from_millis(50)).await;
    survey.refresh().await.unwrap();
    let again: Vec<Sighting> = survey.sightings().collect();
    assert_eq!(again[1].held_since, Some(job_since));
    assert!(again[1].held_for() >= Duration::from_millis(50));
    assert!(job.release().await.unwrap());
    survey.refresh().await.unwrap();
    let names: Vec<String> = survey.sightings().map(|s| s.name).collect();
    assert_eq!(names, ["config", "pool", "sms"]);

    // Taken again by someone else: a new hold, seen from now on.
    let _next = client.mutex("job").unwrap().lock().await.unwrap();
    survey.refresh().await.unwrap();
    let job = survey.sightings().find(|s| s.name == "job").unwrap();
    assert!(job.held_since.unwrap() > job_since);

    // A semaphore's age is its oldest holder's: holders that take turns start
    // it again, one that stays keeps it.
    let pool_since = |survey: &latchkey::inspect::Survey| {
        let pool = survey.sightings().find(|s| s.name == "pool").unwrap();
        pool.held_since.unwrap()
    };
    let first = pool_since(&survey);
    let one = pool.acquire(1).await.unwrap();
    survey.refresh().await.unwrap();
    assert_eq!(
        pool_since(&survey),
        first,
        "the first holder is still there"
    );
    two.release().await.unwrap();
    survey.refresh().await.unwrap();
    assert!(pool_since(&survey) > first, "the oldest holder left");
    drop(one);
}

/// Each refresh walks about `keys` keys and reads at most `reads` names; a
/// keyspace larger than that is covered over several refreshes, and the names in
/// use are read again all the while, so a release shows within a few refreshes
/// however many other keys the walk keeps finding. A key that is not UTF-8 stops
/// nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_stays_within_its_budget_and_the_walk_covers_everything() {
    let server = RedisServer::start().unwrap();
    let client = Client::open(&server.url()).await.unwrap();
    let mut conn = server.connection().unwrap();
    // 2 000 strings of another application, one key that is no UTF-8, 60 locks.
    for i in 0..2_000 {
        let _: () = conn.set(format!("cache:{i}"), "x").unwrap();
    }
    let _: () = conn.set(b"bin:\xff\xfe".to_vec(), "x").unwrap();
    let mut guards = Vec::new();
    for i in 0..60 {
        guards.push(
            client
                .mutex(&format!("lock:{i}"))
                .unwrap()
                .lock()
                .await
                .unwrap(),
        );
    }
    let budget = Budget {
        keys: 200,
        reads: 50,
        ..Budget::default()
    };
    let mut survey = client.survey().with_budget(budget);
    let held = |survey: &latchkey::inspect::Survey| {
        survey.sightings().filter(|s| s.primitive.is_held()).count()
    };
    let mut refreshes = 0;
    let mut walks = 0;
    while held(&survey) < 60 || walks == 0 {
        let done = survey.refresh().await.unwrap();
        refreshes += 1;
        walks += usize::from(done.walk_completed);
        assert!(done.scans <= 1, "{done:?}");
        // SCAN's COUNT is a hint: a batch may run a little over.
        assert!(done.keys_walked <= 2 * 200, "{done:?}");
        assert!(done.names_read <= 50, "{done:?}");
        // The walk waits for the reads: what waits stays bounded.
        assert!(done.names_waiting <= 50 + 2 * 200, "{done:?}");
        assert!(
            refreshes < 300,
            "60 locks never all seen ({} seen): {done:?}",
            held(&survey)
        );
    }
    // The other application's strings are passed over: only the locks are kept.
    assert_eq!(survey.sightings().count(), 60);
    assert!(survey.sightings().all(|s| s.name.starts_with("lock:")));
    // A release shows within a few refreshes, the walk going on meanwhile.
    let released = guards.remove(0);
    assert!(released.release().await.unwrap());
    let mut after = 0;
    while survey.sightings().any(|s| s.name == "lock:0") {
        survey.refresh().await.unwrap();
        after += 1;
        assert!(
            after <= 5,
            "a released lock still shown after {after} refreshes"
        );
    }
    // Kept when asked for: strings look like locks someone else holds.
    let mut all = client.survey().with_foreign(true);
    for _ in 0..30 {
        all.refresh().await.unwrap();
    }
    let foreign = all
        .sightings()
        .filter(|s| s.name.starts_with("cache:"))
        .count();
    assert_eq!(foreign, 2_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_survey_sees_locks_while_a_master_is_down() {
    let mut servers: Vec<RedisServer> = (0..3).map(|_| RedisServer::start().unwrap()).collect();
    let urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    let client = Client::open_quorum(&urls).await.unwrap();
    let _deploy = client.mutex("deploy").unwrap().lock().await.unwrap();
    servers[0].kill().unwrap();
    let mut survey = client.survey();
    survey.refresh().await.unwrap();
    let seen: Vec<Sighting> = survey.sightings().collect();
    assert_eq!(kinds(&seen), vec![("deploy".to_owned(), Kind::Lock)]);
    assert!(seen[0].primitive.is_held());
}
