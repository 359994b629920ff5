//! XiYan's M-Schema: the database as `# Table:` blocks of column tuples with type, comment,
//! primary-key marker and a few example values, then the foreign keys.
//!
//! Example display rules follow the M-Schema code: NULL and empty strings are dropped, at most
//! 3 values are shown, date/time columns show 1, a longest value over 20 characters shows 1 and
//! over 50 shows none, and a column with any e-mail- or URL-looking value shows none (personal
//! data and long noise in the prompt, no help for writing SQL).

use super::Prompt;
use crate::schema::{Column, Schema};
use crate::value::Value;

const MAX_EXAMPLES: usize = 3;
const ONE_EXAMPLE_OVER_CHARS: usize = 20;
const NO_EXAMPLES_OVER_CHARS: usize = 50;
const TEMPORAL_TYPES: [&str; 4] = ["DATE", "TIME", "DATETIME", "TIMESTAMP"];

/// Renders the M-Schema of `schema` (bare table names, as for Spider).
pub fn render_mschema(schema: &Schema) -> String {
    let mut lines = vec![
        format!("【DB_ID】 {}", schema.db_id),
        "【Schema】".to_owned(),
    ];
    for table in &schema.tables {
        lines.push(format!("# Table: {}", table.name));
        lines.push("[".to_owned());
        let fields: Vec<String> = table.columns.iter().map(field_line).collect();
        lines.push(fields.join(",\n"));
        lines.push("]".to_owned());
    }
    if !schema.foreign_keys.is_empty() {
        lines.push("【Foreign keys】".to_owned());
        for fk in &schema.foreign_keys {
            lines.push(format!(
                "{}.{}={}.{}",
                fk.from_table, fk.from_column, fk.to_table, fk.to_column
            ));
        }
    }
    lines.join("\n")
}

/// M-Schema wraps no instructions around itself; this is for symmetry with the other formats.
pub fn mschema_prompt(schema: &Schema) -> Prompt {
    Prompt {
        text: render_mschema(schema),
        ends_with_sql_marker: false,
        ends_with_select: false,
    }
}

fn field_line(column: &Column) -> String {
    let column_type = display_type(&column.declared_type);
    let mut line = format!("({}:{column_type}", column.name);
    if let Some(comment) = column.comment.as_deref().map(str::trim)
        && !comment.is_empty()
    {
        line.push_str(&format!(", {comment}"));
    }
    if column.primary_key {
        line.push_str(", Primary Key");
    }
    let examples = shown_examples(&column.examples, &column_type);
    if !examples.is_empty() {
        line.push_str(&format!(", Examples: [{}]", examples.join(", ")));
    }
    line.push(')');
    line
}

/// The declared type up to `(`, upper-cased: `varchar(12)` → `VARCHAR`. An untyped column
/// prints `NULL`, which is what M-Schema's SQLAlchemy reflection prints for it.
fn display_type(declared: &str) -> String {
    let base = declared.split('(').next().unwrap_or_default().trim();
    if base.is_empty() {
        "NULL".to_owned()
    } else {
        base.to_uppercase()
    }
}

fn shown_examples(values: &[Value], column_type: &str) -> Vec<String> {
    let mut examples: Vec<String> = values
        .iter()
        .filter(|v| !v.is_null())
        .map(ToString::to_string)
        .filter(|s| !s.is_empty())
        .collect();
    if examples
        .iter()
        .any(|s| looks_like_email(s) || looks_like_url(s))
    {
        return Vec::new();
    }
    examples.truncate(MAX_EXAMPLES);
    let longest = examples
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0);
    if TEMPORAL_TYPES.contains(&column_type) {
        examples.truncate(1);
    } else if longest > NO_EXAMPLES_OVER_CHARS {
        examples.clear();
    } else if longest > ONE_EXAMPLE_OVER_CHARS {
        examples.truncate(1);
    }
    examples
}

/// `local@domain.tld` with no spaces.
fn looks_like_email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    let word = |c: char| c.is_alphanumeric() || "._+-".contains(c);
    !local.is_empty()
        && local.chars().all(word)
        && domain.contains('.')
        && !domain.starts_with('.')
        && !domain.ends_with('.')
        && domain
            .chars()
            .all(|c| c.is_alphanumeric() || ".-".contains(c))
}

