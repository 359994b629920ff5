//! Schema linking as a service: which tables (and columns) a question needs, by the four
//! methods the benchmarking paper compares (its section 4.5), each with or without the foreign
//! keys in the prompt.
//!
//! - Zero-shot ranking (C3's idea): the model orders every table from most to least relevant.
//! - Few-shot (DIN-SQL's idea): the model lists only the tables it needs, after two worked
//!   examples from Spider's training databases.
//! - PreSQL (the paper's method): the model writes a preliminary SQL (the pipeline's round-1
//!   prompt, RE_p, without cell values) and the tables and columns it reads are the answer.
//! - Few-shot ∪ PreSQL: the few-shot list, then the PreSQL's tables it missed.
//!
//! The prompts are our own wording of the paper's instructions. A list answer is started with
//! `[` for the model and read as the quoted names in it; names that are not tables of the
//! schema are dropped (and reported), duplicates kept once.

use serde::{Deserialize, Serialize};

use super::{Asker, schema_lines};
use crate::lexer::{LexKind, lex};
use crate::linking::tables::{link_tables, referenced_tables_in};
use crate::model::{SQL_ANSWER_END, SQL_ANSWER_PREFIX};
use crate::postprocess::postprocess;
use crate::prompt::{RepOptions, render_rep};
use crate::run_error::RunError;
use crate::schema::Schema;

/// The linking methods of the benchmarking paper.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LinkMethod {
    ZeroShot,
    FewShot,
    PreSql,
    FewShotPreSql,
}

impl LinkMethod {
    pub const ALL: [LinkMethod; 4] = [
        Self::ZeroShot,
        Self::FewShot,
        Self::PreSql,
        Self::FewShotPreSql,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::ZeroShot => "zero_shot",
            Self::FewShot => "few_shot",
            Self::PreSql => "pre_sql",
            Self::FewShotPreSql => "few_shot_pre_sql",
        }
    }

    fn lists(self) -> bool {
        matches!(self, Self::ZeroShot | Self::FewShot | Self::FewShotPreSql)
    }

    fn writes_sql(self) -> bool {
        matches!(self, Self::PreSql | Self::FewShotPreSql)
    }
}

/// One linking question.
#[derive(Debug, Clone, Copy)]
pub struct LinkQuestion<'a> {
    pub question: &'a str,
    /// BIRD-style hints, shown after the question.
    pub evidence: Option<&'a str>,
    pub method: LinkMethod,
    /// Show the foreign keys in the prompt.
    pub foreign_keys: bool,
}

/// A linked table and, where the method names them, the columns of it the query reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkedTable {
    pub name: String,
    pub columns: Vec<String>,
}

/// What linking found and the evidence it used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkAnswer {
    /// Most relevant first (the model's order for lists; order of appearance for a PreSQL).
    pub tables: Vec<LinkedTable>,
    /// The model's list answer, as written (list methods).
    pub listed: Option<String>,
    /// Names the model listed that are not tables of the database.
    pub unknown_names: Vec<String>,
    /// The preliminary SQL (PreSQL methods).
    pub pre_sql: Option<String>,
    /// The PreSQL parsed; when false its tables were found by matching words.
    pub pre_sql_parsed: bool,
    pub tokens_generated: usize,
}

impl LinkAnswer {
    pub fn table_names(&self) -> Vec<&str> {
        self.tables.iter().map(|t| t.name.as_str()).collect()
    }
}

const ZERO_SHOT_INSTRUCTION: &str = "You are given the tables of a database and a question. Order all of the tables by how likely it is that a SQL query answering the question reads them, most likely first; a table whose name or columns match words of the question comes early. Check that every table is in the order, once. Reply with the order only, as a JSON list of table names: [\"table_a\", \"table_b\", ...]";

const FEW_SHOT_INSTRUCTION: &str = "You are given the tables of a database and a question. Decide which tables a SQL query answering the question must read, judging each table by how closely it and its columns match the words of the question. Reply with only the tables that are needed, the most important first, as a JSON list of table names: [\"table_a\", \"table_b\", ...]";

/// The few-shot examples: questions of Spider's training set over two training databases,
/// with the tables their gold queries read.
struct LinkExample {
    tables: &'static str,
    foreign_keys: &'static str,
    question: &'static str,
    answer: &'static str,
}

const EXAMPLES: [LinkExample; 2] = [
    LinkExample {
        tables: "# department(Department_ID,Name,Creation,Ranking,Budget_in_Billions,Num_Employees)\n# head(head_ID,name,born_state,age)\n# management(department_ID,head_ID,temporary_acting)\n",
        foreign_keys: "# Foreign keys:\n# management(head_ID) REFERENCES head(head_ID)\n# management(department_ID) REFERENCES department(Department_ID)\n",
        question: "What are the distinct ages of the heads who are acting?",
        answer: "[\"head\", \"management\"]",
    },
    LinkExample {
        tables: "# journal(Journal_ID,Date,Theme,Sales)\n# editor(Editor_ID,Name,Age)\n# journal_committee(Editor_ID,Journal_ID,Work_Type)\n",
        foreign_keys: "# Foreign keys:\n# journal_committee(Editor_ID) REFERENCES editor(Editor_ID)\n# journal_committee(Journal_ID) REFERENCES journal(Journal_ID)\n",
        question: "What is the average sales of the journals that have an editor whose work type is 'Photo'?",
        answer: "[\"journal\", \"journal_committee\"]",
    },
];

