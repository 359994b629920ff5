// Causal attention of a prefill chunk, flash-attention style: the chunk's queries attend over
// its whole context (a cached prefix, then the chunk itself) read in place from the paged
// cache through the context's slots, and the scores never leave the block. A block takes one
// query head and PREFILL_ROWS consecutive rows of the chunk, and walks the context a tile of
// keys at a time: the tile's scores, the causal mask worked out from each row's position, the
// running max and denominator of each row (the online softmax), and the output accumulated in
// shared memory, rescaled whenever a row's max grows. Tiles past the block's last visible key
// are never read, so the causal half of the work is skipped.
//
// In bf16 both products run on tensor cores through wmma (16x16x16 tiles, f32 accumulation);
// in f32 they are plain sums, kept for the f32 agreement checks. Row r of the chunk is at
// position start + r and sees keys 0..=start + r. Every sum runs in an order fixed by the
// shapes, so a row's result does not depend on other chunks.
#include "common.cuh"

#if defined(__CUDACC__)
#include <mma.h>
#endif

namespace quorum {

constexpr int PREFILL_THREADS = 128;
constexpr int PREFILL_ROWS = 32;
constexpr int PREFILL_MAX_HEAD_DIM = 128;
// Threads that share one row's scores in the softmax step: consecutive lanes of one warp.
constexpr int PREFILL_ROW_THREADS = PREFILL_THREADS / PREFILL_ROWS;
constexpr int WMMA_TILE = 16;

// Keys per tile: shared memory holds one tile's keys (then its values), so f32's tile is
// smaller to stay under the 48 KiB of static shared memory.
template <class T>
struct PrefillTile;
template <>
struct PrefillTile<float> {
  static constexpr int KEYS = 16;
};
template <>
struct PrefillTile<__nv_bfloat16> {
  static constexpr int KEYS = 32;
};

// scores[ROWS][KEYS] = queries[ROWS][head_dim] · keys[KEYS][head_dim]ᵀ, unscaled.
template <class T, int KEYS>
__device__ __forceinline__ void tile_scores(float *scores, const T *queries, const T *keys,
                                            int head_dim) {
  if constexpr (sizeof(T) == 2) {
    using namespace nvcuda;
    constexpr int COLUMN_TILES = KEYS / WMMA_TILE;
    const int warp = threadIdx.x / WARP_SIZE;
    for (int t = warp; t < (PREFILL_ROWS / WMMA_TILE) * COLUMN_TILES; t += PREFILL_THREADS / WARP_SIZE) {
      const int row0 = (t / COLUMN_TILES) * WMMA_TILE, key0 = (t % COLUMN_TILES) * WMMA_TILE;
      wmma::fragment<wmma::accumulator, WMMA_TILE, WMMA_TILE, WMMA_TILE, float> c;
      wmma::fill_fragment(c, 0.0f);
      for (int d = 0; d < head_dim; d += WMMA_TILE) {
        wmma::fragment<wmma::matrix_a, WMMA_TILE, WMMA_TILE, WMMA_TILE, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, WMMA_TILE, WMMA_TILE, WMMA_TILE, T, wmma::col_major> b;
        wmma::load_matrix_sync(a, queries + row0 * head_dim + d, head_dim);
        wmma::load_matrix_sync(b, keys + key0 * head_dim + d, head_dim);
        wmma::mma_sync(c, a, b, c);
      }
      wmma::store_matrix_sync(scores + row0 * KEYS + key0, c, KEYS, wmma::mem_row_major);
    }
  } else {
    for (int i = threadIdx.x; i < PREFILL_ROWS * KEYS; i += PREFILL_THREADS) {
      const T *q = queries + (i / KEYS) * head_dim, *k = keys + (i % KEYS) * head_dim;
      float dot = 0.0f;
      for (int d = 0; d < head_dim; ++d) dot += to_f32(q[d]) * to_f32(k[d]);
      scores[i] = dot;
    }
  }
}

// out[ROWS][head_dim] = out · diag(alpha) + probs[ROWS][KEYS] · values[KEYS][head_dim].
template <class T, int KEYS>
__device__ __forceinline__ void tile_accumulate(float *out, const float *alpha, const float *probs,
                                                const T *probs_t, const T *values, int head_dim) {
  if constexpr (sizeof(T) == 2) {
    using namespace nvcuda;
    for (int i = threadIdx.x; i < PREFILL_ROWS * head_dim; i += PREFILL_THREADS) out[i] *= alpha[i / head_dim];
    __syncthreads();
    const int column_tiles = head_dim / WMMA_TILE;
    const int warp = threadIdx.x / WARP_SIZE;
    for (int t = warp; t < (PREFILL_ROWS / WMMA_TILE) * column_tiles; t += PREFILL_THREADS / WARP_SIZE) {
      const int row0 = (t / column_tiles) * WMMA_TILE, col0 = (t % column_tiles) * WMMA_TILE;
      wmma::fragment<wmma::accumulator, WMMA_TILE, WMMA_TILE, WMMA_TILE, float> c;
      wmma::load_matrix_sync(c, out + row0 * head_dim + col0, head_dim, wmma::mem_row_major);
      for (int k = 0; k < KEYS; k += WMMA_TILE) {
        wmma::fragment<wmma::matrix_a, WMMA_TILE, WMMA_TILE, WMMA_TILE, T, wmma::row_major> a;
        wmma::fragment<wmma::matrix_b, WMMA_TILE, WMMA_TILE, WMMA_TILE, T, wmma::row_major> b;
        wmma::load_matrix_sync(a, probs_t + row0 * KEYS + k, KEYS);
        wmma::load_matrix_sync(b, values + k * head_dim + col0, head_dim);
        wmma::mma_sync(c, a, b, c);
      }
      wmma::store_matrix_sync(out + row0 * head_dim + col0, c, head_dim, wmma::mem_row_major);
    }
  } else {
    for (int i = threadIdx.x; i < PREFILL_ROWS * head_dim; i += PREFILL_THREADS) {
      const int r = i / head_dim, c = i % head_dim;
      float acc = 0.0f;
      for (int k = 0; k < KEYS; ++k) acc += probs[r * KEYS + k] * to_f32(values[k * head_dim + c]);
      out[i] = out[i] * alpha[r] + acc;
    }
  }
}

// Copies `count` rows of one kv head from the cache into `tile` ([KEYS][head_dim]), zeros for
// the rows past the context (their scores are masked, and 0 · garbage could be NaN).
template <class T, int KEYS>
__device__ __forceinline__ void load_tile(T *tile, const T *cache, const uint32_t *context_slots,
                                          int first, int count, long width, int kv_head, int head_dim) {
  for (int i = threadIdx.x; i < KEYS * head_dim; i += PREFILL_THREADS) {
    const int j = i / head_dim, d = i % head_dim;
    tile[i] = j < count ? cache[long(context_slots[first + j]) * width + long(kv_head) * head_dim + d]
                        : from_f32<T>(0.0f);
  }
}

template <class T>
__device__ void prefill_attention(T *out, const T *q, const T *k_cache, const T *v_cache,
                                  const uint32_t *context_slots, int len, int start, int heads,
                                  int kv_heads, int head_dim, float scale) {
  constexpr int KEYS = PrefillTile<T>::KEYS;
  constexpr int KEYS_PER_THREAD = KEYS / PREFILL_ROW_THREADS;
  __shared__ __align__(32) T queries[PREFILL_ROWS * PREFILL_MAX_HEAD_DIM];
  __shared__ __align__(32) T keys_or_values[KEYS * PREFILL_MAX_HEAD_DIM];
  __shared__ __align__(32) float scores[PREFILL_ROWS * KEYS];
  // The probabilities in T for the tensor-core product (f32 reuses `scores` in place).
  __shared__ __align__(32) T probs_t[sizeof(T) == 2 ? PREFILL_ROWS * KEYS : 1];
  __shared__ __align__(32) float acc[PREFILL_ROWS * PREFILL_MAX_HEAD_DIM];
  __shared__ float alpha[PREFILL_ROWS];
  __shared__ float denominator[PREFILL_ROWS];

  const int head = blockIdx.x, row0 = blockIdx.y * PREFILL_ROWS;
  const int rows = min(PREFILL_ROWS, len - row0);
  const int kv_head = head / (heads / kv_heads);
  const long width = long(kv_heads) * head_dim;
  const long q_stride = long(heads) * head_dim;
  // Keys 0..end are visible to some row of the block; the context is start + len keys.
  const int end = start + row0 + rows;

  for (int i = threadIdx.x; i < PREFILL_ROWS * head_dim; i += PREFILL_THREADS) {
    const int r = i / head_dim, d = i % head_dim;
    queries[i] = r < rows ? q[(row0 + r) * q_stride + long(head) * head_dim + d] : from_f32<T>(0.0f);
    acc[i] = 0.0f;
  }

  // Thread t keeps the running max and denominator of row t / PREFILL_ROW_THREADS over its share
  // of each tile's keys; the row's threads agree on both after each tile's reductions.
  const int my_row = threadIdx.x / PREFILL_ROW_THREADS, my_part = threadIdx.x % PREFILL_ROW_THREADS;
  const int last_seen = my_row < rows ? start + row0 + my_row : -1;
  float running_max = -INFINITY, running_sum = 0.0f;

  for (int first = 0; first < end; first += KEYS) {
    const int count = min(KEYS, end - first);
    load_tile<T, KEYS>(keys_or_values, k_cache, context_slots, first, count, width, kv_head, head_dim);
    __syncthreads();
    tile_scores<T, KEYS>(scores, queries, keys_or_values, head_dim);
    __syncthreads();

    float s[KEYS_PER_THREAD];
    float tile_max = -INFINITY;
    for (int j = 0; j < KEYS_PER_THREAD; ++j) {
      const int k = my_part * KEYS_PER_THREAD + j;
      s[j] = first + k <= last_seen ? scores[my_row * KEYS + k] * scale : -INFINITY;
      tile_max = fmaxf(tile_max, s[j]);
    }
    for (int offset = 1; offset < PREFILL_ROW_THREADS; offset *= 2)
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
    const float new_max = fmaxf(running_max, tile_max);
    // A row that has seen no key yet (or never will) keeps an all-zero output.
    const float rescale = new_max == -INFINITY ? 1.0f : __expf(running_max - new_max);
    float tile_sum = 0.0f;
    for (int j = 0; j < KEYS_PER_THREAD; ++j) {
      const int k = my_part * KEYS_PER_THREAD + j;
      const float p = s[j] == -INFINITY ? 0.0f : __expf(s[j] - new_max);
      tile_sum += p;
      if constexpr (sizeof(T) == 2) {
        probs_t[my_row * KEYS + k] = from_f32<T>(p);
      } else {
        scores[my_row * KEYS + k] = p;
      }
    }
    for (int offset = 1; offset < PREFILL_ROW_THREADS; offset *= 2)
      tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, offset);
    running_sum = running_sum * rescale + tile_sum;
    running_max = new_max;
    if (my_part == 0) alpha[my_row] = rescale;
    __syncthreads();

    load_tile<T, KEYS>(keys_or_values, v_cache, context_slots, first, count, width, kv_head, head_dim);
    __syncthreads();
    tile_accumulate<T, KEYS>(acc, alpha, scores, probs_t, keys_or_values, head_dim);
    __syncthreads();
  }

  if (my_part == 0) denominator[my_row] = running_sum;
  __syncthreads();
  for (int i = threadIdx.x; i < rows * head_dim; i += PREFILL_THREADS) {
    const int r = i / head_dim, d = i % head_dim;
    out[(row0 + r) * q_stride + long(head) * head_dim + d] = from_f32<T>(acc[i] / denominator[r]);
  }
}

}  // namespace quorum

#define QUORUM_PREFILL_ATTENTION(NAME, T)                                                      \
  extern "C" __global__ void __launch_bounds__(quorum::PREFILL_THREADS)                        \
      NAME(T *out, const T *q, const T *k_cache, const T *v_cache, const uint32_t *context_slots, \
           int len, int start, int heads, int kv_heads, int head_dim, float scale) {            \
    quorum::prefill_attention<T>(out, q, k_cache, v_cache, context_slots, len, start, heads,     \
                                 kv_heads, head_dim, scale);                                    \
  }
QUORUM_PREFILL_ATTENTION(prefill_attention_f32, float)
QUORUM_PREFILL_ATTENTION(prefill_attention_bf16, __nv_bfloat16)
