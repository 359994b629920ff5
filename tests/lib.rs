//! Shared helpers for the integration tests and benches: where the real models are, and the
//! candle-transformers reference implementations Quorum is checked against.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use candle_core::quantized::gguf_file;
use candle_core::{D, Device, Tensor};
use candle_transformers::models::{quantized_llama, quantized_qwen2};
use quorum_models::CpuPath;

pub const QWEN_05B: &str = "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf";
pub const SMOLLM2: &str = "smollm2-135m-instruct-q4_1.gguf";
pub const MINILM: &str = "all-minilm-l6-v2";

/// The models directory, as `scripts/fetch-models.sh` fills it.
pub fn models_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("QUORUM_MODELS_DIR") {
        return PathBuf::from(d);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| home.join(".cache"))
        .join("quorum/models")
}

/// Path of a fetched model. Panics with instructions when it is missing: tests never skip.
pub fn model_path(name: &str) -> PathBuf {
    let p = models_dir().join(name);
    assert!(
        p.exists(),
        "model {} is missing: run scripts/fetch-models.sh (CI does this before the tests)",
        p.display()
    );
    p
}

/// The CPU kernel path the real-model tests run with: `QUORUM_CPU_PATH` when set (CI runs the
/// real-model tests a second time with `avx2` on CPUs that have a faster path), else the
/// fastest this CPU supports. A forced path needs candle's kernels forced the same way in the
/// same environment (`quorum_models::align_candle_with` says which variable); the test process
/// cannot safely change its own environment, so a missing variable is a clear failure.
pub fn cpu_path() -> CpuPath {
    let requested = match std::env::var("QUORUM_CPU_PATH") {
        Ok(name) if !name.trim().is_empty() && name.trim() != "auto" => Some(
            name.parse::<CpuPath>()
                .unwrap_or_else(|e| panic!("QUORUM_CPU_PATH: {e}")),
        ),
        _ => None,
    };
    let path = quorum_models::resolve_cpu_path(requested).unwrap_or_else(|e| panic!("{e}"));
    let needs = match path {
        CpuPath::Avx2 if CpuPath::AvxVnni.supported() || CpuPath::Avx512Vnni.supported() => {
            Some(quorum_models::CANDLE_FORCE_AVX2_VAR)
        }
        CpuPath::AvxVnni if CpuPath::Avx512Vnni.supported() => {
            Some(quorum_models::CANDLE_FORCE_AVXVNNI_VAR)
        }
        _ => None,
    };
    if let Some(var) = needs {
        assert_eq!(
            std::env::var(var).as_deref(),
            Ok("1"),
            "QUORUM_CPU_PATH={path} on this CPU needs {var}=1 so that candle computes alike"
        );
    }
    path
}

/// For benchmark binaries: resolves `--cpu-path` (`auto` or a path name) and makes candle
/// compute alike (see `quorum_models::align_candle_with`).
///
/// # Safety
/// Call it in `main` before any other thread starts.
pub unsafe fn bench_cpu_path(requested: &str) -> Result<CpuPath> {
    let requested = match requested.trim() {
        "" | "auto" => None,
        name => Some(name.parse::<CpuPath>()?),
    };
    let path = quorum_models::resolve_cpu_path(requested)?;
    // SAFETY: forwarded from the caller.
    unsafe { quorum_models::align_candle_with(path) };
    eprintln!("CPU kernel path: {path}");
    Ok(path)
}

/// The engine's default configuration on the tests' CPU kernel path ([`cpu_path`]).
pub fn engine_config(model_name: &str) -> quorum_engine::EngineConfig {
    let mut cfg = quorum_engine::EngineConfig::cpu_default(model_name);
    cfg.matmul_policy = quorum_models::MatmulPolicy::engine(cpu_path());
    cfg
}

/// The Spider data shipped beside the repository.
pub fn spider_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("QUORUM_SPIDER_DIR") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/spider")
}

/// The real all-MiniLM-L6-v2 on the CPU as the pipeline's sentence embedder.
pub struct MiniLm(pub quorum_models::BertEmbedder);

