//! Which of a database's notes a question is told. All of them while they fit the budget (a
//! team's notes are usually few, and a definition matters most when the question does not use
//! its words); past it, the notes sharing the most words with the question first. The chosen
//! notes lead the evidence every stage of the pipeline reads, so they reach every prompt format.
//! With the evidence filter on, a note that would tell the question nothing (only definitions
//! of terms it does not use) is left out before the budget is spent.

use quorum_sql::evidence_filter::tells_anything;

use crate::notes::Note;

/// Characters of notes a question is told at most: about 400 tokens of a prompt.
pub const NOTES_BUDGET_CHARS: usize = 1600;

/// Lowercased words of three letters or more, without a plural `s`.
fn words(text: &str) -> Vec<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().count() >= 3)
        .map(|w| {
            let w = w.to_lowercase();
            match w.strip_suffix('s') {
                Some(stem) if stem.chars().count() >= 3 => stem.to_owned(),
                _ => w,
            }
        })
        .collect()
}

/// The notes to tell `question`, most relevant first; with `evidence_filter`, only those that
/// tell it something ([`quorum_sql::evidence_filter`]).
pub fn notes_for(question: &str, notes: &[Note], evidence_filter: bool) -> Vec<Note> {
    let notes: Vec<&Note> = notes
        .iter()
        .filter(|n| !evidence_filter || tells_anything(question, &n.text))
        .collect();
    let total: usize = notes.iter().map(|n| n.text.chars().count() + 1).sum();
    let asked = words(question);
    let mut scored: Vec<(usize, &Note)> = notes
        .into_iter()
        .map(|n| {
            let shared = words(&n.text).iter().filter(|w| asked.contains(w)).count();
            (shared, n)
        })
        .collect();
    // Most shared words first; among equals, the older note (a lower id) first.
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.id.cmp(&b.1.id)));
    if total <= NOTES_BUDGET_CHARS {
        return scored.into_iter().map(|(_, n)| n.clone()).collect();
    }
    let mut left = NOTES_BUDGET_CHARS;
    let mut chosen = Vec::new();
    for (shared, note) in scored {
        let len = note.text.chars().count() + 1;
        if shared == 0 || len > left {
            continue;
        }
        left -= len;
        chosen.push(note.clone());
    }
    chosen
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
        let told = notes_for("How many active customers joined?", &notes, false);
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
        let mut notes: Vec<Note> = (1..=40)
            .map(|i| {
                note(
                    i,
                    &format!("Unrelated rule number {i} about {}", "padding ".repeat(8)),
                )
            })
            .collect();
        notes.push(note(41, "Revenue is price times quantity, in cents."));
        let told = notes_for("What was the total revenue last month?", &notes, false);
        assert_eq!(told.first().map(|n| n.id), Some(41));
        let chars: usize = told.iter().map(|n| n.text.len() + 1).sum();
        assert!(chars <= NOTES_BUDGET_CHARS);
        assert!(
            told.iter().all(|n| n.id == 41),
            "no unrelated note: {told:?}"
        );
    }
}
