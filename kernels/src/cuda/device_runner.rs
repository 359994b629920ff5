//! [`KernelRunner`] on a CUDA device: each check's inputs uploaded in the check's dtype, the
//! kernels of [`super::device`] launched, the results read back as f32.

use candle_core::{DType, Device, Result, Tensor};

use super::cases::{
    ArgmaxCase, AttentionCase, LoraCase, MatmulCase, NormCase, PrefillCase, RotaryCase,
    RotaryOutput, SampleCase, SoftmaxCase,
};
use super::device::{
    self, KvWrite, LoraStack, LoraTarget, PagedAttention, PrefillChunk, RotaryTables,
};
use super::runner::KernelRunner;

pub struct DeviceRunner {
    device: Device,
}

impl DeviceRunner {
    /// Fails on a device that is not a CUDA one.
    pub fn new(device: Device) -> Result<Self> {
        if !device.is_cuda() {
            candle_core::bail!("the kernel checks need a CUDA device, not {device:?}");
        }
        Ok(Self { device })
    }

    fn upload(&self, values: &[f32], shape: &[usize], dtype: DType) -> Result<Tensor> {
        Tensor::from_slice(values, shape, &self.device)?.to_dtype(dtype)
    }

    fn u32s(&self, values: &[u32]) -> Result<Tensor> {
        Tensor::from_slice(values, values.len(), &self.device)
    }
}

fn host(t: &Tensor) -> Result<Vec<f32>> {
    t.to_dtype(DType::F32)?.flatten_all()?.to_vec1()
}

impl KernelRunner for DeviceRunner {
    fn name(&self) -> String {
        format!("{:?}", self.device.location())
    }

    fn add_rms_norm(&self, case: &NormCase, dtype: DType) -> Result<(Option<Vec<f32>>, Vec<f32>)> {
        let shape = [case.rows(), case.hidden];
        let x = self.upload(&case.x, &shape, dtype)?;
        let residual = case
            .residual
            .as_ref()
            .map(|r| self.upload(r, &shape, dtype))
            .transpose()?;
        let weight = self.upload(&case.weight, &[case.hidden], dtype)?;
        let (sum, out) = device::add_rms_norm(&x, residual.as_ref(), &weight, case.eps)?;
        Ok((sum.as_ref().map(host).transpose()?, host(&out)?))
    }

    fn silu_mul(&self, gate: &[f32], up: &[f32], dtype: DType) -> Result<Vec<f32>> {
        let g = self.upload(gate, &[gate.len()], dtype)?;
        let u = self.upload(up, &[up.len()], dtype)?;
        host(&device::silu_mul(&g, &u)?)
    }

    fn rotary_kv_write(&self, case: &RotaryCase, dtype: DType) -> Result<RotaryOutput> {
        let (tokens, hd) = (case.positions.len(), case.head_dim);
        let width = case.kv_heads * hd;
        let q = self.upload(&case.q, &[tokens, case.heads, hd], dtype)?;
        let k = self.upload(&case.k, &[tokens, case.kv_heads, hd], dtype)?;
        let v = self.upload(&case.v, &[tokens, case.kv_heads, hd], dtype)?;
        let half = hd / 2;
        let cos = Tensor::from_slice(&case.cos, (case.cos.len() / half, half), &self.device)?;
        let sin = Tensor::from_slice(&case.sin, (case.sin.len() / half, half), &self.device)?;
        let slots_n = case.k_cache.len() / width;
        let k_cache = self.upload(&case.k_cache, &[slots_n, width], dtype)?;
        let v_cache = self.upload(&case.v_cache, &[slots_n, width], dtype)?;
        let positions = self.u32s(&case.positions)?;
        let slots = self.u32s(&case.slots)?;
        let cache = KvWrite {
            k_cache: &k_cache,
            v_cache: &v_cache,
            slots: &slots,
        };
        let rotary = RotaryTables {
            cos: &cos,
            sin: &sin,
            interleaved: case.interleaved,
        };
        let q = device::rotary_kv_write(&q, &k, &v, &positions, rotary, cache)?;
        Ok(RotaryOutput {
            q: host(&q)?,
            k_cache: host(&k_cache)?,
            v_cache: host(&v_cache)?,
        })
    }

