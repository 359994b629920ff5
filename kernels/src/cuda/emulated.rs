//! The CUDA kernels run on the CPU through `cuda/cpu_emulation.h` (built by `build.rs`), checked
//! against the references: the kernels' logic is tested on every machine, the device checks
//! (`quorum kernel-check`) add what only a GPU shows.

use std::ffi::{c_int, c_long, c_void};

use candle_core::{DType, Result};
use half::bf16;

use super::cases::{
    ArgmaxCase, AttentionCase, LoraCase, MatmulCase, NormCase, PrefillCase, RotaryCase,
    RotaryOutput, SampleCase, SoftmaxCase,
};
use super::check;
use super::launch::{self, LaunchShape};
use super::runner::KernelRunner;
use super::sampling::mask_words;

type P = *const c_void;
type M = *mut c_void;

unsafe extern "C" {
    fn emulated_kernel_limits(limits: *mut c_int);
}

/// Declares the emulated entry points of both dtypes of a kernel.
macro_rules! entry_points {
    ($($name:ident ( $($arg:ident : $ty:ty),* );)*) => {
        unsafe extern "C" { $( fn $name(gx: u32, gy: u32, gz: u32, threads: u32, $($arg: $ty),*); )* }
    };
}

entry_points! {
    emulate_add_rms_norm_f32(x: P, residual: P, weight: P, sum: M, out: M, hidden: c_int, eps: f32);
    emulate_add_rms_norm_bf16(x: P, residual: P, weight: P, sum: M, out: M, hidden: c_int, eps: f32);
    emulate_silu_mul_f32(gate: P, up: P, out: M, n: c_long);
    emulate_silu_mul_bf16(gate: P, up: P, out: M, n: c_long);
    emulate_rotary_kv_write_f32(q: P, q_out: M, k: P, v: P, cos: P, sin: P, positions: P, slots: P,
        k_cache: M, v_cache: M, heads: c_int, kv_heads: c_int, head_dim: c_int, interleaved: c_int);
    emulate_rotary_kv_write_bf16(q: P, q_out: M, k: P, v: P, cos: P, sin: P, positions: P, slots: P,
        k_cache: M, v_cache: M, heads: c_int, kv_heads: c_int, head_dim: c_int, interleaved: c_int);
    emulate_paged_attention_f32(out: M, part_out: M, part_max: M, part_sum: M, q: P, k_cache: P,
        v_cache: P, block_tables: P, seq_of_row: P, context_lens: P, heads: c_int, kv_heads: c_int,
        head_dim: c_int, block_size: c_int, max_blocks: c_int, max_parts: c_int, scale: f32);
    emulate_paged_attention_bf16(out: M, part_out: M, part_max: M, part_sum: M, q: P, k_cache: P,
        v_cache: P, block_tables: P, seq_of_row: P, context_lens: P, heads: c_int, kv_heads: c_int,
        head_dim: c_int, block_size: c_int, max_blocks: c_int, max_parts: c_int, scale: f32);
    emulate_paged_attention_reduce_f32(out: M, part_out: P, part_max: P, part_sum: P,
        context_lens: P, heads: c_int, head_dim: c_int, max_parts: c_int);
    emulate_paged_attention_reduce_bf16(out: M, part_out: P, part_max: P, part_sum: P,
        context_lens: P, heads: c_int, head_dim: c_int, max_parts: c_int);
    emulate_prefill_attention_f32(out: M, q: P, k_cache: P, v_cache: P, context_slots: P,
        len: c_int, start: c_int, heads: c_int, kv_heads: c_int, head_dim: c_int, scale: f32);
    emulate_prefill_attention_bf16(out: M, q: P, k_cache: P, v_cache: P, context_slots: P,
        len: c_int, start: c_int, heads: c_int, kv_heads: c_int, head_dim: c_int, scale: f32);
    emulate_lora_shrink_f32(t: M, x: P, a0: P, a1: P, a2: P, adapter_of_row: P, fan_in: c_int,
        rank: c_int);
    emulate_lora_shrink_bf16(t: M, x: P, a0: P, a1: P, a2: P, adapter_of_row: P, fan_in: c_int,
        rank: c_int);
    emulate_lora_expand_f32(y0: M, y1: M, y2: M, t: P, b0: P, b1: P, b2: P, s0: P, s1: P, s2: P,
        adapter_of_row: P, out0: c_int, out1: c_int, out2: c_int, rank: c_int);
    emulate_lora_expand_bf16(y0: M, y1: M, y2: M, t: P, b0: P, b1: P, b2: P, s0: P, s1: P, s2: P,
        adapter_of_row: P, out0: c_int, out1: c_int, out2: c_int, rank: c_int);
    emulate_causal_softmax_f32(scores: M, len: c_int, context: c_int, start: c_int);
    emulate_causal_softmax_bf16(scores: M, len: c_int, context: c_int, start: c_int);
    emulate_fixed_order_matmul_f32(y: M, x: P, w: P, rows: c_int, fan_in: c_int, fan_out: c_int);
    emulate_fixed_order_matmul_bf16(y: M, x: P, w: P, rows: c_int, fan_in: c_int, fan_out: c_int);
    emulate_skinny_matmul_f32(y0: M, y1: M, y2: M, x: P, w0: P, w1: P, w2: P, rows: c_int,
        fan_in: c_int, out0: c_int, out1: c_int, out2: c_int);
    emulate_skinny_matmul_bf16(y0: M, y1: M, y2: M, x: P, w0: P, w1: P, w2: P, rows: c_int,
        fan_in: c_int, out0: c_int, out1: c_int, out2: c_int);
    emulate_argmax_f32(ids: M, logits: P, vocab: c_int);
    emulate_argmax_bf16(ids: M, logits: P, vocab: c_int);
    emulate_sample_f32(ids: M, logits: P, vocab: c_int, temperatures: P, top_ks: P, top_ps: P,
        uniforms: P, masks: P, mask_of_row: P, mask_words: c_int);
    emulate_sample_bf16(ids: M, logits: P, vocab: c_int, temperatures: P, top_ks: P, top_ps: P,
        uniforms: P, masks: P, mask_of_row: P, mask_words: c_int);
}

