/* Host emulation of CUDA kernels and of the runtime subset the tests use (README.md).
 *
 * Every thread of a block is a user-level thread (ucontext) on one OS thread; blocks run
 * one after another. A thread runs until it reaches a barrier or a warp collective, then
 * yields; the scheduler resumes the threads round-robin. __syncthreads releases when every
 * thread of the block that has not exited has arrived (as the hardware does); a warp
 * collective when all 32 lanes have arrived. Arrivals from different source lines, and a
 * round in which no thread can advance (deadlock), abort with a message. Dynamic shared
 * memory is a fresh allocation of exactly the launch's size, filled with 0xFF bytes (reads
 * of unwritten shared memory show up as NaN), so that AddressSanitizer sees overruns. */
#include "cuda_runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>

#include <vector>

dim3 emu_blockIdx, emu_blockDim, emu_gridDim;

namespace {

struct Fiber {
    ucontext_t ctx;
    dim3 tid;
    int lin;
    int done;
    int waiting;
};

struct Warp {
    int count;
    unsigned gen;
    int site;
    int exited;
    uint32_t v[2][32][16];
};

const size_t STACK = 256 * 1024;
ucontext_t sched_ctx;
std::vector<Fiber> fibers;
/* the threads' stacks, kept across launches and freed at exit (LeakSanitizer builds) */
struct Stacks : std::vector<char *> {
    ~Stacks()
    {
        for (char *p : *this) free(p);
    }
} stacks;
std::vector<Warp> warps;
Fiber *cur;
int live;
int bar_count, bar_site, bar_or, bar_res[2];
unsigned bar_gen;
unsigned long progress;
char *smem_base;
emu_closure *closure;
cudaError_t last_err = cudaSuccess;

void yield_now(void) { swapcontext(&cur->ctx, &sched_ctx); }

void release_barrier(void)
{
    bar_res[bar_gen & 1] = bar_or;
    bar_count = 0;
    bar_gen++;
}

void fiber_main(void)
{
    closure->run();
    cur->done = 1;
    live--;
    progress++;
    warps[cur->lin >> 5].exited++;
    if (bar_count > 0 && bar_count == live) release_barrier();
    /* returns to sched_ctx through uc_link */
}

} // namespace

/* gives the other emulated threads a turn (tma.cuh's mbarrier wait) */
void emu_yield(void) { yield_now(); }

/* an mbarrier arrival (tma.cuh): progress, so that a round in which the last arrival completes
 * a phase (while every other thread waits) is not taken for a deadlock */
void emu_progress(void) { progress++; }

[[noreturn]] void emu_fail(const char *msg)
{
    fprintf(stderr, "EMU FAILURE: %s (block %u,%u,%u thread %d)\n", msg, emu_blockIdx.x, emu_blockIdx.y,
            emu_blockIdx.z, cur ? cur->lin : -1);
    fflush(stdout);
    abort();
}

const dim3 &emu_thread_idx(void) { return cur->tid; }
int emu_lane(void) { return cur->lin & 31; }
void *emu_dyn_smem(void) { return smem_base; }
char *emu_smem_base(void) { return smem_base; }

int emu_syncthreads(int site, int pred)
{
    const unsigned g = bar_gen;
    if (bar_count == 0) {
        bar_site = site;
        bar_or = 0;
    } else if (bar_site != site) {
        char m[128];
        snprintf(m, sizeof m, "__syncthreads reached from lines %d and %d", bar_site, site);
        emu_fail(m);
    }
    bar_or |= pred != 0;
    bar_count++;
    progress++;
    if (bar_count == live) {
        release_barrier();
    } else {
        cur->waiting = 1;
        while (bar_gen == g) yield_now();
        cur->waiting = 0;
    }
    return bar_res[g & 1];
}

/* bar.sync id, n (id 1..15): the first n arrivals release it; arrivals of one round from
 * different source lines or with different counts abort */
struct NamedBar {
    int count, n, site;
    unsigned gen;
};
static NamedBar named_bars[16];

void emu_named_bar(int id, int n, int site)
{
    if (id < 1 || id > 15 || n <= 0 || n % 32) emu_fail("named barrier: id must be 1..15, n a positive multiple of 32");
    NamedBar &B = named_bars[id];
    const unsigned g = B.gen;
    if (B.count == 0) {
        B.site = site;
        B.n = n;
    } else if (B.site != site || B.n != n) {
        char m[160];
        snprintf(m, sizeof m, "named barrier %d reached from lines %d and %d (counts %d, %d)", id, B.site, site, B.n, n);
        emu_fail(m);
    }
    B.count++;
    progress++;
    if (B.count == n) {
        B.count = 0;
        B.gen++;
    } else {
        cur->waiting = 1;
        while (B.gen == g) yield_now();
        cur->waiting = 0;
    }
}

