// RMSNorm fused with the residual add that precedes it in a decoder layer:
//   sum = x + residual (rounded to T, as the unfused ops store it)
//   out = sum * rsqrt(mean(sum^2) + eps) * weight
// One block per row. Without a residual (the first layer's input norm) `residual` and `sum`
// are null and the norm reads `x`.
#include "common.cuh"

namespace quorum {

template <class T>
__device__ void add_rms_norm(const T *x, const T *residual, const T *weight, T *sum, T *out,
                             int hidden, float eps) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  x += row * hidden;
  out += row * hidden;
  if (residual) {
    residual += row * hidden;
    sum += row * hidden;
  }
  float squares = 0.0f;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = to_f32(x[i]);
    if (residual) {
      const T s = from_f32<T>(v + to_f32(residual[i]));
      sum[i] = s;
      v = to_f32(s);
    }
    squares += v * v;
  }
  const float inv_rms = rsqrtf(block_sum(squares, scratch) / float(hidden) + eps);
  // Each thread reads back only the elements it wrote itself.
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = to_f32(residual ? sum[i] : x[i]);
    out[i] = from_f32<T>(v * inv_rms * to_f32(weight[i]));
  }
}

}  // namespace quorum

#define QUORUM_ADD_RMS_NORM(NAME, T)                                                             \
  extern "C" __global__ void NAME(const T *x, const T *residual, const T *weight, T *sum, T *out, \
                                  int hidden, float eps) {                                       \
    quorum::add_rms_norm<T>(x, residual, weight, sum, out, hidden, eps);                        \
  }
QUORUM_ADD_RMS_NORM(add_rms_norm_f32, float)
QUORUM_ADD_RMS_NORM(add_rms_norm_bf16, __nv_bfloat16)
