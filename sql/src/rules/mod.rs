//! The query rules: rewrites of a generated query that fix what small models get wrong in a
//! way the schema, the question or the result shows, each kept only when the rewrite runs (and
//! finds what it should).
//!
//! Two kinds. **Repairs** read a query that failed: schema repair respells a column the
//! database does not have ([`repair`]), and the PostgreSQL habits of Spider-trained models are
//! translated ([`translate`]), SQLite's loose typing among them ([`typed_comparisons`]); the
//! pipeline runs them on the error message. Before a generated query first runs on a database
//! server, its windows of whole days start at midnight and its Sunday is numbered as the
//! server numbers it ([`calendar_days`]). **Rewrites after
//! a run** read a query that ran, in the fixed order of [`AFTER_RUN`]: a join on nothing, or
//! on the wrong key, gets the schema's keys ([`join_keys`]), a join the question does not speak of is dropped
//! ([`unused_joins`]), a grouping whose groups the answer does not name, for a question that
//! asks for totals, is dropped ([`unlabeled_groups`]), a grouping by a row's label gets the
//! row's key ([`group_by_key`]), a
//! value the column does not store is respelled when nothing was found ([`respell`]), and a
//! filter for either of two values becomes their intersection where both are asked for
//! ([`intersection`]). Each rewrites the query the rule before it left.
//!
//! A rule names itself by its switch, the pipeline knob that turns it on ([`RuleSwitches`]),
//! and every candidate an answer reports lists the rules that rewrote it, so a rule's effect on
//! a benchmark is a query over the records.

pub mod calendar_days;
pub mod group_by_key;
pub mod intersection;
pub mod join_keys;
pub mod repair;
pub mod respell;
pub mod translate;
pub mod typed_comparisons;
pub mod unlabeled_groups;
pub mod unused_joins;

use serde::{Deserialize, Serialize};

use crate::backend::Session;
use crate::dialect::Dialect;
use crate::sandbox::QueryResult;
use crate::schema::Schema;

/// Which rules run: one switch per rule, each a pipeline knob of the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct RuleSwitches {
    /// A join on nothing (`ON t.a = t.a`) joined by the schema's keys ([`join_keys`]).
    #[serde(default)]
    pub mend_self_joins: bool,
    /// A join on the wrong key (a column declared a key to a third table equated with a
    /// primary key) joined by the schema's keys ([`join_keys`]).
    #[serde(default)]
    pub mend_wrong_keys: bool,
    /// A join the question does not speak of, read only in its key, dropped ([`unused_joins`]).
    #[serde(default)]
    pub drop_unused_joins: bool,
    /// A grouping by a joined row's label alone keyed by the row ([`group_by_key`]).
    #[serde(default)]
    pub group_by_key: bool,
    /// A compared value the column does not store, when nothing was found, respelled as
    /// stored ([`respell`]).
    #[serde(default)]
    pub respell_values: bool,
    /// A filter for either of two values, where the question asks for both, as their
    /// intersection ([`intersection`]).
    #[serde(default)]
    pub both_as_intersection: bool,
    /// A grouping that selects only totals, for a question that does not ask per group,
    /// dropped ([`unlabeled_groups`]).
    #[serde(default)]
    pub drop_unlabeled_groups: bool,
}

/// What a rule reads of a query that ran.
pub struct RuleInput<'a> {
    pub question: &'a str,
    pub schema: &'a Schema,
    pub dialect: Dialect,
    pub sql: &'a str,
    pub result: &'a QueryResult,
}

/// A rule's rewrite, and when its result replaces the original's.
pub struct Rewrite {
    pub sql: String,
    /// Whether the rewritten query's result (it ran) is kept.
    pub keep: Box<dyn Fn(&QueryResult) -> bool>,
}

impl Rewrite {
    /// A rewrite kept whenever it runs.
    fn when_it_runs(sql: String) -> Self {
        Self {
            sql,
            keep: Box::new(|_| true),
        }
    }
}

/// A rewrite of a query that ran.
pub trait QueryRule: Sync {
    /// Its switch's name, which is also how answers name the rewrite.
    fn name(&self) -> &'static str;
    fn switched_on(&self, switches: &RuleSwitches) -> bool;
    /// The rewrite, when the rule has one for this query; the session may be asked about the
    /// database's values, never to change them.
    fn rewrite(&self, input: &RuleInput<'_>, session: &mut dyn Session) -> Option<Rewrite>;
}

/// The rewrites after a run, in the order they apply.
pub const AFTER_RUN: [&dyn QueryRule; 7] = [
    &MendSelfJoins,
    &MendWrongKeys,
    &DropUnusedJoins,
    &DropUnlabeledGroups,
    &GroupByKey,
    &RespellValues,
    &BothAsIntersection,
];

/// The name answers give schema repair ([`repair`]) and the PostgreSQL translations
/// ([`translate`]) of a query that failed.
pub const REPAIR: &str = "repair";

struct MendSelfJoins;

impl QueryRule for MendSelfJoins {
    fn name(&self) -> &'static str {
        "mend_self_joins"
    }
    fn switched_on(&self, switches: &RuleSwitches) -> bool {
        switches.mend_self_joins
    }
    fn rewrite(&self, input: &RuleInput<'_>, _: &mut dyn Session) -> Option<Rewrite> {
        join_keys::mend_self_joins(input.sql, input.schema).map(Rewrite::when_it_runs)
    }
}

