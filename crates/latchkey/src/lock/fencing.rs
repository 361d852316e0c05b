//! When a lock's fencing token is computed: when first asked for, or with the grant.

/// When a lock's fencing token is computed, set with
/// [`Mutex::with_fencing`](crate::Mutex::with_fencing). Either way
/// [`MutexGuard::fence`](crate::MutexGuard::fence) gives the same promise: a token
/// strictly larger than that of every earlier holder. See the
/// [crate docs](crate#fencing).
///
/// ```
/// assert_eq!(latchkey::Fencing::default(), latchkey::Fencing::OnDemand);
/// ```
///
/// ```no_run
/// # async fn demo(client: latchkey::Client) -> latchkey::Result<()> {
/// use latchkey::Fencing;
///
/// // Every holder writes with its token: compute it with the grant, in the same round trip.
/// let ledger = client.mutex("ledger")?.with_fencing(Fencing::OnGrant);
/// let guard = ledger.lock().await?;
/// let fence = guard.fence().await?; // no round trip
/// # Ok(()) }
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Fencing {
    /// The default and the cheapest: an uncontended take is a bare `SET NX PX`, and
    /// the token is computed the first time the holder asks for it (one round trip,
    /// then kept). So does a lock handed over from the wait queue or passed between
    /// tasks of one process (the handover then leaves the counter alone).
    #[default]
    OnDemand,
    /// Every grant computes the token, handovers and passes included, so
    /// asking for it never costs a round trip; the uncontended take then runs a
    /// script (about 3× the server work of `SET NX PX`). For holders that always
    /// write with a token.
    OnGrant,
}
