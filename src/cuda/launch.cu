/* CUDA backend entry points (the dattn_cuda_* functions of internal.h): device checks,
 * workspace layout, the kernel argument block, kernel choice and launches. C-style host
 * code; it never allocates device memory, never synchronizes and never prints.
 *
 * Kernel choice for a forward call:
 *   fp16/bf16, D in {32, 64, 128}, 16-byte aligned rows, a slot map non-decreasing in r
 *       (every real config; not max_relative_positions - 1 < position_buckets / 2)
 *       -> on compute capability 9.0 with D = 64, the padded layout without a mask or
 *          dropout, c2p and p2c both or neither and L >= FWD_WS_MIN_L (384): the
 *          warp-specialized forward (fwd_ws_d64_sm90.cu) in its wskgt form (FWD_WS_DEFAULT_VAR;
 *          wskg where a call cannot take TE);
 *       -> on compute capability 9.0 with D = 64 otherwise (DATTN_SM90_DEFAULT): the Hopper
 *          wgmma kernel, one-warpgroup instance (sm90w1g, sm90w1h at L <= 512; fwd_sm90.cuh,
 *          instances_sm90.def);
 *       -> otherwise the tensor-core kernel (fwd_sm80.cuh): the large configuration on
 *          sm_90, the 99 KB one elsewhere;
 *   anything else (fp32 in either math mode, other D <= 256, unaligned rows)
 *       -> the simple kernel (fwd_simple.cu).
 * The environment variable DATTN_CUDA_FWD forces a path (tests, A/B benchmarks):
 *   simple  the simple kernel;
 *   small   the 99 KB mma.sync configuration;
 *   sm80    the mma.sync kernel (large configuration where it fits), never the wgmma one;
 *   sm90    the wgmma kernel; a call it cannot run (other GPU, dtype, D, alignment)
 *           returns UNSUPPORTED instead of falling back;
 *   sm90n64 | sm90n128  the same with 64- / 128-key tiles where that head dim has both
 *           (default: SM90_BN below);
 *   sm90w1  the wgmma kernel in the mma.sync kernel's geometry (D = 64: one warpgroup of
 *           two 16-row strips per warp, BM 128, BN 64, two CTAs per SM); D = 128 falls
 *           back to the two-warpgroup instance;
 *   sm90w1ov  sm90w1 with the next key tile's K side loaded during the softmax;
 *   sm90w1b  sm90w1 with the lean loop (fewer instructions per tile, same arithmetic);
 *   sm90w1c  sm90w1b with the band tile's window products software-pipelined (same
 *           arithmetic, bitwise the same results);
 *   sm90w1d  sm90w1b with the tile loop reordered for saturated / plain tiles (score product
 *           before the V load, P V before the next K side; same arithmetic, bitwise the same
 *           results);
 *   sm90w1e  sm90w1c with the band tile's c2p-scratch barrier after the first p2c group's
 *           products, the first key tile's ring rows through running pointers and the
 *           saturated c2p row constants only in CTAs that have a saturated tile (same
 *           arithmetic, bitwise the same results);
 *   sm90w1f  sm90w1e with the K side of a band tile (window table, ring rows) loaded while the
 *           P V wgmma runs (bitwise the same results);
 *   sm90w1g  sm90w1c with a saturated tile's p2c column constants entering through the score
 *           product (one bf16 k16 step: ones x the keys' (hi, lo) pairs, which the kps prologue
 *           then writes instead of fp32 sums, same workspace); not bitwise sm90w1c (hi + lo
 *           is the fp32 constant to ~2^-16 relative);
 *   sm90w1h  sm90w1g with sm90w1e's leaner band-tile overheads (bitwise sm90w1g);
 *   ws      the warp-specialized forward (fwd_ws_d64_sm90.cu: sm_90, fp16 / bf16, D = 64,
 *           padded (any mask) or packed, no dropout, c2p and p2c both or neither, TMA-mappable
 *           rows); a call it cannot run returns UNSUPPORTED instead of falling back. The default
 *           takes it for padded calls without a mask at L >= FWD_WS_MIN_L (below);
 *   wsk     ws with a saturated tile's column constants through the score product (a bf16
 *           k16 step of ones x the kps planes' (hi, lo) pairs, as sm90w1g; padded or packed);
 *   wsg     ws with a band tile's G of its window's second half kept (in registers) from the
 *           previous band tile (padded unmasked calls with position terms; others run ws);
 *   wskg    both;
 *   wskgt   wskg with the band tiles' ring blocks by TMA from per-call expanded tables in the
 *           workspace (a prologue kernel writes them; padded unmasked calls with position terms,
 *           others run wskg): the default's form;
 *   wsp     ws on persistent CTAs (one per SM over the (row block, head, sequence) units: the
 *           producer stages the next unit while the consumers end theirs; unmasked calls, others
 *           run ws), to be measured.
 * Dropout runs on both forward paths; on the tensor-core path the HF padded rows of a
 * dropout call are written by a small extra kernel (their mean depends on the row's mask).
 *
 * fp32 exception to the list above:
 *   fp32_math = DATTN_MATH_TF32, D in {32, 64, 128}, 16-byte aligned rows and strides,
 *       enough shared memory (D = 128: an H100/H200) -> the TF32 tensor-core kernel
 *       (fwd_tf32.cu, tf32_ok);
 *   otherwise (IEEE mode, or a TF32 call that kernel cannot run), D in {32, 64, 128}, aligned,
 *       enough shared memory -> the register-tiled IEEE fp32 kernel (fwd_f32.cu,
 *       f32_tiled_ok); other fp32 calls keep the simple kernel (IEEE as well).
 * DATTN_CUDA_FWD=simple forces the simple kernel for fp32 too (either mode);
 * DATTN_CUDA_FWD=f32 pins the IEEE tiled kernel, in TF32 mode too, and makes an fp32 call
 * it cannot run UNSUPPORTED; DATTN_CUDA_FWD=tf32 makes an fp32 call the TF32 kernel cannot
 * run (IEEE mode included) UNSUPPORTED (tests, A/B runs). The backward ignores fp32_math:
 * it computes IEEE fp32 in either mode.
 *
 * Backward (every path without float atomics on its outputs, bitwise deterministic):
 *   sm_90 (H100 / H200), fp16/bf16, D = 64, padded (any mask) or packed, dropout, c2p and p2c both on (a
 *       monotone slot map) or both off, tensors a TMA map can describe -> the
 *       warp-specialized wgmma kernels ("ws", bwd_ws_d64_sm90.cu: TMA, setmaxnreg, band table
 *       gradients by bulk reductions; NOTES "The warp-specialized backward in the library");
 *   fp16/bf16, D in {64, 128} (dropout: D = 64), att span S <= 256 with S % 8 == 0, a monotone
 *       slot map, 16-byte aligned rows -> tensor-core kernels (bwd_sm80.cuh);
 *   anything else -> the simple kernels of bwd_simple.cu.
 * At D = 64 the tensor-core backward is the round-3 pair with the lean tile loop, the run-sum
 * scatter, the four-warp saturated constants, the lean P / dS loop and both kernels' tile
 * body per tile class (bwd_tc3f_d64.cu, "tc3f"; tc3f 1.018 / 1.005 / 1.014x tc3e's backward,
 * bitwise equal, bench/results/gpu-2026-11-30-tc3f/; "tc3e" = its dq kernel + tc3d's dkdv
 * kernel, 1.039 / 1.014 / 1.019x tc3d's backward, bitwise equal, bench/results/gpu-2026-11-30-tc3e/;
 * "tc3d" = tc3c (tc3s + tc3k) + lean P / dS: sliding C window, 2 CTAs per SM; tc3d 1.055 /
 * 1.042 / 1.105x tc3c's backward at B32 L512 / B8 L2048 / B2 L8192, bitwise equal,
 * bench/results/gpu-2026-11-30-tc3d/; tc3s alone 1.23 / 1.25 / 1.08x and tc3k alone 1.00 /
 * 1.04 / 1.08x tc3b's, bench/results/gpu-2026-11-30-bwdvar/)
 * where its shared memory fits; D = 128 (and D = 64 where tc3 does not fit) runs the round-2 kernels (bwd_sm80.cu).
 * DATTN_CUDA_BWD (tests, A/B measurements; read by the workspace query and the call alike):
 *   simple  the simple backward;
 *   tc2     pins the round-2 tensor-core kernels at D = 64 too (smaller workspace: half the
 *           table-gradient partial groups);
 *   tc3     the round-3 kernels with the first tile loop (bwd_tc3_d64.cu; the previous
 *           default, bitwise the same results as tc3b, the same workspace and routing);
 *   tc3b    the lean tile loop alone (bwd_tc3b_d64.cu; the previous default);
 *   tc3p    tc3b with P rounded once to the storage dtype for dV (bwd_tc3p_d64.cu; opt-in:
 *           FlashAttention's / transformers' eager rounding of P instead of tc3b's hi + lo
 *           parts; dq, dk, dpk, dpq bitwise the same as tc3b; same workspace and routing);
 *   tc3k    tc3b with the saturated column constants summed by all four warps
 *           (bwd_tc3k_d64.cu; deterministic, not bitwise tc3b; same workspace and routing);
 *   tc3s    tc3b with the run-sum scatter of log-zone band tiles (bwd_tc3s_d64.cu; opt-in,
 *           deterministic, not bitwise tc3b: fewer fp16 roundings of the slot sums C; the
 *           same workspace and routing);
 *   tc3c    tc3s + tc3k (bwd_tc3c_d64.cu; the previous default, bitwise the same results as
 *           tc3d; the same workspace and routing);
 *   tc3d    tc3c with the lean P / dS loop (bwd_tc3d_d64.cu; the previous default, bitwise
 *           the same results as tc3e; the same workspace and routing);
 *   tc3e    tc3d with the dq kernel's tile body compiled once for band tiles and once for
 *           the others (bwd_tc3e_d64.cu: its dq kernel, tc3d's dkdv kernel; the previous
 *           default, bitwise the same results as tc3f; the same workspace and routing);
 *   tc3f    tc3e whose dkdv kernel compiles the tile body per tile class too (bwd_tc3f_d64.cu;
 *           the previous default, with the separate D_i pass);
 *   tc3g    the default where the ws kernels do not run (other GPUs, unmappable tensors: see
 *           above): tc3f without the separate D_i launch: its dq kernel computes
 *           D_i = dO_i . O_i of its rows in its prologue and stores it for the dkdv kernel
 *           (bwd_tc3g_d64.cu: its dq kernel, tc3f's dkdv kernel; bitwise the same results as
 *           tc3f; the same workspace and routing; one launch fewer per call), accepted by name;
 *   tc3t    tc3g whose full column tiles after a row block's first come by TMA: one thread
 *           issues two bulk tensor copies per tile (bwd_tc3t_d64.cu, both kernels; opt-in until
 *           measured; bitwise the same results as tc3g; the same workspace and routing; a
 *           kernel whose tensors cannot be mapped runs tc3g's / tc3f's).
 * DATTN_CUDA_BWD=ws is the default by name; any of the names above (or tc2, simple) keeps the
 * ws kernels out. The ws kernels copy their band tiles' ring blocks by TMA from per-call expanded
 * tables (a prologue kernel writes them into the workspace: 4 x H x (2 min(R, L + 64) + 384) rows
 * of 64 16-bit values; calls with position terms, not masked calls with dropout): 0.88 / 0.94 /
 * 0.98x the backward's ncu time at B32 L512 / B8 L2048 / B2 L8192, the same bits
 * (bench/results/gpu-2026-12-04-wskgt/call2/a2, as DATTN_CUDA_BWD=wst, the name it keeps);
 * DATTN_CUDA_BWD=wsr pins the previous form, the rings filled row by row by the producer's
 * threads (no expanded tables in the workspace). */