fn question_line(q: &LinkQuestion<'_>) -> String {
    match q.evidence.map(str::trim).filter(|e| !e.is_empty()) {
        Some(evidence) => format!("{} ({evidence})", q.question),
        None => q.question.to_owned(),
    }
}

/// The list prompt of a zero-shot or few-shot method.
pub fn list_prompt(schema: &Schema, q: &LinkQuestion<'_>, few_shot: bool) -> String {
    let mut text = String::new();
    text.push_str(if few_shot {
        FEW_SHOT_INSTRUCTION
    } else {
        ZERO_SHOT_INSTRUCTION
    });
    text.push_str("\n\n");
    if few_shot {
        for example in &EXAMPLES {
            text.push_str("Tables:\n");
            text.push_str(example.tables);
            if q.foreign_keys {
                text.push_str(example.foreign_keys);
            }
            text.push_str(&format!(
                "Question: {}\nAnswer: {}\n\n",
                example.question, example.answer
            ));
        }
    }
    text.push_str("Tables:\n");
    text.push_str(&schema_lines(schema, q.foreign_keys));
    text.push_str(&format!("Question: {}\nAnswer:", question_line(q)));
    text
}

/// The PreSQL prompt: the pipeline's round-1 prompt (RE_p) without cell values (the paper's
/// PreSQL is a zero-shot prompt of names only), its foreign-key section as asked.
pub fn pre_sql_prompt(schema: &Schema, q: &LinkQuestion<'_>) -> String {
    let rep = RepOptions {
        foreign_keys: q.foreign_keys,
        cell_values: false,
        ..RepOptions::default()
    };
    render_rep(schema, &question_line(q), &[], rep).text
}

/// Links `q` over `schema` with the model behind `asker`; the methods that need two answers
/// ask for both in one batch.
pub fn link_schema(
    asker: &Asker<'_>,
    schema: &Schema,
    q: &LinkQuestion<'_>,
) -> Result<LinkAnswer, RunError> {
    let mut requests = Vec::new();
    if q.method.lists() {
        let few_shot = q.method != LinkMethod::ZeroShot;
        requests.push(asker.request(list_prompt(schema, q, few_shot), Some("["), &["]"]));
    }
    if q.method.writes_sql() {
        requests.push(asker.request(
            pre_sql_prompt(schema, q),
            Some(SQL_ANSWER_PREFIX),
            &[SQL_ANSWER_END],
        ));
    }
    let mut outputs = asker.run("linking", &requests)?.into_iter();
    let mut answer = LinkAnswer {
        tables: Vec::new(),
        listed: None,
        unknown_names: Vec::new(),
        pre_sql: None,
        pre_sql_parsed: false,
        tokens_generated: 0,
    };
    if q.method.lists() {
        let generation = outputs.next().expect("one output per request");
        answer.tokens_generated += generation.tokens_generated;
        let (tables, unknown) = read_list(&generation.text, schema);
        answer.tables = tables
            .into_iter()
            .map(|name| LinkedTable {
                name,
                columns: Vec::new(),
            })
            .collect();
        answer.unknown_names = unknown;
        answer.listed = Some(format!("{}]", generation.text.trim_end()));
    }
    if q.method.writes_sql() {
        let generation = outputs.next().expect("one output per request");
        answer.tokens_generated += generation.tokens_generated;
        let sql = postprocess(&generation.text, true);
        let (tables, parsed) = sql_tables(&sql, schema);
        for table in tables {
            let columns = columns_read(&sql, schema, &table);
            match answer
                .tables
                .iter_mut()
                .find(|t| t.name.eq_ignore_ascii_case(&table))
            {
                Some(listed) => listed.columns = columns,
                None => answer.tables.push(LinkedTable {
                    name: table,
                    columns,
                }),
            }
        }
        answer.pre_sql = Some(sql);
        answer.pre_sql_parsed = parsed;
    }
    Ok(answer)
}

/// The schema tables named in a list answer (the text after the `[` the prompt started), in
/// the order written, and the names that are not tables.
pub fn read_list(text: &str, schema: &Schema) -> (Vec<String>, Vec<String>) {
    let mut tables: Vec<String> = Vec::new();
    let mut unknown = Vec::new();
    // The scanner reads `[…]` as a quoted name (SQL Server's quoting); here it is the list.
    let text = &text.replace(['[', ']'], " ");
    for lexeme in lex(text) {
        if !matches!(lexeme.kind, LexKind::Quoted(_) | LexKind::Word) {
            continue;
        }
        let name = lexeme.unquoted(text).trim();
        if name.is_empty() {
            continue;
        }
        match schema.table(name) {
            Some(table) => {
                if !tables.contains(&table.name) {
                    tables.push(table.name.clone());
                }
            }
            None => {
                if matches!(lexeme.kind, LexKind::Quoted(_)) && !unknown.iter().any(|u| u == name) {
                    unknown.push(name.to_owned());
                }
            }
        }
    }
    (tables, unknown)
}

