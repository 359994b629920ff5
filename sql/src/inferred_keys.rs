//! Foreign keys a database does not declare, read off its names.
//!
//! Business databases often declare no foreign keys at all (a warehouse loaded from exports, a
//! broker's `sbTransaction` whose `sbTxCustId` means `sbCustomer.sbCustId`), and then every
//! part of the method that joins by keys goes blind: the prompts' foreign-key block is empty,
//! linking finds no join path, and a join the model wrote on nothing (`ON t.a = t.a`) cannot be
//! mended. For such a database only (one that declares even one key is taken at its word), a
//! column is taken to reference a table's single-column primary key when its name says so:
//!
//! - it has the key's own name (`treatments.patient_id` → `patients.patient_id`), unless that
//!   name is a bare `id`;
//! - it ends with the key's name less the prefix every table name of the database shares
//!   (`sbTxCustId` ends with `custid`, `sbCustomer.sbCustId` less `sb`), at least four
//!   characters long;
//! - or, for a key named `id`, it is the table's singular name with `_id` or `id`
//!   (`sales.car_id` → `cars.id`).
//!
//! Only keys whose names end in `id` are referenced, a column that is its own table's whole
//! primary key references nothing, and a column that could mean two tables is left alone.

use crate::schema::{ForeignKey, Schema, Table};
use crate::words::{name_words, singular};

/// The keys [`Schema::foreign_keys`] should hold when the database declares none; empty when it
/// declares some, or when no name says anything.
pub fn inferred_foreign_keys(schema: &Schema) -> Vec<ForeignKey> {
    if !schema.foreign_keys.is_empty() || schema.tables.len() < 2 {
        return Vec::new();
    }
    let prefix = shared_prefix(schema.tables.iter().map(|t| t.name.to_lowercase()));
    let targets: Vec<Target<'_>> = schema
        .tables
        .iter()
        .filter_map(|t| Target::of(t, &prefix))
        .collect();
    let mut keys = Vec::new();
    for table in &schema.tables {
        let own_key = single_key(table);
        for column in &table.columns {
            if own_key == Some(column.name.as_str()) {
                continue;
            }
            let name = column.name.to_lowercase();
            let mut meant = targets
                .iter()
                .filter(|t| !std::ptr::eq(t.table, table) && t.is_meant_by(&name));
            if let (Some(target), None) = (meant.next(), meant.next()) {
                keys.push(ForeignKey {
                    from_table: table.name.clone(),
                    from_column: column.name.clone(),
                    to_table: target.table.name.clone(),
                    to_column: target.key.to_owned(),
                });
            }
        }
    }
    keys
}

/// Columns named after another table, as candidates for a backend that can read the data to
/// confirm: `model_list.Maker` → `car_makers.Id`, `countries.Continent` → `continents.ContId`.
/// A name alone does not settle these (a `country` column may hold a country's name, not its
/// key), so [`inferred_foreign_keys`] does not take them; a backend keeps a candidate whose
/// every value is one of the referenced key's. A column matches a table whose single-column
/// key it is not, by its singular words: the table's whole name (`car maker`) or its last word
/// (`maker`, three letters at least); one that would mean two tables is left alone, as is one
/// that already references something.
pub fn keys_named_after_tables(schema: &Schema) -> Vec<ForeignKey> {
    let targets: Vec<(&Table, &str, String, Option<String>)> = schema
        .tables
        .iter()
        .filter_map(|t| {
            let key = single_key(t)?;
            let words = name_words(&t.name);
            let last = words
                .rsplit(' ')
                .next()
                .filter(|w| w.len() >= 3 && w.len() < words.len())
                .map(str::to_owned);
            Some((t, key, words, last))
        })
        .collect();
    let mut keys = Vec::new();
    for table in &schema.tables {
        let own_key = single_key(table);
        for column in &table.columns {
            let references = schema
                .foreign_keys
                .iter()
                .any(|k| k.from_table == table.name && k.from_column == column.name);
            if own_key == Some(column.name.as_str()) || references {
                continue;
            }
            let words = name_words(&column.name);
            let mut meant = targets.iter().filter(|(t, _, whole, last)| {
                !std::ptr::eq(*t, table) && (*whole == words || last.as_ref() == Some(&words))
            });
            if let (Some((target, key, _, _)), None) = (meant.next(), meant.next()) {
                keys.push(ForeignKey {
                    from_table: table.name.clone(),
                    from_column: column.name.clone(),
                    to_table: target.name.clone(),
                    to_column: (*key).to_owned(),
                });
            }
        }
    }
    keys
}

