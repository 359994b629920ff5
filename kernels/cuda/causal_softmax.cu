// The softmax of a prefill chunk's attention scores, in place, with the causal mask worked out
// from each row's index instead of read from a mask tensor (and instead of a pass that adds
// one): row r is query i = r % len of the chunk, at position start + i, and sees keys
// 0..=start + i of its context; the keys after those get probability 0. One block per row;
// every sum runs in an order fixed by the shapes.
#include "common.cuh"

namespace quorum {

constexpr int SOFTMAX_THREADS = 256;

template <class T>
__device__ void causal_softmax(T *scores, int len, int context, int start) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const int seen = min(context, start + int(row % len) + 1);
  T *s = scores + row * context;
  float m = -INFINITY;
  for (int p = threadIdx.x; p < seen; p += blockDim.x) m = fmaxf(m, to_f32(s[p]));
  m = block_max(m, scratch);
  float total = 0.0f;
  for (int p = threadIdx.x; p < seen; p += blockDim.x) total += expf(to_f32(s[p]) - m);
  total = block_sum(total, scratch);
  const float inverse = 1.0f / total;
  for (int p = threadIdx.x; p < context; p += blockDim.x)
    s[p] = from_f32<T>(p < seen ? expf(to_f32(s[p]) - m) * inverse : 0.0f);
}

}  // namespace quorum

#define QUORUM_CAUSAL_SOFTMAX(NAME, T)                                                   \
  extern "C" __global__ void __launch_bounds__(quorum::SOFTMAX_THREADS)                  \
      NAME(T *scores, int len, int context, int start) {                                 \
    quorum::causal_softmax<T>(scores, len, context, start);                              \
  }
QUORUM_CAUSAL_SOFTMAX(causal_softmax_f32, float)
QUORUM_CAUSAL_SOFTMAX(causal_softmax_bf16, __nv_bfloat16)