/// Host buffers in a kernel's element type.
enum Buf {
    F32(Vec<f32>),
    Bf16(Vec<bf16>),
}

impl Buf {
    fn new(dtype: DType, values: &[f32]) -> Self {
        match dtype {
            DType::BF16 => Buf::Bf16(values.iter().map(|&v| bf16::from_f32(v)).collect()),
            _ => Buf::F32(values.to_vec()),
        }
    }

    fn ptr(&self) -> P {
        match self {
            Buf::F32(v) => v.as_ptr().cast(),
            Buf::Bf16(v) => v.as_ptr().cast(),
        }
    }

    fn mut_ptr(&mut self) -> M {
        match self {
            Buf::F32(v) => v.as_mut_ptr().cast(),
            Buf::Bf16(v) => v.as_mut_ptr().cast(),
        }
    }

    fn to_f32(&self) -> Vec<f32> {
        match self {
            Buf::F32(v) => v.clone(),
            Buf::Bf16(v) => v.iter().map(|x| x.to_f32()).collect(),
        }
    }
}

/// Calls the f32 or the bf16 entry point with the shape's grid first.
macro_rules! launch {
    ($dtype:expr, $shape:expr, $f32:ident, $bf16:ident, $($arg:expr),*) => {{
        let s: LaunchShape = $shape;
        let (gx, gy, gz) = s.grid;
        // SAFETY: every pointer is a live host buffer of the length the kernel reads or writes
        // for this shape (the cases' dimensions), and the emulation joins all its threads
        // before returning.
        unsafe {
            if $dtype == DType::BF16 {
                $bf16(gx, gy, gz, s.threads, $($arg),*)
            } else {
                $f32(gx, gy, gz, s.threads, $($arg),*)
            }
        }
    }};
}

fn shape_error(e: launch::LaunchError) -> candle_core::Error {
    candle_core::Error::Msg(e.to_string())
}

const NULL: P = std::ptr::null();

struct EmulatedRunner;

impl KernelRunner for EmulatedRunner {
    fn name(&self) -> String {
        "CPU emulation".into()
    }

