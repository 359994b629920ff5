//! The CUDA kernels launched on candle tensors of a CUDA device. The PTX is embedded at build
//! time and loaded once per device (candle keeps the module). Shapes are checked here, before
//! any launch; a tensor that is not contiguous is made so.

use candle_core::cuda_backend::cudarc::driver::{
    CudaView, DeviceRepr, LaunchConfig, PushKernelArg,
};
use candle_core::cuda_backend::{CudaDType, CudaDevice, CudaStorage, WrapErr};
use candle_core::op::BackpropOp;
use candle_core::{DType, Device, Layout, Result, Shape, Storage, Tensor, WithDType, bail};
use half::bf16;

use super::launch::{self, LaunchShape};
use super::sampling::{SamplingRows, mask_words};

/// One PTX module of `kernels/cuda/`.
struct Module {
    name: &'static str,
    ptx: &'static str,
}

macro_rules! module {
    ($name:literal) => {
        Module {
            name: concat!("quorum_", $name),
            ptx: include_str!(concat!(env!("OUT_DIR"), "/", $name, ".ptx")),
        }
    };
}

const NORM: Module = module!("norm");
const ACTIVATION: Module = module!("activation");
const ROTARY: Module = module!("rotary");
const PAGED_ATTENTION: Module = module!("paged_attention");
const PREFILL_ATTENTION: Module = module!("prefill_attention");
const CAUSAL_SOFTMAX: Module = module!("causal_softmax");
const FIXED_ORDER_MATMUL: Module = module!("fixed_order_matmul");
const SKINNY_MATMUL: Module = module!("skinny_matmul");
const LORA: Module = module!("lora");
const SAMPLING: Module = module!("sampling");

/// An element type the kernels are compiled for, and its kernel-name suffix.
trait Element: CudaDType + DeviceRepr + WithDType {
    const SUFFIX: &'static str;
}
impl Element for f32 {
    const SUFFIX: &'static str = "f32";
}
impl Element for bf16 {
    const SUFFIX: &'static str = "bf16";
}

/// The kernel `$name` of `$module` compiled for element type `$t`, loaded once per device.
macro_rules! kernel {
    ($dev:expr, $module:expr, $name:literal, $t:ty) => {
        $dev.get_or_load_custom_func(
            &format!(concat!($name, "_{}"), <$t as Element>::SUFFIX),
            $module.name,
            $module.ptx,
        )
    };
}

/// Runs `$body` with `$t` bound to the kernel element type of `$dtype`.
macro_rules! with_element {
    ($dtype:expr, $t:ident => $body:expr) => {
        match $dtype {
            DType::F32 => {
                type $t = f32;
                $body
            }
            DType::BF16 => {
                type $t = bf16;
                $body
            }
            other => bail!("Quorum's CUDA kernels run in f32 or bf16, not {other:?}"),
        }
    };
}

fn cuda_device(t: &Tensor) -> Result<CudaDevice> {
    match t.device() {
        Device::Cuda(d) => Ok(d.clone()),
        other => bail!("a CUDA kernel got a tensor on {other:?}"),
    }
}

fn config(shape: LaunchShape) -> LaunchConfig {
    LaunchConfig {
        grid_dim: shape.grid,
        block_dim: (shape.threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

fn shape_error(e: launch::LaunchError) -> candle_core::Error {
    candle_core::Error::Msg(e.to_string())
}

/// Binds `$view` to a device view of contiguous `$tensor`'s elements as `$ty`, holding its
/// storage guard in `$guard` for as long as the view lives.
macro_rules! view {
    ($guard:ident, $view:ident, $tensor:expr, $ty:ty) => {
        let tensor: &Tensor = $tensor;
        if !tensor.is_contiguous() {
            bail!("a CUDA kernel got a non-contiguous tensor");
        }
        let ($guard, layout) = tensor.storage_and_layout();
        let $view = match &*$guard {
            Storage::Cuda(s) => s.as_cuda_slice::<$ty>()?.slice(layout.start_offset()..),
            _ => bail!("a CUDA kernel got a tensor that is not on the GPU"),
        };
    };
}

/// The device elements of a contiguous tensor's storage from its layout's offset on.
fn device_slice<'a, T: CudaDType>(
    storage: &'a Storage,
    layout: &Layout,
) -> Result<CudaView<'a, T>> {
    match storage {
        Storage::Cuda(s) => Ok(s.as_cuda_slice::<T>()?.slice(layout.start_offset()..)),
        _ => bail!("a CUDA kernel got a tensor that is not on the GPU"),
    }
}

/// [`device_slice`] of each locked tensor of `locks` (`Tensor::storage_and_layout`'s pairs).
fn device_slices<'a, T: CudaDType, G: std::ops::Deref<Target = Storage>>(
    locks: &'a [(G, &Layout)],
) -> Result<Vec<CudaView<'a, T>>> {
    locks
        .iter()
        .map(|(guard, layout)| device_slice::<T>(guard, layout))
        .collect()
}

