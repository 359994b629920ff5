// y = x · wᵀ (x `[rows, in]`, w `[out, in]`, y `[rows, out]`) where every output is one thread's
// sum over the inputs in index order, in f32: the arithmetic of a row never depends on how many
// rows share the launch, on which tile the row falls in, or on the GPU's kernel heuristics
// (cuBLAS picks tiles and split-K by shape, so a row's result changes with the batch). This is
// what a batch-invariant model's projections run; it trades the tensor cores for that.
//
// A block computes a MATMUL_TILE x MATMUL_TILE tile of y, 16 x 16 threads, each thread 4 x 4
// outputs; the inputs pass through shared memory MATMUL_DEPTH at a time. Past `in` the tiles
// hold zeros, whose products add nothing, so the order of a row's additions depends on `in`
// alone.
#include "common.cuh"

namespace quorum {

constexpr int MATMUL_THREADS = 256;
constexpr int MATMUL_TILE = 64;
constexpr int MATMUL_DEPTH = 16;
constexpr int MATMUL_SIDE = 16;  // threads along each side of the tile
constexpr int MATMUL_EACH = MATMUL_TILE / MATMUL_SIDE;

template <class T>
__device__ void fixed_order_matmul(T *y, const T *x, const T *w, int rows, int in, int out) {
  __shared__ float xs[MATMUL_DEPTH][MATMUL_TILE];
  __shared__ float ws[MATMUL_DEPTH][MATMUL_TILE];
  const int tx = threadIdx.x % MATMUL_SIDE, ty = threadIdx.x / MATMUL_SIDE;
  const long row0 = long(blockIdx.y) * MATMUL_TILE, col0 = long(blockIdx.x) * MATMUL_TILE;
  float acc[MATMUL_EACH][MATMUL_EACH];
  for (int i = 0; i < MATMUL_EACH; ++i)
    for (int j = 0; j < MATMUL_EACH; ++j) acc[i][j] = 0.0f;
  for (int k0 = 0; k0 < in; k0 += MATMUL_DEPTH) {
    for (int e = threadIdx.x; e < MATMUL_TILE * MATMUL_DEPTH; e += blockDim.x) {
      const int r = e / MATMUL_DEPTH, kk = e % MATMUL_DEPTH;
      const int k = k0 + kk;
      const long xr = row0 + r, wr = col0 + r;
      xs[kk][r] = (xr < rows && k < in) ? to_f32(x[xr * in + k]) : 0.0f;
      ws[kk][r] = (wr < out && k < in) ? to_f32(w[wr * in + k]) : 0.0f;
    }
    __syncthreads();
    for (int kk = 0; kk < MATMUL_DEPTH; ++kk) {
      float a[MATMUL_EACH], b[MATMUL_EACH];
      for (int i = 0; i < MATMUL_EACH; ++i) a[i] = xs[kk][ty + MATMUL_SIDE * i];
      for (int j = 0; j < MATMUL_EACH; ++j) b[j] = ws[kk][tx + MATMUL_SIDE * j];
      for (int i = 0; i < MATMUL_EACH; ++i)
        for (int j = 0; j < MATMUL_EACH; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
  for (int i = 0; i < MATMUL_EACH; ++i) {
    const long r = row0 + ty + MATMUL_SIDE * i;
    if (r >= rows) continue;
    for (int j = 0; j < MATMUL_EACH; ++j) {
      const long c = col0 + tx + MATMUL_SIDE * j;
      if (c < out) y[r * out + c] = from_f32<T>(acc[i][j]);
    }
  }
}

}  // namespace quorum

#define QUORUM_FIXED_ORDER_MATMUL(NAME, T)                                               \
  extern "C" __global__ void __launch_bounds__(quorum::MATMUL_THREADS)                   \
      NAME(T *y, const T *x, const T *w, int rows, int in, int out) {                    \
    quorum::fixed_order_matmul<T>(y, x, w, rows, in, out);                               \
  }
QUORUM_FIXED_ORDER_MATMUL(fixed_order_matmul_f32, float)
QUORUM_FIXED_ORDER_MATMUL(fixed_order_matmul_bf16, __nv_bfloat16)
