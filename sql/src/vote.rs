//! Voting: how the final SQL is chosen among the PreSQL and the FinSQLs by their execution
//! results. The clustering rule, the voting modes, when a vote counts as split, how the
//! selection model's choice is weighed against the votes, and when a vote is settled before
//! revision all live here; the pipeline only gathers the ballots and reports the decision.
//!
//! The clustering rule is DAIL-SQL's published one: candidates that failed to execute are
//! dropped; each remaining result joins the first cluster whose *first member* it equals under
//! Spider semantics without row order (comparing against one representative keeps the rule
//! deterministic even though "equal up to column permutation" is not transitive in general);
//! the largest cluster wins and ties go to the cluster that appeared first; the winner is that
//! cluster's first, i.e. earliest, candidate. When every candidate failed, candidate 0 is
//! returned and the outcome says so, because the caller must still answer with some SQL.

use serde::{Deserialize, Serialize};

use crate::compare::same_result;
use crate::sandbox::{ExecError, QueryResult};

/// How the final SQL is chosen among the PreSQL and the FinSQLs. `Default` is the empty value,
/// no vote; the served default is the `voting` knob's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VotingMode {
    /// No vote: the first generator's last candidate (its FinSQL, or the PreSQL without
    /// round 2) is the answer.
    #[default]
    None,
    /// Cross-consistency: the largest cluster of equal results wins.
    Majority,
}

impl VotingMode {
    pub const ALL: [VotingMode; 2] = [Self::None, Self::Majority];

    /// The name config files, requests and reports use.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Majority => "majority",
        }
    }
}

impl std::str::FromStr for VotingMode {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| format!("unknown voting mode `{name}`; known: none, majority"))
    }
}

/// When a vote counts as split (and the selection model, if on, is asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitRule {
    /// The winning cluster holds at most half of the voters.
    NoStrictMajority,
    /// Two or more clusters share the largest size.
    Tie,
}

/// The result of a vote. Indices refer to the slice that was voted on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VoteOutcome {
    /// A cluster of equal results won.
    Winner {
        /// The earliest candidate of the winning cluster.
        index: usize,
        /// Candidate indices per cluster, clusters in order of their first member.
        clusters: Vec<Vec<usize>>,
        /// The position of the winning cluster in `clusters`.
        winning_cluster: usize,
    },
    /// Every candidate failed to execute; candidate 0 is returned by convention.
    AllFailed,
    /// There was nothing to vote on.
    NoCandidates,
}

impl VoteOutcome {
    /// The chosen candidate, if any.
    pub fn index(&self) -> Option<usize> {
        match self {
            VoteOutcome::Winner { index, .. } => Some(*index),
            VoteOutcome::AllFailed => Some(0),
            VoteOutcome::NoCandidates => None,
        }
    }

    /// How many candidates agree with the chosen one (0 when all failed).
    pub fn support(&self) -> usize {
        match self {
            VoteOutcome::Winner {
                clusters,
                winning_cluster,
                ..
            } => clusters[*winning_cluster].len(),
            VoteOutcome::AllFailed | VoteOutcome::NoCandidates => 0,
        }
    }
}

/// Votes among candidates; `None` marks a candidate whose execution failed.
///
/// Truncated results take part as they are: callers that want exact votes should execute with
/// [`crate::sandbox::Overflow::Fail`].
pub fn vote(outcomes: &[Option<&QueryResult>]) -> VoteOutcome {
    if outcomes.is_empty() {
        return VoteOutcome::NoCandidates;
    }
    let mut clusters: Vec<Vec<usize>> = Vec::new();
    for (i, result) in outcomes.iter().enumerate() {
        let Some(result) = result else { continue };
        let home = clusters.iter_mut().find(|c| {
            let first = outcomes[c[0]].expect("clusters hold only successful candidates");
            same_result(&first.rows, &result.rows)
        });
        match home {
            Some(cluster) => cluster.push(i),
            None => clusters.push(vec![i]),
        }
    }
    // `max_by_key` keeps the last maximum; the first is wanted, so scan for a strict increase.
    let mut best: Option<usize> = None;
    for (c, cluster) in clusters.iter().enumerate() {
        if best.is_none_or(|b| cluster.len() > clusters[b].len()) {
            best = Some(c);
        }
    }
    match best {
        Some(winning_cluster) => VoteOutcome::Winner {
            index: clusters[winning_cluster][0],
            clusters,
            winning_cluster,
        },
        None => VoteOutcome::AllFailed,
    }
}