/// A new uninitialised device tensor: the launch that follows writes every element that is
/// later read (no memset launch per buffer).
fn empty<T: CudaDType + DeviceRepr>(dev: &CudaDevice, shape: impl Into<Shape>) -> Result<Tensor> {
    let shape = shape.into();
    // SAFETY: the launch that follows writes every element before anything reads it (scratch
    // whose unwritten parts nothing reads is the only exception, documented at its use).
    let slice = unsafe { dev.alloc::<T>(shape.elem_count())? };
    let storage = Storage::Cuda(CudaStorage::wrap_cuda_slice(slice, dev.clone()));
    Ok(Tensor::from_storage(
        storage,
        shape,
        BackpropOp::none(),
        false,
    ))
}

fn same_dtype(what: &str, tensors: &[&Tensor], dtype: DType) -> Result<()> {
    if let Some(t) = tensors.iter().find(|t| t.dtype() != dtype) {
        bail!("{what}: a {:?} tensor among {dtype:?} ones", t.dtype());
    }
    Ok(())
}

/// `(sum, out)`: `sum = x + residual` (when there is a residual) and `out = RMSNorm(sum) *
/// weight`, for `x` of `[.., hidden]`.
pub fn add_rms_norm(
    x: &Tensor,
    residual: Option<&Tensor>,
    weight: &Tensor,
    eps: f32,
) -> Result<(Option<Tensor>, Tensor)> {
    let dev = cuda_device(x)?;
    let hidden = x.dim(candle_core::D::Minus1)?;
    let rows = x.elem_count() / hidden.max(1);
    if weight.elem_count() != hidden {
        bail!(
            "add_rms_norm: weight of {} for rows of {hidden}",
            weight.elem_count()
        );
    }
    if let Some(r) = residual
        && r.shape() != x.shape()
    {
        bail!(
            "add_rms_norm: residual {:?} for input {:?}",
            r.shape(),
            x.shape()
        );
    }
    same_dtype("add_rms_norm", &[weight], x.dtype())?;
    let x = x.contiguous()?;
    let residual = residual.map(Tensor::contiguous).transpose()?;
    // No rows: nothing to launch (a grid of zero blocks is a launch error).
    if rows == 0 {
        return Ok((residual.map(|_| x.clone()), x));
    }
    let shape = launch::add_rms_norm(rows).map_err(shape_error)?;
    with_element!(x.dtype(), T => {
        let out = empty::<T>(&dev, x.shape())?;
        let sum = match residual {
            Some(_) => Some(empty::<T>(&dev, x.shape())?),
            None => None,
        };
        let func = kernel!(dev, NORM, "add_rms_norm", T)?;
        let hidden = hidden as i32;
        view!(xg, xv, &x, T);
        view!(wg, wv, weight, T);
        view!(og, ov, &out, T);
        let mut b = func.builder();
        match (&residual, &sum) {
            (Some(r), Some(s)) => {
                view!(rg, rv, r, T);
                view!(sg, sv, s, T);
                b.arg(&xv).arg(&rv).arg(&wv).arg(&sv).arg(&ov).arg(&hidden).arg(&eps);
                // SAFETY: the arguments match the kernel's signature and the buffers its shape.
                unsafe { b.launch(config(shape)) }.w()?;
                drop((rg, sg));
            }
            _ => {
                // No residual: the kernel reads `x` and writes no sum (null pointers).
                let null = 0u64;
                b.arg(&xv).arg(&null).arg(&wv).arg(&null).arg(&ov).arg(&hidden).arg(&eps);
                // SAFETY: as above.
                unsafe { b.launch(config(shape)) }.w()?;
            }
        }
        drop((xg, wg, og));
        Ok((sum, out))
    })
}

/// `silu(gate) * up`, elementwise.
pub fn silu_mul(gate: &Tensor, up: &Tensor) -> Result<Tensor> {
    let dev = cuda_device(gate)?;
    if gate.shape() != up.shape() {
        bail!("silu_mul: gate {:?} and up {:?}", gate.shape(), up.shape());
    }
    same_dtype("silu_mul", &[up], gate.dtype())?;
    let (gate, up) = (gate.contiguous()?, up.contiguous()?);
    let n = gate.elem_count();
    with_element!(gate.dtype(), T => {
        let out = empty::<T>(&dev, gate.shape())?;
        {
            view!(gg, gv, &gate, T);
            view!(ug, uv, &up, T);
            view!(og, ov, &out, T);
            let func = kernel!(dev, ACTIVATION, "silu_mul", T)?;
            let mut b = func.builder();
            let n = n as i64;
            b.arg(&gv).arg(&uv).arg(&ov).arg(&n);
            // SAFETY: as above.
            unsafe { b.launch(config(launch::elementwise(n as usize))) }.w()?;
            drop((gg, ug, og));
        }
        Ok(out)
    })
}

