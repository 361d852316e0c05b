//! What latchkey counts, through the [`metrics`](https://docs.rs/metrics) facade.
//!
//! With the cargo feature `metrics` (on by default) every primitive records the
//! metrics below; the application picks where they go by installing an exporter
//! (`metrics-exporter-prometheus`, an OpenTelemetry bridge …), as for any crate that
//! uses the facade. With no exporter installed each recording is a call into the
//! facade's no-op recorder; `default-features = false` removes even that. Measured
//! per uncontended lock + release (callgrind, client side): about 4 000 more
//! instructions than without the feature with no recorder, 7 500 with a Prometheus
//! recorder (of about 48 000; a few µs against the round trips). The server does
//! nothing more.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! // Any exporter; this one renders the Prometheus text format on demand.
//! let prometheus = metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
//! latchkey::metrics::describe(); // HELP and unit lines for every latchkey metric
//! let client = latchkey::Client::open("redis://127.0.0.1:6379").await?;
//! client.mutex("orders:42")?.lock().await?.release().await?;
//! print!("{}", prometheus.render()); // latchkey_acquisitions_total{outcome="granted",…} 1
//! # Ok(()) }
//! ```
//!
//! # The metrics
//!
//! | name | type | labels | what |
//! |---|---|---|---|
//! | `latchkey_acquisitions_total` | counter | `primitive`, `deployment`, `outcome` | calls that take a lock or permits (`lock`, `try_lock`, `lock_timeout`, `acquire` …), by how they ended: `granted`, `busy` (a try found it held), `timed_out` (a wait's deadline passed), `cancelled` (the future was dropped), or the error's kind (`unreachable`, `acl_denied`, `wrong_type` …; see below) |
//! | `latchkey_wait_seconds` | histogram (s) | `primitive`, `deployment`, `outcome` | how long those calls took, from the call to its outcome |
//! | `latchkey_hold_seconds` | histogram (s) | `primitive`, `deployment` | how long a hold lasted, from the grant to its release (or the drop of its last guard) |
//! | `latchkey_held` | gauge | `primitive`, `deployment` | what this process holds now: 1 per lock and per read or write of a read-write lock, the weight per grant of a semaphore's permits |
//! | `latchkey_handoffs_total` | counter | `primitive`, `deployment`, `via` | grants a release handed straight to a waiter: `via="local"` (a task of this process, no round trip) or `via="redis"` (a waiter in the queue, no new attempt) |
//! | `latchkey_renewals_total` | counter | `primitive`, `deployment`, `result` | the watchdog's lease renewals: `result="ok"` or `"failed"` (an error or no answer, retried while the lease lasts; or the lock found no longer ours) |
//! | `latchkey_leases_lost_total` | counter | `primitive`, `deployment` | leases lost under their holder: a renewal found the lock no longer ours, or the lease ran out before Redis answered |
//! | `latchkey_release_retries_total` | counter | `primitive`, `deployment` | releases tried again after a transient failure (a reset connection, a reply that timed out) |
//! | `latchkey_ratelimit_decisions_total` | counter | `policy`, `algorithm`, `deployment`, `decision` | rate-limit calls that count (`check`, and each ask of `acquire`), by `policy` (its [name](crate::ratelimit::Policy::named), `default` unless named), `algorithm` (`cooldown`, `fixed_window`, `sliding_window`, `gcra`) and `decision` (`allowed`, `denied`) |
//! | `latchkey_transaction_attempts_total` | counter | `deployment`, `result` | optimistic transaction attempts: `committed`, `nothing_written` (the body wrote nothing), `conflict` (a watched key changed: tried again), `error` |
//!
//! Label values:
//!
//! - `primitive`: `lock` (a [`Mutex`](crate::Mutex), and the locks of a
//!   [`MultiLock`](crate::MultiLock) or an [election](crate::election)),
//!   `semaphore`, `rwlock`, `ratelimit`;
//! - `deployment`: `single` (one server, or a primary with replicas), `sentinel`,
//!   `cluster`, `quorum`, or `custom` for a store of your own;
//! - `outcome` for an error: `unreachable`, `too_few_replicas`, `no_quorum`,
//!   `auth_failed`, `acl_denied`, `wrong_type`, `read_only`, `not_redis`, `tls`,
//!   `redis`, `invalid_argument`, `entropy`, `other`.
//!
//! Lock names are not a label by default: their number is unbounded (a lock per order
//! or per user would make a time series each). A primitive whose names are few opts
//! in with `with_named_metrics()` ([`Mutex`](crate::Mutex::with_named_metrics),
//! [`Semaphore`](crate::Semaphore::with_named_metrics),
//! [`RwLock`](crate::RwLock::with_named_metrics),
//! [`RateLimiter`](crate::ratelimit::RateLimiter::with_named_metrics)), which adds a
//! `name` label (the name as made, prefix included) to its metrics.

mod meter;

pub(crate) use meter::{Acquisition, Meter, transaction_attempt};

/// Describes every latchkey metric to the installed recorder: its help text and
/// unit, which exporters print (`# HELP`, `# TYPE`). Call it once, after installing
/// the recorder; without one, or without the `metrics` feature, it does nothing.
///
/// ```no_run
/// # fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// metrics_exporter_prometheus::PrometheusBuilder::new().install_recorder()?;
/// latchkey::metrics::describe();
/// # Ok(()) }
/// ```
pub fn describe() {
    #[cfg(feature = "metrics")]
    meter::describe();
}
