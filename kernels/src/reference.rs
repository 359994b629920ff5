//! Reference implementations in plain candle ops (device generic).

use candle_core::{Device, Result, Tensor};

/// Flat slot of each of a sequence's first `context` positions under its block table.
pub fn context_slots(block_table: &[usize], block_size: usize, context: usize) -> Vec<u32> {
    (0..context)
        .map(|p| (block_table[p / block_size] * block_size + p % block_size) as u32)
        .collect()
}

/// Gathers `[context, heads, dim]` rows out of a flat cache `[slots, heads, dim]` and returns
/// them head-major `[heads, context, dim]`, as [`crate::PagedKvStore::gather`] does.
pub fn gather(
    cache: &Tensor,
    block_table: &[usize],
    block_size: usize,
    context: usize,
) -> Result<Tensor> {
    let slots = context_slots(block_table, block_size, context);
    let idx = Tensor::from_vec(slots, context, &Device::Cpu)?.to_device(cache.device())?;
    cache.index_select(&idx, 0)?.transpose(0, 1)?.contiguous()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{KvLayout, PagedKvStore};

    fn filled(layout: KvLayout, slots: &[usize], seed: f32) -> (PagedKvStore, Vec<f32>, Vec<f32>) {
        let mut store = PagedKvStore::new(layout);
        let w = layout.token_width();
        let k: Vec<f32> = (0..slots.len() * w)
            .map(|i| seed + i as f32 * 0.5)
            .collect();
        let v: Vec<f32> = (0..slots.len() * w)
            .map(|i| seed - i as f32 * 0.25)
            .collect();
        for layer in 0..layout.num_layers {
            store.write(layer, slots, &k, &v).unwrap();
        }
        (store, k, v)
    }

    #[test]
    fn gather_matches_reference_on_odd_shapes() {
        // 3 kv heads of dim 5, blocks of 4 tokens, a 11-token context scattered over blocks.
        let layout = KvLayout {
            num_layers: 2,
            num_blocks: 9,
            block_size: 4,
            num_kv_heads: 3,
            head_dim: 5,
        };
        let table = [7usize, 2, 5];
        let context = 11;
        let slots: Vec<usize> = context_slots(&table, 4, context)
            .iter()
            .map(|&s| s as usize)
            .collect();
        let (store, _, _) = filled(layout, &slots, 1.0);
        for layer in 0..2 {
            let (k, v) = store.gather(layer, &table, context).unwrap();
            let k_ref = gather(
                &store.layer_tensor(layer, false).unwrap(),
                &table,
                4,
                context,
            )
            .unwrap();
            let v_ref = gather(
                &store.layer_tensor(layer, true).unwrap(),
                &table,
                4,
                context,
            )
            .unwrap();
            assert_eq!(k.to_vec3::<f32>().unwrap(), k_ref.to_vec3::<f32>().unwrap());
            assert_eq!(v.to_vec3::<f32>().unwrap(), v_ref.to_vec3::<f32>().unwrap());
            assert_eq!(k.dims(), &[3, 11, 5]);
        }
    }

    #[test]
    fn copy_block_copies_prefix_only() {
        let layout = KvLayout {
            num_layers: 1,
            num_blocks: 3,
            block_size: 4,
            num_kv_heads: 1,
            head_dim: 2,
        };
        let (mut store, _, _) = filled(layout, &[0, 1, 2, 3], 10.0);
        store.copy_block(0, 2, 3).unwrap();
        let (k, _) = store.gather(0, &[2], 4).unwrap();
        let k = k.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        assert_eq!(&k[..6], &[10.0, 10.5, 11.0, 11.5, 12.0, 12.5]);
        assert_eq!(&k[6..], &[0.0, 0.0], "the fourth slot was not copied");
    }

    #[test]
    fn bad_slots_and_tables_are_errors() {
        let layout = KvLayout {
            num_layers: 1,
            num_blocks: 2,
            block_size: 2,
            num_kv_heads: 1,
            head_dim: 1,
        };
        let mut store = PagedKvStore::new(layout);
        assert!(matches!(
            store.write(0, &[4], &[1.0], &[1.0]),
            Err(crate::PagedKvError::SlotOutOfRange { .. })
        ));
        assert!(matches!(
            store.write(1, &[0], &[1.0], &[1.0]),
            Err(crate::PagedKvError::LayerOutOfRange { .. })
        ));
        assert!(matches!(
            store.gather(0, &[0], 3),
            Err(crate::PagedKvError::TableTooShort { .. })
        ));
        assert!(matches!(
            store.gather(0, &[5], 1),
            Err(crate::PagedKvError::BlockOutOfRange { .. })
        ));
    }
}
