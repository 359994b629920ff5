//! Each stage switch of the configuration, and the checks `Pipeline::new` makes.

use std::sync::Arc;

use super::*;
use super::{Stage, stage};
use crate::demo_index::DemoIndex;
use crate::demo_index::tests::train_subset;
use crate::fakes::{BagOfWords, ScriptedGenerator};
use crate::model::Sampling;
use crate::prompt::Template;
use crate::spider_fixture::spider;
use crate::vote::VotingMode;

#[test]
fn round2_off_answers_with_the_presql() {
    let generator = by_stage(S6, |_| S9);
    let mut config = config(&["a", "b"]);
    config.round2.enabled = false;
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(generator.batches().len(), 1);
    assert!(answer.linking.is_none());
    assert_eq!(answer.candidates.len(), 1);
    assert_eq!(answer.vote.voters, vec![0]);
    assert_eq!(answer.sql, S6);
}

#[test]
fn voting_off_answers_with_the_first_generators_finsql() {
    let generator = by_stage(S6, |name| if name == "a" { S9 } else { S6 });
    let mut config = config(&["a", "b"]);
    config.voting = VotingMode::None;
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(answer.vote.mode, VotingMode::None);
    assert_eq!(answer.vote.winner, Some(1));
    assert_eq!(answer.sql, S9, "majority would have chosen S6");
}

#[test]
fn unlinked_presql_falls_back_to_all_tables_or_skips_round2() {
    let generator = Arc::new(ScriptedGenerator::new(|_| Ok("SELECT 1".to_owned())));
    let mut config = config(&["a"]);
    let answer = pipeline(config.clone(), &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    let linking = answer.linking.expect("round 2 ran");
    assert!(linking.fell_back_to_all);
    assert_eq!(linking.tables.len(), 4);
    assert!(generator.batches()[1][0].prompt.user.contains("# stadium("));

    config.round2.all_tables_when_unlinked = false;
    let generator = Arc::new(ScriptedGenerator::new(|_| Ok("SELECT 1".to_owned())));
    let answer = pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert_eq!(generator.batches().len(), 1, "no round 2 without tables");
    assert_eq!(answer.linking.map(|l| l.tables.len()), Some(0));
    assert_eq!(answer.sql, "SELECT 1");
}

#[test]
fn link_columns_adds_the_table_that_owns_a_misplaced_column() {
    // `Capacity` is a column of `stadium` alone; the PreSQL reads it from `singer`.
    let linked_tables = |link_columns: bool| {
        let generator = Arc::new(ScriptedGenerator::new(|_| {
            Ok("SELECT max(Capacity) FROM singer".to_owned())
        }));
        let mut config = config(&["a"]);
        config.round2.link_columns = link_columns;
        let answer = pipeline(config, &generator, None)
            .run(QUESTION, None, &concert())
            .expect("answers");
        let round2 = &generator.batches()[1][0].prompt.user;
        let tables = answer.linking.expect("round 2 ran").tables;
        assert_eq!(
            tables.iter().any(|t| t == "stadium"),
            round2.contains("# stadium("),
            "the prompt shows what is linked"
        );
        tables
    };
    assert_eq!(linked_tables(false), ["singer"]);
    assert!(linked_tables(true).contains(&"stadium".to_owned()));
}

#[test]
fn link_named_tables_adds_the_tables_the_question_names() {
    // The question names `stadium`; the PreSQL reads `singer` alone.
    let question = "What is the average age of the singers who sang in a stadium?";
    let linking = |link_named_tables: bool, presql: &'static str| {
        let generator = Arc::new(ScriptedGenerator::new(move |_| Ok(presql.to_owned())));
        let mut config = config(&["a"]);
        config.round2.link_named_tables = link_named_tables;
        let answer = pipeline(config, &generator, None)
            .run(question, None, &concert())
            .expect("answers");
        let linking = answer.linking.expect("round 2 ran");
        let round2 = &generator.batches()[1][0].prompt.user;
        assert_eq!(
            linking.tables.iter().any(|t| t == "stadium"),
            round2.contains("# stadium("),
            "the prompt shows what is linked"
        );
        linking
    };
    let presql = "SELECT avg(Age) FROM singer";
    assert_eq!(linking(false, presql).tables, ["singer"]);
    // `stadium` and the tables that join it to `singer`.
    let tables = linking(true, presql).tables;
    for table in ["stadium", "concert", "singer_in_concert", "singer"] {
        assert!(tables.iter().any(|t| t == table), "{table} in {tables:?}");
    }
    // A PreSQL that links nothing still falls back to the whole schema: the question's names
    // alone do not restrict round 2.
    assert!(linking(true, "SELECT 1").fell_back_to_all);
}

