//! Paged KV cache memory on the model's device, for models off the CPU.
//!
//! The CPU keeps its blocks in host vectors ([`quorum_kernels::PagedKvStore`]) that its
//! attention kernel reads directly. A GPU must not: copying each layer's keys and values to the
//! host and every sequence's context back costs more than the layer itself. Here each layer's
//! keys (and values) are one device tensor `[slots, num_kv_heads * head_dim]` in the model's
//! dtype, a slot being `block * block_size + offset` as on the CPU. New rows are written in
//! place (`scatter_set`) and contexts are read with `index_select`, both on the device.

use candle_core::{DType, Device, Result, Tensor};
use quorum_kernels::KvLayout;

#[derive(Debug)]
pub struct DeviceKvStore {
    layout: KvLayout,
    keys: Vec<Tensor>,
    values: Vec<Tensor>,
}

impl DeviceKvStore {
    pub fn new(layout: KvLayout, device: &Device, dtype: DType) -> Result<Self> {
        let shape = (layout.num_blocks * layout.block_size, layout.token_width());
        let zeros = || -> Result<Vec<Tensor>> {
            (0..layout.num_layers)
                .map(|_| Tensor::zeros(shape, dtype, device))
                .collect()
        };
        Ok(Self {
            layout,
            keys: zeros()?,
            values: zeros()?,
        })
    }

    pub fn layout(&self) -> KvLayout {
        self.layout
    }

    /// One layer's key and value caches, `[slots, num_kv_heads * head_dim]` each.
    pub(crate) fn layer(&self, layer: usize) -> Result<(&Tensor, &Tensor)> {
        match (self.keys.get(layer), self.values.get(layer)) {
            (Some(k), Some(v)) => Ok((k, v)),
            _ => candle_core::bail!(
                "layer {layer} is outside the KV cache ({} layers)",
                self.layout.num_layers
            ),
        }
    }

    /// Writes token rows `[n, token_width]` into the slots named by `index`, the `[n,
    /// token_width]` u32 tensor [`slot_index`] makes (one slot per row, repeated across it).
    pub fn write(
        &self,
        layer: usize,
        index: &Tensor,
        keys: &Tensor,
        values: &Tensor,
    ) -> Result<()> {
        let (kc, vc) = self.layer(layer)?;
        kc.scatter_set(index, &keys.to_dtype(kc.dtype())?.contiguous()?, 0)?;
        vc.scatter_set(index, &values.to_dtype(vc.dtype())?.contiguous()?, 0)
    }

    /// The rows of `slots` (a u32 tensor `[m]`) of one layer: keys and values `[m,
    /// token_width]`.
    pub fn gather(&self, layer: usize, slots: &Tensor) -> Result<(Tensor, Tensor)> {
        let (kc, vc) = self.layer(layer)?;
        Ok((kc.index_select(slots, 0)?, vc.index_select(slots, 0)?))
    }

    /// Copies the first `num_tokens` slots of block `src` into block `dst`, in every layer.
    pub fn copy_block(&self, src: usize, dst: usize, num_tokens: usize) -> Result<()> {
        let l = self.layout;
        if src >= l.num_blocks || dst >= l.num_blocks {
            candle_core::bail!(
                "block copy {src} -> {dst} is outside the cache ({} blocks)",
                l.num_blocks
            );
        }
        let n = num_tokens.min(l.block_size);
        if n == 0 {
            return Ok(());
        }
        for cache in self.keys.iter().chain(&self.values) {
            // `slice_set` refuses a source sharing the destination's storage: copy it out first.
            let rows = cache.narrow(0, src * l.block_size, n)?.copy()?;
            cache.slice_set(&rows, 0, dst * l.block_size)?;
        }
        Ok(())
    }
}

/// The `[slots.len(), width]` u32 index [`DeviceKvStore::write`] takes, on `device`.
pub fn slot_index(slots: &[usize], width: usize, device: &Device) -> Result<Tensor> {
    let index: Vec<u32> = slots
        .iter()
        .flat_map(|&s| std::iter::repeat_n(s as u32, width))
        .collect();
    Tensor::from_vec(index, (slots.len(), width), device)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAYOUT: KvLayout = KvLayout {
        num_layers: 2,
        num_blocks: 3,
        block_size: 4,
        num_kv_heads: 2,
        head_dim: 3,
    };

    fn rows(n: usize, base: f32) -> Tensor {
        let w = LAYOUT.token_width();
        let data: Vec<f32> = (0..n * w).map(|i| base + i as f32).collect();
        Tensor::from_vec(data, (n, w), &Device::Cpu).unwrap()
    }

    #[test]
    fn rows_written_to_slots_read_back_and_copied_between_blocks() {
        let dev = Device::Cpu;
        let store = DeviceKvStore::new(LAYOUT, &dev, DType::F32).unwrap();
        let slots = [5usize, 6, 0];
        let index = slot_index(&slots, LAYOUT.token_width(), &dev).unwrap();
        store
            .write(1, &index, &rows(3, 0.0), &rows(3, 100.0))
            .unwrap();
        let read = Tensor::new(&[5u32, 6, 0], &dev).unwrap();
        let (k, v) = store.gather(1, &read).unwrap();
        assert_eq!(
            k.to_vec2::<f32>().unwrap(),
            rows(3, 0.0).to_vec2::<f32>().unwrap()
        );
        assert_eq!(
            v.to_vec2::<f32>().unwrap(),
            rows(3, 100.0).to_vec2::<f32>().unwrap()
        );
        // Layer 0 untouched.
        let (k0, _) = store.gather(0, &read).unwrap();
        assert_eq!(k0.sum_all().unwrap().to_scalar::<f32>().unwrap(), 0.0);
        // Block 1 holds slots 4..8: copy its first three slots (4, 5, 6) into block 2.
        store.copy_block(1, 2, 3).unwrap();
        let (k, _) = store
            .gather(1, &Tensor::new(&[9u32, 10], &dev).unwrap())
            .unwrap();
        assert_eq!(
            k.to_vec2::<f32>().unwrap(),
            rows(2, 0.0).to_vec2::<f32>().unwrap()
        );
        assert!(store.copy_block(1, 3, 1).is_err());
        assert!(store.gather(2, &read).is_err());
    }
}
