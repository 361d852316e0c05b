//! Printing data as text or JSON.

use std::time::Duration;

use serde::Serialize;

use crate::exit::Failure;

/// Prints `value` as one line of JSON.
pub fn json<T: Serialize>(value: &T) -> Result<(), Failure> {
    let line = serde_json::to_string(value)
        .map_err(|e| Failure::software(format!("cannot encode JSON: {e}")))?;
    println!("{line}");
    Ok(())
}

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