#[test]
fn round1_format_and_rep_switches_shape_the_prompt() {
    let round1_prompt = |config: PipelineConfig| {
        let generator = by_stage(S6, |_| S6);
        pipeline(config, &generator, None)
            .run(QUESTION, None, &concert())
            .expect("answers");
        generator.batches()[0][0].prompt.user.clone()
    };
    let full = round1_prompt(config(&["a"]));
    assert!(full.contains("### Here are some data information"));
    assert!(full.contains("### Foreign key information"));
    assert!(full.contains("minimize SQL execution time"));

    let mut bare = config(&["a"]);
    bare.round1.rep.cell_values = false;
    bare.round1.rep.foreign_keys = false;
    bare.round1.rep.optimization_rule = false;
    let bare = round1_prompt(bare);
    assert!(!bare.contains("data information") && !bare.contains("Foreign key"));
    assert!(!bare.contains("minimize SQL execution time"));

    let mut ddl = config(&["a"]);
    ddl.round1.format = PromptFormat::Template(Template::DdlMdChat);
    let ddl = round1_prompt(ddl);
    assert!(ddl.to_lowercase().contains("create table"), "{ddl}");
}

#[test]
fn each_generator_gets_its_own_sampling() {
    let generator = by_stage(S6, |_| S6);
    let mut config = config(&["a", "b"]);
    let sampling = Sampling {
        temperature: 0.1,
        top_p: 0.8,
        max_new_tokens: 300,
        seed: Some(7),
    };
    config.generators[1].sampling = sampling;
    pipeline(config, &generator, None)
        .run(QUESTION, None, &concert())
        .expect("answers");
    let round2 = &generator.batches()[1];
    assert_eq!(round2[0].sampling, Sampling::default());
    assert_eq!(round2[1].sampling, sampling);
}

fn demo_models(generator: &Arc<ScriptedGenerator>) -> PipelineModels {
    let embedder = Arc::new(BagOfWords::default());
    let index = DemoIndex::build(&train_subset(400), &spider().database_dir(), &*embedder)
        .expect("index builds");
    PipelineModels {
        generator: generator.clone(),
        embedder: Some(embedder),
        selector: None,
        demos: Some(Arc::new(index)),
        context_encoder: None,
    }
}

#[test]
fn demos_are_retrieved_for_both_rounds() {
    let generator = Arc::new(ScriptedGenerator::new(|r| {
        Ok(match stage(r) {
            Stage::Round1 | Stage::Round2 => S6.to_owned(),
            Stage::Revision => BAD.to_owned(),
        })
    }));
    let mut config = config(&["a", "b"]);
    config.generators[1].format = PromptFormat::MSchema;
    config.round1.shots = 3;
    config.round2.shots = 2;
    let pipeline = Pipeline::new(config, demo_models(&generator)).expect("valid");
    let answer = pipeline.run(QUESTION, None, &concert()).expect("answers");
    assert_eq!(answer.demos.len(), 3);
    let batches = generator.batches();
    let header = "### Some example pairs of question and corresponding SQL query";
    let round1 = &batches[0][0].prompt.user;
    assert!(round1.starts_with(header));
    for demo in &answer.demos {
        assert!(round1.contains(&format!("### {demo}\n")));
    }
    assert_eq!(batches[1][0].prompt.user.matches("\n\n### ").count(), 2 + 1);
    assert!(
        !batches[1][1].prompt.user.contains(header),
        "M-Schema is zero-shot"
    );
    assert!(answer.timings.retrieval_ms > 0.0);
}

