//! The stages in order: round 1, linking, the batched round 2, revision, and model failures.

use std::sync::Arc;

use super::*;
use super::{Stage, stage};
use crate::fakes::ScriptedGenerator;
use crate::model::ModelCallError;
use crate::pipeline::{CandidateOutcome, CandidateRound, LinkingReport, PipelineEvent};
use crate::value::Value;
use crate::vote::VotingMode;

#[test]
fn round2_prompts_show_only_linked_tables_and_go_in_one_batch() {
    let generator = Arc::new(ScriptedGenerator::new(|r| {
        Ok(match (stage(r), r.generator.as_str()) {
            (Stage::Round1, _) => S6.to_owned(),
            // RE_p ends with `### SQL:`, so a bare continuation is completed with SELECT.
            (Stage::Round2, "a") => "count(*) FROM singer".to_owned(),
            // XiYan's prompt opens a ```sql fence that the model closes.
            (Stage::Round2, _) => format!("{S6}\n```"),
            (Stage::Revision, _) => "SELECT 0".to_owned(),
        })
    }));
    let mut config = config(&["a", "b"]);
    config.generators[1].format = PromptFormat::MSchema;
    let pipeline = pipeline(config, &generator, None);
    let mut events = Vec::new();
    let answer = pipeline
        .run_with_events(QUESTION, None, &concert(), &mut |e| events.push(e))
        .expect("answers");

    let batches = generator.batches();
    assert_eq!(batches.len(), 2, "round 1, then all of round 2 at once");
    assert_eq!(batches[0].len(), 1);
    assert_eq!(batches[0][0].generator, "a");
    assert!(batches[0][0].prompt.user.contains("# stadium("));
    let round2: Vec<&str> = batches[1].iter().map(|r| r.generator.as_str()).collect();
    assert_eq!(round2, ["a", "b"]);
    for request in &batches[1] {
        let text = &request.prompt.user;
        assert!(text.contains("singer"), "{text}");
        assert!(
            !text.contains("stadium") && !text.contains("singer_in_concert"),
            "{text}"
        );
    }
    assert!(batches[1][1].prompt.user.contains("# Table: singer"));
    assert_eq!(
        answer.linking,
        Some(LinkingReport {
            tables: vec!["singer".to_owned()],
            parsed: true,
            fell_back_to_all: false,
        })
    );
    let rounds: Vec<CandidateRound> = answer.candidates.iter().map(|c| c.round).collect();
    assert_eq!(
        rounds,
        [
            CandidateRound::PreSql,
            CandidateRound::FinSql,
            CandidateRound::FinSql
        ]
    );
    assert!(
        answer
            .candidates
            .iter()
            .all(|c| c.sql == S6 && c.outcome.is_ok())
    );
    assert_eq!(answer.vote.clusters, vec![vec![0, 1, 2]]);
    assert_eq!((answer.vote.winner, answer.vote.split), (Some(0), false));
    assert_eq!(answer.sql, S6);
    let preview = answer.preview.expect("final SQL ran");
    assert_eq!(preview.rows, vec![vec![Value::Integer(6)]]);
    assert!(answer.tokens_generated > 0);
    assert!(answer.timings.total_ms >= answer.timings.round2_ms);

    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            PipelineEvent::PreSql(_) => "presql",
            PipelineEvent::LinkedTables(_) => "linked",
            PipelineEvent::Candidate(_) => "candidate",
            PipelineEvent::Vote(_) => "vote",
            PipelineEvent::Final { .. } => "final",
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "presql",
            "linked",
            "candidate",
            "candidate",
            "vote",
            "final"
        ]
    );
}

