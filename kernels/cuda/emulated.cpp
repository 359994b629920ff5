// The kernels of this directory compiled for the CPU over cpu_emulation.h, with one C entry
// point per kernel taking its launch shape first; the crate's tests call them
// (src/cuda/emulated.rs) and compare against the CPU references.
#include "activation.cu"
#include "causal_softmax.cu"
#include "fixed_order_matmul.cu"
#include "lora.cu"
#include "norm.cu"
#include "paged_attention.cu"
#include "prefill_attention.cu"
#include "rotary.cu"
#include "sampling.cu"
#include "skinny_matmul.cu"

using quorum_emulation::launch;
typedef __nv_bfloat16 bf16;

#define EMULATE(KERNEL, PARAMS, ARGS)                                                     \
  extern "C" void emulate_##KERNEL(unsigned gx, unsigned gy, unsigned gz, unsigned threads, \
                                   PARAMS) {                                             \
    launch(dim3(gx, gy, gz), threads, KERNEL, ARGS);                                     \
  }
#define P(...) __VA_ARGS__

#define EMULATE_TYPED(T, SUFFIX)                                                                  \
  EMULATE(add_rms_norm_##SUFFIX,                                                                  \
          P(const T *x, const T *residual, const T *weight, T *sum, T *out, int hidden, float eps), \
          P(x, residual, weight, sum, out, hidden, eps))                                          \
  EMULATE(silu_mul_##SUFFIX, P(const T *gate, const T *up, T *out, long n), P(gate, up, out, n))   \
  EMULATE(rotary_kv_write_##SUFFIX,                                                               \
          P(const T *q, T *q_out, const T *k, const T *v, const float *cos, const float *sin,     \
            const uint32_t *positions, const uint32_t *slots, T *k_cache, T *v_cache, int heads,  \
            int kv_heads, int head_dim, int interleaved),                                         \
          P(q, q_out, k, v, cos, sin, positions, slots, k_cache, v_cache, heads, kv_heads,        \
            head_dim, interleaved))                                                               \
  EMULATE(paged_attention_##SUFFIX,                                                               \
          P(T *out, float *part_out, float *part_max, float *part_sum, const T *q,                \
            const T *k_cache, const T *v_cache, const uint32_t *block_tables,                     \
            const uint32_t *seq_of_row, const uint32_t *context_lens, int heads, int kv_heads,    \
            int head_dim, int block_size, int max_blocks, int max_parts, float scale),            \
          P(out, part_out, part_max, part_sum, q, k_cache, v_cache, block_tables, seq_of_row,     \
            context_lens, heads, kv_heads, head_dim, block_size, max_blocks, max_parts, scale))   \
  EMULATE(paged_attention_reduce_##SUFFIX,                                                        \
          P(T *out, const float *part_out, const float *part_max, const float *part_sum,          \
            const uint32_t *context_lens, int heads, int head_dim, int max_parts),                \
          P(out, part_out, part_max, part_sum, context_lens, heads, head_dim, max_parts))         \
  EMULATE(prefill_attention_##SUFFIX,                                                             \
          P(T *out, const T *q, const T *k_cache, const T *v_cache, const uint32_t *context_slots, \
            int len, int start, int heads, int kv_heads, int head_dim, float scale),              \
          P(out, q, k_cache, v_cache, context_slots, len, start, heads, kv_heads, head_dim,       \
            scale))                                                                               \
  EMULATE(lora_shrink_##SUFFIX,                                                                   \
          P(float *t, const T *x, const T *a0, const T *a1, const T *a2, const int *adapter_of_row, \
            int in, int rank),                                                                    \
          P(t, x, a0, a1, a2, adapter_of_row, in, rank))                                          \
  EMULATE(lora_expand_##SUFFIX,                                                                   \
          P(T *y0, T *y1, T *y2, const float *t, const T *b0, const T *b1, const T *b2,           \
            const float *s0, const float *s1, const float *s2, const int *adapter_of_row,         \
            int out0, int out1, int out2, int rank),                                              \
          P(y0, y1, y2, t, b0, b1, b2, s0, s1, s2, adapter_of_row, out0, out1, out2, rank))       \
  EMULATE(causal_softmax_##SUFFIX, P(T *scores, int len, int context, int start),                \
          P(scores, len, context, start))                                                         \
  EMULATE(fixed_order_matmul_##SUFFIX, P(T *y, const T *x, const T *w, int rows, int in, int out), \
          P(y, x, w, rows, in, out))                                                              \
  EMULATE(skinny_matmul_##SUFFIX,                                                                 \
          P(T *y0, T *y1, T *y2, const T *x, const T *w0, const T *w1, const T *w2, int rows,     \
            int in, int out0, int out1, int out2),                                                \
          P(y0, y1, y2, x, w0, w1, w2, rows, in, out0, out1, out2))                               \
  EMULATE(argmax_##SUFFIX, P(uint32_t *ids, const T *logits, int vocab), P(ids, logits, vocab))   \
  EMULATE(sample_##SUFFIX,                                                                        \
          P(uint32_t *ids, const T *logits, int vocab, const float *temperatures,                 \
            const uint32_t *top_ks, const float *top_ps, const double *uniforms,                  \
            const uint32_t *masks, const int *mask_of_row, int mask_words),                       \
          P(ids, logits, vocab, temperatures, top_ks, top_ps, uniforms, masks, mask_of_row,       \
            mask_words))

EMULATE_TYPED(float, f32)
EMULATE_TYPED(bf16, bf16)

// The kernels' compile-time limits, for the Rust side's launch shapes to be checked against.
extern "C" void emulated_kernel_limits(int *limits) {
  limits[0] = quorum::ATTENTION_THREADS;
  limits[1] = quorum::PARTITION;
  limits[2] = quorum::MAX_HEAD_DIM;
  limits[3] = quorum::SHRINK_THREADS;
  limits[4] = quorum::EXPAND_THREADS;
  limits[5] = quorum::ARGMAX_THREADS;
  limits[6] = quorum::SOFTMAX_THREADS;
  limits[7] = quorum::MATMUL_THREADS;
  limits[8] = quorum::MATMUL_TILE;
  limits[9] = quorum::SAMPLE_THREADS;
  limits[10] = quorum::PREFILL_THREADS;
  limits[11] = quorum::PREFILL_ROWS;
  limits[12] = quorum::PREFILL_MAX_HEAD_DIM;
  limits[13] = quorum::SKINNY_THREADS;
  limits[14] = quorum::SKINNY_MAX_ROWS;
  limits[15] = quorum::SKINNY_PACK_BYTES;
  limits[16] = quorum::SKINNY_MAX_WEIGHTS;
  limits[17] = quorum::LORA_MAX_GROUP;
}