/// [`vote`] over execution outcomes as the sandbox returns them.
pub fn vote_results(outcomes: &[Result<QueryResult, ExecError>]) -> VoteOutcome {
    let refs: Vec<Option<&QueryResult>> = outcomes.iter().map(|o| o.as_ref().ok()).collect();
    vote(&refs)
}

/// Whether the clusters leave the answer in doubt. Failed voters count in the electorate of
/// `voters`: a lone success among failures is no majority.
pub fn is_split(rule: SplitRule, clusters: &[Vec<usize>], voters: usize) -> bool {
    let largest = clusters.iter().map(Vec::len).max().unwrap_or(0);
    match rule {
        SplitRule::NoStrictMajority => largest * 2 <= voters,
        SplitRule::Tie => clusters.iter().filter(|c| c.len() == largest).count() > 1,
    }
}

/// The decision of one vote, in the caller's candidate ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Candidate ids that voted, in voter order.
    pub voters: Vec<usize>,
    /// Candidate ids per result cluster, clusters in order of first appearance.
    pub clusters: Vec<Vec<usize>>,
    /// The chosen candidate id (before any selector).
    pub winner: Option<usize>,
    pub split: bool,
    /// Every voter failed to execute: the answer is the first voter's SQL, unverified.
    pub all_failed: bool,
}

/// Decides among `ballots` (candidate ids, one per voter, the PreSQL's first) whose results are
/// `results[id]` (`None`: failed). Without a vote the answer is `unvoted`, the first
/// generator's latest candidate.
pub fn decide(
    mode: VotingMode,
    split_rule: SplitRule,
    ballots: &[usize],
    results: &[Option<QueryResult>],
    unvoted: usize,
) -> Decision {
    if mode == VotingMode::None {
        return Decision {
            voters: vec![unvoted],
            clusters: Vec::new(),
            winner: Some(unvoted),
            split: false,
            all_failed: results[unvoted].is_none(),
        };
    }
    let outcomes: Vec<Option<&QueryResult>> =
        ballots.iter().map(|&id| results[id].as_ref()).collect();
    match vote(&outcomes) {
        VoteOutcome::Winner {
            index, clusters, ..
        } => Decision {
            voters: ballots.to_vec(),
            split: is_split(split_rule, &clusters, ballots.len()),
            clusters: clusters
                .iter()
                .map(|c| c.iter().map(|&i| ballots[i]).collect())
                .collect(),
            winner: Some(ballots[index]),
            all_failed: false,
        },
        VoteOutcome::AllFailed | VoteOutcome::NoCandidates => Decision {
            voters: ballots.to_vec(),
            clusters: Vec::new(),
            winner: ballots.first().copied(),
            split: false,
            all_failed: true,
        },
    }
}

/// Whether the majority vote over `heads` (each voter's latest result, in voter order; `None`:
/// failed) is settled whatever the voters in `pending` (positions in `heads`) come to return:
/// among the others the leading result outnumbers the runner-up even if every pending voter
/// joined the runner-up, and its first voter precedes every pending one (a pending voter that
/// joined it would otherwise become the cluster's representative, changing the answer's
/// text). With `must_pass_split`, the leading result must also hold a strict majority of all
/// voters, so that no split vote can call the selector in.
pub fn settled_without(
    heads: &[Option<&QueryResult>],
    pending: &[usize],
    must_pass_split: bool,
) -> bool {
    let settled: Vec<usize> = (0..heads.len()).filter(|v| !pending.contains(v)).collect();
    let outcomes: Vec<Option<&QueryResult>> = settled.iter().map(|&v| heads[v]).collect();
    let VoteOutcome::Winner {
        clusters,
        winning_cluster,
        ..
    } = vote(&outcomes)
    else {
        return false;
    };
    let leading = clusters[winning_cluster].len();
    let runner_up = clusters
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != winning_cluster)
        .map(|(_, c)| c.len())
        .max()
        .unwrap_or(0);
    let first_voter = settled[clusters[winning_cluster][0]];
    leading > runner_up + pending.len()
        && pending.iter().all(|&v| v > first_voter)
        && (!must_pass_split || leading * 2 > heads.len())
}