fn looks_like_url(s: &str) -> bool {
    let lower = s.trim().to_ascii_lowercase();
    ["http://", "https://", "ftp://", "www."]
        .iter()
        .any(|p| lower.starts_with(p))
        && !lower.contains(' ')
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;
    use crate::prompt::fixture::schema;

    fn text(values: &[&str]) -> Vec<Value> {
        values
            .iter()
            .map(|v| Value::Text((*v).to_owned()))
            .collect()
    }

    #[test]
    fn mschema_concert_singer() {
        expect![[r#"
            【DB_ID】 concert_singer
            【Schema】
            # Table: stadium
            [
            (Stadium_ID:INT, Primary Key, Examples: [1, 2, 3]),
            (Location:TEXT, Examples: [Raith Rovers, Ayr United, East Fife]),
            (Name:TEXT, Examples: [Stark's Park, Somerset Park, Bayview Stadium]),
            (Capacity:INT, Examples: [10104, 11998, 2000]),
            (Highest:INT, Examples: [4812, 2363, 1980]),
            (Lowest:INT, Examples: [1294, 1057, 533]),
            (Average:INT, Examples: [2106, 1477, 864])
            ]
            # Table: singer
            [
            (Singer_ID:INT, Primary Key, Examples: [1, 2, 3]),
            (Name:TEXT, Examples: [Joe Sharp, Timbaland, Justin Brown]),
            (Country:TEXT, Examples: [Netherlands, United States, France]),
            (Song_Name:TEXT, Examples: [You, Dangerous, Hey Oh]),
            (Song_release_year:TEXT, Examples: [1992, 2008, 2013]),
            (Age:INT, Examples: [52, 32, 29]),
            (Is_male:BOOL, Examples: [F, T])
            ]
            # Table: concert
            [
            (concert_ID:INT, Primary Key, Examples: [1, 2, 3]),
            (concert_Name:TEXT, Examples: [Auditions, Super bootcamp, Home Visits]),
            (Theme:TEXT, Examples: [Free choice, Free choice 2, Bleeding Love]),
            (Stadium_ID:TEXT, Examples: [1, 2, 10]),
            (Year:TEXT, Examples: [2014, 2015])
            ]
            # Table: singer_in_concert
            [
            (concert_ID:INT, Primary Key, Examples: [1, 2, 3]),
            (Singer_ID:TEXT, Primary Key, Examples: [2, 3, 5])
            ]
            【Foreign keys】
            concert.Stadium_ID=stadium.Stadium_ID
            singer_in_concert.Singer_ID=singer.Singer_ID
            singer_in_concert.concert_ID=concert.concert_ID"#]]
        .assert_eq(&render_mschema(&schema("concert_singer")));
    }

    #[test]
    fn mschema_car_1_restricted() {
        let s = schema("car_1").restrict_to(&["car_makers", "model_list", "countries"]);
        expect![[r#"
            【DB_ID】 car_1
            【Schema】
            # Table: countries
            [
            (CountryId:INTEGER, Primary Key, Examples: [1, 2, 3]),
            (CountryName:TEXT, Examples: [usa, germany, france]),
            (Continent:INTEGER, Examples: [1, 2, 3])
            ]
            # Table: car_makers
            [
            (Id:INTEGER, Primary Key, Examples: [1, 2, 3]),
            (Maker:TEXT, Examples: [amc, volkswagen, bmw]),
            (FullName:TEXT, Examples: [American Motor Company]),
            (Country:TEXT, Examples: [1, 2, 3])
            ]
            # Table: model_list
            [
            (ModelId:INTEGER, Primary Key, Examples: [1, 2, 3]),
            (Maker:INTEGER, Examples: [1, 2, 3]),
            (Model:TEXT, Examples: [amc, audi, bmw])
            ]
            【Foreign keys】
            car_makers.Country=countries.CountryId
            model_list.Maker=car_makers.Id"#]]
        .assert_eq(&render_mschema(&s));
    }

    #[test]
    fn example_rules() {
        let cases: Vec<(Vec<Value>, &str, Vec<&str>)> = vec![
            (text(&["a", "b", "c", "d"]), "TEXT", vec!["a", "b", "c"]),
            (
                vec![Value::Null, Value::Text(String::new()), Value::Integer(7)],
                "INT",
                vec!["7"],
            ),
            (
                text(&["2020-01-02", "2021-01-01"]),
                "DATE",
                vec!["2020-01-02"],
            ),
            (
                text(&["short", "twenty-one characters"]),
                "TEXT",
                vec!["short"],
            ),
            (text(&["x", &"y".repeat(51)]), "TEXT", vec![]),
            (text(&["x", &"y".repeat(50)]), "TEXT", vec!["x"]),
            (
                text(&["a", "b", "c", "someone@example.com"]),
                "TEXT",
                vec![],
            ),
            (text(&["https://example.com/x"]), "TEXT", vec![]),
            (vec![Value::Real(1.0)], "REAL", vec!["1.0"]),
            (
                text(&["@home", "a @ b.c"]),
                "TEXT",
                vec!["@home", "a @ b.c"],
            ),
        ];
        for (values, column_type, expected) in cases {
            assert_eq!(shown_examples(&values, column_type), expected, "{values:?}");
        }
    }

    #[test]
    fn field_line_with_comment_and_types() {
        let column = Column {
            name: "Name".into(),
            declared_type: "varchar(255)".into(),
            primary_key: true,
            comment: Some(" singer full name ".into()),
            examples: text(&["Joe"]),
        };
        assert_eq!(
            field_line(&column),
            "(Name:VARCHAR, singer full name, Primary Key, Examples: [Joe])"
        );
        assert_eq!(display_type(""), "NULL");
        assert_eq!(display_type("decimal (10,2)"), "DECIMAL");
        assert!(!mschema_prompt(&schema("pets_1")).completion_may_lack_select());
    }
}