/// A table that may be referenced: its single-column primary key ending in `id`, and the
/// column names that would mean it.
struct Target<'s> {
    table: &'s Table,
    key: &'s str,
    /// The key's lower-case name (`sbcustid`, `patient_id`, `id`).
    key_name: String,
    /// The key's name less the tables' shared prefix, when it is long enough to mean the key
    /// wherever a name ends with it (`custid`).
    stem: Option<String>,
    /// For a key named `id`: `car_id` and `carid` for `cars`.
    singular_names: Vec<String>,
}

impl<'s> Target<'s> {
    fn of(table: &'s Table, prefix: &str) -> Option<Self> {
        let key = single_key(table)?;
        let key_name = key.to_lowercase();
        if !key_name.ends_with("id") {
            return None;
        }
        let stem = key_name
            .strip_prefix(prefix)
            .filter(|s| s.len() >= 4)
            .map(str::to_owned);
        let singular_names = match key_name.as_str() {
            "id" => {
                let name = table.name.to_lowercase();
                let bare = singular(name.strip_prefix(prefix).unwrap_or(&name));
                vec![format!("{bare}_id"), format!("{bare}id")]
            }
            _ => Vec::new(),
        };
        Some(Self {
            table,
            key,
            key_name,
            stem,
            singular_names,
        })
    }

    fn is_meant_by(&self, column: &str) -> bool {
        (self.key_name != "id" && column == self.key_name)
            || self.stem.as_deref().is_some_and(|s| column.ends_with(s))
            || self.singular_names.iter().any(|n| n == column)
    }
}

/// The table's primary key when it is one column.
fn single_key(table: &Table) -> Option<&str> {
    match table.primary_key.as_slice() {
        [key] => Some(key.as_str()),
        _ => None,
    }
}

