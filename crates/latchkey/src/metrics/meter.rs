//! Recording the metrics of [`super`]: one [`Meter`] per lock key, built where a
//! step happens from what is at hand there (the store says the deployment, the key
//! the primitive and, if its owner opted in, the name). Without the `metrics`
//! feature every method is empty and compiles away.

#[cfg(feature = "metrics")]
use std::borrow::Cow;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::key::LockKey;

/// The labels of one lock's metrics.
#[derive(Clone, Copy)]
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) struct Meter<'a> {
    deployment: &'static str,
    key: &'a LockKey,
}

#[cfg_attr(not(feature = "metrics"), allow(unused_variables, dead_code))]
impl<'a> Meter<'a> {
    /// The metrics of `key`, on a store of `deployment` ([`LockStore::deployment`](crate::store::LockStore::deployment)).
    pub(crate) fn new(deployment: &'static str, key: &'a LockKey) -> Self {
        Meter { deployment, key }
    }

    /// A hold began: it counts in `latchkey_held` until [`ended`](Self::ended).
    pub(crate) fn began(&self, units: u64) {
        #[cfg(feature = "metrics")]
        self.gauge("latchkey_held").increment(units as f64);
    }

    /// A hold that began `held` ago ended (released, dropped or lost).
    pub(crate) fn ended(&self, units: u64, held: Duration) {
        #[cfg(feature = "metrics")]
        {
            self.gauge("latchkey_held").decrement(units as f64);
            self.histogram("latchkey_hold_seconds", None)
                .record(held.as_secs_f64());
        }
    }

    /// A release handed the lock straight to this waiter, `via` a local pass or Redis.
    pub(crate) fn handed_over(&self, via: &'static str) {
        self.count("latchkey_handoffs_total", Some(("via", via)));
    }

    /// A watchdog renewal came back (`ok`) or did not.
    pub(crate) fn renewed(&self, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        self.count("latchkey_renewals_total", Some(("result", result)));
    }

    /// The lease was lost under its holder.
    pub(crate) fn lease_lost(&self) {
        self.count("latchkey_leases_lost_total", None);
    }

    /// A release is tried again after a transient failure.
    pub(crate) fn release_retried(&self) {
        self.count("latchkey_release_retries_total", None);
    }

    /// A rate limiter's decision under `policy` (its name and algorithm).
    pub(crate) fn decided(&self, policy: &crate::ratelimit::Policy, allowed: bool) {
        #[cfg(feature = "metrics")]
        {
            let decision = if allowed { "allowed" } else { "denied" };
            let mut labels = vec![
                ::metrics::Label::new("policy", policy.shared_name()),
                ::metrics::Label::from_static_parts("algorithm", policy.algorithm().label()),
                ::metrics::Label::from_static_parts("deployment", self.deployment),
                ::metrics::Label::from_static_parts("decision", decision),
            ];
            labels.extend(self.name_label());
            ::metrics::counter!("latchkey_ratelimit_decisions_total", labels).increment(1);
        }
    }

    fn count(&self, name: &'static str, extra: Option<Extra>) {
        #[cfg(feature = "metrics")]
        {
            let key = self.key(name, extra);
            ::metrics::with_recorder(|r| r.register_counter(&key, &METADATA)).increment(1);
        }
    }

    #[cfg(feature = "metrics")]
    fn gauge(&self, name: &'static str) -> ::metrics::Gauge {
        let key = self.key(name, None);
        ::metrics::with_recorder(|r| r.register_gauge(&key, &METADATA))
    }

    #[cfg(feature = "metrics")]
    fn histogram(&self, name: &'static str, extra: Option<Extra>) -> ::metrics::Histogram {
        let key = self.key(name, extra);
        ::metrics::with_recorder(|r| r.register_histogram(&key, &METADATA))
    }

