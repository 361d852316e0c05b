//! Blocking twins of [`crate::election`]'s types.

use std::sync::Arc;
use std::time::Duration;

use super::{OwnedRuntime, block_on};
use crate::election::Leader;
use crate::error::Result;
use crate::lease::{Lease, Ttl};
use crate::store::LockStatus;

/// Blocking twin of [`crate::election::Election`], from
/// [`Client::election`](super::Client::election).
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let election = client.election("scheduler")?;
/// let leadership = election.campaign("host-a")?;
/// println!("leading in term {}", leadership.term());
/// leadership.resign()?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Election {
    pub(super) inner: crate::election::Election,
    pub(super) runtime: Arc<OwnedRuntime>,
}

impl Election {
    /// Leads under `lease` (see [`crate::election::Election::with_lease`]).
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let lease = latchkey::Lease::renewed(std::time::Duration::from_secs(5))?;
    /// let election = client.election("scheduler")?.with_lease(lease);
    /// # Ok(()) }
    /// ```
    pub fn with_lease(mut self, lease: Lease) -> Self {
        self.inner = self.inner.with_lease(lease);
        self
    }

    /// How long a waiting candidate keeps its place after it stops renewing it (see
    /// [`crate::election::Election::with_waiter_lease`]).
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// let waiter_lease = latchkey::Ttl::new(std::time::Duration::from_secs(5))?;
    /// let election = client.election("scheduler")?.with_waiter_lease(waiter_lease);
    /// # Ok(()) }
    /// ```
    pub fn with_waiter_lease(mut self, lease: Ttl) -> Self {
        self.inner = self.inner.with_waiter_lease(lease);
        self
    }

    /// The election's name, prefix included.
    ///
    /// ```no_run
    /// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
    /// assert_eq!(client.election("scheduler")?.name(), "scheduler");
    /// # Ok(()) }
    /// ```
    pub fn name(&self) -> &str {
        self.inner.name()
    }

    /// Deposes the leader, as an operator would (see
    /// [`crate::election::Election::force_release`]).
    ///
    /// # Errors
    ///
    /// As [`crate::election::Election::force_release`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(election: latchkey::blocking::Election) -> latchkey::Result<()> {
    /// election.force_release()?;
    /// # Ok(()) }
    /// ```
    pub fn force_release(&self) -> Result<Option<LockStatus>> {
        block_on(&self.runtime, self.inner.force_release())?
    }

    /// Blocks until this candidate leads, then proclaims `value` (see
    /// [`crate::election::Election::campaign`]).
    ///
    /// # Errors
    ///
    /// As [`crate::election::Election::campaign`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(election: latchkey::blocking::Election) -> latchkey::Result<()> {
    /// let leadership = election.campaign("host-a")?;
    /// # Ok(()) }
    /// ```
    pub fn campaign(&self, value: &str) -> Result<Leadership> {
        self.wrap(block_on(&self.runtime, self.inner.campaign(value))?)
    }

    /// [`campaign`](Self::campaign), blocking at most `wait`.
    ///
    /// # Errors
    ///
    /// As [`crate::election::Election::campaign_timeout`], and
    /// [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(election: latchkey::blocking::Election) -> latchkey::Result<()> {
    /// let leadership = election.campaign_timeout("host-a", std::time::Duration::from_secs(5))?;
    /// # Ok(()) }
    /// ```
    pub fn campaign_timeout(&self, value: &str, wait: Duration) -> Result<Leadership> {
        self.wrap(block_on(
            &self.runtime,
            self.inner.campaign_timeout(value, wait),
        )?)
    }

    /// Leads now if nobody does (see [`crate::election::Election::try_campaign`]).
    ///
    /// # Errors
    ///
    /// As [`crate::election::Election::try_campaign`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(election: latchkey::blocking::Election) -> latchkey::Result<()> {
    /// if let Ok(leadership) = election.try_campaign("host-a") {
    ///     println!("leading");
    /// }
    /// # Ok(()) }
    /// ```
    pub fn try_campaign(&self, value: &str) -> Result<Leadership> {
        self.wrap(block_on(&self.runtime, self.inner.try_campaign(value))?)
    }

    /// Who leads now (see [`crate::election::Election::leader`]).
    ///
    /// # Errors
    ///
    /// As [`crate::election::Election::leader`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(election: latchkey::blocking::Election) -> latchkey::Result<()> {
    /// println!("{:?}", election.leader()?);
    /// # Ok(()) }
    /// ```
    pub fn leader(&self) -> Result<Option<Leader>> {
        block_on(&self.runtime, self.inner.leader())?
    }

