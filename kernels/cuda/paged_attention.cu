// Attention of query rows straight from the paged KV cache: no gather, no padding. Each row
// (a decode token, a draft token, a short prompt tail's token) names its sequence, whose block
// table maps positions to slots, and its context length (its own position + 1, so causality
// is per row). Grouped-query heads read their key/value head in place.
//
// Split-K (flash-decoding): a row's context is cut into partitions of PARTITION keys, one
// block per (head, row, partition). A row with one partition writes its output directly; with
// more, each block writes its unnormalized sum with its max and its softmax denominator, and
// `paged_attention_reduce` merges them. Every sum runs in a fixed order given by the shapes
// alone, so a row's result does not depend on the other rows of the batch.
#include "common.cuh"

namespace quorum {

constexpr int ATTENTION_THREADS = 128;
constexpr int ATTENTION_WARPS = ATTENTION_THREADS / WARP_SIZE;
constexpr int PARTITION = 512;
constexpr int MAX_HEAD_DIM = 256;
constexpr int DIMS_PER_LANE = MAX_HEAD_DIM / WARP_SIZE;

__device__ __forceinline__ int partitions(uint32_t context) {
  return int((context + PARTITION - 1) / PARTITION);
}

template <class T>
__device__ void paged_attention(T *out, float *part_out, float *part_max, float *part_sum,
                                const T *q, const T *k_cache, const T *v_cache,
                                const uint32_t *block_tables, const uint32_t *seq_of_row,
                                const uint32_t *context_lens, int heads, int kv_heads,
                                int head_dim, int block_size, int max_blocks, int max_parts,
                                float scale) {
  __shared__ float query[MAX_HEAD_DIM];
  __shared__ float scores[PARTITION];
  __shared__ long slots[PARTITION];
  __shared__ float scratch[32];
  __shared__ float partial[ATTENTION_WARPS][MAX_HEAD_DIM];
  const int head = blockIdx.x, part = blockIdx.z;
  const long row = blockIdx.y;
  const uint32_t context = context_lens[row];
  const int parts = partitions(context);
  if (part >= parts) return;
  const int start = part * PARTITION;
  const int n = min(PARTITION, int(context) - start);
  const int kv_head = head / (heads / kv_heads);
  const long width = long(kv_heads) * head_dim;
  const uint32_t *table = block_tables + long(seq_of_row[row]) * max_blocks;
  const long out_row = row * heads + head;
  const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;

  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) query[d] = to_f32(q[out_row * head_dim + d]) * scale;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int position = start + i;
    slots[i] = long(table[position / block_size]) * block_size + position % block_size;
  }
  __syncthreads();

  // One warp per key, its lanes across the head's dimensions.
  for (int i = warp; i < n; i += ATTENTION_WARPS) {
    const T *key = k_cache + slots[i] * width + long(kv_head) * head_dim;
    float dot = 0.0f;
    for (int d = lane; d < head_dim; d += WARP_SIZE) dot += query[d] * to_f32(key[d]);
    dot = warp_sum(dot);
    if (lane == 0) scores[i] = dot;
  }
  __syncthreads();

  float m = -INFINITY;
  for (int i = threadIdx.x; i < n; i += blockDim.x) m = fmaxf(m, scores[i]);
  m = block_max(m, scratch);
  float total = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const float e = expf(scores[i] - m);
    scores[i] = e;
    total += e;
  }
  // block_sum's barriers also order the writes to `scores` before the reads below.
  total = block_sum(total, scratch);

  float acc[DIMS_PER_LANE];
  for (int j = 0; j < DIMS_PER_LANE; ++j) acc[j] = 0.0f;
  for (int i = warp; i < n; i += ATTENTION_WARPS) {
    const float p = scores[i];
    const T *value = v_cache + slots[i] * width + long(kv_head) * head_dim;
    for (int j = 0; j < DIMS_PER_LANE; ++j) {
      const int d = lane + j * WARP_SIZE;
      if (d < head_dim) acc[j] += p * to_f32(value[d]);
    }
  }
  for (int j = 0; j < DIMS_PER_LANE; ++j) {
    const int d = lane + j * WARP_SIZE;
    if (d < head_dim) partial[warp][d] = acc[j];
  }
  __syncthreads();

  const long part_index = out_row * max_parts + part;
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float o = 0.0f;
    for (int w = 0; w < ATTENTION_WARPS; ++w) o += partial[w][d];
    if (parts == 1)
      out[out_row * head_dim + d] = from_f32<T>(o / total);
    else
      part_out[part_index * head_dim + d] = o;
  }
  if (parts > 1 && threadIdx.x == 0) {
    part_max[part_index] = m;
    part_sum[part_index] = total;
  }
}

// Merges the partitions of rows whose context spans more than one. One block per (head, row).
template <class T>
__device__ void paged_attention_reduce(T *out, const float *part_out, const float *part_max,
                                       const float *part_sum, const uint32_t *context_lens,
                                       int heads, int head_dim, int max_parts) {
  const long row = blockIdx.y;
  const int parts = partitions(context_lens[row]);
  if (parts <= 1) return;
  const long out_row = row * heads + blockIdx.x;
  const long base = out_row * max_parts;
  float m = -INFINITY;
  for (int p = 0; p < parts; ++p) m = fmaxf(m, part_max[base + p]);
  float denominator = 0.0f;
  for (int p = 0; p < parts; ++p) denominator += expf(part_max[base + p] - m) * part_sum[base + p];
  for (int d = threadIdx.x; d < head_dim; d += blockDim.x) {
    float numerator = 0.0f;
    for (int p = 0; p < parts; ++p)
      numerator += expf(part_max[base + p] - m) * part_out[(base + p) * head_dim + d];
    out[out_row * head_dim + d] = from_f32<T>(numerator / denominator);
  }
}

}  // namespace quorum

#define QUORUM_PAGED_ATTENTION(NAME, REDUCE, T)                                                    \
  extern "C" __global__ void __launch_bounds__(quorum::ATTENTION_THREADS)                          \
      NAME(T *out, float *part_out, float *part_max, float *part_sum, const T *q,                  \
           const T *k_cache, const T *v_cache, const uint32_t *block_tables,                       \
           const uint32_t *seq_of_row, const uint32_t *context_lens, int heads, int kv_heads,      \
           int head_dim, int block_size, int max_blocks, int max_parts, float scale) {             \
    quorum::paged_attention<T>(out, part_out, part_max, part_sum, q, k_cache, v_cache,             \
                               block_tables, seq_of_row, context_lens, heads, kv_heads, head_dim,  \
                               block_size, max_blocks, max_parts, scale);                          \
  }                                                                                                \
  extern "C" __global__ void REDUCE(T *out, const float *part_out, const float *part_max,          \
                                    const float *part_sum, const uint32_t *context_lens,           \
                                    int heads, int head_dim, int max_parts) {                      \
    quorum::paged_attention_reduce<T>(out, part_out, part_max, part_sum, context_lens, heads,      \
                                      head_dim, max_parts);                                        \
  }
QUORUM_PAGED_ATTENTION(paged_attention_f32, paged_attention_reduce_f32, float)
QUORUM_PAGED_ATTENTION(paged_attention_bf16, paged_attention_reduce_bf16, __nv_bfloat16)
