//! Training examples for the selection model (XiYan's selector), from the pipeline's own
//! candidates on training questions.
//!
//! A record is one question the pipeline answered (a `quorum eval` line over `train.json`): its
//! vote's result groups, each represented by its first candidate's SQL. Every group is run
//! again, read-only, against the question's database, compared with the gold result under
//! Spider's semantics, and the record becomes an example only when exactly one shown group is
//! correct: the prompt is the pipeline's selection prompt ([`render_selection`]) over the linked
//! tables, as the pipeline shows them, and the answer is that group's label. The groups are
//! shown in a seeded random order, so the label says which result is right, not where the
//! pipeline tends to list it (by first voter, so the PreSQL's group is usually `A`).

use std::collections::HashMap;
use std::time::Duration;

use quorum_sql::compare::{order_matters, spider_eq};
use quorum_sql::database::DatabaseHandle;
use quorum_sql::dataset::SpiderDataset;
use quorum_sql::pipeline::{MAX_LABELS, SelectionInput, Shown, render_selection, selection_labels};
use quorum_sql::postprocess::postprocess;
use quorum_sql::sandbox::{Limits, QueryResult, Sandbox};
use quorum_sql::schema::{IntrospectOptions, Schema};
use quorum_weights::render_turn;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use serde::Serialize;

use crate::error::{TrainError, TrainResult};
use crate::examples::{PromptCodec, TrainingExample};

/// One answered training question, as the pipeline's vote left it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectorRecord {
    pub db_id: String,
    pub question: String,
    pub gold: String,
    /// The tables schema linking kept (empty: the pipeline showed the whole schema).
    pub linked_tables: Vec<String>,
    /// Each result group's first SQL, in the vote's order (by first voter).
    pub groups: Vec<String>,
    /// Candidates in each group (as `groups`).
    pub votes: Vec<usize>,
    /// The vote was split, so the pipeline asks the selector ([`crate::selector_validation`]
    /// scores only these).
    pub split: bool,
}

/// How the selector's examples are rendered.
#[derive(Debug, Clone)]
pub struct SelectorExampleOptions {
    /// Groups shown at most (the pipeline's `selector.max_groups`).
    pub max_groups: usize,
    /// Result rows shown per group (the pipeline's `selector.preview_rows`).
    pub preview_rows: usize,
    /// Longest example kept, prompt and answer together.
    pub max_tokens: usize,
    /// When no shown group is right, show the gold query (its whitespace collapsed, as the
    /// pipeline's candidates are) as one more group (in place of the last when all
    /// `max_groups` are taken), so the answers the pipeline got wrong teach too.
    pub add_gold: bool,
    /// Examples per record (at most one per shown group): a seeded random order of the groups
    /// and its rotations, so the right group's label differs in each.
    pub orders: usize,
    pub seed: u64,
}

/// What building the selector's examples kept and dropped.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SelectorExampleStats {
    pub records: usize,
    /// Examples kept (up to `orders` per record).
    pub kept: usize,
    /// Fewer than two groups ran: nothing to choose between.
    pub single_group: usize,
    /// No shown group matches the gold result: no right label (without `add_gold`).
    pub none_correct: usize,
    /// Examples where the gold query was shown as the right group.
    pub gold_added: usize,
    /// Several shown groups match the gold result (Spider's comparison is looser than the
    /// vote's): no single right label.
    pub several_correct: usize,
    pub database_errors: usize,
    pub too_long: usize,
    /// Kept examples per position of the right label (`A` first).
    pub answer_positions: Vec<usize>,
    pub prompt_tokens: usize,
}

/// Generous enough for any Spider query; a candidate that ran in the pipeline runs here.
const EXECUTION_TIMEOUT: Duration = Duration::from_secs(10);

/// A record's groups run again and judged against its gold result.
pub(crate) struct JudgedRecord {
    /// The schema as the pipeline showed it (the linked tables, when there are any).
    pub view: Schema,
    /// The groups that ran, at most `max_groups`, in the vote's order.
    pub groups: Vec<JudgedGroup>,
    /// The gold query as the pipeline would write it (whitespace collapsed: Spider's gold
    /// spacing, `age  >  56`, would mark a group by its look alone), when it gives the gold
    /// result that way.
    pub gold: Option<JudgedGroup>,
}

pub(crate) struct JudgedGroup {
    pub sql: String,
    pub result: QueryResult,
    pub right: bool,
    pub votes: usize,
}

/// Each record's database, opened once: its schema and a read-only sandbox.
pub(crate) struct RecordDatabases<'d> {
    dataset: &'d SpiderDataset,
    open: HashMap<String, Option<(Schema, Sandbox)>>,
}

impl<'d> RecordDatabases<'d> {
    pub fn new(dataset: &'d SpiderDataset) -> Self {
        Self {
            dataset,
            open: HashMap::new(),
        }
    }