    /// Follows the leader (see [`crate::election::Election::observe`]).
    ///
    /// # Errors
    ///
    /// As [`crate::election::Election::observe`].
    ///
    /// ```no_run
    /// # fn demo(election: latchkey::blocking::Election) -> latchkey::Result<()> {
    /// let mut observer = election.observe()?;
    /// println!("{:?}", observer.changed()?);
    /// # Ok(()) }
    /// ```
    pub fn observe(&self) -> Result<Observer> {
        Ok(Observer {
            inner: self.inner.observe()?,
            runtime: self.runtime.clone(),
        })
    }

    fn wrap(&self, campaign: Result<crate::election::Leadership>) -> Result<Leadership> {
        Ok(Leadership {
            inner: Some(campaign?),
            runtime: self.runtime.clone(),
        })
    }
}

/// Blocking twin of [`crate::election::Leadership`]. Dropping it resigns before
/// the drop returns.
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let leadership = client.election("scheduler")?.campaign("host-a")?;
/// while !leadership.is_lost() {
///     // ... lead, writing with leadership.term() as the fencing token ...
/// #   break;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "dropping the leadership resigns at once"]
pub struct Leadership {
    // `Some` for its whole life: only `resign` and `drop` take it.
    inner: Option<crate::election::Leadership>,
    runtime: Arc<OwnedRuntime>,
}

impl Leadership {
    fn inner(&self) -> &crate::election::Leadership {
        self.inner
            .as_ref()
            .expect("a blocking leadership holds its async one until resigned or dropped")
    }

    /// This leader's term (see [`crate::election::Leadership::term`]).
    ///
    /// ```no_run
    /// # fn demo(leadership: latchkey::blocking::Leadership) {
    /// println!("term {}", leadership.term());
    /// # }
    /// ```
    pub fn term(&self) -> u64 {
        self.inner().term()
    }

    /// The value this leader campaigned with.
    ///
    /// ```no_run
    /// # fn demo(leadership: latchkey::blocking::Leadership) {
    /// println!("{} leads", leadership.value());
    /// # }
    /// ```
    pub fn value(&self) -> &str {
        self.inner().value()
    }

    /// This leader, as observers see it.
    ///
    /// ```no_run
    /// # fn demo(leadership: latchkey::blocking::Leadership) {
    /// println!("{}", leadership.leader());
    /// # }
    /// ```
    pub fn leader(&self) -> &Leader {
        self.inner().leader()
    }

    /// Whether leadership was lost (see [`crate::election::Leadership::lost`]).
    ///
    /// ```no_run
    /// # fn demo(leadership: latchkey::blocking::Leadership) {
    /// assert!(!leadership.is_lost());
    /// # }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.inner().is_lost()
    }

    /// How long this candidate surely leads still, unless renewed.
    ///
    /// ```no_run
    /// # fn demo(leadership: latchkey::blocking::Leadership) {
    /// println!("{:?} left", leadership.validity());
    /// # }
    /// ```
    pub fn validity(&self) -> Duration {
        self.inner().guard().validity()
    }

    /// Steps down (see [`crate::election::Leadership::resign`]).
    ///
    /// # Errors
    ///
    /// As [`crate::election::Leadership::resign`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(leadership: latchkey::blocking::Leadership) -> latchkey::Result<()> {
    /// leadership.resign()?;
    /// # Ok(()) }
    /// ```
    pub fn resign(mut self) -> Result<bool> {
        match self.inner.take() {
            Some(inner) => block_on(&self.runtime, inner.resign())?,
            None => Ok(false),
        }
    }
}

impl Drop for Leadership {
    fn drop(&mut self) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        if let Ok(Err(error)) = block_on(&self.runtime, inner.resign()) {
            tracing::warn!(%error, "could not resign a dropped leadership; its lock frees itself when its lease ends");
        }
    }
}

/// Blocking twin of [`crate::election::Observer`].
///
/// ```no_run
/// # fn demo(client: latchkey::blocking::Client) -> latchkey::Result<()> {
/// let mut observer = client.election("scheduler")?.observe()?;
/// loop {
///     println!("leader: {:?}", observer.changed()?);
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct Observer {
    inner: crate::election::Observer,
    runtime: Arc<OwnedRuntime>,
}

impl Observer {
    /// Blocks until the leader differs from the one last returned (see
    /// [`crate::election::Observer::changed`]).
    ///
    /// # Errors
    ///
    /// As [`crate::election::Observer::changed`], and [`crate::Error::Runtime`].
    ///
    /// ```no_run
    /// # fn demo(mut observer: latchkey::blocking::Observer) -> latchkey::Result<()> {
    /// let now = observer.changed()?;
    /// # Ok(()) }
    /// ```
    pub fn changed(&mut self) -> Result<Option<Leader>> {
        block_on(&self.runtime, self.inner.changed())?
    }
}
