//! `latchkey top`: a live terminal view of a deployment, in the habit of top(1).
//!
//! The screen is ratatui's (crossterm backend): raw mode and the alternate screen
//! while it runs, both given back on every way out (q, Ctrl-C, SIGTERM, SIGHUP, an
//! error, a panic). Keys are read on a thread of their own, and the survey is
//! refreshed every --interval in a task of its own (a key pressed mid-refresh
//! does not cut it short); the loop redraws on either.

use std::time::{Duration, Instant};

use latchkey::Kind;
use latchkey::inspect::Refreshed;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Modifier, Style, Stylize};
use ratatui::text::Line;
use ratatui::widgets::{Cell, Paragraph, Row as TableRow, Table};
use ratatui::{DefaultTerminal, Frame};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::{AnySurvey, Row, kind_label, short};
use crate::cli::{Global, TopArgs};
use crate::exit::Failure;

/// How the rows are ordered; `s` cycles through them in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sort {
    Age,
    Name,
    Waiters,
    Used,
    Left,
    Kind,
}

impl Sort {
    const ALL: [Sort; 6] = [
        Sort::Age,
        Sort::Name,
        Sort::Waiters,
        Sort::Used,
        Sort::Left,
        Sort::Kind,
    ];

    fn parse(text: &str) -> Sort {
        Sort::ALL
            .into_iter()
            .find(|sort| sort.name() == text)
            .unwrap_or(Sort::Age)
    }

    fn name(self) -> &'static str {
        match self {
            Sort::Age => "age",
            Sort::Name => "name",
            Sort::Waiters => "waiters",
            Sort::Used => "used",
            Sort::Left => "left",
            Sort::Kind => "kind",
        }
    }

    fn next(self) -> Sort {
        let at = Sort::ALL.iter().position(|s| *s == self).unwrap_or(0);
        Sort::ALL[(at + 1) % Sort::ALL.len()]
    }

    fn order(self, rows: &mut [Row]) {
        let by_name = |a: &Row, b: &Row| a.name.cmp(&b.name);
        match self {
            Sort::Age => rows.sort_by(|a, b| b.held_for.cmp(&a.held_for).then(by_name(a, b))),
            Sort::Name => rows.sort_by(by_name),
            Sort::Used => rows.sort_by(|a, b| b.load().cmp(&a.load()).then(by_name(a, b))),
            Sort::Waiters => rows.sort_by(|a, b| b.waiters.cmp(&a.waiters).then(by_name(a, b))),
            Sort::Left => rows.sort_by(|a, b| {
                let left = |r: &Row| r.left.unwrap_or(Duration::MAX);
                left(a).cmp(&left(b)).then(by_name(a, b))
            }),
            Sort::Kind => rows
                .sort_by(|a, b| (kind_label(a.kind), &a.name).cmp(&(kind_label(b.kind), &b.name))),
        }
    }
}

/// What the loop hears from the key reader.
enum Input {
    Key(KeyEvent),
    Resized,
}

/// What a key asks of the loop.
enum Action {
    Quit,
    Redraw,
}

/// Everything on the screen.
struct View {
    title: String,
    interval: Duration,
    rows: Vec<Row>,
    filter: String,
    /// Typing a filter (after `/`).
    editing: bool,
    sort: Sort,
    scroll: usize,
    last: Option<(Instant, Duration, Refreshed)>,
    error: Option<String>,
}

/// `latchkey top`.
pub async fn top(global: &Global, args: TopArgs) -> Result<u8, Failure> {
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return Err(Failure::usage(
            "latchkey top needs a terminal: for a script use `latchkey list` (once) or \
             `latchkey exporter` (Prometheus)"
                .to_owned(),
        ));
    }
    let (survey, node) = AnySurvey::connect(global, &args.watch).await?;
    let mut view = View {
        title: format!(
            "latchkey top: {} {node}, prefix {:?}",
            survey.deployment(),
            global.prefix
        ),
        interval: args.interval.max(Duration::from_millis(100)),
        rows: Vec::new(),
        filter: args.filter.clone(),
        editing: false,
        sort: Sort::parse(&args.sort),
        scroll: 0,
        last: None,
        error: None,
    };
    let terminal = ratatui::try_init();
    let outcome = match terminal {
        Ok(mut terminal) => {
            view.run(&mut terminal, refreshes(survey, view.interval))
                .await
        }
        Err(e) => Err(Failure::software(format!(
            "cannot set up the terminal: {e}"
        ))),
    };
    // Also after a failed set-up, which may have left raw mode on.
    ratatui::restore();
    outcome.map(|()| 0)
}

/// A refresh's outcome: when it started, how it went, and the rows after it.
type Refresh = (Instant, latchkey::Result<Refreshed>, Vec<Row>);

