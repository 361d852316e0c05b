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
    let _two = pool.acquire(2).await.unwrap();
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
}

/// Each refresh walks about `keys` keys and reads at most `reads` names; a
/// keyspace larger than that is covered over several refreshes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refresh_stays_within_its_budget_and_the_walk_covers_everything() {
    let server = RedisServer::start().unwrap();
    let client = Client::open(&server.url()).await.unwrap();
    let mut conn = server.connection().unwrap();
    // 2 000 keys of another application, 60 locks held.
    for i in 0..2_000 {
        let _: () = conn.set(format!("cache:{i}"), "x").unwrap();
    }
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
        reads: 250,
    };
    let mut survey = client.survey().with_budget(budget);
    let mut refreshes = 0;
    let mut completed = false;
    while !completed {
        let done = survey.refresh().await.unwrap();
        refreshes += 1;
        assert_eq!(done.scans, 1);
        // SCAN's COUNT is a hint: a batch may run a little over.
        assert!(done.keys_walked <= 2 * 200, "{done:?}");
        assert!(done.names_read <= 250, "{done:?}");
        completed = done.walk_completed;
        assert!(refreshes < 100, "the walk never came round");
    }
    assert!(
        refreshes >= 5,
        "2 060 keys walked in {refreshes} refreshes of 200"
    );
    // The names found late are read within the next refreshes: the other
    // application's strings once, and passed over.
    let mut last = survey.refresh().await.unwrap();
    while last.names_waiting > 0 {
        last = survey.refresh().await.unwrap();
        refreshes += 1;
        assert!(refreshes < 200, "names never read: {last:?}");
    }
    let seen: Vec<Sighting> = survey.sightings().collect();
    assert_eq!(seen.len(), 60, "{:?}", kinds(&seen));
    assert!(
        seen.iter()
            .all(|s| s.name.starts_with("lock:") && s.primitive.is_held())
    );
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
