/* Hopper (sm_90) tensor memory access: the host-side tensor maps and the device-side bulk
 * tensor copies and mbarriers that move 64-column (128-byte) row tiles of Q / K / V / dO into
 * the 128-byte-swizzled shared-memory layout the kernels read (sm90.cuh's sw128_off, which for
 * D = 64 is fwd_sm80.cuh's / bwd_sm80.cuh's swz<64>). Issue 6 item 1; NOTES "Plan: the
 * backward's Y / W tiles by TMA". Checked on the GPU by tests/test_tma.cu.
 *
 * Host: dattn_tma_rows_map() builds a map of a [outer][rows][H][64] 16-bit tensor (any
 * strides that are multiples of 16 bytes): box = `box_rows` rows of one head, 64 columns,
 * CU_TENSOR_MAP_SWIZZLE_128B; rows past `rows` (and outer indices past `outer`) are out of
 * bounds and arrive as zeros. The padded layout is outer = B, rows = L; the packed one
 * outer = 1, rows = T. Always a 4-D map (64, H, rows, outer), innermost first. cuTensorMapEncodeTiled is reached through
 * cudaGetDriverEntryPointByVersion, so nothing links libcuda.
 *
 * Device (instructions for compute capability 9.0 and newer): mbarrier init / expect-tx arrive / parity wait, and
 * the 3-D / 4-D bulk tensor loads that complete on an mbarrier. The tile's shared address must
 * be 1024-byte aligned (the 128-byte swizzle's atom), the mbarrier's 8-byte aligned; the map is
 * a __grid_constant__ kernel parameter whose address is passed as a generic pointer. */
#ifndef DATTN_CUDA_TMA_CUH
#define DATTN_CUDA_TMA_CUH

#include <cuda.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include "ptx.cuh" /* DATTN_DEV */

/* A tensor map over 16-bit elements [outer][rows][heads][64] at any element strides (the
 * last dimension contiguous). The map's dimensions are ordered by stride, as the driver
 * expects nested strides: (64, heads, rows, outer) when head_stride <= row_stride (the
 * [B][L][H][D] layouts, fused QKV included), else (64, rows, heads, outer) (head-major
 * [B][H][L][D]); *rows_first says which, for tma_load_rows. Returns cudaErrorInvalidValue
 * when the layout cannot be mapped (a stride or the base not a multiple of 16 bytes, a
 * dimension out of range, an outer stride below the inner extent), cudaErrorNotSupported
 * when the driver has no cuTensorMapEncodeTiled; the caller then takes its cp.async path. */
static inline cudaError_t dattn_tma_rows_map(CUtensorMap *map, int *rows_first, const void *base, int64_t outer,
                                             int64_t rows, int64_t heads, int64_t outer_stride, int64_t row_stride,
                                             int64_t head_stride, int box_rows)
{
    typedef CUresult (*encode_fn)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *, const cuuint64_t *,
                                  const cuuint64_t *, const cuuint32_t *, const cuuint32_t *, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    static encode_fn encode = 0; /* looked up once per translation unit (threads racing here
                                   * all store the same pointer) */
    if (((uintptr_t)base & 15) || outer < 1 || rows < 1 || heads < 1 || box_rows < 1 || box_rows > 256 ||
        outer_stride < 0 || row_stride < 64 || head_stride < 64 || (outer_stride * 2) % 16 || (row_stride * 2) % 16 ||
        (head_stride * 2) % 16)
        return cudaErrorInvalidValue;
    if (!encode) {
        void *fn = 0;
        cudaDriverEntryPointQueryResult q;
        if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) !=
                cudaSuccess ||
            q != cudaDriverEntryPointSuccess || !fn)
            return cudaErrorNotSupported;
        encode = (encode_fn)fn;
    }
    const int rf = head_stride > row_stride;
    const int64_t n1 = rf ? rows : heads, s1 = rf ? row_stride : head_stride;
    const int64_t n2 = rf ? heads : rows, s2 = rf ? head_stride : row_stride;
    if (s2 < s1 * n1) return cudaErrorInvalidValue; /* the two dimensions overlap */
    /* one outer index: any stride past the inner extent (the dimension has one element) */
    const int64_t s3 = outer > 1 ? outer_stride : s2 * n2;
    if (s3 < s2 * n2) return cudaErrorInvalidValue;
    const cuuint64_t dims[4] = {64, (cuuint64_t)n1, (cuuint64_t)n2, (cuuint64_t)outer};
    /* byte strides of dimensions 1 .. 3 (dimension 0 is contiguous) */
    const cuuint64_t strides[3] = {(cuuint64_t)s1 * 2, (cuuint64_t)s2 * 2, (cuuint64_t)s3 * 2};
    const cuuint32_t box[4] = {64, rf ? (cuuint32_t)box_rows : 1u, rf ? 1u : (cuuint32_t)box_rows, 1};
    const cuuint32_t estr[4] = {1, 1, 1, 1};
    const CUresult r = encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, (void *)base, dims, strides, box, estr,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) return cudaErrorInvalidValue;
    *rows_first = rf;
    return cudaSuccess;
}

