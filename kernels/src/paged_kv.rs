//! Paged KV cache memory on the CPU.
//!
//! Layout per layer, separately for keys and values: `[num_blocks, block_size, num_kv_heads,
//! head_dim]` elements, so one token's heads are contiguous (a slot write is one copy) and a
//! block is one contiguous range (a copy-on-write is one copy). The elements are f32, or f16
//! at half the bytes a decode step reads ([`KvElement`]).

use candle_core::{DType, Device, Tensor};
use rayon::prelude::*;

use crate::kv_element::KvElement;

/// Shape of the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvLayout {
    pub num_layers: usize,
    pub num_blocks: usize,
    pub block_size: usize,
    pub num_kv_heads: usize,
    pub head_dim: usize,
}

impl KvLayout {
    /// Floats one token occupies in one layer's key (or value) cache.
    pub fn token_width(&self) -> usize {
        self.num_kv_heads * self.head_dim
    }

    fn layer_len(&self) -> usize {
        self.num_blocks * self.block_size * self.token_width()
    }

    /// Bytes of KV one token costs across all layers (keys and values, f32).
    pub fn bytes_per_token(&self) -> usize {
        self.bytes_per_token_of(std::mem::size_of::<f32>())
    }

    /// The same for a cache whose entries take `element_bytes` each (2 for bf16 blocks).
    pub fn bytes_per_token_of(&self, element_bytes: usize) -> usize {
        2 * self.num_layers * self.token_width() * element_bytes
    }
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PagedKvError {
    #[error("slot {slot} is outside the cache ({capacity} slots)")]
    SlotOutOfRange { slot: usize, capacity: usize },
    #[error("block {block} is outside the cache ({num_blocks} blocks)")]
    BlockOutOfRange { block: usize, num_blocks: usize },
    #[error("context of {context} tokens needs {needed} blocks but the table has {available}")]
    TableTooShort {
        context: usize,
        needed: usize,
        available: usize,
    },
    #[error("expected {expected} values, got {actual}")]
    WrongLength { expected: usize, actual: usize },
    #[error("layer {layer} is outside the cache ({num_layers} layers)")]
    LayerOutOfRange { layer: usize, num_layers: usize },
    #[error("{num_heads} query heads cannot share {num_kv_heads} kv heads evenly")]
    HeadsNotGrouped {
        num_heads: usize,
        num_kv_heads: usize,
    },
    #[error("a chunk reaches row {row} of a batch of {tokens} rows")]
    RowOutsideBatch { row: usize, tokens: usize },
    #[error("batch row {row} does not belong to exactly one chunk")]
    RowNotInOneChunk { row: usize },
    #[error("a KV cache in host memory holds f32 or f16, not {dtype:?}")]
    UnsupportedDtype { dtype: DType },
}

#[derive(Debug)]
pub struct PagedKvStore {
    layout: KvLayout,
    blocks: Blocks,
}

/// Every layer's key and value caches, in the element type the store was made with.
#[derive(Debug)]
pub(crate) enum Blocks {
    F32(Layers<f32>),
    F16(Layers<half::f16>),
}

#[derive(Debug)]
pub(crate) struct Layers<E> {
    pub keys: Vec<Vec<E>>,
    pub values: Vec<Vec<E>>,
}

impl<E: KvElement> Layers<E> {
    fn zeroed(layout: KvLayout) -> Self {
        let zeros = || {
            (0..layout.num_layers)
                .map(|_| E::zeroed(layout.layer_len()))
                .collect()
        };
        Self {
            keys: zeros(),
            values: zeros(),
        }
    }

    fn write(&mut self, layer: usize, w: usize, slots: &[usize], keys: &[f32], values: &[f32]) {
        let (kc, vc) = (&mut self.keys[layer], &mut self.values[layer]);
        for (i, &slot) in slots.iter().enumerate() {
            E::convert_from(&mut kc[slot * w..(slot + 1) * w], &keys[i * w..(i + 1) * w]);
            E::convert_from(
                &mut vc[slot * w..(slot + 1) * w],
                &values[i * w..(i + 1) * w],
            );
        }
    }

    fn copy_within(&mut self, from: std::ops::Range<usize>, to: usize) {
        for cache in self.keys.iter_mut().chain(self.values.iter_mut()) {
            cache.copy_within(from.clone(), to);
        }
    }
}

impl PagedKvStore {
    /// A store of f32 blocks.
    pub fn new(layout: KvLayout) -> Self {
        Self {
            layout,
            blocks: Blocks::F32(Layers::zeroed(layout)),
        }
    }

    /// A store whose blocks hold `dtype` (f32 or f16).
    pub fn with_dtype(layout: KvLayout, dtype: DType) -> Result<Self, PagedKvError> {
        let blocks = match dtype {
            DType::F32 => Blocks::F32(Layers::zeroed(layout)),
            DType::F16 => Blocks::F16(Layers::zeroed(layout)),
            dtype => return Err(PagedKvError::UnsupportedDtype { dtype }),
        };
        Ok(Self { layout, blocks })
    }

    pub fn layout(&self) -> KvLayout {
        self.layout
    }

    /// What the blocks hold.
    pub fn dtype(&self) -> DType {
        match self.blocks {
            Blocks::F32(_) => f32::DTYPE,
            Blocks::F16(_) => half::f16::DTYPE,
        }
    }

    fn check_layer(&self, layer: usize) -> Result<(), PagedKvError> {
        if layer >= self.layout.num_layers {
            return Err(PagedKvError::LayerOutOfRange {
                layer,
                num_layers: self.layout.num_layers,
            });
        }
        Ok(())
    }

