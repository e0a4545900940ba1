/* Host emulation of src/cuda/tma.cuh (build.sh puts it in its place): the same functions
 * for the emulated kernels of cuda_runtime.h.
 *
 * A tensor map is the 128-byte CUtensorMap whose bytes hold what the builder was given
 * (base, dimensions, byte strides, box; the same checks and the same ordering of dimensions
 * by stride as the real builder). A bulk tensor copy happens at once when issued: it writes
 * the box into shared memory with the 128-byte swizzle applied to the destination address
 * (16-byte chunk c of a 128-byte row at address x goes to chunk c ^ ((x >> 7) & 7)), zeros
 * for out-of-bounds elements, and completes its bytes on the mbarrier. An mbarrier is its
 * 8-byte shared word: bit 31 the phase, bits 16-30 the arrival count, bits 0-15 the pending
 * arrivals, then a signed 32-bit transaction count. A phase completes when no arrival and no
 * transaction byte is pending; mbar_wait(parity) yields the emulated thread until the phase of
 * that parity has completed. The emulation checks the protocol (a wait that can never end
 * deadlocks the emulated block, as on the GPU), and the two extremes of the timing:
 *   by default a copy lands when issued (early: a buffer overwritten while others still read
 *     it shows as wrong results);
 *   with DATTN_EMU_TMA_LATE=1 a copy reads its source when issued but lands only when a thread
 *     waits for its barrier's phase (late: a read of the buffer without that wait sees the old
 *     bytes). A copy never waited for, found when the next block starts copying, aborts. */
#ifndef DATTN_CUDA_TMA_CUH
#define DATTN_CUDA_TMA_CUH

#include <cuda_runtime.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "ptx.cuh"

typedef struct CUtensorMap_st {
    alignas(64) uint64_t opaque[16];
} CUtensorMap;

typedef struct dattn_bwd_maps {
    CUtensorMap y, w;
    int32_t yrf, wrf;
} dattn_bwd_maps;

void emu_yield(void);    /* emu.cpp */
void emu_progress(void); /* emu.cpp */

/* what the emulated map holds */
struct emu_tmap {
    const char *base;
    uint64_t dims[4];
    uint64_t strides[3]; /* bytes, dimensions 1 .. 3 */
    uint32_t box[4];
};
static_assert(sizeof(emu_tmap) <= sizeof(CUtensorMap), "emulated tensor map");

static inline cudaError_t dattn_tma_rows_map(CUtensorMap *map, int *rows_first, const void *base, int64_t outer,
                                             int64_t rows, int64_t heads, int64_t outer_stride, int64_t row_stride,
                                             int64_t head_stride, int box_rows)
{
    if (((uintptr_t)base & 15) || outer < 1 || rows < 1 || heads < 1 || box_rows < 1 || box_rows > 256 ||
        outer_stride < 0 || row_stride < 64 || head_stride < 64 || (outer_stride * 2) % 16 || (row_stride * 2) % 16 ||
        (head_stride * 2) % 16)
        return cudaErrorInvalidValue;
    const int rf = head_stride > row_stride;
    const int64_t n1 = rf ? rows : heads, s1 = rf ? row_stride : head_stride;
    const int64_t n2 = rf ? heads : rows, s2 = rf ? head_stride : row_stride;
    if (s2 < s1 * n1) return cudaErrorInvalidValue;
    const int64_t s3 = outer > 1 ? outer_stride : s2 * n2;
    if (s3 < s2 * n2) return cudaErrorInvalidValue;
    emu_tmap m;
    memset(&m, 0, sizeof m);
    m.base = (const char *)base;
    m.dims[0] = 64;
    m.dims[1] = (uint64_t)n1;
    m.dims[2] = (uint64_t)n2;
    m.dims[3] = (uint64_t)outer;
    m.strides[0] = (uint64_t)s1 * 2;
    m.strides[1] = (uint64_t)s2 * 2;
    m.strides[2] = (uint64_t)s3 * 2;
    m.box[0] = 64;
    m.box[1] = rf ? (uint32_t)box_rows : 1u;
    m.box[2] = rf ? 1u : (uint32_t)box_rows;
    m.box[3] = 1;
    memset(map, 0, sizeof *map);
    memcpy(map, &m, sizeof m);
    *rows_first = rf;
    return cudaSuccess;
}

DATTN_DEV void tma_fence_proxy_async(void) {}
DATTN_DEV void tma_fence_proxy_async_global(void) {}

