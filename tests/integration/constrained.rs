//! Schema-constrained decoding: the grammar of a real Spider database accepts its gold SQL and
//! refuses names the database does not have, and a real model decoding under it writes only
//! SQL that parses and names the database's own tables and columns, with batching invariance.

use candle_core::Device;
use quorum_engine::{
    EngineEvent, EngineHandle, FinishEvent, GenerateRequest, Grammar, GrammarCompiler, GrammarSpec,
    LogitsConstraint, SamplingParams, spawn_engine,
};
use quorum_sql::dataset::database_path;
use quorum_sql::grammar::schema_grammar;
use quorum_sql::model::SQL_ANSWER_PREFIX;
use quorum_sql::pipeline::{PromptFormat, generation_prompt};
use quorum_sql::prompt::RepOptions;
use quorum_sql::schema::{IntrospectOptions, Schema};
use quorum_tests::{QWEN_05B, model_path, spider_dir};
use sqlparser::ast::{Expr, ObjectName, Visit, Visitor};
use sqlparser::parser::Parser;
use std::ops::ControlFlow;

fn schema(db_id: &str) -> Schema {
    let path = database_path(&spider_dir().join("database"), db_id);
    Schema::from_sqlite(&path, db_id, IntrospectOptions::default()).expect("introspect")
}

fn grammar(db_id: &str) -> Grammar {
    let s = schema(db_id);
    Grammar::new(GrammarSpec::Lark(schema_grammar(&s, s.dialect)))
}

#[test]
fn schema_grammar_accepts_gold_and_refuses_names_outside_the_schema() {
    let checker = GrammarCompiler::for_bytes().expect("checker");
    let g = grammar("concert_singer");
    let accepted = [
        "SELECT count(*) FROM singer",
        "select Name, Country from SINGER where age > 20 order by age desc limit 3",
        "SELECT T1.name FROM singer AS T1 JOIN singer_in_concert AS T2 ON T1.singer_id = T2.singer_id GROUP BY T1.name HAVING count(*) > 1",
        "SELECT singer.Name FROM singer WHERE singer.Country = \"France\"",
        "SELECT name FROM stadium EXCEPT SELECT T2.name FROM concert AS T1 JOIN stadium AS T2 ON T1.stadium_id = T2.stadium_id WHERE T1.year = 2014",
        "SELECT avg(age), max(age) FROM singer WHERE NOT country IN ('France', 'USA')",
        "SELECT count(*) AS n FROM concert GROUP BY year ORDER BY count(*) DESC",
        "```sql\nSELECT \"Name\" FROM `singer` WHERE [Age] BETWEEN 20 AND 30;\n```",
        "SELECT CASE WHEN age > 30 THEN 'old' ELSE 'young' END FROM singer",
        "SELECT s.name FROM singer s JOIN singer_in_concert sc ON s.singer_id = sc.singer_id",
        "SELECT count(*) FROM (SELECT name FROM singer) t",
        "SELECT name FROM singer WHERE song_name LIKE '%Hey%'",
    ];
    for sql in accepted {
        assert_eq!(checker.check(&g, sql), Ok(()), "{sql}");
    }
    let refused = [
        // A column no table has, and a table the database does not have.
        "SELECT nme FROM singer",
        "SELECT name FROM singers",
        // `table.column` must be a column of that table.
        "SELECT singer.Capacity FROM singer",
        // Not a query, not read-only, not one statement.
        "DELETE FROM singer",
        "SELECT name FROM singer; DROP TABLE singer",
        "UPDATE singer SET age = 1",
        // Prose.
        "The answer is 6.",
        // An output alias read back: the grammar cannot tell it from a misspelled column.
        "SELECT count(*) AS n FROM concert GROUP BY year ORDER BY n DESC",
        // `--` would start a comment: a minus sign is never followed by another.
        "SELECT age - -1 FROM singer",
        // A qualified name has no blanks around its dot (sqlparser would not read it).
        "SELECT singer . name FROM singer",
        // Blank runs are bounded (16), so a stuck model cannot pad until its budget ends.
        "SELECT                      name FROM singer",
        // Literals too: no number of 30 digits.
        "SELECT name FROM singer WHERE age > 123456789012345678901234567890",
        // Unfinished.
        "SELECT name FROM singer WHERE",
    ];
    for sql in refused {
        assert!(checker.check(&g, sql).is_err(), "accepted: {sql}");
    }

    // A database without tables still gets a grammar that compiles (it can select constants).
    let mut empty = schema("concert_singer");
    empty.tables.clear();
    let g = Grammar::new(GrammarSpec::Lark(schema_grammar(&empty, empty.dialect)));
    assert_eq!(checker.check(&g, "SELECT 1"), Ok(()));
    assert!(checker.check(&g, "SELECT name FROM singer").is_err());

    // PostgreSQL's grammar reads double quotes as names only.
    let mut pg = schema("concert_singer");
    pg.dialect = quorum_sql::dialect::Dialect::Postgres;
    let g = Grammar::new(GrammarSpec::Lark(schema_grammar(&pg, pg.dialect)));
    assert_eq!(
        checker.check(&g, "SELECT \"Name\" FROM singer WHERE country = 'France'"),
        Ok(())
    );
    assert!(
        checker
            .check(&g, "SELECT name FROM singer WHERE country = \"France\"")
            .is_err()
    );
}