struct MendWrongKeys;

impl QueryRule for MendWrongKeys {
    fn name(&self) -> &'static str {
        "mend_wrong_keys"
    }
    fn switched_on(&self, switches: &RuleSwitches) -> bool {
        switches.mend_wrong_keys
    }
    fn rewrite(&self, input: &RuleInput<'_>, _: &mut dyn Session) -> Option<Rewrite> {
        join_keys::mend_wrong_keys(input.sql, input.schema).map(Rewrite::when_it_runs)
    }
}

struct DropUnusedJoins;

impl QueryRule for DropUnusedJoins {
    fn name(&self) -> &'static str {
        "drop_unused_joins"
    }
    fn switched_on(&self, switches: &RuleSwitches) -> bool {
        switches.drop_unused_joins
    }
    fn rewrite(&self, input: &RuleInput<'_>, _: &mut dyn Session) -> Option<Rewrite> {
        unused_joins::drop_unused_joins(input.question, input.sql, input.schema)
            .map(Rewrite::when_it_runs)
    }
}

struct DropUnlabeledGroups;

impl QueryRule for DropUnlabeledGroups {
    fn name(&self) -> &'static str {
        "drop_unlabeled_groups"
    }
    fn switched_on(&self, switches: &RuleSwitches) -> bool {
        switches.drop_unlabeled_groups
    }
    fn rewrite(&self, input: &RuleInput<'_>, _: &mut dyn Session) -> Option<Rewrite> {
        unlabeled_groups::drop_unlabeled_groups(input.question, input.sql, input.schema)
            .map(Rewrite::when_it_runs)
    }
}

struct GroupByKey;

impl QueryRule for GroupByKey {
    fn name(&self) -> &'static str {
        "group_by_key"
    }
    fn switched_on(&self, switches: &RuleSwitches) -> bool {
        switches.group_by_key
    }
    fn rewrite(&self, input: &RuleInput<'_>, _: &mut dyn Session) -> Option<Rewrite> {
        group_by_key::group_by_key(input.sql, input.schema).map(Rewrite::when_it_runs)
    }
}

struct RespellValues;

impl QueryRule for RespellValues {
    fn name(&self) -> &'static str {
        "respell_values"
    }
    fn switched_on(&self, switches: &RuleSwitches) -> bool {
        switches.respell_values
    }
    /// Only a query that found nothing; kept only if the respelled one finds something.
    fn rewrite(&self, input: &RuleInput<'_>, session: &mut dyn Session) -> Option<Rewrite> {
        if !respell::finds_nothing(input.result) {
            return None;
        }
        let sql = respell::respell_values(input.sql, input.schema, session)?;
        Some(Rewrite {
            sql,
            keep: Box::new(|r| !respell::finds_nothing(r)),
        })
    }
}

struct BothAsIntersection;

impl QueryRule for BothAsIntersection {
    fn name(&self) -> &'static str {
        "both_as_intersection"
    }
    fn switched_on(&self, switches: &RuleSwitches) -> bool {
        switches.both_as_intersection
    }
    /// Kept when the intersection answers the question
    /// ([`intersection::Intersection::answers`]).
    fn rewrite(&self, input: &RuleInput<'_>, _: &mut dyn Session) -> Option<Rewrite> {
        let rewritten = intersection::as_intersection(input.question, input.sql, input.dialect)?;
        let sql = rewritten.sql.clone();
        Some(Rewrite {
            sql,
            keep: Box::new(move |r| rewritten.answers(r)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_answers_to_its_own_switch() {
        let mut names: Vec<&str> = AFTER_RUN.iter().map(|r| r.name()).collect();
        for rule in AFTER_RUN {
            let mut switches = RuleSwitches::default();
            assert!(
                !rule.switched_on(&switches),
                "{} is off by default",
                rule.name()
            );
            let value = serde_json::json!({ rule.name(): true });
            switches = serde_json::from_value(value).expect("the switch is named after the rule");
            assert!(rule.switched_on(&switches), "{}", rule.name());
            let others = AFTER_RUN
                .iter()
                .filter(|r| r.switched_on(&switches))
                .count();
            assert_eq!(others, 1, "{} turns on only itself", rule.name());
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), AFTER_RUN.len(), "names are distinct");
    }
}
