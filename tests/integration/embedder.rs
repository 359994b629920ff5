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
