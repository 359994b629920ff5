//! `quorum reword`: a Spider question file asked in other words, for measuring how much of an
//! answer rests on the question spelling the schema's names and values.
//!
//! Each question is reworded as the training data's reworded share is (`quorum_training::reword`,
//! one definition): a value the question names and its gold query compares with is replaced in
//! both by another value of its column, and a word of a table or column name is replaced by a
//! synonym from the training lexicon. The file keeps every question at its index, reworded or
//! not, so `quorum eval --questions FILE --slice S` asks the same slice and `quorum eval
//! --compare` lines its records up with a run on the original file.

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::{Context, Result, bail, ensure};
use quorum_sql::database::DatabaseHandle;
use quorum_sql::dataset::{database_path, load_examples, load_slices};
use quorum_sql::schema::IntrospectOptions;
use quorum_training::{Synonyms, reword};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::Value;

#[derive(clap::Args, Debug)]
pub struct RewordArgs {
    /// Spider-format data directory (`database/`, the question files, `slices.json`).
    #[arg(long, env = "QUORUM_SPIDER_DIR", default_value = quorum_server::config::shipped::DEFAULT_SPIDER_DIR)]
    pub data: PathBuf,
    /// Question file (Spider's format), relative to --data unless absolute.
    #[arg(long, default_value = "dev.json")]
    pub questions: PathBuf,
    /// Reword only this slice's questions; the others are written as they are.
    #[arg(long)]
    pub slice: Option<String>,
    /// Seed of the choices (which synonym, which other value); each question's choices depend
    /// only on it and the question's index.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where to write the reworded file (JSON, the input's shape; a reworded question carries
    /// `reworded: {values, words, original}`).
    #[arg(long)]
    pub out: PathBuf,
}

pub fn reword_questions(args: RewordArgs) -> Result<()> {
    let path = args.data.join(&args.questions);
    let examples = load_examples(&path)?;
    let mut raw: Vec<Value> = serde_json::from_str(
        &std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?,
    )
    .with_context(|| format!("{} is not a JSON array of questions", path.display()))?;
    ensure!(
        raw.len() == examples.len(),
        "{}: unreadable entries",
        path.display()
    );
    let chosen: Vec<usize> = match &args.slice {
        Some(slice) => {
            let slices = load_slices(&args.data.join("slices.json"))?;
            let indices = slices
                .get(slice)
                .with_context(|| format!("no slice named {slice:?}"))?
                .to_vec();
            if let Some(&i) = indices.iter().find(|&&i| i >= examples.len()) {
                bail!("slice {slice:?} names question {i}, past the file's end");
            }
            indices
        }
        None => (0..examples.len()).collect(),
    };
    let synonyms = Synonyms::default();
    // `None` for a database that is not there: its questions cannot be asked either, and are
    // written as they are.
    let mut databases: HashMap<String, Option<DatabaseHandle>> = HashMap::new();
    let (mut reworded, mut values, mut words, mut missing) = (0usize, 0usize, 0usize, 0usize);
    for &index in &chosen {
        let example = &examples[index];
        let database = databases.entry(example.db_id.clone()).or_insert_with(|| {
            let file = database_path(&args.data.join("database"), &example.db_id);
            DatabaseHandle::open(&file, &example.db_id, IntrospectOptions::default())
                .map_err(|e| eprintln!("{}: {e}; its questions are kept as written", example.db_id))
                .ok()
        });
        let Some(database) = database.as_ref() else {
            missing += 1;
            continue;
        };
        let index_of_values = database
            .value_index()
            .with_context(|| format!("{}: reading its values", example.db_id))?;
        let mut rng = StdRng::seed_from_u64(question_seed(args.seed, index));
        let Some(variant) = reword(
            &example.question,
            &example.query,
            &database.schema,
            index_of_values,
            &synonyms,
            &mut rng,
        ) else {
            continue;
        };
        let entry = raw[index]
            .as_object_mut()
            .with_context(|| format!("question {index} is not an object"))?;
        let query_key = if entry.contains_key("query") {
            "query"
        } else {
            "SQL"
        };
        entry.insert("question".into(), variant.question.clone().into());
        entry.insert(query_key.into(), variant.query.clone().into());
        entry.insert(
            "reworded".into(),
            serde_json::json!({
                "values": variant.values_replaced,
                "words": variant.words_replaced,
                "original": example.question,
            }),
        );
        reworded += 1;
        values += variant.values_replaced;
        words += variant.words_replaced;
    }
    std::fs::write(&args.out, serde_json::to_string_pretty(&raw)? + "\n")
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "{reworded} of {} questions reworded ({values} values and {words} words replaced; \
         {missing} of databases that are not there kept as written); written to {}",
        chosen.len(),
        args.out.display()
    );
    Ok(())
}

/// One question's stream of choices, from the run's seed and the question's index alone, so
/// that rewording a slice or the whole file words a question the same way.
fn question_seed(seed: u64, index: usize) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (index as u64).wrapping_mul(0xD1B5_4A32_D192_ED03)
}