    /// The metric `name` with the labels `primitive`, `deployment`, then `extra`,
    /// and the name if its owner opted in. Without the name, every part is a
    /// `'static` string, and the key is made once per process ([`static_key`]).
    #[cfg(feature = "metrics")]
    fn key(&self, name: &'static str, extra: Option<Extra>) -> Cow<'static, ::metrics::Key> {
        let parts = StaticKey {
            name,
            primitive: self.key.kind().label(),
            deployment: self.deployment,
            extra,
        };
        let named = self.name_label();
        if named.is_none()
            && let Some(key) = recent_key(parts)
        {
            return Cow::Borrowed(key);
        }
        let mut labels = parts.labels();
        labels.extend(named);
        Cow::Owned(::metrics::Key::from_parts(name, labels))
    }

    #[cfg(feature = "metrics")]
    fn name_label(&self) -> Option<::metrics::Label> {
        self.key
            .named_metrics()
            .then(|| ::metrics::Label::new("name", self.key.name().to_owned()))
    }
}

/// A label beyond `primitive` and `deployment`: its key and value.
type Extra = (&'static str, &'static str);

/// Where latchkey's metrics say they come from (what `metrics::counter!` and its
/// kin would record).
#[cfg(feature = "metrics")]
static METADATA: ::metrics::Metadata<'static> =
    ::metrics::Metadata::new(module_path!(), ::metrics::Level::INFO, Some(module_path!()));

/// A metric whose owner did not opt in to its name: its name and labels, all
/// `'static` strings.
#[cfg(feature = "metrics")]
#[derive(Clone, Copy)]
struct StaticKey {
    name: &'static str,
    primitive: &'static str,
    deployment: &'static str,
    extra: Option<Extra>,
}

/// Told apart by where their strings are, not by what they say: every one is a
/// `'static` literal, so the same key comes with the same addresses each time, and
/// comparing and hashing addresses costs a fraction of reading the text (two equal
/// texts at two addresses only make two entries of the same key).
#[cfg(feature = "metrics")]
impl StaticKey {
    fn addresses(&self) -> [(usize, usize); 5] {
        let at = |text: &'static str| (text.as_ptr() as usize, text.len());
        let (key, value) = self.extra.unwrap_or(("", ""));
        let parts = [self.name, self.primitive, self.deployment, key, value];
        parts.map(at)
    }

    fn labels(self) -> Vec<::metrics::Label> {
        let fixed = [
            ("primitive", self.primitive),
            ("deployment", self.deployment),
        ];
        fixed
            .into_iter()
            .chain(self.extra)
            .map(|(key, value)| ::metrics::Label::from_static_parts(key, value))
            .collect()
    }
}

#[cfg(feature = "metrics")]
impl PartialEq for StaticKey {
    fn eq(&self, other: &Self) -> bool {
        // Address and length, as `addresses` says.
        let same = |a: &'static str, b: &'static str| std::ptr::eq(a, b);
        let same_extra = match (self.extra, other.extra) {
            (Some((k, v)), Some((l, w))) => same(k, l) && same(v, w),
            (None, None) => true,
            _ => false,
        };
        same_extra
            && same(self.name, other.name)
            && same(self.primitive, other.primitive)
            && same(self.deployment, other.deployment)
    }
}

#[cfg(feature = "metrics")]
impl Eq for StaticKey {}

#[cfg(feature = "metrics")]
impl std::hash::Hash for StaticKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.addresses().hash(state);
    }
}

/// At most this many keys are kept: names, primitives, deployments and outcomes
/// make a few hundred at most; a store that made up deployment names as it went
/// would get its keys built on every record past it, not an ever-growing table.
#[cfg(feature = "metrics")]
const STATIC_KEYS: usize = 1024;

/// `parts`' key, made once per process and kept. A key was made on every record
/// (a vector of labels, and a hash of them all), even with no recorder installed,
/// which the `metrics` facade gives no way to tell: 5 % of an uncontended lock
/// cycle's client instructions (callgrind). `None` when the table is full.
#[cfg(feature = "metrics")]
fn static_key(parts: StaticKey) -> Option<&'static ::metrics::Key> {
    use std::collections::HashMap;
    use std::sync::{LazyLock, RwLock};
    type Table = HashMap<StaticKey, &'static ::metrics::Key, foldhash::fast::RandomState>;
    static KEYS: LazyLock<RwLock<Table>> = LazyLock::new(Default::default);
    let known = KEYS.read().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(key) = known.get(&parts) {
        return Some(key);
    }
    drop(known);
    let mut keys = KEYS
        .write()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if keys.len() >= STATIC_KEYS {
        return None;
    }
    Some(keys.entry(parts).or_insert_with(|| {
        let labels = Box::leak(parts.labels().into_boxed_slice());
        Box::leak(Box::new(::metrics::Key::from_static_parts(
            parts.name, labels,
        )))
    }))
}