/// The paged KV cache of one layer and where this step's tokens go.
pub struct KvWrite<'a> {
    /// `[slots, kv_heads * head_dim]`, written in place.
    pub k_cache: &'a Tensor,
    pub v_cache: &'a Tensor,
    /// `[tokens]` u32.
    pub slots: &'a Tensor,
}

/// The rotary tables: f32 `[max_position, head_dim / 2]`.
pub struct RotaryTables<'a> {
    pub cos: &'a Tensor,
    pub sin: &'a Tensor,
    /// Pairs (2i, 2i + 1) rather than (i, i + head_dim / 2).
    pub interleaved: bool,
}

/// Rotates `q` `[tokens, heads, head_dim]` (returned) and `k` `[tokens, kv_heads, head_dim]`
/// by their tokens' `positions` (u32), and writes `k` (rotated) and `v` into the cache slots.
pub fn rotary_kv_write(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    positions: &Tensor,
    rotary: RotaryTables<'_>,
    cache: KvWrite<'_>,
) -> Result<Tensor> {
    let RotaryTables {
        cos,
        sin,
        interleaved,
    } = rotary;
    let dev = cuda_device(q)?;
    let (tokens, heads, head_dim) = q.dims3()?;
    let (k_tokens, kv_heads, k_dim) = k.dims3()?;
    if k_tokens != tokens || k_dim != head_dim || v.shape() != k.shape() {
        bail!(
            "rotary_kv_write: q {:?}, k {:?}, v {:?}",
            q.shape(),
            k.shape(),
            v.shape()
        );
    }
    if positions.elem_count() != tokens || cache.slots.elem_count() != tokens {
        bail!(
            "rotary_kv_write: {tokens} tokens, {} positions, {} slots",
            positions.elem_count(),
            cache.slots.elem_count()
        );
    }
    if cache.k_cache.dim(1)? != kv_heads * head_dim
        || cache.v_cache.shape() != cache.k_cache.shape()
    {
        bail!(
            "rotary_kv_write: cache {:?} for {kv_heads} heads of {head_dim}",
            cache.k_cache.shape()
        );
    }
    same_dtype(
        "rotary_kv_write",
        &[k, v, cache.k_cache, cache.v_cache],
        q.dtype(),
    )?;
    same_dtype("rotary_kv_write tables", &[cos, sin], DType::F32)?;
    if tokens == 0 {
        return Ok(q.clone());
    }
    let shape = launch::rotary_kv_write(tokens, head_dim).map_err(shape_error)?;
    let (q, k, v) = (q.contiguous()?, k.contiguous()?, v.contiguous()?);
    with_element!(q.dtype(), T => {
        let q_out = empty::<T>(&dev, q.shape())?;
        {
            view!(qg, qv, &q, T);
            view!(qog, qov, &q_out, T);
            view!(kg, kv, &k, T);
            view!(vg, vv, &v, T);
            view!(cg, cv, cos, f32);
            view!(sg, sv, sin, f32);
            view!(pg, pv, positions, u32);
            view!(slg, slv, cache.slots, u32);
            view!(kcg, kcv, cache.k_cache, T);
            view!(vcg, vcv, cache.v_cache, T);
            let func = kernel!(dev, ROTARY, "rotary_kv_write", T)?;
            let mut b = func.builder();
            let ints = [heads, kv_heads, head_dim, usize::from(interleaved)].map(|v| v as i32);
            b.arg(&qv).arg(&qov).arg(&kv).arg(&vv).arg(&cv).arg(&sv);
            b.arg(&pv).arg(&slv).arg(&kcv).arg(&vcv);
            for v in &ints {
                b.arg(v);
            }
            // SAFETY: as above; the caches are written only at the given slots.
            unsafe { b.launch(config(shape)) }.w()?;
            drop((qg, qog, kg, vg, cg, sg, pg, slg, kcg, vcg));
        }
        Ok(q_out)
    })
}

/// Query rows and where their keys are.
pub struct PagedAttention<'a> {
    /// `[rows, heads, head_dim]`
    pub q: &'a Tensor,
    /// `[slots, kv_heads * head_dim]`
    pub k_cache: &'a Tensor,
    pub v_cache: &'a Tensor,
    pub kv_heads: usize,
    /// `[seqs, max_blocks]` u32
    pub block_tables: &'a Tensor,
    /// `[rows]` u32: the sequence of each row.
    pub seq_of_row: &'a Tensor,
    /// `[rows]` u32: the keys each row sees (its position + 1).
    pub context_lens: &'a Tensor,
    /// The largest of `context_lens` (the host knows it; reading it back would stall).
    pub max_context: usize,
    pub block_size: usize,
    pub scale: f32,
}

