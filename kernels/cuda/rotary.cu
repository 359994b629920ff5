// Rotary position embedding fused with the KV cache write. One block per token: the token's
// query heads are rotated into `q_out` (which may be `q`); its key heads are rotated on their way into the key cache
// and its value heads copied into the value cache, at the token's slot (a slot being
// `block * block_size + offset`, one row of `kv_heads * head_dim` values per slot).
// `cos`/`sin` are the f32 tables `[max_position, head_dim / 2]`; `interleaved` pairs (2i, 2i+1)
// as GPT-J does, otherwise (i, i + head_dim / 2) as NeoX and Qwen do.
#include "common.cuh"

namespace quorum {

template <class T>
__device__ void rotary_kv_write(const T *q, T *q_out, const T *k, const T *v, const float *cos, const float *sin,
                                const uint32_t *positions, const uint32_t *slots, T *k_cache,
                                T *v_cache, int heads, int kv_heads, int head_dim,
                                int interleaved) {
  const long token = blockIdx.x;
  const int half = head_dim / 2;
  const long width = long(kv_heads) * head_dim;
  const long position = positions[token], slot = slots[token];
  const float *c = cos + position * half;
  const float *s = sin + position * half;
  const int query_pairs = heads * half, pairs = (heads + kv_heads) * half;
  for (int p = threadIdx.x; p < pairs; p += blockDim.x) {
    const T *src;
    T *dst;
    int i;
    if (p < query_pairs) {
      i = p % half;
      src = q + (token * heads + p / half) * head_dim;
      dst = q_out + (token * heads + p / half) * head_dim;
    } else {
      const int kp = p - query_pairs;
      i = kp % half;
      src = k + token * width + long(kp / half) * head_dim;
      dst = k_cache + slot * width + long(kp / half) * head_dim;
    }
    const int a = interleaved ? 2 * i : i;
    const int b = interleaved ? 2 * i + 1 : i + half;
    const float x0 = to_f32(src[a]), x1 = to_f32(src[b]);
    dst[a] = from_f32<T>(x0 * c[i] - x1 * s[i]);
    dst[b] = from_f32<T>(x0 * s[i] + x1 * c[i]);
  }
  for (long e = threadIdx.x; e < width; e += blockDim.x) v_cache[slot * width + e] = v[token * width + e];
}

}  // namespace quorum

#define QUORUM_ROTARY_KV_WRITE(NAME, T)                                                            \
  extern "C" __global__ void NAME(const T *q, T *q_out, const T *k, const T *v, const float *cos, const float *sin, \
                                  const uint32_t *positions, const uint32_t *slots, T *k_cache,    \
                                  T *v_cache, int heads, int kv_heads, int head_dim,               \
                                  int interleaved) {                                               \
    quorum::rotary_kv_write<T>(q, q_out, k, v, cos, sin, positions, slots, k_cache, v_cache, heads,       \
                               kv_heads, head_dim, interleaved);                                   \
  }
QUORUM_ROTARY_KV_WRITE(rotary_kv_write_f32, float)
QUORUM_ROTARY_KV_WRITE(rotary_kv_write_bf16, __nv_bfloat16)