    fn add_rms_norm(&self, case: &NormCase, dtype: DType) -> Result<(Option<Vec<f32>>, Vec<f32>)> {
        let x = Buf::new(dtype, &case.x);
        let weight = Buf::new(dtype, &case.weight);
        let residual = case.residual.as_ref().map(|r| Buf::new(dtype, r));
        let mut sum = residual
            .as_ref()
            .map(|_| Buf::new(dtype, &vec![0.0; case.x.len()]));
        let mut out = Buf::new(dtype, &vec![0.0; case.x.len()]);
        let shape = launch::add_rms_norm(case.rows()).map_err(shape_error)?;
        let residual_ptr = residual.as_ref().map_or(NULL, Buf::ptr);
        let sum_ptr = sum.as_mut().map_or(std::ptr::null_mut(), Buf::mut_ptr);
        launch!(
            dtype,
            shape,
            emulate_add_rms_norm_f32,
            emulate_add_rms_norm_bf16,
            x.ptr(),
            residual_ptr,
            weight.ptr(),
            sum_ptr,
            out.mut_ptr(),
            case.hidden as c_int,
            case.eps
        );
        Ok((sum.map(|s| s.to_f32()), out.to_f32()))
    }

    fn silu_mul(&self, gate: &[f32], up: &[f32], dtype: DType) -> Result<Vec<f32>> {
        let (g, u) = (Buf::new(dtype, gate), Buf::new(dtype, up));
        let mut out = Buf::new(dtype, &vec![0.0; gate.len()]);
        launch!(
            dtype,
            launch::elementwise(gate.len()),
            emulate_silu_mul_f32,
            emulate_silu_mul_bf16,
            g.ptr(),
            u.ptr(),
            out.mut_ptr(),
            gate.len() as c_long
        );
        Ok(out.to_f32())
    }

    fn rotary_kv_write(&self, case: &RotaryCase, dtype: DType) -> Result<RotaryOutput> {
        let (q, k, v) = (
            Buf::new(dtype, &case.q),
            Buf::new(dtype, &case.k),
            Buf::new(dtype, &case.v),
        );
        let mut q_out = Buf::new(dtype, &vec![0.0; case.q.len()]);
        let mut k_cache = Buf::new(dtype, &case.k_cache);
        let mut v_cache = Buf::new(dtype, &case.v_cache);
        let shape =
            launch::rotary_kv_write(case.positions.len(), case.head_dim).map_err(shape_error)?;
        launch!(
            dtype,
            shape,
            emulate_rotary_kv_write_f32,
            emulate_rotary_kv_write_bf16,
            q.ptr(),
            q_out.mut_ptr(),
            k.ptr(),
            v.ptr(),
            case.cos.as_ptr().cast(),
            case.sin.as_ptr().cast(),
            case.positions.as_ptr().cast(),
            case.slots.as_ptr().cast(),
            k_cache.mut_ptr(),
            v_cache.mut_ptr(),
            case.heads as c_int,
            case.kv_heads as c_int,
            case.head_dim as c_int,
            case.interleaved as c_int
        );
        Ok(RotaryOutput {
            q: q_out.to_f32(),
            k_cache: k_cache.to_f32(),
            v_cache: v_cache.to_f32(),
        })
    }

