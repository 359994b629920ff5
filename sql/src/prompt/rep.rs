//! PET-SQL's reference-enhanced representation RE_p: SimpleDDL-MD-Chat plus an optimization rule
//! (OR), cell value references (CV) and foreign key declarations (FK), each a switch (the
//! paper's ablation, Table 3), optionally preceded by few-shot demonstrations.
//!
//! The byte layout follows PET-SQL's code rather than the paper's typeset listing, which
//! differs in small ways (`SQLite` vs `Sqlite`, spaces in cell values): the code is what the
//! reported numbers were measured with.
//!
//! Round 2 (FinSQL) renders the same prompt over `Schema::restrict_to(linked tables)`: the
//! schema lines, cell values and foreign keys of unlinked tables all disappear with it.

use serde::{Deserialize, Serialize};

use super::notes::column_descriptions;
use super::{Demo, Prompt, simple_ddl_md_lines};
use crate::schema::{Schema, Table};

const INSTRUCTION: &str =
    "### Answer the question by sqlite SQL query only and with no explanation";
const OPTIMIZATION_RULE: &str =
    ". You must minimize SQL execution time while ensuring correctness.";
const TABLES_HEADER: &str = "### Sqlite SQL tables, with their properties:\n";
const CELL_VALUES_HEADER: &str = "### Here are some data information about database references.\n";
// The trailing space is in PET-SQL's prompt string.
const FOREIGN_KEYS_HEADER: &str =
    "### Foreign key information of Sqlite SQL tables, used for table joins: \n";
const DEMOS_HEADER: &str = "### Some example pairs of question and corresponding SQL query are provided based on similar problems:";

/// Which of PET-SQL's three additions to include; all on is the full RE_p.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepOptions {
    pub optimization_rule: bool,
    pub cell_values: bool,
    pub foreign_keys: bool,
}

impl Default for RepOptions {
    fn default() -> Self {
        Self {
            optimization_rule: true,
            cell_values: true,
            foreign_keys: true,
        }
    }
}

/// Renders RE_p for `question`, after the demonstrations when there are any.
pub fn render_rep(schema: &Schema, question: &str, demos: &[Demo], options: RepOptions) -> Prompt {
    let mut text = String::new();
    if !demos.is_empty() {
        text.push_str(DEMOS_HEADER);
        text.push_str("\n\n");
        for demo in demos {
            text.push_str(&format!("### {}\n{}\n\n", demo.question, demo.sql));
        }
    }
    let dialect = schema.dialect;
    text.push_str(&dialect.retarget(INSTRUCTION));
    if options.optimization_rule {
        text.push_str(OPTIMIZATION_RULE);
    }
    text.push('\n');
    text.push_str(&dialect.retarget(TABLES_HEADER));
    text.push_str("#\n");
    text.push_str(&simple_ddl_md_lines(schema, ", "));
    text.push_str("#\n");
    text.push_str(&column_descriptions(schema));
    if options.cell_values {
        text.push_str(CELL_VALUES_HEADER);
        text.push_str("#\n");
        for table in &schema.tables {
            text.push_str(&format!("# {};\n", cell_values(table)));
        }
        text.push_str("#\n");
    }
    // A schema without foreign keys (or a round-2 restriction that cut them all) gets no
    // block at all rather than an empty one.
    if options.foreign_keys && !schema.foreign_keys.is_empty() {
        text.push_str(&dialect.retarget(FOREIGN_KEYS_HEADER));
        text.push_str("#\n");
        let lines: Vec<String> = schema
            .foreign_keys
            .iter()
            .map(|fk| {
                format!(
                    "# {}({}) REFERENCES {}({})",
                    fk.from_table, fk.from_column, fk.to_table, fk.to_column
                )
            })
            .collect();
        text.push_str(&lines.join(";\n"));
        text.push_str("\n#\n");
    }
    text.push_str(&format!("### Question: {question}\n### SQL: "));
    Prompt {
        text,
        ends_with_sql_marker: true,
        ends_with_select: false,
    }
}

