// Batched multi-LoRA (BGMV): the rows of one batch use different adapters, or none, and each
// projection's deltas take two launches whatever the mix:
//   shrink: t[row] = A[a] x[row]                       (A: [adapters, rank, in])
//   expand: y[row] += scale[a] * B[a] t[row]           (Bᵀ: [adapters, rank, out])
// where a = adapter_of_row[row] (negative: no adapter, the row is left alone). Adapters of
// smaller rank are zero-padded to the stack's rank. t stays in f32.
#include "common.cuh"

namespace quorum {

constexpr int SHRINK_THREADS = 256;
constexpr int EXPAND_THREADS = 256;

// One block per (row, rank): the whole block strides along `in` and sums over its threads. (One
// warp per rank walked the 18,944 inputs of a 7B down projection 592 steps deep, and with few
// blocks in flight that latency set the kernel's time.) A row without an adapter leaves its `t`
// unwritten; the expand never reads it.
template <class T>
__device__ void lora_shrink(float *t, const T *x, const T *a, const int *adapter_of_row, int in,
                            int rank) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const int r = blockIdx.y;
  const int adapter = adapter_of_row[row];
  // The same for every thread of the block, so no barrier below is left half-reached.
  if (adapter < 0 || r >= rank) return;
  const T *a_row = a + (long(adapter) * rank + r) * in;
  const T *x_row = x + row * in;
  float dot = 0.0f;
  for (int i = threadIdx.x; i < in; i += blockDim.x) dot += to_f32(a_row[i]) * to_f32(x_row[i]);
  dot = block_sum(dot, scratch);
  if (threadIdx.x == 0) t[row * rank + r] = dot;
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
