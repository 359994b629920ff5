//! XiYan-SQL's generator prompt (the English template of its released fine-tuning code): a role
//! line, the question, the M-Schema, the evidence, the question again, and an open ```sql
//! fence that the model completes.

use super::Prompt;
use super::mschema::render_mschema;
use crate::schema::Schema;

const ROLE: &str = "You are a SQLite expert. You need to read and understand the following【Database Schema】description and the possible provided【Evidence】, and use valid SQLite knowledge to generate SQL for answering the【Question】.";

/// Renders the generator prompt; `evidence` is empty for Spider (BIRD supplies hints).
pub fn render_xiyan(schema: &Schema, question: &str, evidence: &str) -> Prompt {
    let mschema = render_mschema(schema);
    Prompt {
        text: format!(
            "{}\n【Question】\n{question}\n\n【Database Schema】\n{mschema}\n\n【Evidence】\n{evidence}\n\n【Question】\n{question}\n\n```sql",
            schema.dialect.retarget(ROLE)
        ),
        ends_with_sql_marker: false,
        ends_with_select: false,
    }
}

#[cfg(test)]
mod tests {
    use expect_test::expect;

    use super::*;
    use crate::prompt::fixture::schema;

    #[test]
    fn xiyan_prompt_concert_singer() {
        let prompt = render_xiyan(
            &schema("concert_singer"),
            "How many singers do we have?",
            "",
        );
        assert!(!prompt.completion_may_lack_select());
        assert!(prompt.text.ends_with("\n\n```sql"));
        expect![[r#"
            You are a SQLite expert. You need to read and understand the following【Database Schema】description and the possible provided【Evidence】, and use valid SQLite knowledge to generate SQL for answering the【Question】.
            【Question】
            How many singers do we have?

            【Database Schema】
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
            singer_in_concert.concert_ID=concert.concert_ID

            【Evidence】


            【Question】
            How many singers do we have?

            ```sql"#]].assert_eq(&prompt.text);
    }

    #[test]
    fn evidence_is_placed_between_schema_and_question() {
        let prompt = render_xiyan(
            &schema("pets_1").restrict_to(&["pets"]),
            "Q?",
            "dogs are pets",
        );
        let evidence = prompt
            .text
            .find("【Evidence】\ndogs are pets\n\n【Question】\nQ?")
            .expect("evidence");
        let schema_at = prompt.text.find("# Table: Pets").expect("schema");
        assert!(schema_at < evidence);
    }
}
