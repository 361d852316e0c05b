//! `latchkey elect` and `latchkey leader`: leader election from the shell.
//!
//! `elect` is `run` with a leadership in place of a lock: the command starts once
//! this process leads, with `LATCHKEY_TERM` and `LATCHKEY_LEADER` in its
//! environment, and is stopped when leadership is lost. `leader` reads the leader
//! once, or follows it (`--watch`) through the election's channel.

use std::time::Duration;

use latchkey::MutexGuard;
use latchkey::election::{Election, Leader, Leadership};
use latchkey::store::RedisStore;

use crate::cli::{ElectArgs, Global, LeaderArgs};
use crate::connect;
use crate::exit::Failure;
use crate::output::outln;
use crate::run::{self, Held, Signals, Wait};

/// How long `leader --watch` waits before observing again after Redis failed.
const RETRY_AFTER: Duration = Duration::from_secs(1);

impl Held for Leadership {
    type Store = RedisStore;

    fn guard(&self) -> &MutexGuard<RedisStore> {
        Leadership::guard(self)
    }

    fn let_go(self) -> impl Future<Output = latchkey::Result<bool>> + Send {
        self.resign()
    }

    async fn environment(&self) -> latchkey::Result<Vec<(&'static str, String)>> {
        Ok(vec![
            ("LATCHKEY_TERM", self.term().to_string()),
            ("LATCHKEY_LEADER", self.value().to_owned()),
        ])
    }
}

/// `latchkey elect NAME -- CMD`: runs CMD while this process leads NAME.
pub async fn elect(global: &Global, args: ElectArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    let lease = args.hold.lease()?;
    let value = match args.value {
        Some(value) => value,
        None => default_value(),
    };
    Election::check_value(&value)?;
    let wait = Wait::from(&args.hold.take);
    let signals = Signals::listen()?;
    let client = connect::retrying(wait.deadline(), || connect::client(global)).await?;
    let election = client.election(name)?.with_lease(lease);
    let campaigning = async {
        match wait {
            Wait::Now => election.try_campaign(&value).await,
            Wait::Until(deadline) => election.campaign_timeout(&value, deadline.left()).await,
            Wait::Forever => election.campaign(&value).await,
        }
    };
    run::hold_and_run(
        campaigning,
        wait,
        run::Named::one(name),
        &args.hold,
        signals,
    )
    .await
}

/// `host:pid`: which process leads, for people reading `latchkey leader`.
fn default_value() -> String {
    let host = nix::unistd::gethostname()
        .ok()
        .and_then(|name| name.into_string().ok())
        .unwrap_or_else(|| "unknown-host".to_owned());
    format!("{host}:{}", std::process::id())
}

/// `latchkey leader NAME [--watch]`: who leads NAME, once or as it changes.
pub async fn leader(global: &Global, args: LeaderArgs) -> Result<u8, Failure> {
    let name = args.name.as_str();
    connect::check_name(global, name)?;
    let client = connect::client(global).await?;
    let election = client.election(name)?;
    if !args.watch {
        let leader = election.leader().await?;
        print(leader.as_ref());
        return Ok(if leader.is_some() { 0 } else { 1 });
    }
    let mut observer = election.observe()?;
    let mut signals = Signals::listen()?;
    loop {
        let watching = async {
            match observer.changed().await {
                Ok(leader) => {
                    print(leader.as_ref());
                    Ok(())
                }
                Err(error) if error.is_transient() => {
                    crate::output::errln!(
                        "latchkey: {error}; observing again in {}",
                        crate::output::human(RETRY_AFTER)
                    );
                    tokio::time::sleep(RETRY_AFTER).await;
                    Ok(())
                }
                Err(error) => Err(error),
            }
        };
        tokio::select! {
            watched = watching => watched?,
            signal = signals.recv() => return Ok(128 + signal as u8),
        }
    }
}

/// One line: `VALUE term TERM`, or `no leader`.
fn print(leader: Option<&Leader>) {
    match leader {
        // A record another client wrote may hold escape sequences.
        Some(leader) => outln!(
            "{} term {}",
            crate::output::printable(&leader.value),
            leader.term
        ),
        None => outln!("no leader"),
    }
}
