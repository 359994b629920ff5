// Runs the kernels of this directory on the CPU, so that their logic is tested where there is no
// GPU (CI, development machines). It is not a simulator of timing or of memory coherence: every
// block runs alone, its threads as OS threads, `__syncthreads` and the warp shuffles as
// barriers, `__shared__` arrays as statics (one block at a time shares them). Kernels written
// for it use one-dimensional thread blocks of whole warps, only the intrinsics defined here, no
// atomics and no dynamic shared memory.
#pragma once

#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __align__(n)

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

namespace quorum_emulation {
constexpr unsigned WARP = 32;
struct Warp {
  std::barrier<> sync{WARP};
  float values[WARP];
};
struct Block {
  explicit Block(unsigned threads) : sync(threads), warps(new Warp[threads / WARP]) {}
  std::barrier<> sync;
  std::unique_ptr<Warp[]> warps;
};
inline thread_local Block *block = nullptr;
}  // namespace quorum_emulation

inline thread_local dim3 threadIdx;
inline thread_local dim3 blockIdx;
inline dim3 blockDim;
inline dim3 gridDim;

inline void __syncthreads() { quorum_emulation::block->sync.arrive_and_wait(); }

// A warp exchange: every lane publishes its value, then reads its partner's.
inline float quorum_exchange(float v, unsigned source_lane) {
  auto &warp = quorum_emulation::block->warps[threadIdx.x / quorum_emulation::WARP];
  const unsigned lane = threadIdx.x % quorum_emulation::WARP;
  warp.values[lane] = v;
  warp.sync.arrive_and_wait();
  const float got = warp.values[source_lane % quorum_emulation::WARP];
  warp.sync.arrive_and_wait();
  return got;
}
inline float __shfl_xor_sync(unsigned, float v, int lane_mask, int = 32) {
  return quorum_exchange(v, (threadIdx.x % quorum_emulation::WARP) ^ unsigned(lane_mask));
}
inline float __shfl_sync(unsigned, float v, int source_lane, int = 32) {
  return quorum_exchange(v, unsigned(source_lane));
}

inline int min(int a, int b) { return a < b ? a : b; }
inline float rsqrtf(float x) { return 1.0f / std::sqrt(x); }
inline float __expf(float x) { return std::exp(x); }
inline float __fdividef(float a, float b) { return a / b; }
inline uint32_t __float_as_uint(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
inline float __uint_as_float(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// bf16 as the device stores it: the top half of an f32, rounded to nearest even.
struct __nv_bfloat16 {
  uint16_t bits;
};
inline float __bfloat162float(__nv_bfloat16 h) {
  const uint32_t u = uint32_t(h.bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline __nv_bfloat16 __float2bfloat16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if (std::isnan(f)) return {uint16_t(0x7fc0)};
  u += 0x7fffu + ((u >> 16) & 1u);
  return {uint16_t(u >> 16)};
}

namespace quorum_emulation {
// Runs `kernel(args...)` over `grid` blocks of `threads` threads, one block at a time. Launches
// are serialized: the shared-memory statics and the grid dimensions are process-wide.
template <class Kernel, class... Args>
void launch(dim3 grid, unsigned threads, Kernel kernel, Args... args) {
  static std::mutex one_launch_at_a_time;
  std::lock_guard<std::mutex> guard(one_launch_at_a_time);
  gridDim = grid;
  blockDim = dim3(threads);
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        Block b(threads);
        std::vector<std::thread> workers;
        workers.reserve(threads);
        for (unsigned t = 0; t < threads; ++t)
          workers.emplace_back([&, t] {
            block = &b;
            threadIdx = dim3(t);
            blockIdx = dim3(x, y, z);
            kernel(args...);
            // A thread that has returned no longer holds back the barriers of those still
            // running, as on the device.
            b.sync.arrive_and_drop();
            b.warps[t / WARP].sync.arrive_and_drop();
          });
        for (auto &w : workers) w.join();
      }
}
}  // namespace quorum_emulation

// The tensor-core tiles of CUDA's wmma API, for the bf16 products of prefill_attention. On the
// device a fragment is spread over the warp's lanes in an undocumented layout; here every lane
// holds the whole tile (the kernels touch fragments only through these calls), sums in f32 in
// index order, and lane 0 alone stores, so a store is one write of each element. A barrier
// must separate a store from the reads of other threads, as on the device.
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static constexpr int rows = std::is_same_v<Use, matrix_b> ? K : M;
  static constexpr int cols = std::is_same_v<Use, matrix_a> ? K : N;
  float tile[rows * cols];
};

inline float quorum_element(float x) { return x; }
inline float quorum_element(__nv_bfloat16 x) { return __bfloat162float(x); }

template <class Use, int M, int N, int K, class T, class Layout, class S>
void load_matrix_sync(fragment<Use, M, N, K, T, Layout> &f, const S *p, unsigned ldm) {
  using F = fragment<Use, M, N, K, T, Layout>;
  for (int r = 0; r < F::rows; ++r)
    for (int c = 0; c < F::cols; ++c)
      f.tile[r * F::cols + c] = quorum_element(
          std::is_same_v<Layout, col_major> ? p[c * ldm + r] : p[r * ldm + c]);
}

template <int M, int N, int K>
void load_matrix_sync(fragment<accumulator, M, N, K, float> &f, const float *p, unsigned ldm,
                      layout_t layout) {
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      f.tile[r * N + c] = layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
}

template <int M, int N, int K>
void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f, unsigned ldm,
                       layout_t layout) {
  if (threadIdx.x % quorum_emulation::WARP != 0) return;
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      (layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.tile[r * N + c];
}

template <int M, int N, int K>
void fill_fragment(fragment<accumulator, M, N, K, float> &f, float v) {
  for (float &x : f.tile) x = v;
}

template <int M, int N, int K, class T, class LA, class LB>
void mma_sync(fragment<accumulator, M, N, K, float> &d, const fragment<matrix_a, M, N, K, T, LA> &a,
              const fragment<matrix_b, M, N, K, T, LB> &b,
              const fragment<accumulator, M, N, K, float> &c) {
  float result[M * N];
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      float sum = c.tile[m * N + n];
      for (int k = 0; k < K; ++k) sum += a.tile[m * K + k] * b.tile[k * N + n];
      result[m * N + n] = sum;
    }
  std::memcpy(d.tile, result, sizeof result);
}
}  // namespace wmma
}  // namespace nvcuda
