//! What each node of a quorum answered, for errors that name every node.

use std::time::Duration;

use crate::error::{Error, humanize};

/// One node's answer within an [`Error::NoQuorum`].
///
/// ```
/// use latchkey::quorum::{NodeAnswer, NodeReport};
/// let report = NodeReport::new("127.0.0.1:7001", NodeAnswer::Granted);
/// assert_eq!(report.to_string(), "127.0.0.1:7001: granted");
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub struct NodeReport {
    /// The node's address (never with credentials).
    pub node: String,
    /// What it answered.
    pub answer: NodeAnswer,
}

impl NodeReport {
    /// A report that `node` answered `answer`.
    ///
    /// ```
    /// use latchkey::quorum::{NodeAnswer, NodeReport};
    /// let report = NodeReport::new("127.0.0.1:7002", NodeAnswer::Unanswered);
    /// assert!(report.answer.outcome_unknown());
    /// ```
    pub fn new(node: impl Into<String>, answer: NodeAnswer) -> Self {
        NodeReport {
            node: node.into(),
            answer,
        }
    }
}

/// What one node answered to one request of a quorum round.
///
/// ```
/// use latchkey::quorum::NodeAnswer;
/// let busy = NodeAnswer::Busy { holder: Some("3cd1…".into()), left: None };
/// assert!(busy.is_transient() && !busy.outcome_unknown());
/// ```
#[derive(Debug)]
#[non_exhaustive]
pub enum NodeAnswer {
    /// It did what was asked (granted, extended, released, wrote the token back).
    Granted,
    /// Someone else holds the lock there.
    Busy {
        /// The holder's owner value, masked.
        holder: Option<String>,
        /// What was left of the holder's lease there.
        left: Option<Duration>,
    },
    /// It no longer holds the lock for the caller (its lease ran out there, or the
    /// node restarted empty).
    NotHeld,
    /// The request failed: the error says how (unreachable, no reply within the
    /// per-node deadline, authentication, ACL…).
    Failed(Box<Error>),
    /// A majority had settled the outcome before this node answered.
    Unanswered,
}

impl NodeAnswer {
    /// Whether trying again may get a different answer (false for authentication,
    /// ACL and other configuration errors).
    ///
    /// ```
    /// assert!(latchkey::quorum::NodeAnswer::NotHeld.is_transient());
    /// ```
    pub fn is_transient(&self) -> bool {
        match self {
            NodeAnswer::Failed(error) => error.is_transient(),
            _ => true,
        }
    }

    /// Whether the request may still have run on the node (no reply, or none yet).
    ///
    /// ```
    /// assert!(!latchkey::quorum::NodeAnswer::Granted.outcome_unknown());
    /// ```
    pub fn outcome_unknown(&self) -> bool {
        match self {
            NodeAnswer::Failed(error) => error.outcome_unknown(),
            NodeAnswer::Unanswered => true,
            _ => false,
        }
    }
}

impl std::fmt::Display for NodeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let node = &self.node;
        match &self.answer {
            NodeAnswer::Granted => write!(f, "{node}: granted"),
            NodeAnswer::Busy { holder, left } => {
                let holder = holder.as_deref().unwrap_or("another owner");
                match left {
                    Some(left) => write!(f, "{node}: held by {holder} ({} left)", humanize(*left)),
                    None => write!(f, "{node}: held by {holder} (no expiry)"),
                }
            }
            NodeAnswer::NotHeld => write!(f, "{node}: no longer held there"),
            // The error names the node itself.
            NodeAnswer::Failed(error) => write!(f, "{error}"),
            NodeAnswer::Unanswered => {
                write!(f, "{node}: no answer yet when a majority had settled")
            }
        }
    }
}