/// How many keys each thread keeps at hand (see [`recent_key`]).
#[cfg(feature = "metrics")]
const RECENT_KEYS: usize = 16;

/// [`static_key`], looked up first among the keys this thread used last, in a small
/// table of its own found by the strings' addresses: the shared table's lock and
/// hash cost a lock cycle 4 % of its client instructions (five records a cycle,
/// callgrind). A slot holds the last key that fell in it.
#[cfg(feature = "metrics")]
fn recent_key(parts: StaticKey) -> Option<&'static ::metrics::Key> {
    use std::cell::Cell;
    type Slot = Cell<Option<(StaticKey, &'static ::metrics::Key)>>;
    thread_local! {
        static RECENT: [Slot; RECENT_KEYS] = const { [const { Cell::new(None) }; RECENT_KEYS] };
    }
    // Fibonacci hashing: the top bits of the product, where every address bit counts.
    const { assert!(RECENT_KEYS.is_power_of_two()) };
    let mixed = parts.addresses().iter().fold(0u64, |sum, &(at, _)| {
        (sum ^ at as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
    });
    let slot = (mixed >> (u64::BITS - RECENT_KEYS.trailing_zeros())) as usize;
    RECENT.with(|recent| {
        if let Some((known, key)) = recent[slot].get()
            && known == parts
        {
            return Some(key);
        }
        let key = static_key(parts)?;
        recent[slot].set(Some((parts, key)));
        Some(key)
    })
}

/// One call that takes a lock or permits, from its start to its outcome: records
/// `latchkey_acquisitions_total` and `latchkey_wait_seconds` once, when
/// [`ended`](Self::ended), or as `cancelled` if dropped before; and its
/// `latchkey.wait` span (debug level) says the same.
#[cfg_attr(not(feature = "metrics"), allow(dead_code))]
pub(crate) struct Acquisition<'a> {
    meter: Meter<'a>,
    started: Instant,
    /// A try (no wait at all): a busy lock is `busy`, not `timed_out`.
    once: bool,
    done: bool,
    span: tracing::Span,
}

#[cfg_attr(not(feature = "metrics"), allow(unused_variables, dead_code))]
impl<'a> Acquisition<'a> {
    /// A call made at `started` that may wait until `deadline` (`None`: for ever).
    pub(crate) fn start(meter: Meter<'a>, started: Instant, deadline: Option<Instant>) -> Self {
        let span = tracing::debug_span!(
            "latchkey.wait",
            lock = meter.key.name(),
            primitive = meter.key.kind().label(),
            outcome = tracing::field::Empty,
            waited_ms = tracing::field::Empty,
            holder = tracing::field::Empty,
        );
        Acquisition {
            meter,
            started,
            once: deadline.is_some_and(|deadline| deadline <= started),
            done: false,
            span,
        }
    }

    /// The span the wait runs in.
    pub(crate) fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// The call ended with `result`; returns it.
    pub(crate) fn ended<T>(self, result: Result<T>) -> Result<T> {
        match &result {
            Ok(_) => self.granted(),
            Err(error) => self.failed(error),
        }
        result
    }

    /// The call got what it asked for.
    pub(crate) fn granted(mut self) {
        self.finish("granted");
    }

    /// The call ended with `error`.
    pub(crate) fn failed(mut self, error: &Error) {
        let outcome = match error {
            Error::Busy { .. } if self.once => "busy",
            Error::Busy { .. } => "timed_out",
            error => error.label(),
        };
        if let Error::Busy {
            holder: Some(holder),
            ..
        } = error
        {
            // Masked already: its first 4 characters.
            self.span.record("holder", holder.as_str());
        }
        self.finish(outcome);
    }

