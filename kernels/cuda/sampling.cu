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


// ---------------------------------------------------------------------------------------------
// Sampling on the device: temperature, top-k, top-p and a grammar's allowed-token bitset, one
// block per row, so that only the chosen id crosses to the host. The host supplies each row's
// uniform draw in [0, 1) from the sequence's own seeded generator, so a seeded request draws
// the same stream of numbers on every device.
//
// What a row keeps: its allowed tokens (finite logit, bit set in its mask if it has one)
// ordered heaviest first, ties to the lower id; the first `top_k` of them (all when 0); of
// those, the shortest prefix whose weight reaches `top_p` of theirs. Weights are
// exp((logit - max) / temperature). The draw walks the kept tokens in id order and takes the
// first whose running weight exceeds u times the kept weight. Nothing sorts: the prefix is
// found by bisecting over the logits' order-preserving bit patterns (32 counting passes at
// most), ties at its boundary resolved by each thread's rank among the equal logits, since
// every thread owns one contiguous run of ids.
//
// Temperature 0 is greedy over the allowed tokens (the arg-max rule above). A row with no
// allowed token gives NO_TOKEN.

constexpr int SAMPLE_THREADS = 256;

// An unsigned key with the order of the floats: larger float, larger key; 0 is below every
// finite value.
__device__ __forceinline__ uint32_t order_key(float x) {
  const uint32_t bits = __float_as_uint(x);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The sum over the block of one value per thread, in a tree whose shape depends only on the
// block size. `scratch` holds SAMPLE_THREADS values.
template <class V>
__device__ V block_total(V v, V *scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) scratch[threadIdx.x] += scratch[threadIdx.x + stride];
    __syncthreads();
  }
  const V total = scratch[0];
  __syncthreads();
  return total;
}

// Each thread's count, replaced by the counts of the threads before it (ids before its run).
__device__ uint32_t exclusive_prefix(uint32_t v, uint32_t *scratch) {
  scratch[threadIdx.x] = v;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t running = 0;
    for (unsigned t = 0; t < blockDim.x; ++t) {
      const uint32_t own = scratch[t];
      scratch[t] = running;
      running += own;
    }
  }
  __syncthreads();
  const uint32_t before = scratch[threadIdx.x];
  __syncthreads();
  return before;
}

// A prefix of the heaviest-first order: every token with a key above `key`, and the first
// `equal` (in id order) of those with exactly `key`.
struct Prefix {
  uint32_t key;
  uint32_t equal;
};

// One block's view of one row: the thread's run of ids [begin, end) and the row's filters.
template <class T>
struct Row {
  const T *logits;
  const uint32_t *mask;  // null: every finite logit is allowed
  int begin, end;
  float max_logit, temperature;

  __device__ bool allowed(int i, float v) const {
    return finite(v) && (mask == nullptr || ((mask[i >> 5] >> (i & 31)) & 1u));
  }
  __device__ float weight(float v) const { return expf((v - max_logit) / temperature); }

  // This thread's allowed tokens with a key of at least `key`.
  __device__ uint32_t count_from(uint32_t key) const {
    uint32_t n = 0;
    for (int i = begin; i < end; ++i) {
      const float v = to_f32(logits[i]);
      n += allowed(i, v) && order_key(v) >= key;
    }
    return n;
  }
  __device__ uint32_t count_equal(uint32_t key) const {
    uint32_t n = 0;
    for (int i = begin; i < end; ++i) {
      const float v = to_f32(logits[i]);
      n += allowed(i, v) && order_key(v) == key;
    }
    return n;
  }
  // Whether token `i` (logit `v`) is allowed and in `p`; `rank` counts this thread's allowed
  // tokens equal to p's key so far, so the calls go in id order.
  __device__ bool in_prefix(int i, float v, Prefix p, uint32_t &rank) const {
    if (!allowed(i, v)) return false;
    const uint32_t k = order_key(v);
    return k > p.key || (k == p.key && rank++ < p.equal);
  }
  // The weight of this thread's tokens that are in `p` (its equal tokens ranked from `rank`)
  // and have a key of at least `key`.
  __device__ double mass_from(Prefix p, uint32_t rank, uint32_t key) const {
    double m = 0.0;
    for (int i = begin; i < end; ++i) {
      const float v = to_f32(logits[i]);
      if (in_prefix(i, v, p, rank) && order_key(v) >= key) m += weight(v);
    }
    return m;
  }
};

