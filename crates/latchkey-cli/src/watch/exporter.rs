//! `latchkey exporter`: the deployment's state as Prometheus metrics, served over
//! HTTP (hyper) in the style of redis_exporter: every scrape of `/metrics` runs
//! one bounded refresh of the survey and reports what it knows.
//!
//! The metrics are `latchkey_state_*` (what Redis holds now) and
//! `latchkey_exporter_*` (what the scrape cost); the library's own metrics
//! (`latchkey_acquisitions_total` …) are the clients' view and come from their
//! processes. The README's table lists every one.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use latchkey::Kind;
use latchkey::inspect::Refreshed;
use tokio::net::{TcpListener, TcpStream};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::{Mutex, OwnedSemaphorePermit, Semaphore};

use super::{AnySurvey, Row, kind_label};
use crate::cli::{ExporterArgs, Global, WatchArgs};
use crate::exit::Failure;

const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The survey, and what the scrapes so far add up to.
struct Exporter {
    survey: Mutex<Scrapes>,
    max_names: usize,
    /// How to reach the deployment, for a survey not made yet.
    global: Global,
    watch: WatchArgs,
}

struct Scrapes {
    /// `None` until the deployment could be reached: the exporter serves
    /// `latchkey_state_up 0` meanwhile, as redis_exporter does, instead of
    /// refusing to start (a service manager starting Redis and the exporter
    /// together would see it crash in a loop).
    survey: Option<AnySurvey>,
    /// The `deployment` label: the survey's, or until there is one, what the
    /// options say.
    deployment: &'static str,
    walks_completed: u64,
    /// Why the last scrape could not read the deployment, if it could not: told
    /// on stderr when it changes, so that `latchkey_state_up 0` is explained
    /// without `-v`.
    failing: Option<String>,
}

impl Scrapes {
    /// One bounded refresh; first the survey, if the deployment could not be
    /// reached before.
    async fn refresh(&mut self, global: &Global, watch: &WatchArgs) -> Result<Refreshed, String> {
        let survey = match &mut self.survey {
            Some(survey) => survey,
            None => {
                let connected = AnySurvey::connect(global, watch).await;
                let (survey, _) = connected.map_err(|failure| failure.message().to_owned())?;
                self.deployment = survey.deployment();
                self.survey.insert(survey)
            }
        };
        let refreshed = survey.refresh().await.map_err(|e| e.to_string())?;
        if refreshed.walk_completed {
            self.walks_completed += 1;
        }
        Ok(refreshed)
    }

    /// Says on stderr why the deployment cannot be read, when that changes, and
    /// when it can be read again.
    fn tell(&mut self, failing: Option<&String>) {
        if failing == self.failing.as_ref() {
            return;
        }
        match failing {
            Some(error) => crate::output::errln!(
                "latchkey exporter: cannot read the deployment (latchkey_state_up 0): {error}"
            ),
            None => crate::output::errln!(
                "latchkey exporter: reading the deployment again (latchkey_state_up 1)"
            ),
        }
        self.failing = failing.cloned();
    }
}

/// What one scrape found: the rows, or why the refresh failed.
struct Scrape {
    deployment: &'static str,
    refreshed: Result<Refreshed, String>,
    took: Duration,
    rows: Vec<Row>,
    walks_completed: u64,
}

/// `latchkey exporter --listen ADDR`.
pub async fn serve(global: &Global, args: ExporterArgs) -> Result<u8, Failure> {
    let (survey, node) = match AnySurvey::connect(global, &args.watch).await {
        Ok((survey, node)) => (Some(survey), node),
        // Down, or failing over: reached on a later scrape.
        Err(failure) if failure.is_transient() => (None, failure.message().to_owned()),
        Err(failure) => return Err(failure),
    };
    // Before the deployment could be reached, what the options say it is.
    let deployment = match &survey {
        Some(survey) => survey.deployment(),
        None => crate::connect::deployment(global)?.label(),
    };
    let listener = TcpListener::bind(args.listen)
        .await
        .map_err(|e| Failure::unavailable(format!("cannot listen on {}: {e}", args.listen)))?;
    let at = listener
        .local_addr()
        .map_err(|e| Failure::software(format!("cannot read the listening address: {e}")))?;
    if !global.quiet {
        match survey {
            Some(_) => crate::output::errln!(
                "latchkey exporter: http://{at}/metrics for {deployment} {node}"
            ),
            None => crate::output::errln!(
                "latchkey exporter: http://{at}/metrics (latchkey_state_up 0 until the deployment can be reached: {node})"
            ),
        }
    }
    let failing = survey.is_none().then_some(node);
    let exporter = Arc::new(Exporter {
        survey: Mutex::new(Scrapes {
            survey,
            deployment,
            walks_completed: 0,
            failing,
        }),
        max_names: args.max_names,
        global: global.clone(),
        watch: args.watch,
    });
    let mut stop = signal(SignalKind::terminate())
        .map_err(|e| Failure::software(format!("cannot listen for signals: {e}")))?;
    let connections = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // A client that went away before we accepted it, or no file
                // descriptor left (EMFILE): a pause, not a loop at full speed, until
                // connections end.
                Err(error) => {
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => return Ok(0),
            _ = stop.recv() => return Ok(0),
        };
        // Beyond the limit, closed at once: idle clients cannot crowd scrapers out
        // for longer than the timeouts below.
        let Ok(permit) = Arc::clone(&connections).try_acquire_owned() else {
            tracing::debug!("too many connections: one closed");
            continue;
        };
        tokio::spawn(Arc::clone(&exporter).serve_one(stream, permit));
    }
}