    /// The record's groups, run and judged; `None` when its database or gold query fails.
    pub fn judge(&mut self, record: &SelectorRecord, max_groups: usize) -> Option<JudgedRecord> {
        let dataset = self.dataset;
        let database = self.open.entry(record.db_id.clone()).or_insert_with(|| {
            let path = dataset.database_path(&record.db_id);
            let limits = Limits {
                timeout: EXECUTION_TIMEOUT,
                ..Limits::default()
            };
            let schema = DatabaseHandle::open(&path, &record.db_id, IntrospectOptions::default())
                .map(|h| h.schema)
                .map_err(|e| tracing::warn!(db = %record.db_id, error = %e, "skipping database"))
                .ok()?;
            let sandbox = Sandbox::open(&path, limits)
                .map_err(|e| tracing::warn!(db = %record.db_id, error = %e, "skipping database"))
                .ok()?;
            Some((schema, sandbox))
        });
        let (schema, sandbox) = database.as_ref()?;
        let gold = sandbox.execute(&record.gold).ok()?;
        let ordered = order_matters(&record.gold);
        let judged = |sql: String, votes: usize| {
            let result = sandbox.execute(&sql).ok()?;
            let right = spider_eq(&gold.rows, &result.rows, ordered);
            Some(JudgedGroup {
                sql,
                result,
                right,
                votes,
            })
        };
        let groups = record
            .groups
            .iter()
            .enumerate()
            .filter_map(|(i, sql)| judged(sql.clone(), record.votes.get(i).copied().unwrap_or(1)))
            .take(max_groups)
            .collect();
        let gold = judged(postprocess(&record.gold, false), 0).filter(|g| g.right);
        let view = if record.linked_tables.is_empty() {
            schema.clone()
        } else {
            schema.restrict_to(&record.linked_tables)
        };
        Some(JudgedRecord { view, groups, gold })
    }
}

/// The selection prompt over `groups` (in this order) as the server sends it: one user turn,
/// no system text.
pub(crate) fn selection_turn(
    codec: PromptCodec<'_>,
    record: &SelectorRecord,
    view: &Schema,
    groups: &[&JudgedGroup],
    preview_rows: usize,
) -> TrainResult<(String, Vec<String>)> {
    let listed: Vec<Shown<'_>> = groups
        .iter()
        .enumerate()
        .map(|(candidate, g)| Shown {
            candidate,
            sql: g.sql.as_str(),
            result: &g.result,
            votes: g.votes,
        })
        .collect();
    let labels = selection_labels(listed.len());
    let prompt = render_selection(
        SelectionInput {
            schema: view,
            question: &record.question,
            evidence: None,
            shown: &listed,
            preview_rows,
        },
        &labels,
    );
    let text = render_turn(codec.chat_template, None, &prompt, None)
        .map_err(|e| TrainError::Data(e.to_string()))?;
    Ok((text, labels))
}

/// The selector's examples from `records`, in record order.
pub fn build_selector_examples(
    dataset: &SpiderDataset,
    records: &[SelectorRecord],
    codec: PromptCodec<'_>,
    options: &SelectorExampleOptions,
) -> TrainResult<(Vec<TrainingExample>, SelectorExampleStats)> {
    let max_groups = options.max_groups.clamp(2, MAX_LABELS);
    let mut databases = RecordDatabases::new(dataset);
    let mut rng = rand::rngs::StdRng::seed_from_u64(options.seed);
    let mut stats = SelectorExampleStats {
        answer_positions: vec![0; max_groups],
        ..SelectorExampleStats::default()
    };
    let mut out = Vec::new();
    for record in records {
        stats.records += 1;
        let Some(JudgedRecord {
            view,
            mut groups,
            gold,
        }) = databases.judge(record, max_groups)
        else {
            stats.database_errors += 1;
            continue;
        };
        match groups.iter().filter(|g| g.right).count() {
            0 if options.add_gold && !groups.is_empty() => match gold {
                Some(gold) => {
                    groups.truncate(max_groups - 1);
                    groups.push(gold);
                    stats.gold_added += 1;
                }
                None => {
                    stats.none_correct += 1;
                    continue;
                }
            },
            0 => {
                stats.none_correct += 1;
                continue;
            }
            1 => {}
            _ => {
                stats.several_correct += 1;
                continue;
            }
        }
        if groups.len() < 2 {
            stats.single_group += 1;
            continue;
        }
        // One seeded order, then rotations of it: each example of the record puts the right
        // group at another label.
        groups.shuffle(&mut rng);
        for k in 0..options.orders.clamp(1, groups.len()) {
            if k > 0 {
                groups.rotate_left(1);
            }
            let answer = groups
                .iter()
                .position(|g| g.right)
                .expect("one shown group is right");
            let shown: Vec<&JudgedGroup> = groups.iter().collect();
            let (text, labels) =
                selection_turn(codec, record, &view, &shown, options.preview_rows)?;
            // The label alone: the server reads only the first token after the prompt, so the
            // loss is all on the choice (an end-of-turn token would add a second target that
            // the untuned model misses badly, and whose gradient, clipped together with the
            // label's, would drown it).
            let example = codec.prompt_and_answer(&text, &labels[answer], false)?;
            if example.tokens.len() > options.max_tokens {
                stats.too_long += 1;
                break;
            }
            stats.kept += 1;
            stats.answer_positions[answer] += 1;
            stats.prompt_tokens += example.answer_start;
            out.push(example);
        }
    }
    if out.is_empty() {
        return Err(TrainError::Data(format!(
            "no usable selector example ({stats:?})"
        )));
    }
    Ok((out, stats))
}
