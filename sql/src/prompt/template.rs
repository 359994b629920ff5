//! The zero-shot templates of "Benchmarking the Text-to-SQL Capability of Large Language
//! Models" (listings 1-10): a schema style (DDL or SimpleDDL), a wrapper (Markdown, HTML or
//! code comments) and an ending (Chat asks for the SQL, Complete starts it with `SELECT`).
//! SimpleDDL-MD-Chat (listing 4) scored best and is the default.
//!
//! Where the listings elide (`...`), the choices are: DDL names and types are lower-cased
//! names with Spider's coarse types (listing 1: `stadium_id NUMBER PRIMARY KEY`), a composite
//! primary key and foreign keys are table constraints, and SimpleDDL lines outside Markdown
//! all end with `;` (only the Markdown listing shows the final `.`).

use serde::{Deserialize, Serialize};

use super::notes::column_descriptions;
use super::{Prompt, simple_ddl, simple_ddl_md_lines};
use crate::schema::{Schema, Table};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Template {
    DdlHtmlChat,
    DdlHtmlComplete,
    DdlMdChat,
    DdlMdComplete,
    DdlCodingChat,
    DdlCodingComplete,
    #[default]
    SimpleDdlMdChat,
    SimpleDdlMdComplete,
    SimpleDdlHtmlChat,
    SimpleDdlHtmlComplete,
    SimpleDdlCodingChat,
    SimpleDdlCodingComplete,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SchemaStyle {
    Ddl,
    SimpleDdl,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wrapper {
    Md,
    Html,
    Coding,
}

const MD_INSTRUCTION: &str = "### Answer the question by sqlite SQL query only and with no explanation\n### Sqlite SQL tables, with their properties:\n";
const HTML_INSTRUCTION: &str =
    "Figure out corresponding SQLite SQL Query of Question according to database.\n";
const CODING_INSTRUCTION: &str = "/* Given the following database schema: */\n";

impl Template {
    /// The eight templates of the paper's Table 3, in its order.
    pub const EVALUATED: [Template; 8] = [
        Self::DdlHtmlChat,
        Self::DdlHtmlComplete,
        Self::DdlMdChat,
        Self::DdlMdComplete,
        Self::DdlCodingChat,
        Self::DdlCodingComplete,
        Self::SimpleDdlMdChat,
        Self::SimpleDdlMdComplete,
    ];

    /// Every combination the appendix listings define (the evaluated eight plus SimpleDDL with
    /// HTML and Coding, listings 6 and 10).
    pub const ALL: [Template; 12] = [
        Self::DdlHtmlChat,
        Self::DdlHtmlComplete,
        Self::DdlMdChat,
        Self::DdlMdComplete,
        Self::DdlCodingChat,
        Self::DdlCodingComplete,
        Self::SimpleDdlMdChat,
        Self::SimpleDdlMdComplete,
        Self::SimpleDdlHtmlChat,
        Self::SimpleDdlHtmlComplete,
        Self::SimpleDdlCodingChat,
        Self::SimpleDdlCodingComplete,
    ];

    fn parts(self) -> (SchemaStyle, Wrapper, bool) {
        use SchemaStyle::{Ddl, SimpleDdl};
        use Wrapper::{Coding, Html, Md};
        match self {
            Self::DdlHtmlChat => (Ddl, Html, false),
            Self::DdlHtmlComplete => (Ddl, Html, true),
            Self::DdlMdChat => (Ddl, Md, false),
            Self::DdlMdComplete => (Ddl, Md, true),
            Self::DdlCodingChat => (Ddl, Coding, false),
            Self::DdlCodingComplete => (Ddl, Coding, true),
            Self::SimpleDdlMdChat => (SimpleDdl, Md, false),
            Self::SimpleDdlMdComplete => (SimpleDdl, Md, true),
            Self::SimpleDdlHtmlChat => (SimpleDdl, Html, false),
            Self::SimpleDdlHtmlComplete => (SimpleDdl, Html, true),
            Self::SimpleDdlCodingChat => (SimpleDdl, Coding, false),
            Self::SimpleDdlCodingComplete => (SimpleDdl, Coding, true),
        }
    }

    /// The paper's name, e.g. `SimpleDDL-MD-Chat`.
    pub fn name(self) -> String {
        let (style, wrapper, complete) = self.parts();
        let style = match style {
            SchemaStyle::Ddl => "DDL",
            SchemaStyle::SimpleDdl => "SimpleDDL",
        };
        let wrapper = match wrapper {
            Wrapper::Md => "MD",
            Wrapper::Html => "HTML",
            Wrapper::Coding => "Coding",
        };
        let ending = if complete { "Complete" } else { "Chat" };
        format!("{style}-{wrapper}-{ending}")
    }

    /// Parses a name as printed by [`Template::name`] (case-insensitive).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    pub fn render(self, schema: &Schema, question: &str) -> Prompt {
        let (style, wrapper, complete) = self.parts();
        let mut text = match wrapper {
            Wrapper::Md => render_md(schema, style, question),
            Wrapper::Html => render_html(schema, style, question),
            Wrapper::Coding => render_coding(schema, style, question),
        };
        if complete {
            // The listings put `SELECT` after `### SQL:` on the same line, elsewhere on its own.
            text.push_str(match wrapper {
                Wrapper::Md => " SELECT",
                Wrapper::Html => "\n<SQL> SELECT",
                Wrapper::Coding => "\nSELECT",
            });
        }
        Prompt {
            text,
            ends_with_sql_marker: wrapper == Wrapper::Md && !complete,
            ends_with_select: complete,
        }
    }
}

fn render_md(schema: &Schema, style: SchemaStyle, question: &str) -> String {
    let mut text = schema.dialect.retarget(MD_INSTRUCTION);
    match style {
        SchemaStyle::Ddl => {
            for table in &schema.tables {
                text.push_str(&create_table(schema, table));
                text.push('\n');
            }
            text.push_str(&column_descriptions(schema));
            text.push_str(&format!("### Question: {question}\n### SQL:"));
        }
        SchemaStyle::SimpleDdl => {
            text.push_str("#\n");
            text.push_str(&simple_ddl_md_lines(schema, ","));
            text.push_str("#\n");
            text.push_str(&column_descriptions(schema));
            text.push_str(&format!("### {question}\n### SQL:"));
        }
    }
    text
}

fn render_html(schema: &Schema, style: SchemaStyle, question: &str) -> String {
    let mut text = format!("{}<Database>\n", schema.dialect.retarget(HTML_INSTRUCTION));
    for table in &schema.tables {
        text.push_str(&plain_line(schema, table, style));
        text.push('\n');
    }
    text.push_str(&format!("</Database>\n<Question>{question}</Question>"));
    text
}

fn render_coding(schema: &Schema, style: SchemaStyle, question: &str) -> String {
    let mut text = CODING_INSTRUCTION.to_owned();
    for table in &schema.tables {
        text.push_str(&plain_line(schema, table, style));
        text.push('\n');
        // Listing 9 separates CREATE statements by blank lines; listing 10 lists SimpleDDL
        // lines together and leaves one blank line after them.
        if style == SchemaStyle::Ddl {
            text.push('\n');
        }
    }
    if style == SchemaStyle::SimpleDdl {
        text.push('\n');
    }
    text.push_str(&format!(
        "/* Answer the following by {} SQL Query according to database: {question} */\n/* SQL Query here*/",
        schema.dialect.name()
    ));
    text
}

fn plain_line(schema: &Schema, table: &Table, style: SchemaStyle) -> String {
    match style {
        SchemaStyle::Ddl => create_table(schema, table),
        SchemaStyle::SimpleDdl => format!("{};", simple_ddl(table, ",")),
    }
}

/// `CREATE TABLE t (c TYPE [PRIMARY KEY], …);` with lower-cased names and Spider's types.
fn create_table(schema: &Schema, table: &Table) -> String {
    let single_pk = table.primary_key.len() == 1;
    let mut parts: Vec<String> = table
        .columns
        .iter()
        .map(|c| {
            let pk = if single_pk && c.primary_key {
                " PRIMARY KEY"
            } else {
                ""
            };
            format!(
                "{} {}{pk}",
                c.name.to_lowercase(),
                spider_type(&c.declared_type)
            )
        })
        .collect();
    if table.primary_key.len() > 1 {
        let keys: Vec<String> = table.primary_key.iter().map(|k| k.to_lowercase()).collect();
        parts.push(format!("PRIMARY KEY ({})", keys.join(", ")));
    }
    for fk in schema
        .foreign_keys
        .iter()
        .filter(|fk| fk.from_table == table.name)
    {
        parts.push(format!(
            "FOREIGN KEY ({}) REFERENCES {}({})",
            fk.from_column.to_lowercase(),
            fk.to_table.to_lowercase(),
            fk.to_column.to_lowercase()
        ));
    }
    format!(
        "CREATE TABLE {} ({});",
        table.name.to_lowercase(),
        parts.join(", ")
    )
}

/// Spider's five coarse column types, from a declared SQLite type. An undeclared type is shown
/// as text: such a column stores values as given, and text claims the least about them.
fn spider_type(declared: &str) -> &'static str {
    let t = declared.to_ascii_lowercase();
    let has = |needles: &[&str]| needles.iter().any(|n| t.contains(n));
    if t.is_empty() || has(&["char", "text", "clob", "string"]) {
        "TEXT"
    } else if has(&["int", "real", "floa", "doub", "num", "dec"]) {
        "NUMBER"
    } else if has(&["date", "time", "year"]) {
        "TIME"
    } else if has(&["bool", "bit"]) {
        "BOOLEAN"
    } else {
        "OTHERS"
    }
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;
    use crate::prompt::fixture::schema;

    const Q: &str = "How many singers do we have?";

    #[test]
    fn simple_ddl_md_chat_concert_singer() {
        let prompt = Template::SimpleDdlMdChat.render(&schema("concert_singer"), Q);
        assert!(prompt.ends_with_sql_marker);
        assert!(!prompt.ends_with_select);
        expect![[r#"
            ### Answer the question by sqlite SQL query only and with no explanation
            ### Sqlite SQL tables, with their properties:
            #
            # stadium(Stadium_ID,Location,Name,Capacity,Highest,Lowest,Average);
            # singer(Singer_ID,Name,Country,Song_Name,Song_release_year,Age,Is_male);
            # concert(concert_ID,concert_Name,Theme,Stadium_ID,Year);
            # singer_in_concert(concert_ID,Singer_ID).
            #
            ### How many singers do we have?
            ### SQL:"#]]
        .assert_eq(&prompt.text);
    }

    #[test]
    fn simple_ddl_md_complete_pets() {
        let prompt =
            Template::SimpleDdlMdComplete.render(&schema("pets_1"), "How many pets are there?");
        assert!(prompt.ends_with_select);
        assert!(prompt.completion_may_lack_select());
        expect![[r#"
            ### Answer the question by sqlite SQL query only and with no explanation
            ### Sqlite SQL tables, with their properties:
            #
            # Student(StuID,LName,Fname,Age,Sex,Major,Advisor,city_code);
            # Has_Pet(StuID,PetID);
            # Pets(PetID,PetType,pet_age,weight).
            #
            ### How many pets are there?
            ### SQL: SELECT"#]]
        .assert_eq(&prompt.text);
    }

    #[test]
    fn ddl_md_chat_pets() {
        let prompt = Template::DdlMdChat.render(&schema("pets_1"), "How many pets are there?");
        expect![[r#"
            ### Answer the question by sqlite SQL query only and with no explanation
            ### Sqlite SQL tables, with their properties:
            CREATE TABLE student (stuid NUMBER PRIMARY KEY, lname TEXT, fname TEXT, age NUMBER, sex TEXT, major NUMBER, advisor NUMBER, city_code TEXT);
            CREATE TABLE has_pet (stuid NUMBER, petid NUMBER, FOREIGN KEY (stuid) REFERENCES student(stuid), FOREIGN KEY (petid) REFERENCES pets(petid));
            CREATE TABLE pets (petid NUMBER PRIMARY KEY, pettype TEXT, pet_age NUMBER, weight NUMBER);
            ### Question: How many pets are there?
            ### SQL:"#]].assert_eq(&prompt.text);
    }

    #[test]
    fn ddl_html_templates_pets() {
        let s = schema("pets_1");
        let chat = Template::DdlHtmlChat.render(&s, "How many pets are there?");
        assert!(!chat.completion_may_lack_select());
        expect![[r#"
            Figure out corresponding SQLite SQL Query of Question according to database.
            <Database>
            CREATE TABLE student (stuid NUMBER PRIMARY KEY, lname TEXT, fname TEXT, age NUMBER, sex TEXT, major NUMBER, advisor NUMBER, city_code TEXT);
            CREATE TABLE has_pet (stuid NUMBER, petid NUMBER, FOREIGN KEY (stuid) REFERENCES student(stuid), FOREIGN KEY (petid) REFERENCES pets(petid));
            CREATE TABLE pets (petid NUMBER PRIMARY KEY, pettype TEXT, pet_age NUMBER, weight NUMBER);
            </Database>
            <Question>How many pets are there?</Question>"#]].assert_eq(&chat.text);
        let complete = Template::DdlHtmlComplete.render(&s, "How many pets are there?");
        assert_eq!(complete.text, format!("{}\n<SQL> SELECT", chat.text));
        let simple = Template::SimpleDdlHtmlChat.render(&s, "How many pets are there?");
        expect![[r#"
            Figure out corresponding SQLite SQL Query of Question according to database.
            <Database>
            Student(StuID,LName,Fname,Age,Sex,Major,Advisor,city_code);
            Has_Pet(StuID,PetID);
            Pets(PetID,PetType,pet_age,weight);
            </Database>
            <Question>How many pets are there?</Question>"#]]
        .assert_eq(&simple.text);
    }

    #[test]
    fn coding_templates_concert_singer() {
        let s = schema("concert_singer");
        let ddl = Template::DdlCodingChat.render(&s, Q);
        expect![[r#"
            /* Given the following database schema: */
            CREATE TABLE stadium (stadium_id NUMBER PRIMARY KEY, location TEXT, name TEXT, capacity NUMBER, highest NUMBER, lowest NUMBER, average NUMBER);

            CREATE TABLE singer (singer_id NUMBER PRIMARY KEY, name TEXT, country TEXT, song_name TEXT, song_release_year TEXT, age NUMBER, is_male BOOLEAN);

            CREATE TABLE concert (concert_id NUMBER PRIMARY KEY, concert_name TEXT, theme TEXT, stadium_id TEXT, year TEXT, FOREIGN KEY (stadium_id) REFERENCES stadium(stadium_id));

            CREATE TABLE singer_in_concert (concert_id NUMBER, singer_id TEXT, PRIMARY KEY (concert_id, singer_id), FOREIGN KEY (singer_id) REFERENCES singer(singer_id), FOREIGN KEY (concert_id) REFERENCES concert(concert_id));

            /* Answer the following by SQLite SQL Query according to database: How many singers do we have? */
            /* SQL Query here*/"#]].assert_eq(&ddl.text);
        let simple = Template::SimpleDdlCodingComplete.render(&s, Q);
        assert!(simple.ends_with_select && !simple.ends_with_sql_marker);
        expect![[r#"
            /* Given the following database schema: */
            stadium(Stadium_ID,Location,Name,Capacity,Highest,Lowest,Average);
            singer(Singer_ID,Name,Country,Song_Name,Song_release_year,Age,Is_male);
            concert(concert_ID,concert_Name,Theme,Stadium_ID,Year);
            singer_in_concert(concert_ID,Singer_ID);

            /* Answer the following by SQLite SQL Query according to database: How many singers do we have? */
            /* SQL Query here*/
            SELECT"#]].assert_eq(&simple.text);
    }

    #[test]
    fn names_round_trip_and_default_is_the_best_template() {
        assert_eq!(Template::default().name(), "SimpleDDL-MD-Chat");
        for t in Template::ALL {
            assert_eq!(Template::from_name(&t.name()), Some(t));
        }
        assert_eq!(
            Template::from_name("ddl-coding-complete"),
            Some(Template::DdlCodingComplete)
        );
        assert_eq!(Template::from_name("DDL-XML-Chat"), None);
        let evaluated: Vec<String> = Template::EVALUATED.iter().map(|t| t.name()).collect();
        assert_eq!(evaluated[0], "DDL-HTML-Chat");
        assert_eq!(evaluated[7], "SimpleDDL-MD-Complete");
    }

    #[test]
    fn spider_types() {
        let cases = [
            ("int", "NUMBER"),
            ("INTEGER", "NUMBER"),
            ("VARCHAR(12)", "TEXT"),
            ("", "TEXT"),
            ("REAL", "NUMBER"),
            ("decimal(10,2)", "NUMBER"),
            ("DATETIME", "TIME"),
            ("bool", "BOOLEAN"),
            ("blob", "OTHERS"),
        ];
        for (declared, expected) in cases {
            assert_eq!(spider_type(declared), expected, "{declared}");
        }
    }
}
