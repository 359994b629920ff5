//! How a selection model does where the pipeline asks it, on records it was not trained on:
//! each record with a split vote, its groups shown in the vote's order (by first voter, as the
//! pipeline shows them), scored by the training decoder (the label's log-probability after
//! the prompt, as the server reads it), and compared with the majority vote, alone and weighed
//! against the votes ([`weighed_choice`], the pipeline's `selector.vote_weight`).

use candle_core::{D, Tensor};
use quorum_sql::dataset::SpiderDataset;
use quorum_sql::pipeline::MAX_LABELS;
use quorum_sql::vote::weighed_choice;
use serde::Serialize;

use crate::error::{TrainError, TrainResult};
use crate::examples::PromptCodec;
use crate::lora_decoder::LoraDecoder;
use crate::lora_params::LoraParams;
use crate::selector_examples::{JudgedGroup, RecordDatabases, SelectorRecord, selection_turn};

/// A split vote to score: the prompt, its labels' tokens, and which groups are right.
#[derive(Debug, Clone)]
pub struct SplitCase {
    pub db_id: String,
    pub question: String,
    pub prompt_tokens: Vec<u32>,
    pub label_tokens: Vec<u32>,
    pub right: Vec<bool>,
    pub votes: Vec<usize>,
}

/// The split votes of some records, and how many split records could not be asked, so that a
/// report says what it left out.
#[derive(Debug, Clone, Default)]
pub struct SplitCases {
    pub cases: Vec<SplitCase>,
    /// Records whose vote was split.
    pub split_records: usize,
    /// Split records that could not be judged: their database did not open or their gold
    /// query did not run.
    pub unjudged: usize,
    /// Split records with fewer than two groups that run: nothing to choose between.
    pub too_few_groups: usize,
}

/// The split votes among `records`, as the pipeline would ask the selector about them.
/// Records whose vote was not split, or with fewer than two groups that run, are not asked.
pub fn split_cases(
    dataset: &SpiderDataset,
    records: &[SelectorRecord],
    codec: PromptCodec<'_>,
    max_groups: usize,
    preview_rows: usize,
) -> TrainResult<SplitCases> {
    let max_groups = max_groups.clamp(2, MAX_LABELS);
    let mut databases = RecordDatabases::new(dataset);
    let mut out = SplitCases::default();
    for record in records.iter().filter(|r| r.split) {
        out.split_records += 1;
        let Some(judged) = databases.judge(record, max_groups) else {
            out.unjudged += 1;
            continue;
        };
        if judged.groups.len() < 2 {
            out.too_few_groups += 1;
            continue;
        }
        let shown: Vec<&JudgedGroup> = judged.groups.iter().collect();
        let (text, labels) = selection_turn(codec, record, &judged.view, &shown, preview_rows)?;
        let mut label_tokens = Vec::with_capacity(labels.len());
        let mut prompt_tokens = Vec::new();
        for label in &labels {
            let example = codec.prompt_and_answer(&text, label, false)?;
            label_tokens.push(example.tokens[example.answer_start]);
            prompt_tokens = example.tokens[..example.answer_start].to_vec();
        }
        out.cases.push(SplitCase {
            db_id: record.db_id.clone(),
            question: record.question.clone(),
            prompt_tokens,
            label_tokens,
            right: judged.groups.iter().map(|g| g.right).collect(),
            votes: judged.groups.iter().map(|g| g.votes).collect(),
        });
    }
    Ok(out)
}

/// Each label's log-probability after the prompt, with `lora` (or the bare base).
pub fn score_case(
    model: &LoraDecoder,
    lora: Option<&LoraParams>,
    case: &SplitCase,
) -> TrainResult<Vec<f32>> {
    let n = case.prompt_tokens.len();
    if n == 0 {
        return Err(TrainError::Data("an empty selection prompt".into()));
    }
    let logits = model.logits(lora, &case.prompt_tokens, n - 1..n, None)?;
    let logits = logits.squeeze(0)?.detach();
    let max = logits.max_keepdim(D::Minus1)?;
    let shifted = logits.broadcast_sub(&max)?;
    let log_z = shifted.exp()?.sum_keepdim(D::Minus1)?.log()?;
    let log_probs = shifted.broadcast_sub(&log_z)?;
    let ids = Tensor::new(case.label_tokens.as_slice(), model.device())?;
    Ok(log_probs.index_select(&ids, 0)?.to_vec1()?)
}

/// How often each choice is right over a set of split votes.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SelectionAccuracy {
    pub cases: usize,
    /// Cases where some shown group is right: the most any choice can get.
    pub reachable: usize,
    /// The vote's choice (the largest group, the earliest of equals).
    pub majority: usize,
    /// `(vote_weight, right choices)` for each weight asked.
    pub weighed: Vec<(f32, usize)>,
}

/// The majority vote's and the selector's right choices at each of `weights`.
pub fn selection_accuracy(
    cases: &[SplitCase],
    logprobs: &[Vec<f32>],
    weights: &[f32],
) -> SelectionAccuracy {
    let right_at = |case: &SplitCase, i: usize| case.right.get(i).copied().unwrap_or(false);
    SelectionAccuracy {
        cases: cases.len(),
        reachable: cases.iter().filter(|c| c.right.contains(&true)).count(),
        majority: cases
            .iter()
            .filter(|c| right_at(c, majority_choice(&c.votes)))
            .count(),
        weighed: weights
            .iter()
            .map(|&w| {
                let right = cases
                    .iter()
                    .zip(logprobs)
                    .filter(|(c, lp)| right_at(c, weighed_choice(lp, &c.votes, w)))
                    .count();
                (w, right)
            })
            .collect(),
    }
}

/// The group the vote picks: the largest, the earliest of equals.
fn majority_choice(votes: &[usize]) -> usize {
    let mut best = 0;
    for (i, &n) in votes.iter().enumerate() {
        if n > votes[best] {
            best = i;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(right: &[bool], votes: &[usize]) -> SplitCase {
        SplitCase {
            db_id: "d".into(),
            question: "q".into(),
            prompt_tokens: vec![1],
            label_tokens: vec![2, 3],
            right: right.to_vec(),
            votes: votes.to_vec(),
        }
    }

    #[test]
    fn accuracy_counts_the_vote_and_each_weighed_choice() {
        let cases = [
            // The majority is right; the selector prefers B strongly.
            case(&[true, false], &[2, 1]),
            // The majority is wrong; the selector prefers B mildly.
            case(&[false, true], &[2, 1]),
            // Nothing shown is right.
            case(&[false, false], &[1, 1]),
            // The larger group came second, and is right; the selector prefers it too.
            case(&[false, true], &[1, 2]),
        ];
        let logprobs = [
            vec![-3.0, -0.1],
            vec![-0.9, -0.5],
            vec![-0.1, -3.0],
            vec![-0.9, -0.5],
        ];
        let acc = selection_accuracy(&cases, &logprobs, &[0.0, 1.0, 10.0]);
        assert_eq!((acc.cases, acc.reachable, acc.majority), (4, 3, 2));
        // Weight 0: B twice (wrong, then right). Weight 1 (ln 2 = 0.69): the strong
        // preference still overrules (2.9 > 0.69), the mild one does not (0.4 < 0.69).
        // Weight 10: the vote everywhere. The last case is right at every weight.
        assert_eq!(acc.weighed, vec![(0.0, 2), (1.0, 1), (10.0, 2)]);
    }
}