fn engine() -> EngineHandle {
    let mut cfg = quorum_tests::engine_config(QWEN_05B);
    cfg.kv_cache_bytes = 512 << 20;
    spawn_engine(cfg, &model_path(QWEN_05B), &Device::Cpu).expect("engine starts")
}

/// The prompt the pipeline's SimpleDDL generator sends, rendered with the model's template and
/// its answer started with ```` ```sql\nSELECT ````.
fn prompt_tokens(h: &EngineHandle, db_id: &str, question: &str) -> Vec<u32> {
    let p = generation_prompt(
        PromptFormat::SimpleDdl,
        RepOptions::default(),
        &schema(db_id),
        question,
        None,
    );
    let text =
        quorum_weights::render_turn(h.chat_template(), None, &p.text, Some(SQL_ANSWER_PREFIX))
            .expect("render");
    h.tokenizer()
        .encode(text.as_str(), false)
        .expect("encode")
        .get_ids()
        .to_vec()
}

fn request(tokens: Vec<u32>, params: SamplingParams, grammar: Option<Grammar>) -> GenerateRequest {
    GenerateRequest {
        draft_hint: Vec::new(),
        keep_prefix: None,
        prompt_tokens: tokens,
        params,
        adapter: None,
        deadline: None,
        grammar,
    }
}

/// Every choice's (text, tokens, finish event), in choice order.
fn collect(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<EngineEvent>,
    n: usize,
) -> Vec<(String, Vec<u32>, FinishEvent)> {
    let mut out: Vec<(String, Vec<u32>, Option<FinishEvent>)> =
        (0..n).map(|_| (String::new(), Vec::new(), None)).collect();
    while out.iter().any(|o| o.2.is_none()) {
        match rx.blocking_recv().expect("stream ends with Finished") {
            EngineEvent::Token(t) => {
                let o = &mut out[t.choice as usize];
                o.0.push_str(&t.text);
                o.1.push(t.token_id);
            }
            EngineEvent::Finished(f) => {
                let o = &mut out[f.choice as usize];
                o.0.push_str(&f.text);
                o.2 = Some(f);
            }
        }
    }
    out.into_iter()
        .map(|(t, ids, f)| (t, ids, f.expect("finished")))
        .collect()
}

/// Table and column names a statement refers to (aliases included: the caller filters them).
#[derive(Default)]
struct Names {
    relations: Vec<String>,
    identifiers: Vec<String>,
}

