//! LoRA adapters applied in the forward pass, per chunk of a packed batch.
//!
//! A request names an adapter; its chunk's rows get `scale · B(A x)` added to the output of
//! every adapted projection (PEFT's definition: `h = W x + (alpha / r) · B A x`, with
//! `alpha / sqrt(r)` under rank-stabilized LoRA). Rows of different adapters, and rows with
//! none, share one forward pass: the base matmul runs once for the whole batch and only the
//! small low-rank products run per row.
//!
//! Each row's delta is computed by the same fixed-order loops whatever else is batched, so a
//! request with an adapter keeps the engine's batching invariance.

use quorum_kernels::CpuPath;
use quorum_weights::LoraAdapter;

use crate::config::DecoderConfig;
use crate::error::{ModelError, ModelResult};

/// The projections of a decoder layer, in the order [`LayerLora`] stores them.
pub(crate) const PROJECTIONS: [&str; 7] = quorum_weights::DECODER_PROJECTIONS;

/// Index into [`PROJECTIONS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Proj {
    Q = 0,
    K = 1,
    V = 2,
    O = 3,
    Gate = 4,
    Up = 5,
    Down = 6,
}

impl Proj {
    /// Every projection, in [`PROJECTIONS`] order.
    pub(crate) const ALL: [Proj; PROJECTIONS.len()] = [
        Proj::Q,
        Proj::K,
        Proj::V,
        Proj::O,
        Proj::Gate,
        Proj::Up,
        Proj::Down,
    ];
}

/// One adapted projection: `A` `[r, in]` and `B` transposed, `[r, out]`, row-major f32 (each
/// rank's column of `B` contiguous, so `B · (A x)` runs as `r` vectorizable row updates).
#[derive(Debug, Clone)]
pub(crate) struct LoraPair {
    pub(crate) rank: usize,
    pub(crate) a: Vec<f32>,
    pub(crate) b_t: Vec<f32>,
}

/// Rows whose deltas are computed together: each row of `A` and of `Bᵀ` is read from memory
/// once per block and from the L1 cache for the block's other rows. Per row the operations and
/// their order are those of a block of one.
const ROW_BLOCK: usize = 4;

/// Scratch space for one block of rows, reused across blocks and calls.
#[derive(Default)]
struct RowScratch {
    /// `[rows][rank]`: `A x` of each row.
    ax: Vec<f32>,
    /// `[rows][out]`: `B (A x)` of each row.
    bax: Vec<f32>,
}

impl LoraPair {
    pub(crate) fn fan_in(&self) -> usize {
        self.a.len() / self.rank
    }

    pub(crate) fn fan_out(&self) -> usize {
        self.b_t.len() / self.rank
    }

    /// `y += scale · B (A x)` for each row of a block (`x`: rows of `in` floats, `y`: rows of
    /// `out` floats). The order of every sum is fixed by the shapes alone, so a row gets the
    /// same delta wherever it sits in a batch and whatever block it is computed in.
    #[inline(always)]
    fn add_block(&self, x: &[f32], y: &mut [f32], scale: f32, scratch: &mut RowScratch) {
        let (fan_in, fan_out) = (self.a.len() / self.rank, self.b_t.len() / self.rank);
        let rows = x.len() / fan_in;
        let RowScratch { ax, bax } = scratch;
        ax.clear();
        ax.resize(rows * self.rank, 0.0);
        for (r, a_row) in self.a.chunks_exact(fan_in).enumerate() {
            for (i, x_row) in x.chunks_exact(fan_in).enumerate() {
                ax[i * self.rank + r] = dot(a_row, x_row);
            }
        }
        bax.clear();
        bax.resize(rows * fan_out, 0.0);
        for (r, b_col) in self.b_t.chunks_exact(fan_out).enumerate() {
            for (i, t_row) in bax.chunks_exact_mut(fan_out).enumerate() {
                let s = ax[i * self.rank + r];
                for (t, &b) in t_row.iter_mut().zip(b_col) {
                    *t += b * s;
                }
            }
        }
        for (out, &t) in y.iter_mut().zip(bax.iter()) {
            *out += scale * t;
        }
    }
}