/// Connections served at once; more are closed as they come.
const MAX_CONNECTIONS: usize = 64;

/// How long a client may take to send a request's headers (an idle keep-alive
/// connection included), and how long one connection may last in all.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECTION_LIMIT: Duration = Duration::from_secs(300);

/// The pause after a failed accept.
const ACCEPT_PAUSE: Duration = Duration::from_millis(100);

impl Exporter {
    /// Serves one connection, within [`HEADER_TIMEOUT`] and [`CONNECTION_LIMIT`].
    async fn serve_one(self: Arc<Self>, stream: TcpStream, _permit: OwnedSemaphorePermit) {
        let service = hyper::service::service_fn(move |request| {
            let exporter = Arc::clone(&self);
            async move { Ok::<_, Infallible>(exporter.answer(&request).await) }
        });
        let served = hyper::server::conn::http1::Builder::new()
            .timer(TokioTimer::new())
            .header_read_timeout(HEADER_TIMEOUT)
            .serve_connection(TokioIo::new(stream), service);
        match tokio::time::timeout(CONNECTION_LIMIT, served).await {
            Ok(Err(error)) => tracing::debug!(%error, "connection ended"),
            Err(_) => tracing::debug!("connection open too long: closed"),
            Ok(Ok(())) => {}
        }
    }

    async fn answer(self: &Arc<Self>, request: &Request<Incoming>) -> Response<Full<Bytes>> {
        if request.method() != Method::GET && request.method() != Method::HEAD {
            let mut refused = reply(
                StatusCode::METHOD_NOT_ALLOWED,
                "text/plain",
                "GET /metrics\n".to_owned(),
            );
            refused.headers_mut().insert(
                hyper::header::ALLOW,
                hyper::header::HeaderValue::from_static("GET, HEAD"),
            );
            return refused;
        }
        match request.uri().path() {
            "/metrics" => {
                // In a task of its own: a scraper that gives up mid-refresh (its
                // timeout) must not cut the walk short for the next scrape.
                let exporter = Arc::clone(self);
                let scrape = tokio::spawn(async move { exporter.scrape().await }).await;
                match scrape {
                    Ok(scrape) => reply(StatusCode::OK, CONTENT_TYPE, self.render(&scrape)),
                    Err(_) => reply(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        "text/plain",
                        "the refresh failed\n".to_owned(),
                    ),
                }
            }
            "/" => reply(
                StatusCode::OK,
                "text/html",
                "<html><body><h1>latchkey exporter</h1><a href=\"/metrics\">/metrics</a></body></html>\n"
                    .to_owned(),
            ),
            _ => reply(StatusCode::NOT_FOUND, "text/plain", "not found: try /metrics\n".to_owned()),
        }
    }

    /// One bounded refresh; scrapes that come together take turns.
    async fn scrape(&self) -> Scrape {
        let mut scrapes = self.survey.lock().await;
        let started = Instant::now();
        let refreshed = scrapes.refresh(&self.global, &self.watch).await;
        scrapes.tell(refreshed.as_ref().err());
        Scrape {
            deployment: scrapes.deployment,
            took: started.elapsed(),
            rows: scrapes
                .survey
                .as_ref()
                .map_or_else(Vec::new, AnySurvey::rows),
            refreshed,
            walks_completed: scrapes.walks_completed,
        }
    }

