//! The vote over the voters' latest candidates, reported with candidate ids.

use super::answer::VoteReport;
use super::config::{SplitRule, VotingMode};
use crate::hardness::hardness;
use crate::sandbox::QueryResult;
use crate::vote::{VoteOutcome, Voter, VotingPolicy, vote};

/// One voter: who it is and its latest candidate.
#[derive(Debug, Clone)]
pub(crate) struct Ballot {
    pub voter: Voter,
    pub candidate: usize,
}

/// Inputs of a vote. `results` is indexed by candidate id (`None`: failed).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Tally<'a> {
    pub mode: VotingMode,
    /// The voters per hardness in difficulty-aware mode.
    pub policy: &'a VotingPolicy,
    pub split_rule: SplitRule,
    pub ballots: &'a [Ballot],
    pub results: &'a [Option<QueryResult>],
    /// The PreSQL's latest SQL, whose hardness picks the voters in difficulty-aware mode.
    pub presql: &'a str,
    /// The answer without a vote: the first generator's latest candidate.
    pub default_choice: usize,
}

pub(crate) fn tally(input: Tally<'_>) -> VoteReport {
    let (level, eligible) = match input.mode {
        VotingMode::None => {
            let all_failed = input.results[input.default_choice].is_none();
            return VoteReport {
                mode: VotingMode::None,
                hardness: None,
                voters: vec![input.default_choice],
                clusters: Vec::new(),
                winner: Some(input.default_choice),
                split: false,
                all_failed,
                selector: None,
            };
        }
        VotingMode::Majority => (None, (0..input.ballots.len()).collect()),
        VotingMode::DifficultyAware => {
            let level = hardness(input.presql);
            let voters: Vec<Voter> = input.ballots.iter().map(|b| b.voter.clone()).collect();
            (Some(level), input.policy.eligible(level, &voters))
        }
    };
    let eligible: Vec<usize> = eligible
        .into_iter()
        .map(|i: usize| input.ballots[i].candidate)
        .collect();
    let outcomes: Vec<Option<&QueryResult>> = eligible
        .iter()
        .map(|&id| input.results[id].as_ref())
        .collect();
    let outcome = vote(&outcomes);
    let mut report = VoteReport {
        mode: input.mode,
        hardness: level,
        voters: eligible.clone(),
        clusters: Vec::new(),
        winner: None,
        split: false,
        all_failed: false,
        selector: None,
    };
    match outcome {
        VoteOutcome::Winner {
            index, clusters, ..
        } => {
            report.split = is_split(input.split_rule, &clusters, eligible.len());
            report.clusters = clusters
                .iter()
                .map(|c| c.iter().map(|&i| eligible[i]).collect())
                .collect();
            report.winner = Some(eligible[index]);
        }
        VoteOutcome::AllFailed | VoteOutcome::NoCandidates => {
            report.all_failed = true;
            report.winner = eligible.first().copied();
        }
    }
    report
}

/// Whether the clusters leave the answer in doubt. Failed voters count in the electorate: a
/// lone success among failures is no majority.
fn is_split(rule: SplitRule, clusters: &[Vec<usize>], voters: usize) -> bool {
    let largest = clusters.iter().map(Vec::len).max().unwrap_or(0);
    match rule {
        SplitRule::NoStrictMajority => largest * 2 <= voters,
        SplitRule::Tie => clusters.iter().filter(|c| c.len() == largest).count() > 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
