//! Work run under a hold and cancelled if the hold is lost: the body of
//! [`Mutex::with_lock`](crate::Mutex::with_lock) and of
//! [`MultiLock::with_lock`](crate::MultiLock::with_lock).

use std::future::Future;

use crate::error::{Error, Result};

/// A hold that work can run under: it says when it is lost, why, and lets go.
pub(crate) trait Hold: Sized {
    fn lost(&self) -> impl Future<Output = ()> + Send + 'static;
    /// The error for a hold that ended under its holder.
    fn lost_error(&self) -> Error;
    fn release(self) -> impl Future<Output = Result<bool>> + Send;
}

/// Runs `work` under `hold` and releases it after; [`Error::LeaseLost`] (or the
/// hold limit's error) if the hold was lost while `work` ran (it was dropped) or
/// the release found it no longer held.
pub(crate) async fn run_under<H: Hold, T>(hold: H, work: impl AsyncFnOnce(&H) -> T) -> Result<T> {
    let outcome = {
        let lost = hold.lost();
        let work = work(&hold);
        tokio::select! {
            biased;
            value = work => Some(value),
            () = lost => None,
        }
    };
    let error = hold.lost_error();
    match outcome {
        Some(value) if hold.release().await? => Ok(value),
        _ => Err(error),
    }
}
