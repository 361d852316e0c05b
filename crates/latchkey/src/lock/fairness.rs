//! Plain or fair: whether a newcomer may take a free lock ahead of queued waiters.

/// The order waiters get a lock in, set with
/// [`Mutex::with_fairness`](crate::Mutex::with_fairness). See the
/// [crate docs](crate#plain-or-fair) for what each does and costs.
///
/// ```
/// assert_eq!(latchkey::Fairness::default(), latchkey::Fairness::Plain);
/// ```
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// use latchkey::Fairness;
///
/// let printer = client.mutex("printer")?.with_fairness(Fairness::Fair);
/// assert_eq!(printer.fairness(), Fairness::Fair);
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fairness {
    /// The default and the fastest: a newcomer may take a *free* lock without
    /// queueing, and the tasks of one process pass the lock among themselves in one
    /// round trip (while other processes wait for it, for at most 10 ms and one more
    /// critical section before it goes to them, and never ahead of a fair waiter at
    /// the head of the line). A release still hands the lock to the oldest queued
    /// waiter.
    #[default]
    Plain,
    /// Strict FIFO across all processes: no newcomer takes a free lock a live waiter
    /// is owed, and no passing between the tasks of a process.
    Fair,
}
