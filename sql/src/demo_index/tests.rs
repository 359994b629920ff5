//! Demo index tests over a slice of Spider's train pool with a bag-of-words embedder.

use std::path::PathBuf;

use super::*;
use crate::dataset::Example;
use crate::fakes::BagOfWords;
use crate::spider_fixture::spider;

/// The first `n` train examples (the first 400 span nine databases).
pub(crate) fn train_subset(n: usize) -> Vec<Example> {
    let mut train = spider().train().expect("train.json");
    train.truncate(n);
    train
}

fn index(n: usize) -> DemoIndex {
    DemoIndex::build(
        &train_subset(n),
        &spider().database_dir(),
        &BagOfWords::default(),
    )
    .expect("index builds")
}

#[test]
fn entries_hold_masked_questions_skeletons_and_table_counts() {
    let index = index(400);
    assert_eq!(index.len(), 400);
    assert_eq!(index.dim(), crate::fakes::BAG_DIM);
    let first = &index.entries()[0];
    assert_eq!(first.db_id, "department_management");
    assert!(
        first.masked_question.contains("<mask>"),
        "{}",
        first.masked_question
    );
    assert!(first.skeleton.starts_with("select"), "{}", first.skeleton);
    assert!(index.entries().iter().all(|e| e.table_count >= 1));
    assert!(index.entries().iter().any(|e| e.table_count >= 2));
}

#[test]
fn ranking_excludes_the_target_database_and_finds_the_nearest() {
    let index = index(400);
    let embedder = BagOfWords::default();
    let probe = &index.entries()[150];
    let ranked = index
        .rank(&embedder, &probe.masked_question, "department_management")
        .expect("ranks");
    assert!(
        ranked
            .iter()
            .all(|&i| index.entries()[i].db_id != "department_management")
    );
    assert_eq!(
        index.entries()[ranked[0]].masked_question,
        probe.masked_question,
        "an identical masked question is the nearest"
    );
    let own_db = index
        .rank(&embedder, &probe.masked_question, &probe.db_id)
        .expect("ranks");
    assert!(
        own_db
            .iter()
            .all(|&i| index.entries()[i].db_id != probe.db_id)
    );
    let excluded = count(&index, "department_management") + count(&index, &probe.db_id);
    assert_eq!(own_db.len() + ranked.len(), 2 * index.len() - excluded);
}

fn count(index: &DemoIndex, db_id: &str) -> usize {
    index.entries().iter().filter(|e| e.db_id == db_id).count()
}

