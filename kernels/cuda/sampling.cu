// Greedy sampling on the device: each row's arg-max over the vocabulary, so only one token id
// per row crosses to the host. As the host sampler does: only finite logits count, ties go to
// the lowest id, and a row with no finite logit gives NO_TOKEN.
#include "common.cuh"

namespace quorum {

constexpr int ARGMAX_THREADS = 256;
constexpr uint32_t NO_TOKEN = 0xffffffffu;

// Finite: not NaN and not an infinity (x - x is NaN for both).
__device__ __forceinline__ bool finite(float x) { return x - x == 0.0f; }

// Whether candidate (v, id) beats (best, best_id); id == vocab marks no candidate.
__device__ __forceinline__ bool beats(float v, int id, float best, int best_id, int vocab) {
  if (id == vocab) return false;
  if (best_id == vocab) return true;
  return v > best || (v == best && id < best_id);
}

template <class T>
__device__ void argmax_rows(uint32_t *ids, const T *logits, int vocab) {
  __shared__ float best[ARGMAX_THREADS];
  __shared__ int best_id[ARGMAX_THREADS];
  const T *row = logits + long(blockIdx.x) * vocab;
  float m = 0.0f;
  int id = vocab;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = to_f32(row[i]);
    if (finite(v) && beats(v, i, m, id, vocab)) {
      m = v;
      id = i;
    }
  }
  best[threadIdx.x] = m;
  best_id[threadIdx.x] = id;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) {
      const int other = threadIdx.x + stride;
      if (beats(best[other], best_id[other], best[threadIdx.x], best_id[threadIdx.x], vocab)) {
        best[threadIdx.x] = best[other];
        best_id[threadIdx.x] = best_id[other];
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) ids[blockIdx.x] = best_id[0] == vocab ? NO_TOKEN : uint32_t(best_id[0]);
}

}  // namespace quorum

#define QUORUM_ARGMAX(NAME, T)                                                    \
  extern "C" __global__ void NAME(uint32_t *ids, const T *logits, int vocab) { \
    quorum::argmax_rows<T>(ids, logits, vocab);                                  \
  }
QUORUM_ARGMAX(argmax_f32, float)
QUORUM_ARGMAX(argmax_bf16, __nv_bfloat16)
