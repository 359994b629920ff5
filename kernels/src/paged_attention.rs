//! Attention of a whole packed batch read straight out of the paged KV cache.
//!
//! Each query row follows its sequence's block table to find the keys and values of every
//! position it sees, and runs the same per-row arithmetic as [`crate::causal_attention_rows`]
//! (`attend_row`), so the output is bit-identical to gathering the context first. Gathering
//! cost one copy of every sequence's context per layer and step, and one parallel dispatch per
//! sequence; here one dispatch covers every (row, head) of the batch.

use rayon::prelude::*;

use crate::attention::{RowKernel, Tile, TileQuery};
use crate::kv_element::KvElement;
use crate::paged_kv::{Blocks, KvLayout, PagedKvError, PagedKvStore};

/// One chunk of the packed batch: `len` query rows from row `offset`, at positions
/// `start..start + len` of the sequence whose blocks are `block_table`.
#[derive(Debug, Clone, Copy)]
pub struct PagedChunk<'a> {
    pub offset: usize,
    pub len: usize,
    pub start: usize,
    pub block_table: &'a [usize],
}

impl PagedKvStore {
    /// Causal attention of `tokens` query rows `q` (`[tokens, num_heads * head_dim]`,
    /// token-major, rotary applied; their own keys/values already written) over their
    /// sequences' cached context. Returns `[tokens, num_heads * head_dim]`. Every row must
    /// belong to exactly one chunk.
    pub fn attend(
        &self,
        layer: usize,
        q: &[f32],
        num_heads: usize,
        tokens: usize,
        chunks: &[PagedChunk<'_>],
    ) -> Result<Vec<f32>, PagedKvError> {
        let l = self.layout();
        let d = l.head_dim;
        if q.len() != num_heads * tokens * d {
            return Err(PagedKvError::WrongLength {
                expected: num_heads * tokens * d,
                actual: q.len(),
            });
        }
        if num_heads == 0 || !num_heads.is_multiple_of(l.num_kv_heads) {
            return Err(PagedKvError::HeadsNotGrouped {
                num_heads,
                num_kv_heads: l.num_kv_heads,
            });
        }
        let mut owner = vec![usize::MAX; tokens];
        for (c, chunk) in chunks.iter().enumerate() {
            self.check_table(chunk.block_table, chunk.start + chunk.len)?;
            let rows = owner
                .get_mut(chunk.offset..chunk.offset + chunk.len)
                .ok_or(PagedKvError::RowOutsideBatch {
                    row: chunk.offset + chunk.len,
                    tokens,
                })?;
            for o in rows {
                if *o != usize::MAX {
                    return Err(PagedKvError::RowNotInOneChunk { row: chunk.offset });
                }
                *o = c;
            }
        }
        if let Some(row) = owner.iter().position(|&o| o == usize::MAX) {
            return Err(PagedKvError::RowNotInOneChunk { row });
        }
        Ok(match self.blocks_of(layer)? {
            Blocks::F32(b) => attend_blocks(
                l,
                &b.keys[layer],
                &b.values[layer],
                q,
                num_heads,
                tokens,
                chunks,
            ),
            Blocks::F16(b) => attend_blocks(
                l,
                &b.keys[layer],
                &b.values[layer],
                q,
                num_heads,
                tokens,
                chunks,
            ),
        })
    }
}

/// [`PagedKvStore::attend`] over one layer's checked `keys` and `values`.
fn attend_blocks<E: KvElement>(
    l: KvLayout,
    keys: &[E],
    values: &[E],
    q: &[f32],
    num_heads: usize,
    tokens: usize,
    chunks: &[PagedChunk<'_>],
) -> Vec<f32> {
    let d = l.head_dim;
    let (w, bs) = (l.token_width(), l.block_size);
    let group = num_heads / l.num_kv_heads;
    let scale = 1.0 / (d as f32).sqrt();
    let simd = RowKernel::detect();
    // One task per (chunk, kv head, block of rows): each reads its keys and values once for
    // all the query heads of the kv head and all the rows of the block.
    let tiles: Vec<Tile> = chunks
        .iter()
        .enumerate()
        .flat_map(|(c, chunk)| {
            (0..l.num_kv_heads)
                .flat_map(move |kv| Tile::split(kv, c, chunk.len, chunk.start + chunk.len, group))
        })
        .collect();
    let results: Vec<Vec<f32>> = tiles
        .par_iter()
        .map_init(Vec::new, |scores, tile| {
            let chunk = &chunks[tile.chunk];
            let head = tile.kv_head * d;
            // Position j's vector of this tile's kv head, wherever its block is.
            let at = |j: usize| -> std::ops::Range<usize> {
                let slot = chunk.block_table[j / bs] * bs + j % bs;
                slot * w + head..slot * w + head + d
            };
            let queries: Vec<TileQuery<'_>> = tile
                .queries(group)
                .map(|(i, h)| {
                    let t = chunk.offset + i;
                    TileQuery {
                        q: &q[(t * num_heads + h) * d..(t * num_heads + h + 1) * d],
                        visible: chunk.start + i + 1,
                    }
                })
                .collect();
            let mut dst = vec![0f32; queries.len() * d];
            simd.attend_tile(
                &queries,
                scale,
                |j| &keys[at(j)],
                |j| &values[at(j)],
                scores,
                &mut dst,
            );
            dst
        })
        .collect();
    let mut out = vec![0f32; tokens * num_heads * d];
    for (tile, dst) in tiles.iter().zip(&results) {
        tile.scatter(
            dst,
            group,
            num_heads,
            d,
            chunks[tile.chunk].offset,
            &mut out,
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::attention::tests::data;
    use crate::attention::{AttentionDims, Row, causal_attention_rows};
    use crate::paged_kv::KvLayout;

    const LAYOUT: KvLayout = KvLayout {
        num_layers: 2,
        num_blocks: 16,
        block_size: 4,
        num_kv_heads: 2,
        head_dim: 16,
    };
    const HEADS: usize = 6;

    /// A store whose layer 1 holds random keys/values in every slot.
    fn filled_store() -> PagedKvStore {
        let mut store = PagedKvStore::new(LAYOUT);
        let slots: Vec<usize> = (0..LAYOUT.num_blocks * LAYOUT.block_size).collect();
        let n = slots.len() * LAYOUT.token_width();
        store.write(1, &slots, &data(n, 11), &data(n, 12)).unwrap();
        store
    }

    /// Rows `offset..offset + len` of token-major `q` (`[tokens, heads * dim]`), head-major.
    fn q_rows(q: &[f32], offset: usize, len: usize) -> Vec<f32> {
        let d = LAYOUT.head_dim;
        (0..HEADS)
            .flat_map(|h| {
                (offset..offset + len)
                    .flat_map(move |t| q[(t * HEADS + h) * d..(t * HEADS + h + 1) * d].to_vec())
            })
            .collect()
    }

    #[test]
    fn batch_equals_gathering_each_sequence_bit_for_bit() {
        let store = filled_store();
        // A prefill chunk in the middle of a sequence, two decode rows, a fresh prefill; the
        // block tables are out of order, as after preemption and prefix sharing.
        let tables: [&[usize]; 4] = [&[7, 2, 9], &[3], &[15, 0, 11, 4], &[5, 6]];
        let chunks = [
            PagedChunk {
                offset: 0,
                len: 5,
                start: 4,
                block_table: tables[0],
            },
            PagedChunk {
                offset: 5,
                len: 1,
                start: 2,
                block_table: tables[1],
            },
            PagedChunk {
                offset: 6,
                len: 1,
                start: 13,
                block_table: tables[2],
            },
            PagedChunk {
                offset: 7,
                len: 6,
                start: 0,
                block_table: tables[3],
            },
        ];
        let tokens = 13;
        let q = data(HEADS * tokens * LAYOUT.head_dim, 13);
        let out = store.attend(1, &q, HEADS, tokens, &chunks).unwrap();
        let width = HEADS * LAYOUT.head_dim;
        for c in &chunks {
            let context = c.start + c.len;
            let (k, v) = store.gather(1, c.block_table, context).unwrap();
            let flat = |t: candle_core::Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            let dims = AttentionDims {
                num_heads: HEADS,
                num_kv_heads: LAYOUT.num_kv_heads,
                head_dim: LAYOUT.head_dim,
                len: c.len,
                context,
                start: c.start,
            };
            let want =
                causal_attention_rows(&q_rows(&q, c.offset, c.len), &flat(k), &flat(v), dims);
            assert_eq!(
                &out[c.offset * width..(c.offset + c.len) * width],
                &want[..],
                "chunk at row {}",
                c.offset
            );
        }
    }

    #[test]
    fn tiles_equal_one_row_at_a_time_bit_for_bit() {
        // The tiled kernel reads each key once for many queries; every output must still be
        // attend_row's, on both compilations and for both element types.
        // 64 and 128 dims as the models have; 20 and 76: tails past the eight-lane chunks and
        // past the weighted sum's groups of 64. Queries that see as many positions go in pairs
        // (the heads of one row), others alone, over several blocks of values.
        for d in [64, 128, 20, 76] {
            let (k, v) = (data(150 * d, 4), data(150 * d, 5));
            tiles_equal_rows(&k, &v, d);
            let half = |x: &[f32]| {
                x.iter()
                    .map(|&x| half::f16::from_f32(x))
                    .collect::<Vec<_>>()
            };
            tiles_equal_rows(&half(&k), &half(&v), d);
        }
    }

    fn tiles_equal_rows<E: KvElement>(k: &[E], v: &[E], d: usize) {
        let visible = [1, 150, 17, 17, 2, 40, 150, 150, 9, 30, 70, 70, 71];
        let qs: Vec<Vec<f32>> = (0..visible.len() as u32).map(|i| data(d, 20 + i)).collect();
        for kernel in [RowKernel::Baseline, RowKernel::detect()] {
            let queries: Vec<TileQuery<'_>> = qs
                .iter()
                .zip(visible)
                .map(|(q, visible)| TileQuery { q, visible })
                .collect();
            let mut tiled = vec![0f32; queries.len() * d];
            kernel.attend_tile(
                &queries,
                0.2,
                |j| &k[j * d..(j + 1) * d],
                |j| &v[j * d..(j + 1) * d],
                &mut Vec::new(),
                &mut tiled,
            );
            for (t, want_dst) in queries.iter().zip(tiled.chunks_exact(d)) {
                let mut dst = vec![0f32; d];
                kernel.attend(
                    Row {
                        q: t.q,
                        visible: t.visible,
                        scale: 0.2,
                    },
                    |j| &k[j * d..(j + 1) * d],
                    |j| &v[j * d..(j + 1) * d],
                    &mut Vec::new(),
                    &mut dst,
                );
                let bits = |x: &[f32]| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&dst),
                    bits(want_dst),
                    "{kernel:?} {:?} visible {}",
                    E::DTYPE,
                    t.visible
                );
            }
        }
    }

    #[test]
    fn f16_blocks_attend_as_f32_blocks_holding_the_rounded_values() {
        // Widening an f16 is exact, so the only difference f16 blocks make is the rounding
        // at the write: attention over them is attention over f32 blocks of the rounded
        // values, bit for bit, on this CPU's path. A block copy keeps the elements as they are.
        let slots: Vec<usize> = (0..LAYOUT.num_blocks * LAYOUT.block_size).collect();
        let n = slots.len() * LAYOUT.token_width();
        let (k, v) = (data(n, 11), data(n, 12));
        let rounded = |x: &[f32]| {
            x.iter()
                .map(|&x| half::f16::from_f32(x).to_f32())
                .collect::<Vec<_>>()
        };
        let mut halves = PagedKvStore::with_dtype(LAYOUT, candle_core::DType::F16).unwrap();
        let mut floats = PagedKvStore::new(LAYOUT);
        halves.write(1, &slots, &k, &v).unwrap();
        floats.write(1, &slots, &rounded(&k), &rounded(&v)).unwrap();
        assert_ne!(rounded(&k), k, "the data must not be exact in f16");
        for store in [&mut halves, &mut floats] {
            store.copy_block(3, 14, 3).unwrap();
        }
        assert_eq!(halves.dtype(), candle_core::DType::F16);
        let tables: [&[usize]; 3] = [&[7, 14, 9], &[3], &[15, 0, 11, 4]];
        let chunks = [
            PagedChunk {
                offset: 0,
                len: 5,
                start: 4,
                block_table: tables[0],
            },
            PagedChunk {
                offset: 5,
                len: 1,
                start: 2,
                block_table: tables[1],
            },
            PagedChunk {
                offset: 6,
                len: 1,
                start: 13,
                block_table: tables[2],
            },
        ];
        let q = data(HEADS * 7 * LAYOUT.head_dim, 13);
        let bits = |x: Vec<f32>| x.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(halves.attend(1, &q, HEADS, 7, &chunks).unwrap()),
            bits(floats.attend(1, &q, HEADS, 7, &chunks).unwrap())
        );
        let flat = |t: candle_core::Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for c in &chunks {
            let (hk, hv) = halves.gather(1, c.block_table, c.start + c.len).unwrap();
            let (fk, fv) = floats.gather(1, c.block_table, c.start + c.len).unwrap();
            assert_eq!(flat(hk), flat(fk));
            assert_eq!(flat(hv), flat(fv));
        }
        assert_eq!(
            flat(halves.layer_tensor(1, true).unwrap()),
            flat(floats.layer_tensor(1, true).unwrap())
        );
        assert_eq!(
            PagedKvStore::with_dtype(LAYOUT, candle_core::DType::BF16).err(),
            Some(PagedKvError::UnsupportedDtype {
                dtype: candle_core::DType::BF16
            })
        );
    }

    #[test]
    fn bad_batches_are_refused() {
        let store = filled_store();
        let q = data(HEADS * 3 * LAYOUT.head_dim, 1);
        let chunk = |offset, len, start, block_table| PagedChunk {
            offset,
            len,
            start,
            block_table,
        };
        // Row 2 belongs to no chunk.
        assert_eq!(
            store.attend(1, &q, HEADS, 3, &[chunk(0, 2, 0, &[1])]),
            Err(PagedKvError::RowNotInOneChunk { row: 2 })
        );
        // Two chunks claim row 1.
        assert_eq!(
            store.attend(
                1,
                &q,
                HEADS,
                3,
                &[chunk(0, 2, 0, &[1]), chunk(1, 2, 0, &[2])]
            ),
            Err(PagedKvError::RowNotInOneChunk { row: 1 })
        );
        // The table covers 4 positions, the chunk reaches position 6.
        assert!(matches!(
            store.attend(1, &q, HEADS, 3, &[chunk(0, 3, 3, &[1])]),
            Err(PagedKvError::TableTooShort { .. })
        ));
        assert!(matches!(
            store.attend(1, &q, 5, 3, &[chunk(0, 3, 0, &[1])]),
            Err(PagedKvError::WrongLength { .. })
        ));
        assert!(matches!(
            store.attend(2, &q, HEADS, 3, &[chunk(0, 3, 0, &[1])]),
            Err(PagedKvError::LayerOutOfRange { .. })
        ));
    }
}