/// Attention of each query row over its context, read through the block tables: `[rows,
/// heads, head_dim]`.
pub fn paged_attention(a: PagedAttention<'_>) -> Result<Tensor> {
    let dev = cuda_device(a.q)?;
    let (rows, heads, head_dim) = a.q.dims3()?;
    let (_, max_blocks) = a.block_tables.dims2()?;
    if a.k_cache.dim(1)? != a.kv_heads * head_dim || a.v_cache.shape() != a.k_cache.shape() {
        bail!(
            "paged_attention: cache {:?} for {} heads of {head_dim}",
            a.k_cache.shape(),
            a.kv_heads
        );
    }
    if a.seq_of_row.elem_count() != rows || a.context_lens.elem_count() != rows {
        bail!(
            "paged_attention: {rows} rows, {} sequence ids, {} context lengths",
            a.seq_of_row.elem_count(),
            a.context_lens.elem_count()
        );
    }
    if a.max_context > max_blocks * a.block_size {
        bail!(
            "paged_attention: a context of {} past {max_blocks} blocks of {}",
            a.max_context,
            a.block_size
        );
    }
    same_dtype("paged_attention", &[a.k_cache, a.v_cache], a.q.dtype())?;
    if rows == 0 {
        return Ok(a.q.clone());
    }
    let (shape, parts) = launch::paged_attention(heads, a.kv_heads, head_dim, rows, a.max_context)
        .map_err(shape_error)?;
    let reduce = launch::paged_attention_reduce(heads, rows).map_err(shape_error)?;
    let q = a.q.contiguous()?;
    with_element!(q.dtype(), T => {
        let out = empty::<T>(&dev, q.shape())?;
        // Scratch for split contexts; one partition needs none, but a buffer is always passed.
        // Left uninitialised: the reduce reads only the partitions a row's blocks wrote.
        let partials = if parts > 1 { rows * heads * parts } else { 1 };
        let part_out = empty::<f32>(&dev, partials * head_dim)?;
        let part_max = empty::<f32>(&dev, partials)?;
        let part_sum = empty::<f32>(&dev, partials)?;
        {
            view!(og, ov, &out, T);
            view!(pog, pov, &part_out, f32);
            view!(pmg, pmv, &part_max, f32);
            view!(psg, psv, &part_sum, f32);
            view!(qg, qv, &q, T);
            view!(kg, kv, a.k_cache, T);
            view!(vg, vv, a.v_cache, T);
            view!(tg, tv, a.block_tables, u32);
            view!(sg, sv, a.seq_of_row, u32);
            view!(cg, cv, a.context_lens, u32);
            let func = kernel!(dev, PAGED_ATTENTION, "paged_attention", T)?;
            let mut b = func.builder();
            let ints = [heads, a.kv_heads, head_dim, a.block_size, max_blocks, parts];
            let ints = ints.map(|v| v as i32);
            b.arg(&ov).arg(&pov).arg(&pmv).arg(&psv).arg(&qv);
            b.arg(&kv).arg(&vv).arg(&tv).arg(&sv).arg(&cv);
            for v in &ints {
                b.arg(v);
            }
            b.arg(&a.scale);
            // SAFETY: as above; the block tables hold `max_blocks` entries per sequence.
            unsafe { b.launch(config(shape)) }.w()?;
            if parts > 1 {
                let func = kernel!(dev, PAGED_ATTENTION, "paged_attention_reduce", T)?;
                let mut b = func.builder();
                let (h, hd, p) = (heads as i32, head_dim as i32, parts as i32);
                b.arg(&ov).arg(&pov).arg(&pmv).arg(&psv).arg(&cv).arg(&h).arg(&hd).arg(&p);
                // SAFETY: as above.
                unsafe { b.launch(config(reduce)) }.w()?;
            }
            drop((og, pog, pmg, psg, qg, kg, vg, tg, sg, cg));
        }
        Ok(out)
    })
}

/// A prefill chunk's queries and where its context's keys are.
pub struct PrefillChunk<'a> {
    /// `[len, heads, head_dim]`: the chunk's rows, row `i` at position `start + i`.
    pub q: &'a Tensor,
    /// `[slots, kv_heads * head_dim]`
    pub k_cache: &'a Tensor,
    pub v_cache: &'a Tensor,
    pub kv_heads: usize,
    /// `[start + len]` u32: the slot of each context position, the chunk's own included.
    pub context_slots: &'a Tensor,
    pub start: usize,
    pub scale: f32,
}

