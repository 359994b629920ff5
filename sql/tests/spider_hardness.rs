//! Spider hardness on the whole dev set: the text classifier must reproduce the official counts,
//! and agree per question with the official function applied to the official parsed `sql` dicts
//! that dev.json carries (a port of evaluation.py's `eval_hardness`, used here as the oracle).

use std::path::PathBuf;

use quorum_sql::hardness::{Components, Hardness, components, hardness};
use serde_json::Value as Json;

fn spider_dir() -> PathBuf {
    match std::env::var_os("QUORUM_SPIDER_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/spider"),
    }
}

fn dev() -> Vec<Json> {
    let path = spider_dir().join("dev.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read {path:?} (set QUORUM_SPIDER_DIR): {e}"));
    serde_json::from_str(&text).expect("dev.json parses")
}

/// Python truthiness of `unit[0] != 0` as evaluation.py's `has_agg` computes it: numbers and
/// booleans compare by value, while the `"and"`/`"or"` connector strings are always unequal.
fn has_agg(unit: &Json) -> bool {
    let first = match unit {
        Json::Array(items) => items.first(),
        Json::String(s) => return !s.is_empty(),
        _ => None,
    };
    match first {
        Some(Json::Bool(b)) => *b,
        Some(Json::Number(n)) => n.as_f64() != Some(0.0),
        Some(Json::String(_)) => true,
        _ => false,
    }
}

fn arr(v: &Json) -> &[Json] {
    v.as_array().map_or(&[], Vec::as_slice)
}

fn every_other(v: &[Json], start: usize) -> Vec<&Json> {
    v.iter().skip(start).step_by(2).collect()
}

/// WHERE_OPS.index('like') in process_sql.py.
const LIKE: i64 = 9;

fn oracle(sql: &Json) -> Components {
    let from_conds = arr(&sql["from"]["conds"]);
    let wh = arr(&sql["where"]);
    let having = arr(&sql["having"]);
    let order_by = arr(&sql["orderBy"]);
    let group_by = arr(&sql["groupBy"]);
    let table_units = arr(&sql["from"]["table_units"]).len();
    let conds: Vec<&Json> = [from_conds, wh, having]
        .iter()
        .flat_map(|c| every_other(c, 0))
        .collect();
    let connectors: Vec<&Json> = [from_conds, wh, having]
        .iter()
        .flat_map(|c| every_other(c, 1))
        .collect();

    let mut c1 = usize::from(!wh.is_empty())
        + usize::from(!group_by.is_empty())
        + usize::from(!order_by.is_empty())
        + usize::from(!sql["limit"].is_null())
        + table_units.saturating_sub(1);
    c1 += connectors
        .iter()
        .filter(|t| t.as_str() == Some("or"))
        .count();
    c1 += conds.iter().filter(|c| c[1].as_i64() == Some(LIKE)).count();

    let mut c2 = conds
        .iter()
        .map(|c| usize::from(c[3].is_object()) + usize::from(c[4].is_object()))
        .sum::<usize>();
    c2 += ["intersect", "except", "union"]
        .iter()
        .filter(|k| !sql[**k].is_null())
        .count();

    let select = arr(&sql["select"][1]);
    let mut agg = select.iter().filter(|u| has_agg(u)).count();
    agg += every_other(wh, 0)
        .into_iter()
        .filter(|u| has_agg(u))
        .count();
    agg += group_by.iter().filter(|u| has_agg(u)).count();
    if let Some(units) = order_by.get(1) {
        for vu in arr(units) {
            agg += [&vu[1], &vu[2]]
                .iter()
                .filter(|cu| !cu.is_null() && has_agg(cu))
                .count();
        }
    }
    agg += having.iter().filter(|u| has_agg(u)).count();
    let others = usize::from(agg > 1)
        + usize::from(select.len() > 1)
        + usize::from(wh.len() > 1)
        + usize::from(group_by.len() > 1);
    Components {
        component1: c1,
        component2: c2,
        others,
    }
}

fn tally(levels: impl Iterator<Item = Hardness>) -> [usize; 4] {
    let mut counts = [0; 4];
    for l in levels {
        counts[l as usize] += 1;
    }
    counts
}

const OFFICIAL: [usize; 4] = [248, 446, 174, 166];

#[test]
fn oracle_reproduces_the_official_counts() {
    let dev = dev();
    assert_eq!(dev.len(), 1034);
    assert_eq!(
        tally(dev.iter().map(|q| oracle(&q["sql"]).hardness())),
        OFFICIAL
    );
}

#[test]
fn text_classifier_matches_the_official_counts_on_all_of_dev() {
    let dev = dev();
    assert_eq!(dev.len(), 1034);
    let mut disagreements = Vec::new();
    for (i, q) in dev.iter().enumerate() {
        let sql = q["query"].as_str().expect("query is text");
        let want = oracle(&q["sql"]);
        let got = components(sql);
        if got != Some(want) {
            disagreements.push(format!(
                "#{i}: {sql}\n  official {want:?}\n  ours     {got:?}"
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} disagreements:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    let counts = tally(
        dev.iter()
            .map(|q| hardness(q["query"].as_str().expect("text"))),
    );
    assert_eq!(counts, OFFICIAL, "easy/medium/hard/extra");
}