/// The longest prefix all `names` share, cut back to leave every name at least one character
/// of its own.
fn shared_prefix(names: impl Iterator<Item = String>) -> String {
    let names: Vec<String> = names.collect();
    let Some(first) = names.first() else {
        return String::new();
    };
    let mut len = first.len();
    for name in &names[1..] {
        len = len.min(
            first
                .bytes()
                .zip(name.bytes())
                .take_while(|(a, b)| a == b)
                .count(),
        );
    }
    let shortest = names.iter().map(String::len).min().unwrap_or(0);
    let len = len.min(shortest.saturating_sub(1));
    first
        .get(..len)
        .map_or_else(String::new, ToString::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dialect::Dialect;
    use crate::schema::Column;

    fn table(name: &str, key: &[&str], columns: &[&str]) -> Table {
        Table {
            name: name.into(),
            columns: columns
                .iter()
                .map(|c| Column {
                    name: (*c).into(),
                    declared_type: "text".into(),
                    primary_key: key.contains(c),
                    comment: None,
                    examples: Vec::new(),
                })
                .collect(),
            primary_key: key.iter().map(|k| (*k).to_string()).collect(),
            rows: Vec::new(),
        }
    }

    fn schema(tables: Vec<Table>) -> Schema {
        Schema {
            db_id: "db".into(),
            tables,
            foreign_keys: Vec::new(),
            dialect: Dialect::Postgres,
        }
    }

    fn pairs(keys: &[ForeignKey]) -> Vec<String> {
        keys.iter()
            .map(|k| {
                format!(
                    "{}.{} -> {}.{}",
                    k.from_table, k.from_column, k.to_table, k.to_column
                )
            })
            .collect()
    }

    #[test]
    fn prefixed_names_reference_the_key_they_end_with() {
        let s = schema(vec![
            table("sbCustomer", &["sbCustId"], &["sbCustId", "sbCustName"]),
            table(
                "sbTicker",
                &["sbTickerId"],
                &["sbTickerId", "sbTickerSymbol"],
            ),
            table(
                "sbDailyPrice",
                &["sbDpId"],
                &["sbDpId", "sbDpTickerId", "sbDpClose"],
            ),
            table(
                "sbTransaction",
                &["sbTxId"],
                &["sbTxId", "sbTxCustId", "sbTxTickerId", "sbTxAmount"],
            ),
        ]);
        assert_eq!(
            pairs(&inferred_foreign_keys(&s)),
            [
                "sbDailyPrice.sbDpTickerId -> sbTicker.sbTickerId",
                "sbTransaction.sbTxCustId -> sbCustomer.sbCustId",
                "sbTransaction.sbTxTickerId -> sbTicker.sbTickerId",
            ]
        );
    }

    #[test]
    fn shared_key_names_and_singular_ids_reference_their_tables() {
        let s = schema(vec![
            table("patients", &["patient_id"], &["patient_id", "name"]),
            table("cars", &["id"], &["id", "make"]),
            table(
                "treatments",
                &["treatment_id"],
                &["treatment_id", "patient_id", "car_id", "id_card"],
            ),
        ]);
        assert_eq!(
            pairs(&inferred_foreign_keys(&s)),
            [
                "treatments.patient_id -> patients.patient_id",
                "treatments.car_id -> cars.id",
            ]
        );
    }

    #[test]
    fn declared_keys_win_and_doubtful_names_are_left_alone() {
        let mut declared = schema(vec![
            table("a", &["a_id"], &["a_id"]),
            table("b", &["b_id"], &["b_id", "a_id"]),
        ]);
        declared.foreign_keys.push(ForeignKey {
            from_table: "b".into(),
            from_column: "b_id".into(),
            to_table: "a".into(),
            to_column: "a_id".into(),
        });
        assert!(inferred_foreign_keys(&declared).is_empty());
        // Two tables keyed `id` with no singular match, a key not named like an id, a column
        // that is its own table's key, and an `id` that would mean either of two tables.
        let s = schema(vec![
            table("users", &["id"], &["id", "name"]),
            table("codes", &["code"], &["code"]),
            table("orders", &["id"], &["id", "user_code", "code"]),
            table("user", &["id"], &["id"]),
            table("visits", &["visit_id"], &["visit_id", "user_id"]),
        ]);
        assert!(pairs(&inferred_foreign_keys(&s)).is_empty());
    }

    /// car_1's links that no key name reveals: three are columns named after the table they
    /// reference; `Maker` in `car_makers` is the table's own and `Model` names no table.
    #[test]
    fn columns_named_after_tables_are_candidates() {
        let s = schema(vec![
            table("continents", &["ContId"], &["ContId", "Continent"]),
            table(
                "countries",
                &["CountryId"],
                &["CountryId", "CountryName", "Continent"],
            ),
            table(
                "car_makers",
                &["Id"],
                &["Id", "Maker", "FullName", "Country"],
            ),
            table("model_list", &["ModelId"], &["ModelId", "Maker", "Model"]),
            table("car_names", &["MakeId"], &["MakeId", "Model", "Make"]),
        ]);
        assert_eq!(
            pairs(&keys_named_after_tables(&s)),
            [
                "countries.Continent -> continents.ContId",
                "car_makers.Country -> countries.CountryId",
                "model_list.Maker -> car_makers.Id",
            ]
        );
        // Two tables whose last word is the column's, and a column that already references.
        let mut s = schema(vec![
            table("home_teams", &["id"], &["id"]),
            table("away_teams", &["id"], &["id"]),
            table("games", &["id"], &["id", "team", "country"]),
            table("countries", &["code"], &["code"]),
        ]);
        s.foreign_keys.push(ForeignKey {
            from_table: "games".into(),
            from_column: "country".into(),
            to_table: "countries".into(),
            to_column: "code".into(),
        });
        assert!(keys_named_after_tables(&s).is_empty());
    }

    #[test]
    fn the_shared_prefix_leaves_each_name_something() {
        let names = |v: &[&str]| shared_prefix(v.iter().map(|s| s.to_string()));
        assert_eq!(names(&["sbcustomer", "sbticker"]), "sb");
        assert_eq!(names(&["sales", "salespersons"]), "sale");
        assert_eq!(names(&["cars", "sales"]), "");
    }

    /// Spider's dev databases each declare keys where they have more than one table, so no
    /// dev question's prompt or linking changes with the inference (dev300 and dev100 are
    /// decided on these databases).
    #[test]
    fn spider_dev_databases_gain_no_keys() {
        use crate::schema::IntrospectOptions;
        use crate::spider_fixture::{spider, spider_db};
        let dev = spider().dev().expect("Spider's dev.json");
        let ids: std::collections::BTreeSet<&str> = dev.iter().map(|e| e.db_id.as_str()).collect();
        let bare = IntrospectOptions {
            sample_rows: 0,
            distinct_examples: 0,
        };
        let mut read = 0;
        for id in ids {
            let path = spider_db(id);
            if !path.exists() {
                continue; // wta_1 ships without its file
            }
            let schema = Schema::from_sqlite(&path, id, bare).expect("introspects");
            assert!(inferred_foreign_keys(&schema).is_empty(), "{id}");
            read += 1;
        }
        assert!(read >= 19, "only {read} dev databases read");
    }
}