/* the device functions exist in every compilation pass (so that kernels and tests parse);
 * their instructions only for compute capability 9.0 and newer, a trap elsewhere (the callers
 * dispatch at run time) */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define DATTN_TMA_ONLY(...) __VA_ARGS__
#elif defined(__CUDA_ARCH__)
#define DATTN_TMA_ONLY(...) __trap()
#else
#define DATTN_TMA_ONLY(...)
#endif

/* The two maps a TMA backward kernel loads its column tiles through (bwd_sm80.cuh, tc3t): Y
 * and W of the kernel (dq kernel: K, V; dkdv kernel: Q, dO), each with its rows_first flag; a
 * __grid_constant__ kernel parameter, built by the launcher (bwd_sm80_inst.cuh). */
typedef struct dattn_bwd_maps {
    CUtensorMap y, w;
    int32_t yrf, wrf;
} dattn_bwd_maps;

/* orders this thread's (and, through a preceding barrier, the CTA's) earlier generic-proxy
 * accesses of shared memory (ldmatrix reads, cp.async writes of the same buffer) before its
 * following async-proxy ones (a bulk tensor copy into that buffer) */
DATTN_DEV void tma_fence_proxy_async(void)
{
    DATTN_TMA_ONLY(asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"));
}

/* the same for global memory: this thread's earlier generic stores (e.g. zeros) before its,
 * or (through a barrier) another thread's, following bulk reductions into them */
DATTN_DEV void tma_fence_proxy_async_global(void)
{
    DATTN_TMA_ONLY(asm volatile("fence.proxy.async.global;\n" ::: "memory"));
}

DATTN_DEV void mbar_init(uint32_t bar, uint32_t count)
{
    DATTN_TMA_ONLY(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory"));
}

/* invalidates a barrier whose phases are all complete and waited for, before mbar_init
 * reuses its word */
DATTN_DEV void mbar_inval(uint32_t bar)
{
    DATTN_TMA_ONLY(asm volatile("mbarrier.inval.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory"));
}

/* makes initialised mbarriers visible to the async proxy (the bulk copies) */
DATTN_DEV void mbar_init_fence(void)
{
    DATTN_TMA_ONLY(asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"));
}

/* one arrival that also announces `bytes` of transactions (the bulk copies' sizes), by the
 * lanes with `issue` != 0 only, without a branch (a warp calls it together and one lane
 * arrives) */
DATTN_DEV void mbar_arrive_expect_tx_if(int issue, uint32_t bar, uint32_t bytes)
{
    DATTN_TMA_ONLY(asm volatile("{\n"
                                ".reg .pred p;\n"
                                "setp.ne.b32 p, %2, 0;\n"
                                "@p mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n"
                                "}\n" ::"r"(bar),
                                "r"(bytes), "r"(issue)
                                : "memory"));
}

/* the same by every calling thread */
DATTN_DEV void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) { mbar_arrive_expect_tx_if(1, bar, bytes); }

/* `bytes` of transactions announced without an arrival (lanes with `issue` != 0): the copies can
 * be issued before the issuing thread's own arrival, which then follows its other writes */
DATTN_DEV void mbar_expect_tx_if(int issue, uint32_t bar, uint32_t bytes)
{
    DATTN_TMA_ONLY(asm volatile("{\n"
                                ".reg .pred p;\n"
                                "setp.ne.b32 p, %2, 0;\n"
                                "@p mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n"
                                "}\n" ::"r"(bar),
                                "r"(bytes), "r"(issue)
                                : "memory"));
}

/* one plain arrival (no transaction bytes), e.g. a consumer releasing a stage */
DATTN_DEV void mbar_arrive(uint32_t bar)
{
    DATTN_TMA_ONLY(asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory"));
}

/* waits until the phase with parity `parity` of the barrier has completed */
DATTN_DEV void mbar_wait(uint32_t bar, uint32_t parity)
{
    DATTN_TMA_ONLY(asm volatile(
        "{\n"
        ".reg .pred done;\n"
        "mbar_wait_retry:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra mbar_wait_retry;\n"
        "}\n" ::"r"(bar),
        "r"(parity)
        : "memory"));
}

/* Bulk asynchronous reductions (the TMA unit adds in L2; the warp-specialized backward
 * prototype's table gradients, bench/proto_ws_bwd.cu): bytes (a multiple of 16) of fp32 values
 * at the shared address src, 16-byte aligned, are added element by element to global memory at
 * dst (16-byte aligned). Each joins the issuing thread's open bulk group; bulk_commit closes it.
 * The shared source must be ordered before by fence_proxy_async in its writers (and a barrier).
 * Two reductions of one thread into the same cells are ordered only by bulk_wait_all between
 * them (the sums are then bitwise the same every run). */
DATTN_DEV void bulk_reduce_add_f32(float *dst, uint32_t src, uint32_t bytes)
{
    DATTN_TMA_ONLY(asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(dst),
                                "r"(src), "r"(bytes)
                                : "memory"));
}

DATTN_DEV void bulk_commit(void) { DATTN_TMA_ONLY(asm volatile("cp.async.bulk.commit_group;\n" ::: "memory")); }

/* waits until this thread's committed bulk groups have completed (their global writes done) */
DATTN_DEV void bulk_wait_all(void) { DATTN_TMA_ONLY(asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory")); }

/* waits until they have read their shared sources (the buffers may be written again) */
DATTN_DEV void bulk_wait_read_all(void)
{
    DATTN_TMA_ONLY(asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"));
}

/* box at coordinates (c0 = column, c1 = head, c2 = row, c3 = outer) of the map into the
 * shared tile at dst, by the lanes with `issue` != 0 only (no branch); completes as
 * transaction bytes (the whole box, out-of-bounds zeros included) on the mbarrier bar */
DATTN_DEV void tma_load_4d_if(int issue, uint32_t dst, const void *map, uint32_t bar, int c0, int c1, int c2, int c3)
{
    DATTN_TMA_ONLY(asm volatile(
        "{\n"
        ".reg .pred p;\n"
        "setp.ne.b32 p, %7, 0;\n"
        "@p cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6];\n"
        "}\n" ::"r"(dst),
        "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "r"(issue)
        : "memory"));
}

/* the same by every calling thread */
DATTN_DEV void tma_load_4d(uint32_t dst, const void *map, uint32_t bar, int c0, int c1, int c2, int c3)
{
    tma_load_4d_if(1, dst, map, bar, c0, c1, c2, c3);
}

/* the box of rows row .. row + box_rows - 1 of head `head`, outer index `outer`
 * (rows_first as dattn_tma_rows_map set it) */
DATTN_DEV void tma_load_rows(uint32_t dst, const void *map, uint32_t bar, int rows_first, int head, int row,
                             int outer)
{
    tma_load_4d(dst, map, bar, 0, rows_first ? row : head, rows_first ? head : row, outer);
}

/* tma_load_rows by the lanes with `issue` != 0 only */
DATTN_DEV void tma_load_rows_if(int issue, uint32_t dst, const void *map, uint32_t bar, int rows_first, int head,
                                int row, int outer)
{
    tma_load_4d_if(issue, dst, map, bar, 0, rows_first ? row : head, rows_first ? head : row, outer);
}

#endif
