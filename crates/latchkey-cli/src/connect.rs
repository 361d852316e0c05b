//! The client every command talks through, built from the global options.
//!
//! Everything that can be checked without Redis (the URL, the TLS files, the prefix
//! and lock names) is checked before connecting, so a typo is a usage error (64)
//! even when no server is up.

use latchkey::quorum::QuorumStore;
use latchkey::{Client, LockKey, Prefix};

use crate::cli::Global;
use crate::exit::{self, Failure};

/// What starts every certificate in a PEM file.
const CERTIFICATE_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----";

/// The server used when no `--redis` is given.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// The single Redis server the options name (not a cluster, not Sentinel).
#[cfg(feature = "demo")]
pub fn single_url(global: &Global) -> Result<&str, Failure> {
    match deployment(global)? {
        Deployment::Single(url) => Ok(url),
        Deployment::Cluster(_) | Deployment::Sentinel(..) | Deployment::Quorum(_) => {
            Err(Failure::usage(
                "this command runs against one Redis server: give one --redis, without --cluster or --sentinel"
                    .to_owned(),
            ))
        }
    }
}

/// Which kind of Redis the options point at.
pub enum Deployment<'a> {
    Single(&'a str),
    Cluster(&'a [String]),
    Sentinel(&'a str, &'a [String]),
    /// Independent masters: a lock is held on a majority of them (Redlock).
    Quorum(&'a [String]),
}

impl Deployment<'_> {
    /// Its kind as the library's metrics and the exporter's `deployment` label
    /// name it (a single URL that turns out to be a cluster node says `single`
    /// until connected).
    #[cfg_attr(not(feature = "exporter"), allow(dead_code))]
    pub fn label(&self) -> &'static str {
        match self {
            Deployment::Single(_) => "single",
            Deployment::Cluster(_) => "cluster",
            Deployment::Sentinel(..) => "sentinel",
            Deployment::Quorum(_) => "quorum",
        }
    }
}

/// A client of whichever deployment the options name.
pub enum Connected {
    /// One server, a cluster or Sentinel.
    Redis(Client),
    /// A quorum of independent masters.
    Quorum(Client<QuorumStore>),
}

/// Runs `$body` with `$client` bound to the client of the deployment the options
/// name, whichever store it has (the body is compiled once per store).
macro_rules! with_client {
    ($global:expr, $client:ident => $body:expr) => {
        $crate::connect::with_client!($global, until None, $client => $body)
    };
    ($global:expr, until $deadline:expr, $client:ident => $body:expr) => {
        match $crate::connect::retrying($deadline, || $crate::connect::connect($global)).await? {
            $crate::connect::Connected::Redis($client) => $body,
            $crate::connect::Connected::Quorum($client) => $body,
        }
    };
}
pub(crate) use with_client;

/// The deployment the options describe; several URLs without --cluster or
/// --sentinel are a quorum of independent masters.
pub fn deployment(global: &Global) -> Result<Deployment<'_>, Failure> {
    let urls = global.redis.as_slice();
    if let Some(master) = &global.sentinel {
        return match urls {
            [] => Err(Failure::usage(
                "--sentinel needs the Sentinels' URLs in --redis".to_owned(),
            )),
            _ => Ok(Deployment::Sentinel(master, urls)),
        };
    }
    if global.cluster {
        return match urls {
            [] => Err(Failure::usage(
                "--cluster needs seed node URLs in --redis".to_owned(),
            )),
            _ => Ok(Deployment::Cluster(urls)),
        };
    }
    match urls {
        [url] => Ok(Deployment::Single(url)),
        [] => Ok(Deployment::Single(DEFAULT_URL)),
        several => Ok(Deployment::Quorum(several)),
    }
}

/// Checks a lock name (and the prefix) without connecting.
/// Checks everything about `global` and the name `name` that needs no server, so
/// a mistake is a usage error (64) before anything is sent.
pub fn check_name(global: &Global, name: &str) -> Result<(), Failure> {
    LockKey::new(&Prefix::new(&global.prefix)?, name)?;
    deployment(global)?;
    if global.wait_replicas.is_some() {
        latchkey::store::RedisStore::check_replica_wait(global.wait_timeout)?;
    }
    Ok(())
}

