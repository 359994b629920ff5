//! Voting among candidate SQL queries by execution result, and difficulty-aware voter choice.
//!
//! The clustering rule is DAIL-SQL's published one: candidates that failed to execute are
//! dropped; each remaining result joins the first cluster whose *first member* it equals under
//! Spider semantics without row order (comparing against one representative keeps the rule
//! deterministic even though "equal up to column permutation" is not transitive in general);
//! the largest cluster wins and ties go to the cluster that appeared first; the winner is that
//! cluster's first, i.e. earliest, candidate. When every candidate failed, candidate 0 is
//! returned and the outcome says so, because the caller must still answer with some SQL.
//!
//! PET-SQL's difficulty-aware voting lets only some generators vote at each Spider hardness
//! level (the preliminary SQL always votes). The paper does not publish its mapping, so it is
//! configuration: [`VotingPolicy`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::compare::same_result;
use crate::hardness::Hardness;
use crate::sandbox::{ExecError, QueryResult};

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

/// Who produced a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Voter {
    /// The round-1 preliminary SQL: always votes.
    PreSql,
    /// A round-2 generator, by its configured name.
    Generator(String),
}

/// Which generators vote at each hardness level. A level that is absent lets every generator
/// vote, so an empty policy is plain cross-consistency voting.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VotingPolicy {
    pub by_level: BTreeMap<Hardness, Vec<String>>,
}

impl VotingPolicy {
    /// Indices of the voters allowed at `level`, in their original order.
    pub fn eligible(&self, level: Hardness, voters: &[Voter]) -> Vec<usize> {
        let allowed = self.by_level.get(&level);
        voters
            .iter()
            .enumerate()
            .filter(|(_, v)| match (v, allowed) {
                (Voter::PreSql, _) | (_, None) => true,
                (Voter::Generator(name), Some(names)) => names.iter().any(|n| n == name),
            })
            .map(|(i, _)| i)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::sandbox::Value;

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
    fn policy_filters_generators_but_keeps_presql() {
        let policy = VotingPolicy {
            by_level: BTreeMap::from([
                (
                    Hardness::Easy,
                    vec!["small".to_string(), "large".to_string()],
                ),
                (Hardness::Extra, vec!["large".to_string()]),
            ]),
        };
        let voters = vec![
            Voter::PreSql,
            Voter::Generator("small".into()),
            Voter::Generator("large".into()),
            Voter::Generator("medium".into()),
        ];
        assert_eq!(policy.eligible(Hardness::Easy, &voters), vec![0, 1, 2]);
        assert_eq!(policy.eligible(Hardness::Extra, &voters), vec![0, 2]);
        // Unconfigured level: everyone votes.
        assert_eq!(policy.eligible(Hardness::Hard, &voters), vec![0, 1, 2, 3]);
    }

    #[test]
    fn policy_reads_from_json_config() {
        let policy: VotingPolicy =
            serde_json::from_str(r#"{"by_level": {"medium": ["a"], "extra": []}}"#)
                .expect("valid config");
        let voters = vec![Voter::Generator("a".into()), Voter::PreSql];
        assert_eq!(policy.eligible(Hardness::Medium, &voters), vec![0, 1]);
        assert_eq!(policy.eligible(Hardness::Extra, &voters), vec![1]);
    }
}