/// Refreshes `survey` every `interval` in a task of its own, until the receiver
/// is dropped.
fn refreshes(mut survey: AnySurvey, interval: Duration) -> mpsc::Receiver<Refresh> {
    let (send, receive) = mpsc::channel(1);
    tokio::spawn(async move {
        loop {
            let started = Instant::now();
            let refreshed = survey.refresh().await;
            if send
                .send((started, refreshed, survey.rows()))
                .await
                .is_err()
            {
                return;
            }
            tokio::time::sleep(interval).await;
        }
    });
    receive
}

impl View {
    async fn run(
        &mut self,
        terminal: &mut DefaultTerminal,
        mut refreshes: mpsc::Receiver<Refresh>,
    ) -> Result<(), Failure> {
        let mut keys = read_keys();
        let mut stop = Stop::new()?;
        loop {
            terminal
                .draw(|frame| self.draw(frame))
                .map_err(|e| Failure::software(format!("cannot draw: {e}")))?;
            tokio::select! {
                refresh = refreshes.recv() => match refresh {
                    Some(refresh) => self.refreshed(refresh),
                    None => return Err(Failure::software("the refresh task ended".to_owned())),
                },
                input = keys.recv() => match input {
                    None => return Ok(()),
                    Some(Input::Resized) => {}
                    Some(Input::Key(key)) => match self.key(key) {
                        Action::Quit => return Ok(()),
                        Action::Redraw => {}
                    },
                },
                () = stop.wait() => return Ok(()),
            }
        }
    }

    fn refreshed(&mut self, (started, refreshed, rows): Refresh) {
        match refreshed {
            Ok(done) => {
                self.last = Some((Instant::now(), started.elapsed(), done));
                self.error = None;
                self.rows = rows;
            }
            // Keep the last rows: a view that blanks on a blip hides what it knew.
            Err(error) => self.error = Some(error.to_string()),
        }
    }

    fn key(&mut self, key: KeyEvent) -> Action {
        if key.kind != KeyEventKind::Press {
            return Action::Redraw;
        }
        let ctrl_c =
            key.modifiers.contains(KeyModifiers::CONTROL) && key.code == KeyCode::Char('c');
        if ctrl_c {
            return Action::Quit;
        }
        if self.editing {
            match key.code {
                KeyCode::Enter => self.editing = false,
                KeyCode::Esc => {
                    self.editing = false;
                    self.filter.clear();
                }
                KeyCode::Backspace => {
                    self.filter.pop();
                }
                KeyCode::Char(c) => self.filter.push(c),
                _ => {}
            }
            self.scroll = 0;
            return Action::Redraw;
        }
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => return Action::Quit,
            KeyCode::Char('s') => self.sort = self.sort.next(),
            KeyCode::Char('/') => {
                self.editing = true;
                self.filter.clear();
            }
            KeyCode::Down | KeyCode::Char('j') => self.scroll = self.scroll.saturating_add(1),
            KeyCode::Up | KeyCode::Char('k') => self.scroll = self.scroll.saturating_sub(1),
            KeyCode::PageDown => self.scroll = self.scroll.saturating_add(20),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(20),
            KeyCode::Home => self.scroll = 0,
            _ => {}
        }
        Action::Redraw
    }

    /// The rows the filter lets through, in the chosen order.
    fn shown(&self) -> Vec<Row> {
        let mut rows: Vec<Row> = self
            .rows
            .iter()
            .filter(|row| row.name.contains(&self.filter))
            .cloned()
            .collect();
        self.sort.order(&mut rows);
        rows
    }

    fn draw(&mut self, frame: &mut Frame) {
        let [header, table, footer] = Layout::vertical([
            Constraint::Length(4),
            Constraint::Min(1),
            Constraint::Length(1),
        ])
        .areas(frame.area());
        let rows = self.shown();
        self.scroll = self.scroll.min(rows.len().saturating_sub(1));
        frame.render_widget(Paragraph::new(self.header(&rows)), header);
        frame.render_widget(self.table(&rows[self.scroll.min(rows.len())..]), table);
        frame.render_widget(Paragraph::new(self.footer(rows.len())), footer);
    }

    fn header(&self, rows: &[Row]) -> Vec<Line<'static>> {
        let locks: Vec<&Row> = rows.iter().filter(|r| r.kind == Kind::Lock).collect();
        let held = locks.iter().filter(|r| r.is_held()).count();
        let lock_waiters: u64 = locks.iter().map(|r| r.waiters).sum();
        let oldest = super::oldest_hold(rows);
        let pools: Vec<&Row> = rows
            .iter()
            .filter(|r| matches!(r.kind, Kind::Semaphore | Kind::RwLock))
            .collect();
        let pool_waiters: u64 = pools.iter().map(|r| r.waiters).sum();
        let rates = rows.iter().filter(|r| r.kind == Kind::RateLimit).count();
        let s = plural(pools.len());
        let totals = format!(
            "{held} lock{} held, {lock_waiters} waiting; {} semaphore{s} or rw lock{s} in use, \
             {pool_waiters} waiting; {rates} rate limit{}; oldest hold {}",
            plural(held),
            pools.len(),
            plural(rates),
            oldest.map_or("-".to_owned(), short),
        );
        let cost = match (&self.error, &self.last) {
            (Some(error), _) => Line::from(format!("refresh failed: {error}")).red(),
            (None, None) => Line::from("reading…"),
            (None, Some((at, took, done))) => Line::from(format!(
                "last refresh {} ago, took {}: {} SCAN, {} keys walked, {} names read, {} to read; \
                 walk {}",
                short(at.elapsed()),
                short(*took),
                done.scans,
                done.keys_walked,
                done.names_read,
                done.names_waiting,
                if done.walk_completed {
                    "came round"
                } else {
                    "in progress"
                }
            )),
        };
        vec![
            Line::from(format!("{}, every {}", self.title, short(self.interval))).bold(),
            Line::from(totals),
            cost,
            Line::from(""),
        ]
    }

    fn table(&self, rows: &[Row]) -> Table<'static> {
        let header = [
            "KIND", "NAME", "HOLDER", "AGE", "LEFT", "FENCE", "PERMITS", "WAITING",
        ]
        .into_iter()
        .map(Cell::from)
        .collect::<TableRow>()
        .style(Style::new().add_modifier(Modifier::REVERSED));
        let lines: Vec<TableRow> = rows.iter().map(table_row).collect();
        let widths = [
            Constraint::Length(10),
            Constraint::Fill(3),
            Constraint::Fill(2),
            Constraint::Length(8),
            Constraint::Length(8),
            Constraint::Length(17),
            Constraint::Length(8),
            Constraint::Length(7),
        ];
        Table::new(lines, widths).header(header)
    }

    fn footer(&self, shown: usize) -> Line<'static> {
        let filter = match (self.editing, self.filter.is_empty()) {
            (true, _) => format!("filter: {}▏ (Enter keeps, Esc clears)", self.filter),
            (false, true) => "/ filter".to_owned(),
            (false, false) => format!("/ filter: {:?}", self.filter),
        };
        Line::from(format!(
            " q quit · s sort: {} · {filter} · ↑↓ scroll · {shown} of {} shown",
            self.sort.name(),
            self.rows.len()
        ))
        .reversed()
    }
}