impl MiniLm {
    pub fn load() -> Result<Self> {
        let device = Device::Cpu;
        let checkpoint =
            quorum_weights::load_checkpoint(&model_path(MINILM), &device, candle_core::DType::F32)
                .context("loading MiniLM")?;
        Ok(Self(quorum_models::BertEmbedder::load(
            checkpoint, &device,
        )?))
    }
}

impl quorum_sql::model::Embedder for MiniLm {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, quorum_sql::model::ModelCallError> {
        let failed = |e: &dyn std::fmt::Display| quorum_sql::model::ModelCallError::Failed {
            name: MINILM.to_owned(),
            message: e.to_string(),
        };
        self.0
            .embed(texts)
            .map_err(|e| failed(&e))?
            .to_vec2()
            .map_err(|e| failed(&e))
    }
}

/// Where servers started by tests find models and the shipped adapters: the environment's
/// directories, with the adapters of this checkout unless `QUORUM_ADAPTERS_DIR` says otherwise
/// (tests run in their crate's directory, not the checkout's root).
pub fn model_dirs() -> quorum_server::model_source::ModelDirs {
    let mut dirs = quorum_server::model_source::ModelDirs::from_env(None);
    if std::env::var_os("QUORUM_ADAPTERS_DIR").is_none() {
        dirs.set_adapters_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("../adapters"));
    }
    dirs
}

/// A copy of a GGUF file with slow quantizations re-encoded to Q8_0, written once next to the
/// original: the reference models load this file, so both sides run identical weights.
pub fn reencoded_copy(name: &str) -> Result<PathBuf> {
    let src = model_path(name);
    let dst = src.with_extension("reencoded-q8_0.gguf");
    if !dst.exists() {
        quorum_weights::reencode_gguf_file(&src, &dst, quorum_weights::Reencode::Slow)?;
    }
    Ok(dst)
}

/// A copy of a model with every quantized matrix re-encoded to Q8_0 (see
/// [`quorum_weights::Reencode::All`]), written next to it once.
pub fn all_q8_0_copy(name: &str) -> Result<PathBuf> {
    let src = model_path(name);
    let dst = src.with_extension("all-q8_0.gguf");
    if !dst.exists() {
        quorum_weights::reencode_gguf_file(&src, &dst, quorum_weights::Reencode::All)?;
    }
    Ok(dst)
}

/// candle-transformers' own GGUF models.
pub enum ReferenceModel {
    Qwen2(quantized_qwen2::ModelWeights),
    Llama(quantized_llama::ModelWeights),
}

impl ReferenceModel {
    pub fn load(path: &Path) -> Result<Self> {
        let mut file = std::fs::File::open(path).with_context(|| path.display().to_string())?;
        let ct = gguf_file::Content::read(&mut file)?;
        let arch = ct
            .metadata
            .get("general.architecture")
            .and_then(|v| v.to_string().ok())
            .cloned()
            .unwrap_or_default();
        Ok(match arch.as_str() {
            "qwen2" => Self::Qwen2(quantized_qwen2::ModelWeights::from_gguf(
                ct,
                &mut file,
                &Device::Cpu,
            )?),
            "llama" => Self::Llama(quantized_llama::ModelWeights::from_gguf(
                ct,
                &mut file,
                &Device::Cpu,
            )?),
            other => anyhow::bail!("no reference for architecture {other}"),
        })
    }

    fn forward(&mut self, tokens: &[u32], pos: usize) -> Result<Tensor> {
        let x = Tensor::new(tokens, &Device::Cpu)?.unsqueeze(0)?;
        let logits = match self {
            Self::Qwen2(m) => m.forward(&x, pos)?,
            Self::Llama(m) => m.forward(&x, pos)?,
        };
        Ok(logits.squeeze(0)?)
    }

