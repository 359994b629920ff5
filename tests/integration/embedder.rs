//! all-MiniLM-L6-v2 through Quorum's BERT embedder vs candle-transformers' BERT.

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert;
use quorum_models::{BertEmbedder, cosine};
use quorum_tests::{MINILM, model_path};
use quorum_weights::load_checkpoint;

fn embedder() -> BertEmbedder {
    let ckpt = load_checkpoint(&model_path(MINILM), &Device::Cpu, DType::F32).expect("load");
    BertEmbedder::load(ckpt, &Device::Cpu).expect("embedder")
}

#[test]
fn minilm_similarities_are_as_published() {
    let e = embedder();
    let v = e
        .embed(&[
            "How many singers do we have?",
            "What is the total number of singers?",
            "The train leaves from platform nine at noon.",
        ])
        .unwrap();
    let same = cosine(&v.get(0).unwrap(), &v.get(1).unwrap()).unwrap();
    let unrelated = cosine(&v.get(0).unwrap(), &v.get(2).unwrap()).unwrap();
    assert!((same - 0.87).abs() < 0.02, "paraphrase cosine {same}");
    assert!(unrelated.abs() < 0.15, "unrelated cosine {unrelated}");
    let norm = v
        .get(0)
        .unwrap()
        .sqr()
        .unwrap()
        .sum_all()
        .unwrap()
        .to_scalar::<f32>()
        .unwrap();
    assert!((norm - 1.0).abs() < 1e-5);
}

#[test]
fn minilm_matches_candle_bert() {
    let e = embedder();
    let dir = model_path(MINILM);
    let cfg: bert::Config =
        serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap()).unwrap();
    let vb = unsafe {
        VarBuilder::from_mmaped_safetensors(
            &[dir.join("model.safetensors")],
            DType::F32,
            &Device::Cpu,
        )
    }
    .unwrap();
    let reference = bert::BertModel::load(vb, &cfg).unwrap();
    for text in [
        "How many singers do we have?",
        "List all stadium names ordered by capacity.",
    ] {
        let ids = e.encode(text).unwrap();
        let ours = e.hidden_states(&ids).unwrap();
        let x = Tensor::new(ids.as_slice(), &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap();
        let theirs = reference
            .forward(&x, &x.zeros_like().unwrap(), None)
            .unwrap()
            .squeeze(0)
            .unwrap();
        let diff = (ours - theirs)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(diff < 1e-4, "hidden states differ by {diff} on {text:?}");
    }
}

/// A team with more notes than a prompt holds: each question is told the notes that mean what
/// it asks, in its own words or in others, and none of the unrelated ones.
#[test]
fn many_notes_reach_the_questions_that_mean_them_in_other_words() {
    use quorum_server::note_retrieval::{NoteEmbeddings, NoteRanker, notes_for};
    use quorum_server::notes::Note;
    let mut notes: Vec<Note> = (1..=30)
        .map(|id| Note {
            id,
            // No word of three letters or more in common with any question below.
            text: format!(
                "Warehouse bay {id} restocks on shift {} overnight, pallets before crates.",
                id % 3
            ),
        })
        .collect();
    let meaningful = [
        (31, "Revenue is the sum of price times quantity, in cents."),
        (
            32,
            "A churned customer is one with no order in the last 90 days.",
        ),
        (33, "Ages are in whole years."),
    ];
    notes.extend(meaningful.iter().map(|(id, text)| Note {
        id: *id,
        text: (*text).to_owned(),
    }));
    let embedder = quorum_tests::MiniLm(embedder());
    let cache = NoteEmbeddings::default();
    for (question, want) in [
        ("How much money did we make in March?", 31),
        ("Which clients stopped buying from us?", 32),
        ("How old is the oldest singer?", 33),
    ] {
        let by_words = notes_for(question, &notes, false, None).unwrap();
        assert!(
            by_words.iter().all(|n| n.id != want),
            "{question}: shares a word with note {want}, so it tests nothing"
        );
        let ranker = NoteRanker {
            embedder: &embedder,
            cache: &cache,
        };
        let told = notes_for(question, &notes, false, Some(ranker)).unwrap();
        let ids: Vec<u32> = told.iter().map(|n| n.id).collect();
        assert_eq!(ids.first(), Some(&want), "{question}: told {ids:?}");
        assert!(
            ids.iter().all(|id| *id > 30),
            "{question}: an unrelated note told: {ids:?}"
        );
    }
}
