//! Every bad input and every broken server gives its own typed error, never a panic.

mod common;

use std::time::Duration;

use latchkey::store::LockStore;
use latchkey::{Client, Error, Lease, OwnerToken};
use latchkey_testkit::RedisServer;
use redis::Commands;

#[tokio::test]
async fn bad_arguments_are_refused_before_anything_is_sent() {
    let (_server, client) = common::start().await;
    let too_long = "x".repeat(2000);
    for name in ["", "bad\nname", too_long.as_str(), "a}b"] {
        assert!(
            matches!(client.mutex(name), Err(Error::InvalidArgument(_))),
            "{name:?}"
        );
    }
    let mutex = client.mutex("ok").unwrap();
    for ttl in [
        Duration::ZERO,
        Duration::from_micros(999),
        Duration::from_millis(9),
        Duration::from_secs(u64::MAX),
    ] {
        assert!(
            matches!(Lease::fixed(ttl), Err(Error::InvalidArgument(_))),
            "{ttl:?}"
        );
    }
    // A refused duration is named as given: zero as "0s", a fraction in its unit.
    let named = [
        (Lease::fixed(Duration::ZERO), "lease of 0s is too short"),
        (
            Lease::fixed(Duration::from_micros(999)),
            "lease of 999µs is too short",
        ),
        (Lease::renewed(Duration::ZERO), "lease of 0s is too short"),
        (
            Lease::fixed(Duration::from_secs(1))
                .and_then(|lease| lease.with_max_hold(Duration::ZERO)),
            "hold limit of 0s is too short",
        ),
    ];
    for (refused, words) in named {
        match refused {
            Err(Error::InvalidArgument(message)) => assert!(message.contains(words), "{message}"),
            other => panic!("{other:?}"),
        }
    }
    // A renewed lease too short to renew (every third of it) is refused.
    for ttl in [Duration::from_millis(1), Duration::from_millis(99)] {
        assert!(
            matches!(Lease::renewed(ttl), Err(Error::InvalidArgument(_))),
            "{ttl:?}"
        );
    }
    for prefix in ["with space", "{tag}", "tab\t"] {
        assert!(matches!(
            client.clone().with_prefix(prefix),
            Err(Error::InvalidArgument(_))
        ));
    }
    let waited_forever = mutex.lock_timeout(Duration::MAX).await.unwrap();
    waited_forever.release().await.unwrap();
}

