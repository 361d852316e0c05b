//! `status`, `list` and `release --force`: looking at locks and breaking them.

use latchkey::LockStatus;
use serde::Serialize;

use crate::cli::{Global, ListArgs, ReleaseArgs, StatusArgs};
use crate::connect;
use crate::exit::Failure;
use crate::output;

/// One lock as `status` and `list` print it. Owner tokens are always masked.
#[derive(Serialize)]
struct LockView {
    name: String,
    held: bool,
    holder: Option<String>,
    /// False while another library (redis-py, redsync …) holds the lock.
    holder_is_latchkey: bool,
    fence: Option<u64>,
    ttl_ms: Option<u64>,
    waiters: u64,
}

impl LockView {
    fn new(name: &str, status: &LockStatus) -> Self {
        LockView {
            name: name.to_owned(),
            held: status.is_held(),
            holder: status.masked_holder(),
            holder_is_latchkey: status.is_held_by_latchkey(),
            fence: status.fence,
            ttl_ms: status.ttl.map(output::millis),
            waiters: status.waiters,
        }
    }

    fn line(&self, status: &LockStatus) -> String {
        let Some(holder) = &self.holder else {
            let fence = self
                .fence
                .map_or("no fence".to_owned(), |f| format!("last fence {f}"));
            return format!("{}: free ({fence}, {} waiting)", self.name, self.waiters);
        };
        let fence = self
            .fence
            .map_or("no fence".to_owned(), |f| format!("fence {f}"));
        let left = status.ttl.map_or("no expiry".to_owned(), |t| {
            format!("{} left", output::human(t))
        });
        if !self.holder_is_latchkey {
            return format!(
                "{}: held by {holder}, not a latchkey client (no fence, {left}, {} waiting)",
                self.name, self.waiters
            );
        }
        format!(
            "{}: held by {holder} ({fence}, {left}, {} waiting)",
            self.name, self.waiters
        )
    }
}

pub async fn status(global: &Global, args: StatusArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    let status = connect::with_client!(global, client => client.mutex(name)?.status().await?);
    let view = LockView::new(name, &status);
    match args.json {
        true => output::json(&view)?,
        false => println!("{}", view.line(&status)),
    }
    Ok(0)
}

pub async fn list(global: &Global, args: ListArgs) -> Result<u8, Failure> {
    let mut locks = connect::with_client!(global, client => client.list(&args.pattern).await?);
    // Any string key looks like a lock from outside: by default, only latchkey's.
    locks.retain(|(_, status)| args.foreign || status.is_held_by_latchkey());
    if args.json {
        let views: Vec<_> = locks
            .iter()
            .map(|(name, s)| LockView::new(name, s))
            .collect();
        output::json(&views)?;
        return Ok(0);
    }
    for (name, status) in &locks {
        println!("{}", LockView::new(name, status).line(status));
    }
    if locks.is_empty() && !global.quiet {
        eprintln!(
            "latchkey: no locks match {:?} under prefix {:?}",
            args.pattern, global.prefix
        );
    }
    Ok(0)
}

#[derive(Serialize)]
struct Broken {
    name: String,
    broken: bool,
    holder: Option<String>,
    fence: Option<u64>,
}

pub async fn release(global: &Global, args: ReleaseArgs) -> Result<u8, Failure> {
    if !args.force {
        return Err(Failure::usage(format!(
            "refusing to break lock {:?} without --force (it may belong to a live process)",
            args.name.as_str()
        )));
    }
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    let was = connect::with_client!(global, client => client.mutex(name)?.force_release().await?);
    let report = Broken {
        name: name.to_owned(),
        broken: was.is_some(),
        holder: was.as_ref().and_then(LockStatus::masked_holder),
        fence: was.as_ref().and_then(|s| s.fence),
    };
    if args.json {
        output::json(&report)?;
        return Ok(0);
    }
    match (&report.holder, report.fence) {
        (Some(holder), Some(fence)) => println!(
            "broke lock {} held by {holder} (fence {fence})",
            report.name
        ),
        (Some(holder), None) => println!("broke lock {} held by {holder}", report.name),
        _ => println!("lock {} was not held", report.name),
    }
    Ok(0)
}
