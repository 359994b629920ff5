//! Gold against gold through the whole harness on the `usable` slice of Spider dev: a predictor
//! that answers with the gold SQL and the gold SQL's own linked tables must score EX = VA = R_e
//! = R_s = RES = 1, and the hardness counts of the run must be those computed directly from
//! dev.json. This checks the runner end to end (selection, databases, scoring, records,
//! summary) on every database the benchmark uses.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Instant;

use quorum_eval::{
    EvalOptions, Level, Prediction, ScoreOptions, Selection, read_records, run_eval,
    select_examples,
};
use quorum_sql::dataset::SpiderDataset;
use quorum_sql::hardness::{Hardness, hardness};
use quorum_sql::linking::tables::link_tables;
use quorum_sql::schema::{IntrospectOptions, Schema};

fn spider_dir() -> PathBuf {
    match std::env::var_os("QUORUM_SPIDER_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/spider"),
    }
}

fn counts(levels: impl Iterator<Item = Hardness>) -> [usize; 4] {
    let mut out = [0; 4];
    for h in levels {
        out[h as usize] += 1;
    }
    out
}

#[test]
fn gold_scores_perfectly_on_the_usable_slice() {
    let data = SpiderDataset::new(spider_dir());
    let dev = data.dev().expect("dev.json (set QUORUM_SPIDER_DIR)");
    let slices = data.slices().expect("slices.json");
    let selection = Selection {
        slice: Some("usable".to_owned()),
        ..Selection::default()
    };
    let examples = select_examples(&dev, &slices, &selection).expect("usable slice");
    assert_eq!(examples.len(), 972);

    let schemas: std::sync::Mutex<HashMap<String, Schema>> = Default::default();
    let gold_predictor = |_: usize, e: &quorum_sql::dataset::Example| {
        let mut schemas = schemas.lock().expect("lock");
        let schema = schemas.entry(e.db_id.clone()).or_insert_with(|| {
            let bare = IntrospectOptions {
                sample_rows: 0,
                distinct_examples: 0,
            };
            Schema::from_sqlite(&data.database_path(&e.db_id), &e.db_id, bare)
                .unwrap_or_else(|err| panic!("introspect {}: {err}", e.db_id))
        });
        Prediction {
            linked_tables: Some(link_tables(&e.query, schema).tables),
            ..Prediction::sql(e.query.clone())
        }
    };
    // The default 10 timing pairs per question (not BIRD's 100) keep the run to a few seconds;
    // gold against gold only needs VES near 100.
    let options = EvalOptions {
        database_dir: data.database_dir(),
        opener: None,
        gold_as_written: false,
        score: ScoreOptions::default(),
        concurrency: 1,
    };
    let dir = std::env::temp_dir().join(format!("quorum-eval-gold-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let out = dir.join("gold.jsonl");
    let _ = std::fs::remove_file(&out);

    let start = Instant::now();
    let summary =
        run_eval(&examples, &gold_predictor, &out, &options, &mut |_, _| {}).expect("run");
    let elapsed = start.elapsed();
    println!("{}", summary.to_markdown());
    println!("gold run over {} questions in {elapsed:?}", examples.len());

    let failures: Vec<String> = read_records(&out)
        .expect("records")
        .records
        .into_iter()
        .filter(|r| !r.ex || !r.valid)
        .map(|r| {
            format!(
                "#{} [{}] {}: {:?} {:?}",
                r.index, r.db_id, r.gold, r.error, r.gold_error
            )
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let all = summary.overall();
    assert_eq!(all.count, 972);
    assert_eq!((all.ex, all.va), (Some(1.0), Some(1.0)));
    assert_eq!(
        (all.r_e, all.r_s, all.res),
        (Some(1.0), Some(1.0), Some(1.0))
    );
    let ves = all.ves.expect("every correct question was timed");
    assert!((70.0..=140.0).contains(&ves), "gold against gold VES {ves}");

    // Hardness: the run's per-level counts against a direct count on dev.json.
    let direct = counts(examples.iter().map(|(i, _)| hardness(&dev[*i].query)));
    let run =
        [Level::Easy, Level::Medium, Level::Hard, Level::Extra].map(|l| summary.level(l).count);
    println!("usable hardness (easy, medium, hard, extra): {run:?}");
    assert_eq!(run, direct);
    // The usable slice is dev without wta_1; together they give the official dev counts.
    let wta = counts(
        dev.iter()
            .filter(|e| e.db_id == "wta_1")
            .map(|e| hardness(&e.query)),
    );
    assert_eq!(wta.iter().sum::<usize>(), 62);
    let full: Vec<usize> = run.iter().zip(wta).map(|(a, b)| a + b).collect();
    assert_eq!(full, [248, 446, 174, 166]);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
