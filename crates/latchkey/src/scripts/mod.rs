//! The Lua scripts behind every atomic step, one commented `.lua` file each.
//!
//! Scripts are sent by SHA (`EVALSHA`), each call written once as a
//! [`ScriptCall`], which loads its [`Script`] with `SCRIPT LOAD` and sends it once
//! more when the server answers `NOSCRIPT` (after a restart or a `SCRIPT FLUSH`). Data reaches a script only through `KEYS` and `ARGV`: no script
//! text is ever built from input.
//!
//! The lock's state machine is seven scripts in `lock/`, one per operation, so the
//! server runs only the code an operation needs (every helper a script defines costs
//! it time on every call, which shows on the uncontended path). Redis has no
//! `require`: the helpers they share (`clock.lua`, `grant.lua`, `queue.lua`,
//! `expiry.lua`) are
//! put in front of them here, at compile time, with `concat!`: each script is still
//! one constant text. The uncontended take and release (`take_alone.lua`,
//! `release_alone.lua`) need none, and take only the lock and its queue keys: the server
//! copies every key and argument into the script's tables on every call, about
//! 1 000 server instructions each (callgrind, Redis 7.0).

use std::sync::LazyLock;

use redis::Script;

mod call;
pub(crate) use call::{ScriptCall, is_no_script};

/// A lock script: the helper files it needs, then its own file, all under `lock/`.
macro_rules! lock_script {
    ($($file:literal),+) => {
        LazyLock::new(|| Script::new(concat!($(include_str!(concat!("lock/", $file)), "\n"),+)))
    };
}

/// A plain lock's first try: take it if free (touches only the lock and its counter).
pub(crate) static TAKE: LazyLock<Script> = lock_script!("clock.lua", "grant.lua", "take.lua");

/// A fair first try that needs no fence, on a lock nobody waits for; else leave it
/// to [`ACQUIRE`]. No helpers.
pub(crate) static TAKE_ALONE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lock/take_alone.lua")));

/// A fair first try, or a try from the queue (joining it, or renewing a place in it).
pub(crate) static ACQUIRE: LazyLock<Script> = lock_script!(
    "clock.lua",
    "grant.lua",
    "queue.lua",
    "expiry.lua",
    "acquire.lua"
);

/// Release, granting the lock to the oldest live waiter and telling it; or leave
/// the queue.
pub(crate) static RELEASE: LazyLock<Script> =
    lock_script!("clock.lua", "grant.lua", "queue.lua", "release.lua");

/// The fencing token of a hold granted without one, computed on demand.
pub(crate) static FENCE: LazyLock<Script> = lock_script!("clock.lua", "grant.lua", "fence.lua");

/// Several locks at once, all or none, when none needs a fence or has a fair
/// queue (a multi-lock's try on one server or one slot). No helpers.
pub(crate) static TAKE_ALL: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lock/take_all.lua")));

/// Release a lock nobody waits for; else leave it to [`RELEASE`]. No helpers.
pub(crate) static RELEASE_ALONE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("lock/release_alone.lua")));

/// Pass a held lock to another owner of this process.
pub(crate) static PASS: LazyLock<Script> =
    lock_script!("clock.lua", "grant.lua", "queue.lua", "pass.lua");

/// A quorum script: the helper files it needs under `lock/`, then those under
/// `quorum/`, its own file last.
macro_rules! quorum_script {
    ($($helper:literal),* ; $($file:literal),+) => {
        LazyLock::new(|| {
            Script::new(concat!(
                $(include_str!(concat!("lock/", $helper)), "\n",)*
                $(include_str!(concat!("quorum/", $file)), "\n"),+
            ))
        })
    };
}

/// Take a quorum lock on one node, proposing a fencing token if asked to.
pub(crate) static QUORUM_TAKE: LazyLock<Script> =
    quorum_script!("clock.lua", "grant.lua"; "ended.lua", "proposal.lua", "take.lua");

/// Propose a fencing token on one node that holds a quorum lock for the caller
/// (fencing on demand).
pub(crate) static QUORUM_PROPOSE: LazyLock<Script> =
    quorum_script!("clock.lua", "grant.lua"; "proposal.lua", "propose.lua");

/// Write a quorum lock's fencing token back to one node that still holds it.
pub(crate) static QUORUM_FENCE: LazyLock<Script> =
    quorum_script!("clock.lua", "grant.lua"; "fence.lua");

/// Extend a quorum lock on one node, or take it back there if the node lost it.
pub(crate) static QUORUM_EXTEND: LazyLock<Script> =
    quorum_script!("clock.lua", "grant.lua"; "ended.lua", "extend.lua");

/// Release a quorum lock on one node without handing it to anyone, and wake its
/// waiters.
pub(crate) static QUORUM_RELEASE: LazyLock<Script> = quorum_script!(; "ended.lua", "release.lua");

/// Compare-and-PEXPIRE (resets the lease).
pub(crate) static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("extend.lua")));

/// A read-only snapshot of a lock: holder, PTTL, last fence, queue length.
pub(crate) static INSPECT: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("look/lock.lua"),
        "\n",
        include_str!("inspect.lua")
    ))
});

/// A read-only snapshot of everything under one name: lock, semaphore, read-write
/// lock, rate limits, election, latch.
pub(crate) static STATUS: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("lock/clock.lua"),
        "\n",
        include_str!("look/lock.lua"),
        "\n",
        include_str!("look/permits.lua"),
        "\n",
        include_str!("election/record.lua"),
        "\n",
        include_str!("look/election.lua"),
        "\n",
        include_str!("look/latch.lua"),
        "\n",
        include_str!("status.lua")
    ))
});

