//! Which of a database's notes a question is told. All of them while they fit the budget (a
//! team's notes are usually few, and a definition matters most when the question does not use
//! its words); past it, the notes most like the question: by the sentence embedder's cosine
//! where the server has one, so that a note reaches a question that says the same in other
//! words ("income" for a note on revenue), else by the words they share. The chosen notes lead
//! the evidence every stage of the pipeline reads, so they reach every prompt format. With the
//! evidence filter on, a note that would tell the question nothing (only definitions of terms it
//! does not use) is left out before the budget is spent.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use quorum_sql::evidence_filter::tells_anything;
use quorum_sql::model::{Embedder, ModelCallError, cosine, embed_checked};
use quorum_sql::words::is_function_word;

use crate::notes::Note;

/// Characters of notes a question is told at most: about 400 tokens of a prompt.
pub const NOTES_BUDGET_CHARS: usize = 1600;

/// How alike a note must be to the question, by the embedder's cosine, to be told when not every
/// note fits (a note sharing a word with the question is told regardless). With all-MiniLM-L6-v2
/// a definition and a question that uses its meaning in other words measured 0.27 to 0.47
/// ("How much money did we make in March?" and a note on revenue; "Which clients stopped
/// buying?" and one on churn; "How old is the oldest singer?" and "Ages are in years."), and
/// unrelated sentences -0.03 to 0.2.
pub const NOTE_MIN_SIMILARITY: f32 = 0.25;

/// Notes' embeddings by text, so that a database's notes are embedded once, not per question.
#[derive(Debug, Default)]
pub struct NoteEmbeddings {
    by_text: Mutex<HashMap<String, Arc<Vec<f32>>>>,
}

/// Texts kept at most; past it the cache starts over (a note is at most 2,000 characters and a
/// database has at most 200).
const NOTE_EMBEDDINGS_KEPT: usize = 8192;

impl NoteEmbeddings {
    /// The embedding of each text, computing only those not cached.
    fn of(
        &self,
        embedder: &dyn Embedder,
        texts: &[&str],
    ) -> Result<Vec<Arc<Vec<f32>>>, ModelCallError> {
        let lock = || self.by_text.lock().unwrap_or_else(PoisonError::into_inner);
        let missing: Vec<&str> = {
            let cached = lock();
            texts
                .iter()
                .copied()
                .filter(|t| !cached.contains_key(*t))
                .collect()
        };
        if !missing.is_empty() {
            let vectors = embed_checked(embedder, &missing, None)?;
            let mut cached = lock();
            if cached.len() + missing.len() > NOTE_EMBEDDINGS_KEPT {
                cached.clear();
            }
            for (text, vector) in missing.into_iter().zip(vectors) {
                cached.insert(text.to_owned(), Arc::new(vector));
            }
        }
        let cached = lock();
        texts
            .iter()
            .map(|t| {
                cached
                    .get(*t)
                    .cloned()
                    .ok_or_else(|| ModelCallError::Failed {
                        name: "embedder".into(),
                        message: "a note's embedding went missing from the cache".into(),
                    })
            })
            .collect()
    }
}

/// The sentence embedder and its cache, when the server has one.
pub struct NoteRanker<'a> {
    pub embedder: &'a dyn Embedder,
    pub cache: &'a NoteEmbeddings,
}

/// Lowercased words of three letters or more, without a plural `s`, and no function word
/// ("the", "and", "which" would make every note share a word with every question).
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3 && !is_function_word(&w.to_lowercase()))
        .map(|w| {
            let w = w.to_lowercase();
            match w.strip_suffix('s') {
                Some(stem) if stem.chars().count() >= 3 => stem.to_owned(),
                _ => w,
            }
        })
        .collect()
}

/// A note's likeness to the question: the words they share, and the embedder's cosine when
/// it was asked.
struct Likeness<'a> {
    note: &'a Note,
    shared: usize,
    similarity: Option<f32>,
}

impl Likeness<'_> {
    fn relevant(&self) -> bool {
        self.shared > 0 || self.similarity.is_some_and(|s| s >= NOTE_MIN_SIMILARITY)
    }
}

/// The notes to tell `question`, most relevant first; with `evidence_filter`, only those that
/// tell it something ([`quorum_sql::evidence_filter`]). The `ranker` is asked only when the
/// notes overflow the budget.
pub fn notes_for(
    question: &str,
    notes: &[Note],
    evidence_filter: bool,
    ranker: Option<NoteRanker>,
) -> Result<Vec<Note>, ModelCallError> {
    let notes: Vec<&Note> = notes
        .iter()
        .filter(|n| !evidence_filter || tells_anything(question, &n.text))
        .collect();
    let total: usize = notes.iter().map(|n| n.text.chars().count() + 1).sum();
    let overflow = total > NOTES_BUDGET_CHARS;
    let similarities = match ranker.filter(|_| overflow) {
        None => None,
        Some(r) => {
            let texts: Vec<&str> = notes.iter().map(|n| n.text.as_str()).collect();
            let vectors = r.cache.of(r.embedder, &texts)?;
            let asked = embed_checked(r.embedder, &[question], None)?;
            Some(
                vectors
                    .iter()
                    .map(|v| cosine(&asked[0], v))
                    .collect::<Vec<f32>>(),
            )
        }
    };
    let asked = words(question);
    let mut scored: Vec<Likeness> = notes
        .into_iter()
        .enumerate()
        .map(|(i, note)| Likeness {
            note,
            shared: words(&note.text)
                .iter()
                .filter(|w| asked.contains(w))
                .count(),
            similarity: similarities.as_ref().map(|s| s[i]),
        })
        .collect();
    // The most alike first (by the embedder where it was asked, else by shared words); among
    // equals, the older note (a lower id) first.
    scored.sort_by(|a, b| {
        let by_similarity = match (a.similarity, b.similarity) {
            (Some(x), Some(y)) => y.total_cmp(&x),
            _ => std::cmp::Ordering::Equal,
        };
        by_similarity
            .then(b.shared.cmp(&a.shared))
            .then(a.note.id.cmp(&b.note.id))
    });
    if !overflow {
        return Ok(scored.into_iter().map(|l| l.note.clone()).collect());
    }
    let mut left = NOTES_BUDGET_CHARS;
    let mut chosen = Vec::new();
    for likeness in scored {
        let len = likeness.note.text.chars().count() + 1;
        if !likeness.relevant() || len > left {
            continue;
        }
        left -= len;
        chosen.push(likeness.note.clone());
    }
    Ok(chosen)
}