    /// The text exposition of `scrape`.
    fn render(&self, scrape: &Scrape) -> String {
        let mut out = Text::new(scrape.deployment);
        let up = scrape.refreshed.is_ok();
        out.gauge(
            "latchkey_state_up",
            "Whether this scrape read the deployment (0: the exporter says why on stderr).",
            &[],
            u64::from(up),
        );
        if up {
            self.totals(&mut out, &scrape.rows);
            self.per_name(&mut out, &scrape.rows);
        }
        let done = scrape.refreshed.as_ref().ok().copied().unwrap_or_default();
        out.gauge(
            "latchkey_exporter_scans",
            "SCAN calls this scrape sent (one per server).",
            &[],
            done.scans as u64,
        );
        out.gauge(
            "latchkey_exporter_keys_walked",
            "Keys this scrape's SCAN calls returned.",
            &[],
            done.keys_walked as u64,
        );
        out.gauge(
            "latchkey_exporter_names_read",
            "Names whose state this scrape read (one script call each).",
            &[],
            done.names_read as u64,
        );
        out.gauge(
            "latchkey_exporter_names_to_read",
            "Names found and left for later scrapes (over --reads).",
            &[],
            done.names_waiting as u64,
        );
        out.counter(
            "latchkey_exporter_walks_completed_total",
            "Times the walk over the keyspace came round to its start.",
            scrape.walks_completed,
        );
        out.seconds(
            "latchkey_exporter_scrape_seconds",
            "How long this scrape's refresh took.",
            &[],
            scrape.took,
        );
        out.text
    }

    /// Counts over every row, whatever --max-names lets through.
    fn totals(&self, out: &mut Text, rows: &[Row]) {
        let held_locks = rows
            .iter()
            .filter(|r| r.kind == Kind::Lock && r.is_held())
            .count();
        out.gauge(
            "latchkey_state_locks_held",
            "Locks held now.",
            &[],
            held_locks as u64,
        );
        let oldest = super::oldest_hold(rows);
        out.seconds(
            "latchkey_state_oldest_hold_seconds",
            "The oldest hold of a lock, semaphore or read-write lock, as long as this exporter has seen it (a lower bound); not a leadership, which is meant to last.",
            &[],
            oldest.unwrap_or_default(),
        );
        let header = out.header(
            "latchkey_state_in_use",
            "gauge",
            "Names in use, by kind (held, waited for, or rate-limit state).",
        );
        for kind in [
            Kind::Lock,
            Kind::Semaphore,
            Kind::RwLock,
            Kind::RateLimit,
            Kind::Election,
            Kind::Latch,
        ] {
            let count = rows.iter().filter(|r| r.kind == kind).count();
            out.sample(header, &[("kind", kind_label(kind))], count as f64);
        }
        let header = out.header(
            "latchkey_state_waiters",
            "gauge",
            "Callers waiting in line, by kind.",
        );
        for kind in [Kind::Lock, Kind::Semaphore, Kind::RwLock] {
            let waiting: u64 = rows
                .iter()
                .filter(|r| r.kind == kind)
                .map(|r| r.waiters)
                .sum();
            out.sample(header, &[("kind", kind_label(kind))], waiting as f64);
        }
        let header = out.header(
            "latchkey_state_ratelimit_keys",
            "gauge",
            "Rate limits with state (a key), by algorithm.",
        );
        let mut algorithms: Vec<&str> =
            rows.iter().filter_map(|r| r.algorithm.as_deref()).collect();
        algorithms.sort_unstable();
        for algorithm in dedup_counts(&algorithms) {
            out.sample(header, &[("algorithm", algorithm.0)], algorithm.1 as f64);
        }
    }

