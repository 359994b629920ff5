//! Bad checkpoints fail with an error that names the problem.

use std::io::Write;

use candle_core::{DType, Device};
use quorum_tests::{SMOLLM2, model_path};
use quorum_weights::{GgufLoadOptions, load_checkpoint, load_gguf, load_lora_adapter};

fn kind(path: &std::path::Path) -> String {
    load_checkpoint(path, &Device::Cpu, DType::F32)
        .expect_err("must fail")
        .kind()
        .to_string()
}

#[test]
fn missing_truncated_and_corrupt_files() {
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(kind(&dir.path().join("nope.gguf")), "missing_file");

    let src = std::fs::read(model_path(SMOLLM2)).unwrap();
    let truncated = dir.path().join("truncated.gguf");
    std::fs::write(&truncated, &src[..src.len() / 2]).unwrap();
    let err =
        load_gguf(&truncated, &Device::Cpu, &GgufLoadOptions::default()).expect_err("truncated");
    assert_eq!(err.kind(), "corrupt");
    assert!(err.to_string().contains("truncated"), "{err}");

    let garbage = dir.path().join("garbage.gguf");
    std::fs::write(&garbage, b"this is not a gguf file at all").unwrap();
    assert_eq!(kind(&garbage), "corrupt");
}

#[test]
fn hf_directory_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    assert_eq!(kind(d), "missing_file", "no config.json");
    std::fs::write(d.join("config.json"), r#"{"model_type": "mamba"}"#).unwrap();
    assert_eq!(kind(d), "unknown_architecture");
    std::fs::write(d.join("config.json"), r#"{"model_type": "llama"}"#).unwrap();
    assert_eq!(kind(d), "missing_file", "no tokenizer.json");
    std::fs::copy(
        model_path("all-minilm-l6-v2").join("tokenizer.json"),
        d.join("tokenizer.json"),
    )
    .unwrap();
    assert_eq!(kind(d), "missing_file", "no safetensors");
    let mut f = std::fs::File::create(d.join("model.safetensors")).unwrap();
    f.write_all(&[200, 0, 0, 0, 0, 0, 0, 0, b'{']).unwrap();
    drop(f);
    assert_eq!(kind(d), "corrupt");
}

#[test]
fn shape_mismatch_names_the_tensor() {
    let ckpt = load_checkpoint(&model_path(SMOLLM2), &Device::Cpu, DType::F32).unwrap();
    let err = ckpt
        .tensors
        .get_checked("model.layers.0.self_attn.q_proj.weight", &[1, 2])
        .expect_err("wrong shape");
    assert_eq!(err.kind(), "shape_mismatch");
    assert!(err.to_string().contains("q_proj"), "{err}");
}

#[test]
fn lora_adapter_loads_and_checks_rank() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("adapter_config.json"),
        r#"{"r": 4, "lora_alpha": 8, "target_modules": ["q_proj"], "peft_type": "LORA"}"#,
    )
    .unwrap();
    let dev = Device::Cpu;
    let a = candle_core::Tensor::zeros((4, 16), DType::F32, &dev).unwrap();
    let b = candle_core::Tensor::zeros((32, 4), DType::F32, &dev).unwrap();
    let mut t = std::collections::HashMap::new();
    t.insert(
        "base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight".to_string(),
        a,
    );
    t.insert(
        "base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight".to_string(),
        b,
    );
    candle_core::safetensors::save(&t, d.join("adapter_model.safetensors")).unwrap();
    let adapter = load_lora_adapter(d, "sql", &dev, DType::F32).expect("adapter loads");
    assert_eq!(adapter.config.scale(), 2.0);
    assert!(
        adapter
            .modules
            .contains_key("model.layers.0.self_attn.q_proj")
    );
    std::fs::write(
        d.join("adapter_config.json"),
        r#"{"r": 8, "lora_alpha": 8, "target_modules": ["q_proj"]}"#,
    )
    .unwrap();
    assert_eq!(
        load_lora_adapter(d, "sql", &dev, DType::F32)
            .expect_err("rank")
            .kind(),
        "shape_mismatch"
    );
}