    /// The reference greedy loop: returns the new tokens and the last prompt position's logits.
    pub fn greedy(
        &mut self,
        prompt: &[u32],
        max_new: usize,
        stop: &[u32],
    ) -> Result<(Vec<u32>, Tensor)> {
        if let Self::Qwen2(m) = self {
            m.clear_kv_cache();
        }
        let prompt_logits = self.forward(prompt, 0)?;
        let mut next = prompt_logits.argmax(D::Minus1)?.to_scalar::<u32>()?;
        let mut out = Vec::new();
        let mut pos = prompt.len();
        while out.len() < max_new {
            out.push(next);
            if stop.contains(&next) || out.len() == max_new {
                break;
            }
            let logits = self.forward(&[next], pos)?;
            next = logits.argmax(D::Minus1)?.to_scalar::<u32>()?;
            pos += 1;
        }
        Ok((out, prompt_logits))
    }
}

impl ReferenceModel {
    /// The reference greedy loop with its prefill time in seconds: (tokens, logits, prefill secs).
    pub fn greedy_timed(
        &mut self,
        prompt: &[u32],
        max_new: usize,
    ) -> Result<(Vec<u32>, Tensor, f64)> {
        if let Self::Qwen2(m) = self {
            m.clear_kv_cache();
        }
        let t = std::time::Instant::now();
        let prompt_logits = self.forward(prompt, 0)?;
        let mut next = prompt_logits.argmax(D::Minus1)?.to_scalar::<u32>()?;
        let prefill = t.elapsed().as_secs_f64();
        let mut out = vec![next];
        let mut pos = prompt.len();
        while out.len() < max_new {
            let logits = self.forward(&[next], pos)?;
            next = logits.argmax(D::Minus1)?.to_scalar::<u32>()?;
            out.push(next);
            pos += 1;
        }
        Ok((out, prompt_logits, prefill))
    }
}

/// Largest absolute difference between two logit vectors, and the scale it is relative to.
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> Result<(f32, f32)> {
    let diff = (a - b)?.abs()?.max_all()?.to_scalar::<f32>()?;
    let scale = a.abs()?.max_all()?.to_scalar::<f32>()?;
    Ok((diff, scale))
}

/// A real Spider schema prompt in the RE_p style (schema, then the first three rows of every
/// table as cell values) on the largest dev database: ~900 tokens with Qwen's tokenizer.
pub fn long_schema_prompt() -> String {
    let db = "student_transcripts_tracking";
    let path = spider_dir().join(format!("database/{db}/{db}.sqlite"));
    let conn =
        rusqlite::Connection::open_with_flags(&path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
            .expect("open Spider database");
    let mut stmt = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        .expect("list tables");
    let tables: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .expect("query")
        .collect::<Result<_, _>>()
        .expect("rows");
    let (mut schema, mut values) = (Vec::new(), Vec::new());
    for t in &tables {
        let mut q = conn
            .prepare(&format!("SELECT * FROM \"{t}\" LIMIT 3"))
            .expect("select");
        let cols: Vec<String> = q.column_names().map(|c| c.to_string()).collect();
        let n = cols.len();
        let rows: Vec<Vec<String>> = q
            .query_map([], |r| {
                (0..n)
                    .map(|i| {
                        let v: rusqlite::types::Value = r.get(i)?;
                        Ok(match v {
                            rusqlite::types::Value::Null => "None".to_string(),
                            rusqlite::types::Value::Integer(x) => x.to_string(),
                            rusqlite::types::Value::Real(x) => x.to_string(),
                            rusqlite::types::Value::Text(x) => x,
                            rusqlite::types::Value::Blob(_) => "<blob>".to_string(),
                        })
                    })
                    .collect()
            })
            .expect("rows")
            .collect::<Result<_, _>>()
            .expect("values");
        schema.push(format!("# {t}({});", cols.join(", ")));
        let cells: Vec<String> = (0..n)
            .map(|i| {
                let vs: Vec<&str> = rows.iter().map(|r| r[i].as_str()).collect();
                format!("{}[{}]", cols[i], vs.join(","))
            })
            .collect();
        values.push(format!("# {t}({});", cells.join(",")));
    }
    format!(
        "### Answer the question by sqlite SQL query only and with no explanation\n### Sqlite SQL tables, with their properties:\n#\n{}\n#\n### Here are some data information about database references.\n#\n{}\n#\n### Question: What are the first, middle and last names of all students who enrolled in the Bachelor degree program and graduated before 2019, ordered by last name?\n### SQL:",
        schema.join("\n"),
        values.join("\n")
    )
}