const uint32_t *emu_warp_op(const uint32_t *payload, int nwords, int site)
{
    Warp &W = warps[cur->lin >> 5];
    if (W.exited) emu_fail("warp collective while lanes of the warp have exited");
    const unsigned g = W.gen;
    if (W.count == 0) {
        W.site = site;
    } else if (W.site != site) {
        char m[128];
        snprintf(m, sizeof m, "warp collective reached from lines %d and %d", W.site, site);
        emu_fail(m);
    }
    if (nwords) memcpy(W.v[g & 1][cur->lin & 31], payload, sizeof(uint32_t) * (size_t)nwords);
    W.count++;
    progress++;
    if (W.count == 32) {
        W.count = 0;
        W.gen++;
    } else {
        cur->waiting = 1;
        while (W.gen == g) yield_now();
        cur->waiting = 0;
    }
    return &W.v[g & 1][0][0];
}

void emu_run_grid(dim3 g, dim3 b, size_t smem, emu_closure *c)
{
    const int n = (int)(b.x * b.y * b.z);
    if (n <= 0 || n > 1024 || g.x == 0 || g.y == 0 || g.z == 0 || g.y > 65535 || g.z > 65535) {
        last_err = cudaErrorInvalidValue;
        return;
    }
    if (n % 32) emu_fail("block size not a multiple of 32");
    emu_gridDim = g;
    emu_blockDim = b;
    closure = c;
    while ((int)stacks.size() < n) stacks.push_back((char *)malloc(STACK));
    for (unsigned z = 0; z < g.z; z++)
        for (unsigned y = 0; y < g.y; y++)
            for (unsigned x = 0; x < g.x; x++) {
                emu_blockIdx = dim3(x, y, z);
                smem_base = (char *)malloc(smem ? smem : 1);
                memset(smem_base, 0xFF, smem ? smem : 1);
                fibers.assign((size_t)n, Fiber());
                warps.assign((size_t)(n / 32), Warp());
                for (auto &w : warps) memset(&w, 0, sizeof w);
                bar_count = 0;
                bar_gen = 0;
                memset(named_bars, 0, sizeof named_bars);
                live = n;
                for (int t = 0; t < n; t++) {
                    Fiber &f = fibers[(size_t)t];
                    f.lin = t;
                    f.tid = dim3((unsigned)t % b.x, ((unsigned)t / b.x) % b.y, (unsigned)t / (b.x * b.y));
                    f.done = f.waiting = 0;
                    getcontext(&f.ctx);
                    f.ctx.uc_stack.ss_sp = stacks[(size_t)t];
                    f.ctx.uc_stack.ss_size = STACK;
                    f.ctx.uc_link = &sched_ctx;
                    makecontext(&f.ctx, fiber_main, 0);
                }
                for (;;) {
                    const unsigned long p0 = progress;
                    int alive = 0;
                    for (int t = 0; t < n; t++) {
                        Fiber &f = fibers[(size_t)t];
                        if (f.done) continue;
                        cur = &f;
                        swapcontext(&sched_ctx, &f.ctx);
                        if (!f.done) alive++;
                    }
                    cur = nullptr;
                    if (!alive) break;
                    if (progress == p0) {
                        int w0 = -1;
                        for (int t = 0; t < n; t++)
                            if (!fibers[(size_t)t].done) {
                                w0 = t;
                                break;
                            }
                        fprintf(stderr, "EMU FAILURE: deadlock in block (%u,%u,%u): %d threads alive, first %d, "
                                        "barrier arrivals %d (line %d), warp %d arrivals %d (line %d)\n",
                                x, y, z, live, w0, bar_count, bar_site, w0 >> 5, warps[(size_t)(w0 >> 5)].count,
                                warps[(size_t)(w0 >> 5)].site);
                        abort();
                    }
                }
                free(smem_base);
                smem_base = nullptr;
            }
}

/* ---------------------------------------------------------------- runtime API */

extern "C" {
cudaError_t cudaMalloc(void **p, size_t n)
{
    *p = aligned_alloc(256, (n + 255) / 256 * 256);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void *p)
{
    free(p);
    return cudaSuccess;
}
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k)
{
    (void)k;
    if (n) memcpy(dst, src, n);
    return cudaSuccess;
}
cudaError_t cudaMemset(void *p, int v, size_t n)
{
    if (n) memset(p, v, n);
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize(void) { return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int *n)
{
    *n = 1;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int *d)
{
    *d = 0;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int d) { return d == 0 ? cudaSuccess : cudaErrorInvalidDevice; }
cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_err;
    last_err = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError(void) { return last_err; }
cudaError_t cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int dev)
{
    if (dev != 0) return cudaErrorInvalidDevice;
    const char *cc = getenv("DATTN_EMU_CC"); /* "90" (default) or "80": the GPU emulated */
    const int c = cc ? atoi(cc) : 90;
    switch (a) {
    case cudaDevAttrComputeCapabilityMajor: *v = c / 10; break;
    case cudaDevAttrComputeCapabilityMinor: *v = c % 10; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = c >= 90 ? 232448 : 166912; break;
    case cudaDevAttrMultiProcessorCount: { /* few, so that persistent kernels run several units a CTA */
        const char *ns = getenv("DATTN_EMU_SMS");
        *v = ns && atoi(ns) > 0 ? atoi(ns) : 3;
        break;
    }
    default: return cudaErrorInvalidValue;
    }
    return cudaSuccess;
}
const char *cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "emulated error"; }
const char *cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }
}