/// Partial sums a dot product keeps, added up in a fixed order at the end. One running sum
/// cannot be vectorized (float addition is not associative, so the compiler keeps its order)
/// and waits on each add's latency; 16 independent lanes fill the vector units.
const DOT_LANES: usize = 16;

#[inline(always)]
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let whole = a.len() / DOT_LANES * DOT_LANES;
    let mut acc = [0f32; DOT_LANES];
    for (ca, cb) in a[..whole]
        .chunks_exact(DOT_LANES)
        .zip(b[..whole].chunks_exact(DOT_LANES))
    {
        for i in 0..DOT_LANES {
            acc[i] += ca[i] * cb[i];
        }
    }
    let tail: f32 = a[whole..].iter().zip(&b[whole..]).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + tail
}

/// `rows` of `y` get their delta (see [`LoraPair::add_block`]).
#[inline(always)]
fn add_rows(pair: &LoraPair, x: &[f32], y: &mut [f32], rows: std::ops::Range<usize>, scale: f32) {
    let (fan_in, fan_out) = (pair.a.len() / pair.rank, pair.b_t.len() / pair.rank);
    let mut scratch = RowScratch::default();
    let (xs, ys) = (
        &x[rows.start * fan_in..rows.end * fan_in],
        &mut y[rows.start * fan_out..rows.end * fan_out],
    );
    for (xb, yb) in xs
        .chunks(ROW_BLOCK * fan_in)
        .zip(ys.chunks_mut(ROW_BLOCK * fan_out))
    {
        pair.add_block(xb, yb, scale, &mut scratch);
    }
}

/// [`add_rows`] compiled for 512-bit vectors.
///
/// # Safety
/// The CPU must support avx512f.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn add_rows_avx512(
    pair: &LoraPair,
    x: &[f32],
    y: &mut [f32],
    rows: std::ops::Range<usize>,
    scale: f32,
) {
    add_rows(pair, x, y, rows, scale);
}

/// [`add_rows`] compiled for 256-bit vectors.
///
/// # Safety
/// The CPU must support avx2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn add_rows_avx2(
    pair: &LoraPair,
    x: &[f32],
    y: &mut [f32],
    rows: std::ops::Range<usize>,
    scale: f32,
) {
    add_rows(pair, x, y, rows, scale);
}

/// The vector width the row loops run at. The arithmetic is the same at every width: Rust
/// never fuses a multiply and an add into one rounding, and each sum keeps its order (16
/// lanes, then the lanes in order), so the choice changes speed, not a bit of the result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoraKernel {
    /// The target's baseline (SSE2 on x86-64, NEON on aarch64).
    Baseline,
    Avx2,
    Avx512,
}

impl LoraKernel {
    /// The widest kernel of an int8 GEMM path (so a forced path also narrows LoRA's loops);
    /// the baseline without one.
    pub fn for_path(path: Option<CpuPath>) -> Self {
        match path {
            Some(CpuPath::Avx512Vnni) => Self::Avx512,
            Some(CpuPath::AvxVnni | CpuPath::Avx2) => Self::Avx2,
            Some(CpuPath::Candle) | None => Self::Baseline,
        }
        .supported_or_baseline()
    }

    fn supported_or_baseline(self) -> Self {
        #[cfg(target_arch = "x86_64")]
        let supported = match self {
            Self::Baseline => true,
            Self::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            Self::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
        };
        #[cfg(not(target_arch = "x86_64"))]
        let supported = self == Self::Baseline;
        if supported { self } else { Self::Baseline }
    }

