//! Holds handed between processes: `detach` leaves the lock held and gives its
//! token; any client can then adopt, extend or release it by that token, and only
//! by it.

use std::time::Duration;

use latchkey::{Client, Error, Fencing, HoldToken, Lease};
use latchkey_testkit::RedisServer;

async fn client(server: &RedisServer) -> Client {
    Client::open(&server.url()).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_detached_hold_is_adopted_elsewhere_and_renewed_there() {
    let server = RedisServer::start().unwrap();
    let (web, worker) = (client(&server).await, client(&server).await);
    let lease = Lease::renewed(Duration::from_millis(600)).unwrap();
    let guard = web
        .mutex("report")
        .unwrap()
        .with_lease(lease)
        .lock()
        .await
        .unwrap();
    let fence = guard.fence().await.unwrap();
    let text = guard.detach().unwrap().to_string();
    // Still held after the guard is gone: nobody else gets it.
    assert!(web.mutex("report").unwrap().try_lock().await.is_err());

    let token: HoldToken = text.parse().unwrap();
    assert_eq!(token.fence(), Some(fence));
    let report = worker.mutex("report").unwrap().with_lease(lease);
    let adopted = report.adopt(&token).await.unwrap();
    assert!(
        adopted.fence().await.unwrap() > fence,
        "a fresh fence from the server"
    );
    // The token is spent: nobody else adopts, extends or releases by it.
    let again = report.adopt(&token).await.map(drop);
    assert!(matches!(again, Err(Error::LeaseLost { .. })), "{again:?}");
    assert!(!report.release_held(&token).await.unwrap());
    // The adopting side renews it past its lease.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(adopted.is_held().await.unwrap());
    assert!(!adopted.is_lost());
    assert!(adopted.release().await.unwrap());
    let next = report.try_lock().await.unwrap();
    assert!(next.fence().await.unwrap() > fence);
    // A token whose fence was forged higher gains nothing: adopt takes the
    // server's fence, and the token's owner no longer holds the lock anyway.
    let forged: HoldToken = format!("{}@{}", token.owner().as_str(), u64::MAX)
        .parse()
        .unwrap();
    assert!(report.adopt(&forged).await.is_err());
    drop(next);

    // A semaphore's permit is not a hold a token can name.
    let permit = web.semaphore("pool", 2).unwrap().acquire(1).await.unwrap();
    assert!(matches!(permit.detach(), Err(Error::InvalidArgument(_))));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn extend_and_release_by_token_work_only_while_the_token_holds_the_lock() {
    let server = RedisServer::start().unwrap();
    let (one, other) = (client(&server).await, client(&server).await);
    let short = Lease::fixed(Duration::from_millis(400)).unwrap();
    let mutex = one
        .mutex("job")
        .unwrap()
        .with_lease(short)
        .with_fencing(Fencing::OnGrant);
    let token = mutex.lock().await.unwrap().detach().unwrap();
    let granted_fence = token.fence().expect("fenced with the grant");
    let elsewhere = other.mutex("job").unwrap();
    elsewhere
        .extend_held(&token, Duration::from_secs(5))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(
        elsewhere.is_locked().await.unwrap(),
        "extended past the first lease"
    );

    // A task of the first process waits for it; a release elsewhere wakes it.
    let waiting = tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(elsewhere.release_held(&token).await.unwrap());
    let got = waiting.await.unwrap().unwrap();
    assert!(got.fence().await.unwrap() > granted_fence);

    // The token no longer holds it: nothing it does touches the new holder.
    assert!(!elsewhere.release_held(&token).await.unwrap());
    let lost = elsewhere.extend_held(&token, Duration::from_secs(5)).await;
    assert!(matches!(lost, Err(Error::LeaseLost { .. })), "{lost:?}");
    assert!(matches!(
        elsewhere.adopt(&token).await,
        Err(Error::LeaseLost { .. })
    ));
    assert!(got.is_held().await.unwrap());
}

#[tokio::test]
async fn a_shared_hold_cannot_be_detached_and_bad_tokens_are_refused() {
    let server = RedisServer::start().unwrap();
    let client = client(&server).await;
    let guard = client.mutex("shared").unwrap().lock().await.unwrap();
    let inner = guard.reenter();
    assert!(matches!(guard.detach(), Err(Error::InvalidArgument(_))));
    assert!(inner.release().await.unwrap(), "the last guard releases it");

    let secret = "0123456789abcdef0123456789abcdeX:lk@5";
    for bad in [
        "",
        "nope",
        "0123456789abcdef0123456789abcdef:lk@",
        secret,
        "0123456789abcdef0123456789abcdef:lk@x",
    ] {
        let error = bad.parse::<HoldToken>().unwrap_err();
        assert!(matches!(error, Error::InvalidArgument(_)));
        assert!(
            !error.to_string().contains("0123456789"),
            "never echoes a token: {error}"
        );
    }
    let token: HoldToken = "0123456789abcdef0123456789abcdef:lk@5".parse().unwrap();
    assert_eq!(format!("{token:?}"), "HoldToken(0123…@5)");
    // A hold that never computed a fence has a token without one.
    let unfenced = client.mutex("shared").unwrap().lock().await.unwrap();
    let text = unfenced.detach().unwrap().to_string();
    assert!(!text.contains('@'), "no fence was computed: {text}");
    let token: HoldToken = text.parse().unwrap();
    assert_eq!(token.fence(), None);
    assert_eq!(format!("{token:?}"), format!("HoldToken({}…)", &text[..4]));
    let adopted = client.mutex("shared").unwrap().adopt(&token).await.unwrap();
    assert!(
        adopted.known_fence().is_some(),
        "adopting passes with a fence"
    );
}