impl Visitor for Names {
    type Break = ();
    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<()> {
        self.relations.push(relation.to_string());
        ControlFlow::Continue(())
    }
    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        match expr {
            // SQLite reads a double-quoted word that names no column as a string.
            Expr::Identifier(i) if i.quote_style == Some('"') => {}
            Expr::Identifier(i) => self.identifiers.push(i.value.clone()),
            Expr::CompoundIdentifier(parts) => {
                if let Some(last) = parts.last() {
                    self.identifiers.push(last.value.clone());
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

#[test]
fn sampled_constrained_answers_parse_and_name_only_schema_identifiers() {
    let h = engine();
    let asks = [
        ("concert_singer", "Which stadium hosted the most concerts?"),
        (
            "pets_1",
            "What is the average weight of dogs owned by students?",
        ),
        (
            "car_1",
            "List the makers of cars from Japan with more than 4 cylinders.",
        ),
    ];
    let n = 6;
    let mut checked = 0;
    for (db_id, question) in asks {
        let s = schema(db_id);
        let g =
            Grammar::new(GrammarSpec::Lark(schema_grammar(&s, s.dialect))).after(SQL_ANSWER_PREFIX);
        let params = SamplingParams {
            // The revision stage's temperature: sampled, but not noise.
            temperature: 0.8,
            seed: Some(7),
            n,
            max_new_tokens: 96,
            stop_strings: vec!["```".into()],
            ..SamplingParams::greedy()
        };
        let rx = h
            .submit(request(
                prompt_tokens(&h, db_id, question),
                params,
                Some(g.clone()),
            ))
            .expect("submit");
        for (text, tokens, fin) in collect(rx, n as usize) {
            if fin.constrained != Some(true) {
                // Replay the tokens to say where the grammar engine gave up.
                let mut c = h
                    .grammar_compiler()
                    .expect("compiler")
                    .constraint(&g)
                    .expect("grammar");
                let mut logits = vec![0.0f32; h.info().vocab_size];
                for &t in &tokens {
                    logits.fill(0.0);
                    c.mask(&[], &mut logits);
                    c.commit(t);
                    if let Some(why) = c.failure() {
                        panic!("{db_id}: gave up at token {t} of {text:?}: {why}");
                    }
                }
                panic!("{db_id}: not constrained: {text:?} ({:?})", fin.constrained);
            }
            if fin.reason == quorum_engine::FinishReason::Length {
                // A sampled answer may run out of tokens mid-query; what it wrote is a prefix
                // of the grammar, which the constraint already guarantees.
                continue;
            }
            let sql = format!("SELECT {text}");
            let statements = Parser::parse_sql(&sqlparser::dialect::SQLiteDialect {}, &sql)
                .unwrap_or_else(|e| panic!("{db_id}: does not parse: {sql}: {e}"));
            assert_eq!(statements.len(), 1, "{sql}");
            let mut names = Names::default();
            let _ = statements[0].visit(&mut names);
            for rel in &names.relations {
                let bare = rel.trim_matches(|c| c == '"' || c == '`' || c == '[' || c == ']');
                assert!(s.table(bare).is_some(), "{db_id}: table {rel} in {sql}");
            }
            let aliases = alias_words(&sql);
            for id in &names.identifiers {
                let known = s.tables.iter().any(|t| t.column(id).is_some())
                    || aliases.iter().any(|a| a.eq_ignore_ascii_case(id));
                assert!(known, "{db_id}: identifier {id} in {sql}");
            }
            checked += 1;
        }
    }
    // Most sampled answers finish within the budget; the test must have checked some.
    assert!(checked >= 6, "only {checked} answers finished");
}

/// Words introduced with `AS` (output and table aliases), which a query may name later.
fn alias_words(sql: &str) -> Vec<String> {
    let words: Vec<&str> = sql.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| w[0].eq_ignore_ascii_case("as"))
        .map(|w| {
            w[1].trim_matches(|c: char| !c.is_alphanumeric() && c != '_')
                .to_string()
        })
        .collect()
}

#[test]
fn constrained_greedy_decoding_is_batch_invariant() {
    let h = engine();
    let asks = [
        ("concert_singer", "How many singers are older than 30?"),
        ("pets_1", "How many pets does each student have?"),
        (
            "car_1",
            "What is the maximum horsepower of cars made in 1970?",
        ),
        ("concert_singer", "List stadium names in order of capacity."),
    ];
    let params = SamplingParams {
        max_new_tokens: 48,
        stop_strings: vec!["```".into()],
        ..SamplingParams::greedy()
    };
    let reqs: Vec<GenerateRequest> = asks
        .iter()
        .enumerate()
        .map(|(i, (db_id, q))| {
            // Every other request unconstrained, so a batch mixes both kinds.
            let g = (i % 2 == 0).then(|| grammar(db_id).after(SQL_ANSWER_PREFIX));
            request(prompt_tokens(&h, db_id, q), params.clone(), g)
        })
        .collect();
    let alone: Vec<Vec<u32>> = reqs
        .iter()
        .map(|r| collect(h.submit(r.clone()).expect("submit"), 1).remove(0).1)
        .collect();
    let rxs: Vec<_> = reqs
        .iter()
        .map(|r| h.submit(r.clone()).expect("submit"))
        .collect();
    let batched: Vec<Vec<u32>> = rxs
        .into_iter()
        .map(|rx| collect(rx, 1).remove(0).1)
        .collect();
    assert_eq!(alone, batched);
}