    fn add_rows(
        self,
        pair: &LoraPair,
        x: &[f32],
        y: &mut [f32],
        rows: std::ops::Range<usize>,
        scale: f32,
    ) {
        match self {
            // SAFETY: `supported_or_baseline` checked the CPU has the kernel's features.
            #[cfg(target_arch = "x86_64")]
            Self::Avx512 => unsafe { add_rows_avx512(pair, x, y, rows, scale) },
            // SAFETY: as above.
            #[cfg(target_arch = "x86_64")]
            Self::Avx2 => unsafe { add_rows_avx2(pair, x, y, rows, scale) },
            _ => add_rows(pair, x, y, rows, scale),
        }
    }
}

type LayerLora = [Option<LoraPair>; PROJECTIONS.len()];

/// An adapter ready for the forward pass.
#[derive(Debug, Clone)]
pub struct LoraWeights {
    name: String,
    scale: f32,
    layers: Vec<LayerLora>,
    kernel: LoraKernel,
}

impl LoraWeights {
    /// Checks every module of `adapter` against the model's shapes. A module the decoder has
    /// no slot for (an embedding, the output head) is an error rather than silently ignored:
    /// the adapter would not compute what it was trained to.
    pub fn new(
        adapter: &LoraAdapter,
        cfg: &DecoderConfig,
        kernel: LoraKernel,
    ) -> ModelResult<Self> {
        let mut layers: Vec<LayerLora> = (0..cfg.num_layers).map(|_| Default::default()).collect();
        let (h, q_out, kv_out, ffn) = (
            cfg.hidden_size,
            cfg.num_heads * cfg.head_dim,
            cfg.num_kv_heads * cfg.head_dim,
            cfg.intermediate_size,
        );
        let shapes = [
            (h, q_out),
            (h, kv_out),
            (h, kv_out),
            (q_out, h),
            (h, ffn),
            (h, ffn),
            (ffn, h),
        ];
        let bad = |module: &str, detail: String| ModelError::Adapter {
            adapter: adapter.name.clone(),
            detail: format!("module `{module}`: {detail}"),
        };
        for (module, (a, b)) in &adapter.modules {
            let (layer, proj) = locate(module, cfg.num_layers)
                .ok_or_else(|| bad(module, "not a projection of a decoder layer".into()))?;
            let (fan_in, fan_out) = shapes[proj];
            let (rank, a_in) = a.dims2()?;
            let (b_out, b_rank) = b.dims2()?;
            if rank == 0 || a_in != fan_in || b_out != fan_out || b_rank != rank {
                return Err(bad(
                    module,
                    format!(
                        "A is [{rank}, {a_in}] and B [{b_out}, {b_rank}]; the projection is \
                         {fan_in} -> {fan_out}"
                    ),
                ));
            }
            let flat = |t: &candle_core::Tensor| -> ModelResult<Vec<f32>> {
                Ok(t.to_dtype(candle_core::DType::F32)?
                    .flatten_all()?
                    .to_vec1::<f32>()?)
            };
            let mut b = flat(b)?;
            // GGUF stores llama's q/k rows in the interleaved rotary order; an adapter trained
            // on the Hugging Face weights names its output rows in the original order.
            if cfg.rope_interleaved && (proj == Proj::Q as usize || proj == Proj::K as usize) {
                b = interleave_rows(&b, rank, cfg.head_dim);
            }
            layers[layer][proj] = Some(LoraPair {
                rank,
                a: flat(a)?,
                b_t: transpose(&b, b_out, rank),
            });
        }
        Ok(Self {
            name: adapter.name.clone(),
            scale: adapter.config.scale() as f32,
            layers,
            kernel: kernel.supported_or_baseline(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `alpha / r` (or `alpha / sqrt(r)` under rank-stabilized LoRA).
    pub(crate) fn scale(&self) -> f32 {
        self.scale
    }

    /// The low-rank pair of projection `proj` of `layer`, if this adapter changes it.
    pub(crate) fn pair(&self, layer: usize, proj: Proj) -> Option<&LoraPair> {
        self.layers.get(layer)?[proj as usize].as_ref()
    }

    /// Whether this adapter changes projection `proj` of `layer`.
    pub(crate) fn adapts(&self, layer: usize, proj: Proj) -> bool {
        self.layers[layer][proj as usize].is_some()
    }

    /// Adds this adapter's delta for `proj` of `layer` to every row of `y` (`[n, out]`), given
    /// the projection's input rows `x` (`[n, in]`).
    pub(crate) fn apply_rows(&self, layer: usize, proj: Proj, x: &[f32], y: &mut [f32]) {
        let Some(pair) = &self.layers[layer][proj as usize] else {
            return;
        };
        let n = x.len() / (pair.a.len() / pair.rank);
        self.kernel.add_rows(pair, x, y, 0..n, self.scale);
    }

    /// Adds this adapter's delta for `proj` of `layer` to `rows` of `y` (`[n, out]`), given the
    /// projection's input `x` (`[n, in]`), both row-major.
    pub(crate) fn apply(
        &self,
        layer: usize,
        proj: Proj,
        x: &[f32],
        y: &mut [f32],
        rows: std::ops::Range<usize>,
    ) {
        let Some(pair) = &self.layers[layer][proj as usize] else {
            return;
        };
        self.kernel.add_rows(pair, x, y, rows, self.scale);
    }
}

/// `m` (`rows` × `cols`, row-major) transposed.
fn transpose(m: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    (0..cols)
        .flat_map(|c| (0..rows).map(move |r| m[r * cols + c]))
        .collect()
}

/// Reorders the rows of a q/k output matrix (`width` floats per row) from the Hugging Face
/// order to GGUF's: within each head of `head_dim` rows, row `half * head_dim / 2 + i` moves to
/// `2 * i + half` (llama.cpp's conversion pairs the two rotary halves).
fn interleave_rows(m: &[f32], width: usize, head_dim: usize) -> Vec<f32> {
    let half = head_dim / 2;
    let mut out = vec![0f32; m.len()];
    for (row, src) in m.chunks_exact(width).enumerate() {
        let (head, r) = (row / head_dim, row % head_dim);
        let dst = head * head_dim + 2 * (r % half) + r / half;
        out[dst * width..(dst + 1) * width].copy_from_slice(src);
    }
    out
}

/// `model.layers.{i}.{projection}` → (i, projection index).
fn locate(module: &str, num_layers: usize) -> Option<(usize, usize)> {
    let rest = module.strip_prefix("model.layers.")?;
    let (layer, proj) = rest.split_once('.')?;
    let layer: usize = layer.parse().ok().filter(|&l| l < num_layers)?;
    let proj = PROJECTIONS.iter().position(|p| *p == proj)?;
    Some((layer, proj))
}

#[cfg(test)]
mod tests {
    use candle_core::{Device, Tensor};

    use super::*;

    #[test]
    fn row_delta_matches_candle_matmul() {
        let dev = Device::Cpu;
        let (n, fan_in, fan_out, rank) = (5, 24, 10, 4);
        let a = Tensor::randn(0f32, 1.0, (rank, fan_in), &dev).unwrap();
        let b = Tensor::randn(0f32, 1.0, (fan_out, rank), &dev).unwrap();
        let x = Tensor::randn(0f32, 1.0, (n, fan_in), &dev).unwrap();
        let y = Tensor::randn(0f32, 1.0, (n, fan_out), &dev).unwrap();
        let scale = 0.5f32;
        let want = (&y
            + (x.matmul(&a.t().unwrap())
                .unwrap()
                .matmul(&b.t().unwrap())
                .unwrap()
                * 0.5)
                .unwrap())
        .unwrap();
        let pair = LoraPair {
            rank,
            a: a.flatten_all().unwrap().to_vec1().unwrap(),
            b_t: b.t().unwrap().flatten_all().unwrap().to_vec1().unwrap(),
        };
        let mut layers: Vec<LayerLora> = vec![Default::default()];
        layers[0][Proj::V as usize] = Some(pair);
        let w = LoraWeights {
            name: "t".into(),
            scale,
            layers,
            kernel: LoraKernel::Baseline,
        };
        let xs: Vec<f32> = x.flatten_all().unwrap().to_vec1().unwrap();
        let mut ys: Vec<f32> = y.flatten_all().unwrap().to_vec1().unwrap();
        // Rows 1..4 only: the others keep the base output.
        w.apply(0, Proj::V, &xs, &mut ys, 1..4);
        let want: Vec<Vec<f32>> = want.to_vec2().unwrap();
        let base: Vec<Vec<f32>> = y.to_vec2().unwrap();
        for r in 0..n {
            let expect = if (1..4).contains(&r) {
                &want[r]
            } else {
                &base[r]
            };
            for (got, e) in ys[r * fan_out..(r + 1) * fan_out].iter().zip(expect) {
                assert!((got - e).abs() < 1e-4, "row {r}: {got} vs {e}");
            }
        }
        // An unadapted projection is left alone.
        let before = ys.clone();
        w.apply(0, Proj::Q, &xs, &mut ys, 0..n);
        assert_eq!(before, ys);
    }

    #[test]
    fn dot_matches_a_wide_reference_on_odd_lengths() {
        for len in [0, 1, 15, 16, 17, 33, 896] {
            let a: Vec<f32> = (0..len)
                .map(|i| ((i * 7 % 13) as f32 - 6.0) / 5.0)
                .collect();
            let b: Vec<f32> = (0..len)
                .map(|i| ((i * 5 % 11) as f32 - 5.0) / 3.0)
                .collect();
            let want: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| f64::from(*x) * f64::from(*y))
                .sum();
            let got = f64::from(dot(&a, &b));
            assert!(
                (got - want).abs() <= 1e-4 * want.abs().max(1.0),
                "{len}: {got} vs {want}"
            );
        }
    }

    /// Every kernel this CPU runs, on blocks of rows, gives the bits of the baseline on one row
    /// at a time, on odd shapes.
    #[test]
    fn every_kernel_gives_the_baseline_bits() {
        let value = |i: usize, m: usize| ((i * m % 97) as f32 - 48.0) / 37.0;
        for (fan_in, fan_out, rank) in [(24, 10, 4), (37, 53, 3), (896, 128, 16), (129, 4864, 8)] {
            let pair = LoraPair {
                rank,
                a: (0..rank * fan_in).map(|i| value(i, 7)).collect(),
                b_t: (0..rank * fan_out).map(|i| value(i, 11)).collect(),
            };
            let n = 5;
            let x: Vec<f32> = (0..n * fan_in).map(|i| value(i, 13)).collect();
            let y0: Vec<f32> = (0..n * fan_out).map(|i| value(i, 5)).collect();
            // Each row on its own, as a decode computes it...
            let mut want = y0.clone();
            for r in 0..n {
                LoraKernel::Baseline.add_rows(&pair, &x, &mut want, r..r + 1, 0.75);
            }
            // ...and in blocks, as a prefill chunk does, on every kernel.
            for kernel in [LoraKernel::Baseline, LoraKernel::Avx2, LoraKernel::Avx512] {
                let kernel = kernel.supported_or_baseline();
                let mut got = y0.clone();
                kernel.add_rows(&pair, &x, &mut got, 0..n, 0.75);
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&got),
                    bits(&want),
                    "{kernel:?} on {fan_in}->{fan_out} r{rank}"
                );
            }
        }
    }

    #[test]
    fn module_names_map_to_layers_and_projections() {
        assert_eq!(locate("model.layers.3.self_attn.v_proj", 24), Some((3, 2)));
        assert_eq!(locate("model.layers.23.mlp.down_proj", 24), Some((23, 6)));
        assert_eq!(locate("model.layers.24.mlp.down_proj", 24), None);
        assert_eq!(locate("lm_head", 24), None);
        assert_eq!(locate("model.embed_tokens", 24), None);
    }
}
