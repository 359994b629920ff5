//! The engine's [`Attention`] off the CPU: keys and values stay in the [`DeviceKvStore`], and
//! the step's short chunks (decodes, draft checks, prompt tails) attend together in one batched
//! pass per layer.
//!
//! On a CUDA device with Quorum's kernels (`quorum_kernels::cuda`), the short chunks' rows
//! attend straight from the cache blocks through their block tables (`paged_attention`: no
//! gather, no padding, each row its own context). Elsewhere, and with the kernels turned off,
//! the batched pass pads every short chunk to the longest one and every context to the longest
//! context, and masks the padding with -inf, so a layer costs the same dozen kernel launches for
//! one sequence or a hundred. Long chunks (prefill) attend one by one, with their masks built
//! once per step. Slot and context indices depend only on the step, so they are uploaded once, at
//! the first layer, and reused by the others. Padding changes the length of the sums, so a
//! sequence's rows may differ in the last bits with the batch it runs in (the CPU path, not
//! this one, is bit-invariant to batching).

use candle_core::{DType, Device, Result, Tensor};
use quorum_models::{Attention, BatchLayout, ChunkLayout, RotaryEmbedding};

use crate::device_kv::{DeviceKvStore, slot_index};
use crate::paged_attention::SeqBlocks;

/// Attention for one step over a [`DeviceKvStore`]; `seqs[i]` describes the chunk whose
/// `seq_slot` is `i`.
pub struct DevicePagedAttention<'a> {
    pub store: &'a DeviceKvStore,
    pub seqs: &'a [SeqBlocks],
    /// Chunks of at most this many tokens attend row by row (the paged kernel, or the padded
    /// pass without it); longer ones as whole chunks.
    short_chunk: usize,
    step: Option<StepIndex>,
}

/// Chunks of at most this many tokens attend in the batched pass: a decode with its drafts
/// (at most 1 + `max_draft_tokens`) always does; a prompt chunk this short pads little.
const SHORT_CHUNK: usize = 32;

/// The step's indices on the device, shared by every layer.
struct StepIndex {
    /// `[tokens, token_width]`: each new token's slot.
    write: Tensor,
    /// `[tokens]` u32: the same slots, for the fused rotary and cache write.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    write_slots: Tensor,
    short: Option<ShortAttention>,
    /// The long chunks, in chunk order.
    long: Vec<LongChunk>,
    /// Output row `i` is row `order[i]` of the short chunks' rows followed by the long
    /// chunks' rows; `None` when that order is already the batch's.
    order: Option<Tensor>,
}

/// A long chunk's context and causal mask, built once per step.
struct LongChunk {
    /// `[context]`: its context slots.
    context_slots: Tensor,
    /// `[len, context]`: 0 where query i sees the key, -inf elsewhere. `None` where Quorum's
    /// CUDA kernels run: their softmax works the mask out from each row's position.
    mask: Option<Tensor>,
}

/// How the short chunks of a step attend.
enum ShortAttention {
    Padded(ShortGroup),
    Paged(PagedRows),
}

/// The short chunks' query rows for the paged-attention kernel, as host vectors (tested on any
/// machine) and on the device.
#[derive(Debug, Clone, PartialEq)]
struct PagedRowsHost {
    /// The batch row of each query row, in chunk order.
    rows: Vec<u32>,
    /// `[sequences, max_blocks]`, each short chunk's block table padded with block 0.
    block_tables: Vec<u32>,
    max_blocks: usize,
    /// The row's index among the short chunks.
    seq_of_row: Vec<u32>,
    /// The keys a row sees: its position + 1.
    context_lens: Vec<u32>,
}

#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
struct PagedRows {
    /// Which batch rows attend here; `None` when they are every row, in order (a step of
    /// decodes alone), so the queries need no gather.
    rows: Option<Tensor>,
    row_count: usize,
    block_tables: Tensor,
    seq_of_row: Tensor,
    context_lens: Tensor,
    max_context: usize,
}

/// The short chunks of a step, padded to `max_len` queries over `max_context` keys.
struct ShortGroup {
    count: usize,
    max_len: usize,
    max_context: usize,
    /// `[count * max_len]`: each chunk's rows in the packed batch, padded with its first row.
    query_rows: Tensor,
    /// `[count * max_context]`: each chunk's context slots, padded with slot 0.
    context_slots: Tensor,
    /// `[count, 1, 1, max_len, max_context]`: 0 where query i of a chunk sees the key, -inf
    /// elsewhere (padding queries see key 0 only, so their softmax stays finite).
    mask: Tensor,
    /// The real rows among the `count * max_len` padded ones, in chunk order.
    real_rows: Tensor,
}

