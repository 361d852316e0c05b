//! `latchkey demo --metrics`: the library's own metrics (see `latchkey::metrics`),
//! recorded by a Prometheus exporter in this process while the scenario runs, and
//! shown after it as the panels of a dashboard over that scrape would show them:
//! acquisitions by outcome, waits and holds (p50, p99), lost leases, renewals that
//! failed, releases retried, handoffs.

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::exit::Failure;
use crate::output::outln;

/// The recorder the demo's metrics go to.
pub struct Dashboard {
    scrape: PrometheusHandle,
}

impl Dashboard {
    /// Installs the process's metrics recorder (once per process).
    pub fn install() -> Result<Self, Failure> {
        let scrape = PrometheusBuilder::new()
            .install_recorder()
            .map_err(|e| Failure::software(format!("cannot record metrics: {e}")))?;
        latchkey::metrics::describe();
        Ok(Dashboard { scrape })
    }

    /// Prints the panels, from one scrape.
    pub fn print(&self) {
        let samples = parse(&self.scrape.render());
        let panel = Panel { samples: &samples };
        outln!("\nmetrics (one Prometheus scrape of this process, as a dashboard shows it):");
        for primitive in panel.primitives() {
            let is = [("primitive", primitive.as_str())];
            let outcomes: Vec<String> = panel
                .values_of("latchkey_acquisitions_total", &is, "outcome")
                .into_iter()
                .map(|(outcome, n)| format!("{outcome} {n}"))
                .collect();
            outln!("  {primitive} acquisitions: {}", outcomes.join(", "));
            let granted = [("primitive", primitive.as_str()), ("outcome", "granted")];
            outln!(
                "  {primitive} waits (granted): {}",
                panel.quantiles("latchkey_wait_seconds", &granted)
            );
            outln!(
                "  {primitive} holds: {}",
                panel.quantiles("latchkey_hold_seconds", &is)
            );
        }
        outln!(
            "  leases lost {}, renewals failed {}, releases retried {}, handoffs {}",
            panel.sum("latchkey_leases_lost_total", &[]),
            panel.sum("latchkey_renewals_total", &[("result", "failed")]),
            panel.sum("latchkey_release_retries_total", &[]),
            panel.sum("latchkey_handoffs_total", &[]),
        );
        let decisions = panel.values_of("latchkey_ratelimit_decisions_total", &[], "decision");
        if !decisions.is_empty() {
            let decisions: Vec<String> =
                decisions.iter().map(|(d, n)| format!("{d} {n}")).collect();
            outln!("  rate-limit decisions: {}", decisions.join(", "));
        }
        let attempts = panel.values_of("latchkey_transaction_attempts_total", &[], "result");
        if !attempts.is_empty() {
            let attempts: Vec<String> = attempts.iter().map(|(r, n)| format!("{r} {n}")).collect();
            outln!("  transaction attempts: {}", attempts.join(", "));
        }
    }
}

/// One line of a scrape: a series and its value.
#[derive(Debug, PartialEq)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

impl Sample {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    fn is(&self, name: &str, labels: &[(&str, &str)]) -> bool {
        self.name == name && labels.iter().all(|&(k, v)| self.label(k) == Some(v))
    }
}

/// The samples of a Prometheus text scrape (comments skipped; label values hold no
/// `",` here: latchkey's are names and fixed words).
fn parse(scrape: &str) -> Vec<Sample> {
    scrape
        .lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            let labels = labels
                .split("\",")
                .filter(|pair| !pair.is_empty())
                .filter_map(|pair| {
                    let (key, value) = pair.split_once("=\"")?;
                    Some((key.to_owned(), value.trim_end_matches('"').to_owned()))
                })
                .collect();
            Some(Sample {
                name: name.to_owned(),
                labels,
                value: value.parse().ok()?,
            })
        })
        .collect()
}

/// Queries over one scrape, as a dashboard's panels make them.
struct Panel<'a> {
    samples: &'a [Sample],
}

impl Panel<'_> {
    /// The primitives anything was acquired of.
    fn primitives(&self) -> Vec<String> {
        let mut found: Vec<String> = self
            .samples
            .iter()
            .filter(|s| s.name == "latchkey_acquisitions_total")
            .filter_map(|s| s.label("primitive").map(str::to_owned))
            .collect();
        found.sort();
        found.dedup();
        found
    }

    /// The sum of `name` over the series with `labels`.
    fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        // A fold from +0: an empty `sum()` of floats is -0, printed "-0".
        self.samples
            .iter()
            .filter(|s| s.is(name, labels))
            .fold(0.0, |total, s| total + s.value)
    }

    /// `name` with `labels`, summed by the value of the label `by`.
    fn values_of(&self, name: &str, labels: &[(&str, &str)], by: &str) -> Vec<(String, f64)> {
        let mut values: Vec<(String, f64)> = Vec::new();
        for sample in self.samples.iter().filter(|s| s.is(name, labels)) {
            let Some(key) = sample.label(by) else {
                continue;
            };
            match values.iter_mut().find(|(k, _)| k == key) {
                Some((_, total)) => *total += sample.value,
                None => values.push((key.to_owned(), sample.value)),
            }
        }
        values
    }

    /// A summary's p50 and p99 in ms, and its count (the series with `labels`; the
    /// demo has one deployment, so one series).
    fn quantiles(&self, name: &str, labels: &[(&str, &str)]) -> String {
        let at = |q: &str| {
            let mut with = labels.to_vec();
            with.push(("quantile", q));
            self.samples
                .iter()
                .find(|s| s.is(name, &with))
                .map_or("-".to_owned(), |s| format!("{:.1} ms", s.value * 1000.0))
        };
        let count = self.sum(&format!("{name}_count"), labels);
        format!("p50 {}, p99 {} ({count} recorded)", at("0.5"), at("0.99"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_is_read_back_into_its_series() {
        let scrape = "# HELP x y\nlatchkey_wait_seconds{primitive=\"lock\",outcome=\"granted\",quantile=\"0.5\"} 0.25\nlatchkey_wait_seconds_count{primitive=\"lock\",outcome=\"granted\"} 4\nplain 2\n";
        let samples = parse(scrape);
        assert_eq!(samples.len(), 3);
        assert_eq!(samples[0].label("quantile"), Some("0.5"));
        assert_eq!(
            samples[2],
            Sample {
                name: "plain".into(),
                labels: vec![],
                value: 2.0
            }
        );
        let panel = Panel { samples: &samples };
        let lock = [("primitive", "lock"), ("outcome", "granted")];
        assert_eq!(
            panel.quantiles("latchkey_wait_seconds", &lock),
            "p50 250.0 ms, p99 - (4 recorded)"
        );
    }
}
