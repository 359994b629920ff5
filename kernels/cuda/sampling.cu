// Greedy sampling on the device: each row's arg-max over the vocabulary, so only one token id
// per row crosses to the host. Ties go to the lowest id and NaN never wins, as on the host.
#include "common.cuh"

namespace quorum {

constexpr int ARGMAX_THREADS = 256;

template <class T>
__device__ void argmax_rows(uint32_t *ids, const T *logits, int vocab) {
  __shared__ float best[ARGMAX_THREADS];
  __shared__ int best_id[ARGMAX_THREADS];
  const T *row = logits + long(blockIdx.x) * vocab;
  float m = -INFINITY;
  int id = vocab;  // no candidate yet
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = to_f32(row[i]);
    if (v > m || (id == vocab && !(v != v))) {
      m = v;
      id = i;
    }
  }
  best[threadIdx.x] = m;
  best_id[threadIdx.x] = id;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) {
      const float other = best[threadIdx.x + stride];
      const int other_id = best_id[threadIdx.x + stride];
      if (other > best[threadIdx.x] || (other == best[threadIdx.x] && other_id < best_id[threadIdx.x]) ||
          (best_id[threadIdx.x] == vocab && other_id != vocab)) {
        best[threadIdx.x] = other;
        best_id[threadIdx.x] = other_id;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) ids[blockIdx.x] = best_id[0] == vocab ? 0u : uint32_t(best_id[0]);
}

}  // namespace quorum

#define QUORUM_ARGMAX(NAME, T)                                                    \
  extern "C" __global__ void NAME(uint32_t *ids, const T *logits, int vocab) { \
    quorum::argmax_rows<T>(ids, logits, vocab);                                  \
  }
QUORUM_ARGMAX(argmax_f32, float)
QUORUM_ARGMAX(argmax_bf16, __nv_bfloat16)