impl<'a> DevicePagedAttention<'a> {
    pub fn new(store: &'a DeviceKvStore, seqs: &'a [SeqBlocks]) -> Self {
        Self {
            store,
            seqs,
            short_chunk: SHORT_CHUNK,
            step: None,
        }
    }

    /// Every chunk, however long, attends row by row, so each row's attention is the same
    /// arithmetic whatever chunk it arrived in (the batch-invariant mode): a whole chunk's
    /// attention runs candle's matmuls, whose order of additions follows the chunk's shape.
    pub fn every_chunk_paged(mut self, yes: bool) -> Self {
        if yes {
            self.short_chunk = usize::MAX;
        }
        self
    }

    fn seq_of(&self, c: &ChunkLayout) -> Result<&'a SeqBlocks> {
        let seqs: &'a [SeqBlocks] = self.seqs;
        seqs.get(c.seq_slot).ok_or_else(|| {
            candle_core::Error::Msg(format!("no block table for chunk slot {}", c.seq_slot))
        })
    }

    /// The context slots `0..len` of a sequence, from its block table.
    fn context_slots(&self, c: &ChunkLayout, len: usize) -> Result<Vec<u32>> {
        let block_size = self.store.layout().block_size;
        let table = &self.seq_of(c)?.block_table;
        (0..len)
            .map(|pos| match table.get(pos / block_size) {
                Some(&b) => Ok((b * block_size + pos % block_size) as u32),
                None => candle_core::bail!(
                    "sequence {} reaches position {pos} beyond its {} blocks",
                    c.seq_slot,
                    table.len()
                ),
            })
            .collect()
    }

    /// The step's indices and masks on `device`, the masks in the activations' `dtype`.
    fn build_index(&self, batch: &BatchLayout, device: &Device, dtype: DType) -> Result<StepIndex> {
        let mut write_slots = Vec::with_capacity(batch.n_tokens());
        for c in &batch.chunks {
            let slots = &self.seq_of(c)?.slots;
            if slots.len() != c.len {
                candle_core::bail!(
                    "sequence {} has {} slots for {} new tokens",
                    c.seq_slot,
                    slots.len(),
                    c.len
                );
            }
            write_slots.extend_from_slice(slots);
        }
        let write = slot_index(&write_slots, self.store.layout().token_width(), device)?;
        let slots_u32: Vec<u32> = write_slots.iter().map(|&s| s as u32).collect();
        let write_slots_tensor = Tensor::from_vec(slots_u32, write_slots.len(), device)?;
        let (short, long): (Vec<&ChunkLayout>, Vec<&ChunkLayout>) =
            batch.chunks.iter().partition(|c| c.len <= self.short_chunk);
        let kernels = device.is_cuda() && quorum_kernels::cuda::enabled();
        let short_group = if short.is_empty() {
            None
        } else if kernels {
            let host = self.paged_rows(&short)?;
            let rows = host.rows.len();
            let every_row = rows == batch.n_tokens()
                && host.rows.iter().enumerate().all(|(i, &r)| r as usize == i);
            let seqs = short.len();
            Some(ShortAttention::Paged(PagedRows {
                max_context: host.context_lens.iter().copied().max().unwrap_or(1) as usize,
                row_count: rows,
                rows: if every_row {
                    None
                } else {
                    Some(Tensor::from_vec(host.rows, rows, device)?)
                },
                block_tables: Tensor::from_vec(host.block_tables, (seqs, host.max_blocks), device)?,
                seq_of_row: Tensor::from_vec(host.seq_of_row, rows, device)?,
                context_lens: Tensor::from_vec(host.context_lens, rows, device)?,
            }))
        } else {
            Some(ShortAttention::Padded(
                self.short_group(&short, device, dtype)?,
            ))
        };
        let long_chunks = long
            .iter()
            .map(|c| {
                let (len, context) = (c.len, c.context_len());
                let slots = self.context_slots(c, context)?;
                Ok(LongChunk {
                    context_slots: Tensor::from_vec(slots, context, device)?,
                    mask: if kernels {
                        None
                    } else {
                        Some(causal_mask(c.start_position, len, context, device, dtype)?)
                    },
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Where each batch row sits among [short chunks' rows, long chunks' rows].
        let mut position = vec![0u32; batch.n_tokens()];
        let mut next = 0u32;
        for c in short.iter().chain(&long) {
            for p in &mut position[c.offset..c.offset + c.len] {
                *p = next;
                next += 1;
            }
        }
        let in_order = position.iter().enumerate().all(|(i, &p)| p as usize == i);
        let order = if in_order {
            None
        } else {
            Some(Tensor::from_vec(position, batch.n_tokens(), device)?)
        };
        Ok(StepIndex {
            write,
            write_slots: write_slots_tensor,
            short: short_group,
            long: long_chunks,
            order,
        })
    }

    fn paged_rows(&self, chunks: &[&ChunkLayout]) -> Result<PagedRowsHost> {
        let block_size = self.store.layout().block_size;
        let mut tables = Vec::with_capacity(chunks.len());
        for c in chunks {
            let table = &self.seq_of(c)?.block_table;
            if table.len() * block_size < c.context_len() {
                candle_core::bail!(
                    "sequence {} reaches position {} beyond its {} blocks",
                    c.seq_slot,
                    c.context_len() - 1,
                    table.len()
                );
            }
            tables.push(table);
        }
        let max_blocks = tables.iter().map(|t| t.len()).max().unwrap_or(1).max(1);
        let mut host = PagedRowsHost {
            rows: Vec::new(),
            block_tables: Vec::with_capacity(chunks.len() * max_blocks),
            max_blocks,
            seq_of_row: Vec::new(),
            context_lens: Vec::new(),
        };
        for (s, (c, table)) in chunks.iter().zip(&tables).enumerate() {
            host.block_tables.extend(table.iter().map(|&b| b as u32));
            host.block_tables
                .extend(std::iter::repeat_n(0, max_blocks - table.len()));
            for i in 0..c.len {
                host.rows.push((c.offset + i) as u32);
                host.seq_of_row.push(s as u32);
                host.context_lens.push((c.start_position + i + 1) as u32);
            }
        }
        Ok(host)
    }

    /// The short chunks' rows through `quorum_kernels::cuda::device::paged_attention`: `q`
    /// token-major `[tokens, num_heads, head_dim]`, rotated; returns their rows `[rows,
    /// num_heads * head_dim]` in chunk order.
    #[cfg(feature = "cuda")]
    fn attend_paged(&self, layer: usize, p: &PagedRows, q: &Tensor) -> Result<Tensor> {
        let l = self.store.layout();
        let (_, num_heads, head_dim) = q.dims3()?;
        let q = match &p.rows {
            Some(rows) => q.index_select(rows, 0)?,
            None => q.clone(),
        };
        let (k_cache, v_cache) = self.store.layer(layer)?;
        let out = quorum_kernels::cuda::device::paged_attention(
            quorum_kernels::cuda::device::PagedAttention {
                q: &q,
                k_cache,
                v_cache,
                kv_heads: l.num_kv_heads,
                block_tables: &p.block_tables,
                seq_of_row: &p.seq_of_row,
                context_lens: &p.context_lens,
                max_context: p.max_context,
                block_size: l.block_size,
                scale: 1.0 / (head_dim as f32).sqrt(),
            },
        )?;
        out.reshape((p.row_count, num_heads * head_dim))
    }

    #[cfg(not(feature = "cuda"))]
    fn attend_paged(&self, _layer: usize, _p: &PagedRows, _q: &Tensor) -> Result<Tensor> {
        candle_core::bail!("a CUDA device in a build without the `cuda` feature")
    }

    fn short_group(
        &self,
        chunks: &[&ChunkLayout],
        device: &Device,
        dtype: DType,
    ) -> Result<ShortGroup> {
        let count = chunks.len();
        let max_len = chunks.iter().map(|c| c.len).max().unwrap_or(1);
        let max_context = chunks.iter().map(|c| c.context_len()).max().unwrap_or(1);
        let mut query_rows = Vec::with_capacity(count * max_len);
        let mut slots = Vec::with_capacity(count * max_context);
        let mut mask = Vec::with_capacity(count * max_len * max_context);
        let mut real_rows = Vec::new();
        for (b, c) in chunks.iter().enumerate() {
            let mut s = self.context_slots(c, c.context_len())?;
            s.resize(max_context, 0);
            slots.extend(s);
            for i in 0..max_len {
                let real = i < c.len;
                query_rows.push((c.offset + if real { i } else { 0 }) as u32);
                if real {
                    real_rows.push((b * max_len + i) as u32);
                }
                // Query i of the chunk is at position start + i and sees keys 0..=start + i.
                let sees = if real { c.start_position + i } else { 0 };
                mask.extend((0..max_context).map(
                    |p| {
                        if p <= sees { 0f32 } else { f32::NEG_INFINITY }
                    },
                ));
            }
        }
        let real = real_rows.len();
        Ok(ShortGroup {
            count,
            max_len,
            max_context,
            query_rows: Tensor::from_vec(query_rows, count * max_len, device)?,
            context_slots: Tensor::from_vec(slots, count * max_context, device)?,
            mask: Tensor::from_vec(mask, (count, 1, 1, max_len, max_context), device)?
                .to_dtype(dtype)?,
            real_rows: Tensor::from_vec(real_rows, real, device)?,
        })
    }

    /// One layer's attention for the short chunks: `q` `[num_heads, tokens, head_dim]`;
    /// returns their rows `[rows, num_heads * head_dim]` in chunk order.
    fn attend_short(&self, layer: usize, g: &ShortGroup, q: &Tensor) -> Result<Tensor> {
        let l = self.store.layout();
        let (num_heads, _, head_dim) = q.dims3()?;
        let (kvh, n_rep) = (l.num_kv_heads, num_heads / l.num_kv_heads);
        let (count, len, ctx) = (g.count, g.max_len, g.max_context);
        let (k, v) = self.store.gather(layer, &g.context_slots)?;
        // [count * ctx, kvh * d] -> [count, kvh, ctx, d]
        let heads = |t: Tensor| -> Result<Tensor> {
            t.reshape((count, ctx, kvh, head_dim))?
                .transpose(1, 2)?
                .contiguous()
        };
        let (k, v) = (heads(k)?, heads(v)?);
        // Query head h reads kv head h / n_rep: [heads, count * len, d] -> [count, kvh, n_rep *
        // len, d].
        let q = q
            .index_select(&g.query_rows, 1)?
            .reshape((kvh, n_rep, count, len, head_dim))?
            .permute((2, 0, 1, 3, 4))?
            .contiguous()?
            .reshape((count, kvh, n_rep * len, head_dim))?;
        let scores = (q.matmul(&k.t()?)? / (head_dim as f64).sqrt())?
            .reshape((count, kvh, n_rep, len, ctx))?
            .broadcast_add(&g.mask)?;
        let probs =
            candle_nn::ops::softmax_last_dim(&scores)?.reshape((count, kvh, n_rep * len, ctx))?;
        // [count, kvh, n_rep * len, d] -> [count, len, kvh, n_rep, d] -> rows.
        probs
            .matmul(&v)?
            .reshape((count, kvh, n_rep, len, head_dim))?
            .permute((0, 3, 1, 2, 4))?
            .contiguous()?
            .reshape((count * len, num_heads * head_dim))?
            .index_select(&g.real_rows, 0)
    }

    /// One long chunk through `prefill_attention`: `q` token-major `[tokens, num_heads,
    /// head_dim]`, rotated; the keys and values read in place through the chunk's context
    /// slots, the scores never stored. Returns `[len, num_heads * head_dim]`.
    #[cfg(feature = "cuda")]
    fn attend_prefill(
        &self,
        layer: usize,
        c: &ChunkLayout,
        chunk: &LongChunk,
        q: &Tensor,
    ) -> Result<Tensor> {
        let l = self.store.layout();
        let (_, num_heads, head_dim) = q.dims3()?;
        let (k_cache, v_cache) = self.store.layer(layer)?;
        let out = quorum_kernels::cuda::device::prefill_attention(
            quorum_kernels::cuda::device::PrefillChunk {
                q: &q.narrow(0, c.offset, c.len)?,
                k_cache,
                v_cache,
                kv_heads: l.num_kv_heads,
                context_slots: &chunk.context_slots,
                start: c.start_position,
                scale: 1.0 / (head_dim as f32).sqrt(),
            },
        )?;
        out.reshape((c.len, num_heads * head_dim))
    }

    #[cfg(not(feature = "cuda"))]
    fn attend_prefill(
        &self,
        _layer: usize,
        _c: &ChunkLayout,
        _chunk: &LongChunk,
        _q: &Tensor,
    ) -> Result<Tensor> {
        candle_core::bail!("a CUDA device in a build without the `cuda` feature")
    }

    /// One long chunk over its gathered context; returns `[len, num_heads * head_dim]`. The
    /// query heads that share a kv head are stacked (`[kvh, n_rep * len, d]`) rather than the
    /// keys and values repeated, and the mask is the step's, not rebuilt per layer.
    fn attend_long(
        &self,
        layer: usize,
        c: &ChunkLayout,
        chunk: &LongChunk,
        q: &Tensor,
    ) -> Result<Tensor> {
        let l = self.store.layout();
        let (num_heads, _, head_dim) = q.dims3()?;
        let (kvh, n_rep, len, ctx) = (
            l.num_kv_heads,
            num_heads / l.num_kv_heads,
            c.len,
            c.context_len(),
        );
        let (k, v) = self.store.gather(layer, &chunk.context_slots)?;
        // [ctx, kvh * d] -> [kvh, ctx, d]
        let heads = |t: Tensor| -> Result<Tensor> {
            t.reshape((ctx, kvh, head_dim))?
                .transpose(0, 1)?
                .contiguous()
        };
        let (k, v) = (heads(k)?, heads(v)?);
        // Head h = j * n_rep + r: [heads, len, d] is [kvh, n_rep * len, d] as it lies.
        // Scaled before the product: the queries are far fewer values than the scores.
        let q = (q.narrow(1, c.offset, len)?.contiguous()? / (head_dim as f64).sqrt())?
            .reshape((kvh, n_rep * len, head_dim))?;
        // [kvh, n_rep * len, ctx]: row r is query r % len of the chunk.
        let scores = q.matmul(&k.t()?)?;
        let probs = match &chunk.mask {
            Some(mask) => {
                let masked = scores
                    .reshape((kvh, n_rep, len, ctx))?
                    .broadcast_add(mask)?;
                candle_nn::ops::softmax_last_dim(&masked)?.reshape((kvh, n_rep * len, ctx))?
            }
            None => causal_softmax_in_place(scores, len, c.start_position)?,
        };
        probs
            .matmul(&v)?
            .reshape((num_heads, len, head_dim))?
            .transpose(0, 1)?
            .reshape((len, num_heads * head_dim))
    }
}

/// Whether long chunks of heads of `head_dim` attend through `prefill_attention`: Quorum's
/// kernels run, the prefill kernel is not turned off, and it takes the head dimension.
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
fn prefill_kernel_takes(head_dim: usize) -> bool {
    quorum_kernels::cuda::prefill_kernel_enabled()
        && quorum_kernels::cuda::launch::prefill_takes_head_dim(head_dim)
}

/// Quorum's causal softmax kernel over a chunk's scores, in place.
#[cfg(feature = "cuda")]
fn causal_softmax_in_place(scores: Tensor, len: usize, start: usize) -> Result<Tensor> {
    quorum_kernels::cuda::device::causal_softmax(&scores, len, start)?;
    Ok(scores)
}

#[cfg(not(feature = "cuda"))]
fn causal_softmax_in_place(_scores: Tensor, _len: usize, _start: usize) -> Result<Tensor> {
    candle_core::bail!("a CUDA device in a build without the `cuda` feature")
}

/// `[len, context]` in `dtype`: 0 where query `i` (at position `start + i`) sees key `p` (`p <=
/// start + i`), -inf elsewhere. Made where the attention runs: a 2,000-token prompt's mask is 4
/// million values, which the host would fill and copy on every step.
fn causal_mask(
    start: usize,
    len: usize,
    context: usize,
    device: &Device,
    dtype: DType,
) -> Result<Tensor> {
    let keys = Tensor::arange(0u32, context as u32, device)?.reshape((1, context))?;
    let last_seen =
        Tensor::arange(start as u32, (start + len) as u32, device)?.reshape((len, 1))?;
    let visible = keys.broadcast_le(&last_seen)?;
    let seen = Tensor::zeros((len, context), dtype, device)?;
    let hidden = Tensor::full(f32::NEG_INFINITY, (len, context), device)?.to_dtype(dtype)?;
    visible.where_cond(&seen, &hidden)
}

impl DevicePagedAttention<'_> {
    fn ensure_index(&mut self, batch: &BatchLayout, q: &Tensor) -> Result<()> {
        if self.step.is_none() {
            self.step = Some(self.build_index(batch, q.device(), q.dtype())?);
        }
        Ok(())
    }

    /// The step's attention once its keys and values are stored: the short chunks' rows from
    /// `short_q` (token-major `[tokens, heads, dim]` for the paged kernel, head-major `[heads,
    /// tokens, dim]` for the padded pass) and the long chunks' from token-major `prefill_q`
    /// through the prefill kernel when given, else from head-major `long_q`.
    fn attend_stored(
        &self,
        layer: usize,
        batch: &BatchLayout,
        short_q: &Tensor,
        long_q: impl FnOnce() -> Result<Tensor>,
        prefill_q: Option<&Tensor>,
    ) -> Result<Tensor> {
        let step = self.step.as_ref().expect("the step index is built first");
        let mut parts = Vec::new();
        match &step.short {
            Some(ShortAttention::Padded(g)) => parts.push(self.attend_short(layer, g, short_q)?),
            Some(ShortAttention::Paged(p)) => parts.push(self.attend_paged(layer, p, short_q)?),
            None => {}
        }
        if !step.long.is_empty() {
            let long = batch.chunks.iter().filter(|c| c.len > self.short_chunk);
            match prefill_q {
                Some(q) => {
                    for (c, chunk) in long.zip(&step.long) {
                        parts.push(self.attend_prefill(layer, c, chunk, q)?);
                    }
                }
                None => {
                    let q = long_q()?;
                    for (c, chunk) in long.zip(&step.long) {
                        parts.push(self.attend_long(layer, c, chunk, &q)?);
                    }
                }
            }
        }
        let out = if parts.len() == 1 {
            parts.pop().expect("one part")
        } else {
            Tensor::cat(&parts, 0)?
        };
        match &step.order {
            Some(order) => out.index_select(order, 0),
            None => Ok(out),
        }
    }
}

impl Attention for DevicePagedAttention<'_> {
    fn attend(
        &mut self,
        layer: usize,
        batch: &BatchLayout,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor> {
        self.ensure_index(batch, q)?;
        let step = self.step.as_ref().expect("built above");
        // Token-major rows for the slot writes: [tokens, kv_heads * dim].
        let rows = |t: &Tensor| -> Result<Tensor> {
            let (h, n, d) = t.dims3()?;
            t.transpose(0, 1)?.contiguous()?.reshape((n, h * d))
        };
        self.store.write(layer, &step.write, &rows(k)?, &rows(v)?)?;
        let short_q = match &step.short {
            Some(ShortAttention::Paged(_)) => q.transpose(0, 1)?.contiguous()?,
            _ => q.clone(),
        };
        self.attend_stored(layer, batch, &short_q, || Ok(q.clone()), None)
    }

    /// On a CUDA device with Quorum's kernels: one kernel rotates the queries and keys and
    /// writes the keys and values into their slots, then the rows attend as in
    /// [`Attention::attend`], without the head-major transposes for the short chunks.
    fn attend_unrotated(
        &mut self,
        layer: usize,
        batch: &BatchLayout,
        qkv: [&Tensor; 3],
        positions: &Tensor,
        rotary: &RotaryEmbedding,
    ) -> Option<Result<Tensor>> {
        if !(cfg!(feature = "cuda") && qkv[0].device().is_cuda() && quorum_kernels::cuda::enabled())
        {
            return None;
        }
        Some(self.rotate_store_attend(layer, batch, qkv, positions, rotary))
    }
}

impl DevicePagedAttention<'_> {
    #[cfg(feature = "cuda")]
    fn rotate_store_attend(
        &mut self,
        layer: usize,
        batch: &BatchLayout,
        [q, k, v]: [&Tensor; 3],
        positions: &Tensor,
        rotary: &RotaryEmbedding,
    ) -> Result<Tensor> {
        use quorum_kernels::cuda::device::{KvWrite, RotaryTables, rotary_kv_write};
        self.ensure_index(batch, q)?;
        let step = self.step.as_ref().expect("built above");
        let (k_cache, v_cache) = self.store.layer(layer)?;
        let (cos, sin, interleaved) = rotary.tables();
        let q = rotary_kv_write(
            q,
            k,
            v,
            positions,
            RotaryTables {
                cos,
                sin,
                interleaved,
            },
            KvWrite {
                k_cache,
                v_cache,
                slots: &step.write_slots,
            },
        )?;
        let head_major = || q.transpose(0, 1)?.contiguous();
        let (_, _, head_dim) = q.dims3()?;
        let prefill_q = prefill_kernel_takes(head_dim).then_some(&q);
        match &step.short {
            Some(ShortAttention::Padded(_)) => {
                let hq = head_major()?;
                self.attend_stored(layer, batch, &hq, || Ok(hq.clone()), prefill_q)
            }
            _ => self.attend_stored(layer, batch, &q, head_major, prefill_q),
        }
    }

    #[cfg(not(feature = "cuda"))]
    fn rotate_store_attend(
        &mut self,
        _layer: usize,
        _batch: &BatchLayout,
        _qkv: [&Tensor; 3],
        _positions: &Tensor,
        _rotary: &RotaryEmbedding,
    ) -> Result<Tensor> {
        candle_core::bail!("a CUDA device in a build without the `cuda` feature")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::paged_attention::PagedAttention;
    use candle_core::DType;
    use quorum_kernels::{KvLayout, PagedKvStore};

    const LAYOUT: KvLayout = KvLayout {
        num_layers: 2,
        num_blocks: 32,
        block_size: 4,
        num_kv_heads: 2,
        head_dim: 8,
    };
    const HEADS: usize = 6;

    /// `(block table, start position, new tokens)` per sequence, in batch order.
    fn step(chunks: &[(&[usize], usize, usize)]) -> (BatchLayout, Vec<SeqBlocks>) {
        let bs = LAYOUT.block_size;
        let layout = BatchLayout::from_chunks(
            chunks
                .iter()
                .enumerate()
                .map(|(i, &(_, start, len))| (i, start, len, true)),
        );
        let seqs = chunks
            .iter()
            .map(|&(table, start, len)| SeqBlocks {
                slots: (start..start + len)
                    .map(|p| table[p / bs] * bs + p % bs)
                    .collect(),
                block_table: table.to_vec(),
            })
            .collect();
        (layout, seqs)
    }

    #[test]
    fn the_causal_mask_hides_the_keys_after_each_query() {
        let mask = causal_mask(3, 2, 6, &Device::Cpu, DType::F32)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        let hidden = f32::NEG_INFINITY;
        assert_eq!(
            mask,
            [
                [0.0, 0.0, 0.0, 0.0, hidden, hidden],
                [0.0, 0.0, 0.0, 0.0, 0.0, hidden]
            ]
        );
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
        (a - b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    }

    /// Two steps give the CPU kernel's results over the host blocks: a long prefill beside
    /// short ones, then decodes of different context lengths beside a multi-token short chunk,
    /// a new short prefill and a new long one, out of order; and the same with every chunk
    /// attending row by row, as the batch-invariant mode has it.
    #[test]
    fn device_blocks_match_the_host_kernel() {
        let dev = Device::Cpu;
        let t0: Vec<usize> = [3, 1].into_iter().chain(8..18).collect();
        let t4: Vec<usize> = (18..28).collect();
        let (t1, t2, t3): (&[usize], &[usize], &[usize]) = (&[5, 6], &[0], &[7]);
        let steps = [
            step(&[(&t0, 0, 40), (t3, 0, 1), (t1, 0, 3)]),
            step(&[
                (t1, 3, 3),
                (&t0, 40, 1),
                (&t4, 0, 35),
                (t3, 1, 1),
                (t2, 0, 2),
            ]),
        ];
        for every_chunk_paged in [false, true] {
            let mut host = PagedKvStore::new(LAYOUT);
            let device = DeviceKvStore::new(LAYOUT, &dev, DType::F32).unwrap();
            for (batch, seqs) in &steps {
                let n = batch.n_tokens();
                let mut on_host = PagedAttention {
                    store: &mut host,
                    seqs,
                };
                let mut on_device =
                    DevicePagedAttention::new(&device, seqs).every_chunk_paged(every_chunk_paged);
                for layer in 0..LAYOUT.num_layers {
                    let q = Tensor::randn(0f32, 1.0, (HEADS, n, LAYOUT.head_dim), &dev).unwrap();
                    let kv = || Tensor::randn(0f32, 1.0, (2, n, LAYOUT.head_dim), &dev).unwrap();
                    let (k, v) = (kv(), kv());
                    let a = on_host.attend(layer, batch, &q, &k, &v).unwrap();
                    let b = on_device.attend(layer, batch, &q, &k, &v).unwrap();
                    assert_eq!(a.dims(), b.dims());
                    let d = max_diff(&a, &b);
                    assert!(
                        d < 1e-5,
                        "every chunk paged: {every_chunk_paged}, layer {layer}: max difference {d}"
                    );
                }
            }
        }
    }

    /// The paged-attention kernel's inputs (row, block table, context of each short row), run
    /// through the kernel's host reference over the device store, give the CPU kernel's rows.
    #[test]
    fn paged_rows_give_the_host_kernels_results() {
        let dev = Device::Cpu;
        let mut host = PagedKvStore::new(LAYOUT);
        let device = DeviceKvStore::new(LAYOUT, &dev, DType::F32).unwrap();
        let t0: Vec<usize> = (8..20).collect();
        let (t1, t2): (&[usize], &[usize]) = (&[5, 6, 2], &[7]);
        let steps = [
            step(&[(&t0, 0, 40), (t2, 0, 1), (t1, 0, 3)]),
            step(&[(t1, 3, 3), (&t0, 40, 1), (t2, 1, 1)]),
        ];
        for (batch, seqs) in &steps {
            let n = batch.n_tokens();
            let mut on_host = PagedAttention {
                store: &mut host,
                seqs,
            };
            let mut on_device = DevicePagedAttention::new(&device, seqs);
            let q = Tensor::randn(0f32, 1.0, (HEADS, n, LAYOUT.head_dim), &dev).unwrap();
            let kv = || Tensor::randn(0f32, 1.0, (2, n, LAYOUT.head_dim), &dev).unwrap();
            let (k, v) = (kv(), kv());
            let want = on_host.attend(0, batch, &q, &k, &v).unwrap();
            // The padded pass writes the step's keys and values into the device store.
            on_device.attend(0, batch, &q, &k, &v).unwrap();
            let short: Vec<&ChunkLayout> = batch
                .chunks
                .iter()
                .filter(|c| c.len <= SHORT_CHUNK)
                .collect();
            let rows = on_device.paged_rows(&short).unwrap();
            let (kc, vc) = device.layer(0).unwrap();
            let host_vec = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let row_index = Tensor::new(rows.rows.as_slice(), &dev).unwrap();
            let q_rows = q
                .index_select(&row_index, 1)
                .unwrap()
                .transpose(0, 1)
                .unwrap();
            let case = quorum_kernels::cuda::cases::AttentionCase {
                heads: HEADS,
                kv_heads: LAYOUT.num_kv_heads,
                head_dim: LAYOUT.head_dim,
                block_size: LAYOUT.block_size,
                q: host_vec(&q_rows.contiguous().unwrap()),
                k_cache: host_vec(kc),
                v_cache: host_vec(vc),
                block_tables: rows
                    .block_tables
                    .chunks(rows.max_blocks)
                    .map(<[u32]>::to_vec)
                    .collect(),
                seq_of_row: rows.seq_of_row.clone(),
                context_lens: rows.context_lens.clone(),
                scale: 1.0 / (LAYOUT.head_dim as f32).sqrt(),
            };
            let got = quorum_kernels::cuda::reference::paged_attention(&case);
            let want = host_vec(&want.index_select(&row_index, 0).unwrap());
            assert_eq!(got.len(), want.len());
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() < 1e-5, "{g} against {w}");
            }
        }
    }

    #[test]
    fn a_chunk_beyond_its_block_table_is_an_error() {
        let dev = Device::Cpu;
        let device = DeviceKvStore::new(LAYOUT, &dev, DType::F32).unwrap();
        let (batch, mut seqs) = step(&[(&[2], 0, 3)]);
        seqs[0].block_table.clear();
        let mut attn = DevicePagedAttention::new(&device, &seqs);
        let q = Tensor::zeros((HEADS, 3, LAYOUT.head_dim), DType::F32, &dev).unwrap();
        let kv = Tensor::zeros((2, 3, LAYOUT.head_dim), DType::F32, &dev).unwrap();
        let err = attn.attend(0, &batch, &q, &kv, &kv).unwrap_err();
        assert!(err.to_string().contains("beyond its 0 blocks"), "{err}");
    }
}