#[test]
fn revision_fixes_an_erroring_candidate_with_full_schema_and_error() {
    let generator = by_stage(S6, |name| if name == "b" { BAD } else { S6 });
    let mut config = config(&["a", "b"]);
    config.revision.enabled = true;
    config.revision.max_rounds = 2;
    // Two agreeing voters against one failure settle the vote; revise anyway.
    config.revision.revise_settled = true;
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");

    let batches = generator.batches();
    assert_eq!(
        batches.len(),
        3,
        "the fixed candidate needs no second round"
    );
    assert_eq!(batches[2].len(), 1);
    assert_eq!(
        batches[2][0].generator, "b",
        "each generator revises its own SQL"
    );
    let revision_prompt = &batches[2][0].prompt.user;
    assert!(revision_prompt.contains(BAD));
    assert!(revision_prompt.contains("no such column: nme"));
    assert!(revision_prompt.contains("# Table: stadium"), "full schema");

    assert!(matches!(
        &answer.candidates[2].outcome,
        CandidateOutcome::Error { kind, .. } if kind == "syntax" || kind == "sqlite"
    ));
    let revised = &answer.candidates[3];
    assert_eq!(revised.round, CandidateRound::Revision { attempt: 1 });
    assert_eq!(revised.revised_from, Some(2));
    assert_eq!(revised.model, "b");
    assert!(revised.outcome.is_ok());
    assert_eq!(answer.vote.voters, vec![0, 1, 3]);
    assert_eq!(answer.vote.clusters, vec![vec![0, 1, 3]]);
}

#[test]
fn revision_stops_after_max_rounds_and_revises_the_presql_too() {
    let generator = Arc::new(ScriptedGenerator::new(|r| {
        Ok(match stage(r) {
            Stage::Round1 => BAD.to_owned(),
            Stage::Round2 => S6.to_owned(),
            // Only the PreSQL chain is revised; it keeps failing.
            Stage::Revision => "SELECT nope FROM singer".to_owned(),
        })
    }));
    let mut config = config(&["a"]);
    config.revision.enabled = true;
    config.revision.max_rounds = 2;
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    let revisions: Vec<(usize, Option<usize>, CandidateRound)> = answer
        .candidates
        .iter()
        .filter(|c| c.revised_from.is_some())
        .map(|c| (c.id, c.revised_from, c.round))
        .collect();
    assert_eq!(
        revisions,
        [
            (2, Some(0), CandidateRound::Revision { attempt: 1 }),
            (3, Some(2), CandidateRound::Revision { attempt: 2 }),
        ]
    );
    assert_eq!(generator.batches().len(), 4);
    // Failed fixes do not replace the original in the vote.
    assert_eq!(answer.vote.voters, vec![0, 1]);
    assert_eq!(answer.sql, S6);
}

#[test]
fn empty_results_are_revised_only_when_configured() {
    let empty = "SELECT Name FROM singer WHERE Country = 'Mars'";
    let fixed = "SELECT Name FROM singer WHERE Country = 'France'";
    let generator = Arc::new(ScriptedGenerator::new(move |r| {
        Ok(match stage(r) {
            Stage::Revision if r.prompt.user.contains("returned no rows") => fixed.to_owned(),
            Stage::Revision => "SELECT 0".to_owned(),
            _ => empty.to_owned(),
        })
    }));
    let mut config = config(&["a"]);
    config.round2.enabled = false;
    config.revision.enabled = true;
    let answer = pipeline(config.clone(), &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, empty);
    assert_eq!(answer.candidates.len(), 1);

    config.revision.revise_empty = true;
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, fixed);
    assert_eq!(answer.preview.map(|p| p.total_rows), Some(4));
}

#[test]
fn a_failed_round2_call_is_recorded_not_revised() {
    let generator = Arc::new(ScriptedGenerator::new(|r| {
        match (stage(r), r.generator.as_str()) {
            (Stage::Round2, "b") => Err(ModelCallError::Failed {
                name: "b".into(),
                message: "out of memory".into(),
            }),
            _ => Ok(S6.to_owned()),
        }
    }));
    let mut config = config(&["a", "b"]);
    config.revision.enabled = true;
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(generator.batches().len(), 2, "nothing to revise");
    let failed = &answer.candidates[2];
    assert_eq!(failed.sql, "");
    assert!(matches!(
        &failed.outcome,
        CandidateOutcome::Error { kind, message } if kind == "model_failed" && message.contains("out of memory")
    ));
    assert_eq!(answer.sql, S6);
    assert_eq!(answer.vote.clusters, vec![vec![0, 1]]);
}

