//! The client every command talks through, built from the global options.

use latchkey::Client;

use crate::cli::Global;
use crate::exit::Failure;

/// The single Redis URL the options name.
pub fn single_url(global: &Global) -> Result<&str, Failure> {
    match global.redis.as_slice() {
        [url] => Ok(url),
        [] => Err(Failure::usage("no Redis URL given".to_owned())),
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
