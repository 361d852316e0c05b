//! Owner tokens: who holds a lock.

use std::fmt;

use crate::error::{Error, Result};

/// Ends every token latchkey makes, so a waiter can tell a latchkey holder (whose
/// release wakes it) from another library's (whose release wakes nobody).
const MARK: &str = ":lk";

/// A lock owner's identity: 128 bits from the OS CSPRNG, written as 32 hex digits
/// followed by `:lk`, the mark of a latchkey holder.
///
/// Release and extend compare it with the lock key's value, so a holder whose lease
/// expired can never release or extend the next holder's lock. It is a secret of
/// sorts (whoever knows it can release the lock), so `Debug` and [`masked`] show
/// only its first 4 digits.
///
/// [`masked`]: OwnerToken::masked
///
/// ```
/// let a = latchkey::OwnerToken::generate()?;
/// let b = latchkey::OwnerToken::generate()?;
/// assert_ne!(a, b);
/// assert_eq!(a.as_str().len(), 35);
/// assert!(a.as_str().ends_with(":lk"));
/// assert_eq!(a.masked().chars().count(), 5); // 4 hex digits and "…"
/// # Ok::<(), latchkey::Error>(())
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct OwnerToken(String);

impl OwnerToken {
    /// Draws a fresh token from the operating system's random number generator.
    /// Every acquisition draws its own; you need this only to drive a
    /// [`LockStore`](crate::store::LockStore) directly.
    ///
    /// # Errors
    ///
    /// [`Error::Entropy`] if the OS random number generator fails.
    ///
    /// ```
    /// let token = latchkey::OwnerToken::generate()?;
    /// let random = token.as_str().strip_suffix(":lk").unwrap();
    /// assert!(random.chars().all(|c| c.is_ascii_hexdigit()));
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn generate() -> Result<Self> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes).map_err(|e| Error::Entropy(e.to_string()))?;
        Ok(OwnerToken(hex(&bytes, MARK)))
    }

    /// A token latchkey made, written back as text (32 hex digits and `:lk`).
    pub(crate) fn parse(text: &str) -> Option<Self> {
        let random = text.strip_suffix(MARK)?;
        // Lowercase, as `generate` writes it: another spelling never matches.
        let valid = random.len() == 32
            && random
                .chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c));
        valid.then(|| OwnerToken(text.to_owned()))
    }

    /// A token read back from a lock key (possibly another library's owner value).
    pub(crate) fn from_stored(value: String) -> Self {
        OwnerToken(value)
    }

    /// The full token, as stored in the lock key. Whoever knows it can release the
    /// lock: keep it out of logs.
    ///
    /// ```
    /// let token = latchkey::OwnerToken::generate()?;
    /// assert_eq!(token.as_str().len(), 35); // 32 hex digits and ":lk"
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The SHA-1 of the token, in hex: how a release names the waiter it wakes on the
    /// lock's channel, so the token itself is never published.
    pub(crate) fn waiter_id(&self) -> String {
        hex(
            &sha1_smol::Sha1::from(self.0.as_bytes()).digest().bytes(),
            "",
        )
    }

    /// The first 4 hex digits and an ellipsis: enough to tell owners apart in logs.
    ///
    /// ```
    /// let token = latchkey::OwnerToken::generate()?;
    /// assert!(token.masked().starts_with(&token.as_str()[..4]));
    /// assert!(token.masked().ends_with('…'));
    /// # Ok::<(), latchkey::Error>(())
    /// ```
    pub fn masked(&self) -> String {
        mask_owner(&self.0)
    }
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnerToken({})", self.masked())
    }
}

/// Whether a lock key's value is a latchkey owner token (and not another library's).
pub(crate) fn is_latchkey_owner(value: &str) -> bool {
    value.ends_with(MARK)
}

/// Masks any owner value (ours or another library's) for display: the first 4
/// characters and an ellipsis; a value of 8 characters or fewer, which 4 would
/// half give away, is "(hidden)" (a bare "…" read as if nobody held it).
pub(crate) fn mask_owner(owner: &str) -> String {
    if owner.chars().count() <= 8 {
        return "(hidden)".to_owned();
    }
    let shown: String = owner.chars().take(4).collect();
    format!("{shown}…")
}

/// `bytes` in lowercase hex, then `suffix`, in one allocation. Written as bytes:
/// `String::push` encodes each `char` as UTF-8, and the token was 1 % of an
/// uncontended cycle's client instructions (callgrind).
fn hex(bytes: &[u8], suffix: &str) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = vec![0; bytes.len() * 2 + suffix.len()];
    let (digits, tail) = text.split_at_mut(bytes.len() * 2);
    for (pair, byte) in digits.chunks_exact_mut(2).zip(bytes) {
        pair[0] = DIGITS[usize::from(byte >> 4)];
        pair[1] = DIGITS[usize::from(byte & 0xf)];
    }
    tail.copy_from_slice(suffix.as_bytes());
    // Never an empty token in its place: every holder would share it.
    String::from_utf8(text).expect("hex digits and a str are UTF-8")
}