#[test]
fn a_failed_round1_call_fails_the_run() {
    let generator = Arc::new(ScriptedGenerator::new(|_| Err(ModelCallError::Cancelled)));
    let err = pipeline(config(&["a"]), &generator, None)
        .run(QUESTION, None, &concert())
        .expect_err("no PreSQL, no answer");
    assert_eq!(err.kind(), "model");
    assert!(err.to_string().contains("round1"));
}

#[test]
fn a_generator_that_drops_results_is_an_error() {
    struct Silent;
    impl crate::model::Generator for Silent {
        fn generate_batch(
            &self,
            _: &[crate::model::GenerationRequest],
        ) -> Vec<Result<crate::model::Generation, ModelCallError>> {
            Vec::new()
        }
    }
    let models = PipelineModels {
        generator: Arc::new(Silent),
        embedder: None,
        selector: None,
        demos: None,
        context_encoder: None,
    };
    let err = Pipeline::new(config(&["a"]), models)
        .expect("valid")
        .run(QUESTION, None, &concert())
        .expect_err("batch size");
    assert_eq!(err.kind(), "batch_size");
}

#[test]
fn identical_failures_of_one_generator_share_a_revision() {
    let generator = Arc::new(ScriptedGenerator::new(|r| {
        Ok(match stage(r) {
            Stage::Round1 | Stage::Round2 => BAD.to_owned(),
            Stage::Revision => S6.to_owned(),
        })
    }));
    let mut config = config(&["a"]);
    config.revision.enabled = true;
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    let revisions: Vec<usize> = answer
        .candidates
        .iter()
        .filter(|c| c.revised_from.is_some())
        .map(|c| c.id)
        .collect();
    assert_eq!(revisions, [2], "one revision for the PreSQL and the FinSQL");
    assert_eq!(answer.vote.voters, vec![2, 2]);
    assert_eq!(answer.sql, S6);
}

#[test]
fn sampled_revision_keeps_the_most_common_fix_that_runs() {
    let generator = Arc::new(ScriptedGenerator::new(|r| {
        Ok(match stage(r) {
            Stage::Round1 | Stage::Round2 => BAD.to_owned(),
            Stage::Revision => {
                assert_eq!(r.sampling.temperature, 0.8);
                assert_eq!(r.prompt.answer_prefix.as_deref(), Some("```sql\nSELECT "));
                match r.sampling.seed {
                    Some(0) => "SELECT nope FROM singer".to_owned(),
                    Some(1) => S9.to_owned(),
                    _ => S6.to_owned(),
                }
            }
        })
    }));
    let mut config = config(&["a"]);
    config.revision.enabled = true;
    config.revision.samples = 4;
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    let revisions: Vec<usize> = answer
        .candidates
        .iter()
        .filter(|c| c.revised_from.is_some())
        .map(|c| c.id)
        .collect();
    assert_eq!(
        revisions,
        [2, 3, 4, 5],
        "four samples for the shared failure"
    );
    // Seeds 2 and 3 agree: the first of them is the fix.
    assert_eq!(answer.vote.voters, vec![4, 4]);
    assert_eq!(answer.sql, S6);
}

#[test]
fn a_misspelled_column_is_repaired_without_the_model() {
    let generator = Arc::new(ScriptedGenerator::new(|_| {
        Ok("SELECT SongName FROM singer".to_owned())
    }));
    let mut config = config(&["a"]);
    config.round2.enabled = false;
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    let presql = &answer.candidates[0];
    assert_eq!(presql.sql, "SELECT Song_Name FROM singer");
    assert_eq!(
        presql.repaired_from.as_deref(),
        Some("SELECT SongName FROM singer")
    );
    assert_eq!(presql.rewritten_by, ["repair"]);
    assert!(presql.outcome.is_ok());
    assert_eq!(generator.batches().len(), 1, "no revision call");
}