    fn paged_attention(&self, case: &AttentionCase, dtype: DType) -> Result<Vec<f32>> {
        let rows = case.seq_of_row.len();
        let (shape, parts) = launch::paged_attention(
            case.heads,
            case.kv_heads,
            case.head_dim,
            rows,
            case.max_context(),
        )
        .map_err(shape_error)?;
        let (tables, max_blocks) = case.flat_tables();
        let (q, k, v) = (
            Buf::new(dtype, &case.q),
            Buf::new(dtype, &case.k_cache),
            Buf::new(dtype, &case.v_cache),
        );
        let mut out = Buf::new(dtype, &vec![0.0; case.q.len()]);
        let partials = rows * case.heads * parts;
        let mut part_out = vec![0f32; partials * case.head_dim];
        let mut part_max = vec![0f32; partials];
        let mut part_sum = vec![0f32; partials];
        launch!(
            dtype,
            shape,
            emulate_paged_attention_f32,
            emulate_paged_attention_bf16,
            out.mut_ptr(),
            part_out.as_mut_ptr().cast(),
            part_max.as_mut_ptr().cast(),
            part_sum.as_mut_ptr().cast(),
            q.ptr(),
            k.ptr(),
            v.ptr(),
            tables.as_ptr().cast(),
            case.seq_of_row.as_ptr().cast(),
            case.context_lens.as_ptr().cast(),
            case.heads as c_int,
            case.kv_heads as c_int,
            case.head_dim as c_int,
            case.block_size as c_int,
            max_blocks as c_int,
            parts as c_int,
            case.scale
        );
        let reduce = launch::paged_attention_reduce(case.heads, rows).map_err(shape_error)?;
        launch!(
            dtype,
            reduce,
            emulate_paged_attention_reduce_f32,
            emulate_paged_attention_reduce_bf16,
            out.mut_ptr(),
            part_out.as_ptr().cast(),
            part_max.as_ptr().cast(),
            part_sum.as_ptr().cast(),
            case.context_lens.as_ptr().cast(),
            case.heads as c_int,
            case.head_dim as c_int,
            parts as c_int
        );
        Ok(out.to_f32())
    }

    fn prefill_attention(&self, case: &PrefillCase, dtype: DType) -> Result<Vec<f32>> {
        let a = &case.attention;
        let shape = launch::prefill_attention(a.heads, a.kv_heads, a.head_dim, case.rows())
            .map_err(shape_error)?;
        let (q, k, v) = (
            Buf::new(dtype, &a.q),
            Buf::new(dtype, &a.k_cache),
            Buf::new(dtype, &a.v_cache),
        );
        let slots = case.context_slots();
        let mut out = Buf::new(dtype, &vec![0.0; a.q.len()]);
        launch!(
            dtype,
            shape,
            emulate_prefill_attention_f32,
            emulate_prefill_attention_bf16,
            out.mut_ptr(),
            q.ptr(),
            k.ptr(),
            v.ptr(),
            slots.as_ptr().cast(),
            case.rows() as c_int,
            case.start as c_int,
            a.heads as c_int,
            a.kv_heads as c_int,
            a.head_dim as c_int,
            a.scale
        );
        Ok(out.to_f32())
    }

    fn lora(&self, group: &[LoraCase], dtype: DType) -> Result<Vec<Vec<f32>>> {
        let first = match group {
            [first, ..] if group.len() <= launch::LORA_MAX_GROUP => first,
            _ => candle_core::bail!("lora_bgmv takes 1 to 3 projections, not {}", group.len()),
        };
        if group.iter().any(|c| {
            c.x != first.x
                || c.fan_in != first.fan_in
                || c.rank != first.rank
                || c.adapter_of_row != first.adapter_of_row
        }) {
            candle_core::bail!("the projections of a lora_bgmv group share x, rank and adapters");
        }
        let rows = first.adapter_of_row.len();
        let x = Buf::new(dtype, &first.x);
        let a: Vec<Buf> = group.iter().map(|c| Buf::new(dtype, &c.a)).collect();
        let b_t: Vec<Buf> = group.iter().map(|c| Buf::new(dtype, &c.b_t)).collect();
        let mut ys: Vec<Buf> = group.iter().map(|c| Buf::new(dtype, &c.y)).collect();
        let mut t = vec![0f32; group.len() * rows * first.rank];
        // An unused place gets a null pointer: a kernel that read it would crash the check.
        let ptr = |bufs: &[Buf], g: usize| bufs.get(g).map_or(std::ptr::null(), Buf::ptr);
        let scales = |g: usize| {
            group
                .get(g)
                .map_or(std::ptr::null(), |c| c.scales.as_ptr().cast())
        };
        let outs: Vec<usize> = group.iter().map(|c| c.fan_out).collect();
        let out = |g: usize| outs.get(g).copied().unwrap_or(0) as c_int;
        let shrink = launch::lora_shrink(rows, first.rank, group.len()).map_err(shape_error)?;
        launch!(
            dtype,
            shrink,
            emulate_lora_shrink_f32,
            emulate_lora_shrink_bf16,
            t.as_mut_ptr().cast(),
            x.ptr(),
            ptr(&a, 0),
            ptr(&a, 1),
            ptr(&a, 2),
            first.adapter_of_row.as_ptr().cast(),
            first.fan_in as c_int,
            first.rank as c_int
        );
        let y = |g: usize, ys: &mut [Buf]| ys.get_mut(g).map_or(std::ptr::null_mut(), Buf::mut_ptr);
        let (y0, y1, y2) = (y(0, &mut ys), y(1, &mut ys), y(2, &mut ys));
        let expand = launch::lora_expand(rows, &outs).map_err(shape_error)?;
        launch!(
            dtype,
            expand,
            emulate_lora_expand_f32,
            emulate_lora_expand_bf16,
            y0,
            y1,
            y2,
            t.as_ptr().cast(),
            ptr(&b_t, 0),
            ptr(&b_t, 1),
            ptr(&b_t, 2),
            scales(0),
            scales(1),
            scales(2),
            first.adapter_of_row.as_ptr().cast(),
            out(0),
            out(1),
            out(2),
            first.rank as c_int
        );
        Ok(ys.iter().map(Buf::to_f32).collect())
    }

