//! Which notes a question is told when a team registered more than a prompt holds, with the
//! real MiniLM and no generator: each business-pg database's distinct question evidence is
//! registered as its notes (as `quorum eval --notes-from-evidence` does), and each question is
//! told what `notes_for` chooses, by shared words alone and with the embedder ranking them. The
//! embedder must find the note the question's analyst wrote for it at least as often; the table
//! (`--no-capture`) is the figure docs/RESULTS.md reports.

use std::collections::BTreeMap;

use quorum_server::note_retrieval::{NOTES_BUDGET_CHARS, NoteEmbeddings, NoteRanker, notes_for};
use quorum_server::notes::Note;
use quorum_tests::{MiniLm, spider_dir};
use serde_json::Value;

#[derive(Default, Debug)]
struct Tally {
    own_told: usize,
    own_first: usize,
    notes: usize,
    chars: usize,
}

#[test]
fn the_embedder_tells_questions_their_own_definitions_among_many() {
    let file = spider_dir().join("../business-pg/questions.json");
    let questions: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("business-pg questions"))
            .expect("JSON");
    let field = |q: &Value, name: &str| q[name].as_str().unwrap_or_default().trim().to_owned();
    let mut notes: BTreeMap<String, Vec<Note>> = BTreeMap::new();
    for q in &questions {
        let evidence = field(q, "evidence");
        let db = notes.entry(field(q, "db_id")).or_default();
        if !evidence.is_empty() && db.iter().all(|n| n.text != evidence) {
            let id = db.len() as u32 + 1;
            db.push(Note { id, text: evidence });
        }
    }
    let embedder = MiniLm::load().expect("MiniLM");
    let cache = NoteEmbeddings::default();
    let (mut by_words, mut by_meaning, mut asked) = (Tally::default(), Tally::default(), 0);
    for q in &questions {
        let evidence = field(q, "evidence");
        if evidence.is_empty() {
            continue;
        }
        asked += 1;
        let (question, stored) = (field(q, "question"), &notes[&field(q, "db_id")]);
        let ranker = NoteRanker {
            embedder: &embedder,
            cache: &cache,
        };
        for (tally, ranker) in [(&mut by_words, None), (&mut by_meaning, Some(ranker))] {
            // The evidence filter is on, as in the pipeline's default.
            let told = notes_for(&question, stored, true, ranker).expect("notes");
            let chars: usize = told.iter().map(|n| n.text.chars().count() + 1).sum();
            assert!(
                chars <= NOTES_BUDGET_CHARS,
                "{question}: {chars} characters told"
            );
            tally.own_told += usize::from(told.iter().any(|n| n.text == evidence));
            tally.own_first += usize::from(told.first().is_some_and(|n| n.text == evidence));
            tally.notes += told.len();
            tally.chars += chars;
        }
    }
    let sizes: Vec<String> = notes
        .iter()
        .map(|(db, n)| {
            let chars: usize = n.iter().map(|n| n.text.chars().count()).sum();
            format!("{db}: {} notes, {chars} characters", n.len())
        })
        .collect();
    println!("{asked} questions with evidence; {}", sizes.join("; "));
    println!(
        "| ranking | own note told | own note first | notes told (mean) | characters told (mean) |"
    );
    println!("| --- | --: | --: | --: | --: |");
    for (name, t) in [
        ("shared words", &by_words),
        ("MiniLM (cosine >= 0.25) or a shared word", &by_meaning),
    ] {
        println!(
            "| {name} | {}/{asked} | {}/{asked} | {:.1} | {:.0} |",
            t.own_told,
            t.own_first,
            t.notes as f64 / asked as f64,
            t.chars as f64 / asked as f64
        );
    }
    // 64 of business-pg's 104 questions carry evidence, 8,200 to 9,200 characters a database.
    assert!(asked >= 60, "{asked} questions with evidence");
    assert!(
        by_meaning.own_told >= by_words.own_told,
        "the embedder found fewer own notes: {by_meaning:?} against {by_words:?}"
    );
}
