//! Registrations kept in a file that replicas share (`databases.registrations_file`): one JSON
//! line per `Databases.Register` (and per note added, edited or removed), appended under an exclusive file lock and read back by every
//! replica, so a database registered through one replica is answered by all of them and
//! survives restarts.
//!
//! The file holds what a client asked for, not what it found: each replica opens the database
//! itself and applies its own policy (the allowed directory, the allowed PostgreSQL and MySQL
//! hosts, the named passwords) when it reads a line, so an edited file cannot get past a replica's rules.
//! Passwords are never written, only the name of a configured one.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

/// One registration as the file keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Registration {
    /// A SQLite file, by the path the client gave (inside the allowed directory).
    Sqlite { db_id: String, path: String },
    /// A PostgreSQL database, by its connection string, schema and password name.
    Postgres {
        db_id: String,
        url: String,
        schema: String,
        password_name: String,
    },
    /// A MySQL database, by its URL, database and password name.
    MySql {
        db_id: String,
        url: String,
        database: String,
        password_name: String,
    },
    /// A note on a database, new or with new text.
    Note {
        db_id: String,
        id: u32,
        text: String,
    },
    /// A note removed.
    NoteRemoved { db_id: String, id: u32 },
}

impl Registration {
    pub fn db_id(&self) -> &str {
        match self {
            Self::Sqlite { db_id, .. }
            | Self::Postgres { db_id, .. }
            | Self::MySql { db_id, .. }
            | Self::Note { db_id, .. }
            | Self::NoteRemoved { db_id, .. } => db_id,
        }
    }

    /// Whether the line is about a database's notes rather than the database itself.
    pub fn is_note(&self) -> bool {
        matches!(self, Self::Note { .. } | Self::NoteRemoved { .. })
    }
}

/// The shared file, and how far this process has read it.
#[derive(Debug)]
pub struct RegistrationLog {
    path: PathBuf,
    /// Bytes of the file already read (whole lines only); the lock also serialises this
    /// process's reads and appends.
    read_to: Mutex<u64>,
}

impl RegistrationLog {
    /// Uses `path`, creating the file (not its directory) when it does not exist.
    pub fn open(path: &Path) -> std::io::Result<Self> {
        OpenOptions::new().append(true).create(true).open(path)?;
        Ok(Self {
            path: path.to_owned(),
            read_to: Mutex::new(0),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The registrations appended since the last read, by any replica.
    pub fn read_new(&self) -> std::io::Result<Vec<Registration>> {
        let mut read_to = self.read_to.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = File::open(&self.path)?;
        file.lock_shared()?;
        let new = read_from(&mut file, &mut read_to, &self.path);
        file.unlock()?;
        new
    }

    /// Appends the registration `decide` returns, holding the file's exclusive lock from
    /// before `decide` sees the registrations other replicas appended meanwhile (which it must
    /// apply first) until the line is written; nothing is appended when `decide` fails.
    pub fn append_with<T, E: From<std::io::Error>>(
        &self,
        decide: impl FnOnce(Vec<Registration>) -> Result<(Registration, T), E>,
    ) -> Result<T, E> {
        let mut read_to = self.read_to.lock().unwrap_or_else(|p| p.into_inner());
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .open(&self.path)?;
        file.lock()?;
        let result = (|| {
            let new = read_from(&mut file, &mut read_to, &self.path)?;
            let (registration, value) = decide(new)?;
            let mut line = serde_json::to_string(&registration).map_err(std::io::Error::other)?;
            line.push('\n');
            file.write_all(line.as_bytes())?;
            file.flush()?;
            *read_to = file.seek(SeekFrom::End(0))?;
            Ok(value)
        })();
        file.unlock()?;
        result
    }
}

/// Whole lines from `*read_to` on; a line that does not parse is logged and skipped, so one
/// damaged line does not hide the rest.
fn read_from(
    file: &mut File,
    read_to: &mut u64,
    path: &Path,
) -> std::io::Result<Vec<Registration>> {
    file.seek(SeekFrom::Start(*read_to))?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)?;
    // A line still being written by a replica without the lock (there should be none) ends
    // without a newline: it is read next time.
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    *read_to += complete as u64;
    let mut out = Vec::new();
    for line in bytes[..complete].split(|&b| b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Registration>(line) {
            Ok(registration) => out.push(registration),
            Err(e) => tracing::warn!(
                file = %path.display(),
                error = %e,
                "registrations file: a line that is not a registration was skipped"
            ),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sqlite(id: &str) -> Registration {
        Registration::Sqlite {
            db_id: id.into(),
            path: format!("{id}.sqlite"),
        }
    }

    #[test]
    fn two_logs_on_one_file_see_each_others_lines_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("registrations.jsonl");
        let a = RegistrationLog::open(&path).expect("open");
        let b = RegistrationLog::open(&path).expect("open");
        assert_eq!(a.read_new().expect("read"), vec![]);
        a.append_with(|new| {
            assert!(new.is_empty());
            Ok::<_, std::io::Error>((sqlite("one"), ()))
        })
        .expect("append");
        assert_eq!(
            a.read_new().expect("read"),
            vec![],
            "a has read its own line"
        );
        // b appends after a: it is shown a's line first.
        b.append_with(|new| {
            assert_eq!(new, vec![sqlite("one")]);
            Ok::<_, std::io::Error>((sqlite("two"), ()))
        })
        .expect("append");
        assert_eq!(a.read_new().expect("read"), vec![sqlite("two")]);
        assert_eq!(b.read_new().expect("read"), vec![]);
    }

    #[test]
    fn a_refused_registration_writes_nothing_and_bad_lines_are_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("registrations.jsonl");
        let log = RegistrationLog::open(&path).expect("open");
        let refused: Result<(), std::io::Error> =
            log.append_with(|_| Err(std::io::Error::other("no")));
        assert!(refused.is_err());
        assert_eq!(std::fs::read(&path).expect("read").len(), 0);
        std::fs::write(
            &path,
            "not json\n{\"kind\":\"sqlite\",\"db_id\":\"x\",\"path\":\"x.sqlite\"}\n{\"kind\":",
        )
        .expect("write");
        let fresh = RegistrationLog::open(&path).expect("open");
        assert_eq!(fresh.read_new().expect("read"), vec![sqlite("x")]);
        // The unterminated line is read once it is complete.
        let mut file = OpenOptions::new().append(true).open(&path).expect("open");
        file.write_all(b"\"sqlite\",\"db_id\":\"y\",\"path\":\"y.sqlite\"}\n")
            .expect("write");
        assert_eq!(fresh.read_new().expect("read"), vec![sqlite("y")]);
    }
}