/* the barrier's two words */
DATTN_DEV uint32_t *emu_mbar(uint32_t bar) { return (uint32_t *)(emu_smem_base() + bar); }

DATTN_DEV void emu_mbar_complete(uint32_t bar)
{
    uint32_t *w = emu_mbar(bar);
    if ((w[0] & 0xFFFFu) == 0 && (int32_t)w[1] == 0)
        w[0] = ((w[0] ^ 0x80000000u) & 0xFFFF0000u) | ((w[0] >> 16) & 0x7FFFu); /* next phase */
}

DATTN_DEV void mbar_init(uint32_t bar, uint32_t count)
{
    uint32_t *w = emu_mbar(bar);
    w[0] = (count << 16) | count;
    w[1] = 0;
}

DATTN_DEV void mbar_inval(uint32_t bar) { memset(emu_mbar(bar), 0xFF, 8); }

DATTN_DEV void mbar_init_fence(void) {}

DATTN_DEV void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes)
{
    uint32_t *w = emu_mbar(bar);
    w[1] = (uint32_t)((int32_t)w[1] + (int32_t)bytes);
    w[0] -= 1; /* one pending arrival fewer */
    emu_progress();
    emu_mbar_complete(bar);
}

DATTN_DEV void mbar_arrive(uint32_t bar) { mbar_arrive_expect_tx(bar, 0); }

DATTN_DEV void mbar_expect_tx_if(int issue, uint32_t bar, uint32_t bytes)
{
    if (!issue) return;
    uint32_t *w = emu_mbar(bar);
    w[1] = (uint32_t)((int32_t)w[1] + (int32_t)bytes); /* no arrival */
    emu_progress();
}

DATTN_DEV void mbar_arrive_expect_tx_if(int issue, uint32_t bar, uint32_t bytes)
{
    if (issue) mbar_arrive_expect_tx(bar, bytes);
}

/* DATTN_EMU_TMA_LATE=1: copies issued but not landed (the block's shared memory, the barrier,
 * the destination bytes already placed by the swizzle: offset and 16 bytes each) */
struct emu_tma_copy {
    char *smem;
    uint32_t bar;
    std::vector<std::pair<uint32_t, std::vector<char>>> chunks;
};
inline std::vector<emu_tma_copy> emu_tma_pending;

static inline int emu_tma_late(void)
{
    static const int late = getenv("DATTN_EMU_TMA_LATE") && atoi(getenv("DATTN_EMU_TMA_LATE")) != 0;
    return late;
}

/* lands the pending copies of barrier bar (their bytes complete its transactions) */
static inline void emu_tma_land(uint32_t bar)
{
    for (size_t i = 0; i < emu_tma_pending.size();) {
        emu_tma_copy &c = emu_tma_pending[i];
        if (c.smem != emu_smem_base()) emu_fail("emulated TMA: a bulk copy of an earlier block was never waited for");
        if (c.bar != bar) {
            i++;
            continue;
        }
        uint32_t bytes = 0;
        for (auto &ch : c.chunks) {
            memcpy(emu_smem_base() + ch.first, ch.second.data(), ch.second.size());
            bytes += (uint32_t)ch.second.size();
        }
        uint32_t *w = emu_mbar(bar);
        w[1] = (uint32_t)((int32_t)w[1] - (int32_t)bytes);
        emu_mbar_complete(bar);
        emu_tma_pending.erase(emu_tma_pending.begin() + (long)i);
    }
}

DATTN_DEV void mbar_wait(uint32_t bar, uint32_t parity)
{
    const int late = emu_tma_late();
    if (late) emu_tma_land(bar);
    while ((emu_mbar(bar)[0] >> 31) == (parity & 1u)) {
        emu_yield();
        if (late) emu_tma_land(bar); /* (copies issued while this thread waited) */
    }
}

/* bulk reductions (fp32 add into global memory): by default done when issued; with
 * DATTN_EMU_TMA_LATE=1 done (source read, sums added) only at the next bulk wait, so that a
 * source overwritten before bulk_wait_read_all shows as wrong sums. One never waited for,
 * found when a later block issues or waits, aborts. (Bulk groups are not tracked per thread:
 * any wait completes every pending reduction.) */
struct emu_bulk_red {
    char *smem;
    uint32_t src, bytes;
    float *dst;
};
inline std::vector<emu_bulk_red> emu_bulk_pending;

