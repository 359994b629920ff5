use super::*;
use crate::test_db::scratch_dir;

/// A record with the given identity and outcome; other fields hold plain defaults that tests
/// override as needed.
pub(crate) fn sample(index: usize, hardness: Hardness, ex: bool) -> Record {
    Record {
        index,
        db_id: "pets".to_owned(),
        question: format!("question {index}"),
        gold: format!("SELECT {index}"),
        prediction: if ex {
            format!("SELECT {index}")
        } else {
            "SELECT 0".to_owned()
        },
        hardness,
        category: None,
        ex,
        valid: true,
        error: None,
        gold_error: None,
        gold_ms: Some(1.0),
        pred_ms: Some(1.0),
        ves_ratio: ex.then_some(1.0),
        linked_tables: Some(vec!["pets".to_owned()]),
        gold_tables: vec!["pets".to_owned()],
        candidates: serde_json::json!([]),
        votes: serde_json::Value::Null,
        stage_ms: serde_json::Value::Null,
        matched_values: serde_json::Value::Null,
        term_hints: serde_json::Value::Null,
        evidence_set_aside: Vec::new(),
        filtered_tables: None,
        latency_ms: 10.0,
        tokens_generated: 5,
    }
}

fn write_all(path: &Path, records: &[Record]) {
    let mut w = RecordWriter::open(path).expect("open");
    for r in records {
        w.append(r).expect("append");
    }
}

#[test]
fn round_trips_in_index_order() {
    let dir = scratch_dir("record");
    let path = dir.join("nested/run.jsonl");
    assert_eq!(
        read_records(&path).expect("missing is empty"),
        RecordLog::default()
    );
    let records = [
        sample(5, Hardness::Hard, true),
        sample(2, Hardness::Easy, false),
    ];
    write_all(&path, &records);
    let log = read_records(&path).expect("read");
    assert_eq!(log.records, vec![records[1].clone(), records[0].clone()]);
    assert!(!log.dropped_partial_line);
    assert_eq!(log.finished().collect::<Vec<_>>(), vec![2, 5]);
    let text = std::fs::read_to_string(&path).expect("text");
    assert_eq!(text.lines().count(), 2);
    assert!(text.contains(r#""hardness":"hard""#));
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn partial_last_line_is_ignored_then_cut_off() {
    let dir = scratch_dir("record");
    let path = dir.join("run.jsonl");
    write_all(&path, &[sample(0, Hardness::Easy, true)]);
    // An interrupted write: half of the next line, no newline.
    let full = serde_json::to_string(&sample(1, Hardness::Easy, true)).expect("json");
    let mut file = OpenOptions::new().append(true).open(&path).expect("open");
    file.write_all(&full.as_bytes()[..full.len() / 2])
        .expect("write half");
    drop(file);

    let log = read_records(&path).expect("tolerated");
    assert!(log.dropped_partial_line);
    assert_eq!(log.finished().collect::<Vec<_>>(), vec![0]);

    write_all(&path, &[sample(1, Hardness::Medium, false)]);
    let log = read_records(&path).expect("repaired");
    assert!(!log.dropped_partial_line);
    assert_eq!(log.finished().collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(log.records[1].hardness, Hardness::Medium);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn complete_line_without_newline_is_kept() {
    let dir = scratch_dir("record");
    let path = dir.join("run.jsonl");
    let line = serde_json::to_string(&sample(3, Hardness::Extra, true)).expect("json");
    std::fs::write(&path, &line).expect("write");
    assert_eq!(
        read_records(&path)
            .expect("read")
            .finished()
            .collect::<Vec<_>>(),
        vec![3]
    );
    write_all(&path, &[sample(4, Hardness::Extra, true)]);
    let text = std::fs::read_to_string(&path).expect("text");
    assert_eq!(
        text.lines().count(),
        2,
        "the writer added the missing newline"
    );
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn a_lone_partial_line_is_cut_to_nothing() {
    let dir = scratch_dir("record");
    let path = dir.join("run.jsonl");
    std::fs::write(&path, b"{\"index\": 0, \"db_").expect("write");
    write_all(&path, &[sample(9, Hardness::Easy, true)]);
    let log = read_records(&path).expect("read");
    assert_eq!(log.finished().collect::<Vec<_>>(), vec![9]);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn corruption_before_the_end_is_an_error() {
    let dir = scratch_dir("record");
    let path = dir.join("run.jsonl");
    let good = serde_json::to_string(&sample(0, Hardness::Easy, true)).expect("json");
    std::fs::write(&path, format!("{good}\nnot json\n{good}\n")).expect("write");
    let err = read_records(&path).expect_err("corrupt");
    assert_eq!(err.kind(), "corrupt");
    assert!(err.to_string().contains("line 2"), "{err}");
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn a_later_line_replaces_an_earlier_one() {
    let dir = scratch_dir("record");
    let path = dir.join("run.jsonl");
    write_all(
        &path,
        &[
            sample(1, Hardness::Easy, false),
            sample(1, Hardness::Easy, true),
        ],
    );
    let log = read_records(&path).expect("read");
    assert_eq!(log.records.len(), 1);
    assert!(log.records[0].ex);
    std::fs::remove_dir_all(&dir).expect("cleanup");
}

#[test]
fn a_gzip_compressed_file_reads_as_its_text_and_is_refused_as_output() {
    let dir = scratch_dir("record-gz");
    let plain = dir.join("run.jsonl");
    let records = [
        sample(3, Hardness::Medium, true),
        sample(1, Hardness::Extra, false),
    ];
    write_all(&plain, &records);
    let compressed = dir.join("run.jsonl.gz");
    // `gzip` as a user would run it: the records file written whole, then compressed.
    let status = std::process::Command::new("gzip")
        .args(["-9", "-n", "-k"])
        .arg(&plain)
        .status()
        .expect("gzip runs");
    assert!(status.success());
    assert_eq!(
        read_records(&compressed).expect("read compressed"),
        read_records(&plain).expect("read plain")
    );
    let err = RecordWriter::open(&compressed).expect_err("a compressed file is not appended to");
    assert!(err.to_string().contains("is compressed"), "{err}");
    std::fs::write(dir.join("bad.jsonl.gz"), b"not gzip").expect("write");
    assert!(read_records(&dir.join("bad.jsonl.gz")).is_err());
    std::fs::remove_dir_all(&dir).expect("cleanup");
}