/// Causal attention of a prefill chunk over its context, read in place from the cache, the
/// scores kept on chip (flash attention): `[len, heads, head_dim]`.
pub fn prefill_attention(a: PrefillChunk<'_>) -> Result<Tensor> {
    let dev = cuda_device(a.q)?;
    let (len, heads, head_dim) = a.q.dims3()?;
    if a.k_cache.dim(1)? != a.kv_heads * head_dim || a.v_cache.shape() != a.k_cache.shape() {
        bail!(
            "prefill_attention: cache {:?} for {} heads of {head_dim}",
            a.k_cache.shape(),
            a.kv_heads
        );
    }
    if a.context_slots.elem_count() != a.start + len {
        bail!(
            "prefill_attention: {} context slots for {len} rows after {} cached keys",
            a.context_slots.elem_count(),
            a.start
        );
    }
    same_dtype("prefill_attention", &[a.k_cache, a.v_cache], a.q.dtype())?;
    if len == 0 {
        return Ok(a.q.clone());
    }
    let shape = launch::prefill_attention(heads, a.kv_heads, head_dim, len).map_err(shape_error)?;
    let q = a.q.contiguous()?;
    with_element!(q.dtype(), T => {
        let out = empty::<T>(&dev, q.shape())?;
        {
            view!(og, ov, &out, T);
            view!(qg, qv, &q, T);
            view!(kg, kv, a.k_cache, T);
            view!(vg, vv, a.v_cache, T);
            view!(sg, sv, a.context_slots, u32);
            let func = kernel!(dev, PREFILL_ATTENTION, "prefill_attention", T)?;
            let mut b = func.builder();
            let ints = [len, a.start, heads, a.kv_heads, head_dim].map(|v| v as i32);
            b.arg(&ov).arg(&qv).arg(&kv).arg(&vv).arg(&sv);
            for v in &ints {
                b.arg(v);
            }
            b.arg(&a.scale);
            // SAFETY: the shapes are checked above: `q` and `out` hold `len` rows of `heads`
            // heads, the context's slots index the caches, and every launch's grid covers them.
            unsafe { b.launch(config(shape)) }.w()?;
            drop((og, qg, kg, vg, sg));
        }
        Ok(out)
    })
}

/// A stack of LoRA adapters for one projection, resident on the device.
pub struct LoraStack<'a> {
    /// `[adapters, rank, in]`
    pub a: &'a Tensor,
    /// `[adapters, rank, out]`
    pub b_t: &'a Tensor,
    /// `[adapters]` f32: alpha / rank (or its rank-stabilized form) of each.
    pub scales: &'a Tensor,
}

/// One projection of a [`lora_bgmv`] launch: its output `[rows, out]`, contiguous, updated in
/// place, and its adapters.
pub struct LoraTarget<'a> {
    pub y: &'a Tensor,
    pub stack: LoraStack<'a>,
}