    fn paged_attention(&self, case: &AttentionCase, dtype: DType) -> Result<Vec<f32>> {
        let rows = case.seq_of_row.len();
        let width = case.kv_heads * case.head_dim;
        let slots_n = case.k_cache.len() / width;
        let q = self.upload(&case.q, &[rows, case.heads, case.head_dim], dtype)?;
        let k_cache = self.upload(&case.k_cache, &[slots_n, width], dtype)?;
        let v_cache = self.upload(&case.v_cache, &[slots_n, width], dtype)?;
        let (tables, max_blocks) = case.flat_tables();
        let block_tables =
            Tensor::from_slice(&tables, (case.block_tables.len(), max_blocks), &self.device)?;
        let seq_of_row = self.u32s(&case.seq_of_row)?;
        let context_lens = self.u32s(&case.context_lens)?;
        let out = device::paged_attention(PagedAttention {
            q: &q,
            k_cache: &k_cache,
            v_cache: &v_cache,
            kv_heads: case.kv_heads,
            block_tables: &block_tables,
            seq_of_row: &seq_of_row,
            context_lens: &context_lens,
            max_context: case.max_context(),
            block_size: case.block_size,
            scale: case.scale,
        })?;
        host(&out)
    }

    fn prefill_attention(&self, case: &PrefillCase, dtype: DType) -> Result<Vec<f32>> {
        let a = &case.attention;
        let width = a.kv_heads * a.head_dim;
        let slots_n = a.k_cache.len() / width;
        let q = self.upload(&a.q, &[case.rows(), a.heads, a.head_dim], dtype)?;
        let k_cache = self.upload(&a.k_cache, &[slots_n, width], dtype)?;
        let v_cache = self.upload(&a.v_cache, &[slots_n, width], dtype)?;
        let context_slots = self.u32s(&case.context_slots())?;
        let out = device::prefill_attention(PrefillChunk {
            q: &q,
            k_cache: &k_cache,
            v_cache: &v_cache,
            kv_heads: a.kv_heads,
            context_slots: &context_slots,
            start: case.start,
            scale: a.scale,
        })?;
        host(&out)
    }

    fn lora(&self, group: &[LoraCase], dtype: DType) -> Result<Vec<Vec<f32>>> {
        let Some(first) = group.first() else {
            candle_core::bail!("a lora group of no projections");
        };
        let rows = first.adapter_of_row.len();
        let x = self.upload(&first.x, &[rows, first.fan_in], dtype)?;
        let ids = Tensor::from_slice(&first.adapter_of_row, rows, &self.device)?;
        let mut tensors = Vec::with_capacity(group.len());
        for c in group {
            let adapters = c.scales.len();
            tensors.push((
                self.upload(&c.y, &[rows, c.fan_out], dtype)?,
                self.upload(&c.a, &[adapters, c.rank, c.fan_in], dtype)?,
                self.upload(&c.b_t, &[adapters, c.rank, c.fan_out], dtype)?,
                Tensor::from_slice(&c.scales, adapters, &self.device)?,
            ));
        }
        let targets: Vec<LoraTarget<'_>> = tensors
            .iter()
            .map(|(y, a, b_t, scales)| LoraTarget {
                y,
                stack: LoraStack { a, b_t, scales },
            })
            .collect();
        device::lora_bgmv(&x, &targets, &ids)?;
        tensors.iter().map(|(y, ..)| host(y)).collect()
    }

    fn causal_softmax(&self, case: &SoftmaxCase, dtype: DType) -> Result<Vec<f32>> {
        let rows = case.scores.len() / case.context;
        let scores = self.upload(&case.scores, &[rows, case.context], dtype)?;
        device::causal_softmax(&scores, case.len, case.start)?;
        host(&scores)
    }

    fn fixed_order_matmul(&self, case: &MatmulCase, dtype: DType) -> Result<Vec<f32>> {
        let x = self.upload(&case.x, &[case.rows, case.fan_in], dtype)?;
        let w = self.upload(&case.w, &[case.fan_out, case.fan_in], dtype)?;
        host(&device::fixed_order_matmul(&x, &w)?)
    }

    fn skinny_matmul(&self, group: &[MatmulCase], dtype: DType) -> Result<Vec<Vec<f32>>> {
        let Some(first) = group.first() else {
            candle_core::bail!("a skinny_matmul group of no weights");
        };
        let x = self.upload(&first.x, &[first.rows, first.fan_in], dtype)?;
        let ws = group
            .iter()
            .map(|c| self.upload(&c.w, &[c.fan_out, c.fan_in], dtype))
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&Tensor> = ws.iter().collect();
        device::skinny_matmul(&x, &refs)?.iter().map(host).collect()
    }

    fn argmax(&self, case: &ArgmaxCase, dtype: DType) -> Result<Vec<u32>> {
        let rows = case.logits.len() / case.vocab;
        let logits = self.upload(&case.logits, &[rows, case.vocab], dtype)?;
        device::argmax_rows(&logits)?.to_vec1()
    }

    fn sample(&self, case: &SampleCase, dtype: DType) -> Result<Vec<u32>> {
        let logits = self.upload(&case.logits, &[case.rows(), case.vocab], dtype)?;
        device::sample_rows(&logits, &case.policies)?.to_vec1()
    }
}
