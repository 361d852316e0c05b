//! Distributed locks on Redis that get the details right.
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! let client = latchkey::Client::open("redis://127.0.0.1:6379").await?;
//! let guard = client.mutex("orders:42")?.lock().await?;
//! println!("holding orders:42 with fencing token {}", guard.fence().await?);
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! A [`Client`] hands out [`Mutex`] handles by name. Taking a mutex returns a
//! [`MutexGuard`], whose life is the critical section, as with `tokio::sync::Mutex`.
//! What every lock does:
//!
//! - **Leases.** A lock is held for a lease, renewed by default, so a holder that
//!   crashes blocks others for at most one lease. See [Leases](#leases).
//! - **Owner tokens.** Each acquisition carries a fresh 128-bit [`OwnerToken`] from
//!   the OS CSPRNG. Release is compare-and-delete and extend is compare-and-PEXPIRE,
//!   so a holder whose lease ended can never free or extend the next holder's lock.
//! - **Waiting without polling.** Waiters queue in Redis and a release wakes exactly
//!   one of them. See [Waiting](#waiting) and [Plain or fair](#plain-or-fair).
//! - **Cancel safety.** Dropping a waiting future or a guard never leaves the lock
//!   held. See [Cancel safety](#cancel-safety).
//! - **Fencing tokens.** [`MutexGuard::fence`] grows strictly from holder to holder,
//!   even across a restart of a Redis that kept nothing on disk, and costs nothing
//!   until a holder asks for it. See [Fencing](#fencing).
//! - **Interop.** The lock key holds exactly the owner token with a PX expiry, so
//!   redis-py's `Lock`, redsync and node-redlock on the same key exclude latchkey and
//!   are excluded by it. See [Interop](#interop).
//!
//! One Redis server, a primary with replicas, Sentinel and Redis Cluster all work the
//! same way; see [Deployments](#deployments). Synchronous callers use [`blocking`].
//! Beyond the lock: [`Semaphore`], [`RwLock`], several locks at once ([`MultiLock`]),
//! leader election ([`election`]),
//! latches and barriers ([`latch`]), rate
//! limits ([`ratelimit`]) and optimistic transactions ([`transaction`]); see
//! [Beyond the lock](#beyond-the-lock).
//! The atomic steps under every lock are the
//! [`store`] traits (a core [`store::LockStore`] plus capabilities); the key layout
//! is described on [`LockKey`], and the Lua scripts in the `scripts/` folder of the
//! source.
//!
//! latchkey runs on tokio: call it from inside a tokio runtime (the [`blocking`] API
//! brings its own). The watchdog, the subscriber connection and the releases of
//! dropped guards are tasks on that runtime. It logs through `tracing`: retries,
//! failed renewals, lost leases and a subscription refused or lost (waiters fall
//! back to their timers) at `warn`, background releases at `debug`; each wait runs
//! in a `latchkey.wait` span
//! (`lock`, `primitive`, then `outcome`, `waited_ms` and, when busy, the masked
//! `holder`) and each hold has a `latchkey.hold` span (`lock`, `primitive`, `fence`
//! if the grant brought it, `held_ms` when it ends), both at `debug`, so a
//! production log at `info` stays quiet. It counts acquisitions, waits, holds,
//! renewals and more through the `metrics` facade: see [`metrics`].
//!
//! # Leases
//!
//! A lock is not held for ever. Redis deletes the lock key when its expiry passes, so
//! a holder that crashes, freezes or loses the network blocks the others for at most
//! one lease. A [`Lease`], set with [`Mutex::with_lease`], is one of two kinds:
//!
//! - **Renewed**, the default ([`Lease::renewed`], 30 s): a watchdog task extends the
//!   lease every third of it (every 10 s by default) for as long as the guard lives,
//!   and stops the moment the guard is released or dropped. A process that dies stops
//!   renewing, so its lock is free again within one lease. A renewed lease is at
//!   least 100 ms ([`Lease::MIN_RENEWED`]), so one slow round trip cannot outlast it.
//! - **Fixed** ([`Lease::fixed`]): the lease runs out a fixed time after the acquire
//!   unless the holder calls [`MutexGuard::extend`], which *resets* it to the given
//!   length from now (it does not add to what is left, so repeated extends cannot push
//!   the end out without bound). A fixed lease is at least 10 ms
//!   ([`Lease::MIN_FIXED`]).
//!
//! When the lease ends, Redis frees the lock whether or not the holder is done. So the
//! guard keeps its own, cautious idea of the lease: the TTL counted from when the
//! acquire (or the last renewal) was *sent*, not from when the answer came (Redis may
//! have started its clock at any point in between), less 1 % + 2 ms for clocks that
//! run at slightly different rates. [`MutexGuard::validity`] and
//! [`MutexGuard::valid_until`] show it; neither costs a round trip.
//!
//! The guard says when the lease is lost. [`MutexGuard::lost`] resolves,
//! [`MutexGuard::lost_token`] is cancelled and [`MutexGuard::is_lost`] turns true as
//! soon as:
//!
//! - a renewal or an [`extend`](MutexGuard::extend) found the lock no longer ours
//!   (the lease ran out in Redis, and someone else may have taken the lock, or an
//!   operator broke it with [`Mutex::force_release`]);
//! - Redis did not answer a renewal before the lease would end (a renewal that fails
//!   with an error is retried every tenth of the lease while time is left);
//! - the lease ran out by our clock (a fixed lease that was not extended in time);
//! - the hold reached its limit ([`Lease::with_max_hold`]): a renewed lease keeps a
//!   hung holder's lock for ever, so a limit caps it. Renewals stop once the lease
//!   covers the rest of the limit, [`MutexGuard::hold_limit_reached`] tells this case
//!   apart, and `fence` and `extend` then fail with [`Error::HoldLimit`].
//!
//! latchkey cannot stop your code when that happens. Select on `lost()`, or let
//! [`Mutex::with_lock`] do it. Whatever still runs afterwards is not protected by the
//! lock; [fencing tokens](#fencing) make its late writes harmless.
//!
//! ```no_run
//! # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
//! # async fn copy_files(fence: u64) {}
//! use std::time::Duration;
//! use latchkey::Lease;
//!
//! let mutex = client.mutex("backup")?.with_lease(Lease::renewed(Duration::from_secs(10))?);
//! let guard = mutex.lock().await?;
//! tokio::select! {
//!     () = copy_files(guard.fence().await?) => {}
//!     () = guard.lost() => eprintln!("lease lost: stop, the lock no longer protects us"),
//! }
//! let was_still_ours = guard.release().await?; // false: the lease had run out
//! # Ok(()) }
//! ```
//!
//! A lock delay ([`Lease::with_lock_delay`], Consul's `lock-delay`) keeps the lock
//! from everyone for a while after a lease that ran out without a release: a holder
//! paused past its lease that wakes within the delay finds no new holder in the
//! middle of its work, even if it writes without checking its fencing token. The
//! guard still counts on the lease alone, and a release frees the lock at once.
//!
//! Choose the lease by what a crash may cost: a longer lease keeps the others out
//! longer after a holder dies; a shorter one tolerates less delay from Redis and the
//! network. Keep a fixed lease well above the longest critical section, and keep
//! leases as short as the work allows.
//!
//! # Waiting
//!
//! [`Mutex::try_lock`] makes one attempt. [`Mutex::lock`] waits as long as it takes,
//! and [`Mutex::lock_timeout`] until a deadline. Waiters do not poll Redis in a loop:
//!
//! 1. The first attempt just tries: one round trip, one script that takes the lock if
//!    it is free.
//! 2. If the lock is busy, the waiter subscribes to the lock's pub/sub channel and,
//!    once the server has confirmed the subscription, joins the lock's wait queue in
//!    Redis, in order of arrival. Listening comes first, so no wake-up can slip in
//!    between. One subscriber connection per [`Client`] serves all its locks and
//!    waiters.
//! 3. A release hands the lock straight to the oldest live waiter (with a new
//!    fencing token if it asked for one with the grant, [`Fencing::OnGrant`]), for
//!    the lease that waiter asked for or what is left of its waiter lease, whichever
//!    is shorter (the key then holds the waiter's token), and publishes a message
//!    naming that one waiter and its fencing token, or the server clock in its place.
//!    The waiter holds the lock as soon as it hears: no claim, no round trip. Its
//!    guard extends the lease to the mutex's own if it keeps the lock for a third of
//!    what it started with. Nobody else wakes up, and no newcomer can take the lock in
//!    between. A message from a handover older than the waiter's last renewal (the
//!    lock it handed was lost since) is recognised by its token or clock, and one from
//!    a server restored from older state by the waiter lease it saw; either only makes
//!    the waiter try again, which grants it the lock afresh if it is still its.
//! 4. A waiter also re-checks on a timer: the holder's remaining lease or a third of
//!    its waiter lease, whichever is shorter. So a lost message or a holder that
//!    crashed costs it at most that. A lock held by another library (whose release
//!    publishes nothing) is re-checked every 40 ms instead, so its release is seen
//!    within about that; latchkey's own tokens end in `:lk`, which is how a waiter
//!    tells the two apart. While its subscription
//!    is not confirmed (the subscriber connection is down or stalled, or the ACL user
//!    may not subscribe), a waiter re-checks every few milliseconds, backing off to
//!    100 ms, instead.
//!
//! **Waiter leases.** Each attempt from the queue renews the waiter's place for its
//! *waiter lease*: 5 s by default, set with [`Mutex::with_waiter_lease`]. A waiter
//! that dies or freezes stops renewing, and releases skip it once its waiter lease
//! has run out: it delays the others by at most one waiter lease, never by a full
//! lock lease. A lock handed to a waiter that died stays held for at most the rest
//! of that waiter lease. A live waiter renews every third of its waiter
//! lease, and a renewal whose reply is lost is retried after the 1 s reply timeout,
//! so one slow reply does not cost it its place. Keep the waiter lease above 3 s.
//!
//! **Retries.** A dropped connection, a reply that timed out (1 s), or a server still
//! loading its data, failing over or not yet ready (see [`Error::is_transient`]) is
//! retried with capped backoff (10 ms, doubling up to 1 s) and logged at `warn`. Only
//! an error that retrying cannot fix ends the wait early (see [Errors](#errors)).
//! `lock()` retries until it gets the lock. Every retry carries the same owner token,
//! so it recognises what an earlier request whose reply was lost already did.
//!
//! **Deadlines.** `lock_timeout(d)` returns soon after `d` whatever the network does:
//! every round trip is cut off at the deadline. A waiter that gives up then gives
//! itself at most 50 ms to leave the queue, and leaves in the background after that.
//! `try_lock` is not cut off: it returns when its one attempt does, after at most
//! about 3 s on a connection latchkey made (a 2 s connect when the connection must
//! be made again, then the 1 s reply timeout).
//!
//! ```no_run
//! # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
//! use std::time::Duration;
//! use latchkey::Error;
//!
//! match mutex.lock_timeout(Duration::from_secs(5)).await {
//!     Ok(guard) => { /* critical section */ guard.release().await?; }
//!     Err(Error::Busy { waited, retry_after, .. }) => {
//!         println!("still held after {waited:?}; the holder's lease ends in {retry_after:?}");
//!     }
//!     Err(other) => return Err(other),
//! }
//! # Ok(()) }
//! ```
//!
//! # Plain or fair
//!
//! Set with [`Mutex::with_fairness`]. Either way a release hands the lock to the
//! oldest live waiter in the Redis queue; the two differ in who else may take it.
//!
//! [`Fairness::Plain`], the default and the fastest:
//!
//! - A newcomer may take a *free* lock without queueing, and so may any queued
//!   waiter. A released lock with waiters is never free (it is handed over), so this
//!   matters only when a lease ran out (a holder's, or that of a waiter that died
//!   with the lock handed to it).
//! - The tasks of one process pass the lock among themselves. While a task of the
//!   process holds the lock, or waits for it in Redis, other tasks of the process that
//!   want it wait in a local line instead of in Redis. The holder's release then
//!   passes the lock straight to the next of them in one script, without freeing it:
//!   new owner, new lease (and a new fencing token for a task that asked for it on
//!   grant), one round trip. While other processes
//!   wait in the Redis queue, the process goes on passing the lock among its tasks
//!   for at most 10 ms (and 64 passes; never while a fair waiter heads the line),
//!   then releases it to them: a handoff between
//!   processes costs a release and a wake-up, so spreading it over several
//!   short critical sections multiplies throughput, and a waiting process loses at
//!   most 10 ms and one critical section to each process ahead of it. Local waiters also re-check on a timer (a third of
//!   the waiter lease), so a lost turn costs at most that.
//! - Only handles made by one [`Client`], and clones of one handle, share a local
//!   line. [`try_lock`](Mutex::try_lock) never waits in it.
//!
//! [`Fairness::Fair`]: strict FIFO across all processes.
//!
//! - A newcomer never takes a free lock that a live waiter is owed, and a queued
//!   waiter takes a free lock only at the head of the line.
//! - Every task waits in Redis; there is no local passing. So a contended acquisition
//!   costs a place in the queue, a release that hands over and a pub/sub message,
//!   where a plain lock passed between local tasks costs one script.
//!
//! Use fair when the order of arrival matters (a deploy queue); plain otherwise.
//!
//! ```no_run
//! # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
//! let deploys = client.mutex("deploy:prod")?.with_fairness(latchkey::Fairness::Fair);
//! let guard = deploys.lock().await?; // in order of arrival, across every process
//! # Ok(()) }
//! ```
//!
//! # Cancel safety
//!
//! Every future of [`Client`], [`Mutex`] and [`MutexGuard`] may be dropped at any
//! `.await` (a `select!` branch that lost, `tokio::time::timeout`, an aborted task)
//! without leaving a lock held by nobody. (The raw [`store::LockStore`] steps leave
//! that cleanup to their caller.)
//!
//! - **Waiting.** Dropping a [`lock`](Mutex::lock), [`lock_timeout`](Mutex::lock_timeout)
//!   or [`with_lock`](Mutex::with_lock) future leaves no lock behind and leaves the
//!   wait queue, even if its acquire had already reached Redis, or a release had just
//!   handed it the lock (in Redis or from a local holder). A release runs in the
//!   background and undoes whatever the waiter may have had: its queue entry, a lock
//!   an attempt in flight may have taken, a lock handed to it, which goes on to the
//!   next waiter.
//! - **Holding.** Dropping a [`MutexGuard`] releases the lock in the background,
//!   handing it to the next waiter as an explicit release does; renewal stops first.
//!   The drop never blocks and never panics. Every release in the background (of a
//!   dropped guard, or a wait's exit from the queue) is retried on transient
//!   failures, on a fresh connection, until it lands or the lease it would free has
//!   ended. Dropping a
//!   [`release`](MutexGuard::release) future, or a release that failed, does the
//!   same.
//! - **Extending.** Dropping an [`extend`](MutexGuard::extend) future may or may not
//!   have reset the lease in Redis. The guard keeps its earlier idea of the lease,
//!   which errs on the short side.
//! - **Reading.** [`Mutex::status`], [`Mutex::is_locked`], [`MutexGuard::is_held`]
//!   and [`Client::list`] only read: dropping them has no effect.
//! - **Breaking and counting.** A dropped [`Mutex::force_release`] may or may not have
//!   broken the lock; a dropped [`RateLimiter::check`](ratelimit::RateLimiter::check)
//!   may or may not have counted the call.
//!
//! Each method's `# Cancel safety` section says the same for that method.
//!
//! ```no_run
//! # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
//! use std::time::Duration;
//!
//! // Safe: if the timer wins, the waiter leaves the queue and nothing stays held.
//! match tokio::time::timeout(Duration::from_secs(1), mutex.lock()).await {
//!     Ok(guard) => drop(guard?), // released in the background
//!     Err(_elapsed) => println!("gave up"),
//! }
//! # Ok(()) }
//! ```
//!
//! The background release is a task on the tokio runtime the lock was taken on.
//! Commands on one connection run in order, so it lands after any acquire of the same
//! waiter still in flight on that connection. If the runtime is shutting down, the
//! task does not run, and the lock frees itself when its lease ends (a queue entry
//! when its waiter lease ends).
//!
//! What no client can prevent: a request that the network delays past its sender
//! giving up (a partition that heals, a stalled path that flushes) still runs when it
//! arrives. It may then hold the lock for nobody until its lease ends, or leave a
//! queue entry until its waiter lease ends. Fencing tokens keep that harmless.
//!
//! The [`blocking`] API cannot be cancelled from outside (bound a wait with
//! `lock_timeout`), and dropping a blocking guard releases the lock before the drop
//! returns.
//!
//! # Fencing
//!
//! A lease can end under a holder that is still running: a long GC pause, a frozen
//! VM, a slow disk. The lock alone cannot stop that holder's late writes. Every
//! holder can therefore get a fencing token, [`MutexGuard::fence`], strictly larger
//! than the token of every earlier holder of that lock. Send it with every write to
//! the resource the lock protects, and have the resource refuse a token lower than
//! the highest it has accepted. A holder that stalled past its lease then cannot
//! overwrite the next holder's work:
//!
//! ```text
//! UPDATE invoices SET total = $1, fence = $2 WHERE id = 7 AND fence < $2
//! -- no row updated: a later holder wrote first, so drop this work
//! ```
//!
//! **Computed on demand.** Most holders never write to a resource that checks a
//! token, and computing one on every grant would cost every lock about 3× the
//! server work of the bare `SET NX PX` it otherwise needs (see docs/benchmarks.md).
//! So by default ([`Fencing::OnDemand`]) an uncontended take is one `SET key token NX
//! PX ttl GET`, and `fence().await` computes the token the first time it is called,
//! in a script that first checks the lock still holds this guard's owner token: holds
//! of one lock never overlap, so tokens computed during them come in the order of
//! the holds. Later calls reuse it without a round trip. A holder whose lock is gone
//! by then gets [`Error::LeaseLost`] instead of a token. A lock handed over from the
//! wait queue, or passed between the tasks of a process, is fenced on demand the
//! same way, and [`Fencing::OnGrant`] computes it with every grant, handovers and
//! passes included, for holders that always write with one
//! ([`MutexGuard::known_fence`] then never needs a round trip).
//!
//! A token is `max(previous token + 1, server time in µs)`, read from Redis's `TIME`
//! inside the script that computes it. So tokens keep growing across every kind of restart
//! and failover: a server that restarts empty, one that loads an RDB snapshot or an
//! AOF older than the last grant, a replica promoted before it received the last
//! writes. For the same reason the counter may expire: it expires with the lease it
//! fenced as it stood then (renewals extend only the lock key), so
//! [`LockStatus::fence`] may be `None` during a long hold, or one whose holder never
//! asked for a token.
//!
//! **The assumption this rests on:** the Redis server's clock never steps back past
//! the last token handed out or the last handover (tokens are microseconds, so a step
//! back by more than the time since the last grant; a handover without a token tells
//! its waiter the clock, to order it against the waiter's place in line). Run Redis
//! hosts with NTP slewing, not stepping, and after a failover make sure the new
//! primary's clock is not behind the old one's.
//! Tokens are large (about 1.8·10¹⁵ today): compare them, don't count with them.
//!
//! Locks taken by other libraries (see [Interop](#interop)) get no fencing token.
//!
//! # Under faults
//!
//! What latchkey does when Redis or the network misbehaves:
//!
//! - **Bounded waits.** A wait never outlasts its deadline by more than a few tens of
//!   milliseconds, whatever the network does (see [Waiting](#waiting)). Transient
//!   failures are retried while the deadline allows and reported only when it passes.
//! - **Stalled connections.** On the connections latchkey makes, a connect times out
//!   after 2 s and a reply after 1 s. A connection whose reply timed out is replaced,
//!   so a stalled TCP path (a peer that vanished without a reset, a black-holed
//!   route) is left behind. A connection you hand latchkey
//!   ([`Client::from_connection`]) is yours: it is not replaced, and its own timeouts
//!   apply.
//! - **The subscriber connection** sends a heartbeat PING every second and is
//!   replaced when it stalls. It reconnects with backoff (100 ms, doubling up to 2 s),
//!   subscribes again, and then wakes every waiter to re-check the lock, since
//!   messages sent meanwhile are lost. Until its subscription is confirmed again,
//!   waiters re-check on short timers instead of waiting for a wake-up.
//! - **Holding through a fault.** The watchdog retries a failed renewal every tenth of
//!   the lease while the lease lasts, and fires `lost` when it cannot renew in time.
//! - **Giving up mid-fault.** Giving up or being cancelled at any point, even as the
//!   lock is being handed over, leaves nothing held: whatever was handed to a waiter
//!   that left is passed on or released (see [Cancel safety](#cancel-safety)).
//! - **Restarts and failovers.** Scripts run by SHA, and a server that lost them
//!   (`NOSCRIPT`, after a restart or `SCRIPT FLUSH`) gets them again. A Redis that
//!   loses its data (a restart without persistence, a restart from an older snapshot,
//!   a failover to a replica that missed writes) forgets who held what, so a second
//!   caller may take a lock whose first holder still runs. No Redis client can
//!   prevent that. The first holder's next renewal (or extend) finds the lock gone
//!   and fires `lost`, and fencing tokens keep growing through it, so the resource
//!   refuses the older holder. To keep it from happening, bring a server that
//!   restarts empty back only after the longest lease has passed.
//! - **Replicas.** Locks must be taken on the primary: a read-only replica answers
//!   [`Error::ReadOnly`]. Behind Sentinel, that (or a lost connection) makes the next
//!   command ask the Sentinels for the new primary.
//!
//! The repository's `latchkey-torture` harness checks these promises against real
//! processes that are killed and paused, Redis servers that restart empty, from older
//! snapshots or fail over, and connections that stall, black-hole or reset; its
//! `docs/reliability.md` has the latest results.
//!
//! # Deployments
//!
//! | Redis | connect with | a failover can lose a fresh lock? |
//! |---|---|---|
//! | one server | [`Client::open`] | a restart without the data forgets locks |
//! | primary + replicas | [`Client::open`] (the primary) | yes (asynchronous replication); rarely with [`Client::with_wait_replicas`] |
//! | Sentinel | [`Client::open_sentinel`] | as primary + replicas; the client follows the new primary |
//! | Redis Cluster (≥ 7) | [`Client::open_cluster`] | per shard, as primary + replicas |
//! | N independent masters (Redlock) | [`Client::open_quorum`] | no, while a majority keeps its data; a master that lost its data stays out for a lease + 1 s |
//!
//! Fencing tokens keep growing through every one of these (see [Fencing](#fencing)).
//! On a cluster, all keys of a lock share its hash slot, every script runs on the
//! slot's primary, MOVED/ASK and failovers are followed, and wake-ups use sharded
//! pub/sub (`SPUBLISH`), so a release's message stays within its shard.
//! [`Client::with_wait_replicas`] makes every grant and renewal wait (`WAIT`) until
//! that many replicas have it; a grant fewer confirm is undone and reported as
//! [`Error::TooFewReplicas`], and [`MutexGuard::replicas`] says how many did.
//!
//! # A quorum of independent masters
//!
//! [`Client::open_quorum`] holds each lock on a majority of N independent masters (N
//! odd, at least 3), as Redlock does: requests go to all of them at once, each with
//! its own deadline, and settle on a majority, so a slow or dead minority delays
//! nothing. Fencing tokens keep growing across the quorum (the holder writes its
//! token back to a majority before it gets it, when first asked for unless the
//! mutex fences on grant; see the repository's `docs/quorum-fencing.md` and
//! [`quorum`]). A quorum has no wait queue, so fair locks
//! are refused; and a master that restarts without its data must stay out for the
//! longest lease plus 1 s. Errors name every master ([`Error::NoQuorum`]).
//!
//! ```no_run
//! # async fn demo() -> latchkey::Result<()> {
//! use std::time::Duration;
//! let cluster = latchkey::Client::open_cluster(&["redis://10.0.0.1:6379"]).await?;
//! let guarded = latchkey::Client::open_sentinel("mymaster", &["redis://10.0.0.9:26379"])
//!     .await?
//!     .with_wait_replicas(1, Duration::from_millis(100))?;
//! # Ok(()) }
//! ```
//!
//! # Beyond the lock
//!
//! The same client, keys, errors and guarantees, for the other things processes
//! need to agree on:
//!
//! | what | for | made by |
//! |---|---|---|
//! | [`Semaphore`] | at most N at once (weighted, FIFO, each permit a lease with its own fence) | [`Client::semaphore`] |
//! | [`RwLock`] | many readers or one writer, writers not starved; downgrade, upgradeable reads | [`Client::rw_lock`] |
//! | [`MultiLock`] | several locks at once, all or none, never deadlocking | [`Client::multi_lock`] |
//! | [`election::Election`] | one leader at a time, terms that grow, observers told of changes | [`Client::election`] |
//! | [`latch::Latch`], [`latch::Barrier`] | wait until N events happened, or N parties arrived (opens once, woken by pub/sub) | [`Client::latch`], [`Client::barrier`] |
//! | [`ratelimit::RateLimiter`] | cooldown, fixed window, exact sliding window, GCRA | [`Client::rate_limiter`] |
//! | [`transaction::Transaction`] | read-check-write without a lock (WATCH/MULTI/EXEC, bounded retries) | [`Client::transaction`], [`MutexGuard::transaction`] |
//!
//! Permits and read/write guards are [`MutexGuard`]s over a
//! [`semaphore::PermitStore`], so leases, the watchdog, [`lost`](MutexGuard::lost),
//! fencing and cancel safety work as for a lock. Each keeps its state in companion
//! keys of its name (`{name}:lk:sem`, `{name}:lk:rw`, `{name}:lk:elect`, `{name}:lk:gcra`
//! …), never a lock's; a multi-lock's locks are ordinary locks. Semaphores, read-write locks, elections and transactions need one Redis deployment
//! (not a quorum); transactions, one server or a Sentinel-managed primary.
//!
//! ```no_run
//! # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
//! use latchkey::ratelimit::Policy;
//! use std::time::Duration;
//!
//! let checkout = client.semaphore("checkout", 3)?.acquire(1).await?;
//! let sms = client.rate_limiter("sms:+15551234567", Policy::cooldown(Duration::from_secs(60))?)?;
//! if sms.check(1).await?.allowed { /* send the code */ }
//! let moved: Option<()> = client
//!     .transaction(&["{bank}:a", "{bank}:b"])?
//!     .run(|reads| async move {
//!         let a: i64 = reads.get("{bank}:a").await?;
//!         let mut writes = latchkey::redis::pipe();
//!         if a >= 10 { writes.decr("{bank}:a", 10).ignore().incr("{bank}:b", 10).ignore(); }
//!         Ok((a >= 10).then_some(writes))
//!     })
//!     .await?;
//! checkout.release().await?;
//! # Ok(()) }
//! ```
//!
//! # Interop
//!
//! **Other lock libraries.** The lock key holds exactly the owner token with a PX
//! expiry, the layout of `SET key token NX PX ttl`. So redis-py's `Lock`, redsync,
//! node-redlock and latchkey, on the same key of the same Redis server, exclude each
//! other. What the others do not share: their waiters poll instead of queueing and are
//! not woken by a latchkey release (which hands the lock to latchkey's queued waiters
//! first), and their holds get no fencing token. A latchkey waiter behind another
//! library's hold notices its release by re-checking every 40 ms (see
//! [Waiting](#waiting)); [`LockStatus::is_held_by_latchkey`] tells such a holder apart.
//! [`Mutex::is_locked`], [`Mutex::status`] and [`Client::list`] see every holder;
//! [`Mutex::force_release`] breaks any hold. Besides the lock key, latchkey keeps a
//! few companion keys next to it (see [`LockKey`]).
//!
//! **Your redis-rs.** `latchkey::redis` re-exports the redis-rs crate latchkey is built
//! on, so a critical section can use the same version. [`Client::from_redis_client`]
//! takes a `redis::Client` you configured (a private CA, a client certificate), and
//! [`Client::from_connection`] shares a `ConnectionManager` or `MultiplexedConnection`
//! you already have (it then has no subscriber connection of its own; see
//! [`store::RedisStore::with_subscriber`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use latchkey::redis::AsyncCommands;
//!
//! let redis = latchkey::redis::Client::open("redis://127.0.0.1:6379")?;
//! let mut conn = redis.get_connection_manager().await?;
//! let client = latchkey::Client::from_redis_client(redis).await?;
//! let guard = client.mutex("stock:sku-9")?.lock().await?;
//! let left: i64 = conn.decr("stock:sku-9:count", 1).await?;
//! guard.release().await?;
//! # Ok(()) }
//! ```
//!
//! **TLS and ACL.** `rediss://` URLs use TLS. An ACL user needs the rules in
//! [`ACL_RULES`], where `P` stands for the client's key prefix (the scripts run their
//! commands as the user, so each is listed).
//!
//! A user that may not subscribe still gets its locks; its waiters re-check on timers
//! instead of being woken.
//!
//! # Errors
//!
//! Every fallible call returns [`Error`], which says what happened and what the caller
//! can do about it. Errors never carry a password or a full owner token.
//!
//! | variant | when | what to do |
//! |---|---|---|
//! | [`Busy`](Error::Busy) | the lock stayed held for the whole wait (for `try_lock`: it was held) | try later; `retry_after` is the holder's remaining lease |
//! | [`LeaseLost`](Error::LeaseLost) | the lock is no longer ours: its lease ran out or it was broken | stop; the work since the loss was not protected |
//! | [`Unreachable`](Error::Unreachable) | no connection, or no reply within 1 s | transient: waiting calls retry it |
//! | [`AuthFailed`](Error::AuthFailed) | wrong user name or password | fix the URL |
//! | [`AclDenied`](Error::AclDenied) | the ACL user may not run a command or touch a key | grant the rules under [Interop](#interop) |
//! | [`WrongType`](Error::WrongType) | the key holds something that is not a lock | pick another name or prefix |
//! | [`ReadOnly`](Error::ReadOnly) | the server is a read-only replica | point latchkey at the primary |
//! | [`InvalidArgument`](Error::InvalidArgument) | a name, prefix, URL or duration was refused before anything was sent | fix the argument |
//! | [`Entropy`](Error::Entropy) | the OS random number generator failed | a system problem: no owner token can be drawn |
//! | [`Redis`](Error::Redis) | any other error reply | transient when the server is loading, failing over or not ready |
//! | [`NotRedis`](Error::NotRedis) | the address answered, but not in the Redis protocol | check the port |
//! | [`Tls`](Error::Tls) | the TLS handshake failed or the certificate is not trusted | check the port, or configure the CA |
//! | [`TooFewReplicas`](Error::TooFewReplicas) | fewer replicas than asked for confirmed a grant or renewal | transient: waiting calls retry it |
//! | [`NoQuorum`](Error::NoQuorum) | a quorum's majority did not grant (each master's answer listed) | transient unless enough masters refused authentication or ACL |
//! | [`Contended`](Error::Contended) | an optimistic transaction's keys changed under every attempt | transient: try later, or lock the hot spot |
//! | [`Runtime`](Error::Runtime) | the [`blocking`] API's runtime failed | see [`blocking`] |
//!
//! [`Error::is_transient`] says whether the same call may succeed later. Waiting calls
//! ([`Mutex::lock`], [`Mutex::lock_timeout`]) retry transient errors themselves while
//! their deadline allows, so they return one only when the deadline passes. What the
//! connection or server reported travels as an opaque [`Cause`] (the error's
//! `source()`), so latchkey's API does not change with redis-rs's. Each method's
//! `# Errors` section lists the variants it returns.
//!
//! ```no_run
//! # async fn demo(mutex: latchkey::Mutex) -> latchkey::Result<()> {
//! use latchkey::Error;
//!
//! match mutex.try_lock().await {
//!     Ok(guard) => { guard.release().await?; }
//!     Err(Error::Busy { .. }) => println!("someone else is on it"),
//!     Err(error) if error.is_transient() => println!("Redis is away, try again: {error}"),
//!     Err(error) => return Err(error), // a configuration problem: say so
//! }
//! # Ok(()) }
//! ```

#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// The redis-rs crate latchkey is built on, so a critical section can touch data
/// with the same version: `latchkey::redis::AsyncCommands`.
pub use redis;

pub mod blocking;
mod client;
pub mod election;
mod error;
pub mod inspect;
mod key;
pub mod latch;
mod lease;
mod lock;
pub mod metrics;
pub mod multilock;
pub mod quorum;
pub mod ratelimit;
mod rwlock;
mod scripts;
pub mod semaphore;
pub mod store;
mod token;
pub mod transaction;

pub use client::Client;
pub use error::{ACL_RULES, Cause, Error, Result};
pub use key::{Kind, LockKey, Prefix};
pub use lease::{Lease, Ttl};
pub use lock::{Fairness, Fencing, HoldToken, Mutex, MutexGuard, finish_background_releases};
pub use multilock::{MultiLock, MultiLockGuard};
pub use rwlock::{RwLock, UpgradeableRead};
pub use semaphore::{Semaphore, SemaphorePermit};
pub use store::LockStatus;
pub use token::OwnerToken;

// The README's Rust examples, compiled (and `no_run` ones type-checked) by
// `cargo test --doc`, so they cannot drift from the API.
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
