//! The client every command talks through, built from the global options.
//!
//! Everything that can be checked without Redis (the URL, the TLS files, the prefix
//! and lock names) is checked before connecting, so a typo is a usage error (64)
//! even when no server is up.

use latchkey::{Client, LockKey, Prefix};

use crate::cli::Global;
use crate::exit::{self, Failure};

/// What starts every certificate in a PEM file.
const CERTIFICATE_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----";

/// The server used when no `--redis` is given.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

/// The single Redis URL the options name.
pub fn single_url(global: &Global) -> Result<&str, Failure> {
    match global.redis.as_slice() {
        [url] => Ok(url),
        [] => Ok(DEFAULT_URL),
        several => Err(Failure::usage(format!(
            "{} Redis URLs given; quorum mode over several servers is not supported yet",
            several.len()
        ))),
    }
}

/// Checks a lock name (and the prefix) without connecting.
pub fn check_name(global: &Global, name: &str) -> Result<(), Failure> {
    LockKey::new(&Prefix::new(&global.prefix)?, name)?;
    Ok(())
}

/// Connects to the one server and applies the prefix.
pub async fn client(global: &Global) -> Result<Client, Failure> {
    Prefix::new(&global.prefix)?;
    let redis = redis_client(global)?;
    let client = Client::from_redis_client(redis)
        .await
        .map_err(|error| with_tls_advice(error, global))?;
    Ok(client.with_prefix(&global.prefix)?)
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

/// The redis-rs client for the URL and TLS options; nothing is sent yet.
fn redis_client(global: &Global) -> Result<redis::Client, Failure> {
    let url = single_url(global)?;
    let tls_options = global.tls_ca.is_some() || global.tls_insecure;
    if tls_options && !url.starts_with("rediss://") {
        return Err(Failure::usage(
            "--tls-ca and --tls-insecure need a rediss:// URL".to_owned(),
        ));
    }
    let url = match global.tls_insecure {
        true => format!("{url}#insecure"),
        false => url.to_owned(),
    };
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
