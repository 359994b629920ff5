//! The engine's [`Attention`] on the CPU: keys/values go into the paged block store at the
//! slots the scheduler assigned, then the whole batch attends straight from the blocks
//! ([`PagedKvStore::attend`]) with the same per-row arithmetic as the dense cache, so paged and
//! dense results agree. Off the CPU the engine uses [`crate::DevicePagedAttention`].

use candle_core::{Result, Tensor};
use quorum_kernels::{PagedChunk, PagedKvStore};
use quorum_models::{Attention, AttentionRows, BatchLayout};

/// Where one scheduled sequence's tokens go and what it attends to.
#[derive(Debug, Clone)]
pub struct SeqBlocks {
    /// Flat slot of each new token.
    pub slots: Vec<usize>,
    pub block_table: Vec<usize>,
}

/// Attention for one step. `seqs[i]` describes the chunk whose `seq_slot` is `i`.
pub struct PagedAttention<'a> {
    pub store: &'a mut PagedKvStore,
    pub seqs: &'a [SeqBlocks],
}

fn kernel_err(e: quorum_kernels::PagedKvError) -> candle_core::Error {
    candle_core::Error::Msg(e.to_string())
}

impl<'a> PagedAttention<'a> {
    fn seq_of(&self, c: &quorum_models::ChunkLayout) -> Result<&'a SeqBlocks> {
        let seqs: &'a [SeqBlocks] = self.seqs;
        seqs.get(c.seq_slot).ok_or_else(|| {
            candle_core::Error::Msg(format!("no block table for chunk slot {}", c.seq_slot))
        })
    }

    /// Writes token-major key/value rows (`[tokens, kv_heads * dim]`) into each chunk's slots.
    fn write_rows(
        &mut self,
        layer: usize,
        batch: &BatchLayout,
        k: &[f32],
        v: &[f32],
    ) -> Result<()> {
        let width = self.store.layout().token_width();
        for c in &batch.chunks {
            let range = c.offset * width..(c.offset + c.len) * width;
            let slots = &self.seq_of(c)?.slots;
            self.store
                .write(layer, slots, &k[range.clone()], &v[range])
                .map_err(kernel_err)?;
        }
        Ok(())
    }

    /// The whole batch in one pass over the blocks; `q` token-major.
    fn attend_blocks(
        &self,
        layer: usize,
        batch: &BatchLayout,
        q: &[f32],
        num_heads: usize,
    ) -> Result<Vec<f32>> {
        let chunks = batch
            .chunks
            .iter()
            .map(|c| {
                Ok(PagedChunk {
                    offset: c.offset,
                    len: c.len,
                    start: c.start_position,
                    block_table: &self.seq_of(c)?.block_table,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.store
            .attend(layer, q, num_heads, batch.n_tokens(), &chunks)
            .map_err(kernel_err)
    }
}

impl Attention for PagedAttention<'_> {
    fn attend(
        &mut self,
        layer: usize,
        batch: &BatchLayout,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
    ) -> Result<Tensor> {
        if !(q.device().is_cpu() && q.dtype() == candle_core::DType::F32) {
            // Off the CPU the engine keeps its blocks in a `DeviceKvStore` instead.
            candle_core::bail!("the host KV store serves f32 models on the CPU only");
        }
        // Token-major rows: [tokens, heads * dim].
        let rows = |t: &Tensor| -> Result<Vec<f32>> {
            t.transpose(0, 1)?
                .contiguous()?
                .flatten_all()?
                .to_vec1::<f32>()
        };
        let (k_rows, v_rows) = (rows(k)?, rows(v)?);
        self.write_rows(layer, batch, &k_rows, &v_rows)?;
        // The whole batch in one pass over the blocks.
        let (num_heads, tokens, head_dim) = q.dims3()?;
        let out = self.attend_blocks(layer, batch, &rows(q)?, num_heads)?;
        Tensor::from_vec(out, (tokens, num_heads * head_dim), q.device())
    }

    fn attend_rows(
        &mut self,
        layer: usize,
        batch: &BatchLayout,
        rows: AttentionRows<'_>,
    ) -> Result<Vec<f32>> {
        self.write_rows(layer, batch, rows.k, rows.v)?;
        self.attend_blocks(layer, batch, rows.q, rows.num_heads)
    }
}
