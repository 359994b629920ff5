//! Aggregate metrics of a run, overall and per Spider hardness of the gold SQL, and EX and VA
//! per question category where the question file gives one (SQL-Eval's).
//!
//! - EX, VA: shares of questions whose prediction is correct / executes.
//! - VES = 100 · Σ_correct sqrt(ratio) / N (a wrong question contributes 0); C-VES (the
//!   benchmarking paper) = 100 · Σ_correct sqrt(ratio) / N_correct, on the same ×100 scale so
//!   that the two read alike (C-VES = VES · N / N_correct). Both are `None` when some correct
//!   question has no timing (VES timing was off), since a partial average would mislead.
//! - R_e, R_s, RES: over the questions that carry linked tables (a predictor without schema
//!   linking records none); see `metrics::score_linking`.
//! - Latency and tokens: as the predictor reported them.

use serde::{Deserialize, Serialize};

use crate::metrics::{score_linking, ves_reward};
use crate::record::Record;
use quorum_sql::hardness::Hardness;

/// A row of the summary: one hardness level, or all questions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Easy,
    Medium,
    Hard,
    Extra,
    All,
}

impl Level {
    pub const ALL: [Level; 5] = [
        Level::Easy,
        Level::Medium,
        Level::Hard,
        Level::Extra,
        Level::All,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Level::Easy => "easy",
            Level::Medium => "medium",
            Level::Hard => "hard",
            Level::Extra => "extra",
            Level::All => "all",
        }
    }

    pub fn contains(self, hardness: Hardness) -> bool {
        match self {
            Level::Easy => hardness == Hardness::Easy,
            Level::Medium => hardness == Hardness::Medium,
            Level::Hard => hardness == Hardness::Hard,
            Level::Extra => hardness == Hardness::Extra,
            Level::All => true,
        }
    }
}

/// The metrics of one level. Means are `None` where there is nothing to average.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelSummary {
    pub level: Level,
    pub count: usize,
    pub correct: usize,
    pub ex: Option<f64>,
    pub va: Option<f64>,
    pub ves: Option<f64>,
    pub c_ves: Option<f64>,
    /// Questions with linked tables, over which R_e, R_s and RES are computed.
    pub linked: usize,
    pub r_e: Option<f64>,
    pub r_s: Option<f64>,
    pub res: Option<f64>,
    pub latency_mean_ms: Option<f64>,
    pub latency_median_ms: Option<f64>,
    pub tokens_mean: Option<f64>,
    pub tokens_total: u64,
}

/// All five levels of a run, in [`Level::ALL`] order (a level's position is its discriminant),
/// and the categories in name order (none when the questions carry none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub levels: [LevelSummary; 5],
    pub categories: Vec<CategorySummary>,
}

/// EX and VA of the questions of one category.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CategorySummary {
    pub category: String,
    pub count: usize,
    pub correct: usize,
    pub ex: Option<f64>,
    pub va: Option<f64>,
}

/// Aggregates `records` (one per question).
pub fn summarize(records: &[Record]) -> Summary {
    let mut by_category: std::collections::BTreeMap<&str, Vec<&Record>> = Default::default();
    for r in records {
        if let Some(category) = &r.category {
            by_category.entry(category).or_default().push(r);
        }
    }
    Summary {
        levels: Level::ALL.map(|level| {
            let members: Vec<&Record> = records
                .iter()
                .filter(|r| level.contains(r.hardness))
                .collect();
            summarize_level(level, &members)
        }),
        categories: by_category
            .into_iter()
            .map(|(category, members)| {
                let correct = members.iter().filter(|r| r.ex).count();
                CategorySummary {
                    category: category.to_owned(),
                    count: members.len(),
                    correct,
                    ex: share(correct, members.len()),
                    va: share(members.iter().filter(|r| r.valid).count(), members.len()),
                }
            })
            .collect(),
    }
}