    fn causal_softmax(&self, case: &SoftmaxCase, dtype: DType) -> Result<Vec<f32>> {
        let mut scores = Buf::new(dtype, &case.scores);
        let shape =
            launch::causal_softmax(case.scores.len() / case.context).map_err(shape_error)?;
        launch!(
            dtype,
            shape,
            emulate_causal_softmax_f32,
            emulate_causal_softmax_bf16,
            scores.mut_ptr(),
            case.len as c_int,
            case.context as c_int,
            case.start as c_int
        );
        Ok(scores.to_f32())
    }

    fn fixed_order_matmul(&self, case: &MatmulCase, dtype: DType) -> Result<Vec<f32>> {
        let x = Buf::new(dtype, &case.x);
        let w = Buf::new(dtype, &case.w);
        let mut y = Buf::new(dtype, &vec![0.0; case.rows * case.fan_out]);
        let shape = launch::fixed_order_matmul(case.rows, case.fan_out).map_err(shape_error)?;
        launch!(
            dtype,
            shape,
            emulate_fixed_order_matmul_f32,
            emulate_fixed_order_matmul_bf16,
            y.mut_ptr(),
            x.ptr(),
            w.ptr(),
            case.rows as c_int,
            case.fan_in as c_int,
            case.fan_out as c_int
        );
        Ok(y.to_f32())
    }

    fn skinny_matmul(&self, group: &[MatmulCase], dtype: DType) -> Result<Vec<Vec<f32>>> {
        let first = match group {
            [first, ..] if group.len() <= launch::SKINNY_MAX_WEIGHTS => first,
            _ => candle_core::bail!("skinny_matmul takes 1 to 3 weights, not {}", group.len()),
        };
        if group
            .iter()
            .any(|c| c.rows != first.rows || c.fan_in != first.fan_in || c.x != first.x)
        {
            candle_core::bail!("the weights of a skinny_matmul group share one x");
        }
        let x = Buf::new(dtype, &first.x);
        let ws: Vec<Buf> = group.iter().map(|c| Buf::new(dtype, &c.w)).collect();
        let mut ys: Vec<Buf> = group
            .iter()
            .map(|c| Buf::new(dtype, &vec![0.0; c.rows * c.fan_out]))
            .collect();
        // The kernel reads 16-byte packs, as the device launch requires of its tensors.
        if std::iter::once(&x)
            .chain(&ws)
            .any(|b| !(b.ptr() as usize).is_multiple_of(launch::SKINNY_PACK_BYTES))
        {
            candle_core::bail!("a host buffer of the case is not 16-byte aligned");
        }
        let outs: Vec<usize> = group.iter().map(|c| c.fan_out).collect();
        let total = outs.iter().sum();
        let shape = launch::skinny_matmul(first.rows, first.fan_in, total, dtype.size_in_bytes())
            .map_err(shape_error)?;
        let y = |g: usize, ys: &mut [Buf]| ys.get_mut(g).map_or(std::ptr::null_mut(), Buf::mut_ptr);
        let w = |g: usize| ws.get(g).map_or(std::ptr::null(), Buf::ptr);
        let out = |g: usize| outs.get(g).copied().unwrap_or(0) as c_int;
        let (y0, y1, y2) = (y(0, &mut ys), y(1, &mut ys), y(2, &mut ys));
        launch!(
            dtype,
            shape,
            emulate_skinny_matmul_f32,
            emulate_skinny_matmul_bf16,
            y0,
            y1,
            y2,
            x.ptr(),
            w(0),
            w(1),
            w(2),
            first.rows as c_int,
            first.fan_in as c_int,
            out(0),
            out(1),
            out(2)
        );
        Ok(ys.iter().map(Buf::to_f32).collect())
    }