/// Runs `attempt` (connecting) until it succeeds, fails for good, or `deadline`
/// passes: a run started during a failover or a restart waits for Redis within its
/// `--wait`, as it would wait for the lock. Without a deadline, one attempt.
pub async fn retrying<T, Fut>(
    deadline: Option<std::time::Instant>,
    mut attempt: impl FnMut() -> Fut,
) -> Result<T, Failure>
where
    Fut: Future<Output = Result<T, Failure>>,
{
    let mut pause = std::time::Duration::from_millis(50);
    let mut told = false;
    loop {
        let failure = match attempt().await {
            Ok(connected) => return Ok(connected),
            Err(failure) => failure,
        };
        // The last attempt comes as the wait ends, not one pause before it.
        let left = deadline.map_or(std::time::Duration::ZERO, |deadline| {
            deadline.saturating_duration_since(std::time::Instant::now())
        });
        if !failure.is_transient() || left.is_zero() {
            return Err(failure);
        }
        if !std::mem::replace(&mut told, true) {
            crate::output::errln!(
                "latchkey: {}; trying again until --wait runs out",
                failure.message()
            );
        }
        tokio::time::sleep(pause.min(left)).await;
        pause = (pause * 2).min(std::time::Duration::from_secs(1));
    }
}

/// Connects to the deployment the options name, a quorum included.
pub async fn connect(global: &Global) -> Result<Connected, Failure> {
    let Deployment::Quorum(urls) = deployment(global)? else {
        return Ok(Connected::Redis(client(global).await?));
    };
    no_tls_files(global, "several --redis (a quorum)")?;
    if global.wait_replicas.is_some() {
        return Err(Failure::usage(
            "--wait-replicas is for one primary with replicas; a quorum's masters are independent"
                .to_owned(),
        ));
    }
    let client = Client::open_quorum(&tls_urls(global, urls)?)
        .await
        .map_err(|error| with_tls_advice(error, global))?;
    Ok(Connected::Quorum(client.with_prefix(&global.prefix)?))
}

/// Connects to the one Redis deployment the options name (not a quorum), with the
/// replica wait and prefix.
pub async fn client(global: &Global) -> Result<Client, Failure> {
    Prefix::new(&global.prefix)?;
    let deployment = deployment(global)?;
    let connected = match deployment {
        Deployment::Single(url) => {
            match Client::from_redis_client(redis_client(global, url)?).await {
                // One node of a cluster: lock on the cluster, as `redis-cli -c` would.
                Err(latchkey::Error::ClusterNode { .. }) => {
                    no_tls_files(global, "a Redis Cluster")?;
                    tracing::debug!(%url, "a Redis Cluster node: locking on its cluster");
                    Client::open_cluster(&tls_urls(global, &[url.to_owned()])?).await
                }
                other => other,
            }
        }
        Deployment::Cluster(seeds) => {
            no_tls_files(global, "--cluster")?;
            Client::open_cluster(&tls_urls(global, seeds)?).await
        }
        Deployment::Sentinel(master, sentinels) => {
            no_tls_files(global, "--sentinel")?;
            Client::open_sentinel(master, &tls_urls(global, sentinels)?).await
        }
        Deployment::Quorum(urls) => {
            return Err(Failure::usage(format!(
                "{} Redis URLs given: this command needs one Redis deployment (add --cluster or \
                 --sentinel MASTER if the URLs are a cluster's seeds or Sentinels)",
                urls.len()
            )));
        }
    };
    let client = connected.map_err(|error| with_tls_advice(error, global))?;
    let client = match global.wait_replicas {
        Some(replicas) => client.with_wait_replicas(replicas, global.wait_timeout)?,
        None => client,
    };
    let single = client.store().deployment() == "single";
    if let (Some(replicas), Deployment::Single(url), true) =
        (global.wait_replicas, deployment, single)
    {
        warn_if_too_few_replicas(global, url, replicas).await;
    }
    Ok(client.with_prefix(&global.prefix)?)
}