#[test]
fn constrained_runs_send_every_stage_the_grammar_of_the_whole_schema() {
    let generator = Arc::new(ScriptedGenerator::new(|r| {
        Ok(match stage(r) {
            Stage::Round1 => S6.to_owned(),
            Stage::Round2 => "count(*) FROM singer".to_owned(),
            Stage::Revision => "SELECT 0".to_owned(),
        })
    }));
    let mut config = config(&["a"]);
    config.constrained = true;
    let constrained = pipeline(config.clone(), &generator, None);
    let answer = constrained
        .run(QUESTION, None, &concert())
        .expect("answers");
    let batches = generator.batches();
    let full = batches[0][0].grammar.as_deref().expect("round 1 grammar");
    assert!(full.contains("\"stadium\"i") && full.contains("\"singer\"i"));
    // Round 2 shows only the linked table but may name any: its grammar is the schema's.
    assert!(!batches[1][0].prompt.user.contains("stadium"));
    assert_eq!(batches[1][0].grammar.as_deref(), Some(full));
    assert!(answer.candidates.iter().all(|c| c.constrained));

    config.constrained = false;
    let generator = Arc::new(ScriptedGenerator::new(|_| Ok(S6.to_owned())));
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert!(
        generator
            .batches()
            .iter()
            .flatten()
            .all(|r| r.grammar.is_none())
    );
    assert!(answer.candidates.iter().all(|c| !c.constrained));
}

/// Revision under the default rule when round 1 writes `presql` and the round-2 generators
/// `failing` write BAD, the others S6: the generators revision asked, and the unrevised ids.
fn revised_when(
    presql: &'static str,
    names: &[&str],
    failing: &'static [&'static str],
) -> (Vec<String>, Vec<usize>) {
    let generator = by_stage(
        presql,
        move |name| if failing.contains(&name) { BAD } else { S6 },
    );
    let mut config = config(names);
    config.revision.enabled = true;
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, S6);
    (revision_generators(&generator), answer.unrevised)
}

/// The generators the revision stage asked, in order.
fn revision_generators(generator: &ScriptedGenerator) -> Vec<String> {
    generator
        .batches()
        .iter()
        .flatten()
        .filter(|r| stage(r) == Stage::Revision)
        .map(|r| r.generator.clone())
        .collect()
}

#[test]
fn a_failure_that_cannot_change_the_majority_is_not_revised() {
    // Three agreeing voters (PreSQL, a, b) against one failure: no group it joins can win.
    assert_eq!(
        revised_when(S6, &["a", "b", "c"], &["c"]),
        (vec![], vec![3])
    );
    assert_eq!(revised_when(S6, &["a", "b"], &["a"]), (vec![], vec![1]));
    // Two against two failures could tie or lose: both are revised.
    assert_eq!(
        revised_when(S6, &["a", "b", "c"], &["b", "c"]),
        (vec!["b".to_owned(), "c".to_owned()], vec![])
    );
    // Three against a failed PreSQL: its fix would join the leading group ahead of its first
    // voter and become the answer's text, so it is revised.
    assert_eq!(
        revised_when(BAD, &["a", "b", "c"], &[]),
        (vec!["a".to_owned()], vec![])
    );
}

#[test]
fn a_settled_vote_is_revised_when_asked_or_when_voting_is_not_majority() {
    let generator = by_stage(S6, |name| if name == "c" { BAD } else { S6 });
    for (revise_settled, voting) in [(true, VotingMode::Majority), (false, VotingMode::None)] {
        let mut config = config(&["a", "b", "c"]);
        config.revision.enabled = true;
        config.revision.revise_settled = revise_settled;
        config.voting = voting;
        let answer = pipeline(config, &generator, None)
            .run(QUESTION, None, &concert())
            .expect("answers");
        assert!(answer.unrevised.is_empty(), "{voting:?}");
        assert_eq!(
            answer.candidates.last().map(|c| c.round),
            Some(CandidateRound::Revision { attempt: 1 }),
            "{voting:?}"
        );
    }
}

#[test]
fn with_revise_beside_results_off_only_a_question_where_nothing_ran_is_revised() {
    // Two voters under the selector: the PreSQL and `a`. A lone failure beside a query that ran
    // is revised by default (its fix could split the vote); with the knob off it is left, and
    // reported unrevised. When both fail, they are revised either way (one fix for the two:
    // the same query by the same generator).
    let selector = Arc::new(crate::fakes::FixedSelector::new(Ok(vec![0.0, 0.0])));
    for (presql, beside, revised, unrevised) in [
        (S6, true, vec!["a"], vec![]),
        (S6, false, vec![], vec![1]),
        (BAD, true, vec!["a"], vec![]),
        (BAD, false, vec!["a"], vec![]),
    ] {
        let generator = by_stage(presql, |_| BAD);
        let mut config = config(&["a"]);
        config.revision.enabled = true;
        config.selector.enabled = true;
        config.revision.revise_beside_results = beside;
        let answer = pipeline(config, &generator, Some(&selector))
            .run(QUESTION, None, &concert())
            .expect("answers");
        assert_eq!(
            revision_generators(&generator),
            revised,
            "{presql} beside={beside}"
        );
        assert_eq!(answer.unrevised, unrevised, "{presql} beside={beside}");
        assert_eq!(answer.sql, S6, "{presql} beside={beside}");
    }
}

