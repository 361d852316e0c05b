//! The arithmetic of a quorum, apart from any I/O: when a round is settled, and
//! which fencing token a grant takes. The exhaustive model check
//! (`quorum/model.rs`) drives these same functions.

/// How many of `nodes` make a majority.
pub(crate) fn majority(nodes: usize) -> usize {
    nodes / 2 + 1
}

/// Where a round that asked `asked` nodes and needs `needed` of them stands once
/// `yes` agreed and `no` refused or failed: `Some(true)` once enough agreed,
/// `Some(false)` once that is out of reach, and `None` while the nodes yet to answer
/// could still tip it.
pub(crate) fn settled(asked: usize, needed: usize, yes: usize, no: usize) -> Option<bool> {
    if yes >= needed {
        return Some(true);
    }
    (no > asked.saturating_sub(needed)).then_some(false)
}

/// The fencing token of a grant, from the proposals of the nodes that granted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FencePlan {
    /// The largest proposal: above every token any granting node handed out.
    pub(crate) fence: u64,
    /// Granting nodes whose counter holds `fence` already (they proposed it).
    pub(crate) carried: usize,
    /// Granting nodes (by index) whose counter must be raised to `fence`.
    pub(crate) raise: Vec<usize>,
}

impl FencePlan {
    /// The plan for `proposals`: (node index, proposed token) of each granting node.
    pub(crate) fn new(proposals: &[(usize, u64)]) -> Self {
        let fence = proposals.iter().map(|&(_, p)| p).max().unwrap_or(0);
        let raise: Vec<usize> = proposals
            .iter()
            .filter(|&&(_, p)| p < fence)
            .map(|&(node, _)| node)
            .collect();
        FencePlan {
            fence,
            carried: proposals.len() - raise.len(),
            raise,
        }
    }

    /// How many of the nodes in `raise` must confirm before a majority of `nodes`
    /// carries the token.
    pub(crate) fn still_needed(&self, nodes: usize) -> usize {
        majority(nodes).saturating_sub(self.carried)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_settles_as_soon_as_the_rest_cannot_tip_it() {
        assert_eq!(settled(5, 3, 3, 0), Some(true));
        assert_eq!(settled(5, 3, 2, 2), None);
        assert_eq!(settled(5, 3, 2, 3), Some(false));
        assert_eq!(settled(3, 2, 1, 1), None);
        assert_eq!(settled(3, 2, 0, 2), Some(false));
        // A write-back that needs 1 more of the 2 nodes it asked.
        assert_eq!(settled(2, 1, 0, 1), None);
        assert_eq!(settled(2, 1, 0, 2), Some(false));
    }

    #[test]
    fn the_fence_is_the_largest_proposal_and_only_smaller_ones_are_raised() {
        let plan = FencePlan::new(&[(0, 7), (2, 9), (3, 9)]);
        assert_eq!(plan.fence, 9);
        assert_eq!(plan.carried, 2);
        assert_eq!(plan.raise, vec![0]);
        assert_eq!(plan.still_needed(5), 1);
        assert_eq!(FencePlan::new(&[(0, 4), (1, 4), (2, 4)]).still_needed(5), 0);
    }
}
