//! A hold handed from one process to another: what it needs to extend, release or
//! take over the lock.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result};
use crate::token::{OwnerToken, mask_owner};

/// A held lock's owner token and fencing token (if it had one), as text another process can use to
/// [`adopt`](crate::Mutex::adopt), [`extend`](crate::Mutex::extend_held) or
/// [`release`](crate::Mutex::release_held) the hold: a job handed from a web
/// request to a worker, a shell script's steps (`latchkey acquire`, then `latchkey
/// release --token`). Made by [`MutexGuard::detach`](crate::MutexGuard::detach).
///
/// Its text (`Display`) is a secret: whoever has it can release the lock. `Debug`
/// masks it.
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// let report = client.mutex("report:42")?;
/// let token = report.lock().await?.detach()?.to_string(); // held until the lease ends
/// // … hand `token` to a worker, which takes the hold over:
/// let guard = report.adopt(&token.parse()?).await?; // renewed again, released on drop
/// println!("fence {}", guard.fence().await?);
/// # Ok(()) }
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct HoldToken {
    owner: OwnerToken,
    fence: Option<u64>,
}

impl HoldToken {
    pub(crate) fn new(owner: OwnerToken, fence: Option<u64>) -> Self {
        HoldToken { owner, fence }
    }

    /// The hold's owner token: the value of the lock key while it is held.
    ///
    /// ```
    /// let token: latchkey::HoldToken = "0123456789abcdef0123456789abcdef:lk@7".parse()?;
    /// assert!(token.owner().as_str().ends_with(":lk"));
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn owner(&self) -> &OwnerToken {
        &self.owner
    }

    /// The fencing token the hold had when it was detached: `None` if none was
    /// computed (see [`Fencing`](crate::Fencing)). The guard that adopts the hold
    /// gets a fresh one either way.
    ///
    /// ```
    /// let token: latchkey::HoldToken = "0123456789abcdef0123456789abcdef:lk@7".parse()?;
    /// assert_eq!(token.fence(), Some(7));
    /// let token: latchkey::HoldToken = "0123456789abcdef0123456789abcdef:lk".parse()?;
    /// assert_eq!(token.fence(), None);
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn fence(&self) -> Option<u64> {
        self.fence
    }

    fn fmt_with(&self, f: &mut fmt::Formatter<'_>, owner: &str) -> fmt::Result {
        match self.fence {
            Some(fence) => write!(f, "{owner}@{fence}"),
            None => f.write_str(owner),
        }
    }
}

/// `<owner token>@<fence>`, or the owner token alone for a hold without a fence.
impl fmt::Display for HoldToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.fmt_with(f, self.owner.as_str())
    }
}

impl fmt::Debug for HoldToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HoldToken(")?;
        self.fmt_with(f, &mask_owner(self.owner.as_str()))?;
        f.write_str(")")
    }
}

/// Parses what `Display` wrote.
///
/// # Errors
///
/// [`Error::InvalidArgument`] for text that is not `<latchkey owner token>@<fence>`
/// or `<latchkey owner token>` (the message never repeats the text: it may be a
/// secret).
impl FromStr for HoldToken {
    type Err = Error;

    fn from_str(text: &str) -> Result<Self> {
        let invalid = || {
            Error::InvalidArgument(
                "not a hold token: expected <32 hex digits>:lk[@<fence>], as `detach` (or `latchkey acquire`) prints it"
                    .to_owned(),
            )
        };
        let text = text.trim();
        let (owner, fence) = match text.rsplit_once('@') {
            Some((owner, fence)) => (owner, Some(fence.parse().map_err(|_| invalid())?)),
            None => (text, None),
        };
        let owner = OwnerToken::parse(owner).ok_or_else(invalid)?;
        Ok(HoldToken { owner, fence })
    }
}