fn summarize_level(level: Level, records: &[&Record]) -> LevelSummary {
    let count = records.len();
    let correct: Vec<&Record> = records.iter().copied().filter(|r| r.ex).collect();
    let links: Vec<_> = records
        .iter()
        .filter_map(|r| {
            let linked = r.linked_tables.as_ref()?;
            Some(score_linking(&r.gold_tables, linked))
        })
        .collect();
    let mut latencies: Vec<f64> = records.iter().map(|r| r.latency_ms).collect();
    latencies.sort_by(f64::total_cmp);
    let tokens_total: u64 = records.iter().map(|r| r.tokens_generated).sum();
    let rewards = ves_rewards(&correct);
    LevelSummary {
        level,
        count,
        correct: correct.len(),
        ex: share(correct.len(), count),
        va: share(records.iter().filter(|r| r.valid).count(), count),
        ves: rewards.and_then(|sum| mean(100.0 * sum, count)),
        c_ves: rewards.and_then(|sum| mean(100.0 * sum, correct.len())),
        linked: links.len(),
        r_e: share(links.iter().filter(|l| l.exact).count(), links.len()),
        r_s: share(links.iter().filter(|l| l.subset).count(), links.len()),
        res: mean(links.iter().map(|l| l.res).sum(), links.len()),
        latency_mean_ms: mean(latencies.iter().sum(), count),
        latency_median_ms: median(&latencies),
        tokens_mean: mean(tokens_total as f64, count),
        tokens_total,
    }
}

/// Σ sqrt(ratio) over the correct records, or `None` when one of them was not timed.
fn ves_rewards(correct: &[&Record]) -> Option<f64> {
    // A fold from +0.0: Rust's float `sum` starts at -0.0, which would print as "-0.0".
    correct.iter().try_fold(0.0, |acc, r| {
        r.ves_ratio.map(|ratio| acc + ves_reward(ratio))
    })
}

fn share(part: usize, whole: usize) -> Option<f64> {
    mean(part as f64, whole)
}

fn mean(sum: f64, n: usize) -> Option<f64> {
    (n > 0).then(|| sum / n as f64)
}

fn median(sorted: &[f64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2]),
        _ => Some((sorted[n / 2 - 1] + sorted[n / 2]) / 2.0),
    }
}

impl Summary {
    pub fn level(&self, level: Level) -> &LevelSummary {
        &self.levels[level as usize]
    }

    pub fn overall(&self) -> &LevelSummary {
        self.level(Level::All)
    }

    /// The summary as a Markdown table, one row per level.
    pub fn to_markdown(&self) -> String {
        let mut out = String::from(
            "| level | n | EX | VA | VES | C-VES | R_e | R_s | RES | latency mean ms \
             | latency median ms | tokens mean |\n\
             |---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n",
        );
        for l in &self.levels {
            let cells = [
                l.level.as_str().to_owned(),
                l.count.to_string(),
                fraction(l.ex),
                fraction(l.va),
                score(l.ves),
                score(l.c_ves),
                fraction(l.r_e),
                fraction(l.r_s),
                fraction(l.res),
                score(l.latency_mean_ms),
                score(l.latency_median_ms),
                score(l.tokens_mean),
            ];
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        if !self.categories.is_empty() {
            out.push_str("\n| category | n | EX | VA |\n|---|--:|--:|--:|\n");
            for c in &self.categories {
                out.push_str(&format!(
                    "| {} | {} | {} | {} |\n",
                    c.category,
                    c.count,
                    fraction(c.ex),
                    fraction(c.va)
                ));
            }
        }
        out
    }
}

/// A share or a [0, 1] score, three decimals; a dash where there is nothing to show.
pub(crate) fn fraction(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.3}"))
}

/// A ×100 score, a time or a count, one decimal.
pub(crate) fn score(v: Option<f64>) -> String {
    v.map_or_else(|| "–".to_owned(), |v| format!("{v:.1}"))
}

#[cfg(test)]
pub(crate) mod tests;