fn table_row(row: &Row) -> TableRow<'static> {
    let dash = || "-".to_owned();
    let kind = kind_label(row.kind);
    let holder = match (&row.holder, &row.algorithm) {
        (Some(holder), _) => holder.clone(),
        (None, Some(algorithm)) => algorithm.clone(),
        (None, None) => "free".to_owned(),
    };
    // A rate limit's use shows where a semaphore's permits do.
    let used = match (row.used, row.ahead) {
        (Some(used), _) => Some(format!("{used} used")),
        (None, Some(ahead)) => Some(format!("+{}", short(ahead))),
        (None, None) => None,
    };
    let age = match row.is_held() {
        true => short(row.held_for),
        false => dash(),
    };
    let permits = row.permits.map_or_else(
        || used.unwrap_or_else(dash),
        |(used, all)| match all {
            Some(all) => format!("{used}/{all}"),
            None => used.to_string(),
        },
    );
    TableRow::new([
        kind.to_owned(),
        row.name.clone(),
        holder,
        age,
        row.left.map_or_else(dash, short),
        row.fence.map_or_else(dash, |f| f.to_string()),
        permits,
        row.waiters.to_string(),
    ])
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Reads keys (and resizes) on a thread of its own: crossterm's reads block. The
/// thread ends when the loop drops the receiver.
fn read_keys() -> mpsc::Receiver<Input> {
    let (send, receive) = mpsc::channel(64);
    std::thread::spawn(move || {
        while !send.is_closed() {
            match event::poll(Duration::from_millis(100)) {
                Ok(false) => continue,
                Ok(true) => {}
                Err(_) => return,
            }
            let input = match event::read() {
                Ok(Event::Key(key)) => Input::Key(key),
                Ok(Event::Resize(..)) => Input::Resized,
                Ok(_) => continue,
                Err(_) => return,
            };
            if send.blocking_send(input).is_err() {
                return;
            }
        }
    });
    receive
}

/// The signals that end the view as q does (in raw mode Ctrl-C is a key, not
/// SIGINT): SIGTERM, SIGHUP (the terminal closed), SIGINT (sent by `kill`).
struct Stop {
    signals: Vec<tokio::signal::unix::Signal>,
}

impl Stop {
    fn new() -> Result<Self, Failure> {
        let kinds = [
            SignalKind::terminate(),
            SignalKind::hangup(),
            SignalKind::interrupt(),
        ];
        let signals = kinds
            .into_iter()
            .map(signal)
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| Failure::software(format!("cannot listen for signals: {e}")))?;
        Ok(Stop { signals })
    }

    async fn wait(&mut self) {
        let waits = self.signals.iter_mut().map(|s| Box::pin(s.recv()));
        futures_util::future::select_all(waits).await;
    }
}