/// A semaphore script: the lock helpers it needs (under `lock/`), the semaphore's
/// own helpers (`semaphore/permits.lua`), then its file under `semaphore/`.
macro_rules! semaphore_script {
    ($($helper:literal),* ; $file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                $(include_str!(concat!("lock/", $helper)), "\n",)*
                include_str!("semaphore/permits.lua"), "\n",
                include_str!(concat!("semaphore/", $file))
            ))
        })
    };
}

/// Take permits, or wait for them in line.
pub(crate) static SEMAPHORE_ACQUIRE: LazyLock<Script> =
    semaphore_script!("clock.lua", "grant.lua", "queue.lua", "expiry.lua"; "acquire.lua");

/// Take permits nobody waits for, without a fence; else leave it to
/// [`SEMAPHORE_ACQUIRE`]. Only the clock and expiry helpers.
pub(crate) static SEMAPHORE_ACQUIRE_ALONE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("lock/clock.lua"),
        "\n",
        include_str!("lock/expiry.lua"),
        "\n",
        include_str!("semaphore/acquire_alone.lua")
    ))
});

/// Give permits back when nobody waits; else leave it to [`SEMAPHORE_RELEASE`].
/// Only the clock helper.
pub(crate) static SEMAPHORE_RELEASE_ALONE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("lock/clock.lua"),
        "\n",
        include_str!("semaphore/release_alone.lua")
    ))
});

/// The fencing token of a permit granted without one, computed on demand.
pub(crate) static SEMAPHORE_FENCE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("lock/clock.lua"),
        "\n",
        include_str!("lock/grant.lua"),
        "\n",
        include_str!("semaphore/fence.lua")
    ))
});

/// Give permits back, serving the line; or leave the line.
pub(crate) static SEMAPHORE_RELEASE: LazyLock<Script> =
    semaphore_script!("clock.lua", "grant.lua", "queue.lua", "expiry.lua"; "release.lua");

/// Trade a holder's permits for fewer under a new owner token, serving the line (a
/// read-write lock's downgrade).
pub(crate) static SEMAPHORE_DOWNGRADE: LazyLock<Script> =
    semaphore_script!("clock.lua", "grant.lua", "queue.lua", "expiry.lua"; "downgrade.lua");

/// Reset a permit's lease while it is live.
pub(crate) static SEMAPHORE_EXTEND: LazyLock<Script> =
    semaphore_script!("clock.lua", "grant.lua", "queue.lua", "expiry.lua"; "extend.lua");

/// Drop every permit and serve the line (`release --force`).
pub(crate) static SEMAPHORE_BREAK: LazyLock<Script> =
    semaphore_script!("clock.lua", "grant.lua", "queue.lua", "expiry.lua"; "break.lua");
/// Read the live permits without writing.
pub(crate) static SEMAPHORE_LOOK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("lock/clock.lua"),
        "\n",
        include_str!("semaphore/look.lua")
    ))
});

/// A rate-limit script, one file per algorithm under `ratelimit/`.
macro_rules! rate_script {
    ($file:literal) => {
        LazyLock::new(|| Script::new(include_str!(concat!("ratelimit/", $file))))
    };
    // With the clock helper (`server_time`, `is_count`) in front.
    (clock, $file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("lock/clock.lua"),
                "\n",
                include_str!(concat!("ratelimit/", $file))
            ))
        })
    };
}

/// One call per period.
pub(crate) static COOLDOWN: LazyLock<Script> = rate_script!("cooldown.lua");

/// Calls per fixed window.
pub(crate) static FIXED_WINDOW: LazyLock<Script> = rate_script!(clock, "fixed_window.lua");

/// Calls in the last window, exactly, from a log.
pub(crate) static SLIDING_WINDOW: LazyLock<Script> = rate_script!(clock, "sliding_window.lua");

/// The generic cell rate algorithm.
pub(crate) static GCRA: LazyLock<Script> = rate_script!("gcra.lua");

/// An election script: the record helper (`election/record.lua`), then its file
/// under `election/`.
macro_rules! election_script {
    ($file:literal) => {
        LazyLock::new(|| {
            Script::new(concat!(
                include_str!("election/record.lua"),
                "\n",
                include_str!(concat!("election/", $file))
            ))
        })
    };
}

/// Write (or renew) the leader record of the election's lock holder, and tell
/// observers when it was written.
pub(crate) static ELECTION_PROCLAIM: LazyLock<Script> = election_script!("proclaim.lua");

/// Withdraw a leader's record, and tell observers.
pub(crate) static ELECTION_RESIGN: LazyLock<Script> = election_script!("resign.lua");

/// Read who leads, without writing.
pub(crate) static ELECTION_LEADER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("election/record.lua"),
        "\n",
        include_str!("look/election.lua"),
        "\n",
        include_str!("election/leader.lua")
    ))
});

/// Count a latch down; the last count opens it and tells its waiters.
pub(crate) static LATCH_COUNT_DOWN: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("look/latch.lua"),
        "\n",
        include_str!("latch/count_down.lua")
    ))
});

/// Read a latch without writing.
pub(crate) static LATCH_LOOK: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("look/latch.lua"),
        "\n",
        include_str!("latch/look.lua")
    ))
});
