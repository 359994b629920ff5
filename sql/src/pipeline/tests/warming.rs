//! Warming a database's prompts: what is asked, and that a question's prompts begin with it.

use std::sync::Arc;

use super::*;
use crate::fakes::ScriptedGenerator;

/// The length of the common beginning of two texts, in bytes.
fn shared_start(a: &str, b: &str) -> usize {
    a.bytes().zip(b.bytes()).take_while(|(x, y)| x == y).count()
}

#[test]
fn warming_asks_one_token_of_each_prompt_kind_under_its_own_tag() {
    let mut config = config(&["a", "b", "a"]);
    config.revision.enabled = true;
    let generator = by_stage(BAD, |_| BAD);
    let pipeline = pipeline(config, &generator, None);
    let db = concert();
    let report = pipeline.warm(&db).expect("warm");
    // Round 1 on the first generator; a revision prompt per distinct generator.
    assert_eq!(report.prompts, 3);
    assert_eq!(report.skipped, None);
    let batches = generator.batches();
    assert_eq!(batches.len(), 1, "one batched call");
    let tags: Vec<&str> = batches[0]
        .iter()
        .map(|r| r.keep_prefix.as_deref().expect("tagged"))
        .collect();
    assert_eq!(
        tags,
        [
            "concert_singer/a/round1",
            "concert_singer/a/revision",
            "concert_singer/b/revision"
        ]
    );
    assert!(batches[0].iter().all(|r| r.sampling.max_new_tokens == 1));
    let kinds: Vec<Stage> = batches[0].iter().map(stage).collect();
    assert_eq!(kinds, [Stage::Round1, Stage::Revision, Stage::Revision]);

    // A question's round-1 and revision prompts begin with what was warmed, up to the
    // question: the schema, whole.
    pipeline.run(QUESTION, None, &db).expect("run");
    let asked = generator.batches();
    let round1 = &asked[1][0].prompt.user;
    let revision = &asked
        .iter()
        .flatten()
        .find(|r| stage(r) == Stage::Revision && r.keep_prefix.is_none())
        .expect("a revision")
        .prompt
        .user;
    for (warmed, asked) in [
        (&batches[0][0].prompt.user, round1),
        (&batches[0][1].prompt.user, revision),
    ] {
        let shared = shared_start(warmed, asked);
        let schema_end = asked.rfind("stadium").expect("the schema shows stadium");
        assert!(shared > schema_end, "{shared} of {asked:?}");
    }
    // Questions' own requests keep nothing.
    assert!(asked[1..].iter().flatten().all(|r| r.keep_prefix.is_none()));
}

#[test]
fn a_filtered_schema_is_not_warmed() {
    let mut config = config(&["a"]);
    config.schema_filter_above = 2;
    let generator = Arc::new(ScriptedGenerator::new(|_| Ok(S6.to_owned())));
    let report = pipeline(config, &generator, None)
        .warm(&concert())
        .expect("warm");
    assert_eq!(report.prompts, 0);
    assert!(report.skipped.is_some());
    assert!(generator.batches().is_empty());
}
