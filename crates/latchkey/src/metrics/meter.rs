//! Recording the metrics of [`super`]: one [`Meter`] per lock key, built where a
//! step happens from what is at hand there (the store says the deployment, the key
//! the primitive and, if its owner opted in, the name). Without the `metrics`
//! feature every method is empty and compiles away.

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
        ::metrics::gauge!("latchkey_held", self.labels(&[])).increment(units as f64);
    }

    /// A hold that began `held` ago ended (released, dropped or lost).
    pub(crate) fn ended(&self, units: u64, held: Duration) {
        #[cfg(feature = "metrics")]
        {
            ::metrics::gauge!("latchkey_held", self.labels(&[])).decrement(units as f64);
            ::metrics::histogram!("latchkey_hold_seconds", self.labels(&[]))
                .record(held.as_secs_f64());
        }
    }

    /// A release handed the lock straight to this waiter, `via` a local pass or Redis.
    pub(crate) fn handed_over(&self, via: &'static str) {
        self.count("latchkey_handoffs_total", &[("via", via)]);
    }

    /// A watchdog renewal came back (`ok`) or did not.
    pub(crate) fn renewed(&self, ok: bool) {
        let result = if ok { "ok" } else { "failed" };
        self.count("latchkey_renewals_total", &[("result", result)]);
    }

    /// The lease was lost under its holder.
    pub(crate) fn lease_lost(&self) {
        self.count("latchkey_leases_lost_total", &[]);
    }

    /// A release is tried again after a transient failure.
    pub(crate) fn release_retried(&self) {
        self.count("latchkey_release_retries_total", &[]);
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

    fn count(&self, name: &'static str, extra: &[(&'static str, &'static str)]) {
        #[cfg(feature = "metrics")]
        ::metrics::counter!(name, self.labels(extra)).increment(1);
    }

    /// `primitive`, `deployment`, then `extra`, and the name if its owner opted in.
    #[cfg(feature = "metrics")]
    fn labels(&self, extra: &[(&'static str, &'static str)]) -> Vec<::metrics::Label> {
        let fixed = [
            ("primitive", self.key.kind().label()),
            ("deployment", self.deployment),
        ];
        let mut labels: Vec<::metrics::Label> = fixed
            .iter()
            .chain(extra)
            .map(|&(key, value)| ::metrics::Label::from_static_parts(key, value))
            .collect();
        labels.extend(self.name_label());
        labels
    }

    #[cfg(feature = "metrics")]
    fn name_label(&self) -> Option<::metrics::Label> {
        self.key
            .named_metrics()
            .then(|| ::metrics::Label::new("name", self.key.name().to_owned()))
    }
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
    /// A call that may wait until `deadline` (`None`: for ever).
    pub(crate) fn start(meter: Meter<'a>, deadline: Option<Instant>) -> Self {
        let started = Instant::now();
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
            let labels = self.meter.labels(&[("outcome", outcome)]);
            ::metrics::histogram!("latchkey_wait_seconds", labels.clone())
                .record(waited.as_secs_f64());
            ::metrics::counter!("latchkey_acquisitions_total", labels).increment(1);
        }
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