#[test]
fn new_rejects_unusable_configurations() {
    let generator = by_stage(S6, |_| S6);
    let models = |with_demos: bool| {
        if with_demos {
            demo_models(&generator)
        } else {
            PipelineModels {
                generator: generator.clone(),
                embedder: None,
                selector: None,
                demos: None,
                context_encoder: None,
            }
        }
    };
    let err = Pipeline::new(config(&[]), models(false)).expect_err("no generators");
    assert_eq!(err.kind(), "config");
    let mut shots = config(&["a"]);
    shots.round1.shots = 9;
    let err = Pipeline::new(shots, models(false)).expect_err("no demo index");
    assert_eq!(err.kind(), "missing_model");
    assert!(err.to_string().contains("demonstration index"));
    let mut selecting = config(&["a"]);
    selecting.selector.enabled = true;
    let err = Pipeline::new(selecting, models(false)).expect_err("no selector");
    assert_eq!(err.kind(), "missing_model");
    // Shots with a format that shows no demonstrations are refused, not silently dropped.
    let mut zero_shot = config(&["a"]);
    zero_shot.round1.shots = 9;
    zero_shot.round1.format = PromptFormat::SimpleDdl;
    zero_shot.round2.enabled = false;
    let err = Pipeline::new(zero_shot, models(true)).expect_err("shots SimpleDDL cannot show");
    assert_eq!(err.kind(), "config");
    assert!(err.to_string().contains("simple_ddl"), "{err}");
    let mut no_rep = config(&["a"]);
    no_rep.generators[0].format = PromptFormat::MSchema;
    no_rep.round2.shots = 2;
    let err = Pipeline::new(no_rep, models(true)).expect_err("no RE_p generator in round 2");
    assert!(err.to_string().contains("round2 shots"), "{err}");
}

#[test]
fn zero_shot_round1_reports_no_demos() {
    let generator = by_stage(S6, |_| S6);
    let mut config = config(&["a"]);
    config.round1.format = PromptFormat::SimpleDdl;
    config.round2.shots = 2;
    let answer = Pipeline::new(config, demo_models(&generator))
        .expect("valid")
        .run(QUESTION, None, &concert())
        .expect("answers");
    assert!(answer.demos.is_empty());
    let batches = generator.batches();
    assert!(!batches[0][0].prompt.user.contains("example pairs"));
    assert!(
        batches[1][0].prompt.user.contains("example pairs"),
        "round 2 is RE_p"
    );
}

#[test]
fn evidence_filter_keeps_unasked_definitions_out_of_every_prompt() {
    let evidence = "SLR = singers with a long record\nXQZ = concerts over capacity\nAlways count each singer once.";
    let prompts = |config: PipelineConfig| {
        // A failing FinSQL so that a revision prompt is written too.
        let generator = by_stage(S6, |_| BAD);
        let answer = pipeline(config, &generator, None)
            .run(
                "How many SLR singers do we have?",
                Some(evidence),
                &concert(),
            )
            .expect("answers");
        let prompts: Vec<String> = generator
            .batches()
            .iter()
            .flatten()
            .map(|r| r.prompt.user.clone())
            .collect();
        (answer, prompts)
    };
    let mut filtered = config(&["a", "b"]);
    filtered.revision.enabled = true;
    assert!(filtered.evidence_filter, "on by default");
    let (answer, told) = prompts(filtered.clone());
    assert!(
        told.iter().any(|p| p.contains("【Execution result】")),
        "a revision ran"
    );
    for prompt in &told {
        assert!(
            prompt.contains("SLR = singers with a long record"),
            "{prompt}"
        );
        assert!(prompt.contains("Always count each singer once."));
        assert!(!prompt.contains("XQZ"), "{prompt}");
    }
    assert_eq!(answer.evidence_set_aside, ["XQZ = concerts over capacity"]);

    filtered.evidence_filter = false;
    let (answer, told) = prompts(filtered);
    assert!(
        told.iter()
            .all(|p| p.contains("XQZ = concerts over capacity"))
    );
    assert!(answer.evidence_set_aside.is_empty());
}