/// concert_singer's database with 12 copies of its first table beside it: 16 tables.
fn concert_with_ledgers() -> crate::database::DatabaseHandle {
    let real = concert();
    let mut schema = real.schema.clone();
    for i in 0..12 {
        let mut ledger = schema.tables[0].clone();
        ledger.name = format!("ledger_{i}");
        schema.tables.push(ledger);
    }
    crate::database::DatabaseHandle::new("concert_singer", real.backend.clone(), schema)
}

/// A schema above the filter's threshold: every prompt shows the tables the question is about
/// (and what joins them), the answer says which, and SQL over them still runs on the database.
#[test]
fn a_large_schema_is_filtered_before_the_first_prompt() {
    let big = concert_with_ledgers();
    let generator = by_stage(S6, |_| S6);
    let mut filtering = config(&["a"]);
    filtering.schema_filter_above = 10;
    let answer = pipeline(filtering, &generator, None)
        .run(QUESTION, None, &big)
        .expect("answers");
    let filter = answer.schema_filter.expect("16 tables are filtered");
    assert_eq!(filter.schema_tables, 16);
    assert!(filter.tables.iter().any(|t| t == "singer"), "{filter:?}");
    assert!(filter.tables.len() < 16, "{filter:?}");
    let round1 = &generator.batches()[0][0].prompt.user;
    for table in &big.schema.tables {
        let shown = filter.tables.contains(&table.name);
        assert_eq!(
            round1.contains(&format!("# {}(", table.name)),
            shown,
            "{}: {round1}",
            table.name
        );
    }
    assert_eq!(answer.sql, S6);
    assert!(answer.preview.is_some());
    // At the threshold or with the filter off the schema is shown whole.
    let mut whole = config(&["a"]);
    whole.schema_filter_above = 16;
    let answer = pipeline(whole, &generator, None)
        .run(QUESTION, None, &big)
        .expect("answers");
    assert_eq!(answer.schema_filter, None);
}