/// `t(c1[v1,v2,v3],c2[…])` from the first three rows; a table with fewer than three rows shows
/// `t()`, as PET-SQL's code does (it indexes rows 0..3 and gives up on the table otherwise).
fn cell_values(table: &Table) -> String {
    const ROWS: usize = 3;
    if table.rows.len() < ROWS {
        return format!("{}()", table.name);
    }
    let columns: Vec<String> = table
        .columns
        .iter()
        .enumerate()
        .map(|(i, column)| {
            let values: Vec<String> = table.rows[..ROWS]
                .iter()
                .map(|row| row.get(i).map(ToString::to_string).unwrap_or_default())
                .collect();
            format!("{}[{}]", column.name, values.join(","))
        })
        .collect();
    format!("{}({})", table.name, columns.join(","))
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;
    use crate::prompt::fixture::schema;

    const Q: &str = "How many singers are from France?";

    fn one_switch_off(f: impl FnOnce(&mut RepOptions)) -> RepOptions {
        let mut options = RepOptions::default();
        f(&mut options);
        options
    }

    #[test]
    fn full_rep_concert_singer() {
        let prompt = render_rep(&schema("concert_singer"), Q, &[], RepOptions::default());
        assert!(prompt.ends_with_sql_marker);
        expect![[r#"
            ### Answer the question by sqlite SQL query only and with no explanation. You must minimize SQL execution time while ensuring correctness.
            ### Sqlite SQL tables, with their properties:
            #
            # stadium(Stadium_ID, Location, Name, Capacity, Highest, Lowest, Average);
            # singer(Singer_ID, Name, Country, Song_Name, Song_release_year, Age, Is_male);
            # concert(concert_ID, concert_Name, Theme, Stadium_ID, Year);
            # singer_in_concert(concert_ID, Singer_ID).
            #
            ### Here are some data information about database references.
            #
            # stadium(Stadium_ID[1,2,3],Location[Raith Rovers,Ayr United,East Fife],Name[Stark's Park,Somerset Park,Bayview Stadium],Capacity[10104,11998,2000],Highest[4812,2363,1980],Lowest[1294,1057,533],Average[2106,1477,864]);
            # singer(Singer_ID[1,2,3],Name[Joe Sharp,Timbaland,Justin Brown],Country[Netherlands,United States,France],Song_Name[You,Dangerous,Hey Oh],Song_release_year[1992,2008,2013],Age[52,32,29],Is_male[F,T,T]);
            # concert(concert_ID[1,2,3],concert_Name[Auditions,Super bootcamp,Home Visits],Theme[Free choice,Free choice 2,Bleeding Love],Stadium_ID[1,2,2],Year[2014,2014,2015]);
            # singer_in_concert(concert_ID[1,1,1],Singer_ID[2,3,5]);
            #
            ### Foreign key information of Sqlite SQL tables, used for table joins: 
            #
            # concert(Stadium_ID) REFERENCES stadium(Stadium_ID);
            # singer_in_concert(Singer_ID) REFERENCES singer(Singer_ID);
            # singer_in_concert(concert_ID) REFERENCES concert(concert_ID)
            #
            ### Question: How many singers are from France?
            ### SQL: "#]].assert_eq(&prompt.text);
    }

    #[test]
    fn rep_without_optimization_rule() {
        let options = one_switch_off(|o| o.optimization_rule = false);
        let prompt = render_rep(&schema("concert_singer"), Q, &[], options);
        expect![[r#"
            ### Answer the question by sqlite SQL query only and with no explanation
            ### Sqlite SQL tables, with their properties:
            #
            # stadium(Stadium_ID, Location, Name, Capacity, Highest, Lowest, Average);
            # singer(Singer_ID, Name, Country, Song_Name, Song_release_year, Age, Is_male);
            # concert(concert_ID, concert_Name, Theme, Stadium_ID, Year);
            # singer_in_concert(concert_ID, Singer_ID).
            #
            ### Here are some data information about database references.
            #
            # stadium(Stadium_ID[1,2,3],Location[Raith Rovers,Ayr United,East Fife],Name[Stark's Park,Somerset Park,Bayview Stadium],Capacity[10104,11998,2000],Highest[4812,2363,1980],Lowest[1294,1057,533],Average[2106,1477,864]);
            # singer(Singer_ID[1,2,3],Name[Joe Sharp,Timbaland,Justin Brown],Country[Netherlands,United States,France],Song_Name[You,Dangerous,Hey Oh],Song_release_year[1992,2008,2013],Age[52,32,29],Is_male[F,T,T]);
            # concert(concert_ID[1,2,3],concert_Name[Auditions,Super bootcamp,Home Visits],Theme[Free choice,Free choice 2,Bleeding Love],Stadium_ID[1,2,2],Year[2014,2014,2015]);
            # singer_in_concert(concert_ID[1,1,1],Singer_ID[2,3,5]);
            #
            ### Foreign key information of Sqlite SQL tables, used for table joins: 
            #
            # concert(Stadium_ID) REFERENCES stadium(Stadium_ID);
            # singer_in_concert(Singer_ID) REFERENCES singer(Singer_ID);
            # singer_in_concert(concert_ID) REFERENCES concert(concert_ID)
            #
            ### Question: How many singers are from France?
            ### SQL: "#]].assert_eq(&prompt.text);
    }

    #[test]
    fn rep_without_cell_values() {
        let options = one_switch_off(|o| o.cell_values = false);
        let prompt = render_rep(&schema("concert_singer"), Q, &[], options);
        expect![[r#"
            ### Answer the question by sqlite SQL query only and with no explanation. You must minimize SQL execution time while ensuring correctness.
            ### Sqlite SQL tables, with their properties:
            #
            # stadium(Stadium_ID, Location, Name, Capacity, Highest, Lowest, Average);
            # singer(Singer_ID, Name, Country, Song_Name, Song_release_year, Age, Is_male);
            # concert(concert_ID, concert_Name, Theme, Stadium_ID, Year);
            # singer_in_concert(concert_ID, Singer_ID).
            #
            ### Foreign key information of Sqlite SQL tables, used for table joins: 
            #
            # concert(Stadium_ID) REFERENCES stadium(Stadium_ID);
            # singer_in_concert(Singer_ID) REFERENCES singer(Singer_ID);
            # singer_in_concert(concert_ID) REFERENCES concert(concert_ID)
            #
            ### Question: How many singers are from France?
            ### SQL: "#]].assert_eq(&prompt.text);
    }

    #[test]
    fn rep_without_foreign_keys() {
        let options = one_switch_off(|o| o.foreign_keys = false);
        let prompt = render_rep(&schema("concert_singer"), Q, &[], options);
        expect![[r#"
            ### Answer the question by sqlite SQL query only and with no explanation. You must minimize SQL execution time while ensuring correctness.
            ### Sqlite SQL tables, with their properties:
            #
            # stadium(Stadium_ID, Location, Name, Capacity, Highest, Lowest, Average);
            # singer(Singer_ID, Name, Country, Song_Name, Song_release_year, Age, Is_male);
            # concert(concert_ID, concert_Name, Theme, Stadium_ID, Year);
            # singer_in_concert(concert_ID, Singer_ID).
            #
            ### Here are some data information about database references.
            #
            # stadium(Stadium_ID[1,2,3],Location[Raith Rovers,Ayr United,East Fife],Name[Stark's Park,Somerset Park,Bayview Stadium],Capacity[10104,11998,2000],Highest[4812,2363,1980],Lowest[1294,1057,533],Average[2106,1477,864]);
            # singer(Singer_ID[1,2,3],Name[Joe Sharp,Timbaland,Justin Brown],Country[Netherlands,United States,France],Song_Name[You,Dangerous,Hey Oh],Song_release_year[1992,2008,2013],Age[52,32,29],Is_male[F,T,T]);
            # concert(concert_ID[1,2,3],concert_Name[Auditions,Super bootcamp,Home Visits],Theme[Free choice,Free choice 2,Bleeding Love],Stadium_ID[1,2,2],Year[2014,2014,2015]);
            # singer_in_concert(concert_ID[1,1,1],Singer_ID[2,3,5]);
            #
            ### Question: How many singers are from France?
            ### SQL: "#]].assert_eq(&prompt.text);
    }

    #[test]
    fn rep_with_demos_pets() {
        let demos = [
            Demo::new("How many farms are there?", "SELECT count(*) FROM farm"),
            Demo::new("How many books are there?", "SELECT count(*) FROM book"),
        ];
        let prompt = render_rep(
            &schema("pets_1"),
            "How many dogs are heavier than 10?",
            &demos,
            RepOptions::default(),
        );
        expect![[r#"
            ### Some example pairs of question and corresponding SQL query are provided based on similar problems:

            ### How many farms are there?
            SELECT count(*) FROM farm

            ### How many books are there?
            SELECT count(*) FROM book

            ### Answer the question by sqlite SQL query only and with no explanation. You must minimize SQL execution time while ensuring correctness.
            ### Sqlite SQL tables, with their properties:
            #
            # Student(StuID, LName, Fname, Age, Sex, Major, Advisor, city_code);
            # Has_Pet(StuID, PetID);
            # Pets(PetID, PetType, pet_age, weight).
            #
            ### Here are some data information about database references.
            #
            # Student(StuID[1001,1002,1003],LName[Smith,Kim,Jones],Fname[Linda,Tracy,Shiela],Age[18,19,21],Sex[F,F,F],Major[600,600,600],Advisor[1121,7712,7792],city_code[BAL,HKG,WAS]);
            # Has_Pet(StuID[1001,1002,1002],PetID[2001,2002,2003]);
            # Pets(PetID[2001,2002,2003],PetType[cat,dog,dog],pet_age[3,2,1],weight[12.0,13.4,9.3]);
            #
            ### Foreign key information of Sqlite SQL tables, used for table joins: 
            #
            # Has_Pet(StuID) REFERENCES Student(StuID);
            # Has_Pet(PetID) REFERENCES Pets(PetID)
            #
            ### Question: How many dogs are heavier than 10?
            ### SQL: "#]].assert_eq(&prompt.text);
    }

    #[test]
    fn round_two_restricted_to_linked_tables() {
        let linked = schema("concert_singer").restrict_to(&["singer", "singer_in_concert"]);
        let prompt = render_rep(&linked, Q, &[], RepOptions::default());
        expect![[r#"
            ### Answer the question by sqlite SQL query only and with no explanation. You must minimize SQL execution time while ensuring correctness.
            ### Sqlite SQL tables, with their properties:
            #
            # singer(Singer_ID, Name, Country, Song_Name, Song_release_year, Age, Is_male);
            # singer_in_concert(concert_ID, Singer_ID).
            #
            ### Here are some data information about database references.
            #
            # singer(Singer_ID[1,2,3],Name[Joe Sharp,Timbaland,Justin Brown],Country[Netherlands,United States,France],Song_Name[You,Dangerous,Hey Oh],Song_release_year[1992,2008,2013],Age[52,32,29],Is_male[F,T,T]);
            # singer_in_concert(concert_ID[1,1,1],Singer_ID[2,3,5]);
            #
            ### Foreign key information of Sqlite SQL tables, used for table joins: 
            #
            # singer_in_concert(Singer_ID) REFERENCES singer(Singer_ID)
            #
            ### Question: How many singers are from France?
            ### SQL: "#]].assert_eq(&prompt.text);
        // With one linked table no foreign key survives and its block disappears.
        let single = schema("concert_singer").restrict_to(&["singer"]);
        let prompt = render_rep(&single, Q, &[], RepOptions::default());
        assert!(!prompt.text.contains("Foreign key"));
        assert!(prompt.text.contains("# singer(Singer_ID, Name"));
        assert!(!prompt.text.contains("stadium"));
    }

    #[test]
    fn small_tables_print_empty_cell_values() {
        let mut s = schema("concert_singer");
        s.tables[1].rows.truncate(2);
        let prompt = render_rep(&s, Q, &[], RepOptions::default());
        assert!(prompt.text.contains("\n# singer();\n"));
    }

    #[test]
    fn descriptions_follow_the_tables() {
        let mut s = schema("concert_singer").restrict_to(&["singer"]);
        s.dialect = crate::dialect::Dialect::Postgres;
        s.tables[0].columns[6].comment = Some("T when the singer is male".into());
        let prompt = render_rep(&s, Q, &[], RepOptions::default());
        let at = |needle: &str| {
            prompt
                .text
                .find(needle)
                .unwrap_or_else(|| panic!("{needle} in {}", prompt.text))
        };
        assert!(at("# singer(Singer_ID") < at("### Column descriptions:"));
        assert!(at("# singer.Is_male: T when the singer is male\n") < at("### Here are some data"));
        assert!(at("### Here are some data") < at("### Question:"));
    }
}
