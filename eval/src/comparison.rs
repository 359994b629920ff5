//! Side-by-side comparison of two runs: every metric per hardness level with its delta, and the
//! questions whose correctness flipped.
//!
//! Both runs are summarized over the questions they have in common only: two runs over
//! different question sets (one interrupted, one complete) would otherwise differ by the
//! questions, not by the method. The questions only one run has are listed instead.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::record::Record;
use crate::summary::{Level, LevelSummary, Summary, fraction, score, summarize};
use quorum_sql::hardness::Hardness;

/// Which way a question's correctness changed from run A to run B.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlipDirection {
    /// Wrong in A, correct in B.
    Fixed,
    /// Correct in A, wrong in B.
    Broken,
}

/// A question whose correctness differs between the runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Flip {
    pub index: usize,
    pub db_id: String,
    pub question: String,
    pub hardness: Hardness,
    pub direction: FlipDirection,
    pub prediction_a: String,
    pub prediction_b: String,
}

/// The outcome of [`compare`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// Run A over the common questions.
    pub a: Summary,
    /// Run B over the common questions.
    pub b: Summary,
    /// Flipped questions in index order.
    pub flips: Vec<Flip>,
    pub only_a: Vec<usize>,
    pub only_b: Vec<usize>,
}

/// Compares run A with run B (records of one question each).
pub fn compare(run_a: &[Record], run_b: &[Record]) -> Comparison {
    let a: BTreeMap<usize, &Record> = run_a.iter().map(|r| (r.index, r)).collect();
    let b: BTreeMap<usize, &Record> = run_b.iter().map(|r| (r.index, r)).collect();
    let mut common_a = Vec::new();
    let mut common_b = Vec::new();
    let mut flips = Vec::new();
    for (index, ra) in &a {
        let Some(rb) = b.get(index) else { continue };
        common_a.push((*ra).clone());
        common_b.push((*rb).clone());
        let direction = match (ra.ex, rb.ex) {
            (false, true) => FlipDirection::Fixed,
            (true, false) => FlipDirection::Broken,
            _ => continue,
        };
        flips.push(Flip {
            index: *index,
            db_id: ra.db_id.clone(),
            question: ra.question.clone(),
            hardness: ra.hardness,
            direction,
            prediction_a: ra.prediction.clone(),
            prediction_b: rb.prediction.clone(),
        });
    }
    Comparison {
        a: summarize(&common_a),
        b: summarize(&common_b),
        flips,
        only_a: a.keys().filter(|i| !b.contains_key(i)).copied().collect(),
        only_b: b.keys().filter(|i| !a.contains_key(i)).copied().collect(),
    }
}

/// How a metric is printed: a [0, 1] share (three decimals) or a ×100 score, time or count
/// (one decimal).
#[derive(Clone, Copy)]
enum Scale {
    Fraction,
    Score,
}

type Metric = (&'static str, Scale, fn(&LevelSummary) -> Option<f64>);

const METRICS: [Metric; 10] = [
    ("EX", Scale::Fraction, |l| l.ex),
    ("VA", Scale::Fraction, |l| l.va),
    ("VES", Scale::Score, |l| l.ves),
    ("C-VES", Scale::Score, |l| l.c_ves),
    ("R_e", Scale::Fraction, |l| l.r_e),
    ("R_s", Scale::Fraction, |l| l.r_s),
    ("RES", Scale::Fraction, |l| l.res),
    ("latency mean ms", Scale::Score, |l| l.latency_mean_ms),
    ("latency median ms", Scale::Score, |l| l.latency_median_ms),
    ("tokens mean", Scale::Score, |l| l.tokens_mean),
];

impl Comparison {
    pub fn fixed(&self) -> impl Iterator<Item = &Flip> {
        self.flips
            .iter()
            .filter(|f| f.direction == FlipDirection::Fixed)
    }

    pub fn broken(&self) -> impl Iterator<Item = &Flip> {
        self.flips
            .iter()
            .filter(|f| f.direction == FlipDirection::Broken)
    }

    /// The metrics table (cells `A → B (Δ)`) followed by the flipped questions.
    pub fn to_markdown(&self) -> String {
        let mut out = format!(
            "Questions compared: {} (only in A: {}, only in B: {}); A → B (B − A).\n\n",
            self.a.overall().count,
            self.only_a.len(),
            self.only_b.len()
        );
        out.push_str("| metric | easy | medium | hard | extra | all |\n");
        out.push_str("|---|--:|--:|--:|--:|--:|\n");
        let counts: Vec<String> = Level::ALL
            .iter()
            .map(|&l| self.a.level(l).count.to_string())
            .collect();
        out.push_str(&format!("| n | {} |\n", counts.join(" | ")));
        for (name, scale, get) in METRICS {
            let cells: Vec<String> = Level::ALL
                .iter()
                .map(|&l| cell(get(self.a.level(l)), get(self.b.level(l)), scale))
                .collect();
            out.push_str(&format!("| {name} | {} |\n", cells.join(" | ")));
        }
        self.push_flips(&mut out);
        out
    }

    fn push_flips(&self, out: &mut String) {
        let fixed = self.fixed().count();
        let broken = self.broken().count();
        out.push_str(&format!(
            "\nFlipped: {fixed} wrong → correct, {broken} correct → wrong.\n"
        ));
        if self.flips.is_empty() {
            return;
        }
        out.push_str("\n| index | db | hardness | flip | question |\n|--:|---|---|---|---|\n");
        for f in &self.flips {
            let flip = match f.direction {
                FlipDirection::Fixed => "wrong → correct",
                FlipDirection::Broken => "correct → wrong",
            };
            // A `|` in a question would end the cell early.
            let question = f.question.replace('|', "\\|");
            out.push_str(&format!(
                "| {} | {} | {} | {flip} | {question} |\n",
                f.index, f.db_id, f.hardness
            ));
        }
    }
}

fn cell(a: Option<f64>, b: Option<f64>, scale: Scale) -> String {
    let show = |v| match scale {
        Scale::Fraction => fraction(v),
        Scale::Score => score(v),
    };
    match (a, b) {
        (None, None) => "–".to_owned(),
        (Some(x), Some(y)) => {
            let delta = match scale {
                Scale::Fraction => format!("{:+.3}", y - x),
                Scale::Score => format!("{:+.1}", y - x),
            };
            format!("{} → {} ({delta})", show(a), show(b))
        }
        _ => format!("{} → {}", show(a), show(b)),
    }
}

#[cfg(test)]
mod tests;
