// y_g = x · w_gᵀ for a handful of rows and up to three weights sharing them (x `[rows, in]`,
// rows <= SKINNY_MAX_ROWS, each w_g `[out_g, in]`, y_g `[rows, out_g]`): the projections of a
// decode step at small batch, where a product is a stream over the weights and the whole
// question is how close that stream runs to the memory's bandwidth. Projections of one input
// (q, k and v; gate and up) go in one launch, so the small ones (a 7B's k and v have 512
// outputs) fill the GPU beside the large one, with no weights concatenated in memory.
//
// A warp owns one output of one weight: its lanes read the output's weight row in 16-byte packs
// (SKINNY_UNROLL loads in flight each, so an SM holds enough bytes in flight to cover the
// memory's latency), each weight pack read once for every row of x, and the warp adds its lanes'
// sums at the end. x is small and every warp of the grid reads it, so it comes from the caches.
// The order of a row's additions depends on `in` alone, never on `rows`: a row gets the same
// bits whether it is launched alone or with others.
//
// `in` must be a multiple of the pack (8 bf16 or 4 f32) and the rows 16-byte aligned; the launch
// checks both (src/cuda/launch.rs) and leaves other shapes to cuBLAS. A weight past the group's
// last has no outputs (`out_g` 0) and is never read.
#include "common.cuh"

namespace quorum {

constexpr int SKINNY_THREADS = 128;
constexpr int SKINNY_MAX_ROWS = 8;
constexpr int SKINNY_UNROLL = 4;
constexpr int SKINNY_PACK_BYTES = 16;
constexpr int SKINNY_MAX_WEIGHTS = 3;
static_assert(SKINNY_MAX_WEIGHTS == 3, "the kernel's parameters hold three (y, w, out) triples");

template <class T>
struct alignas(SKINNY_PACK_BYTES) Pack {
  static constexpr int N = SKINNY_PACK_BYTES / sizeof(T);
  T v[N];
};

template <class T>
__device__ void skinny_matmul(T *y0, T *y1, T *y2, const T *x, const T *w0, const T *w1,
                              const T *w2, int rows, int in, int out0, int out1, int out2) {
  using P = Pack<T>;
  const int lane = threadIdx.x % WARP_SIZE, warp = threadIdx.x / WARP_SIZE;
  long o = long(blockIdx.x) * (SKINNY_THREADS / WARP_SIZE) + warp;
  // Which weight this warp's output belongs to; a warp past the last returns whole (nothing
  // below synchronizes beyond the warp).
  T *y;
  const T *w;
  int out;
  if (o < out0) {
    y = y0, w = w0, out = out0;
  } else if (o < long(out0) + out1) {
    o -= out0;
    y = y1, w = w1, out = out1;
  } else if (o < long(out0) + out1 + out2) {
    o -= long(out0) + out1;
    y = y2, w = w2, out = out2;
  } else {
    return;
  }
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

#define QUORUM_SKINNY_MATMUL(NAME, T)                                                      \
  extern "C" __global__ void __launch_bounds__(quorum::SKINNY_THREADS)                     \
      NAME(T *y0, T *y1, T *y2, const T *x, const T *w0, const T *w1, const T *w2, int rows, \
           int in, int out0, int out1, int out2) {                                          \
    quorum::skinny_matmul<T>(y0, y1, y2, x, w0, w1, w2, rows, in, out0, out1, out2);       \
  }
QUORUM_SKINNY_MATMUL(skinny_matmul_f32, float)
QUORUM_SKINNY_MATMUL(skinny_matmul_bf16, __nv_bfloat16)
