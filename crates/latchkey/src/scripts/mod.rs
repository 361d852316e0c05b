//! The Lua scripts behind every atomic step, one commented `.lua` file each.
//!
//! Scripts are sent by SHA (`EVALSHA`); redis-rs's [`Script`] loads them with
//! `SCRIPT LOAD` and retries once when the server answers `NOSCRIPT` (after a restart
//! or a `SCRIPT FLUSH`). Data reaches a script only through `KEYS` and `ARGV`: no script
//! text is ever built from input.

use std::sync::LazyLock;

use redis::Script;

/// Take (or claim a handed-over lock), join the wait queue, release and hand over.
pub(crate) static LOCK: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lock.lua")));

/// Compare-and-PEXPIRE (resets the lease).
pub(crate) static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("extend.lua")));

/// A read-only snapshot of a lock: holder, PTTL, last fence, queue length.
pub(crate) static INSPECT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("inspect.lua")));

/// Count a call in a fixed rate-limit window.
pub(crate) static FIXED_WINDOW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("fixed_window.lua")));