/// The evidence the pipeline reads: the notes, then the request's own.
pub fn with_notes(notes: &[Note], evidence: Option<&str>) -> Option<String> {
    let mut parts: Vec<&str> = notes.iter().map(|n| n.text.as_str()).collect();
    if let Some(e) = evidence.filter(|e| !e.trim().is_empty()) {
        parts.push(e);
    }
    (!parts.is_empty()).then(|| parts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(id: u32, text: &str) -> Note {
        Note {
            id,
            text: text.into(),
        }
    }

    #[test]
    fn every_note_fits_when_few_and_the_relevant_lead() {
        let notes = [
            note(1, "Fiscal years start in April."),
            note(2, "TAC means total active customers."),
        ];
        let told = notes_for("How many active customers joined?", &notes, false, None).unwrap();
        assert_eq!(told.iter().map(|n| n.id).collect::<Vec<_>>(), [2, 1]);
        assert_eq!(
            with_notes(&told, Some("joined = signup date")).as_deref(),
            Some(
                "TAC means total active customers.\nFiscal years start in April.\njoined = signup date"
            )
        );
        assert_eq!(with_notes(&[], Some("  ")), None);
        assert_eq!(with_notes(&[], None), None);
    }

    #[test]
    fn past_the_budget_only_notes_sharing_words_are_told() {
        // The unrelated notes share only function words ("what", "was", "the") with the
        // question.
        let mut notes: Vec<Note> = (1..=40)
            .map(|i| {
                note(
                    i,
                    &format!(
                        "What was the unrelated rule number {i} about {}",
                        "padding ".repeat(8)
                    ),
                )
            })
            .collect();
        notes.push(note(41, "Revenue is price times quantity, in cents."));
        let told = notes_for(
            "What was the total revenue last month?",
            &notes,
            false,
            None,
        )
        .unwrap();
        assert_eq!(told.first().map(|n| n.id), Some(41));
        let chars: usize = told.iter().map(|n| n.text.len() + 1).sum();
        assert!(chars <= NOTES_BUDGET_CHARS);
        assert!(
            told.iter().all(|n| n.id == 41),
            "no unrelated note: {told:?}"
        );
    }

    /// An embedder that places each text by the topic words it contains: "money" and
    /// "revenue" share a direction, so they are alike without a shared word.
    struct TopicEmbedder;

    impl Embedder for TopicEmbedder {
        fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, ModelCallError> {
            Ok(texts
                .iter()
                .map(|t| {
                    let t = t.to_lowercase();
                    let money = ["money", "revenue", "income"].iter().any(|w| t.contains(w));
                    let age = ["old", "age"].iter().any(|w| t.contains(w));
                    vec![f32::from(u8::from(money)), f32::from(u8::from(age)), 0.1]
                })
                .collect())
        }
    }

    #[test]
    fn past_the_budget_the_embedder_finds_a_note_in_other_words() {
        let mut notes: Vec<Note> = (1..=40)
            .map(|i| note(i, &format!("Rule {i}: {}", "padding ".repeat(8))))
            .collect();
        notes.push(note(41, "Revenue is price times quantity, in cents."));
        let question = "How much money did we make in March?";
        let by_words = notes_for(question, &notes, false, None).unwrap();
        assert!(by_words.is_empty(), "no shared word: {by_words:?}");
        let cache = NoteEmbeddings::default();
        let ranker = || NoteRanker {
            embedder: &TopicEmbedder,
            cache: &cache,
        };
        let told = notes_for(question, &notes, false, Some(ranker())).unwrap();
        assert_eq!(told.iter().map(|n| n.id).collect::<Vec<_>>(), [41]);
        // The notes were embedded once; a second question reads them from the cache.
        assert_eq!(cache.by_text.lock().unwrap().len(), 41);
        let again = notes_for("What was our income?", &notes, false, Some(ranker())).unwrap();
        assert_eq!(again.iter().map(|n| n.id).collect::<Vec<_>>(), [41]);
    }

    #[test]
    fn within_the_budget_the_embedder_is_not_asked() {
        struct Refusing;
        impl Embedder for Refusing {
            fn embed(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, ModelCallError> {
                panic!("asked although every note fits");
            }
        }
        let cache = NoteEmbeddings::default();
        let notes = [note(1, "Ages are in years.")];
        let ranker = NoteRanker {
            embedder: &Refusing,
            cache: &cache,
        };
        let told = notes_for("How old is the oldest singer?", &notes, false, Some(ranker)).unwrap();
        assert_eq!(told.len(), 1);
    }
}
