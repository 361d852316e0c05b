//! Printing data as text or JSON.

use std::fmt::Display;
use std::io::Write;
use std::time::Duration;

use serde::Serialize;

use crate::exit::Failure;

/// Prints `value` as one line of JSON.
pub fn json<T: Serialize>(value: &T) -> Result<(), Failure> {
    let line = serde_json::to_string(value)
        .map_err(|e| Failure::software(format!("cannot encode JSON: {e}")))?;
    self::line(line);
    Ok(())
}

/// Prints `text` and a newline on standard output. A reader that went away
/// (`latchkey list | head -1`) ends the program quietly, with status 0, as SIGPIPE
/// ends other tools (Rust ignores SIGPIPE, and `println!` would panic); any other
/// failure to write (a full disk) ends it with status 74 and a message. Nothing is
/// held by then: `run` prints only to stderr, and `acquire` prints its token itself
/// and gives the lock back when stdout does not take it.
pub fn line(text: impl Display) {
    let mut out = std::io::stdout().lock();
    let Err(error) = writeln!(out, "{text}").and_then(|()| out.flush()) else {
        return;
    };
    if error.kind() == std::io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    // A full disk or a closed file: say so, as sysexits' EX_IOERR.
    error_line(format_args!(
        "latchkey: cannot write to standard output: {error}"
    ));
    std::process::exit(74);
}

/// `println!` through [`line()`]: `outln!("sold {}", n)`.
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))
    };
}
pub(crate) use outln;

/// Prints `text` and a newline on standard error, and drops it if that fails (the
/// terminal hung up, the reader of a pipe left). `eprintln!` would panic instead,
/// and latchkey writes to stderr while it holds a lock with a command running: a
/// panic then would leave the command's processes running and the lock held.
pub fn error_line(text: impl Display) {
    let _ = writeln!(std::io::stderr().lock(), "{text}");
}

/// `eprintln!` through [`error_line()`]: `errln!("latchkey: {why}")`.
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::error_line(format_args!($($arg)*))
    };
}
pub(crate) use errln;

/// A duration for people: rounded to the millisecond, like `12s 340ms`.
pub fn human(d: Duration) -> String {
    let rounded = Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    humantime::format_duration(rounded).to_string()
}

/// A number of milliseconds for people, like `12s 340ms`.
pub fn human_ms(ms: u64) -> String {
    human(Duration::from_millis(ms))
}

/// A duration for scripts: whole milliseconds.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// `text` (a leader's value: anything a candidate campaigned with) safe to draw in
/// a terminal: control characters replaced.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| match c.is_control() {
            true => char::REPLACEMENT_CHARACTER,
            false => c,
        })
        .collect()
}
