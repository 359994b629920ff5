//! Export of a run in the input format of Spider's official evaluators (evaluation.py of
//! spider and test-suite-sql-eval): `gold.sql` with lines `<gold SQL>\t<db_id>` and `pred.sql`
//! with lines `<predicted SQL>`, one question per line, in question order, so that our numbers
//! can be checked with the official code.
//!
//! The official readers split lines on newlines and fields on tabs and skip blank lines, so each
//! SQL is made one line without tabs (newlines, carriage returns and tabs become spaces; other
//! whitespace is kept so that string literals keep their spacing), and an empty prediction is
//! written as a placeholder that fails to execute: a blank line would be skipped and shift every
//! later prediction onto the wrong question.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::error::EvalError;
use crate::record::Record;

/// Stands in for an empty prediction: one line, and a syntax error for any evaluator.
pub const EMPTY_PREDICTION: &str = "SELECT";

/// `sql` as one line without tabs.
pub fn one_line(sql: &str) -> String {
    sql.replace("\r\n", " ")
        .replace(['\n', '\r', '\t'], " ")
        .trim()
        .to_owned()
}

/// Records in question (index) order.
fn in_order(records: &[Record]) -> Vec<&Record> {
    let mut sorted: Vec<&Record> = records.iter().collect();
    sorted.sort_by_key(|r| r.index);
    sorted
}

/// Writes the gold file: `<gold SQL>\t<db_id>` per question.
pub fn write_gold(records: &[Record], out: &mut dyn Write) -> std::io::Result<()> {
    for r in in_order(records) {
        writeln!(out, "{}\t{}", one_line(&r.gold), r.db_id)?;
    }
    Ok(())
}

/// Writes the prediction file: `<predicted SQL>` per question.
pub fn write_pred(records: &[Record], out: &mut dyn Write) -> std::io::Result<()> {
    for r in in_order(records) {
        let sql = one_line(&r.prediction);
        let sql = if sql.is_empty() {
            EMPTY_PREDICTION
        } else {
            &sql
        };
        writeln!(out, "{sql}")?;
    }
    Ok(())
}

/// Writes `gold.sql` and `pred.sql` into `dir` (created if needed) and returns their paths.
pub fn export_official(records: &[Record], dir: &Path) -> Result<(PathBuf, PathBuf), EvalError> {
    std::fs::create_dir_all(dir).map_err(|source| EvalError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let gold = dir.join("gold.sql");
    let pred = dir.join("pred.sql");
    write_file(&gold, |w| write_gold(records, w))?;
    write_file(&pred, |w| write_pred(records, w))?;
    Ok((gold, pred))
}

fn write_file(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), EvalError> {
    let io = |source| EvalError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut w = BufWriter::new(File::create(path).map_err(io)?);
    write(&mut w).map_err(io)?;
    w.flush().map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::tests::sample;
    use crate::test_db::scratch_dir;
    use quorum_sql::hardness::Hardness;

    fn records() -> Vec<Record> {
        let mut late = sample(9, Hardness::Easy, true);
        late.db_id = "concert_singer".to_owned();
        late.gold = "SELECT name\n  FROM singer\tWHERE age > 20\r\n".to_owned();
        late.prediction = "SELECT name FROM singer WHERE name = 'a  b'".to_owned();
        let mut early = sample(2, Hardness::Hard, false);
        early.prediction = "  \n".to_owned();
        vec![late, early]
    }

    #[test]
    fn files_in_official_format() {
        let dir = scratch_dir("export");
        let (gold, pred) = export_official(&records(), &dir.join("out")).expect("export");
        assert_eq!(
            std::fs::read_to_string(gold).expect("gold"),
            "SELECT 2\tpets\nSELECT name   FROM singer WHERE age > 20\tconcert_singer\n"
        );
        assert_eq!(
            std::fs::read_to_string(pred).expect("pred"),
            "SELECT\nSELECT name FROM singer WHERE name = 'a  b'\n"
        );
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn one_line_keeps_inner_spacing() {
        assert_eq!(one_line(" a\r\nb\tc  d\n"), "a b c  d");
    }
}
