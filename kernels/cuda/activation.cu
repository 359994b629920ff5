// The gated MLP's activation: out = silu(gate) * up, elementwise over equal contiguous shapes,
// computed in f32 and rounded once (the unfused ops round silu(gate) first).
#include "common.cuh"

namespace quorum {

template <class T>
__device__ void silu_mul(const T *gate, const T *up, T *out, long n) {
  const long stride = long(blockDim.x) * gridDim.x;
  for (long i = long(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const float g = to_f32(gate[i]);
    out[i] = from_f32<T>(g / (1.0f + expf(-g)) * to_f32(up[i]));
  }
}

}  // namespace quorum

#define QUORUM_SILU_MUL(NAME, T)                                               \
  extern "C" __global__ void NAME(const T *gate, const T *up, T *out, long n) { \
    quorum::silu_mul<T>(gate, up, out, n);                                     \
  }
QUORUM_SILU_MUL(silu_mul_f32, float)
QUORUM_SILU_MUL(silu_mul_bf16, __nv_bfloat16)