template <class T>
__device__ void sample_rows(uint32_t *ids, const T *logits, int vocab, const float *temperatures,
                            const uint32_t *top_ks, const float *top_ps, const double *uniforms,
                            const uint32_t *masks, const int *mask_of_row, int mask_words) {
  __shared__ double mass[SAMPLE_THREADS];
  __shared__ uint32_t counts[SAMPLE_THREADS];
  __shared__ uint32_t best_key[SAMPLE_THREADS];
  __shared__ int best_id[SAMPLE_THREADS];
  __shared__ int chosen[2];
  __shared__ double threshold[1];
  const int r = blockIdx.x, t = threadIdx.x;
  const int run = (vocab + int(blockDim.x) - 1) / int(blockDim.x);
  Row<T> row;
  row.logits = logits + long(r) * vocab;
  row.mask = mask_of_row[r] < 0 ? nullptr : masks + long(mask_of_row[r]) * mask_words;
  row.begin = min(vocab, t * run);
  row.end = min(vocab, row.begin + run);
  row.temperature = temperatures[r];

  // The heaviest allowed token (lowest id among equals) and how many are allowed.
  uint32_t key = 0, allowed = 0;
  int id = vocab;
  for (int i = row.begin; i < row.end; ++i) {
    const float v = to_f32(row.logits[i]);
    if (!row.allowed(i, v)) continue;
    ++allowed;
    if (order_key(v) > key) {
      key = order_key(v);
      id = i;
    }
  }
  best_key[t] = key;
  best_id[t] = id;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride) {
      const int o = t + stride;
      // A tree does not meet the runs in id order, so equal keys compare ids.
      if (best_key[o] > best_key[t] || (best_key[o] == best_key[t] && best_id[o] < best_id[t])) {
        best_key[t] = best_key[o];
        best_id[t] = best_id[o];
      }
    }
    __syncthreads();
  }
  const uint32_t top_key = best_key[0];
  const int top_id = best_id[0];
  __syncthreads();
  allowed = block_total(allowed, counts);
  if (allowed == 0 || !(row.temperature > 0.0f)) {
    if (t == 0) ids[r] = allowed == 0 ? NO_TOKEN : uint32_t(top_id);
    return;
  }
  row.max_logit = to_f32(row.logits[top_id]);

  // Top-k: the largest key that at least k tokens reach, and how many of those equal to it.
  const uint32_t k = top_ks[r];
  Prefix keep{0, 0xffffffffu};
  if (k > 0 && k < allowed) {
    uint32_t lo = 0, hi = top_key + 1;  // count_from(lo) >= k > count_from(hi)
    while (hi - lo > 1) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (block_total(row.count_from(mid), counts) >= k) lo = mid;
      else hi = mid;
    }
    keep = Prefix{lo, k - block_total(row.count_from(lo + 1), counts)};
  }
  uint32_t rank = exclusive_prefix(row.count_equal(keep.key), counts);
  const double total = block_total(row.mass_from(keep, rank, 0), mass);

  // Top-p: the largest key whose tokens (within top-k) weigh at least top_p of the total, then
  // its equal tokens in id order until the weight is reached.
  double kept_total = total;
  const float top_p = top_ps[r];
  if (top_p < 1.0f) {
    const double target = double(top_p) * total;
    uint32_t lo = keep.key, hi = top_key + 1;  // mass from lo >= target > mass from hi
    while (hi - lo > 1) {
      const uint32_t mid = lo + (hi - lo) / 2;
      if (block_total(row.mass_from(keep, rank, mid), mass) >= target) lo = mid;
      else hi = mid;
    }
    const double above = block_total(row.mass_from(keep, rank, lo + 1), mass);
    uint32_t equal = block_total(row.count_equal(lo), counts);
    if (lo == keep.key && keep.equal < equal) equal = keep.equal;
    if (t == 0) {
      // Every equal token has the same logit, so the same weight.
      const uint32_t bits = (lo & 0x80000000u) ? (lo & 0x7fffffffu) : ~lo;
      const double w = row.weight(__uint_as_float(bits));
      double reached = above;
      uint32_t taken = 0;
      while (reached < target && taken < equal) {
        reached += w;
        ++taken;
      }
      counts[0] = taken;
      threshold[0] = reached;
    }
    __syncthreads();
    const Prefix nucleus{lo, counts[0]};
    kept_total = threshold[0];
    __syncthreads();
    if (nucleus.key != keep.key) rank = exclusive_prefix(row.count_equal(nucleus.key), counts);
    keep = nucleus;
  }

  // The draw: the thread whose run holds the target, then the token inside it.
  const double target = uniforms[r] * kept_total;
  double own = 0.0;
  int last = -1;
  {
    uint32_t rr = rank;
    for (int i = row.begin; i < row.end; ++i) {
      const float v = to_f32(row.logits[i]);
      if (row.in_prefix(i, v, keep, rr)) {
        own += row.weight(v);
        last = i;
      }
    }
  }
  mass[t] = own;
  best_id[t] = last;
  __syncthreads();
  if (t == 0) {
    // chosen[0]: the thread that draws (-1: none, rounding put the target past the end);
    // chosen[1]: the last kept token, the fallback.
    double before = 0.0;
    chosen[0] = -1;
    chosen[1] = -1;
    for (unsigned s = 0; s < blockDim.x; ++s) {
      if (best_id[s] >= 0) chosen[1] = best_id[s];
      if (chosen[0] < 0 && before + mass[s] > target && best_id[s] >= 0) {
        chosen[0] = int(s);
        threshold[0] = before;
      }
      before += mass[s];
    }
  }
  __syncthreads();
  if (chosen[0] < 0) {
    if (t == 0) ids[r] = uint32_t(chosen[1]);
    return;
  }
  if (t != chosen[0]) return;
  double running = threshold[0];
  uint32_t rr = rank;
  for (int i = row.begin; i < row.end; ++i) {
    const float v = to_f32(row.logits[i]);
    if (!row.in_prefix(i, v, keep, rr)) continue;
    running += row.weight(v);
    if (running > target) {
      ids[r] = uint32_t(i);
      return;
    }
  }
  ids[r] = uint32_t(last);
}

}  // namespace quorum

#define QUORUM_ARGMAX(NAME, T)                                                    \
  extern "C" __global__ void NAME(uint32_t *ids, const T *logits, int vocab) { \
    quorum::argmax_rows<T>(ids, logits, vocab);                                  \
  }
QUORUM_ARGMAX(argmax_f32, float)
QUORUM_ARGMAX(argmax_bf16, __nv_bfloat16)

#define QUORUM_SAMPLE(NAME, T)                                                                  \
  extern "C" __global__ void NAME(uint32_t *ids, const T *logits, int vocab,                    \
                                  const float *temperatures, const uint32_t *top_ks,            \
                                  const float *top_ps, const double *uniforms,                  \
                                  const uint32_t *masks, const int *mask_of_row, int mask_words) { \
    quorum::sample_rows<T>(ids, logits, vocab, temperatures, top_ks, top_ps, uniforms, masks,     \
                           mask_of_row, mask_words);                                            \
  }
QUORUM_SAMPLE(sample_f32, float)
QUORUM_SAMPLE(sample_bf16, __nv_bfloat16)
