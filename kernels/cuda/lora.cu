// Batched multi-LoRA (BGMV): the rows of one batch use different adapters, or none. Up to
// LORA_MAX_GROUP projections of one input (a layer's q, k and v; its gate and up) take their
// deltas in two launches together, whatever the mix:
//   shrink: t[g][row] = A_g[a] x[row]                       (A_g: [adapters, rank, in])
//   expand: y_g[row] += scale_g[a] * B_g[a] t[g][row]       (B_gᵀ: [adapters, rank, out_g])
// where a = adapter_of_row[row] (negative: no adapter, the row is left alone). Adapters of
// smaller rank are zero-padded to the stack's rank, and the projections of one launch share it.
// t stays in f32. A projection's arithmetic is the same alone or in a group: only which block
// does it changes.
#include "common.cuh"

namespace quorum {

constexpr int SHRINK_THREADS = 256;
constexpr int EXPAND_THREADS = 256;
constexpr int LORA_MAX_GROUP = 3;

// One block per (row, rank, projection): the whole block strides along `in` and sums over its
// threads. (One warp per rank walked the 18,944 inputs of a 7B down projection 592 steps deep,
// and with few blocks in flight that latency set the kernel's time.) A row without an adapter
// leaves its `t` unwritten; the expand never reads it.
template <class T>
__device__ void lora_shrink(float *t, const T *x, const T *a0, const T *a1, const T *a2,
                            const int *adapter_of_row, int in, int rank) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const long rows = gridDim.x;
  const int r = blockIdx.y;
  const int g = blockIdx.z;
  const int adapter = adapter_of_row[row];
  // The same for every thread of the block, so no barrier below is left half-reached.
  if (adapter < 0 || r >= rank) return;
  const T *a = g == 0 ? a0 : (g == 1 ? a1 : a2);
  const T *a_row = a + (long(adapter) * rank + r) * in;
  const T *x_row = x + row * in;
  float dot = 0.0f;
  for (int i = threadIdx.x; i < in; i += blockDim.x) dot += to_f32(a_row[i]) * to_f32(x_row[i]);
  dot = block_sum(dot, scratch);
  if (threadIdx.x == 0) t[(g * rows + row) * rank + r] = dot;
}

// One thread per output element; a block covers EXPAND_THREADS outputs of one row of one
// projection: the blocks of projection 0 come first along x, then those of 1, then of 2. A
// projection with no outputs has no blocks.
template <class T>
__device__ void lora_expand(T *y0, T *y1, T *y2, const float *t, const T *b0, const T *b1,
                            const T *b2, const float *s0, const float *s1, const float *s2,
                            const int *adapter_of_row, int out0, int out1, int out2, int rank) {
  const long row = blockIdx.y;
  const long rows = gridDim.y;
  const int adapter = adapter_of_row[row];
  const int blocks0 = (out0 + EXPAND_THREADS - 1) / EXPAND_THREADS;
  const int blocks1 = (out1 + EXPAND_THREADS - 1) / EXPAND_THREADS;
  int block = blockIdx.x;
  int g = 0;
  if (block >= blocks0) {
    block -= blocks0;
    g = block >= blocks1 ? 2 : 1;
    if (g == 2) block -= blocks1;
  }
  T *y = g == 0 ? y0 : (g == 1 ? y1 : y2);
  const T *b_t = g == 0 ? b0 : (g == 1 ? b1 : b2);
  const float *scales = g == 0 ? s0 : (g == 1 ? s1 : s2);
  const int out = g == 0 ? out0 : (g == 1 ? out1 : out2);
  const int o = block * EXPAND_THREADS + threadIdx.x;
  if (adapter < 0 || o >= out) return;
  const T *b = b_t + long(adapter) * rank * out;
  const float *t_row = t + (g * rows + row) * rank;
  float delta = 0.0f;
  for (int k = 0; k < rank; ++k) delta += t_row[k] * to_f32(b[long(k) * out + o]);
  const long at = row * out + o;
  y[at] = from_f32<T>(to_f32(y[at]) + scales[adapter] * delta);
}

}  // namespace quorum

#define QUORUM_LORA(SHRINK, EXPAND, T)                                                      \
  extern "C" __global__ void SHRINK(float *t, const T *x, const T *a0, const T *a1,        \
                                    const T *a2, const int *adapter_of_row, int in,        \
                                    int rank) {                                            \
    quorum::lora_shrink<T>(t, x, a0, a1, a2, adapter_of_row, in, rank);                     \
  }                                                                                         \
  extern "C" __global__ void EXPAND(T *y0, T *y1, T *y2, const float *t, const T *b0,      \
                                    const T *b1, const T *b2, const float *s0,             \
                                    const float *s1, const float *s2,                      \
                                    const int *adapter_of_row, int out0, int out1, int out2, \
                                    int rank) {                                            \
    quorum::lora_expand<T>(y0, y1, y2, t, b0, b1, b2, s0, s1, s2, adapter_of_row, out0, out1, \
                           out2, rank);                                                    \
  }
QUORUM_LORA(lora_shrink_f32, lora_expand_f32, float)
QUORUM_LORA(lora_shrink_bf16, lora_expand_bf16, __nv_bfloat16)