    fn finish(&mut self, outcome: &'static str) {
        self.done = true;
        self.record(outcome);
    }

    fn record(&self, outcome: &'static str) {
        let waited = self.started.elapsed();
        self.span.record("outcome", outcome);
        self.span.record("waited_ms", waited.as_millis() as u64);
        #[cfg(feature = "metrics")]
        {
            self.meter
                .histogram("latchkey_wait_seconds", Some(("outcome", outcome)))
                .record(waited.as_secs_f64());
        }
        self.meter
            .count("latchkey_acquisitions_total", Some(("outcome", outcome)));
    }
}

impl Drop for Acquisition<'_> {
    fn drop(&mut self) {
        if !self.done {
            self.record("cancelled");
        }
    }
}

/// An optimistic transaction's attempt ended: `committed`, `conflict` or `error`.
#[cfg_attr(not(feature = "metrics"), allow(unused_variables))]
pub(crate) fn transaction_attempt(deployment: &'static str, result: &'static str) {
    #[cfg(feature = "metrics")]
    ::metrics::counter!(
        "latchkey_transaction_attempts_total",
        "deployment" => deployment,
        "result" => result
    )
    .increment(1);
}

/// Help text and units for the exporter (see [`super::describe`]).
#[cfg(feature = "metrics")]
pub(super) fn describe() {
    use ::metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        "latchkey_acquisitions_total",
        "Calls that take a lock or permits, by outcome"
    );
    describe_histogram!(
        "latchkey_wait_seconds",
        Unit::Seconds,
        "How long calls that take a lock or permits took, by outcome"
    );
    describe_histogram!(
        "latchkey_hold_seconds",
        Unit::Seconds,
        "How long holds lasted, from the grant to the release"
    );
    describe_gauge!(
        "latchkey_held",
        "Locks (1 each) and permits (the weight) this process holds"
    );
    describe_counter!(
        "latchkey_handoffs_total",
        "Grants a release handed straight to a waiter"
    );
    describe_counter!(
        "latchkey_renewals_total",
        "Lease renewals by the watchdog, by result"
    );
    describe_counter!(
        "latchkey_leases_lost_total",
        "Leases lost under their holder"
    );
    describe_counter!(
        "latchkey_release_retries_total",
        "Releases tried again after a transient failure"
    );
    describe_counter!(
        "latchkey_ratelimit_decisions_total",
        "Rate-limit decisions by policy and decision"
    );
    describe_counter!(
        "latchkey_transaction_attempts_total",
        "Optimistic transaction attempts, by result"
    );
}

#[cfg(all(test, feature = "metrics"))]
mod tests {
    use super::*;

    /// More keys than a thread keeps at hand, asked for in turns: each answer is
    /// the key asked for, whichever slot it fell in and whatever it displaced.
    #[test]
    fn every_key_asked_for_is_the_one_given() {
        const NAMES: [&str; 3] = ["latchkey_a", "latchkey_b", "latchkey_c"];
        const OUTCOMES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];
        let mut asked = Vec::new();
        for name in NAMES {
            asked.push(StaticKey {
                name,
                primitive: "lock",
                deployment: "single",
                extra: None,
            });
            for outcome in OUTCOMES {
                asked.push(StaticKey {
                    name,
                    primitive: "semaphore",
                    deployment: "cluster",
                    extra: Some(("outcome", outcome)),
                });
            }
        }
        assert!(asked.len() > RECENT_KEYS);
        // No extra label is not an empty one: they are two keys.
        let bare = StaticKey {
            extra: None,
            ..asked[0]
        };
        assert!(bare == asked[0]);
        assert!(
            bare != StaticKey {
                extra: Some(("", "")),
                ..bare
            }
        );
        for _ in 0..3 {
            for parts in &asked {
                let key = recent_key(*parts).expect("the table has room");
                assert_eq!(key.name(), parts.name);
                let labels: Vec<_> = key.labels().map(|l| (l.key(), l.value())).collect();
                let mut expected = vec![
                    ("primitive", parts.primitive),
                    ("deployment", parts.deployment),
                ];
                expected.extend(parts.extra);
                assert_eq!(labels, expected);
            }
        }
    }
}