static inline void emu_bulk_do(const emu_bulk_red &r)
{
    if (r.smem != emu_smem_base()) emu_fail("emulated TMA: a bulk reduction of an earlier block was never waited for");
    float v[4];
    for (uint32_t o = 0; o < r.bytes; o += 16) {
        memcpy(v, emu_smem_base() + r.src + o, 16);
        for (int i = 0; i < 4; i++) r.dst[o / 4 + i] += v[i];
    }
}

DATTN_DEV void bulk_reduce_add_f32(float *dst, uint32_t src, uint32_t bytes)
{
    if ((bytes & 15u) || (src & 15u) || ((uintptr_t)dst & 15u)) emu_fail("emulated TMA: a misaligned bulk reduction");
    for (auto &p : emu_bulk_pending)
        if (p.smem != emu_smem_base()) emu_fail("emulated TMA: a bulk reduction of an earlier block was never waited for");
    const emu_bulk_red r = {emu_smem_base(), src, bytes, dst};
    if (emu_tma_late()) emu_bulk_pending.push_back(r);
    else emu_bulk_do(r);
}

DATTN_DEV void bulk_commit(void) {}

DATTN_DEV void bulk_wait_all(void)
{
    for (auto &p : emu_bulk_pending) emu_bulk_do(p);
    emu_bulk_pending.clear();
}

DATTN_DEV void bulk_wait_read_all(void) { bulk_wait_all(); }

DATTN_DEV void tma_load_4d(uint32_t dst, const void *map, uint32_t bar, int c0, int c1, int c2, int c3)
{
    emu_tmap m;
    memcpy(&m, map, sizeof m);
    const int c[4] = {c0, c1, c2, c3};
    const uint32_t rowb = m.box[0] * 2; /* bytes of one box row */
    const int late = emu_tma_late();
    emu_tma_copy lc;
    if (late) {
        for (auto &p : emu_tma_pending)
            if (p.smem != emu_smem_base()) emu_fail("emulated TMA: a bulk copy of an earlier block was never waited for");
        lc.smem = emu_smem_base();
        lc.bar = bar;
    }
    uint32_t r = 0;
    for (uint32_t i3 = 0; i3 < m.box[3]; i3++)
        for (uint32_t i2 = 0; i2 < m.box[2]; i2++)
            for (uint32_t i1 = 0; i1 < m.box[1]; i1++, r++) {
                const int64_t x1 = (int64_t)c[1] + i1, x2 = (int64_t)c[2] + i2, x3 = (int64_t)c[3] + i3;
                const int in = x1 >= 0 && x2 >= 0 && x3 >= 0 && (uint64_t)x1 < m.dims[1] && (uint64_t)x2 < m.dims[2] &&
                               (uint64_t)x3 < m.dims[3];
                const char *src = m.base + x1 * (int64_t)m.strides[0] + x2 * (int64_t)m.strides[1] +
                                  x3 * (int64_t)m.strides[2] + (int64_t)c[0] * 2;
                for (uint32_t ch = 0; ch < rowb / 16; ch++) {
                    const uint32_t a = dst + r * rowb + ch * 16;
                    const uint32_t sw = (a & ~0x70u) | ((((a >> 4) & 7u) ^ ((a >> 7) & 7u)) << 4);
                    char v[16];
                    if (in && (uint64_t)(c[0] + 8 * (int)ch) < m.dims[0]) memcpy(v, src + ch * 16, 16);
                    else memset(v, 0, 16);
                    if (late) lc.chunks.emplace_back(sw, std::vector<char>(v, v + 16));
                    else memcpy(emu_smem_base() + sw, v, 16);
                }
            }
    if (late) { /* lands, and completes its bytes, when its barrier is waited for */
        emu_tma_pending.push_back(std::move(lc));
        return;
    }
    uint32_t *w = emu_mbar(bar);
    w[1] = (uint32_t)((int32_t)w[1] - (int32_t)(r * rowb));
    emu_mbar_complete(bar);
}

DATTN_DEV void tma_load_rows(uint32_t dst, const void *map, uint32_t bar, int rows_first, int head, int row,
                             int outer)
{
    tma_load_4d(dst, map, bar, 0, rows_first ? row : head, rows_first ? head : row, outer);
}

DATTN_DEV void tma_load_rows_if(int issue, uint32_t dst, const void *map, uint32_t bar, int rows_first, int head,
                                int row, int outer)
{
    if (issue) tma_load_rows(dst, map, bar, rows_first, head, row, outer);
}

#endif