#include <cuda_runtime.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

extern "C" {
#include "../internal.h"
}
#include "common.cuh"

#define X(D, DT, NW, MS, BN, BIG)                                                              \
    extern "C" cudaError_t dattn_launch_fwd_sm80_d##D##_##DT##_w##NW##s##MS##n##BN(             \
        const dattn_fwd_args *a, int grid_x, int grid_y, int grid_z, cudaStream_t stream);     \
    extern "C" int dattn_smem_fwd_sm80_d##D##_##DT##_w##NW##s##MS##n##BN(void);
#include "instances.def"
#undef X

#define Y(D, DT, NW, MS, BN, OV)                                                               \
    extern "C" cudaError_t dattn_launch_fwd_sm90_d##D##_##DT##_n##BN##_w##NW##o##OV(          \
        const dattn_fwd_args *a, int grid_x, int grid_y, int grid_z, cudaStream_t stream);     \
    extern "C" int dattn_smem_fwd_sm90_d##D##_##DT##_n##BN##_w##NW##o##OV(void);
#include "instances_sm90.def"
#undef Y

extern "C" size_t dattn_simple_smem(int D);
extern "C" int dattn_simple_rows(void);
extern "C" cudaError_t dattn_launch_fwd_simple(const dattn_fwd_args *a, int dtype, int grid_x,
                                               int grid_y, int grid_z, cudaStream_t stream);
extern "C" cudaError_t dattn_launch_fwd_prep(const dattn_fwd_args *a, int dtype, int32_t *kvr,
                                             float *vmean, float *kps, int kps_hl, cudaStream_t stream);
extern "C" cudaError_t dattn_launch_fwd_padrows_drop(const dattn_fwd_args *a, int dtype, int grid_x,
                                                     int grid_y, int grid_z, cudaStream_t stream);
extern "C" int dattn_f32_smem(int D);
extern "C" int dattn_f32_rows(void);
extern "C" cudaError_t dattn_launch_fwd_f32(const dattn_fwd_args *a, int grid_x, int grid_y, int grid_z,
                                            cudaStream_t stream);
extern "C" int dattn_tf32_smem(int D);
extern "C" int dattn_tf32_rows(void);
extern "C" cudaError_t dattn_launch_fwd_tf32(const dattn_fwd_args *a, int grid_x, int grid_y, int grid_z,
                                             cudaStream_t stream);
extern "C" size_t dattn_bwd_dq_smem(int D);
extern "C" size_t dattn_bwd_dkdv_smem(int D);
extern "C" cudaError_t dattn_launch_bwd_simple(const dattn_bwd_args *A, int dtype, cudaStream_t stream);
extern "C" size_t dattn_bwd_sm80_smem(int D, int S);
extern "C" cudaError_t dattn_launch_bwd_sm80(const dattn_bwd_args *A, int bf, int tc3, cudaStream_t stream);
extern "C" size_t dattn_bwd_tc3_smem(int D, int S, int v3);
extern "C" size_t dattn_bwd_ws_part_floats(int H, int G, int L, int R);
extern "C" cudaError_t dattn_launch_bwd_ws(const dattn_bwd_args *A, int bf, cudaStream_t stream);
extern "C" cudaError_t dattn_launch_fwd_ws(const dattn_fwd_args *a, int bf, int var, int64_t T, int nsm, int dry,
                                           cudaStream_t stream);
extern "C" int dattn_fwd_ws_kps_hl(const dattn_fwd_args *a, int var);

#define STR2(...) #__VA_ARGS__
#define STR(...) STR2(__VA_ARGS__)

extern "C" int dattn_cuda_built(void) { return 1; }

extern "C" const char *dattn_cuda_archs(void)
{
#ifdef __CUDA_ARCH_LIST__
    return "compute capabilities " STR(__CUDA_ARCH_LIST__);
#else
    return "sm_80+";
#endif
}

/* ------------------------------------------------------------------ device facts */

typedef struct dev_info {
    int ok; /* 1 filled */
    int major, minor, smem_optin, sms;
} dev_info;

#define DEV_MAX 64
static dev_info g_dev[DEV_MAX];

static dattn_status cuda_fail(cudaError_t e, const char *what)
{
    return dattn_set_error(DATTN_CUDA_ERROR, "%s: %s (%s)", what, cudaGetErrorName(e),
                           cudaGetErrorString(e));
}