/// The schema tables `sql` reads, in order of appearance, spelled as in the schema; the token
/// fallback (schema order) when it does not parse.
fn sql_tables(sql: &str, schema: &Schema) -> (Vec<String>, bool) {
    match referenced_tables_in(sql, schema.dialect) {
        Ok(names) => (
            names
                .iter()
                .filter_map(|n| schema.table(n).map(|t| t.name.clone()))
                .collect(),
            true,
        ),
        Err(_) => (link_tables(sql, schema).tables, false),
    }
}

/// The columns of `table` whose names appear in `sql` as words (a column name that several
/// read tables share is counted for each of them: the text alone cannot tell which).
fn columns_read(sql: &str, schema: &Schema, table: &str) -> Vec<String> {
    let Some(table) = schema.table(table) else {
        return Vec::new();
    };
    let words: Vec<String> = lex(sql)
        .iter()
        .filter(|l| matches!(l.kind, LexKind::Word | LexKind::Quoted('"' | '`' | '[')))
        .map(|l| l.unquoted(sql).to_lowercase())
        .collect();
    table
        .columns
        .iter()
        .filter(|c| words.contains(&c.name.to_lowercase()))
        .map(|c| c.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fakes::ScriptedGenerator;
    use crate::prompt::fixture::schema;

    fn ask(method: LinkMethod, foreign_keys: bool) -> LinkQuestion<'static> {
        LinkQuestion {
            question: "What are the names of singers in concerts of 2014?",
            evidence: None,
            method,
            foreign_keys,
        }
    }

    fn scripted() -> ScriptedGenerator {
        ScriptedGenerator::new(|r| {
            Ok(if r.prompt.answer_prefix.as_deref() == Some("[") {
                "[\"singer\", \"Concert\", \"band\", \"singer\"".to_owned()
            } else {
                "```sql\nSELECT T1.Name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.Singer_ID = T2.Singer_ID WHERE T2.concert_ID = 1".to_owned()
            })
        })
    }

    #[test]
    fn list_prompts_show_keys_only_when_asked() {
        let schema = schema("concert_singer");
        let plain = list_prompt(&schema, &ask(LinkMethod::FewShot, false), true);
        assert!(!plain.contains("REFERENCES"));
        assert!(plain.contains("Answer: [\"head\", \"management\"]"));
        let keyed = list_prompt(&schema, &ask(LinkMethod::FewShot, true), true);
        assert!(keyed.contains("# singer_in_concert(Singer_ID) REFERENCES singer(Singer_ID)"));
        assert!(
            keyed
                .ends_with("Question: What are the names of singers in concerts of 2014?\nAnswer:")
        );
        let zero = list_prompt(&schema, &ask(LinkMethod::ZeroShot, true), false);
        assert!(!zero.contains("head_ID"), "zero-shot shows no examples");
        let pre = pre_sql_prompt(&schema, &ask(LinkMethod::PreSql, false));
        assert!(!pre.contains("Foreign key"));
        assert!(pre_sql_prompt(&schema, &ask(LinkMethod::PreSql, true)).contains("Foreign key"));
    }

    #[test]
    fn list_answers_keep_order_and_drop_unknown_names() {
        let schema = schema("concert_singer");
        let generator = scripted();
        let asker = Asker {
            generator: &generator,
            name: "g",
            max_new_tokens: 64,
        };
        let answer = link_schema(&asker, &schema, &ask(LinkMethod::ZeroShot, true)).unwrap();
        assert_eq!(answer.table_names(), ["singer", "concert"]);
        assert_eq!(answer.unknown_names, ["band"]);
        assert_eq!(generator.batches().len(), 1);
    }

    #[test]
    fn pre_sql_gives_tables_in_order_with_columns() {
        let schema = schema("concert_singer");
        let generator = scripted();
        let asker = Asker {
            generator: &generator,
            name: "g",
            max_new_tokens: 64,
        };
        let answer = link_schema(&asker, &schema, &ask(LinkMethod::PreSql, true)).unwrap();
        assert_eq!(answer.table_names(), ["singer", "singer_in_concert"]);
        assert!(answer.pre_sql_parsed);
        assert_eq!(answer.tables[0].columns, ["Singer_ID", "Name"]);
        assert_eq!(answer.tables[1].columns, ["concert_ID", "Singer_ID"]);
        // The union: the list first, then what only the PreSQL read, in one batch.
        let union = link_schema(&asker, &schema, &ask(LinkMethod::FewShotPreSql, true)).unwrap();
        assert_eq!(
            union.table_names(),
            ["singer", "concert", "singer_in_concert"]
        );
        assert_eq!(generator.batches().last().unwrap().len(), 2);
    }
}
