//! Majority voting, and when the selector is asked.

use std::sync::Arc;

use super::*;
use crate::fakes::{FixedSelector, ScriptedGenerator};
use crate::model::ModelCallError;
use crate::vote::{SplitRule, VotingMode};

fn finsql(map: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> &'static str {
    move |name| {
        map.iter()
            .find(|(n, _)| *n == name)
            .map_or(BAD, |(_, sql)| sql)
    }
}

#[test]
fn majority_vote_picks_the_larger_result_cluster() {
    let generator = by_stage(S6, finsql(&[("a", S9), ("b", S9), ("c", S10)]));
    let answer = pipeline(config(&["a", "b", "c"]), &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(answer.vote.mode, VotingMode::Majority);
    assert_eq!(answer.vote.clusters, vec![vec![0], vec![1, 2], vec![3]]);
    assert_eq!(answer.vote.winner, Some(1));
    assert_eq!(answer.sql, S9);
    assert!(answer.vote.split, "2 of 4 is no strict majority");
    assert!(answer.vote.selector.is_none(), "selection is off");
}

#[test]
fn ties_go_to_the_earliest_cluster() {
    let generator = by_stage(S6, finsql(&[("a", S9), ("b", S9), ("c", S6)]));
    let answer = pipeline(config(&["a", "b", "c"]), &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(answer.vote.clusters, vec![vec![0, 3], vec![1, 2]]);
    assert_eq!(answer.vote.winner, Some(0));
    assert_eq!(answer.sql, S6);
}

#[test]
fn all_errors_are_reported_with_the_presql_as_answer() {
    let generator = by_stage(BAD, |_| "SELECT nope FROM singer");
    let answer = pipeline(config(&["a", "b"]), &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert!(answer.vote.all_failed);
    assert!(answer.vote.clusters.is_empty());
    assert_eq!((answer.chosen, answer.sql.as_str()), (0, BAD));
    assert!(answer.preview.is_none());
    assert!(answer.candidates.iter().all(|c| !c.outcome.is_ok()));
}

fn with_selector(split_rule: SplitRule) -> PipelineConfig {
    let mut config = config(&["a"]);
    config.selector.enabled = true;
    config.selector.split_rule = split_rule;
    config
}

#[test]
fn selector_decides_a_split_vote_by_label_logprobs() {
    let selector = Arc::new(FixedSelector::new(Ok(vec![-2.0, -0.1])));
    let generator = by_stage(S6, |_| S9);
    let answer = pipeline(
        with_selector(SplitRule::NoStrictMajority),
        &generator,
        Some(&selector),
    )
    .run(QUESTION, None, &concert())
    .expect("answers");
    let prompts = selector.prompts();
    assert_eq!(prompts.len(), 1);
    let prompt = &prompts[0];
    assert!(prompt.contains(&format!(
        "Candidate A\n【SQL】\n{S6}\n【Execution result】\n[(6,)]"
    )));
    assert!(prompt.contains(&format!(
        "Candidate B\n【SQL】\n{S9}\n【Execution result】\n[(9,)]"
    )));
    assert!(prompt.ends_with("Please output the selected candidate as \"A\" or \"B\"."));
    let report = answer.vote.selector.as_ref().expect("selector ran");
    assert_eq!(report.labels, ["A", "B"]);
    assert_eq!(report.shown, [0, 1]);
    assert_eq!(report.chosen, Some(1));
    assert_eq!(
        answer.vote.winner,
        Some(0),
        "the vote alone would keep the PreSQL"
    );
    assert_eq!((answer.chosen, answer.sql.as_str()), (1, S9));
}

#[test]
fn selector_is_not_asked_when_the_vote_is_clear() {
    let selector = Arc::new(FixedSelector::new(Ok(vec![0.0, 0.0])));
    let generator = by_stage(S6, |_| S6);
    let answer = pipeline(
        with_selector(SplitRule::NoStrictMajority),
        &generator,
        Some(&selector),
    )
    .run(QUESTION, None, &concert())
    .expect("answers");
    assert!(selector.prompts().is_empty());
    assert!(answer.vote.selector.is_none());

    // 2 against 1 is a strict majority and no tie.
    let generator = by_stage(S6, finsql(&[("a", S6), ("b", S9)]));
    let mut config = with_selector(SplitRule::Tie);
    config
        .generators
        .push(GeneratorConfig::new("b", PromptFormat::Rep));
    let answer = pipeline(config, &generator, Some(&selector))
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert!(!answer.vote.split);
    assert!(selector.prompts().is_empty());
}

#[test]
fn a_failing_selector_leaves_the_vote_standing() {
    let selector = Arc::new(FixedSelector::new(Err(ModelCallError::Cancelled)));
    let generator = by_stage(S6, |_| S9);
    let answer = pipeline(with_selector(SplitRule::Tie), &generator, Some(&selector))
        .run(QUESTION, None, &concert())
        .expect("answers");
    let report = answer.vote.selector.as_ref().expect("selector asked");
    assert_eq!(report.chosen, None);
    assert!(report.error.is_some());
    assert_eq!(answer.sql, S6);
}

/// Answers S6, and explains any SQL as "How many singers are there?".
fn explaining_generator() -> Arc<ScriptedGenerator> {
    Arc::new(ScriptedGenerator::new(|r| {
        Ok(if r.prompt.answer_prefix.as_deref() == Some("Question:") {
            "Question: How many singers are there?".to_owned()
        } else {
            S6.to_owned()
        })
    }))
}

#[test]
fn the_consistency_check_flags_the_answer_without_changing_it() {
    let generator = explaining_generator();
    let selector = Arc::new(FixedSelector::new(Ok(vec![-0.1, -2.5])));
    let mut checked = config(&["a", "b"]);
    checked.consistency.enabled = true;
    checked.consistency.generator = Some("b".into());
    let answer = pipeline(checked.clone(), &generator, Some(&selector))
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, S6);
    let report = answer.consistency.expect("checked");
    assert_eq!(report.explanation, "How many singers are there?");
    let verdict = report.verdict.expect("judged");
    assert!(verdict.consistent && verdict.p_same > 0.9, "{verdict:?}");
    let explained: Vec<_> = generator
        .batches()
        .into_iter()
        .flatten()
        .filter(|r| r.prompt.answer_prefix.as_deref() == Some("Question:"))
        .collect();
    assert_eq!(explained.len(), 1);
    assert_eq!(explained[0].generator, "b");
    assert!(selector.prompts().iter().all(|p| p.contains(QUESTION)));
    assert_eq!(answer.settings.consistency_check, Some(true));

    // Off by default; on without a selector model it cannot be built.
    let plain = pipeline(config(&["a"]), &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert!(plain.consistency.is_none());
    let models = PipelineModels {
        generator: generator.clone(),
        embedder: None,
        selector: None,
        demos: None,
        context_encoder: None,
    };
    let e = Pipeline::new(checked, models).expect_err("no judge");
    assert!(e.to_string().contains("consistency check"), "{e}");
}

#[test]
fn the_explainer_need_not_be_a_voter() {
    // A request voting with a subset of the server's generators keeps the server's explainer.
    let generator = explaining_generator();
    let selector = Arc::new(FixedSelector::new(Ok(vec![-0.1, -2.5])));
    let mut checked = config(&["a"]);
    checked.consistency.enabled = true;
    checked.consistency.generator = Some("explainer".into());
    let answer = pipeline(checked, &generator, Some(&selector))
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert!(answer.consistency.expect("checked").verdict.is_some());
    let explainers: Vec<String> = generator
        .batches()
        .into_iter()
        .flatten()
        .filter(|r| r.prompt.answer_prefix.as_deref() == Some("Question:"))
        .map(|r| r.generator)
        .collect();
    assert_eq!(explainers, ["explainer"]);
}
