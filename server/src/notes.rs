//! A database's notes: definitions, units, which column means what, fiscal-year rules, written
//! once by a team (`Databases.AddNote`) and told to every question over the database as
//! evidence, so that users stop repeating them. Kept in memory per database id, and in the
//! registrations file when there is one (replicas share them and restarts keep them, as they
//! keep registrations). A database's notes are never shown for another database.

use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::registration_log::Registration;
use crate::status::ServiceError;

/// Longest note: a definition or a rule, not a document.
pub const MAX_NOTE_CHARS: usize = 2000;
/// Notes a database may hold.
pub const MAX_NOTES: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub id: u32,
    pub text: String,
}

/// Every database's notes.
#[derive(Debug, Default)]
pub struct NoteBook {
    by_db: RwLock<BTreeMap<String, DbNotes>>,
}

#[derive(Debug, Default, Clone)]
struct DbNotes {
    notes: BTreeMap<u32, String>,
    /// The highest id ever given, so that a removed note's id is not given again.
    last_id: u32,
}

/// A note's text as accepted: trimmed, non-empty, bounded, and text (a newline or a tab, but no
/// other control character: those are binary data or terminal escapes, not a definition).
pub fn check_note_text(text: &str) -> Result<String, ServiceError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(ServiceError::invalid("text", "must not be empty"));
    }
    let chars = text.chars().count();
    if chars > MAX_NOTE_CHARS {
        return Err(ServiceError::invalid(
            "text",
            format!("is {chars} characters; a note holds at most {MAX_NOTE_CHARS}"),
        ));
    }
    if let Some(c) = text
        .chars()
        .find(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r'))
    {
        return Err(ServiceError::invalid(
            "text",
            format!(
                "holds the control character U+{:04X}: a note is plain text",
                c as u32
            ),
        ));
    }
    Ok(text.to_owned())
}

impl NoteBook {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, DbNotes>> {
        self.by_db
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, DbNotes>> {
        self.by_db
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A database's notes, by id.
    pub fn list(&self, db_id: &str) -> Vec<Note> {
        self.read().get(db_id).map_or_else(Vec::new, |d| {
            d.notes
                .iter()
                .map(|(id, text)| Note {
                    id: *id,
                    text: text.clone(),
                })
                .collect()
        })
    }

    /// The line that adds `text` as a new note.
    pub fn add_line(&self, db_id: &str, text: &str) -> Result<Registration, ServiceError> {
        let text = check_note_text(text)?;
        let book = self.read();
        let notes = book.get(db_id);
        if notes.is_some_and(|d| d.notes.len() >= MAX_NOTES) {
            return Err(ServiceError::invalid(
                "text",
                format!("database `{db_id}` already holds {MAX_NOTES} notes; edit or remove one"),
            ));
        }
        Ok(Registration::Note {
            db_id: db_id.to_owned(),
            id: notes.map_or(0, |d| d.last_id) + 1,
            text,
        })
    }

    /// The line that replaces note `id`'s text.
    pub fn edit_line(
        &self,
        db_id: &str,
        id: u32,
        text: &str,
    ) -> Result<Registration, ServiceError> {
        let text = check_note_text(text)?;
        self.existing(db_id, id)?;
        Ok(Registration::Note {
            db_id: db_id.to_owned(),
            id,
            text,
        })
    }

    /// The line that removes note `id`.
    pub fn remove_line(&self, db_id: &str, id: u32) -> Result<Registration, ServiceError> {
        self.existing(db_id, id)?;
        Ok(Registration::NoteRemoved {
            db_id: db_id.to_owned(),
            id,
        })
    }

    fn existing(&self, db_id: &str, id: u32) -> Result<(), ServiceError> {
        let found = self
            .read()
            .get(db_id)
            .is_some_and(|d| d.notes.contains_key(&id));
        if found {
            Ok(())
        } else {
            Err(ServiceError::NotFound {
                what: "note",
                id: format!("{db_id}/{id}"),
            })
        }
    }

    /// Applies a note line (this replica's or another's); other lines are not notes.
    pub fn apply(&self, line: &Registration) {
        let mut book = self.write();
        match line {
            Registration::Note { db_id, id, text } => {
                let notes = book.entry(db_id.clone()).or_default();
                notes.notes.insert(*id, text.clone());
                notes.last_id = notes.last_id.max(*id);
            }
            Registration::NoteRemoved { db_id, id } => {
                if let Some(notes) = book.get_mut(db_id) {
                    notes.notes.remove(id);
                }
            }
            Registration::Sqlite { .. }
            | Registration::Postgres { .. }
            | Registration::MySql { .. } => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_kept_per_database_and_ids_are_not_reused() {
        let book = NoteBook::default();
        let first = book
            .add_line("sales", "  TAC = total active customers  ")
            .expect("ok");
        book.apply(&first);
        let second = book.add_line("sales", "Amounts are in cents").expect("ok");
        book.apply(&second);
        book.apply(&book.add_line("hr", "FY starts in April").expect("ok"));
        let sales = book.list("sales");
        assert_eq!(sales.len(), 2);
        assert_eq!(
            sales[0],
            Note {
                id: 1,
                text: "TAC = total active customers".into()
            }
        );
        assert_eq!(book.list("hr")[0].id, 1, "ids count per database");
        assert!(book.list("other").is_empty());
        book.apply(&book.remove_line("sales", 2).expect("exists"));
        let third = book.add_line("sales", "Dates are UTC").expect("ok");
        assert!(
            matches!(third, Registration::Note { id: 3, .. }),
            "{third:?}"
        );
        book.apply(
            &book
                .edit_line("sales", 1, "TAC: joined in the last 30 days")
                .expect("exists"),
        );
        assert_eq!(
            book.list("sales")[0].text,
            "TAC: joined in the last 30 days"
        );
        assert!(matches!(
            book.edit_line("sales", 2, "x"),
            Err(ServiceError::NotFound { .. })
        ));
        assert!(matches!(
            book.remove_line("hr", 9),
            Err(ServiceError::NotFound { .. })
        ));
    }

    #[test]
    fn bad_notes_are_refused_with_a_reason() {
        for (text, says) in [
            ("", "must not be empty"),
            ("   \n ", "must not be empty"),
            (&"x".repeat(MAX_NOTE_CHARS + 1), "at most 2000"),
            ("binary \u{0}\u{1}", "control character U+0000"),
            ("escape \u{1b}[31m", "U+001B"),
        ] {
            let e = check_note_text(text).expect_err(text);
            assert!(e.to_string().contains(says), "{e}");
        }
        assert!(check_note_text("multi\nline\twith tabs").is_ok());
        let book = NoteBook::default();
        for i in 0..MAX_NOTES {
            book.apply(&book.add_line("db", &format!("note {i}")).expect("room"));
        }
        assert!(book.add_line("db", "one more").is_err());
    }
}
