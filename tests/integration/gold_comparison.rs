//! Spider's gold queries run on their SQLite files and on a server's copies of them, compared
//! under Spider's comparison: what makes an EX measured on a server comparable with one
//! measured on SQLite, database for database.

use std::collections::BTreeSet;

use quorum_sql::backend::Session;
use quorum_sql::compare::{order_matters, spider_eq};
use quorum_sql::dataset::{database_path, load_examples, load_slices};
use quorum_sql::distinct::{DistinctMode, prepare_for_spider_ex};
use quorum_sql::sandbox::{Limits, Sandbox};
use quorum_sql::value::Value;
use quorum_tests::spider_dir;

/// Rows as both databases can be compared: a text cell that holds a number in its exact
/// printed form, as the number (the loaders type such columns numerically, as SQLite compares
/// them by affinity, so a server returns `80000` where SQLite returns `'80000'`), and floats to
/// 12 significant digits (an `avg` or `sum` over doubles adds in an order neither database
/// promises, and the last bits differ: 65.4827027027027 against 65.48270270270272).
fn comparable(rows: Vec<Vec<Value>>) -> Vec<Vec<Value>> {
    rows.into_iter()
        .map(|row| {
            row.into_iter()
                .map(|v| match v {
                    Value::Text(s) => match (s.parse::<i64>(), s.parse::<f64>()) {
                        (Ok(i), _) if i.to_string() == s => Value::Integer(i),
                        (_, Ok(f)) if f.is_finite() && (format!("{f}") == s) => Value::Real(f),
                        _ => Value::Text(s),
                    },
                    Value::Real(f) => Value::Real(
                        format!("{f:.11e}")
                            .parse()
                            .expect("a formatted float parses"),
                    ),
                    v => v,
                })
                .collect()
        })
        .collect()
}

/// What running a slice's gold queries on both databases found.
pub struct GoldComparison {
    pub compared: usize,
    /// Queries the translation for the server changed.
    pub rewritten: usize,
    /// Queries the server refuses, with its error.
    pub failing: Vec<(usize, String)>,
    /// Queries whose results differ beyond ties, and each one's text.
    differing: Vec<(usize, String)>,
    /// Queries whose rows tie on the sort key and are cut differently by a `LIMIT`.
    pub tied: Vec<usize>,
}

impl GoldComparison {
    /// Fails unless exactly the questions `expected` answer differently, listing those that do.
    pub fn assert_differing(&self, expected: &[usize]) {
        let differing: Vec<usize> = self.differing.iter().map(|(i, _)| *i).collect();
        let listed: Vec<&str> = self.differing.iter().map(|(_, d)| d.as_str()).collect();
        assert_eq!(
            differing,
            expected,
            "gold queries that answer differently on the server:\n{}",
            listed.join("\n")
        );
    }

    /// The questions whose gold query the server refuses.
    pub fn failing_ids(&self) -> Vec<usize> {
        self.failing.iter().map(|(i, _)| *i).collect()
    }
}

/// The ids of `slice`'s databases (of dev.json), for loading before [`compare_gold`].
pub fn slice_databases(slice: &str) -> BTreeSet<String> {
    let data = spider_dir();
    let dev = load_examples(&data.join("dev.json")).expect("dev.json");
    let slices = load_slices(&data.join("slices.json")).expect("slices.json");
    let chosen = slices.get(slice).expect("slice");
    chosen.iter().map(|&i| dev[i].db_id.clone()).collect()
}

/// Runs `slice`'s gold queries on SQLite and, through `translate`, on the session `open` gives
/// for each database id.
pub fn compare_gold(
    slice: &str,
    translate: &dyn Fn(&str) -> String,
    open: &dyn Fn(&str) -> Box<dyn Session>,
) -> GoldComparison {
    let data = spider_dir();
    let dev = load_examples(&data.join("dev.json")).expect("dev.json");
    let slices = load_slices(&data.join("slices.json")).expect("slices.json");
    let chosen: Vec<usize> = slices.get(slice).expect("slice").to_vec();
    let (mut rewritten, mut compared) = (0, 0);
    let (mut differing, mut tied, mut failing) = (Vec::new(), Vec::new(), Vec::new());
    for db_id in &slice_databases(slice) {
        let mut server = open(db_id);
        let sqlite = Sandbox::open(
            &database_path(&data.join("database"), db_id),
            Limits::default(),
        )
        .expect("SQLite opens");
        for &i in chosen.iter().filter(|&&i| dev[i].db_id == *db_id) {
            let gold = &dev[i].query;
            let translated = translate(gold);
            if translated != *gold {
                rewritten += 1;
            }
            let on_sqlite = sqlite
                .execute(&prepare_for_spider_ex(gold, DistinctMode::Strip))
                .unwrap_or_else(|e| panic!("dev {i} on SQLite: {e}"));
            let on_server =
                match server.execute(&prepare_for_spider_ex(&translated, DistinctMode::Strip)) {
                    Ok(result) => result,
                    Err(e) => {
                        failing.push((i, format!("dev {i} ({db_id}): {e}\n  {translated}")));
                        continue;
                    }
                };
            compared += 1;
            if spider_eq(
                &comparable(on_sqlite.rows),
                &comparable(on_server.rows),
                order_matters(gold),
            ) {
                continue;
            }
            // Rows that tie on the sort key come in an order neither database promises, and a
            // `LIMIT` cuts the tie differently: without the limit and the order, the two
            // databases must hold the same rows.
            let whole = |sql: &str| {
                let cut = sql
                    .to_lowercase()
                    .rfind("limit")
                    .map_or(sql, |at| &sql[..at]);
                prepare_for_spider_ex(cut, DistinctMode::Strip)
            };
            let all_sqlite = sqlite.execute(&whole(gold)).expect("runs without LIMIT");
            let all_server = server
                .execute(&whole(&translated))
                .expect("runs without LIMIT");
            if order_matters(gold)
                && spider_eq(
                    &comparable(all_sqlite.rows),
                    &comparable(all_server.rows),
                    false,
                )
            {
                tied.push(i);
            } else {
                differing.push((i, format!("dev {i} ({db_id}): {translated}")));
            }
        }
    }
    tied.sort_unstable();
    GoldComparison {
        compared,
        rewritten,
        failing,
        differing,
        tied,
    }
}
