//! Redis Sentinel specifics: the target that asks the Sentinels where the primary is.

use std::sync::Arc;

use redis::sentinel::{SentinelClient, SentinelNodeConnectionInfo, SentinelServerType};
use redis::{ConnectionAddr, ConnectionInfo, TlsMode};

use super::target::Target;
use crate::error::{Error, Result};

/// The primary of `master` as the Sentinels at `sentinels` name it, and the name to
/// show in errors. The first URL's user, password, database and TLS are used for
/// the primary too.
pub(super) fn target(master: &str, sentinels: Vec<ConnectionInfo>) -> Result<(Target, String)> {
    let Some(first) = sentinels.first() else {
        return Err(Error::InvalidArgument(
            "Sentinel needs at least one Sentinel URL".into(),
        ));
    };
    if master.is_empty() {
        return Err(Error::InvalidArgument(
            "the Sentinel master name is empty".into(),
        ));
    }
    let node = format!("{master} via Sentinel at {}", first.addr());
    let mut primary = SentinelNodeConnectionInfo::default()
        .set_redis_connection_info(first.redis_settings().clone());
    if let ConnectionAddr::TcpTls { insecure, .. } = first.addr() {
        let mode = if *insecure {
            TlsMode::Insecure
        } else {
            TlsMode::Secure
        };
        primary = primary.set_tls_mode(mode);
    }
    let client =
        SentinelClient::build(sentinels, master, Some(primary), SentinelServerType::Master)
            .map_err(|e| Error::from_redis(e, &node, ""))?;
    let target = Target::Sentinel(Arc::new(tokio::sync::Mutex::new(client)));
    Ok((target, node))
}
