/* Host emulation of the CUDA C++ device environment the dattn kernels use: keywords,
 * built-in variables, barriers and warp collectives (on cooperative user-level threads,
 * emu.cpp), kernel launches (the build script rewrites k<<<g, b, s, st>>>(args) into
 * emu_launch(k, g, b, s, st, args)). Checks what the hardware would not report: a
 * __syncthreads or warp collective reached from different source lines by threads of one
 * block / warp aborts, and so does a deadlock (a collective some thread never reaches).
 * For tests only; see README.md here. */
#ifndef DATTN_EMU_CUDA_RUNTIME_H
#define DATTN_EMU_CUDA_RUNTIME_H

#include "cuda_runtime_api.h"

#ifdef __cplusplus
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <tuple>
#include <type_traits>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __shared__ static
#define __grid_constant__
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct dim3 {
    unsigned x, y, z;
    dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint4 {
    unsigned x, y, z, w;
};
struct float2 {
    float x, y;
};
/* float atomics: the emulated threads share one OS thread, so a plain add is atomic */
static inline float atomicAdd(float *p, float v)
{
    const float o = *p;
    *p = o + v;
    return o;
}

static inline float2 make_float2(float x, float y)
{
    float2 r;
    r.x = x;
    r.y = y;
    return r;
}
struct alignas(16) float4 {
    float x, y, z, w;
};
static inline float4 make_float4(float x, float y, float z, float w)
{
    float4 r;
    r.x = x;
    r.y = y;
    r.z = z;
    r.w = w;
    return r;
}

const dim3 &emu_thread_idx(void);
extern dim3 emu_blockIdx, emu_blockDim, emu_gridDim;
#define threadIdx (emu_thread_idx())
#define blockIdx emu_blockIdx
#define blockDim emu_blockDim
#define gridDim emu_gridDim

void *emu_dyn_smem(void);
int emu_syncthreads(int site, int pred);
/* bar.sync id, n: releases when n threads of the block arrived at barrier id (1..15) */
void emu_named_bar(int id, int n, int site);
/* Deposits nwords (<= 16) of this lane, waits for the whole warp, returns the 32 x 16
 * words of the operation (lane l at [16 l]). */
const uint32_t *emu_warp_op(const uint32_t *payload, int nwords, int site);
int emu_lane(void);
[[noreturn]] void emu_fail(const char *msg);

#define __syncthreads() emu_syncthreads(__LINE__, 0)
#define __syncthreads_or(p) emu_syncthreads(__LINE__, (p) != 0)
#define __syncwarp(...) emu_warp_op(nullptr, 0, __LINE__)
#define __trap() emu_fail("__trap()")

static inline void emu_full_mask(unsigned m)
{
    if (m != 0xffffffffu) emu_fail("warp collective with a partial mask");
}

template <class T>
static inline T emu_shfl(unsigned m, T v, int src, int site)
{
    static_assert(sizeof(T) <= 8, "shuffle size");
    emu_full_mask(m);
    uint32_t w[2] = {0, 0};
    memcpy(w, &v, sizeof(T));
    const uint32_t *all = emu_warp_op(w, 2, site);
    T r;
    memcpy(&r, all + 16 * (src & 31), sizeof(T));
    return r;
}
template <class T>
static inline T emu_shfl_xor(unsigned m, T v, int o, int site)
{
    return emu_shfl(m, v, emu_lane() ^ o, site);
}
static inline unsigned emu_ballot(unsigned m, int pred, int site)
{
    emu_full_mask(m);
    uint32_t w = pred != 0;
    const uint32_t *all = emu_warp_op(&w, 1, site);
    unsigned r = 0;
    for (int l = 0; l < 32; l++) r |= (all[16 * l] & 1u) << l;
    return r;
}
static inline int emu_reduce_min(unsigned m, int v, int site)
{
    emu_full_mask(m);
    uint32_t w = (uint32_t)v;
    const uint32_t *all = emu_warp_op(&w, 1, site);
    int r = (int)all[0];
    for (int l = 1; l < 32; l++) r = (int)all[16 * l] < r ? (int)all[16 * l] : r;
    return r;
}
static inline int emu_reduce_max(unsigned m, int v, int site)
{
    emu_full_mask(m);
    uint32_t w = (uint32_t)v;
    const uint32_t *all = emu_warp_op(&w, 1, site);
    int r = (int)all[0];
    for (int l = 1; l < 32; l++) r = (int)all[16 * l] > r ? (int)all[16 * l] : r;
    return r;
}
#define __shfl_sync(m, v, s) emu_shfl((m), (v), (s), __LINE__)
#define __shfl_xor_sync(m, v, o) emu_shfl_xor((m), (v), (o), __LINE__)
#define __ballot_sync(m, p) emu_ballot((m), (p), __LINE__)
#define __all_sync(m, p) (emu_ballot((m), !(p), __LINE__) == 0u)
#define __any_sync(m, p) (emu_ballot((m), (p), __LINE__) != 0u)
#define __reduce_min_sync(m, v) emu_reduce_min((m), (v), __LINE__)
#define __reduce_max_sync(m, v) emu_reduce_max((m), (v), __LINE__)

static inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
static inline int __ffs(int x) { return __builtin_ffs(x); }
static inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
static inline float __int_as_float(int x) { float f; memcpy(&f, &x, 4); return f; }
static inline float __uint_as_float(unsigned x) { float f; memcpy(&f, &x, 4); return f; }
static inline int __float_as_int(float f) { int x; memcpy(&x, &f, 4); return x; }
static inline unsigned __float_as_uint(float f) { unsigned x; memcpy(&x, &f, 4); return x; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

struct emu_closure {
    virtual void run(void) = 0;
    virtual ~emu_closure() {}
};
void emu_run_grid(dim3 g, dim3 b, size_t smem, emu_closure *c);

template <class... P, class... A>
cudaError_t emu_launch(void (*k)(P...), dim3 g, dim3 b, size_t smem, cudaStream_t s, A &&...args)
{
    (void)s;
    struct C : emu_closure {
        void (*k)(P...);
        std::tuple<std::decay_t<P>...> t;
        C(void (*k_)(P...), A &&...a) : k(k_), t(std::forward<A>(a)...) {}
        void run(void) override { std::apply(k, t); }
    } c(k, std::forward<A>(args)...);
    emu_run_grid(g, b, smem, &c);
    return cudaSuccess;
}

template <class F>
cudaError_t cudaFuncSetAttribute(F f, enum cudaFuncAttribute a, int v)
{
    (void)f;
    (void)a;
    (void)v;
    return cudaSuccess;
}
#endif
#endif