/// The shown group with the highest `logprob + vote_weight * ln(votes)`; the first of equals,
/// so ties go to the earlier group (the one voted for first, as the vote breaks its ties).
/// With weight 0 the selector alone decides. With weight `w`, overruling a group with `r`
/// times the votes takes `r^w` times its probability: the selector's sureness is traded
/// against the vote's, so a selector that is unsure, or equally sure of everything, leaves the
/// majority's answer standing.
pub fn weighed_choice(logprobs: &[f32], votes: &[usize], vote_weight: f32) -> usize {
    let score = |i: usize| {
        let prior = if vote_weight == 0.0 {
            0.0
        } else {
            vote_weight * (votes.get(i).copied().unwrap_or(1).max(1) as f32).ln()
        };
        logprobs[i] + prior
    };
    let mut best = 0;
    for i in 1..logprobs.len() {
        if score(i) > score(best) {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::value::Value;

    fn result(rows: &[&[i64]]) -> QueryResult {
        QueryResult {
            columns: (0..rows.first().map_or(0, |r| r.len()))
                .map(|c| format!("c{c}"))
                .collect(),
            rows: rows
                .iter()
                .map(|r| r.iter().map(|&v| Value::Integer(v)).collect())
                .collect(),
            truncated: false,
            elapsed: Duration::ZERO,
        }
    }

    fn err() -> Result<QueryResult, ExecError> {
        Err(ExecError::Syntax {
            message: "no such column".into(),
        })
    }

    #[test]
    fn largest_cluster_wins() {
        let a = result(&[&[1]]);
        let b = result(&[&[2]]);
        let outcomes = vec![
            Ok(a.clone()),
            Ok(b.clone()),
            err(),
            Ok(b.clone()),
            Ok(a),
            Ok(b),
        ];
        let v = vote_results(&outcomes);
        assert_eq!(
            v,
            VoteOutcome::Winner {
                index: 1,
                clusters: vec![vec![0, 4], vec![1, 3, 5]],
                winning_cluster: 1,
            }
        );
        assert_eq!(v.support(), 3);
    }

    #[test]
    fn ties_go_to_the_earliest_candidate() {
        let a = result(&[&[1]]);
        let b = result(&[&[2]]);
        let outcomes = vec![err(), Ok(b.clone()), Ok(a.clone()), Ok(a), Ok(b)];
        assert_eq!(vote_results(&outcomes).index(), Some(1));
    }

    #[test]
    fn equality_is_spider_unordered_with_column_permutation() {
        let rows = result(&[&[1, 10], &[2, 20]]);
        let permuted = result(&[&[20, 2], &[10, 1]]);
        let other = result(&[&[1, 10]]);
        let v = vote(&[Some(&other), Some(&rows), Some(&permuted)]);
        assert_eq!(v.index(), Some(1));
        assert_eq!(v.support(), 2);
        // Empty results agree with each other, not with a non-empty one.
        let empty = result(&[]);
        let v = vote(&[Some(&rows), Some(&empty), Some(&empty)]);
        assert_eq!(v.index(), Some(1));
    }

    #[test]
    fn all_failed_returns_candidate_zero_and_says_so() {
        let v = vote_results(&[err(), err()]);
        assert_eq!(v, VoteOutcome::AllFailed);
        assert_eq!(v.index(), Some(0));
        assert_eq!(v.support(), 0);
        assert_eq!(vote(&[]), VoteOutcome::NoCandidates);
        assert_eq!(vote(&[]).index(), None);
    }

    #[test]
    fn split_rules() {
        let clusters = vec![vec![0, 1], vec![2, 3]];
        assert!(is_split(SplitRule::NoStrictMajority, &clusters, 4));
        assert!(is_split(SplitRule::Tie, &clusters, 4));
        let clusters = vec![vec![0, 1], vec![2]];
        assert!(!is_split(SplitRule::NoStrictMajority, &clusters, 3));
        assert!(is_split(SplitRule::NoStrictMajority, &clusters, 4));
        assert!(!is_split(SplitRule::Tie, &clusters, 4));
    }

    #[test]
    fn a_vote_is_settled_only_when_the_pending_voters_cannot_overturn_it() {
        let (a, b) = (result(&[&[1]]), result(&[&[2]]));
        // a, a, a, b with voter 4 pending: 3 > 1 + 1, and the leader's first voter is 0.
        let heads = [Some(&a), Some(&a), Some(&a), Some(&b), None];
        assert!(settled_without(&heads, &[4], false));
        assert!(
            settled_without(&heads, &[4], true),
            "3 of 5 is a strict majority"
        );
        // Two pending voters could tie it.
        let heads = [Some(&a), Some(&a), Some(&b), None, None];
        assert!(!settled_without(&heads, &[3, 4], false));
        // A pending voter ahead of the leader's first voter could become its representative.
        let heads = [None, Some(&a), Some(&a), Some(&a)];
        assert!(!settled_without(&heads, &[0], false));
        // 2 against 0 with one pending is settled, but 2 of 4 is no strict majority.
        let heads = [Some(&a), Some(&a), None, None];
        assert!(settled_without(&heads, &[3], false));
        assert!(!settled_without(&heads, &[3], true));
    }

    #[test]
    fn decisions_are_in_candidate_ids() {
        let (a, b) = (result(&[&[1]]), result(&[&[2]]));
        let results = vec![Some(a.clone()), None, Some(b), Some(a), None];
        let d = decide(
            VotingMode::Majority,
            SplitRule::NoStrictMajority,
            &[0, 2, 3, 4],
            &results,
            2,
        );
        assert_eq!(d.clusters, vec![vec![0, 3], vec![2]]);
        assert_eq!((d.winner, d.split, d.all_failed), (Some(0), true, false));
        let d = decide(
            VotingMode::None,
            SplitRule::NoStrictMajority,
            &[0, 2, 3],
            &results,
            2,
        );
        assert_eq!(
            (d.voters, d.winner, d.all_failed),
            (vec![2], Some(2), false)
        );
        let d = decide(VotingMode::Majority, SplitRule::Tie, &[1, 4], &results, 4);
        assert_eq!((d.winner, d.all_failed), (Some(1), true));
    }

    #[test]
    fn the_vote_weight_trades_the_selectors_sureness_against_the_votes() {
        // Group A has three votes, B one; the selector prefers B by ln(2) (twice as likely).
        let logprobs = [-(2.0f32).ln() - 0.5, -0.5];
        let votes = [3, 1];
        assert_eq!(weighed_choice(&logprobs, &votes, 0.0), 1);
        // Weight 0.5: B needs sqrt(3) = 1.73 times A's probability; it has 2.
        assert_eq!(weighed_choice(&logprobs, &votes, 0.5), 1);
        // Weight 1: B needs 3 times; it has 2, so the majority stands.
        assert_eq!(weighed_choice(&logprobs, &votes, 1.0), 0);
        // Equal scores go to the earlier group, whatever the weight.
        assert_eq!(weighed_choice(&[-1.0, -1.0], &[2, 2], 1.0), 0);
        assert_eq!(weighed_choice(&[-1.0, -1.0], &[1, 1], 0.0), 0);
        // A later, larger group wins on votes once the selector is indifferent.
        assert_eq!(weighed_choice(&[-1.0, -1.0, -1.0], &[1, 1, 2], 0.1), 2);
    }
}