/// For each projection `g` of `group` (at most [`launch::LORA_MAX_GROUP`] of one input `x`
/// `[rows, in]`, their stacks of one rank): `y_g[row] += scale_g[a] · B_g,a (A_g,a x[row])`
/// where `a = adapter_of_row[row]` (i32, negative for none). Two launches for the whole group:
/// a layer's q, k and v take their deltas together, as do its gate and up.
pub fn lora_bgmv(x: &Tensor, group: &[LoraTarget<'_>], adapter_of_row: &Tensor) -> Result<()> {
    let dev = cuda_device(x)?;
    let (rows, fan_in) = x.dims2()?;
    let Some(first) = group.first() else {
        bail!("lora_bgmv: no projection to add deltas to");
    };
    let rank = first.stack.a.dims3()?.1;
    let mut outs = Vec::with_capacity(group.len());
    for LoraTarget { y, stack } in group {
        let (y_rows, fan_out) = y.dims2()?;
        let (adapters, a_rank, a_in) = stack.a.dims3()?;
        let (b_adapters, b_rank, b_out) = stack.b_t.dims3()?;
        if a_in != fan_in
            || b_out != fan_out
            || a_rank != rank
            || b_rank != rank
            || b_adapters != adapters
            || stack.scales.elem_count() != adapters
            || stack.scales.dtype() != DType::F32
            || y_rows != rows
        {
            bail!(
                "lora_bgmv: x {:?}, y {:?}, A {:?}, Bᵀ {:?}, {} scales; the group's rank is {rank}",
                x.shape(),
                y.shape(),
                stack.a.shape(),
                stack.b_t.shape(),
                stack.scales.elem_count()
            );
        }
        if !y.is_contiguous() {
            bail!("lora_bgmv: the output it adds to must be contiguous");
        }
        same_dtype("lora_bgmv", &[y, stack.a, stack.b_t], x.dtype())?;
        outs.push(fan_out);
    }
    if adapter_of_row.elem_count() != rows || adapter_of_row.dtype() != DType::I32 {
        bail!("lora_bgmv: {rows} rows need {rows} i32 adapter ids");
    }
    if rows == 0 {
        return Ok(());
    }
    let shrink = launch::lora_shrink(rows, rank, group.len()).map_err(shape_error)?;
    let expand = launch::lora_expand(rows, &outs).map_err(shape_error)?;
    let x = x.contiguous()?;
    with_element!(x.dtype(), T => {
        // Rows without an adapter leave theirs unwritten and unread.
        let t = empty::<f32>(&dev, (group.len(), rows, rank))?;
        // Each tensor's storage is locked once; a group of fewer projections passes its first
        // projection's tensors again in the unused places, whose zero output counts give them no
        // blocks.
        let y_locks: Vec<_> = group.iter().map(|g| g.y.storage_and_layout()).collect();
        let a_locks: Vec<_> = group.iter().map(|g| g.stack.a.storage_and_layout()).collect();
        let b_locks: Vec<_> = group.iter().map(|g| g.stack.b_t.storage_and_layout()).collect();
        let s_locks: Vec<_> = group
            .iter()
            .map(|g| g.stack.scales.storage_and_layout())
            .collect();
        let yv = device_slices::<T, _>(&y_locks)?;
        let av = device_slices::<T, _>(&a_locks)?;
        let bv = device_slices::<T, _>(&b_locks)?;
        let sv = device_slices::<f32, _>(&s_locks)?;
        let at = |g: usize| g.min(group.len() - 1);
        view!(tg, tv, &t, f32);
        view!(xg, xv, &x, T);
        view!(ig, iv, adapter_of_row, i32);
        let (fi, r) = (fan_in as i32, rank as i32);
        let func = kernel!(dev, LORA, "lora_shrink", T)?;
        let mut b = func.builder();
        b.arg(&tv).arg(&xv).arg(&av[at(0)]).arg(&av[at(1)]).arg(&av[at(2)]);
        b.arg(&iv).arg(&fi).arg(&r);
        // SAFETY: the arguments match the kernel's signature; every read stays inside `x` and
        // the stacks checked above, and each element of `t` is written by one block.
        unsafe { b.launch(config(shrink)) }.w()?;
        let out = |g: usize| outs.get(g).map_or(0, |&o| o as i32);
        let (o0, o1, o2) = (out(0), out(1), out(2));
        let func = kernel!(dev, LORA, "lora_expand", T)?;
        let mut b = func.builder();
        b.arg(&yv[at(0)]).arg(&yv[at(1)]).arg(&yv[at(2)]).arg(&tv);
        b.arg(&bv[at(0)]).arg(&bv[at(1)]).arg(&bv[at(2)]);
        b.arg(&sv[at(0)]).arg(&sv[at(1)]).arg(&sv[at(2)]);
        b.arg(&iv).arg(&o0).arg(&o1).arg(&o2).arg(&r);
        // SAFETY: as above; each `y_g` is written in place, each element by one thread.
        unsafe { b.launch(config(expand)) }.w()?;
        drop((tg, xg, ig, yv, av, bv, sv));
        drop((y_locks, a_locks, b_locks, s_locks));
        Ok(())
    })
}

/// In place: each row of `scores` (`[.., context]`, contiguous; row `r` is query `r % len` of a
/// chunk at positions `start..start + len`) becomes its softmax over the keys its query sees,
/// with 0 for the keys after them. Replaces a causal mask's add and a softmax.
pub fn causal_softmax(scores: &Tensor, len: usize, start: usize) -> Result<()> {
    let dev = cuda_device(scores)?;
    let context = scores.dims().last().copied().unwrap_or(0);
    if !scores.is_contiguous()
        || len == 0
        || context == 0
        || !scores.elem_count().is_multiple_of(context * len)
    {
        bail!(
            "causal_softmax: scores {:?} (contiguous: {}) for chunks of {len} queries",
            scores.shape(),
            scores.is_contiguous()
        );
    }
    let rows = scores.elem_count() / context;
    let shape = launch::causal_softmax(rows).map_err(shape_error)?;
    with_element!(scores.dtype(), T => {
        view!(sg, sv, scores, T);
        let func = kernel!(dev, CAUSAL_SOFTMAX, "causal_softmax", T)?;
        let mut b = func.builder();
        let (l, c, s) = (len as i32, context as i32, start as i32);
        b.arg(&sv).arg(&l).arg(&c).arg(&s);
        // SAFETY: as above; each row is read and written by its own block alone.
        unsafe { b.launch(config(shape)) }.w()?;
        drop(sg);
        Ok(())
    })
}

/// `x · wᵀ` (`x` `[rows, in]`, `w` `[out, in]`, one dtype) → `[rows, out]`, each output summed
/// over the inputs in order by one thread: a row's result is the same bits whatever other
/// rows share the call (cuBLAS chooses its tiling, and so its order of additions, by shape).
pub fn fixed_order_matmul(x: &Tensor, w: &Tensor) -> Result<Tensor> {
    let dev = cuda_device(x)?;
    let (rows, fan_in) = x.dims2()?;
    let (fan_out, w_in) = w.dims2()?;
    if w_in != fan_in || x.dtype() != w.dtype() {
        bail!(
            "fixed_order_matmul: x {:?} {:?} against w {:?} {:?}",
            x.shape(),
            x.dtype(),
            w.shape(),
            w.dtype()
        );
    }
    if rows == 0 || fan_out == 0 {
        return Tensor::zeros((rows, fan_out), x.dtype(), x.device());
    }
    let shape = launch::fixed_order_matmul(rows, fan_out).map_err(shape_error)?;
    let (x, w) = (x.contiguous()?, w.contiguous()?);
    with_element!(x.dtype(), T => {
        let y = empty::<T>(&dev, (rows, fan_out))?;
        {
            view!(xg, xv, &x, T);
            view!(wg, wv, &w, T);
            view!(yg, yv, &y, T);
            let func = kernel!(dev, FIXED_ORDER_MATMUL, "fixed_order_matmul", T)?;
            let mut b = func.builder();
            let (r, i, o) = (rows as i32, fan_in as i32, fan_out as i32);
            b.arg(&yv).arg(&xv).arg(&wv).arg(&r).arg(&i).arg(&o);
            // SAFETY: as above; every element of `y` is written by exactly one thread.
            unsafe { b.launch(config(shape)) }.w()?;
            drop((xg, wg, yg));
        }
        Ok(y)
    })
}

/// Whether [`skinny_matmul`] takes `x` and the weights `ws` as they are: 1 to
/// [`launch::SKINNY_MAX_WEIGHTS`] weights of `x`'s dtype, `[rows, in]` against `[out, in]` each, a
/// shape [`launch::skinny_matmul_takes`], every tensor contiguous and starting on a 16-byte
/// boundary (device allocations start on 256-byte ones, so a tensor's alignment is its
/// offset's). The projections ask this before choosing it over cuBLAS.
pub fn skinny_matmul_fits(x: &Tensor, ws: &[&Tensor]) -> bool {
    let Ok((rows, fan_in)) = x.dims2() else {
        return false;
    };
    let elem = x.dtype().size_in_bytes();
    let aligned = |t: &Tensor| {
        t.is_contiguous()
            && (t.layout().start_offset() * elem).is_multiple_of(launch::SKINNY_PACK_BYTES)
    };
    let weight_fits = |w: &&Tensor| {
        w.dtype() == x.dtype()
            && w.dims2().is_ok_and(|(out, w_in)| out > 0 && w_in == fan_in)
            && aligned(w)
    };
    (1..=launch::SKINNY_MAX_WEIGHTS).contains(&ws.len())
        && launch::skinny_matmul_takes(rows, fan_in, elem)
        && aligned(x)
        && ws.iter().all(weight_fits)
}

/// `x · w_gᵀ` for each weight of `ws` (`x` `[rows, in]` with at most
/// [`launch::SKINNY_MAX_ROWS`] rows, each `w_g` `[out_g, in]`, one dtype) → one `[rows, out_g]`
/// tensor each, in one `skinny_matmul` launch: a warp streams each weight row once for all rows.
/// Tensors [`skinny_matmul_fits`] refuses are an error: the caller sends those to cuBLAS.
pub fn skinny_matmul(x: &Tensor, ws: &[&Tensor]) -> Result<Vec<Tensor>> {
    if !skinny_matmul_fits(x, ws) {
        let weights: Vec<String> = ws
            .iter()
            .map(|w| {
                format!(
                    "{:?} {:?} (offset {})",
                    w.shape(),
                    w.dtype(),
                    w.layout().start_offset()
                )
            })
            .collect();
        bail!(
            "skinny_matmul: x {:?} {:?} (offset {}) against {}: not a group it takes, or not \
             contiguous on 16-byte boundaries",
            x.shape(),
            x.dtype(),
            x.layout().start_offset(),
            weights.join(", ")
        );
    }
    let dev = cuda_device(x)?;
    let (rows, fan_in) = x.dims2()?;
    let outs: Vec<usize> = ws
        .iter()
        .map(|w| w.dims2().map(|d| d.0))
        .collect::<Result<_>>()?;
    let elem = x.dtype().size_in_bytes();
    let shape =
        launch::skinny_matmul(rows, fan_in, outs.iter().sum(), elem).map_err(shape_error)?;
    with_element!(x.dtype(), T => {
        let ys = outs
            .iter()
            .map(|&out| empty::<T>(&dev, (rows, out)))
            .collect::<Result<Vec<_>>>()?;
        {
            // Each tensor's storage is locked once; a group of fewer weights passes its first
            // weight and output again in the unused places, whose zero output counts keep the
            // kernel from touching them.
            let weight_locks: Vec<_> = ws.iter().map(|w| w.storage_and_layout()).collect();
            let output_locks: Vec<_> = ys.iter().map(|y| y.storage_and_layout()).collect();
            let wv = device_slices::<T, _>(&weight_locks)?;
            let yv = device_slices::<T, _>(&output_locks)?;
            view!(xg, xv, x, T);
            let at = |g: usize| g.min(ws.len() - 1);
            let func = kernel!(dev, SKINNY_MATMUL, "skinny_matmul", T)?;
            let mut b = func.builder();
            let out = |g: usize| outs.get(g).map_or(0, |&o| o as i32);
            let (r, i, o0, o1, o2) = (rows as i32, fan_in as i32, out(0), out(1), out(2));
            b.arg(&yv[at(0)]).arg(&yv[at(1)]).arg(&yv[at(2)]).arg(&xv);
            b.arg(&wv[at(0)]).arg(&wv[at(1)]).arg(&wv[at(2)]);
            b.arg(&r).arg(&i).arg(&o0).arg(&o1).arg(&o2);
            // SAFETY: as above; every element of each `y_g` is written by one lane of one warp,
            // and every read stays inside `x` and the weights (whole packs of rows of `fan_in`
            // elements); a weight with no outputs is never read.
            unsafe { b.launch(config(shape)) }.w()?;
            drop((xg, wv, yv));
            drop((weight_locks, output_locks));
        }
        Ok(ys)
    })
}

/// Each row's arg-max over the last dimension of `logits` `[rows, vocab]`: u32 `[rows]`.
pub fn argmax_rows(logits: &Tensor) -> Result<Tensor> {
    let dev = cuda_device(logits)?;
    let (rows, vocab) = logits.dims2()?;
    if rows == 0 {
        return Tensor::zeros(0, DType::U32, logits.device());
    }
    let shape = launch::argmax(rows).map_err(shape_error)?;
    let logits = logits.contiguous()?;
    with_element!(logits.dtype(), T => {
        let ids = empty::<u32>(&dev, rows)?;
        {
            view!(lg, lv, &logits, T);
            view!(ig, iv, &ids, u32);
            let func = kernel!(dev, SAMPLING, "argmax", T)?;
            let mut b = func.builder();
            let v = vocab as i32;
            b.arg(&iv).arg(&lv).arg(&v);
            // SAFETY: as above.
            unsafe { b.launch(config(shape)) }.w()?;
            drop((lg, ig));
        }
        Ok(ids)
    })
}

/// Each row's token under its own policy in `rows` (temperature, top-k, top-p, allowed-token
/// bitset, the host's uniform draw), from `logits` `[rows, vocab]`: u32 `[rows]`,
/// [`super::reference::NO_TOKEN`] for a row with nothing allowed. Only the policies go up and
/// only the ids come back.
pub fn sample_rows(logits: &Tensor, rows: &SamplingRows) -> Result<Tensor> {
    let dev = cuda_device(logits)?;
    let (n, vocab) = logits.dims2()?;
    if rows.rows() != n {
        bail!("sample_rows: {n} logit rows for {} policies", rows.rows());
    }
    rows.validate(vocab)
        .map_err(|e| candle_core::Error::Msg(format!("sample_rows: {e}")))?;
    if n == 0 {
        return Tensor::zeros(0, DType::U32, logits.device());
    }
    let shape = launch::sample(n).map_err(shape_error)?;
    let logits = logits.contiguous()?;
    let device = logits.device();
    let temperatures = Tensor::from_slice(&rows.temperatures, n, device)?;
    let top_ks = Tensor::from_slice(&rows.top_ks, n, device)?;
    let top_ps = Tensor::from_slice(&rows.top_ps, n, device)?;
    let uniforms = Tensor::from_slice(&rows.uniforms, n, device)?;
    // A launch argument must point somewhere even when no row has a bitset.
    let masks = if rows.masks.is_empty() {
        Tensor::zeros(1, DType::U32, device)?
    } else {
        Tensor::from_slice(&rows.masks, rows.masks.len(), device)?
    };
    let mask_of_row = Tensor::from_slice(&rows.mask_of_row, n, device)?;
    with_element!(logits.dtype(), T => {
        let ids = empty::<u32>(&dev, n)?;
        {
            view!(lg, lv, &logits, T);
            view!(ig, iv, &ids, u32);
            view!(tg, tv, &temperatures, f32);
            view!(kg, kv, &top_ks, u32);
            view!(pg, pv, &top_ps, f32);
            view!(ug, uv, &uniforms, f64);
            view!(mg, mv, &masks, u32);
            view!(rg, rv, &mask_of_row, i32);
            let func = kernel!(dev, SAMPLING, "sample", T)?;
            let mut b = func.builder();
            let (v, w) = (vocab as i32, mask_words(vocab) as i32);
            b.arg(&iv).arg(&lv).arg(&v).arg(&tv).arg(&kv).arg(&pv).arg(&uv).arg(&mv).arg(&rv).arg(&w);
            // SAFETY: as above; the policies were validated against the logits' shape, so
            // every bitset a row names lies inside `masks`.
            unsafe { b.launch(config(shape)) }.w()?;
            drop((lg, ig, tg, kg, pg, ug, mg, rg));
        }
        Ok(ids)
    })
}