/// Says so when the server has fewer replicas connected than `--wait-replicas` asks
/// to confirm: every grant then fails, and a command without `--wait` retries in
/// silence until enough connect. (A primary alone: behind Sentinel the primary is
/// the library's to find, and a cluster's nodes are many.) A check that cannot be
/// made at once says nothing.
async fn warn_if_too_few_replicas(global: &Global, url: &str, replicas: u32) {
    let Ok(client) = redis_client(global, url) else {
        return;
    };
    let info = async {
        let mut conn = client.get_multiplexed_async_connection().await?;
        redis::cmd("INFO")
            .arg("replication")
            .query_async::<String>(&mut conn)
            .await
    };
    let Ok(Ok(info)) = tokio::time::timeout(std::time::Duration::from_millis(250), info).await
    else {
        return;
    };
    if !info.lines().any(|line| line.trim() == "role:master") {
        return;
    }
    let connected = info
        .lines()
        .find_map(|line| line.strip_prefix("connected_slaves:"))
        .and_then(|count| count.trim().parse::<u32>().ok());
    if let Some(connected) = connected.filter(|&connected| connected < replicas) {
        crate::output::errln!(
            "latchkey: --wait-replicas {replicas}, but the server has {connected} replica(s) connected: every grant fails until enough connect (without --wait, latchkey keeps trying)"
        );
    }
}

/// --tls-ca works with one server only so far: say so rather than ignore it.
fn no_tls_files(global: &Global, mode: &str) -> Result<(), Failure> {
    match &global.tls_ca {
        Some(_) => Err(Failure::usage(format!(
            "--tls-ca is not supported with {mode} yet: use a CA in the system's trust store"
        ))),
        None => Ok(()),
    }
}

/// Each URL as redis-rs should read it (see [`with_tls_mode`]).
fn tls_urls(global: &Global, urls: &[String]) -> Result<Vec<String>, Failure> {
    urls.iter().map(|url| with_tls_mode(global, url)).collect()
}

/// The URL as redis-rs should read it: `#insecure` appended for --tls-insecure.
/// The TLS options need a rediss:// URL.
fn with_tls_mode(global: &Global, url: &str) -> Result<String, Failure> {
    let tls_options = global.tls_ca.is_some() || global.tls_insecure;
    if tls_options && !url.starts_with("rediss://") {
        return Err(Failure::usage(
            "--tls-ca and --tls-insecure need a rediss:// URL".to_owned(),
        ));
    }
    Ok(match global.tls_insecure {
        true => format!("{url}#insecure"),
        false => url.to_owned(),
    })
}

/// An untrusted certificate, when no CA was given: say how to give one.
fn with_tls_advice(error: latchkey::Error, global: &Global) -> Failure {
    let untrusted =
        matches!(&error, latchkey::Error::Tls { detail, .. } if detail.contains("certificate"));
    let failure = Failure::from(error);
    match untrusted && global.tls_ca.is_none() && !global.tls_insecure {
        true => failure.and("give the CA's certificate with --tls-ca FILE"),
        false => failure,
    }
}

/// The redis-rs client for one server's URL and the TLS options; nothing is sent yet.
fn redis_client(global: &Global, url: &str) -> Result<redis::Client, Failure> {
    let url = with_tls_mode(global, url)?;
    let Some(ca) = &global.tls_ca else {
        return redis::Client::open(url.as_str()).map_err(|_| invalid_url());
    };
    let pem = std::fs::read(ca).map_err(|e| {
        Failure::with_status(
            exit::NO_INPUT,
            format!("cannot read the CA certificate {}: {e}", ca.display()),
        )
    })?;
    if !pem
        .windows(CERTIFICATE_PEM.len())
        .any(|w| w == CERTIFICATE_PEM)
    {
        return Err(Failure::with_status(
            exit::NO_INPUT,
            format!("{} holds no PEM certificate", ca.display()),
        ));
    }
    let certs = redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(pem),
    };
    redis::Client::build_with_tls(url.as_str(), certs).map_err(|e| {
        Failure::usage(format!(
            "cannot use {} as a CA certificate with this URL: {e}",
            ca.display()
        ))
    })
}

/// redis-rs's message may quote the URL, password included: say what is expected.
fn invalid_url() -> Failure {
    Failure::usage(
        "the Redis URL is not valid: expected redis://[user:password@]host[:port][/db], \
         rediss://… for TLS or redis+unix:///path"
            .to_owned(),
    )
}
