// bench/cuda_emulate.py's CPU stand-in for the CUDA features fast-format candidates use: one std::thread per CUDA
// thread, the blocks of a launch one after another (so function-static "__shared__" arrays are per block),
// __syncthreads as a block barrier, float warp shuffles through a per-warp exchange buffer and a warp barrier.
#include <algorithm>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>
#include <memory>
#include <functional>

struct dim3 { unsigned x = 1, y = 1, z = 1; };
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;
inline std::barrier<>* emu_block_bar = nullptr;
inline std::vector<std::unique_ptr<std::barrier<>>> emu_warp_bars;
inline std::vector<float> emu_xbuf;  // per thread exchange slot (floats only)
inline thread_local int emu_tid;
inline char emu_dyn_smem[1 << 16];

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __shared__ static
#define __launch_bounds__(...)

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
inline float __shfl_xor_sync(unsigned, float v, int o) {
    const int w = emu_tid / 32, lane = emu_tid % 32;
    emu_xbuf[emu_tid] = v;
    emu_warp_bars[w]->arrive_and_wait();
    const float r = emu_xbuf[w * 32 + (lane ^ o)];
    emu_warp_bars[w]->arrive_and_wait();
    return r;
}
inline float rsqrtf(float v) { return 1.0f / std::sqrt(v); }
inline float normcdff(float v) { return 0.5f * std::erfc(-v * 0.70710678118654752f); }

struct float4 { float x, y, z, w; };
struct float2 { float x, y; };
struct uint4 { unsigned x, y, z, w; };
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }

struct __nv_bfloat16 { uint16_t bits; };
struct __nv_bfloat162 { __nv_bfloat16 x, y; };
inline float __bfloat162float(__nv_bfloat16 h) { uint32_t u = uint32_t(h.bits) << 16; float f; std::memcpy(&f, &u, 4); return f; }
inline __nv_bfloat16 __float2bfloat16(float f) {
    uint32_t u; std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return {uint16_t((u >> 16) | 0x40)};
    u += 0x7fff + ((u >> 16) & 1);
    return {uint16_t(u >> 16)};
}
inline __nv_bfloat162 __floats2bfloat162_rn(float a, float b) { return {__float2bfloat16(a), __float2bfloat16(b)}; }
inline float2 __bfloat1622float2(__nv_bfloat162 h) { return {__bfloat162float(h.x), __bfloat162float(h.y)}; }
inline __nv_bfloat162 __hmax2(__nv_bfloat162 a, __nv_bfloat162 b) {
    auto m = [](__nv_bfloat16 p, __nv_bfloat16 q) { return __bfloat162float(p) >= __bfloat162float(q) ? p : q; };
    return {m(a.x, b.x), m(a.y, b.y)};
}

inline void emu_run(dim3 g, dim3 b, const std::function<void()>& body) {
    gridDim = g; blockDim = b;
    const int n = b.x * b.y * b.z;
    emu_xbuf.assign(n + 32, 0.f);
    for (unsigned bz = 0; bz < g.z; ++bz) for (unsigned by = 0; by < g.y; ++by) for (unsigned bx = 0; bx < g.x; ++bx) {
        std::barrier<> bar(n);
        emu_block_bar = &bar;
        emu_warp_bars.clear();
        for (int w = 0; w < (n + 31) / 32; ++w) emu_warp_bars.emplace_back(new std::barrier<>(std::min(32, n - 32 * w)));
        std::vector<std::thread> ts;
        ts.reserve(n);
        for (int t = 0; t < n; ++t) ts.emplace_back([&, t] {
            emu_tid = t;
            threadIdx = {unsigned(t % b.x), unsigned((t / b.x) % b.y), unsigned(t / (b.x * b.y))};
            blockIdx = {bx, by, bz};
            body();
            emu_warp_bars[t / 32]->arrive_and_drop();
            bar.arrive_and_drop();
        });
        for (auto& th : ts) th.join();
    }
}