    /// A series per name for the `--max-names` names that matter most: the longest
    /// lines, then the oldest holds.
    fn per_name(&self, out: &mut Text, rows: &[Row]) {
        // Holds and lines: not a rate limit's count, nor a latch's.
        let mut named: Vec<&Row> = rows
            .iter()
            .filter(|r| !matches!(r.kind, Kind::RateLimit | Kind::Latch))
            .collect();
        named.sort_by(|a, b| {
            b.waiters
                .cmp(&a.waiters)
                .then(b.held_for.cmp(&a.held_for))
                .then(a.name.cmp(&b.name))
        });
        let omitted = named.len().saturating_sub(self.max_names);
        named.truncate(self.max_names);
        out.gauge(
            "latchkey_exporter_names_omitted",
            "Names in use left out of the per-name series (over --max-names).",
            &[],
            omitted as u64,
        );
        let labels = |r: &Row| {
            [
                ("name", r.name.clone()),
                ("kind", kind_label(r.kind).to_owned()),
            ]
        };
        let header = out.header(
            "latchkey_state_held",
            "gauge",
            "Whether the name is held now (a lock's holder, a permit out).",
        );
        for row in &named {
            out.sample_owned(header, &labels(row), f64::from(u8::from(row.is_held())));
        }
        let header = out.header("latchkey_state_hold_age_seconds", "gauge", "How long this exporter has seen the name held as it is (a lower bound of the hold's age).");
        for row in named.iter().filter(|r| r.is_held()) {
            out.sample_owned(header, &labels(row), row.held_for.as_secs_f64());
        }
        let header = out.header(
            "latchkey_state_lease_left_seconds",
            "gauge",
            "What is left of the lease (a lock's, or the soonest permit's).",
        );
        for row in &named {
            if let Some(left) = row.left {
                out.sample_owned(header, &labels(row), left.as_secs_f64());
            }
        }
        let header = out.header(
            "latchkey_state_name_waiters",
            "gauge",
            "Callers waiting in line for the name.",
        );
        for row in &named {
            out.sample_owned(header, &labels(row), row.waiters as f64);
        }
        let header = out.header(
            "latchkey_state_permits_used",
            "gauge",
            "Permits held (a read-write lock: readers, or 1 for its writer).",
        );
        for row in &named {
            if let Some((used, _)) = row.permits {
                out.sample_owned(header, &labels(row), used as f64);
            }
        }
        let header = out.header(
            "latchkey_state_permits",
            "gauge",
            "A semaphore's permits in all.",
        );
        for row in &named {
            if let Some((_, Some(all))) = row.permits {
                out.sample_owned(header, &labels(row), all as f64);
            }
        }
    }
}

/// Each distinct value of sorted `values` and how often it comes.
fn dedup_counts<'a>(values: &[&'a str]) -> Vec<(&'a str, usize)> {
    let mut counts: Vec<(&str, usize)> = Vec::new();
    for value in values {
        match counts.last_mut() {
            Some((last, count)) if last == value => *count += 1,
            _ => counts.push((value, 1)),
        }
    }
    counts
}

fn reply(status: StatusCode, content_type: &str, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    if let Ok(value) = content_type.parse() {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    response
}

/// Prometheus's text exposition format, every sample labelled with the deployment.
struct Text {
    text: String,
    deployment: &'static str,
}

impl Text {
    fn new(deployment: &'static str) -> Self {
        Text {
            text: String::new(),
            deployment,
        }
    }

    /// Writes `# HELP` and `# TYPE`; returns the name, for the samples that follow.
    fn header<'n>(&mut self, name: &'n str, kind: &str, help: &str) -> &'n str {
        let _ = writeln!(self.text, "# HELP {name} {help}");
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
        name
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        let _ = write!(self.text, "{name}{{deployment=\"{}\"", self.deployment);
        for (label, value) in labels {
            let _ = write!(self.text, ",{label}=\"{}\"", escape(value));
        }
        let _ = writeln!(self.text, "}} {value}");
    }

    fn sample_owned(&mut self, name: &str, labels: &[(&str, String)], value: f64) {
        let labels: Vec<(&str, &str)> = labels.iter().map(|(l, v)| (*l, v.as_str())).collect();
        self.sample(name, &labels, value);
    }

    fn gauge(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: u64) {
        let name = self.header(name, "gauge", help);
        self.sample(name, labels, value as f64);
    }

    fn seconds(&mut self, name: &str, help: &str, labels: &[(&str, &str)], value: Duration) {
        let name = self.header(name, "gauge", help);
        self.sample(name, labels, value.as_secs_f64());
    }

    fn counter(&mut self, name: &str, help: &str, value: u64) {
        let name = self.header(name, "counter", help);
        self.sample(name, &[], value as f64);
    }
}

/// A label value as the text format wants it: `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape(r#"a"b\c"#), r#"a\"b\\c"#);
        assert_eq!(escape("line\nbreak"), "line\\nbreak");
        let mut text = Text::new("single");
        text.sample("m", &[("name", "x\"y")], 1.0);
        assert_eq!(text.text, "m{deployment=\"single\",name=\"x\\\"y\"} 1\n");
    }

    #[test]
    fn algorithms_are_counted_once_each() {
        assert_eq!(
            dedup_counts(&["fixed", "fixed", "gcra"]),
            vec![("fixed", 2), ("gcra", 1)]
        );
    }
}
