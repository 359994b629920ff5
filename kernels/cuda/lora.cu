// Batched multi-LoRA (BGMV): the rows of one batch use different adapters, or none, and each
// projection's deltas take two launches whatever the mix:
//   shrink: t[row] = A[a] x[row]                       (A: [adapters, rank, in])
//   expand: y[row] += scale[a] * B[a] t[row]           (Bᵀ: [adapters, rank, out])
// where a = adapter_of_row[row] (negative: no adapter, the row is left alone). Adapters of
// smaller rank are zero-padded to the stack's rank. t stays in f32.
#include "common.cuh"

namespace quorum {

constexpr int SHRINK_THREADS = 128;
constexpr int SHRINK_WARPS = SHRINK_THREADS / WARP_SIZE;
constexpr int EXPAND_THREADS = 256;

// One block per (row, group of SHRINK_WARPS ranks); one warp per rank, its lanes along `in`.
template <class T>
__device__ void lora_shrink(float *t, const T *x, const T *a, const int *adapter_of_row, int in,
                            int rank) {
  const long row = blockIdx.x;
  const int adapter = adapter_of_row[row];
  const int r = blockIdx.y * SHRINK_WARPS + threadIdx.x / WARP_SIZE;
  const int lane = threadIdx.x % WARP_SIZE;
  if (adapter < 0 || r >= rank) return;
  const T *a_row = a + (long(adapter) * rank + r) * in;
  const T *x_row = x + row * in;
  float dot = 0.0f;
  for (int i = lane; i < in; i += WARP_SIZE) dot += to_f32(a_row[i]) * to_f32(x_row[i]);
  dot = warp_sum(dot);
  if (lane == 0) t[row * rank + r] = dot;
}

// One thread per output element; a block covers EXPAND_THREADS outputs of one row.
template <class T>
__device__ void lora_expand(T *y, const float *t, const T *b_t, const float *scales,
                            const int *adapter_of_row, int out, int rank) {
  const long row = blockIdx.y;
  const int adapter = adapter_of_row[row];
  const int o = blockIdx.x * EXPAND_THREADS + threadIdx.x;
  if (adapter < 0 || o >= out) return;
  const T *b = b_t + long(adapter) * rank * out;
  float delta = 0.0f;
  for (int k = 0; k < rank; ++k) delta += t[row * rank + k] * to_f32(b[long(k) * out + o]);
  const long at = row * out + o;
  y[at] = from_f32<T>(to_f32(y[at]) + scales[adapter] * delta);
}

}  // namespace quorum

#define QUORUM_LORA(SHRINK, EXPAND, T)                                                      \
  extern "C" __global__ void SHRINK(float *t, const T *x, const T *a, const int *adapter_of_row, \
                                    int in, int rank) {                                      \
    quorum::lora_shrink<T>(t, x, a, adapter_of_row, in, rank);                              \
  }                                                                                         \
  extern "C" __global__ void EXPAND(T *y, const float *t, const T *b_t, const float *scales,   \
                                    const int *adapter_of_row, int out, int rank) {          \
    quorum::lora_expand<T>(y, t, b_t, scales, adapter_of_row, out, rank);                   \
  }
QUORUM_LORA(lora_shrink_f32, lora_expand_f32, float)
QUORUM_LORA(lora_shrink_bf16, lora_expand_bf16, __nv_bfloat16)