#[tokio::test]
async fn a_bad_url_is_an_invalid_argument_that_does_not_echo_the_password() {
    for url in [
        "not a url",
        "http://user:hunter2@localhost",
        "redis://:hunter2@[::1",
    ] {
        match Client::open(url).await {
            Err(Error::InvalidArgument(message)) => {
                assert!(!message.contains("hunter2"), "{message}")
            }
            other => panic!("{url}: expected InvalidArgument, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_server_that_is_down_is_unreachable() {
    let mut server = RedisServer::start().unwrap();
    let url = server.url();
    let client = Client::open(&url).await.unwrap();
    server.kill().unwrap();

    match Client::open(&url).await {
        Err(Error::Unreachable { node, .. }) => {
            assert_eq!(node, format!("127.0.0.1:{}", server.port()))
        }
        other => panic!("expected Unreachable, got {other:?}"),
    }
    let result = client.mutex("down").unwrap().try_lock().await;
    assert!(
        matches!(result, Err(Error::Unreachable { .. })),
        "{result:?}"
    );
}

/// A server without cluster support, opened as a cluster, is a misconfiguration the
/// error names (it used to be a bare server error, exit 70 in the CLI).
#[tokio::test]
async fn a_plain_server_opened_as_a_cluster_says_so() {
    let server = RedisServer::start().unwrap();
    let result = match Client::open_cluster(&[server.url()]).await {
        Ok(client) => client.mutex("plain").unwrap().try_lock().await.map(drop),
        Err(error) => Err(error),
    };
    match result {
        Err(Error::InvalidArgument(message)) => {
            assert!(message.contains("is not a Redis Cluster node"), "{message}");
            assert!(
                message.contains(&format!("127.0.0.1:{}", server.port())),
                "{message}"
            );
        }
        other => panic!("expected InvalidArgument, got {other:?}"),
    }
}

#[tokio::test]
async fn a_paused_server_is_unreachable_after_the_response_timeout() {
    let (server, client) = common::start().await;
    let mutex = client.mutex("paused").unwrap();
    server.pause().unwrap();
    let result = mutex.try_lock().await;
    server.resume().unwrap();
    assert!(
        matches!(result, Err(Error::Unreachable { .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn a_wrong_password_is_refused_authentication() {
    let server = RedisServer::builder()
        .password("right-horse")
        .start()
        .unwrap();
    let wrong = format!("redis://:wrong-battery@127.0.0.1:{}", server.port());
    let none = format!("redis://127.0.0.1:{}", server.port());
    for url in [wrong, none] {
        match Client::open(&url).await {
            Err(error @ Error::AuthFailed { .. }) => {
                assert!(!error.to_string().contains("wrong-battery"));
            }
            other => panic!("expected AuthFailed, got {other:?}"),
        }
    }
    let client = Client::open(&server.url()).await.unwrap();
    let guard = client.mutex("authed").unwrap().try_lock().await.unwrap();
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn acl_users_work_within_their_keys_and_are_denied_outside() {
    let server = RedisServer::builder()
        // The lock keys start with the prefix; the companion keys with `{` + prefix.
        .user("app", "app-pw", "~app:* ~{app:* +@all")
        .start()
        .unwrap();
    let url = server.url_as("app", "app-pw");
    let client = Client::open(&url)
        .await
        .unwrap()
        .with_prefix("app:")
        .unwrap();
    let guard = client.mutex("job").unwrap().try_lock().await.unwrap();
    assert!(guard.release().await.unwrap());

    let outside = Client::open(&url)
        .await
        .unwrap()
        .with_prefix("other:")
        .unwrap();
    match outside.mutex("job").unwrap().try_lock().await {
        Err(Error::AclDenied { detail, .. }) => assert!(!detail.is_empty()),
        other => panic!("expected AclDenied, got {other:?}"),
    }
    match Client::open(&server.url_as("app", "nope")).await {
        Err(Error::AuthFailed { .. }) => {}
        other => panic!("expected AuthFailed, got {other:?}"),
    }
}

#[tokio::test]
async fn a_key_of_another_type_is_wrongtype_not_busy() {
    let server = RedisServer::start().unwrap();
    let mut admin = server.connection().unwrap();
    let _: () = admin.hset("cart", "item", 1).unwrap();
    let client = Client::open(&server.url()).await.unwrap();
    let mutex = client.mutex("cart").unwrap();
    for result in [
        mutex.try_lock().await,
        mutex.lock_timeout(Duration::from_secs(5)).await,
    ] {
        match result {
            Err(Error::WrongType { key }) => assert_eq!(key, "cart"),
            other => panic!("expected WrongType, got {other:?}"),
        }
    }
    let owner = OwnerToken::generate().unwrap();
    let released = client.store().release(mutex.key(), &owner, None).await;
    assert!(
        matches!(released, Err(Error::WrongType { .. })),
        "{released:?}"
    );
    // The hash is untouched.
    let item: i64 = admin.hget("cart", "item").unwrap();
    assert_eq!(item, 1);
}

/// A companion key of another type is the key the error names, not the
/// primitive's name (which may be a sound key, or another application's).
#[tokio::test]
async fn a_companion_key_of_another_type_is_the_key_named() {
    let server = RedisServer::start().unwrap();
    let mut admin = server.connection().unwrap();
    let client = Client::open(&server.url()).await.unwrap();
    let foreign = [
        "{pool}:lk:sem:lk:permits",
        "{sms}:lk:rate",
        "{jobs}:lk:elect:lk:leader",
    ];
    for key in foreign {
        let _: () = admin.rpush(key, "not latchkey's").unwrap();
    }
    let semaphore = client.semaphore("pool", 2).unwrap();
    let limiter = client
        .rate_limiter(
            "sms",
            latchkey::ratelimit::Policy::fixed_window(5, Duration::from_secs(60)).unwrap(),
        )
        .unwrap();
    let election = client.election("jobs").unwrap();
    let errors = [
        semaphore.try_acquire(1).await.map(drop),
        limiter.check(1).await.map(drop),
        election.try_campaign("me").await.map(drop),
    ];
    for (key, error) in foreign.iter().zip(errors) {
        match error {
            Err(Error::WrongType { key: named }) => assert_eq!(&named, key),
            other => panic!("{key}: expected WrongType, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_read_only_replica_says_so() {
    let primary = RedisServer::start().unwrap();
    let replica = RedisServer::start().unwrap();
    let mut admin = replica.connection().unwrap();
    let _: () = redis::cmd("REPLICAOF")
        .arg("127.0.0.1")
        .arg(primary.port())
        .query(&mut admin)
        .unwrap();
    let client = Client::open(&replica.url()).await.unwrap();
    match client.mutex("replicated").unwrap().try_lock().await {
        Err(Error::ReadOnly { node }) => assert_eq!(node, format!("127.0.0.1:{}", replica.port())),
        other => panic!("expected ReadOnly, got {other:?}"),
    }
}

#[tokio::test]
async fn a_corrupted_fencing_counter_fails_the_acquire_and_leaves_the_lock_free() {
    let server = RedisServer::start().unwrap();
    let mut admin = server.connection().unwrap();
    let _: () = admin.set("{broken}:lk:fence", "not a number").unwrap();
    let client = Client::open(&server.url()).await.unwrap();
    let mutex = client.mutex("broken").unwrap();
    let eager = mutex.clone().with_fencing(latchkey::Fencing::OnGrant);
    let result = eager.try_lock().await;
    assert!(matches!(result, Err(Error::Redis { .. })), "{result:?}");
    let exists: bool = admin.exists("broken").unwrap();
    assert!(!exists, "a failed acquire left the lock key set");
    // On demand, the lock is taken without the counter; asking for the token fails
    // with the same error, and the lock stays ours to release.
    let guard = mutex.try_lock().await.unwrap();
    let fence = guard.fence().await;
    assert!(
        matches!(&fence, Err(e @ Error::Redis { .. }) if e.to_string().contains("delete it")),
        "{fence:?}"
    );
    assert!(guard.release().await.unwrap());
    // Numbers that are no count latchkey wrote: above 2^53 (every grant would get
    // the same token), negative, not a number, or too large for Lua to count on.
    for stored in ["9007199254740993", "-5", "nan", "1e300"] {
        let _: () = admin.set("{broken}:lk:fence", stored).unwrap();
        let result = eager.try_lock().await;
        assert!(
            matches!(&result, Err(e @ Error::Redis { .. }) if e.to_string().contains("delete it")),
            "{stored}: {result:?}"
        );
    }
}

#[tokio::test]
async fn tls_connections_verify_the_server_and_work() {
    let server = RedisServer::builder()
        .tls()
        .password("tls-pw")
        .start()
        .unwrap();
    assert!(server.url().starts_with("rediss://"));
    let client = Client::from_redis_client(server.client().unwrap())
        .await
        .unwrap();
    let guard = client.mutex("over-tls").unwrap().try_lock().await.unwrap();
    assert!(guard.is_held().await.unwrap());
    assert!(guard.release().await.unwrap());

    // Without our CA in the trust store, the server's certificate is refused.
    match Client::open(&server.url()).await {
        Err(error @ Error::Tls { .. }) => {
            assert!(error.to_string().contains("certificate"), "{error}");
        }
        other => panic!("expected the unknown CA to be refused, got {other:?}"),
    }
}

#[tokio::test]
async fn tls_to_a_plain_server_says_the_handshake_failed() {
    let server = RedisServer::start().unwrap();
    let url = server.url().replace("redis://", "rediss://");
    match Client::open(&url).await {
        Err(error @ Error::Tls { .. }) => {
            assert!(error.to_string().contains("handshake"), "{error}");
        }
        other => panic!("expected a TLS error, got {other:?}"),
    }
}

#[tokio::test]
async fn a_server_that_is_not_redis_is_named_as_such() {
    // Something that answers like an HTTP server, whatever it is sent.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        while let Ok((mut socket, _)) = listener.accept().await {
            let reply = b"HTTP/1.0 400 Bad Request\r\nContent-Length: 0\r\n\r\n";
            let _ = socket.write_all(reply).await;
        }
    });
    match Client::open(&format!("redis://127.0.0.1:{port}")).await {
        Err(error @ Error::NotRedis { .. }) => {
            assert!(error.to_string().contains("not a Redis server"), "{error}");
        }
        other => panic!("expected NotRedis, got {other:?}"),
    }
}

#[tokio::test]
async fn a_user_who_may_not_run_time_gets_acl_denied_and_no_lock_is_left() {
    let server = RedisServer::builder()
        .user("notime", "pw", "~* &* +@all -time")
        .start()
        .unwrap();
    let client = Client::open(&server.url_as("notime", "pw")).await.unwrap();
    let mutex = client.mutex("job").unwrap();
    let eager = mutex.clone().with_fencing(latchkey::Fencing::OnGrant);
    let result = eager.try_lock().await;
    assert!(matches!(result, Err(Error::AclDenied { .. })), "{result:?}");
    // The script failed before its first write: nobody holds the lock.
    let mut admin = server.connection().unwrap();
    let held: bool = admin.exists("job").unwrap();
    assert!(!held, "a failed acquire left the lock set for nobody");
    // An uncontended take needs no clock; the token does, and says so.
    let guard = mutex.try_lock().await.unwrap();
    let fence = guard.fence().await;
    assert!(matches!(fence, Err(Error::AclDenied { .. })), "{fence:?}");
    assert!(guard.release().await.unwrap());
}

#[tokio::test]
async fn a_database_that_does_not_exist_is_a_bad_argument() {
    let server = RedisServer::start().unwrap();
    for db in ["99", "-1"] {
        let url = format!("{}/{db}", server.url());
        let result = Client::open(&url).await;
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{db}: {result:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_works_for_acl_users_with_and_without_channel_rights() {
    let server = RedisServer::builder()
        .user("full", "pw", "~app:* ~{app:* &{app:* +@all")
        .user("nochannels", "pw", "~app:* ~{app:* resetchannels +@all")
        .start()
        .unwrap();
    for user in ["full", "nochannels"] {
        let url = server.url_as(user, "pw");
        let client = Client::open(&url)
            .await
            .unwrap()
            .with_prefix("app:")
            .unwrap();
        let mutex = client
            .mutex(user)
            .unwrap()
            .with_waiter_lease(latchkey::Ttl::new(Duration::from_millis(300)).unwrap());
        let holder = mutex.try_lock().await.unwrap();
        let waiter = {
            let mutex = mutex.clone();
            tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(10)).await })
        };
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(holder.release().await.unwrap());
        // Without channel rights the waiter cannot be woken, but its timer still finds the lock free.
        let guard = waiter
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("{user}: {e}"));
        assert!(guard.release().await.unwrap());
    }
}