    fn argmax(&self, case: &ArgmaxCase, dtype: DType) -> Result<Vec<u32>> {
        let rows = case.logits.len() / case.vocab;
        let logits = Buf::new(dtype, &case.logits);
        let mut ids = vec![0u32; rows];
        let shape = launch::argmax(rows).map_err(shape_error)?;
        launch!(
            dtype,
            shape,
            emulate_argmax_f32,
            emulate_argmax_bf16,
            ids.as_mut_ptr().cast(),
            logits.ptr(),
            case.vocab as c_int
        );
        Ok(ids)
    }

    fn sample(&self, case: &SampleCase, dtype: DType) -> Result<Vec<u32>> {
        let p = &case.policies;
        p.validate(case.vocab)
            .map_err(|e| candle_core::Error::Msg(e.to_string()))?;
        let rows = case.rows();
        let logits = Buf::new(dtype, &case.logits);
        let mut ids = vec![0u32; rows];
        let shape = launch::sample(rows).map_err(shape_error)?;
        launch!(
            dtype,
            shape,
            emulate_sample_f32,
            emulate_sample_bf16,
            ids.as_mut_ptr().cast(),
            logits.ptr(),
            case.vocab as c_int,
            p.temperatures.as_ptr().cast(),
            p.top_ks.as_ptr().cast(),
            p.top_ps.as_ptr().cast(),
            p.uniforms.as_ptr().cast(),
            p.masks.as_ptr().cast(),
            p.mask_of_row.as_ptr().cast(),
            mask_words(case.vocab) as c_int
        );
        Ok(ids)
    }
}

#[test]
fn every_kernel_matches_its_reference_in_the_cpu_emulation() {
    let reports = check::check_all(&EmulatedRunner);
    let failed: Vec<String> = reports
        .iter()
        .filter(|r| r.failure.is_some())
        .map(ToString::to_string)
        .collect();
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    assert_eq!(reports.len(), 2 * 23, "every check in both dtypes");
}

#[test]
fn the_launch_constants_are_the_kernels() {
    let mut limits = [0 as c_int; 18];
    // SAFETY: the function writes exactly eighteen ints.
    unsafe { emulated_kernel_limits(limits.as_mut_ptr()) };
    let want = [
        launch::ATTENTION_THREADS as c_int,
        launch::PARTITION as c_int,
        launch::MAX_HEAD_DIM as c_int,
        launch::SHRINK_THREADS as c_int,
        launch::EXPAND_THREADS as c_int,
        launch::ARGMAX_THREADS as c_int,
        launch::SOFTMAX_THREADS as c_int,
        launch::MATMUL_THREADS as c_int,
        launch::MATMUL_TILE as c_int,
        launch::SAMPLE_THREADS as c_int,
        launch::PREFILL_THREADS as c_int,
        launch::PREFILL_ROWS as c_int,
        launch::PREFILL_MAX_HEAD_DIM as c_int,
        launch::SKINNY_THREADS as c_int,
        launch::SKINNY_MAX_ROWS as c_int,
        launch::SKINNY_PACK_BYTES as c_int,
        launch::SKINNY_MAX_WEIGHTS as c_int,
        launch::LORA_MAX_GROUP as c_int,
    ];
    assert_eq!(limits, want);
}
