//! Exit statuses (sysexits(3)) and the one-line message that goes with each.
//!
//! | status | meaning |
//! |---|---|
//! | 0  | success (`run`: the command's own status; `throttle`: allowed) |
//! | 1  | `throttle`: over the limit |
//! | 64 | usage: bad flag, argument or value, checked before connecting (EX_USAGE) |
//! | 65 | the key holds something that is not a lock (WRONGTYPE) (EX_DATAERR) |
//! | 66 | `--tls-ca`: the file cannot be read (EX_NOINPUT) |
//! | 69 | Redis unreachable (a quorum without a majority, a server failing over, loading or answering MOVED included), not Redis, TLS failed, credentials refused, ACL denied, read-only replica (EX_UNAVAILABLE) |
//! | 70 | internal error, or the lease was lost mid-run (EX_SOFTWARE) |
//! | 75 | the lock stayed busy for the whole wait, a transaction kept conflicting, or a latch stayed closed (EX_TEMPFAIL) |
//! | 126 | `run`: the command is not executable |
//! | 127 | `run`: the command was not found |
//! | 128+N | `run`: latchkey received signal N while waiting for the lock |

use std::process::ExitCode;

use latchkey::Error;

pub const USAGE: u8 = 64;
pub const DATA_ERROR: u8 = 65;
pub const NO_INPUT: u8 = 66;
pub const UNAVAILABLE: u8 = 69;
pub const SOFTWARE: u8 = 70;
pub const TEMPFAIL: u8 = 75;

/// Why the command failed: an exit status and one line for stderr.
#[derive(Debug)]
pub struct Failure {
    status: u8,
    message: String,
    /// Trying again later may succeed (Redis unreachable, failing over, loading).
    transient: bool,
}

impl Failure {
    pub fn with_status(status: u8, message: String) -> Self {
        Failure {
            status,
            message,
            transient: false,
        }
    }

    pub fn usage(message: String) -> Self {
        Failure::with_status(USAGE, message)
    }

    pub fn software(message: String) -> Self {
        Failure::with_status(SOFTWARE, message)
    }

    // Outside latchkey's own errors (see `From<Error>`), only demo and bench fail
    // this way; a lean build has neither.
    #[cfg_attr(not(any(feature = "bench", feature = "demo")), allow(dead_code))]
    pub fn unavailable(message: String) -> Self {
        Failure::with_status(UNAVAILABLE, message)
    }

    /// The one-line message.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// Whether trying again later may succeed.
    pub fn is_transient(&self) -> bool {
        self.transient
    }

    /// The same failure, with advice after the message.
    pub fn and(mut self, advice: &str) -> Self {
        self.message = format!("{}; {advice}", self.message);
        self
    }

    /// Prints the message and gives the status to exit with.
    pub fn report(self) -> ExitCode {
        crate::output::errln!("latchkey: {}", self.message);
        ExitCode::from(self.status)
    }
}

impl From<Error> for Failure {
    fn from(error: Error) -> Self {
        let status = match &error {
            Error::InvalidArgument(_) | Error::ClusterNode { .. } => USAGE,
            Error::Busy { .. } | Error::Contended { .. } => TEMPFAIL,
            Error::Unreachable { .. }
            | Error::AuthFailed { .. }
            | Error::AclDenied { .. }
            | Error::ReadOnly { .. }
            | Error::NotRedis { .. }
            | Error::Tls { .. }
            | Error::TooFewReplicas { .. }
            | Error::NoQuorum { .. } => UNAVAILABLE,
            Error::WrongType { .. } => DATA_ERROR,
            // A --sentinel URL that answers, but is no Sentinel: the wrong address.
            Error::Redis { .. } if error.to_string().contains("not point to a sentinel") => {
                UNAVAILABLE
            }
            // A server failing over, loading, or a slot that moved: unavailable for now.
            other if other.is_transient() => UNAVAILABLE,
            _ => SOFTWARE,
        };
        let message = match &error {
            Error::Redis { node, .. } if error.to_string().contains("not point to a sentinel") => {
                format!(
                    "{node} is not a Redis Sentinel: give --redis the Sentinels' URLs (port 26379 by default), not a server's"
                )
            }
            _ => error.to_string(),
        };
        Failure {
            status,
            transient: status == UNAVAILABLE && error.is_transient(),
            message,
        }
    }
}

/// Help and version go to stdout with status 0; a misuse is one line on stderr and 64.
pub fn usage(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind::{
        DisplayHelp, DisplayHelpOnMissingArgumentOrSubcommand, DisplayVersion,
    };
    if matches!(error.kind(), DisplayHelp | DisplayVersion) {
        crate::output::line(error.to_string().trim_end());
        return ExitCode::SUCCESS;
    }
    if error.kind() == DisplayHelpOnMissingArgumentOrSubcommand {
        crate::output::errln!("{}", error.to_string().trim_end());
        return ExitCode::from(USAGE);
    }
    // clap's message is the first paragraph (some name the missing arguments on
    // indented lines below it); a tip and the usage follow blank lines.
    let rendered = error.to_string();
    let message: Vec<&str> = rendered
        .lines()
        .take_while(|line| !line.trim().is_empty())
        .map(str::trim)
        .collect();
    let tip = rendered
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("tip:"));
    // The lines after one that ends in ':' (the missing arguments) are its list.
    let mut joined = String::new();
    let mut listing = false;
    for part in message.into_iter().chain(tip) {
        let separator = match () {
            () if joined.is_empty() => "",
            () if part.starts_with("tip:") => "; ",
            () if joined.ends_with(':') => " ",
            () if listing => ", ",
            () => "; ",
        };
        listing |= joined.ends_with(':');
        joined.push_str(separator);
        joined.push_str(part);
    }
    let message = joined;
    let message = message.strip_prefix("error: ").unwrap_or(&message);
    if rendered.contains("Usage: latchkey run")
        && error.kind() == clap::error::ErrorKind::UnknownArgument
    {
        crate::output::errln!(
            "latchkey: {message}; put the command after `--`: latchkey run NAME -- CMD [ARGS...]"
        );
        return ExitCode::from(USAGE);
    }
    crate::output::errln!("latchkey: {message} (see `latchkey --help`)");
    ExitCode::from(USAGE)
}