static dattn_status get_dev(int dev, dev_info *out)
{
    if (dev >= 0 && dev < DEV_MAX && g_dev[dev].ok) {
        *out = g_dev[dev];
        return DATTN_OK;
    }
    dev_info d;
    cudaError_t e;
    if ((e = cudaDeviceGetAttribute(&d.major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&d.minor, cudaDevAttrComputeCapabilityMinor, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess)
        return cuda_fail(e, "cudaDeviceGetAttribute");
    d.ok = 1;
    if (dev >= 0 && dev < DEV_MAX) g_dev[dev] = d; /* benign race: same values */
    *out = d;
    return DATTN_OK;
}

static dattn_status check_cc(int dev, const dev_info *d)
{
    if (d->major < 8)
        return dattn_set_error(DATTN_UNSUPPORTED,
                               "CUDA device %d has compute capability %d.%d; the dattn CUDA "
                               "kernels need 8.0 or newer (Ampere+)",
                               dev, d->major, d->minor);
    return DATTN_OK;
}

extern "C" dattn_status dattn_cuda_device_supported(int32_t device_index)
{
    int n = 0, dev = device_index;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        cudaGetLastError();
        return dattn_set_error(DATTN_UNSUPPORTED, "no usable CUDA device (%s)",
                               e != cudaSuccess ? cudaGetErrorString(e) : "none found");
    }
    if (dev < 0 && (e = cudaGetDevice(&dev)) != cudaSuccess) return cuda_fail(e, "cudaGetDevice");
    if (dev >= n)
        return dattn_set_error(DATTN_UNSUPPORTED, "device_index %d: only %d CUDA device(s)", dev, n);
    dev_info d;
    dattn_status st = get_dev(dev, &d);
    if (st != DATTN_OK) return st;
    return check_cc(dev, &d);
}

/* ------------------------------------------------------------------ slot table */

typedef struct slot_cache {
    int valid;
    int32_t pb, M;
    int64_t rmax;
    int32_t S, lin, R, sat_pos, sat_neg, nlog;
    int mono; /* slot(r) non-decreasing over |r| <= R (what the tensor-core forward's
                 band window assumes; maps with max_relative_positions - 1 below
                 position_buckets / 2 are not: they run the simple kernel) */
    dattn_status st;
    uint16_t tab[DATTN_CUDA_TAB_MAX];
} slot_cache;

static __thread slot_cache g_slots;

/* The compact table of this call's position configuration (cached per thread). */
static dattn_status get_slots(const dattn_call *c, const slot_cache **out)
{
    const dattn_params *p = c->p;
    const int64_t rmax = c->max_len > 0 ? c->max_len - 1 : 0;
    slot_cache *sc = &g_slots;
    if (!(sc->valid && sc->pb == p->position_buckets && sc->M == p->max_relative_positions &&
          sc->rmax == rmax)) {
        dattn_slotmap m;
        sc->valid = 0;
        dattn_status st = dattn_slotmap_build(&m, p->position_buckets, p->max_relative_positions, rmax);
        if (st != DATTN_OK) return st;
        sc->pb = p->position_buckets;
        sc->M = p->max_relative_positions;
        sc->rmax = rmax;
        sc->S = m.S;
        sc->lin = m.lin;
        sc->R = m.R;
        sc->sat_pos = m.sat_pos;
        sc->sat_neg = m.sat_neg;
        sc->nlog = m.R - m.lin - 1 > 0 ? m.R - m.lin - 1 : 0;
        sc->st = DATTN_OK;
        if (2 * (int64_t)m.S - 1 > 65535) {
            sc->st = DATTN_UNSUPPORTED;
        } else if (2 * (int64_t)sc->nlog > DATTN_CUDA_TAB_MAX) {
            sc->st = DATTN_UNSUPPORTED;
        } else {
            for (int k = 0; k < sc->nlog; k++) {
                sc->tab[k] = (uint16_t)dattn_slotmap_get(&m, m.lin + 1 + k);
                sc->tab[sc->nlog + k] = (uint16_t)dattn_slotmap_get(&m, -(m.lin + 1 + k));
            }
        }
        sc->mono = 1;
        for (int64_t r = -(int64_t)m.R; r < m.R; r++)
            if (dattn_slotmap_get(&m, r + 1) < dattn_slotmap_get(&m, r)) sc->mono = 0;
        dattn_slotmap_free(&m);
        sc->valid = 1;
    }
    if (sc->st != DATTN_OK)
        return dattn_set_error(DATTN_UNSUPPORTED,
                               "position_buckets=%d, max_relative_positions=%d: the slot map "
                               "(att span %d, %d log-zone entries) exceeds what the CUDA kernels "
                               "carry (2S <= 65536, <= %d entries)",
                               sc->pb, sc->M, sc->S, 2 * sc->nlog, DATTN_CUDA_TAB_MAX);
    *out = sc;
    return DATTN_OK;
}

/* ------------------------------------------------------------------ workspace */

static int64_t ext_stride(int64_t ext, int64_t stride) { return ext > 1 ? stride : 0; }

static int tc_dtype_dim(const dattn_call *c)
{
    return c->p->dtype != DATTN_F32 && (c->D == 32 || c->D == 64 || c->D == 128);
}

typedef struct ws_layout {
    size_t kvr, vmean, kps, pexp, total; /* byte offsets; (size_t)-1 = absent */
} ws_layout;

static int fws_variant(const char *force);
static int fws_call_var(const dattn_call *c, const char *force);

#define WS_NONE ((size_t)-1)

static size_t al256(size_t x) { return (x + 255) / 256 * 256; }

static dattn_status layout_ws(const dattn_call *c, ws_layout *w)
{
    const dattn_params *p = c->p;
    size_t off = 0;
    w->kvr = w->vmean = w->kps = w->pexp = WS_NONE;
    if (!c->packed && p->mask.data) {
        w->kvr = off;
        off += al256((size_t)c->B * 2 * sizeof(int32_t));
        if (p->padded_rows == DATTN_PADROWS_HF) {
            w->vmean = off;
            off += al256((size_t)c->B * (size_t)c->H * (size_t)c->D * sizeof(float));
        }
    }
    if (c->p2c && tc_dtype_dim(c)) {
        const slot_cache *sc;
        dattn_status st = get_slots(c, &sc);
        if (st != DATTN_OK) return st;
        if (sc->R < c->L) { /* some tiles may be saturated */
            w->kps = off;
            off += al256((c->packed ? (size_t)c->H * 2 * (size_t)c->T
                                    : (size_t)c->B * (size_t)c->H * 2 * (size_t)c->L) *
                         sizeof(float));
        }
        /* the expanded tables of the ws forward's TE kernels (common.cuh) for a call that may take
         * them: the ws path pinned by DATTN_CUDA_FWD or the default's choice (fws_call_var), a
         * variant with TE for this call (dattn_fws_te). The device is not asked: a call the ws
         * path does not run on (another GPU, unaligned rows) leaves the region unused. */
        const int wsv = fws_call_var(c, getenv("DATTN_CUDA_FWD"));
        if (wsv >= 0 && dattn_fws_te(wsv, c->packed != 0, p->mask.data != NULL, c->c2p != 0)) {
            w->pexp = off;
            off += al256((size_t)2 * (size_t)c->H * (size_t)dattn_fws_exp_rows(sc->R, (int)c->L) * 64 * sizeof(uint16_t));
        }
    }
    w->total = off;
    return DATTN_OK;
}

extern "C" size_t dattn_cuda_fwd_workspace(const dattn_call *c)
{
    ws_layout w;
    if (layout_ws(c, &w) != DATTN_OK) return 0; /* the call itself will report it */
    return w.total;
}

/* Backward workspace (floats; rows = B*H*L padded, H*T packed; each region 256-aligned):
 *   di    rows           D_i = dout_i . out_i
 *   rsat  2 rows  [c2p]  row sums of ds/scale over the saturated distances
 *   csat  2 rows  [p2c]  column sums of the same
 *   ppk   SG*H*2S*D [c2p] per-(sequence group, head) fp32 partials of dpk (simple path,
 *         SG = bwd_simple_groups <= G);
 *         H*G*2S*D, one per CTA, when the tensor-core path may run (G = bwd_tc_groups)
 *   ppq   the same for dpq [p2c]
 *   tcr   int32 [2][H][G][2] the tensor-core CTAs' written slot ranges (when it may run)
 *   hfv   B*H*D [mask, HF padded rows, no dropout, the ws kernels may run] the padded rows' dv term
 *         (dattn_bwd_args.hfv); the ws kernels' partials (H*G'*(2 NK 4096 + 1024) per table,
 *         bwd_ws_d64_sm90.cu) also size ppk / ppq when they may run
 * i.e. O(B*H*(5 L + 4 S D)) floats, nothing of size L^2. */
typedef struct bws_layout {
    size_t di, rsat, csat, ppk, ppq, tcr, hfv, pexp, total;
} bws_layout;

/* Tensor-core backward CTAs per head: B*ceil(L/64) row blocks split into G contiguous
 * groups, G*H ~ DATTN_BWD_TC_CTAS (internal.h; one wave of 1-CTA/SM kernels on an H200). The
 * partials are H*G*2S*D floats per table whatever B and L; G depends only on the call,
 * so the summation order (hence every bit) too. */
static int64_t bwd_tc_groups(const dattn_call *c, int tc3)
{
    const int64_t U = (int64_t)c->B * ((c->L + 63) / 64);
    /* tc3: two CTAs per SM, twice the groups (one wave of 2-CTA/SM kernels) */
    int64_t g = (tc3 ? 2 : 1) * DATTN_BWD_TC_CTAS / (c->H > 0 ? c->H : 1);
    if (g < 1) g = 1;
    if (g > U) g = U;
    return g < 1 ? 1 : g;
}

/* The tensor-core backward's call-level conditions (pointer alignment is checked at
 * dispatch); its table partials are [B*H*ceil(L/64)][2S][D] fp32 instead. */
static int bwd_tc_call(const dattn_call *c)
{
    if (c->p->dtype == DATTN_F32 || !(c->D == 64 || c->D == 128)) return 0;
    if (c->drop_threshold && c->D != 64) return 0; /* bwd_sm80.cuh: dropout at D = 64 only */
    if (c->c2p || c->p2c) {
        const slot_cache *sc;
        if (get_slots(c, &sc) != DATTN_OK) return 0;
        if (!sc->mono || sc->S > 256 || sc->S % 8 != 0) return 0;
    }
    return 1;
}

/* The round-3 kernels (D = 64) unless DATTN_CUDA_BWD pins tc2 or simple. Read by the
 * workspace query and by the call alike (the workspace holds twice the groups' partials
 * then; a call that falls back to round 2 at run time uses fewer of them). */
static int bwd_tc3_want(const dattn_call *c)
{
    const char *force = getenv("DATTN_CUDA_BWD");
    if (force && (!strcmp(force, "tc2") || !strcmp(force, "simple"))) return 0;
    return c->D == 64 && bwd_tc_call(c);
}

/* The warp-specialized backward (bwd_ws_d64_sm90.cu): the call-level conditions (the device,
 * sm_90, and the tensors' maps are checked at dispatch); DATTN_CUDA_BWD naming another path
 * keeps it out. */
static int bwd_ws_call(const dattn_call *c)
{
    const char *force = getenv("DATTN_CUDA_BWD");
    if (force && *force && strcmp(force, "ws") != 0 && strcmp(force, "wst") != 0 && strcmp(force, "wsr") != 0) return 0;
    if (c->p->dtype == DATTN_F32 || c->D != 64 || c->c2p != c->p2c || c->B < 1 || c->L < 1) return 0;
    if (c->c2p) {
        const slot_cache *sc;
        if (get_slots(c, &sc) != DATTN_OK || !sc->mono) return 0;
    }
    return 1;
}

/* its CTAs per head: B * ceil(L / 128) row blocks split into G contiguous groups, G * H ~ one
 * wave of its one-CTA-per-SM kernels (the summation order depends on the call only) */
static int64_t bwd_ws_groups(const dattn_call *c)
{
    const int64_t U = (int64_t)c->B * ((c->L + 127) / 128);
    int64_t g = DATTN_BWD_TC_CTAS / (c->H > 0 ? c->H : 1);
    if (g > U) g = U;
    return g < 1 ? 1 : g;
}

/* Simple backward: sequence groups of its table-gradient partials (bwd_simple.cu diag),
 * min(B, DATTN_BWD_TC_CTAS / H) >= 1: never more partials than the tensor-core path's. */
static int64_t bwd_simple_groups(const dattn_call *c)
{
    int64_t g = DATTN_BWD_TC_CTAS / (c->H > 0 ? c->H : 1);
    if (g < 1) g = 1;
    if (g > c->B) g = c->B;
    return g < 1 ? 1 : g;
}

static void layout_bws(const dattn_call *c, bws_layout *w)
{
    const size_t rows = c->packed ? (size_t)c->H * (size_t)c->T : (size_t)c->B * (size_t)c->H * (size_t)c->L;
    size_t part = (size_t)bwd_simple_groups(c) * (size_t)c->H * 2 * (size_t)c->S * (size_t)c->D;
    const int tcp = (c->c2p || c->p2c) && bwd_tc_call(c);
    const int tc3 = tcp && bwd_tc3_want(c);
    if (tcp) {
        const size_t tc = (size_t)c->H * (size_t)bwd_tc_groups(c, tc3) * 2 * (size_t)c->S * (size_t)c->D;
        if (tc > part) part = tc;
    }
    if ((c->c2p || c->p2c) && bwd_ws_call(c)) {
        const slot_cache *sc;
        if (get_slots(c, &sc) == DATTN_OK) {
            const size_t ws = dattn_bwd_ws_part_floats((int)c->H, (int)bwd_ws_groups(c), (int)c->L, sc->R);
            if (ws > part) part = ws;
        }
    }
    size_t off = 0;
    w->rsat = w->csat = w->ppk = w->ppq = w->tcr = w->hfv = w->pexp = WS_NONE;
    w->di = off;
    off += al256(rows * sizeof(float));
    if (tcp) {
        w->tcr = off;
        off += al256((size_t)4 * (size_t)c->H * (size_t)bwd_tc_groups(c, tc3) * sizeof(int32_t));
    }
    if (c->c2p) {
        w->rsat = off;
        off += al256(2 * rows * sizeof(float));
    }
    if (c->p2c) {
        w->csat = off;
        off += al256(2 * rows * sizeof(float));
    }
    if (!c->packed && c->p->mask.data && c->p->padded_rows == DATTN_PADROWS_HF && !c->drop_threshold && bwd_ws_call(c)) {
        w->hfv = off;
        off += al256((size_t)c->B * (size_t)c->H * (size_t)c->D * sizeof(float));
    }
    if (c->c2p) {
        w->ppk = off;
        off += al256(part * sizeof(float));
    }
    if (c->p2c) {
        w->ppq = off;
        off += al256(part * sizeof(float));
    }
    /* the ws backward's expanded tables (dattn_bwd_args.pexp: its rings by TMA; not in the mask +
     * dropout kernels, nor with DATTN_CUDA_BWD=wsr, the rings filled row by row) */
    const char *force = getenv("DATTN_CUDA_BWD");
    const slot_cache *sc;
    if (!(force && !strcmp(force, "wsr")) && c->c2p && !(c->p->mask.data && !c->packed && c->drop_threshold) &&
        bwd_ws_call(c) && get_slots(c, &sc) == DATTN_OK) {
        w->pexp = off;
        off += al256((size_t)4 * (size_t)c->H * (size_t)dattn_fws_exp_rows(sc->R, (int)c->L) * 64 * sizeof(uint16_t));
    }
    w->total = off;
}

extern "C" size_t dattn_cuda_bwd_workspace(const dattn_call *c)
{
    bws_layout w;
    layout_bws(c, &w);
    return w.total;
}

/* ------------------------------------------------------------------ forward */

static int al16(const void *ptr) { return ((uintptr_t)ptr & 15) == 0; }
static int st16(int64_t s) { return (s * 2) % 16 == 0; }

static void set_rows(const dattn_call *c, const dattn_tensor *t, int64_t *sb, int64_t *sl, int64_t *sh)
{
    if (c->packed) {
        *sb = 0;
        *sl = ext_stride(c->T, t->stride[0]);
        *sh = ext_stride(c->H, t->stride[1]);
    } else {
        *sb = ext_stride(c->B, t->stride[0]);
        *sl = ext_stride(c->L, t->stride[1]);
        *sh = ext_stride(c->H, t->stride[2]);
    }
}

typedef cudaError_t (*fwd_launcher)(const dattn_fwd_args *, int, int, int, cudaStream_t);

/* The tensor-core instance for (D, dtype, big), its BM and shared memory. */
static fwd_launcher pick_tc(int D, int bf, int big, int *bm, int *smem)
{
#define X(D_, DT, NW, MS, BN, BIG)                                                             \
    if (D == D_ && bf == (sizeof(#DT) == sizeof("bf16")) && (big == BIG || !BIG)) {            \
        *bm = 16 * MS * NW;                                                                    \
        *smem = dattn_smem_fwd_sm80_d##D_##_##DT##_w##NW##s##MS##n##BN();                      \
        return dattn_launch_fwd_sm80_d##D_##_##DT##_w##NW##s##MS##n##BN;                       \
    }
#include "instances.def"
#undef X
    return NULL;
}

/* Whether the wgmma kernel is the default forward on compute capability 9.0, at D = 64
 * only. On the H200 the first (two-warpgroup, 1 CTA/SM) wgmma kernel measured 3-19%
 * SLOWER than the mma.sync kernel (bench/results/gpu-2026-11-30-sm90/); the one-warpgroup,
 * two-CTAs-per-SM instance (sm90w1) measured faster at every shape: 0.390 / 0.979 / 2.371 ms
 * against 0.396 / 1.009 / 2.491 (B32 L512 / B8 L2048 / B2 L8192, fp16 H12 D64 c2p|p2c;
 * bench/results/gpu-2026-11-30-w1/), so D = 64 defaults to it. D = 128 keeps the mma.sync
 * kernel (its wgmma instance is the two-warpgroup one). DATTN_CUDA_FWD=sm80 forces mma.sync. */
#ifndef DATTN_SM90_DEFAULT
#define DATTN_SM90_DEFAULT 1
#endif

/* The wgmma instance the DEFAULT path (DATTN_SM90_DEFAULT 1, no DATTN_CUDA_FWD) takes at
 * D = 64: 0 the two-warpgroup kernel (SM90_BN keys), 1 the one-warpgroup two-CTAs-per-SM
 * kernel (= DATTN_CUDA_FWD=sm90w1), 2 the same with the early K-side load (= sm90w1ov),
 * 3 the one-warpgroup kernel with the lean loop (= sm90w1b), 4 the same with the pipelined band
 * products (= sm90w1c), 5 the lean loop reordered for saturated / plain tiles (= sm90w1d),
 * 6 sm90w1c with the leaner band-tile overheads (= sm90w1e), 7 sm90w1e with a band tile's K
 * side loaded during P V (= sm90w1f), 8 sm90w1c with the saturated p2c constants through the
 * score product (= sm90w1g), 9 sm90w1g with sm90w1e's band-tile overheads (= sm90w1h).
 * 8 takes sm90w1h at L <= SM90_W1H_MAX_L (below).
 * 8: a saturated tile's p2c column constants entering the score product as a bf16 (hi, lo)
 * k16 step beat sm90w1c at every shape (0.311 / 0.756 / 1.785 ms against 0.311 / 0.777 / 1.919
 * at B32 L512 / B8 L2048 / B2 L8192, fp16 H12 D64 c2p|p2c; no position terms within 0.5%;
 * bench/results/gpu-2026-11-30-w1g/); not bitwise sm90w1c (lse within 1e-5 relative).
 * DATTN_CUDA_FWD=sm90w1c pins the previous default.
 * Before, 4: the pipelined band products beat the lean loop at every shape, bitwise the same results
 * (0.315 / 0.788 / 1.925 ms against 0.373 / 0.903 / 2.048 at B32 L512 / B8 L2048 / B2 L8192,
 * fp16 H12 D64 c2p|p2c; no position terms within +1.1%; bench/results/gpu-2026-11-30-next/).
 * 5 (sm90w1d) lost there (2.153 ms at L8192). Before: 3 beat w1 at every shape (0.370 / 0.902
 * / 2.047 ms against 0.393 / 0.980 / 2.373, bench/results/gpu-2026-11-30-w1b/).
 * DATTN_CUDA_FWD=sm90w1b pins the previous default, sm90w1 the one before. */
#ifndef DATTN_SM90_D64
#define DATTN_SM90_D64 8
#endif

/* With DATTN_SM90_D64 8 the default takes sm90w1h (sm90w1g with sm90w1e's band-tile overheads:
 * the same results bit for bit) when L (packed: max_seqlen) <= this. Measured in one run
 * (bench/results/gpu-2026-11-30-w1h/, fp16 H12 D64 S256 c2p|p2c, ms): B32 L512 0.305 against
 * sm90w1g's 0.312 (every tile a band tile, 8 key tiles per CTA: the per-CTA prologue counts),
 * B8 L2048 0.763 against 0.757, B2 L8192 1.793 against 1.785 (slower there). */
#ifndef SM90_W1H_MAX_L
#define SM90_W1H_MAX_L 512
#endif

/* The default forward takes the warp-specialized kernel (DATTN_CUDA_FWD=ws, in the form
 * FWD_WS_DEFAULT_VAR below) for the calls it runs at L >= this; the calls below keep the
 * wgmma forward above (sm90w1h). Measured in one run (bench/results/gpu-2026-12-03-wsl384/c1,
 * fp16 H12 D64 S256 c2p|p2c, ms): wskg 0.168 / 0.256 / 0.273 / 0.316 against sm90w1h 0.170 /
 * 0.276 / 0.305 / 0.382 at B64 L256 / B48 L384 / B32 L512 / B24 L640: a tie at 256, wskg ahead
 * from 384 on (it was L > 512 before, from gpu-2026-12-02-wsfix/call1's tie at 512, a run
 * before the ws gathers' one-store form and its four-row ring fill). */
#ifndef FWD_WS_MIN_L
#define FWD_WS_MIN_L 384
#endif
/* 1: the default takes ws for masked calls too (from FWD_WS_MIN_L on). 0 until its mask kernels
 * are measured on the GPU (they were written and emulated after call 6; DATTN_CUDA_FWD=ws pins
 * them). */
#ifndef FWD_WS_MASK_DEFAULT
#define FWD_WS_MASK_DEFAULT 0
#endif
/* 1: the default takes ws for packed calls too (from FWD_WS_MIN_L on); 0 until its packed kernels,
 * written after call 10, are measured on the GPU. */
#ifndef FWD_WS_PACKED_DEFAULT
#define FWD_WS_PACKED_DEFAULT 0
#endif
/* The ws form the default takes there (FWS_VAR_* bits, common.cuh): wskgt (KC | GR | TE). wskg
 * (KC | GR) was the fastest of ws / wsk / wsg / wskg / wsp at every shape of
 * gpu-2026-12-02-wsfix/call1 above L 512 (B8 L2048: 0.669 ms against ws 0.715, wsg 0.680, wsk
 * 0.703, wsp 0.737); TE took 11 / 4.7 / 1.2 % off it (ncu, the expand prologue counted: 359 ->
 * 320 / 801 -> 763 / 1957 -> 1934 us at B32 L512 / B8 L2048 / B2 L8192, fp16 H12 D64 S256,
 * bench/results/gpu-2026-12-04-wskgt/call1), out and lse bitwise wskg's. A call a bit cannot take
 * runs without it (fws_pick). These four switches can be set at build time (NVCCFLAGS, e.g.
 * -DFWD_WS_MIN_L=1024 -DFWD_WS_DEFAULT_VAR=0) for same-run A/B builds. */
#ifndef FWD_WS_DEFAULT_VAR
#define FWD_WS_DEFAULT_VAR (FWS_VAR_KC | FWS_VAR_GR | FWS_VAR_TE)
#endif

/* Key-tile width of the wgmma kernel when DATTN_CUDA_FWD does not name one. */
#define SM90_BN 128

/* The Hopper (wgmma) instance for (D, dtype, key tile, warps per CTA), its BM and shared
 * memory. nw = 8: two warpgroups, one CTA per SM; nw = 4: one warpgroup of two strips
 * per warp, two CTAs per SM (DATTN_CUDA_FWD=sm90w1); ov = 1: the next K side loads during
 * the softmax (sm90w1ov); ov = 2: the lean loop (sm90w1b); ov = 6: the lean loop with the
 * pipelined band products (sm90w1c); ov = 10: the lean loop reordered for saturated / plain
 * tiles (sm90w1d); ov = 22: sm90w1c with the leaner band-tile overheads (sm90w1e); ov = 54:
 * sm90w1e with a band tile's K side loaded during P V (sm90w1f); ov = 70: sm90w1c with the
 * saturated p2c constants through the score product (sm90w1g); ov = 86: sm90w1g with the
 * leaner band-tile overheads (sm90w1h; instances_sm90.def's OV bits). */
static fwd_launcher pick_sm90(int D, int bf, int bn, int nw, int ov, int *bm, int *smem)
{
#define Y(D_, DT, NW, MS, BN, OV)                                                              \
    if (D == D_ && bf == (sizeof(#DT) == sizeof("bf16")) && bn == BN && nw == NW && ov == OV) { \
        *bm = 16 * MS * NW;                                                                    \
        *smem = dattn_smem_fwd_sm90_d##D_##_##DT##_n##BN##_w##NW##o##OV();                     \
        return dattn_launch_fwd_sm90_d##D_##_##DT##_n##BN##_w##NW##o##OV;                      \
    }
#include "instances_sm90.def"
#undef Y
    return NULL;
}

extern "C" dattn_status dattn_cuda_check(const dattn_call *c)
{
    if (c->D > 256)
        return dattn_set_error(DATTN_UNSUPPORTED, "head_dim %lld > 256 is not supported on CUDA",
                               (long long)c->D);
    if (c->B > 65535 || c->H > 65535)
        return dattn_set_error(DATTN_UNSUPPORTED, "%s > 65535 is not supported on CUDA",
                               c->B > 65535 ? "batch" : "heads");
    if (c->c2p || c->p2c) {
        const slot_cache *sc;
        return get_slots(c, &sc);
    }
    return DATTN_OK;
}

/* The forward argument block of a call (also the first part of the backward's). */
static void fill_fwd_args(const dattn_call *c, const slot_cache *sc, dattn_fwd_args &a)
{
    const dattn_params *p = c->p;
    memset(&a, 0, offsetof(dattn_fwd_args, tab));
    a.q = p->q.data;
    a.k = p->k.data;
    a.v = p->v.data;
    a.pk = c->c2p ? p->pk.data : NULL;
    a.pq = c->p2c ? p->pq.data : NULL;
    a.out = p->out.data;
    a.lse = (float *)p->lse.data;
    a.mask = c->packed ? NULL : (const uint8_t *)p->mask.data;
    a.cu = c->packed ? p->cu_seqlens : NULL;
    set_rows(c, &p->q, &a.q_sb, &a.q_sl, &a.q_sh);
    set_rows(c, &p->k, &a.k_sb, &a.k_sl, &a.k_sh);
    set_rows(c, &p->v, &a.v_sb, &a.v_sl, &a.v_sh);
    set_rows(c, &p->out, &a.o_sb, &a.o_sl, &a.o_sh);
    if (c->packed) {
        a.l_sb = 0;
        a.l_sh = ext_stride(c->H, p->lse.stride[0]);
        a.l_sl = ext_stride(c->T, p->lse.stride[1]);
    } else {
        a.l_sb = ext_stride(c->B, p->lse.stride[0]);
        a.l_sh = ext_stride(c->H, p->lse.stride[1]);
        a.l_sl = ext_stride(c->L, p->lse.stride[2]);
        a.m_sb = ext_stride(c->B, p->mask.stride[0]);
        a.m_sl = ext_stride(c->L, p->mask.stride[1]);
    }
    if (c->c2p) {
        a.pk_sh = ext_stride(c->H, p->pk.stride[0]);
        a.pk_ss = p->pk.stride[1];
    }
    if (c->p2c) {
        a.pq_sh = ext_stride(c->H, p->pq.stride[0]);
        a.pq_ss = p->pq.stride[1];
    }
    a.B = (int32_t)c->B;
    a.H = (int32_t)c->H;
    a.L = (int32_t)c->L;
    a.D = (int32_t)c->D;
    a.packed = c->packed;
    a.c2p = c->c2p;
    a.p2c = c->p2c;
    a.hf = p->padded_rows == DATTN_PADROWS_HF;
    a.sl2 = (float)(1.4426950408889634 / (double)c->scale);
    a.logL = logf((float)c->L);
    if (sc) {
        a.S = sc->S;
        a.lin = sc->lin;
        a.R = sc->R;
        a.sat_pos = sc->sat_pos;
        a.sat_neg = sc->sat_neg;
        a.nlog = sc->nlog;
        memcpy(a.tab, sc->tab, sizeof(uint16_t) * 2 * (size_t)sc->nlog);
    } else {
        a.R = 0x7fffffff;
    }
    if (c->drop_threshold) {
        a.drop_thr = c->drop_threshold;
        a.drop_scale = c->drop_scale;
        a.drop_k0 = (uint32_t)p->dropout_seed;
        a.drop_k1 = (uint32_t)(p->dropout_seed >> 32) ^ (uint32_t)(p->dropout_offset >> 32);
        a.drop_c3 = (uint32_t)p->dropout_offset;
    }
}

/* Every fp32 row 16-byte aligned (pointers and strides). */
static int f32_aligned(const dattn_call *c, const dattn_fwd_args &a)
{
    const int64_t st[12] = {a.q_sb, a.q_sl, a.q_sh, a.k_sb, a.k_sl, a.k_sh,
                            a.v_sb, a.v_sl, a.v_sh, a.o_sb, a.o_sl, a.o_sh};
    for (int t = 0; t < 12; t++)
        if (st[t] % 4) return 0;
    if (!al16(a.q) || !al16(a.k) || !al16(a.v) || !al16(a.out)) return 0;
    if (c->c2p && (!al16(a.pk) || a.pk_sh % 4 || a.pk_ss % 4)) return 0;
    if (c->p2c && (!al16(a.pq) || a.pq_sh % 4 || a.pq_ss % 4)) return 0;
    return 1;
}

/* The register-tiled fp32 kernel (fwd_f32.cu) takes the call: fp32, D in {32, 64, 128}, every
 * row 16-byte aligned (pointers and strides), its shared memory available, and not forced
 * off (DATTN_CUDA_FWD=simple). */
static int f32_tiled_ok(const dattn_call *c, const dattn_fwd_args &a, const dev_info *di, const char *force)
{
    if (c->p->dtype != DATTN_F32 || !(c->D == 32 || c->D == 64 || c->D == 128)) return 0;
    if (force && !strcmp(force, "simple")) return 0;
    if (dattn_f32_smem((int)c->D) > di->smem_optin) return 0;
    return f32_aligned(c, a);
}

/* The TF32 kernel (fwd_tf32.cu) takes an fp32 call in DATTN_MATH_TF32 mode under the same
 * conditions with its own shared memory, unless DATTN_CUDA_FWD pins an IEEE kernel
 * (simple, f32). */
static int tf32_ok(const dattn_call *c, const dattn_fwd_args &a, const dev_info *di, const char *force)
{
    if (c->p->dtype != DATTN_F32 || c->p->fp32_math != DATTN_MATH_TF32) return 0;
    if (!(c->D == 32 || c->D == 64 || c->D == 128)) return 0;
    if (force && (!strcmp(force, "simple") || !strcmp(force, "f32"))) return 0;
    if (dattn_tf32_smem((int)c->D) > di->smem_optin) return 0;
    return f32_aligned(c, a);
}

/* The ws forward's variant bits (FWS_VAR_*) that DATTN_CUDA_FWD pins, or -1 where it names no
 * form of the ws forward. */
static int fws_variant(const char *force)
{
    static const struct { const char *name; int var; } v[] = {
        {"ws", 0}, {"wsk", FWS_VAR_KC}, {"wsg", FWS_VAR_GR}, {"wskg", FWS_VAR_KC | FWS_VAR_GR},
        {"wsp", FWS_VAR_PS}, {"wskgt", FWS_VAR_KC | FWS_VAR_GR | FWS_VAR_TE}};
    for (size_t i = 0; force && i < sizeof v / sizeof v[0]; i++)
        if (!strcmp(force, v[i].name)) return v[i].var;
    return -1;
}

/* The ws forward's variant bits for call c under DATTN_CUDA_FWD = force: the pinned form's, or
 * FWD_WS_DEFAULT_VAR where the default takes the ws path by its rule (D 64, no dropout, L >=
 * FWD_WS_MIN_L, a mask / packed layout only where their switches say), else -1. (The device,
 * dtype and the tensors' alignment and maps are checked by the caller and the dry launch.) */
static int fws_call_var(const dattn_call *c, const char *force)
{
    const dattn_params *p = c->p;
    if (force) return fws_variant(force);
    if (c->D != 64 || c->drop_threshold || c->L < FWD_WS_MIN_L) return -1;
    if (!FWD_WS_MASK_DEFAULT && p->mask.data) return -1;
    if (!FWD_WS_PACKED_DEFAULT && c->packed) return -1;
    return FWD_WS_DEFAULT_VAR;
}

static dattn_status fwd_on_device(const dattn_call *c, int dev)
{
    const dattn_params *p = c->p;
    dev_info di;
    dattn_status st = get_dev(dev, &di);
    if (st != DATTN_OK) return st;
    if ((st = check_cc(dev, &di)) != DATTN_OK) return st;
    if ((st = dattn_cuda_check(c)) != DATTN_OK) return st;

    const slot_cache *sc = NULL;
    if (c->c2p || c->p2c) {
        if ((st = get_slots(c, &sc)) != DATTN_OK) return st;
    }
    ws_layout wl;
    if ((st = layout_ws(c, &wl)) != DATTN_OK) return st;

    dattn_fwd_args a;
    fill_fwd_args(c, sc, a);

    /* path */
    const char *force = getenv("DATTN_CUDA_FWD");
    int tc = tc_dtype_dim(c);
    tc = tc && al16(a.q) && al16(a.k) && al16(a.v) && al16(a.out) && st16(a.q_sb) &&
         st16(a.q_sl) && st16(a.q_sh) && st16(a.k_sb) && st16(a.k_sl) && st16(a.k_sh) &&
         st16(a.v_sb) && st16(a.v_sl) && st16(a.v_sh) && st16(a.o_sb) && st16(a.o_sl) &&
         st16(a.o_sh);
    if (c->c2p) tc = tc && al16(a.pk) && st16(a.pk_sh) && st16(a.pk_ss);
    if (c->p2c) tc = tc && al16(a.pq) && st16(a.pq_sh) && st16(a.pq_ss);
    if (sc && !sc->mono) tc = 0; /* the band window needs a monotone slot map */
    int big = di.major == 9 && di.minor == 0;
    const int force_sm90 = force && !strncmp(force, "sm90", 4);
    /* one-warpgroup instance: forced, or the default path's choice at D = 64 */
    const int dflt1 = !force_sm90 && c->D == 64 && DATTN_SM90_D64 != 0;
    const int w1ov = (force && !strcmp(force, "sm90w1ov")) || (dflt1 && DATTN_SM90_D64 == 2);
    const int w1b = (force && !strcmp(force, "sm90w1b")) || (dflt1 && DATTN_SM90_D64 == 3);
    const int w1c = (force && !strcmp(force, "sm90w1c")) || (dflt1 && DATTN_SM90_D64 == 4);
    const int w1d = (force && !strcmp(force, "sm90w1d")) || (dflt1 && DATTN_SM90_D64 == 5);
    const int w1e = (force && !strcmp(force, "sm90w1e")) || (dflt1 && DATTN_SM90_D64 == 6);
    const int w1f = (force && !strcmp(force, "sm90w1f")) || (dflt1 && DATTN_SM90_D64 == 7);
    const int w1g = (force && !strcmp(force, "sm90w1g")) || (dflt1 && DATTN_SM90_D64 == 8);
    /* the default at D = 64 is sm90w1g, and sm90w1h (the same bits) where every CTA has few
     * key tiles, all band tiles: L <= SM90_W1H_MAX_L (see its definition) */
    const int w1h = (force && !strcmp(force, "sm90w1h")) || (dflt1 && DATTN_SM90_D64 == 9) ||
                    (dflt1 && DATTN_SM90_D64 == 8 && c->L <= SM90_W1H_MAX_L);
    const int w1 = (force && !strcmp(force, "sm90w1")) || w1ov || w1b || w1c || w1d || w1e || w1f || w1g || w1h || dflt1;
    const int bn90 = (force && !strcmp(force, "sm90n64")) || w1 ? 64 : force && !strcmp(force, "sm90n128") ? 128 : SM90_BN;
    if (force && !strcmp(force, "simple")) tc = 0;
    if (force && !strcmp(force, "small")) big = 0;
    int bm = 0, smem = 0;
    fwd_launcher lf = NULL;
    /* Hopper: the wgmma kernel when DATTN_SM90_DEFAULT says so (and no mma.sync / simple
     * path is forced), or when DATTN_CUDA_FWD=sm90* asks for it */
    if (tc && di.major == 9 && di.minor == 0 &&
        (force_sm90 || (DATTN_SM90_DEFAULT && c->D == 64 &&
                        !(force && (!strcmp(force, "sm80") || !strcmp(force, "small")))))) {
        lf = pick_sm90((int)c->D, p->dtype == DATTN_BF16, bn90, w1 ? 4 : 8, w1h ? 86 : w1g ? 70 : w1f ? 54 : w1e ? 22 : w1d ? 10 : w1c ? 6 : w1b ? 2 : w1ov, &bm, &smem);
        if (!lf && !w1) lf = pick_sm90((int)c->D, p->dtype == DATTN_BF16, bn90 == 64 ? 128 : 64, 8, 0, &bm, &smem);
        /* sm90w1* where that instance does not exist (D = 128): the two-warpgroup kernel */
        if (!lf && w1) lf = pick_sm90((int)c->D, p->dtype == DATTN_BF16, 64, 8, 0, &bm, &smem);
        if (lf && smem > di.smem_optin) lf = NULL;
    }
    if (force_sm90 && !lf)
        return dattn_set_error(DATTN_UNSUPPORTED,
                               "DATTN_CUDA_FWD=sm90: the wgmma forward needs compute capability "
                               "9.0 (this device: %d.%d), fp16/bf16, head_dim 64 or 128, 16-byte aligned "
                               "rows and a monotone slot map",
                               di.major, di.minor);
    /* the warp-specialized forward: pinned, or the default's choice from FWD_WS_MIN_L on (the
     * dry call checks the call and the tensors' maps; the kps planes come below) */
    const int ws_pin = fws_variant(force) >= 0, wvar = fws_call_var(c, force);
    int wsf = 0;
    if (tc && di.major == 9 && di.minor == 0 && c->D == 64 && wvar >= 0)
        wsf = dattn_launch_fwd_ws(&a, p->dtype == DATTN_BF16, wvar, c->T, di.sms, 1, NULL) == cudaSuccess;
    if (ws_pin && !wsf)
        return dattn_set_error(DATTN_UNSUPPORTED,
                               "DATTN_CUDA_FWD=%s: the warp-specialized forward needs compute capability 9.0 "
                               "(this device: %d.%d), fp16/bf16, head_dim 64, the padded layout or the packed one without a "
                               "mask, no dropout, c2p and p2c both on or both off, 16-byte aligned rows and a "
                               "monotone slot map",
                               force, di.major, di.minor);
    if (tc && !lf) {
        lf = pick_tc((int)c->D, p->dtype == DATTN_BF16, big, &bm, &smem);
        if (!lf || smem > di.smem_optin) {
            big = 0;
            lf = pick_tc((int)c->D, p->dtype == DATTN_BF16, 0, &bm, &smem);
            if (!lf || smem > di.smem_optin) tc = 0;
        }
    }
    const int tf32t = !tc && tf32_ok(c, a, &di, force);
    if (force && !strcmp(force, "tf32") && !tf32t) /* tests: the TF32 kernel or nothing */
        return dattn_set_error(DATTN_UNSUPPORTED, "DATTN_CUDA_FWD=tf32: the TF32 forward needs fp32 with "
                                                  "fp32_math = DATTN_MATH_TF32, head_dim 32/64/128, 16-byte "
                                                  "aligned rows and %d bytes of shared memory",
                               dattn_tf32_smem((int)c->D));
    const int f32t = !tc && !tf32t && f32_tiled_ok(c, a, &di, force);
    if (force && !strcmp(force, "f32") && !f32t) /* tests: the fp32 tiled kernel or nothing */
        return dattn_set_error(DATTN_UNSUPPORTED, "DATTN_CUDA_FWD=f32: the fp32 tiled forward needs fp32, "
                                                  "head_dim 32/64/128, 16-byte aligned rows and %d bytes "
                                                  "of shared memory", dattn_f32_smem((int)c->D));
    if (!tc && !tf32t && !f32t && dattn_simple_smem((int)c->D) > (size_t)di.smem_optin)
        return dattn_set_error(DATTN_UNSUPPORTED, "head_dim %lld needs more shared memory than "
                                                  "this GPU has", (long long)c->D);

    /* workspace */
    char *ws = (char *)p->workspace;
    int32_t *kvr = wl.kvr != WS_NONE ? (int32_t *)(ws + wl.kvr) : NULL;
    float *vmean = wl.vmean != WS_NONE ? (float *)(ws + wl.vmean) : NULL;
    float *kps = (tc && wl.kps != WS_NONE) ? (float *)(ws + wl.kps) : NULL;
    a.kvr = kvr;
    a.vmean = vmean;
    a.kps = kps;
    a.pexp = (tc && wl.pexp != WS_NONE) ? (uint16_t *)(ws + wl.pexp) : NULL;
    a.kps_ld = c->packed ? c->T : c->L;

    cudaStream_t stream = (cudaStream_t)p->stream;
    const int dt = p->dtype == DATTN_F32 ? 0 : p->dtype == DATTN_F16 ? 1 : 2;
    cudaError_t e;
    if (kvr || vmean || kps) {
        /* the OG kernels (sm90w1g) read the kps planes as bf16 (hi, lo) pairs */
        /* (and the ws forward's KC kernels) */
        const int kps_hl = (wsf && dattn_fwd_ws_kps_hl(&a, wvar)) || (!wsf && (lf == dattn_launch_fwd_sm90_d64_f16_n64_w4o70 || lf == dattn_launch_fwd_sm90_d64_bf16_n64_w4o70 ||
                           lf == dattn_launch_fwd_sm90_d64_f16_n64_w4o86 || lf == dattn_launch_fwd_sm90_d64_bf16_n64_w4o86));
        if ((e = dattn_launch_fwd_prep(&a, dt, kvr, vmean, kps, kps_hl, stream)) != cudaSuccess)
            return cuda_fail(e, "forward prologue launch");
    }
    if (wsf) {
        e = dattn_launch_fwd_ws(&a, p->dtype == DATTN_BF16, wvar, c->T, di.sms, 0, stream);
    } else if (tc) {
        const int64_t gx = (c->L + bm - 1) / bm;
        e = lf(&a, (int)gx, (int)c->H, (int)c->B, stream);
        if (e == cudaSuccess && a.drop_thr && a.hf && a.mask) {
            const int rows = dattn_simple_rows();
            e = dattn_launch_fwd_padrows_drop(&a, dt, (int)((c->L + rows - 1) / rows), (int)c->H,
                                              (int)c->B, stream);
        }
    } else if (tf32t || f32t) {
        const int rows_t = tf32t ? dattn_tf32_rows() : dattn_f32_rows();
        const int64_t gx = (c->L + rows_t - 1) / rows_t;
        e = tf32t ? dattn_launch_fwd_tf32(&a, (int)gx, (int)c->H, (int)c->B, stream)
                  : dattn_launch_fwd_f32(&a, (int)gx, (int)c->H, (int)c->B, stream);
        if (e == cudaSuccess && a.drop_thr && a.hf && a.mask) {
            const int rows = dattn_simple_rows();
            e = dattn_launch_fwd_padrows_drop(&a, dt, (int)((c->L + rows - 1) / rows), (int)c->H,
                                              (int)c->B, stream);
        }
    } else {
        const int rows = dattn_simple_rows();
        const int64_t gx = (c->L + rows - 1) / rows;
        e = dattn_launch_fwd_simple(&a, dt, (int)gx, (int)c->H, (int)c->B, stream);
    }
    if (e != cudaSuccess) return cuda_fail(e, "forward kernel launch");
    return DATTN_OK;
}

/* Runs fn on the call's device (device_index, or the current one when < 0) and restores
 * the caller's current device. */
static dattn_status on_call_device(const dattn_call *c, dattn_status (*fn)(const dattn_call *, int))
{
    int prev = -1, dev = c->p->device_index;
    cudaError_t e;
    if ((e = cudaGetDevice(&prev)) != cudaSuccess) return cuda_fail(e, "cudaGetDevice");
    if (dev < 0) dev = prev;
    if (dev != prev && (e = cudaSetDevice(dev)) != cudaSuccess) return cuda_fail(e, "cudaSetDevice");
    dattn_status st = fn(c, dev);
    if (dev != prev) cudaSetDevice(prev);
    return st;
}

extern "C" dattn_status dattn_cuda_fwd(const dattn_call *c, const dattn_slotmap *sm)
{
    (void)sm; /* the CUDA backend keeps its own compact, cached table */
    return on_call_device(c, fwd_on_device);
}

/* ------------------------------------------------------------------ backward */

static dattn_status bwd_on_device(const dattn_call *c, int dev)
{
    const dattn_params *p = c->p;
    dev_info di;
    dattn_status st = get_dev(dev, &di);
    if (st != DATTN_OK) return st;
    if ((st = check_cc(dev, &di)) != DATTN_OK) return st;
    if ((st = dattn_cuda_check(c)) != DATTN_OK) return st;
    const size_t smem = dattn_bwd_dkdv_smem((int)c->D) > dattn_bwd_dq_smem((int)c->D)
                            ? dattn_bwd_dkdv_smem((int)c->D)
                            : dattn_bwd_dq_smem((int)c->D);
    if (smem > (size_t)di.smem_optin)
        return dattn_set_error(DATTN_UNSUPPORTED, "head_dim %lld needs more shared memory than "
                                                  "this GPU has", (long long)c->D);
    const slot_cache *sc = NULL;
    if (c->c2p || c->p2c) {
        if ((st = get_slots(c, &sc)) != DATTN_OK) return st;
    }
    dattn_bwd_args A;
    fill_fwd_args(c, sc, A.f);
    A.dout = p->dout.data;
    A.dq = p->dq.data;
    A.dk = p->dk.data;
    A.dv = p->dv.data;
    A.dpk = c->c2p ? p->dpk.data : NULL;
    A.dpq = c->p2c ? p->dpq.data : NULL;
    set_rows(c, &p->dout, &A.do_sb, &A.do_sl, &A.do_sh);
    set_rows(c, &p->dq, &A.dq_sb, &A.dq_sl, &A.dq_sh);
    set_rows(c, &p->dk, &A.dk_sb, &A.dk_sl, &A.dk_sh);
    set_rows(c, &p->dv, &A.dv_sb, &A.dv_sl, &A.dv_sh);
    A.dpk_sh = A.dpk_ss = A.dpq_sh = A.dpq_ss = 0;
    if (c->c2p) {
        A.dpk_sh = ext_stride(c->H, p->dpk.stride[0]);
        A.dpk_ss = p->dpk.stride[1];
    }
    if (c->p2c) {
        A.dpq_sh = ext_stride(c->H, p->dpq.stride[0]);
        A.dpq_ss = p->dpq.stride[1];
    }
    A.T = c->packed ? c->T : 0;
    A.inv_scale = 1.0f / c->scale;
    bws_layout wl;
    layout_bws(c, &wl);
    char *ws = (char *)p->workspace;
    A.di = (float *)(ws + wl.di);
    A.rsat = wl.rsat != WS_NONE ? (float *)(ws + wl.rsat) : NULL;
    A.csat = wl.csat != WS_NONE ? (float *)(ws + wl.csat) : NULL;
    A.ppk = wl.ppk != WS_NONE ? (float *)(ws + wl.ppk) : NULL;
    A.ppq = wl.ppq != WS_NONE ? (float *)(ws + wl.ppq) : NULL;
    A.tcr = wl.tcr != WS_NONE ? (int32_t *)(ws + wl.tcr) : NULL;
    A.hfv = wl.hfv != WS_NONE ? (float *)(ws + wl.hfv) : NULL;
    A.pexp = wl.pexp != WS_NONE ? (uint16_t *)(ws + wl.pexp) : NULL;
    int tc3 = bwd_tc3_want(c); /* (the layout above reserved its partials) */
    A.sgb = c->B == 0 ? 0 : (int32_t)bwd_simple_groups(c);
    const int dt = p->dtype == DATTN_F32 ? 0 : p->dtype == DATTN_F16 ? 1 : 2;
    const char *force = getenv("DATTN_CUDA_BWD");
    int tc = bwd_tc_call(c) && !(force && !strcmp(force, "simple"));
    /* the round-3 kernels: tc3g (tc3f whose dq kernel computes D_i: no separate D_i launch, the same
     * bits) unless DATTN_CUDA_BWD=tc3 pins the first loop,
     * =tc3b the lean loop alone, =tc3p the lean loop with P rounded once for dV, =tc3s the run-sum scatter,
     * =tc3k the four-warp saturated constants, =tc3c tc3s + tc3k, =tc3d tc3c + lean P / dS (the
     * default before tc3e), =tc3e tc3d + per-class dq tile bodies, =tc3f tc3e + per-class dkdv tile
     * bodies (the previous default, with the separate D_i pass), =tc3g (the default where ws does
     * not run) by name,
     * =tc3t tc3g with TMA loads of the column tiles */
    static const char *const v3_names[] = {"tc3", "tc3b", "tc3p", "tc3s", "tc3k", "tc3c", "tc3d", "tc3e", "tc3f", "tc3g", "tc3t"}; /* v3 1..11 */
    int v3 = 10;
    for (int i = 0; force && i < (int)(sizeof v3_names / sizeof *v3_names); i++)
        if (!strcmp(force, v3_names[i])) v3 = i + 1;
    const dattn_fwd_args &a = A.f;
    tc = tc && al16(a.q) && al16(a.k) && al16(a.v) && al16(A.dout) && al16(A.dq) && al16(A.dk) &&
         al16(A.dv) && st16(a.q_sb) && st16(a.q_sl) && st16(a.q_sh) && st16(a.k_sb) &&
         st16(a.k_sl) && st16(a.k_sh) && st16(a.v_sb) && st16(a.v_sl) && st16(a.v_sh) &&
         st16(A.do_sb) && st16(A.do_sl) && st16(A.do_sh) && st16(A.dq_sb) && st16(A.dq_sl) &&
         st16(A.dq_sh) && st16(A.dk_sb) && st16(A.dk_sl) && st16(A.dk_sh) && st16(A.dv_sb) &&
         st16(A.dv_sl) && st16(A.dv_sh);
    if (c->c2p) tc = tc && al16(a.pk) && st16(a.pk_sh) && st16(a.pk_ss);
    if (c->p2c) tc = tc && al16(a.pq) && st16(a.pq_sh) && st16(a.pq_ss);
    /* the tensor-core backward is built for sm_90 only (other archs get a trapping stub:
     * at D = 128 it spills there, and its ~174-189 KB of shared memory at S = 256 does not
     * fit an A100 or Ada anyway); elsewhere the simple kernels run */
    if (di.major != 9) tc = 0;
    if (tc && dattn_bwd_sm80_smem((int)c->D, a.S) > (size_t)di.smem_optin) tc = 0;
    tc3 = tc3 && tc && dattn_bwd_tc3_smem((int)c->D, a.S, v3) <= (size_t)di.smem_optin;
    cudaError_t e = cudaErrorNotSupported;
    if (di.major == 9 && bwd_ws_call(c)) { /* (the layout above reserved its partials) */
        A.tcg = (int32_t)bwd_ws_groups(c);
        e = dattn_launch_bwd_ws(&A, dt == 2, (cudaStream_t)p->stream); /* (NotSupported: nothing launched) */
    }
    if (e == cudaErrorNotSupported) {
        A.tcg = (c->B == 0 || c->L == 0) ? 0 : (int32_t)bwd_tc_groups(c, tc3);
        e = tc ? dattn_launch_bwd_sm80(&A, dt == 2, tc3 ? v3 : 0, (cudaStream_t)p->stream)
               : dattn_launch_bwd_simple(&A, dt, (cudaStream_t)p->stream);
    }
    if (e != cudaSuccess) return cuda_fail(e, "backward kernel launch");
    return DATTN_OK;
}

extern "C" dattn_status dattn_cuda_bwd(const dattn_call *c, const dattn_slotmap *sm)
{
    (void)sm; /* the CUDA backend keeps its own compact, cached table */
    return on_call_device(c, bwd_on_device);
}