#[test]
fn rerank_puts_similar_skeletons_then_multi_table_demos_first() {
    let index = index(400);
    let ranked = index
        .rank(&BagOfWords::default(), "How many <mask> are there?", "none")
        .expect("ranks");
    let plain = index.select(&ranked, 5, Rerank::default());
    let expected: Vec<&DemoEntry> = ranked
        .iter()
        .take(5)
        .map(|&i| &index.entries()[i])
        .collect();
    assert_eq!(plain, expected, "no re-ranking keeps similarity order");

    let skeleton = "select count ( _ ) from _ where _";
    let matching = ranked
        .iter()
        .filter(|&&i| {
            skeleton_jaccard(skeleton, &index.entries()[i].skeleton) >= SKELETON_THRESHOLD
        })
        .count();
    assert!(matching >= 3, "the slice has such queries");
    let rerank = Rerank {
        skeleton: Some(skeleton),
        ..Rerank::default()
    };
    let by_skeleton = index.select(&ranked, 3, rerank);
    assert!(
        by_skeleton
            .iter()
            .all(|e| skeleton_jaccard(skeleton, &e.skeleton) >= SKELETON_THRESHOLD)
    );

    let multi = Rerank {
        prefer_multi_table: true,
        ..Rerank::default()
    };
    let joined = index.select(&ranked, 4, multi);
    assert_eq!(joined.len(), 4);
    assert!(joined.iter().all(|e| e.table_count >= 2));
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quorum-demo-index-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

#[test]
fn cache_is_reused_and_rebuilt_when_stale_or_corrupt() {
    let dir = temp_dir("cache");
    let train = dir.join("train.json");
    std::fs::write(
        &train,
        serde_json::to_vec(&train_subset(120)).expect("json"),
    )
    .expect("write");
    let cache = dir.join("cache").join("demos.bin");
    let database_dir = spider().database_dir();
    let source = DemoIndexSource {
        train_json: &train,
        database_dir: &database_dir,
        embedder_name: "bag-of-words",
        masking: MaskingMode::Lexical,
        encoder: None,
    };
    let load = |source: DemoIndexSource<'_>| {
        let embedder = BagOfWords::default();
        let (index, status) = DemoIndex::load_or_build(source, &embedder, &cache).expect("loads");
        (index, status, embedder.calls())
    };

    let (built, status, calls) = load(source);
    assert_eq!(
        status,
        CacheStatus::Built {
            reason: RebuildReason::Missing
        }
    );
    assert!(calls > 0);
    let (loaded, status, calls) = load(source);
    assert_eq!((status, calls), (CacheStatus::Loaded, 0));
    assert_eq!(loaded, built);

    let other_embedder = DemoIndexSource {
        embedder_name: "another-model",
        ..source
    };
    let (_, status, _) = load(other_embedder);
    assert_eq!(
        status,
        CacheStatus::Built {
            reason: RebuildReason::Stale
        }
    );

    let mut bytes = std::fs::read(&cache).expect("cache exists");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x55;
    std::fs::write(&cache, &bytes).expect("corrupt");
    let (_, status, _) = load(source);
    assert_eq!(
        status,
        CacheStatus::Built {
            reason: RebuildReason::Corrupt
        }
    );
    let (reloaded, status, _) = load(source);
    assert_eq!(status, CacheStatus::Loaded);
    assert_eq!(reloaded, built);

    for broken in [
        &bytes[..bytes.len() - 3],
        b"QDEMO".as_slice(),
        b"".as_slice(),
    ] {
        std::fs::write(&cache, broken).expect("truncate");
        let (_, status, _) = load(source);
        assert_eq!(
            status,
            CacheStatus::Built {
                reason: RebuildReason::Corrupt
            }
        );
    }
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn build_errors_are_structured() {
    struct Short;
    impl Embedder for Short {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelCallError> {
            Ok(vec![vec![1.0]; texts.len() - 1])
        }
    }
    let database_dir = spider().database_dir();
    let err = DemoIndex::build(&train_subset(3), &database_dir, &Short).expect_err("short");
    assert_eq!(err.kind(), "embedding_shape");

    let missing = vec![Example {
        db_id: "no_such_db".into(),
        question: "q".into(),
        query: "SELECT 1".into(),
        evidence: None,
        alternatives: Vec::new(),
        category: None,
    }];
    let index = DemoIndex::build(&missing, &database_dir, &BagOfWords::default())
        .expect("a missing database skips its examples");
    assert!(index.is_empty());
    assert_eq!(index.skipped_databases(), ["no_such_db"]);

    let dir = temp_dir("errors");
    let source = DemoIndexSource {
        train_json: &dir.join("absent.json"),
        database_dir: &database_dir,
        embedder_name: "e",
        masking: MaskingMode::Lexical,
        encoder: None,
    };
    let err = DemoIndex::load_or_build(source, &BagOfWords::default(), &dir.join("c.bin"))
        .expect_err("no train file");
    assert_eq!(err.kind(), "read_train");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

/// Moves every schema item alike whichever word is masked: the noun prior and the matches
/// decide (see `relevance`).
struct UniformEncoder;

impl ContextEncoder for UniformEncoder {
    fn word_states(
        &self,
        groups: &[Vec<String>],
        masks: &[Option<(usize, usize)>],
    ) -> Result<Vec<crate::model::WordStates>, ModelCallError> {
        Ok(masks
            .iter()
            .map(|mask| {
                let x = if mask.is_some() { 3.0 } else { 1.0 };
                groups
                    .iter()
                    .map(|g| g.iter().map(|_| vec![x, 0.5]).collect())
                    .collect()
            })
            .collect())
    }
}

#[test]
fn relevance_masking_builds_its_own_index_and_cache() {
    let dir = temp_dir("relevance");
    let train = dir.join("train.json");
    std::fs::write(&train, serde_json::to_vec(&train_subset(40)).expect("json")).expect("write");
    let cache = dir.join("demos.bin");
    let database_dir = spider().database_dir();
    let lexical = DemoIndexSource {
        train_json: &train,
        database_dir: &database_dir,
        embedder_name: "bag-of-words",
        masking: MaskingMode::Lexical,
        encoder: None,
    };
    let relevance = DemoIndexSource {
        masking: MaskingMode::Relevance,
        encoder: Some(&UniformEncoder),
        ..lexical
    };
    let embedder = BagOfWords::default();
    let (lex, _) = DemoIndex::load_or_build(lexical, &embedder, &cache).expect("lexical");
    let (rel, status) = DemoIndex::load_or_build(relevance, &embedder, &cache).expect("relevance");
    assert_eq!(
        status,
        CacheStatus::Built {
            reason: RebuildReason::Stale
        }
    );
    assert_eq!(
        (lex.masking(), rel.masking()),
        (MaskingMode::Lexical, MaskingMode::Relevance)
    );
    assert!(
        lex.entries()
            .iter()
            .zip(rel.entries())
            .any(|(a, b)| a.masked_question != b.masked_question),
        "the two modes masked every question alike"
    );
    let (again, status) = DemoIndex::load_or_build(relevance, &embedder, &cache).expect("reload");
    assert_eq!((status, again), (CacheStatus::Loaded, rel));
    // Without its encoder the relevance mode fails with a clear error rather than falling back.
    let err = DemoIndex::build_masked(
        &train_subset(3),
        &database_dir,
        &embedder,
        MaskingMode::Relevance,
        None,
    )
    .expect_err("no encoder");
    assert_eq!(err.kind(), "mask");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn full_train_pool_indexes() {
    // Corpus-wide: every available train database introspects and every question masks.
    let index = index(7000);
    assert_eq!(index.skipped_databases(), ["baseball_1", "soccer_1"]);
    assert_eq!(index.len(), 7000 - 96);
}