#[test]
fn an_embedder_that_answers_no_question_vector_fails_the_filter_stage() {
    /// Embeds the tables (many texts at once) but answers nothing for the question alone.
    struct DropsQuestion(crate::fakes::BagOfWords);
    impl crate::model::Embedder for DropsQuestion {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelCallError> {
            let vectors = self.0.embed(texts)?;
            Ok(if texts.len() == 1 {
                Vec::new()
            } else {
                vectors
            })
        }
    }
    let big = concert_with_ledgers();
    let generator = by_stage(S6, |_| S6);
    let mut filtering = config(&["a"]);
    filtering.schema_filter_above = 10;
    let run = |embedder: Arc<dyn crate::model::Embedder>| {
        let models = crate::pipeline::PipelineModels {
            generator: generator.clone(),
            embedder: Some(embedder),
            selector: None,
            demos: None,
            context_encoder: None,
        };
        crate::pipeline::Pipeline::new(filtering.clone(), models)
            .expect("valid pipeline")
            .run(QUESTION, None, &big)
    };
    let err = run(Arc::new(DropsQuestion(crate::fakes::BagOfWords::default())))
        .expect_err("a missing question vector is the embedder's failure");
    assert!(
        matches!(
            err,
            crate::pipeline::RunError::Model {
                stage: "schema_filter",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("returned 0 vectors"), "{err}");
    // A well-formed embedder filters the same schema.
    let answer = run(Arc::new(crate::fakes::BagOfWords::default())).expect("answers");
    assert_eq!(answer.schema_filter.expect("filtered").schema_tables, 16);
}

#[test]
fn with_the_defect_check_a_defective_majority_loses_to_a_sound_query() {
    let defective = "SELECT T1.Name FROM singer AS T1 JOIN singer_in_concert AS T2 \
                     ON T1.Name = T1.Name";
    let sound = "SELECT T1.Name FROM singer AS T1 JOIN singer_in_concert AS T2 \
                 ON T1.Singer_ID = T2.Singer_ID";
    let generator = Arc::new(ScriptedGenerator::new(move |r| {
        Ok(match (stage(r), r.generator.as_str()) {
            (Stage::Round2, "b") => format!("{sound}\n```"),
            _ => defective.to_owned(),
        })
    }));
    let mut config = config(&["a", "b"]);
    config.generators[1].format = PromptFormat::MSchema;
    config.revision.enabled = true;
    // Mending would join the defective query by its key; the check alone is tested here.
    config.rules.mend_self_joins = false;
    assert!(config.defect_check, "on by default");
    config.defect_check = false;
    let answer = pipeline(config.clone(), &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(
        answer.sql, defective,
        "two defective votes beat one sound one"
    );

    config.defect_check = true;
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, sound);
    // The defective heads count as failed: one group is left, with nothing to select among.
    assert_eq!(answer.vote.clusters.len(), 1);
}

#[test]
fn an_either_filter_for_a_both_question_answers_with_the_intersection() {
    let question = "What are the names of the stadiums that had concerts in both 2014 and 2015?";
    let either = "SELECT T2.Name FROM concert AS T1 JOIN stadium AS T2 \
                  ON T1.Stadium_ID = T2.Stadium_ID WHERE T1.Year IN (2014, 2015)";
    let generator = Arc::new(ScriptedGenerator::new(move |_| Ok(either.to_owned())));
    let mut config = config(&["a"]);
    config.rules.both_as_intersection = false;
    let answer = pipeline(config.clone(), &generator, None)
        .run(question, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, either);
    let either_rows = answer.preview.expect("a preview").rows.len();

    assert!(
        PipelineConfig::new(Vec::new()).rules.both_as_intersection,
        "on by default"
    );
    config.rules.both_as_intersection = true;
    let answer = pipeline(config, &generator, None)
        .run(question, None, &concert())
        .expect("answers");
    assert!(answer.sql.contains(" INTERSECT "), "{}", answer.sql);
    assert!(answer.sql.contains("T1.Year = 2014"), "{}", answer.sql);
    for candidate in &answer.candidates {
        assert_eq!(candidate.repaired_from.as_deref(), Some(either));
        assert_eq!(candidate.rewritten_by, ["both_as_intersection"]);
        assert!(matches!(candidate.outcome, CandidateOutcome::Ok { .. }));
    }
    // concert_singer's stadiums: some had concerts in either year, fewer in both.
    let both_rows = answer.preview.expect("a preview").rows.len();
    assert!(both_rows < either_rows, "{both_rows} < {either_rows}");
}

#[test]
fn totals_grouped_by_what_the_answer_does_not_name_become_one_row() {
    let question = "How many concerts were held in 2014? Return the number of concerts.";
    let grouped = "SELECT count(*) FROM concert WHERE Year = 2014 GROUP BY Stadium_ID";
    let generator = Arc::new(ScriptedGenerator::new(move |_| Ok(grouped.to_owned())));
    let mut config = config(&["a"]);
    config.rules.drop_unlabeled_groups = false;
    let answer = pipeline(config.clone(), &generator, None)
        .run(question, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, grouped);
    assert!(answer.preview.expect("a preview").rows.len() > 1);

    assert!(
        PipelineConfig::new(Vec::new()).rules.drop_unlabeled_groups,
        "on by default"
    );
    config.rules.drop_unlabeled_groups = true;
    let answer = pipeline(config, &generator, None)
        .run(question, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, "SELECT count(*) FROM concert WHERE Year = 2014");
    for candidate in &answer.candidates {
        assert_eq!(candidate.rewritten_by, ["drop_unlabeled_groups"]);
    }
    assert_eq!(answer.preview.expect("a preview").rows.len(), 1);
}

#[test]
fn a_join_on_nothing_is_joined_by_the_schemas_keys() {
    let question = "What are the names of the singers who sang in a concert in 2014?";
    let on_nothing = "SELECT DISTINCT T1.Name FROM singer AS T1 JOIN concert AS T2 \
                      ON T2.concert_ID = T2.concert_ID WHERE T2.Year = 2014";
    let generator = Arc::new(ScriptedGenerator::new(move |_| Ok(on_nothing.to_owned())));
    let mut config = config(&["a"]);
    config.rules.mend_self_joins = false;
    let answer = pipeline(config.clone(), &generator, None)
        .run(question, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, on_nothing);
    // Every singer, paired with every 2014 concert.
    let everyone = answer.preview.expect("a preview").rows.len();

    assert!(
        PipelineConfig::new(Vec::new()).rules.mend_self_joins,
        "on by default"
    );
    config.rules.mend_self_joins = true;
    let answer = pipeline(config, &generator, None)
        .run(question, None, &concert())
        .expect("answers");
    // singer and concert have no key between them; singer_in_concert links the two.
    assert!(
        answer
            .sql
            .contains("JOIN singer_in_concert ON T1.Singer_ID = singer_in_concert.Singer_ID"),
        "{}",
        answer.sql
    );
    assert!(
        answer
            .sql
            .contains("ON singer_in_concert.concert_ID = T2.concert_ID"),
        "{}",
        answer.sql
    );
    for candidate in &answer.candidates {
        assert_eq!(candidate.repaired_from.as_deref(), Some(on_nothing));
        assert_eq!(candidate.rewritten_by, ["mend_self_joins"]);
        assert!(matches!(candidate.outcome, CandidateOutcome::Ok { .. }));
    }
    let sang = answer.preview.expect("a preview").rows.len();
    assert!(0 < sang && sang < everyone, "0 < {sang} < {everyone}");
}

#[test]
fn a_value_spelt_as_the_question_spells_it_is_respelled_as_stored() {
    let question = "What are the names of the singers from the netherlands?";
    let as_asked = "SELECT Name FROM singer WHERE Country = 'netherlands'";
    let generator = Arc::new(ScriptedGenerator::new(move |_| Ok(as_asked.to_owned())));
    let mut config = config(&["a"]);
    config.rules.respell_values = false;
    let answer = pipeline(config.clone(), &generator, None)
        .run(question, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, as_asked);
    assert!(answer.preview.expect("a preview").rows.is_empty());

    assert!(
        PipelineConfig::new(Vec::new()).rules.respell_values,
        "on by default"
    );
    config.rules.respell_values = true;
    let answer = pipeline(config, &generator, None)
        .run(question, None, &concert())
        .expect("answers");
    assert_eq!(
        answer.sql,
        "SELECT Name FROM singer WHERE Country = 'Netherlands'"
    );
    for candidate in &answer.candidates {
        assert_eq!(candidate.repaired_from.as_deref(), Some(as_asked));
        assert_eq!(candidate.rewritten_by, ["respell_values"]);
    }
    assert!(!answer.preview.expect("a preview").rows.is_empty());
}

#[test]
fn a_join_the_answer_does_not_read_is_dropped() {
    let question = "What are the names of all the stadiums?";
    let joined = "SELECT T1.Name FROM stadium AS T1 JOIN concert AS T2 \
                  ON T1.Stadium_ID = T2.Stadium_ID";
    let generator = Arc::new(ScriptedGenerator::new(move |_| Ok(joined.to_owned())));
    let mut config = config(&["a"]);
    config.rules.drop_unused_joins = false;
    let answer = pipeline(config.clone(), &generator, None)
        .run(question, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, joined);
    // One row a concert: stadiums without one left out, one with two named twice.
    let per_concert = answer.preview.expect("a preview").rows.len();

    assert!(
        PipelineConfig::new(Vec::new()).rules.drop_unused_joins,
        "on by default"
    );
    config.rules.drop_unused_joins = true;
    let answer = pipeline(config, &generator, None)
        .run(question, None, &concert())
        .expect("answers");
    assert_eq!(answer.sql, "SELECT T1.Name FROM stadium AS T1");
    for candidate in &answer.candidates {
        assert_eq!(candidate.repaired_from.as_deref(), Some(joined));
        assert_eq!(candidate.rewritten_by, ["drop_unused_joins"]);
        assert!(matches!(candidate.outcome, CandidateOutcome::Ok { .. }));
    }
    let stadiums = answer.preview.expect("a preview").rows.len();
    assert_eq!((per_concert, stadiums), (6, 9));
}

#[test]
fn a_grouping_by_a_name_is_keyed_by_the_row() {
    // network_1 has two students called Gabriel and two called Jordan.
    let network = crate::database::DatabaseHandle::open(
        &crate::spider_fixture::spider_db("network_1"),
        "network_1",
        crate::schema::IntrospectOptions::default(),
    )
    .expect("network_1 introspects");
    let question = "How many friends does each high schooler have? Show their names.";
    let by_name = "SELECT T1.name, COUNT(*) FROM Highschooler AS T1 JOIN Friend AS T2 \
                   ON T1.ID = T2.student_id GROUP BY T1.name";
    let generator = Arc::new(ScriptedGenerator::new(move |_| Ok(by_name.to_owned())));
    let mut config = config(&["a"]);
    config.rules.group_by_key = false;
    let answer = pipeline(config.clone(), &generator, None)
        .run(question, None, &network)
        .expect("answers");
    assert_eq!(answer.sql, by_name);
    let names = answer.preview.expect("a preview").rows.len();

    assert!(
        PipelineConfig::new(Vec::new()).rules.group_by_key,
        "on by default"
    );
    config.rules.group_by_key = true;
    let answer = pipeline(config, &generator, None)
        .run(question, None, &network)
        .expect("answers");
    assert_eq!(
        answer.sql,
        "SELECT T1.name, COUNT(*) FROM Highschooler AS T1 JOIN Friend AS T2 \
         ON T1.ID = T2.student_id GROUP BY T1.name, T1.ID"
    );
    for candidate in &answer.candidates {
        assert_eq!(candidate.repaired_from.as_deref(), Some(by_name));
        assert_eq!(candidate.rewritten_by, ["group_by_key"]);
    }
    let students = answer.preview.expect("a preview").rows.len();
    assert_eq!((names, students), (12, 14));
}

#[test]
fn term_hints_tell_every_prompt_what_a_word_means_and_are_reported() {
    /// "vocalists" and `singer` share a direction; every other text has one of its own.
    struct Synonyms;
    impl crate::model::Embedder for Synonyms {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelCallError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = crate::fakes::BagOfWords::vector(t);
                    if *t == "vocalists" || *t == "singer" {
                        v = vec![0.0; v.len()];
                        v[0] = 1.0;
                    }
                    v
                })
                .collect())
        }
    }
    let question = "How many vocalists are there?";
    let generator = Arc::new(ScriptedGenerator::new(|_| {
        Ok("SELECT count(*) FROM singer".to_owned())
    }));
    let models =
        |embedder: Option<Arc<dyn crate::model::Embedder>>| crate::pipeline::PipelineModels {
            generator: generator.clone(),
            embedder,
            selector: None,
            demos: None,
            context_encoder: None,
        };
    let mut hinted = config(&["a"]);
    assert!(!hinted.term_hints, "off by default");
    hinted.term_hints = true;
    let without_embedder = Pipeline::new(hinted.clone(), models(None));
    assert!(
        matches!(without_embedder, Err(crate::pipeline::RunError::MissingModel { what }) if what.contains("term hints")),
        "term hints need an embedder"
    );
    let answer = Pipeline::new(hinted, models(Some(Arc::new(Synonyms))))
        .expect("valid pipeline")
        .run(question, Some("count each once"), &concert())
        .expect("answers");
    assert_eq!(answer.term_hints.len(), 1, "{:?}", answer.term_hints);
    assert_eq!(answer.term_hints[0].word, "vocalists");
    assert_eq!(answer.term_hints[0].target, "table singer");
    let prompts: Vec<String> = generator
        .batches()
        .concat()
        .into_iter()
        .map(|r| r.prompt.user)
        .collect();
    assert!(prompts.len() >= 2, "round 1 and round 2");
    for prompt in &prompts {
        assert!(
            prompt.contains("count each once; in this database, \"vocalists\" means table singer"),
            "{prompt}"
        );
    }
}
