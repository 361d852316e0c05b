//! The Lua scripts behind every atomic step, one commented `.lua` file each.
//!
//! Scripts are sent by SHA (`EVALSHA`); redis-rs's [`Script`] loads them with
//! `SCRIPT LOAD` and retries once when the server answers `NOSCRIPT` (after a restart
//! or a `SCRIPT FLUSH`). Data reaches a script only through `KEYS` and `ARGV`: no script
//! text is ever built from input.
//!
//! The lock's state machine is four scripts in `lock/`, one per operation, so the
//! server runs only the code an operation needs (every helper a script defines costs
//! it time on every call, which shows on the uncontended path). Redis has no
//! `require`: the helpers they share (`clock.lua`, `grant.lua`, `queue.lua`) are
//! put in front of them here, at compile time, with `concat!`: each script is still
//! one constant text.

use std::sync::LazyLock;

use redis::Script;

/// A lock script: the helper files it needs, then its own file, all under `lock/`.
macro_rules! lock_script {
    ($($file:literal),+) => {
        LazyLock::new(|| Script::new(concat!($(include_str!(concat!("lock/", $file)), "\n"),+)))
    };
}

/// A plain lock's first try: take it if free (touches only the lock and its counter).
pub(crate) static TAKE: LazyLock<Script> = lock_script!("clock.lua", "grant.lua", "take.lua");

/// A fair first try, or a try from the queue (joining it, or renewing a place in it).
pub(crate) static ACQUIRE: LazyLock<Script> =
    lock_script!("clock.lua", "grant.lua", "queue.lua", "acquire.lua");

/// Release, granting the lock to the oldest live waiter and telling it; or leave
/// the queue.
pub(crate) static RELEASE: LazyLock<Script> =
    lock_script!("clock.lua", "grant.lua", "queue.lua", "release.lua");

/// Pass a held lock to another owner of this process.
pub(crate) static PASS: LazyLock<Script> = lock_script!("clock.lua", "grant.lua", "pass.lua");

/// Compare-and-PEXPIRE (resets the lease).
pub(crate) static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("extend.lua")));

/// A read-only snapshot of a lock: holder, PTTL, last fence, queue length.
pub(crate) static INSPECT: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("inspect.lua")));

/// Count a call in a fixed rate-limit window.
pub(crate) static FIXED_WINDOW: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("fixed_window.lua")));
