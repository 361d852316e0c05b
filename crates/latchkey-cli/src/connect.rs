//! The client every command talks through, built from the global options.

use latchkey::Client;

use crate::cli::Global;
use crate::exit::Failure;

/// The single Redis URL the options name.
/// The server used when no `--redis` is given.
const DEFAULT_URL: &str = "redis://127.0.0.1:6379";

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

/// Connects to the one server and applies the prefix.
pub async fn client(global: &Global) -> Result<Client, Failure> {
    let client = Client::open(single_url(global)?).await?;
    Ok(client.with_prefix(&global.prefix)?)
}