    /// Checks that `block_table` names existing blocks and covers `context` tokens.
    pub(crate) fn check_table(
        &self,
        block_table: &[usize],
        context: usize,
    ) -> Result<(), PagedKvError> {
        let l = self.layout;
        let needed = context.div_ceil(l.block_size);
        if block_table.len() < needed {
            return Err(PagedKvError::TableTooShort {
                context,
                needed,
                available: block_table.len(),
            });
        }
        if let Some(&b) = block_table[..needed].iter().find(|&&b| b >= l.num_blocks) {
            return Err(PagedKvError::BlockOutOfRange {
                block: b,
                num_blocks: l.num_blocks,
            });
        }
        Ok(())
    }

    /// Every layer's caches, for a kernel to read layer `layer` of (checked here).
    pub(crate) fn blocks_of(&self, layer: usize) -> Result<&Blocks, PagedKvError> {
        self.check_layer(layer)?;
        Ok(&self.blocks)
    }

    /// Writes token rows into flat slots (`block * block_size + offset`). `keys`/`values` hold
    /// `slots.len()` rows of `num_kv_heads * head_dim` floats (token-major), rounded to the
    /// store's element type.
    pub fn write(
        &mut self,
        layer: usize,
        slots: &[usize],
        keys: &[f32],
        values: &[f32],
    ) -> Result<(), PagedKvError> {
        self.check_layer(layer)?;
        let w = self.layout.token_width();
        let capacity = self.layout.num_blocks * self.layout.block_size;
        for data in [keys, values] {
            if data.len() != slots.len() * w {
                return Err(PagedKvError::WrongLength {
                    expected: slots.len() * w,
                    actual: data.len(),
                });
            }
        }
        if let Some(&slot) = slots.iter().find(|&&s| s >= capacity) {
            return Err(PagedKvError::SlotOutOfRange { slot, capacity });
        }
        match &mut self.blocks {
            Blocks::F32(l) => l.write(layer, w, slots, keys, values),
            Blocks::F16(l) => l.write(layer, w, slots, keys, values),
        }
        Ok(())
    }

    /// Copies the first `num_tokens` slots of block `src` into block `dst`, in every layer.
    pub fn copy_block(
        &mut self,
        src: usize,
        dst: usize,
        num_tokens: usize,
    ) -> Result<(), PagedKvError> {
        let l = self.layout;
        for b in [src, dst] {
            if b >= l.num_blocks {
                return Err(PagedKvError::BlockOutOfRange {
                    block: b,
                    num_blocks: l.num_blocks,
                });
            }
        }
        let w = l.token_width();
        let n = num_tokens.min(l.block_size) * w;
        let (s, d) = (src * l.block_size * w, dst * l.block_size * w);
        match &mut self.blocks {
            Blocks::F32(l) => l.copy_within(s..s + n, d),
            Blocks::F16(l) => l.copy_within(s..s + n, d),
        }
        Ok(())
    }

    /// Gathers the first `context` tokens of a sequence into head-major f32 tensors
    /// `[num_kv_heads, context, head_dim]` (keys, values), following its block table.
    pub fn gather(
        &self,
        layer: usize,
        block_table: &[usize],
        context: usize,
    ) -> Result<(Tensor, Tensor), PagedKvError> {
        self.check_layer(layer)?;
        self.check_table(block_table, context)?;
        let l = self.layout;
        fn gather_one<E: KvElement>(
            l: KvLayout,
            block_table: &[usize],
            context: usize,
            cache: &[E],
        ) -> Vec<f32> {
            let (h_n, d, w) = (l.num_kv_heads, l.head_dim, l.token_width());
            let mut out = vec![0f32; h_n * context * d];
            // One head per task: heads write disjoint ranges of `out`.
            out.par_chunks_mut(context * d)
                .enumerate()
                .for_each(|(h, dst)| {
                    for pos in 0..context {
                        let slot =
                            block_table[pos / l.block_size] * l.block_size + pos % l.block_size;
                        let src = slot * w + h * d;
                        E::widen(&mut dst[pos * d..(pos + 1) * d], &cache[src..src + d]);
                    }
                });
            out
        }
        let shape = (l.num_kv_heads, context, l.head_dim);
        let to_tensor = |v: Vec<f32>| {
            Tensor::from_vec(v, shape, &Device::Cpu).expect("the buffer was sized from the shape")
        };
        let (keys, values) = match &self.blocks {
            Blocks::F32(b) => (
                gather_one(l, block_table, context, &b.keys[layer]),
                gather_one(l, block_table, context, &b.values[layer]),
            ),
            Blocks::F16(b) => (
                gather_one(l, block_table, context, &b.keys[layer]),
                gather_one(l, block_table, context, &b.values[layer]),
            ),
        };
        Ok((to_tensor(keys), to_tensor(values)))
    }

    /// The whole key (or value) cache of a layer as an f32 tensor `[num_blocks * block_size,
    /// num_kv_heads, head_dim]`, for the reference implementation.
    pub fn layer_tensor(&self, layer: usize, values: bool) -> Result<Tensor, PagedKvError> {
        self.check_layer(layer)?;
        fn widened<E: KvElement>(layers: &Layers<E>, layer: usize, values: bool) -> Vec<f32> {
            let data = if values {
                &layers.values[layer]
            } else {
                &layers.keys[layer]
            };
            let mut out = vec![0f32; data.len()];
            E::widen(&mut out, data);
            out
        }
        let data = match &self.blocks {
            Blocks::F32(b) => widened(b, layer, values),
            Blocks::F16(b) => widened(b, layer, values),
        };
        let l = self.layout;
        Ok(Tensor::from_vec(
            data,
            (l.num_blocks * l.block_size, l.num_kv_heads, l.head_dim),
            &Device::Cpu,
        )
        .expect("the cache was sized from the layout"))
    }
}
