// y = x · wᵀ for a handful of rows (x `[rows, in]`, rows <= SKINNY_MAX_ROWS, w `[out, in]`, y
// `[rows, out]`): the projections of a decode step at small batch, where the product is a
// stream over the weights and the whole question is how close that stream runs to the memory's
// bandwidth.
//
// A warp owns one output: its lanes read the output's weight row 16 bytes at a time
// (SKINNY_UNROLL loads in flight each, so an SM holds enough bytes in flight to cover the
// memory's latency), each weight pack read once for every row of x, and the warp adds its lanes'
// sums at the end. x is small and every warp of the grid reads it, so it comes from the caches.
// The order of a row's additions depends on `in` alone, never on `rows`: a row gets the same
// bits whether it is launched alone or with others.
//
// `in` must be a multiple of the pack (8 bf16 or 4 f32) and the rows 16-byte aligned; the launch
// checks both (src/cuda/launch.rs) and leaves other shapes to cuBLAS.
#include "common.cuh"

namespace quorum {

constexpr int SKINNY_THREADS = 128;
constexpr int SKINNY_MAX_ROWS = 8;
constexpr int SKINNY_UNROLL = 4;
constexpr int SKINNY_PACK_BYTES = 16;

template <class T>
struct alignas(SKINNY_PACK_BYTES) Pack {
  static constexpr int N = SKINNY_PACK_BYTES / sizeof(T);
  T v[N];
};

template <class T>
__device__ void skinny_matmul(T *y, const T *x, const T *w, int rows, int in, int out) {
  using P = Pack<T>;
  const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
  const long o = long(blockIdx.x) * (SKINNY_THREADS / WARP_SIZE) + warp;
  if (o >= out) return;  // the whole warp: nothing below synchronizes beyond it
  const int packs = in / P::N;
  const P *wrow = reinterpret_cast<const P *>(w + o * in);
  float acc[SKINNY_MAX_ROWS];
  for (int r = 0; r < SKINNY_MAX_ROWS; ++r) acc[r] = 0.0f;
  for (int p0 = lane; p0 < packs; p0 += WARP_SIZE * SKINNY_UNROLL) {
    P wp[SKINNY_UNROLL];
    for (int u = 0; u < SKINNY_UNROLL; ++u) {
      const int p = p0 + u * WARP_SIZE;
      if (p < packs) wp[u] = wrow[p];
    }
    for (int u = 0; u < SKINNY_UNROLL; ++u) {
      const int p = p0 + u * WARP_SIZE;
      if (p >= packs) break;
      float wf[P::N];
      for (int j = 0; j < P::N; ++j) wf[j] = to_f32(wp[u].v[j]);
      for (int r = 0; r < SKINNY_MAX_ROWS; ++r) {
        if (r >= rows) break;
        const P xp = reinterpret_cast<const P *>(x + long(r) * in)[p];
        float s = acc[r];
        for (int j = 0; j < P::N; ++j) s = fmaf(to_f32(xp.v[j]), wf[j], s);
        acc[r] = s;
      }
    }
  }
  // `rows` is the same for every lane, so the whole warp takes part in each sum.
  for (int r = 0; r < SKINNY_MAX_ROWS; ++r) {
    if (r >= rows) break;
    const float total = warp_sum(acc[r]);
    if (lane == 0) y[long(r) * out + o] = from_f32<T>(total);
  }
}

}  // namespace quorum

#define QUORUM_SKINNY_MATMUL(NAME, T)                                                    \
  extern "C" __global__ void __launch_bounds__(quorum::SKINNY_THREADS)                   \
      NAME(T *y, const T *x, const T *w, int rows, int in, int out) {                    \
    quorum::skinny_matmul<T>(y, x, w, rows, in, out);                                    \
  }
QUORUM_SKINNY_MATMUL(skinny_matmul_f32, float)
QUORUM_SKINNY_MATMUL(skinny_matmul_bf16, __nv_bfloat16)
