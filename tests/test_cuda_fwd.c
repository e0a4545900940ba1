/* CUDA forward tests: every kernel path against a float64 reference.
 *
 * Exits 77 (skipped) when the library has no CUDA backend or no usable GPU is present.
 *
 * Reference: ref64_fwd_row() of tests/ref64.c when it is linked in (weak symbol), else a
 * float64 row reference written here from SPEC.md (slots from dattn_slots(), i.e. the
 * float32 formula, never from the kernels' slot map).
 *
 * Tolerance (documented bound, at least as strict as SPEC's "2x transformers' eager error
 * in that dtype"): for every checked output element
 *     |out - ref| <= tol_rel(dtype) * max|ref| + 1e-6,
 * with tol_rel = 2^-8 for fp16 (4 ulp of 1.0), 2^-5 for bf16 (4 ulp), 2e-5 for fp32; lse
 * within 2e-4 * max(1, |ref|) (exactly -inf for ZERO padded rows). Outputs and workspace
 * are poisoned with 0xFF before each call; every output element must be written and
 * finite, and the gaps of strided outputs must keep the poison.
 * fp32 in TF32 mode (a case that may take the TF32 kernel, case_tf32): the products take
 * tf32 operands, 10 explicit mantissa bits, unit roundoff u = 2^-11, the same as fp16, so
 * the bound has the fp16 form: |out - ref| <= 8u * max|ref| + 1e-6 (TF32_TOL_OUT). Its parts:
 * rounding v costs <= u |v|; rounding P <= u per weight, and the row sum runs over the
 * rounded weights, so the row stays a convex combination; rounding q, k, pk, pq perturbs
 * each score by delta_j = sum_d x_d y_d (e_x + e_y) / scale, |e| <= u, whose standard
 * deviation for these inputs (uniform in [-2, 2]; the scale normalizes D and the number of
 * terms) is ~1.1 u, and moves the output by at most 2 max_j |delta_j| max|v - out|. lse moves
 * by the p-weighted mean of the delta_j (all of delta_0 for a one-key row): bound 8u *
 * max(1, |lse|) (TF32_TOL_LSE), ~7 standard deviations. Measured in the host emulation over
 * the TF32 sweep (L <= 2049): worst output error 0.19 of the bound, worst lse 0.16 (L = 1).
 * Rounding mode: cvt.rna is unbiased, truncation (tf32 operands fed raw) moves every
 * output toward zero by ~u/2 relative or more; the signed mean error sum (out - ref)
 * sign(ref) / sum |ref| over a case's checked elements must stay within u/4 (TF32_TOL_BIAS,
 * cases with >= 4096 elements), which a truncating kernel fails and the bound above does
 * not see. Emulation: rounded <= 3.7e-5 (0.3 of u/4) over the sweep; V alone truncated
 * -2.4e-4 .. -3e-4; K, V, pk, pq truncated -6.5e-4 .. -8e-4.
 *
 * Sweep: dtypes fp16/bf16/fp32 (IEEE and TF32 modes), D 32/64/128 (+48 on the simple
 * path), L across tile edges 1..2049 (all rows checked), sampled rows at 8K and 32K,
 * masks none/right/left/holes/all-padding/all-valid, HF and ZERO padded rows, packed
 * (varlen) and packed == padded bitwise, fused-qkv and padded strides, unaligned rows
 * (simple kernel), each term alone, linear / v3 log / small log (saturation at short L)
 * positions, the small-smem kernel configuration forced on big GPUs, determinism, API
 * errors (workspace, malformed backward). Dropout and the backward: test_cuda_bwd.c.
 * The TF32 kernel (fp32_math = TF32) gets its own sweep (tf32_cases, --only-tf32), part of
 * the default run and of --quick, with the mode checks (TF32 != IEEE on the same inputs,
 * IEEE mode bitwise on the IEEE kernel).
 * --quick: a small subset (compute-sanitizer).
 * --path sm80|sm90|sm90n64|sm90n128|sm90w1|sm90w1ov|sm90w1b|sm90w1c|sm90w1d|sm90w1e|sm90w1f|sm90w1g|sm90w1h: the fp16/bf16 D=64/128 cases (those the Hopper
 *   wgmma kernel takes) run with DATTN_CUDA_FWD=sm90* (so a call it cannot run fails instead
 *   of falling back; n64 / n128: its 64- / 128-key tiles where the head dim has both; w1:
 *   its one-warpgroup instance at D = 64, two CTAs per SM; w1ov: the same with the next
 *   K side loaded during the softmax; w1b: with the lean loop; w1c: w1b with the pipelined
 *   band products; w1d: w1b with the saturated / plain tile order; w1e: w1c with the leaner
 *   band-tile overheads; w1f: w1e with a band tile's K side loaded during P V; w1g: w1c with
 *   the saturated p2c constants through the score product, bf16 hi + lo), or
 *   every unforced case with DATTN_CUDA_FWD=sm80 (the mma.sync kernel). Without --path
 *   the library chooses (on an H100/H200: the wgmma kernel for those cases), or an outside
 *   DATTN_CUDA_FWD applies to every case without a forced path of its own.
 * --path ws: the cases the warp-specialized forward runs (ws_case) with DATTN_CUDA_FWD=ws
 *   (UNSUPPORTED fails them), first its own sweep (ws_cases: every edge length 1..2049 against
 *   its 128-row blocks and 64-key tiles, both dtypes, every slot map, with and without position
 *   terms, both layouts, every mask kind, sampled rows at 8K), then every other case: the eligible ones on ws,
 *   the rest on the library's choice. With --quick: its small cases alone (compute-sanitizer).
 * --path wsk: the same on the ws forward's KC kernels (DATTN_CUDA_FWD=wsk: a saturated tile's
 *   column constants through the score product, bf16 hi + lo); --path wsg on its GR kernels (a
 *   band tile's G of the window's second half kept from the previous band tile; masked calls run
 *   ws's), --path wskg on both, --path wskgt on wskg with the ring blocks by TMA from the expanded
 *   tables (FWS_VAR_TE; masked and packed calls run wskg's kernels); --path wsp on its persistent kernels (one CTA per SM over the
 *   units; masked calls run ws's; the emulator has 3 SMs, DATTN_EMU_SMS).
 * --same-as NAME (with --path sm90* and an sm90* NAME, or two ws forms): every case forced onto
 *   --path runs a second time with DATTN_CUDA_FWD=NAME; out and lse (gaps included) must be
 *   bitwise equal, e.g. --path sm90w1d --same-as sm90w1b, --path wskgt --same-as wskg.
 * --lse-tol TOL (with --same-as): instead of bitwise out / lse, lse (fp32, no output rounding
 *   in between) within TOL * max(1, |lse|) of the other path's, e.g. --path sm90w1g --same-as
 *   sm90w1c --lse-tol 1e-5 (sm90w1g's saturated p2c constants are bf16 hi + lo, ~2^-16
 *   relative: a score moves by <= 2^-16 |c| / scale, ~4e-5 for the tests' largest |c|; hi
 *   alone moves lse by ~1e-4).
 */
#include "dattn.h"
#include "ref64.h"
#include "cpu/common.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DATTN_WITH_CUDA
int main(void)
{
    printf("CUDA backend not built: skipped\n");
    return 77;
}
#else
#include <cuda_runtime_api.h>

/* TF32 mode bounds (derivation in the header comment): u = 2^-11 */
#define TF32_TOL_OUT (1.0 / 256) /* 8u * max|ref| */
#define TF32_TOL_LSE (1.0 / 256) /* 8u * max(1, |lse|) */
#define TF32_TOL_BIAS (1.0 / 8192) /* u / 4: |signed mean error| / mean |ref| */

/* Linked when tests/ref64.c exists. */
extern void ref64_fwd_row(const dattn_params *p, int64_t b, int64_t h, int64_t i, double *out_row,
                          double *lse) __attribute__((weak));

static int n_pass, n_fail, quick, max_l = 1 << 30;
static const char *path; /* --path */
static const char *same_as; /* --same-as NAME: each --path case again on that path, bitwise equal */
static double lse_tol = -1.0; /* --lse-tol TOL (with --same-as): lse within TOL relative instead */
static uint64_t rng_state;

static uint64_t rnd64(void)
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static double urand(void) { return (double)(rnd64() >> 11) * (1.0 / 9007199254740992.0); }
static int irand(int n) { return n <= 0 ? 0 : (int)(rnd64() % (uint64_t)n); }

#include "tcuda.h"

/* ---------------------------------------------------------------- local reference */

typedef struct refctx {
    int32_t *slots; /* slot(r) at [r + L - 1] */
    int64_t L;
} refctx;

static double load_el(const dattn_params *p, const dattn_tensor *t, int64_t off)
{
    const char *base = (const char *)t->data;
    if (p->dtype == DATTN_F32) return ((const float *)base)[off];
    uint16_t x = ((const uint16_t *)base)[off];
    return p->dtype == DATTN_F16 ? dattn_h2f(x) : dattn_bf2f(x);
}

static int64_t row_off(const dattn_params *p, const dattn_tensor *t, int64_t b, int64_t i, int64_t h)
{
    if (p->layout == DATTN_LAYOUT_PACKED) return ((int64_t)p->cu_seqlens[b] + i) * t->stride[0] + h * t->stride[1];
    return b * t->stride[0] + i * t->stride[1] + h * t->stride[2];
}

static void local_ref_row(const dattn_params *p, const refctx *rc, int64_t b, int64_t h, int64_t i,
                          double *out, double *lse)
{
    const int64_t D = p->head_dim;
    const int packed = p->layout == DATTN_LAYOUT_PACKED;
    const int64_t n = packed ? p->cu_seqlens[b + 1] - p->cu_seqlens[b] : p->seqlen;
    const uint8_t *m = (const uint8_t *)p->mask.data;
    const int c2p = (p->pos_att & DATTN_POS_C2P) != 0, p2c = (p->pos_att & DATTN_POS_P2C) != 0;
#define VALID(j) (packed || !m || m[b * p->mask.stride[0] + (j) * p->mask.stride[1]] != 0)
    for (int64_t d = 0; d < D; d++) out[d] = 0.0;
    if (!VALID(i)) {
        if (p->padded_rows == DATTN_PADROWS_HF) {
            for (int64_t j = 0; j < n; j++)
                for (int64_t d = 0; d < D; d++) out[d] += load_el(p, &p->v, row_off(p, &p->v, b, j, h) + d);
            for (int64_t d = 0; d < D; d++) out[d] /= (double)n;
            *lse = log((double)n);
        } else {
            *lse = -INFINITY;
        }
        return;
    }
    const double scale = (double)dattn_scale(D, p->pos_att);
    double *s = malloc(sizeof(double) * (size_t)n);
    double mx = -INFINITY;
    const int64_t qo = row_off(p, &p->q, b, i, h);
    for (int64_t j = 0; j < n; j++) {
        if (!VALID(j)) {
            s[j] = -INFINITY;
            continue;
        }
        const int64_t ko = row_off(p, &p->k, b, j, h);
        const int32_t t = rc->slots[i - j + rc->L - 1];
        double x = 0.0;
        for (int64_t d = 0; d < D; d++) {
            const double qd = load_el(p, &p->q, qo + d), kd = load_el(p, &p->k, ko + d);
            x += qd * kd;
            if (c2p) x += qd * load_el(p, &p->pk, h * p->pk.stride[0] + t * p->pk.stride[1] + d);
            if (p2c) x += kd * load_el(p, &p->pq, h * p->pq.stride[0] + t * p->pq.stride[1] + d);
        }
        s[j] = x / scale;
        if (s[j] > mx) mx = s[j];
    }
    double sum = 0.0;
    for (int64_t j = 0; j < n; j++) {
        s[j] = s[j] == -INFINITY ? 0.0 : exp(s[j] - mx);
        sum += s[j];
    }
    for (int64_t j = 0; j < n; j++) {
        if (s[j] == 0.0) continue;
        const int64_t vo = row_off(p, &p->v, b, j, h);
        for (int64_t d = 0; d < D; d++) out[d] += s[j] * load_el(p, &p->v, vo + d);
    }
    for (int64_t d = 0; d < D; d++) out[d] /= sum;
    *lse = mx + log(sum);
    free(s);
#undef VALID
}

/* ---------------------------------------------------------------- test cases */

enum { MASK_NONE, MASK_RIGHT, MASK_LEFT, MASK_HOLES, MASK_ALLPAD, MASK_ALLVALID, MASK_KINDS };
enum { LAY_CONTIG, LAY_FUSED, LAY_UNALIGNED };

typedef struct tcase {
    int dtype, D, B, H, L, pos_att, pb, M, padrows, mask, packed, math, lay;
    int sample;          /* 0: check every row; else this many rows per (b, h) */
    const char *force;   /* DATTN_CUDA_FWD */
    int maxlen_short;    /* packed: the longest sequence is shorter than seqlen */
    float drop;          /* dropout_p (needs ref64, which applies dattn_dropout_keep) */
} tcase;

/* The cases the warp-specialized forward runs (launch.cu, DATTN_CUDA_FWD=ws: fp16/bf16, D 64,
 * padded (any mask, either padded-row mode), no dropout, c2p and p2c both or neither, 16-byte
 * aligned rows; every slot map of set_pos is monotone): --path ws pins them there (UNSUPPORTED
 * would fail the case). */
static int ws_case(const tcase *t)
{
    return t->dtype != DATTN_F32 && t->D == 64 && !(t->drop > 0.f) && (t->pos_att == 0 || t->pos_att == 3) &&
           t->lay != LAY_UNALIGNED;
}

/* Whether name is one of the ws forward's forms (ws, wsk, wsg, wskg, wskgt, wsp). */
static int ws_name(const char *name)
{
    return name && (!strcmp(name, "ws") || !strcmp(name, "wsk") || !strcmp(name, "wsg") || !strcmp(name, "wskg") ||
                    !strcmp(name, "wskgt") || !strcmp(name, "wsp"));
}

/* Whether --path names one of the ws forward's forms. */
static int ws_path(void) { return ws_name(path); }

/* The DATTN_CUDA_FWD value a case runs with (NULL: the library's choice). */
static const char *case_force(const tcase *t)
{
    if (t->force) return t->force;
    if (ws_path()) return ws_case(t) ? path : NULL;
    if (path && !strncmp(path, "sm90", 4))
        return t->dtype != DATTN_F32 && (t->D == 64 || t->D == 128) && t->lay != LAY_UNALIGNED ? path : NULL;
    return path;
}

static void set_force(const char *f)
{
    if (f) setenv("DATTN_CUDA_FWD", f, 1);
    else unsetenv("DATTN_CUDA_FWD");
}

/* The case may run the TF32 kernel: fp32 in TF32 mode, not pinned to an IEEE kernel. Its
 * bound is TF32_TOL_* (the header comment derives them). */
static int case_tf32(const tcase *t)
{
    const char *f = case_force(t);
    return t->dtype == DATTN_F32 && t->math == DATTN_MATH_TF32 && !(f && (!strcmp(f, "f32") || !strcmp(f, "simple")));
}

static const char *dt_name(int dt) { return dt == DATTN_F32 ? "f32" : dt == DATTN_F16 ? "f16" : "bf16"; }
static const char *mask_name(int m)
{
    static const char *n[] = {"none", "right", "left", "holes", "allpad", "allvalid"};
    return n[m];
}

static void case_str(const tcase *t, char *buf, size_t n)
{
    snprintf(buf, n,
             "%s D=%d B=%d H=%d L=%d pos=%d pb=%d M=%d pad=%s mask=%s %s%s lay=%d%s%s",
             dt_name(t->dtype), t->D, t->B, t->H, t->L, t->pos_att, t->pb, t->M,
             t->padrows ? "zero" : "hf", mask_name(t->mask), t->packed ? "packed" : "padded",
             t->math ? " tf32" : "", t->lay, case_force(t) ? " force=" : "", case_force(t) ? case_force(t) : "");
}

typedef struct hbuf {
    void *h, *d;
    size_t bytes;
} hbuf;

static void hb_alloc(hbuf *b, size_t bytes)
{
    b->bytes = bytes ? bytes : 16;
    b->h = malloc(b->bytes);
    CK(cudaMalloc(&b->d, b->bytes));
}
static void hb_free(hbuf *b)
{
    free(b->h);
    cudaFree(b->d);
}
static void hb_up(hbuf *b) { CK(cudaMemcpy(b->d, b->h, b->bytes, cudaMemcpyHostToDevice)); }
static void hb_down(hbuf *b) { CK(cudaMemcpy(b->h, b->d, b->bytes, cudaMemcpyDeviceToHost)); }

static void fill_rand(hbuf *b, int dtype, double amp)
{
    const size_t es = dattn_dtype_size(dtype), n = b->bytes / es;
    for (size_t k = 0; k < n; k++) {
        const float x = (float)((urand() * 2.0 - 1.0) * amp);
        if (dtype == DATTN_F32) ((float *)b->h)[k] = x;
        else if (dtype == DATTN_F16) ((uint16_t *)b->h)[k] = dattn_f2h(x);
        else ((uint16_t *)b->h)[k] = dattn_f2bf(x);
    }
}

static double get_el(const void *base, int dtype, int64_t off)
{
    if (dtype == DATTN_F32) return ((const float *)base)[off];
    const uint16_t x = ((const uint16_t *)base)[off];
    return dtype == DATTN_F16 ? dattn_h2f(x) : dattn_bf2f(x);
}

static int is_poison(const void *base, int dtype, int64_t off)
{
    if (dtype == DATTN_F32) return ((const uint32_t *)base)[off] == 0xFFFFFFFFu;
    return ((const uint16_t *)base)[off] == 0xFFFFu;
}

/* One forward run of a case: inputs built, CUDA call made, outputs checked. If
 * keep_out is given, the host output ([rows][H][D] in the case's own layout) and lse are
 * returned for comparisons (caller frees). */
typedef struct run_out {
    void *out;  /* host copy of the out buffer */
    float *lse; /* host copy of lse buffer */
    size_t out_bytes, lse_bytes;
    void *in[5]; /* host q, k, v, pk, pq (contiguous layout only) */
} run_out;

static int run_case(const tcase *tc, uint64_t seed, run_out *keep, const int32_t *lens_in)
{
    char name[256];
    if (tc->L > max_l) return 0; /* --max-l: skip long cases */
    if (tc->drop > 0.f && !ref64_fwd_row) return 0; /* dropout needs the ref64 reference */
    case_str(tc, name, sizeof name);
    if (tc->drop > 0.f) snprintf(name + strlen(name), sizeof name - strlen(name), " drop=%g", (double)tc->drop);
    rng_state = seed;
    const int dt = tc->dtype, D = tc->D, B = tc->B, H = tc->H, L = tc->L;
    const size_t es = dattn_dtype_size(dt);
    const int32_t S = dattn_att_span(tc->pb, tc->M);
    dattn_params p, hp;
    dattn_params_init(&p);
    p.device = DATTN_DEVICE_CUDA;
    p.dtype = dt;
    p.layout = tc->packed ? DATTN_LAYOUT_PACKED : DATTN_LAYOUT_PADDED;
    p.pos_att = tc->pos_att;
    p.position_buckets = tc->pb;
    p.max_relative_positions = tc->M;
    p.padded_rows = tc->padrows;
    p.fp32_math = tc->math;
    if (tc->drop > 0.f) {
        p.dropout_p = tc->drop;
        p.dropout_seed = rnd64();
        p.dropout_offset = rnd64();
    }
    p.batch = B;
    p.seqlen = L;
    p.heads = H;
    p.head_dim = D;

    /* sequence lengths (packed) */
    int32_t *lens = calloc((size_t)B + 1, sizeof(int32_t)), *cu = calloc((size_t)B + 1, sizeof(int32_t));
    int64_t T = 0;
    if (tc->packed) {
        for (int b = 0; b < B; b++) {
            lens[b] = lens_in ? lens_in[b] : (b == 0 && !tc->maxlen_short ? L : irand(L + 1));
            if (tc->maxlen_short && lens[b] > L - 3) lens[b] = L - 3 > 0 ? L - 3 : 0;
            cu[b + 1] = cu[b] + lens[b];
        }
        T = cu[B];
        p.total_tokens = T;
    }
    const int64_t rows = tc->packed ? T : (int64_t)B * L;

    /* inputs: q, k, v share one buffer in the fused layout */
    const int64_t HD = (int64_t)H * D;
    const int64_t qrow = tc->lay == LAY_FUSED ? 3 * HD : tc->lay == LAY_UNALIGNED ? H * (int64_t)(D + 1) : HD;
    const int64_t hstr = tc->lay == LAY_UNALIGNED ? D + 1 : D;
    hbuf qkv[3];
    int nq = tc->lay == LAY_FUSED ? 1 : 3;
    for (int t = 0; t < nq; t++) {
        hb_alloc(&qkv[t], (size_t)(rows > 0 ? rows : 1) * (size_t)qrow * es);
        fill_rand(&qkv[t], dt, 2.0);
    }
    if (nq == 1) {
        /* v smaller */
        for (int64_t r = 0; r < rows; r++)
            for (int64_t e = 2 * HD; e < 3 * HD; e++) {
                const int64_t off = r * qrow + e;
                const float x = (float)(urand() * 2.0 - 1.0);
                if (dt == DATTN_F32) ((float *)qkv[0].h)[off] = x;
                else if (dt == DATTN_F16) ((uint16_t *)qkv[0].h)[off] = dattn_f2h(x);
                else ((uint16_t *)qkv[0].h)[off] = dattn_f2bf(x);
            }
    } else {
        fill_rand(&qkv[2], dt, 1.0);
    }
    dattn_tensor *qkvt[3] = {&p.q, &p.k, &p.v};
    for (int t = 0; t < 3; t++) {
        const hbuf *src = &qkv[nq == 1 ? 0 : t];
        const int64_t base = nq == 1 ? t * HD : 0;
        qkvt[t]->data = (char *)src->d + base * (int64_t)es;
        if (tc->packed) {
            qkvt[t]->stride[0] = qrow;
            qkvt[t]->stride[1] = hstr;
            qkvt[t]->stride[2] = 1;
        } else {
            qkvt[t]->stride[0] = (int64_t)L * qrow;
            qkvt[t]->stride[1] = qrow;
            qkvt[t]->stride[2] = hstr;
            qkvt[t]->stride[3] = 1;
        }
    }
    /* pk, pq: [H, 2S, D], row stride D (+8 in the fused layout) */
    const int64_t prow = tc->lay == LAY_FUSED ? D + 8 : D;
    hbuf pk, pq;
    hb_alloc(&pk, (size_t)H * 2 * S * (size_t)prow * es);
    hb_alloc(&pq, (size_t)H * 2 * S * (size_t)prow * es);
    fill_rand(&pk, dt, 2.0);
    fill_rand(&pq, dt, 2.0);
    p.pk.data = pk.d;
    p.pk.stride[0] = 2 * S * prow;
    p.pk.stride[1] = prow;
    p.pk.stride[2] = 1;
    p.pq = p.pk;
    p.pq.data = pq.d;
    /* mask */
    hbuf mk = {0, 0, 0};
    const int mpad = tc->lay == LAY_FUSED ? 5 : 0; /* mask rows of L + mpad bytes */
    if (!tc->packed && tc->mask != MASK_NONE) {
        hb_alloc(&mk, (size_t)B * (L + mpad));
        uint8_t *m = (uint8_t *)mk.h;
        memset(m, 0x5a, mk.bytes);
        for (int b = 0; b < B; b++) {
            int len = L > 0 ? 1 + irand(L) : 0;
            if (b == 0 && tc->mask != MASK_ALLPAD) len = L;
            for (int j = 0; j < L; j++) {
                int v = 1;
                switch (tc->mask) {
                case MASK_RIGHT: v = j < len; break;
                case MASK_LEFT: v = j >= L - len; break;
                case MASK_HOLES: v = urand() < 0.7; break;
                case MASK_ALLPAD: v = b == 0 ? 0 : j < len; break;
                default: v = 1;
                }
                m[(int64_t)b * (L + mpad) + j] = (uint8_t)(v ? 1 + irand(200) : 0);
            }
        }
        p.mask.data = mk.d;
        p.mask.stride[0] = L + mpad;
        p.mask.stride[1] = 1;
    }
    hbuf cud = {0, 0, 0};
    if (tc->packed) {
        hb_alloc(&cud, sizeof(int32_t) * ((size_t)B + 1));
        memcpy(cud.h, cu, sizeof(int32_t) * ((size_t)B + 1));
        p.cu_seqlens = (const int32_t *)cud.d;
    }
    /* outputs: out with padded head stride in the fused layout, lse with padded rows */
    const int64_t ohs = tc->lay == LAY_FUSED ? D + 8 : D, orow = (int64_t)H * ohs;
    const int64_t lpad = tc->lay == LAY_FUSED ? 3 : 0;
    hbuf out, lse;
    hb_alloc(&out, (size_t)(rows > 0 ? rows : 1) * (size_t)orow * es);
    const int64_t lse_n = tc->packed ? (int64_t)H * (T + lpad) : (int64_t)B * H * (L + lpad);
    hb_alloc(&lse, (size_t)(lse_n > 0 ? lse_n : 1) * sizeof(float));
    p.out.data = out.d;
    p.lse.data = lse.d;
    if (tc->packed) {
        p.out.stride[0] = orow;
        p.out.stride[1] = ohs;
        p.out.stride[2] = 1;
        p.lse.stride[0] = T + lpad;
        p.lse.stride[1] = 1;
    } else {
        p.out.stride[0] = (int64_t)L * orow;
        p.out.stride[1] = orow;
        p.out.stride[2] = ohs;
        p.out.stride[3] = 1;
        p.lse.stride[0] = (int64_t)H * (L + lpad);
        p.lse.stride[1] = L + lpad;
        p.lse.stride[2] = 1;
    }
    for (int t = 0; t < nq; t++) hb_up(&qkv[t]);
    hb_up(&pk);
    hb_up(&pq);
    if (mk.d) hb_up(&mk);
    if (cud.d) hb_up(&cud);
    CK(cudaMemset(out.d, 0xFF, out.bytes));
    CK(cudaMemset(lse.d, 0xFF, lse.bytes));

    /* (the query under the call's DATTN_CUDA_FWD: wskgt's expanded tables are workspace) */
    set_force(case_force(tc));
    size_t wsz = 0;
    dattn_status st = dattn_fwd_workspace_size(&p, &wsz);
    void *ws = NULL;
    if (st == DATTN_OK && wsz) {
        CK(cudaMalloc(&ws, wsz));
        CK(cudaMemset(ws, 0xFF, wsz));
    }
    p.workspace = ws;
    p.workspace_size = wsz;
    if (st == DATTN_OK) st = dattn_fwd(&p);
    set_force(NULL);
    int fail = 0;
    if (st != DATTN_OK) {
        printf("FAIL %s: status %s: %s\n", name, dattn_status_string(st), dattn_last_error());
        fail = 1;
    }
    cudaError_t ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess) {
        printf("FAIL %s: CUDA error %s\n", name, cudaGetErrorString(ce));
        exit(1);
    }
    hb_down(&out);
    hb_down(&lse);

    /* --same-as: a case forced onto --path runs again with DATTN_CUDA_FWD=same_as (output,
     * lse and workspace poisoned again): out and lse, gaps included, must be bitwise equal */
    int same_bad = 0;
    if (same_as && st == DATTN_OK && path && case_force(tc) && !strcmp(case_force(tc), path)) {
        CK(cudaMemset(out.d, 0xFF, out.bytes));
        CK(cudaMemset(lse.d, 0xFF, lse.bytes));
        if (ws) CK(cudaMemset(ws, 0xFF, wsz));
        set_force(same_as);
        const dattn_status st2 = dattn_fwd(&p);
        set_force(NULL);
        ce = cudaDeviceSynchronize();
        if (ce != cudaSuccess) {
            printf("FAIL %s: CUDA error %s (--same-as %s)\n", name, cudaGetErrorString(ce), same_as);
            exit(1);
        }
        void *o2 = malloc(out.bytes), *l2 = malloc(lse.bytes);
        CK(cudaMemcpy(o2, out.d, out.bytes, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(l2, lse.d, lse.bytes, cudaMemcpyDeviceToHost));
        if (st2 != DATTN_OK) {
            printf("  %s: --same-as %s: status %s: %s\n", name, same_as, dattn_status_string(st2), dattn_last_error());
            same_bad = 1;
        } else if (lse_tol >= 0.0) {
            /* --lse-tol: only lse, each element within lse_tol * max(1, |lse|) of the other
             * path's (the poison of unwritten elements bitwise equal) */
            const uint32_t *la = (const uint32_t *)lse.h, *lb = (const uint32_t *)l2;
            double worst = 0.0;
            for (size_t e = 0; e < lse.bytes / 4; e++) {
                float fa, fb;
                memcpy(&fa, la + e, 4);
                memcpy(&fb, lb + e, 4);
                const double d = (la[e] == lb[e]) ? 0.0
                                 : (la[e] == 0xFFFFFFFFu || lb[e] == 0xFFFFFFFFu) ? INFINITY
                                 : fabs((double)fa - (double)fb) / (fabs((double)fb) > 1.0 ? fabs((double)fb) : 1.0);
                if (!(d <= worst)) worst = d != d ? INFINITY : d;
            }
            if (!(worst <= lse_tol)) {
                printf("  %s: lse differs from --same-as %s by %.3g relative (--lse-tol %.3g)\n", name, same_as,
                       worst, lse_tol);
                same_bad = 1;
            } else if (getenv("DATTN_TEST_VERBOSE")) {
                printf("  %s: lse within %.3g relative of --same-as %s\n", name, worst, same_as);
            }
        } else if (memcmp(o2, out.h, out.bytes) || memcmp(l2, lse.h, lse.bytes)) {
            printf("  %s: out / lse differ from --same-as %s\n", name, same_as);
            same_bad = 1;
        }
        free(o2);
        free(l2);
    }

    /* reference params on the host */
    hp = p;
    for (int t = 0; t < 3; t++) {
        const int64_t base = nq == 1 ? t * HD : 0;
        dattn_tensor *ht = t == 0 ? &hp.q : t == 1 ? &hp.k : &hp.v;
        ht->data = (char *)qkv[nq == 1 ? 0 : t].h + base * (int64_t)es;
    }
    hp.pk.data = pk.h;
    hp.pq.data = pq.h;
    if (mk.d) hp.mask.data = mk.h;
    hp.cu_seqlens = cu;
    hp.device = DATTN_DEVICE_CPU;
    refctx rc;
    rc.L = L > 0 ? L : 1;
    rc.slots = malloc(sizeof(int32_t) * (size_t)(2 * rc.L - 1));
    dattn_slots(tc->pb, tc->M, -(rc.L - 1), 2 * rc.L - 1, rc.slots);

    const int tf32 = case_tf32(tc);
    const double tol_rel = dt == DATTN_F16 ? 1.0 / 256 : dt == DATTN_BF16 ? 1.0 / 32 : tf32 ? TF32_TOL_OUT : 2e-5;
    const double tol_lse = tf32 ? TF32_TOL_LSE : 2e-4;
    /* rows to check */
    int64_t nck = 0;
    int64_t *ck = malloc(sizeof(int64_t) * 3 * (size_t)(rows > 0 ? rows : 1) * (size_t)H + 3);
    for (int b = 0; b < B && !fail; b++) {
        const int n = tc->packed ? lens[b] : L;
        for (int h = 0; h < H; h++) {
            if (!tc->sample || n <= tc->sample) {
                for (int i = 0; i < n; i++) {
                    ck[3 * nck] = b; ck[3 * nck + 1] = h; ck[3 * nck + 2] = i; nck++;
                }
            } else {
                for (int s = 0; s < tc->sample; s++) {
                    int i;
                    if (s < 4) i = s;
                    else if (s < 8) i = n - 1 - (s - 4);
                    else if (s < 16) i = ((s - 8) * 128 + 127 + (s & 1)) % n;
                    else i = irand(n);
                    ck[3 * nck] = b; ck[3 * nck + 1] = h; ck[3 * nck + 2] = i; nck++;
                }
            }
        }
    }
    double *refo = malloc(sizeof(double) * (size_t)(nck > 0 ? nck : 1) * (size_t)D);
    double *refl = malloc(sizeof(double) * (size_t)(nck > 0 ? nck : 1));
#pragma omp parallel for schedule(dynamic, 4)
    for (int64_t r = 0; r < nck; r++) {
        if (ref64_fwd_row) ref64_fwd_row(&hp, ck[3 * r], ck[3 * r + 1], ck[3 * r + 2], refo + r * D, refl + r);
        else local_ref_row(&hp, &rc, ck[3 * r], ck[3 * r + 1], ck[3 * r + 2], refo + r * D, refl + r);
    }
    double maxref = 0.0;
    for (int64_t k = 0; k < nck * D; k++)
        if (fabs(refo[k]) > maxref) maxref = fabs(refo[k]);
    const double tol = tol_rel * maxref + 1e-6;
    double worst = 0.0, worst_lse = 0.0, bias_num = 0.0, bias_den = 0.0;
    int64_t bad = 0;
    for (int64_t r = 0; r < nck && !fail; r++) {
        const int64_t b = ck[3 * r], h = ck[3 * r + 1], i = ck[3 * r + 2];
        const int64_t orow_i = tc->packed ? cu[b] + i : b * L + i;
        for (int d = 0; d < D; d++) {
            const double x = get_el(out.h, dt, orow_i * orow + h * ohs + d);
            const double e = fabs(x - refo[r * D + d]);
            if (refo[r * D + d] != 0.0) {
                bias_num += refo[r * D + d] > 0.0 ? x - refo[r * D + d] : refo[r * D + d] - x;
                bias_den += fabs(refo[r * D + d]);
            }
            if (!(e <= tol)) {
                if (bad < 5)
                    printf("  %s: out[b=%lld h=%lld i=%lld d=%d] = %.6g, ref %.6g (tol %.3g)\n", name,
                           (long long)b, (long long)h, (long long)i, d, x, refo[r * D + d], tol);
                bad++;
            }
            if (e > worst || e != e) worst = e != e ? INFINITY : (e > worst ? e : worst);
        }
        const int64_t lo = tc->packed ? h * (T + lpad) + cu[b] + i : (b * H + h) * (L + lpad) + i;
        const double lx = ((float *)lse.h)[lo], lr = refl[r];
        double le;
        if (lr == -INFINITY) le = lx == -INFINITY ? 0.0 : INFINITY;
        else le = fabs(lx - lr) / (fabs(lr) > 1.0 ? fabs(lr) : 1.0);
        if (!(le <= tol_lse)) {
            if (bad < 5)
                printf("  %s: lse[b=%lld h=%lld i=%lld] = %.8g, ref %.8g\n", name, (long long)b,
                       (long long)h, (long long)i, lx, lr);
            bad++;
        }
        if (le > worst_lse || le != le) worst_lse = le != le ? INFINITY : le;
    }
    double bias = bias_den > 0.0 ? bias_num / bias_den : 0.0;
    if (tf32 && !fail && nck * D >= 4096 && !(fabs(bias) <= TF32_TOL_BIAS)) {
        printf("  %s: signed mean error %.3g of mean |ref| (bound %.3g): biased rounding (truncation?)\n", name,
               bias, TF32_TOL_BIAS);
        bad++;
    }
    /* every output element written and finite; gaps keep the poison */
    int64_t unwritten = 0, gap_bad = 0;
    for (int64_t r = 0; r < rows && !fail; r++)
        for (int64_t h = 0; h < H; h++)
            for (int64_t d = 0; d < ohs; d++) {
                const int64_t off = r * orow + h * ohs + d;
                if (d < D) {
                    const double x = get_el(out.h, dt, off);
                    if (!isfinite(x)) unwritten++;
                } else if (!is_poison(out.h, dt, off)) {
                    gap_bad++;
                }
            }
    for (int b = 0; b < B && !fail; b++) {
        const int n = tc->packed ? lens[b] : L;
        for (int h = 0; h < H; h++)
            for (int64_t i = 0; i < n + lpad; i++) {
                const int64_t lo = tc->packed ? h * (T + lpad) + cu[b] + i : ((int64_t)b * H + h) * (L + lpad) + i;
                const uint32_t bits = ((uint32_t *)lse.h)[lo];
                if (i < n) {
                    if (bits == 0xFFFFFFFFu) unwritten++;
                } else if (!tc->packed && bits != 0xFFFFFFFFu) {
                    gap_bad++;
                }
            }
    }
    if (unwritten || gap_bad) {
        printf("  %s: %lld output elements unwritten or not finite, %lld gap elements written\n",
               name, (long long)unwritten, (long long)gap_bad);
        bad++;
    }
    bad += same_bad;
    if (!fail && bad) fail = 1;
    if (fail) {
        printf("FAIL %s (seed %llu): %lld bad, max err %.3g (tol %.3g), lse err %.3g\n", name,
               (unsigned long long)seed, (long long)bad, worst, tol, worst_lse);
        n_fail++;
    } else {
        n_pass++;
        if (getenv("DATTN_TEST_VERBOSE"))
            printf("ok   %s: max err %.3g (tol %.3g), lse err %.3g, bias %.2g, %lld rows\n", name, worst, tol,
                   worst_lse, bias, (long long)nck);
    }
    if (keep) {
        keep->out = out.h;
        keep->out_bytes = out.bytes;
        keep->lse = (float *)lse.h;
        keep->lse_bytes = lse.bytes;
        out.h = NULL;
        lse.h = NULL;
        if (nq == 3) {
            for (int t = 0; t < 3; t++) {
                keep->in[t] = qkv[t].h;
                qkv[t].h = NULL;
            }
            keep->in[3] = pk.h;
            keep->in[4] = pq.h;
            pk.h = pq.h = NULL;
        }
    }
    free(refo);
    free(refl);
    free(ck);
    free(rc.slots);
    free(lens);
    free(cu);
    if (ws) cudaFree(ws);
    for (int t = 0; t < nq; t++) hb_free(&qkv[t]);
    hb_free(&pk);
    hb_free(&pq);
    if (mk.d) hb_free(&mk);
    if (cud.d) hb_free(&cud);
    hb_free(&out);
    hb_free(&lse);
    return fail;
}

static tcase base_case(int dt, int D, int B, int H, int L)
{
    tcase t;
    memset(&t, 0, sizeof t);
    t.dtype = dt;
    t.D = D;
    t.B = B;
    t.H = H;
    t.L = L;
    t.pos_att = 3;
    t.pb = 256;
    t.M = 512;
    return t;
}

/* positions: 0 v3 log (256, 512), 1 linear (S = 128), 2 small log (32, 64: saturates early) */
static void set_pos(tcase *t, int kind)
{
    if (kind == 0) { t->pb = 256; t->M = 512; }
    else if (kind == 1) { t->pb = -1; t->M = 128; }
    else { t->pb = 32; t->M = 64; }
}

/* Packed output must equal the padded output (right padding, same tokens) bitwise. */
static void packed_vs_padded(int dt, int D, int L, int posk, uint64_t seed, int math, const char *force)
{
    const int B = 3, H = 2;
    int32_t lens[3] = {L, L / 2 + 1, L > 3 ? L - 3 : 1};
    /* padded run: mask = right padding with these lengths */
    tcase a = base_case(dt, D, B, H, L);
    set_pos(&a, posk);
    a.packed = 1;
    a.math = math;
    a.force = force;
    run_out ro;
    memset(&ro, 0, sizeof ro);
    if (run_case(&a, seed, &ro, lens) || !ro.out) { /* failed, or skipped (--max-l) */
        free(ro.out);
        free(ro.lse);
        for (int t = 0; t < 5; t++) free(ro.in[t]);
        return;
    }
    /* rebuild the same inputs padded: the packed run drew q/k/v as [T, H, D] rows; run a
     * padded call on device buffers laid out [B, L, H, D] holding the same rows. */
    char name[256];
    case_str(&a, name, sizeof name);
    const size_t es = dattn_dtype_size(dt);
    int64_t T = 0;
    int32_t cu[4] = {0, 0, 0, 0};
    for (int b = 0; b < B; b++) cu[b + 1] = cu[b] + lens[b];
    T = cu[B];
    const int64_t HD = (int64_t)H * D;
    const int32_t S = dattn_att_span(a.pb, a.M);
    hbuf pk, pq;
    hb_alloc(&pk, (size_t)H * 2 * S * D * es);
    hb_alloc(&pq, (size_t)H * 2 * S * D * es);
    memcpy(pk.h, ro.in[3], pk.bytes);
    memcpy(pq.h, ro.in[4], pq.bytes);
    const char *q_h = ro.in[0], *k_h = ro.in[1], *v_h = ro.in[2];
    hbuf Q, K, V, O, Lse, M;
    const size_t pbytes = (size_t)B * L * HD * es;
    hb_alloc(&Q, pbytes); hb_alloc(&K, pbytes); hb_alloc(&V, pbytes); hb_alloc(&O, pbytes);
    hb_alloc(&Lse, (size_t)B * H * L * sizeof(float));
    hb_alloc(&M, (size_t)B * L);
    fill_rand(&Q, dt, 2.0); fill_rand(&K, dt, 2.0); fill_rand(&V, dt, 1.0);
    for (int b = 0; b < B; b++) {
        memcpy((char *)Q.h + (size_t)b * L * HD * es, q_h + (size_t)cu[b] * HD * es, (size_t)lens[b] * HD * es);
        memcpy((char *)K.h + (size_t)b * L * HD * es, k_h + (size_t)cu[b] * HD * es, (size_t)lens[b] * HD * es);
        memcpy((char *)V.h + (size_t)b * L * HD * es, v_h + (size_t)cu[b] * HD * es, (size_t)lens[b] * HD * es);
        for (int j = 0; j < L; j++) ((uint8_t *)M.h)[b * L + j] = j < lens[b];
    }
    hb_up(&Q); hb_up(&K); hb_up(&V); hb_up(&pk); hb_up(&pq); hb_up(&M);
    CK(cudaMemset(O.d, 0xFF, O.bytes));
    dattn_params p;
    dattn_params_init(&p);
    p.device = DATTN_DEVICE_CUDA;
    p.dtype = dt;
    p.pos_att = 3;
    p.position_buckets = a.pb;
    p.max_relative_positions = a.M;
    p.fp32_math = math;
    p.batch = B; p.seqlen = L; p.heads = H; p.head_dim = D;
    dattn_tensor *ts[4] = {&p.q, &p.k, &p.v, &p.out};
    void *ds[4] = {Q.d, K.d, V.d, O.d};
    for (int t = 0; t < 4; t++) {
        ts[t]->data = ds[t];
        ts[t]->stride[0] = (int64_t)L * HD; ts[t]->stride[1] = HD; ts[t]->stride[2] = D; ts[t]->stride[3] = 1;
    }
    p.pk.data = pk.d; p.pk.stride[0] = 2 * S * D; p.pk.stride[1] = D; p.pk.stride[2] = 1;
    p.pq = p.pk; p.pq.data = pq.d;
    p.mask.data = M.d; p.mask.stride[0] = L; p.mask.stride[1] = 1;
    p.lse.data = Lse.d; p.lse.stride[0] = (int64_t)H * L; p.lse.stride[1] = L; p.lse.stride[2] = 1;
    size_t wsz = 0;
    void *ws = NULL;
    dattn_status st = dattn_fwd_workspace_size(&p, &wsz);
    if (st == DATTN_OK && wsz) CK(cudaMalloc(&ws, wsz));
    p.workspace = ws; p.workspace_size = wsz;
    set_force(case_force(&a));
    if (st == DATTN_OK) st = dattn_fwd(&p);
    set_force(NULL);
    CK(cudaDeviceSynchronize());
    hb_down(&O); hb_down(&Lse);
    int64_t diff = 0;
    for (int b = 0; b < B && st == DATTN_OK; b++)
        for (int i = 0; i < lens[b]; i++) {
            if (memcmp((char *)O.h + ((size_t)b * L + i) * HD * es, (char *)ro.out + ((size_t)cu[b] + i) * HD * es, HD * es)) diff++;
            for (int h = 0; h < H; h++)
                if (((float *)Lse.h)[((size_t)b * H + h) * L + i] != ro.lse[(size_t)h * T + cu[b] + i]) diff++;
        }
    if (st != DATTN_OK || diff) {
        printf("FAIL packed == padded (%s): status %s, %lld rows differ\n", name, dattn_status_string(st), (long long)diff);
        n_fail++;
    } else {
        n_pass++;
    }
    if (ws) cudaFree(ws);
    hb_free(&pk); hb_free(&pq);
    for (int t = 0; t < 5; t++) free(ro.in[t]);
    hb_free(&Q); hb_free(&K); hb_free(&V); hb_free(&O); hb_free(&Lse); hb_free(&M);
    free(ro.out);
    free(ro.lse);
}

/* API behaviour: rejected calls write nothing; unsupported features say so. */
static void api_checks(void)
{
    const int B = 1, H = 1, L = 64, D = 64;
    const size_t n = (size_t)B * L * H * D;
    void *buf[4];
    for (int t = 0; t < 4; t++) {
        CK(cudaMalloc(&buf[t], n * 2));
        CK(cudaMemset(buf[t], 0x3c, n * 2));
    }
    void *pkq;
    CK(cudaMalloc(&pkq, 512 * 64 * 2));
    CK(cudaMemset(pkq, 0x3c, 512 * 64 * 2));
    CK(cudaMemset(buf[3], 0xFF, n * 2));
    dattn_params p;
    dattn_params_init(&p);
    p.device = DATTN_DEVICE_CUDA;
    p.dtype = DATTN_F16;
    p.batch = B; p.seqlen = L; p.heads = H; p.head_dim = D;
    dattn_tensor *ts[4] = {&p.q, &p.k, &p.v, &p.out};
    for (int t = 0; t < 4; t++) {
        ts[t]->data = buf[t];
        ts[t]->stride[0] = (int64_t)L * H * D; ts[t]->stride[1] = H * D; ts[t]->stride[2] = D; ts[t]->stride[3] = 1;
    }
    p.pk.data = pkq; p.pk.stride[0] = 512 * 64; p.pk.stride[1] = 64; p.pk.stride[2] = 1;
    p.pq = p.pk;
    int ok = 1;
    /* dropout runs on CUDA (test_cuda_bwd checks its values and masks): the workspace
     * query accepts it (the Python layer's probe relies on that) */
    p.dropout_p = 0.1f;
    size_t wq = 0;
    if (dattn_fwd_workspace_size(&p, &wq) != DATTN_OK) {
        printf("FAIL api: workspace query with dropout_p > 0 should be OK (%s)\n", dattn_last_error());
        ok = 0;
    }
    p.dropout_p = 0.0f;
    /* backward runs on CUDA (test_cuda_bwd); this one lacks lse, dout and the gradients:
     * INVALID_ARG, nothing written */
    if (dattn_bwd(&p) != DATTN_INVALID_ARG) {
        printf("FAIL api: malformed CUDA backward should be INVALID_ARG (%s)\n", dattn_last_error());
        ok = 0;
    }
    /* device support */
    if (dattn_device_supported(DATTN_DEVICE_CUDA, -1) != DATTN_OK) {
        printf("FAIL api: device_supported: %s\n", dattn_last_error());
        ok = 0;
    }
    if (dattn_device_supported(DATTN_DEVICE_CUDA, 4096) == DATTN_OK) {
        printf("FAIL api: device_supported(4096) should fail\n");
        ok = 0;
    }
    /* a masked call needs workspace; without it: INVALID_ARG, nothing written */
    void *mask;
    CK(cudaMalloc(&mask, (size_t)B * L));
    CK(cudaMemset(mask, 1, (size_t)B * L));
    p.mask.data = mask; p.mask.stride[0] = L; p.mask.stride[1] = 1;
    size_t wsz = 0;
    if (dattn_fwd_workspace_size(&p, &wsz) != DATTN_OK || wsz == 0) {
        printf("FAIL api: masked call should need workspace (%zu)\n", wsz);
        ok = 0;
    }
    if (dattn_fwd(&p) != DATTN_INVALID_ARG) {
        printf("FAIL api: missing workspace should be INVALID_ARG\n");
        ok = 0;
    }
    uint16_t *h = malloc(n * 2);
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(h, buf[3], n * 2, cudaMemcpyDeviceToHost));
    for (size_t e = 0; e < n; e++)
        if (h[e] != 0xFFFF) {
            printf("FAIL api: a rejected call wrote the output\n");
            ok = 0;
            break;
        }
    /* the build info names CUDA */
    if (!strstr(dattn_build_info(), "compute capabilities") && !strstr(dattn_build_info(), "sm_")) {
        printf("FAIL api: build info without CUDA archs: %s\n", dattn_build_info());
        ok = 0;
    }
    free(h);
    cudaFree(mask);
    for (int t = 0; t < 4; t++) cudaFree(buf[t]);
    cudaFree(pkq);
    if (ok) n_pass++;
    else n_fail++;
}

/* Same call twice: bitwise identical. */
static void determinism(uint64_t seed)
{
    tcase t = base_case(DATTN_F16, 64, 2, 3, 777);
    t.mask = MASK_HOLES;
    if (t.L > max_l) return; /* --max-l: both calls would be skipped, nothing to compare */
    run_out a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    run_case(&t, seed, &a, NULL);
    run_case(&t, seed, &b, NULL);
    if (a.out && b.out && (memcmp(a.out, b.out, a.out_bytes) || memcmp(a.lse, b.lse, a.lse_bytes))) {
        printf("FAIL determinism: two identical calls differ\n");
        n_fail++;
    } else {
        n_pass++;
    }
    free(a.out); free(a.lse); free(b.out); free(b.lse);
    for (int k = 0; k < 5; k++) {
        free(a.in[k]);
        free(b.in[k]);
    }
}

/* fp32 tiled-kernel options: --only-f32 runs only f32_cases (with --quick its small subset);
 * --f32-force NAME pins its cases to DATTN_CUDA_FWD=NAME instead of f32 (e.g. simple: the
 * same sweep on the old kernel). --max-l N skips cases longer than N (every sweep). */
static int only_f32;
static const char *f32_force = "f32";

/* The register-tiled fp32 kernel (src/cuda/fwd_f32.cu). Cases forced with
 * DATTN_CUDA_FWD=f32 (--f32-force NAME: NAME) fail (UNSUPPORTED) instead of falling back to
 * the simple kernel; a few run with DATTN_CUDA_FWD=simple (the old path, same bound). Tiles are 64 x 64:
 * L across 64-multiples; positions v3 log (band tiles up to |i - j| ~ 506, saturated
 * beyond: L >= 600), linear S = 128 (saturated beyond 128) and small log (saturated beyond
 * ~60: every class at L ~ 130+), each term alone and none (plain tiles). */
static void f32_cases(int q, uint64_t *cs)
{
#define F32_NEXT (*cs = *cs * 6364136223846793005ull + 1442695040888963407ull)
    if (q) {
        for (int di = 0; di < 3; di++) {
            const int D = di == 0 ? 32 : di == 1 ? 64 : 128;
            tcase t = base_case(DATTN_F32, D, 2, 2, 150);
            t.mask = di == 1 ? MASK_HOLES : MASK_RIGHT;
            set_pos(&t, 2);
            t.force = f32_force;
            run_case(&t, F32_NEXT, NULL, NULL);
        }
        tcase t = base_case(DATTN_F32, 64, 3, 2, 140);
        t.packed = 1;
        set_pos(&t, 2);
        t.force = f32_force;
        run_case(&t, F32_NEXT, NULL, NULL);
        t = base_case(DATTN_F32, 64, 2, 2, 130);
        t.mask = MASK_HOLES;
        t.drop = 0.3f;
        set_pos(&t, 2);
        t.force = f32_force;
        run_case(&t, F32_NEXT, NULL, NULL);
        return;
    }
    /* 1. L across tile edges, all rows: D x L, cycling masks, positions, terms, padded-row
     *    modes, strided (fused qkv, padded out / lse rows) layouts */
    static const int Ls[] = {1, 2, 7, 63, 64, 65, 127, 128, 129, 191, 255, 257, 513, 700, 1031};
    const int nL = (int)(sizeof Ls / sizeof Ls[0]);
    int cyc = 0;
    for (int di = 0; di < 3; di++)
        for (int li = 0; li < nL; li++, cyc++) {
            const int D = di == 0 ? 32 : di == 1 ? 64 : 128;
            tcase t = base_case(DATTN_F32, D, 2, 2, Ls[li]);
            t.mask = cyc % MASK_KINDS;
            set_pos(&t, cyc % 3);
            t.pos_att = (cyc / 3) % 4 == 0 ? 3 : (cyc / 3) % 4 == 3 ? 0 : (cyc / 3) % 4;
            t.padrows = (cyc / 2) % 2;
            if (cyc % 4 == 3) t.lay = LAY_FUSED;
            t.math = cyc % 5 == 1;
            t.force = f32_force;
            run_case(&t, F32_NEXT, NULL, NULL);
        }
    /* 2. each term alone, both and none, every position kind, at a length with every tile
     *    class (v3: band up to ~506, then saturated) */
    for (int pk = 0; pk < 3; pk++)
        for (int pa = 0; pa < 4; pa++) {
            tcase t = base_case(DATTN_F32, 64, 2, 2, pk == 0 ? 700 : 300);
            set_pos(&t, pk);
            t.pos_att = pa;
            t.mask = pa % 2 ? MASK_RIGHT : MASK_NONE;
            t.force = f32_force;
            run_case(&t, F32_NEXT, NULL, NULL);
        }
    /* 3. every mask x padded-row mode, strided layouts */
    for (int m = 0; m < MASK_KINDS; m++)
        for (int pr = 0; pr < 2; pr++) {
            tcase t = base_case(DATTN_F32, m % 3 == 0 ? 32 : m % 3 == 1 ? 64 : 128, 3, 2, 333);
            t.mask = m;
            t.padrows = pr;
            t.lay = pr ? LAY_FUSED : LAY_CONTIG;
            set_pos(&t, (m + pr) % 3);
            t.force = f32_force;
            run_case(&t, F32_NEXT, NULL, NULL);
        }
    /* 4. packed (varlen), max_seqlen > the longest sequence, fused layout; packed == padded */
    for (int k = 0; k < 6; k++) {
        tcase t = base_case(DATTN_F32, k % 3 == 0 ? 32 : k % 3 == 1 ? 64 : 128, 5, 2, k < 3 ? 300 : 800);
        t.packed = 1;
        set_pos(&t, k % 3);
        t.maxlen_short = k == 4;
        t.lay = k == 5 ? LAY_FUSED : LAY_CONTIG;
        t.force = f32_force;
        run_case(&t, F32_NEXT, NULL, NULL);
    }
    for (int k = 0; k < 3; k++)
        packed_vs_padded(DATTN_F32, k == 0 ? 32 : k == 1 ? 64 : 128, k == 1 ? 700 : 260, k, F32_NEXT, DATTN_MATH_IEEE, NULL);
    /* 5. dropout: masks (HF padded rows go to the padrows kernel), ZERO rows, packed,
     *    saturated and band tiles, every D */
    for (int k = 0; k < 6; k++) {
        tcase t = base_case(DATTN_F32, k % 3 == 0 ? 32 : k % 3 == 1 ? 64 : 128, 3, 2, k < 3 ? 200 : 650);
        t.drop = k % 2 ? 0.1f : 0.4f;
        t.mask = k == 0 ? MASK_HOLES : k == 1 ? MASK_LEFT : k == 2 ? MASK_ALLPAD : MASK_RIGHT;
        t.padrows = k == 3;
        t.packed = k == 4;
        set_pos(&t, k % 3);
        t.force = f32_force;
        run_case(&t, F32_NEXT, NULL, NULL);
    }
    /* 6. the old simple kernel on the same kinds of cases (DATTN_CUDA_FWD=simple), and
     *    unaligned rows (the library falls back to the simple kernel by itself) */
    for (int k = 0; k < 3; k++) {
        tcase t = base_case(DATTN_F32, k == 0 ? 32 : k == 1 ? 64 : 128, 2, 2, k == 1 ? 700 : 200);
        t.mask = k == 1 ? MASK_HOLES : MASK_LEFT;
        set_pos(&t, k);
        t.force = "simple";
        run_case(&t, F32_NEXT, NULL, NULL);
    }
    {
        tcase t = base_case(DATTN_F32, 64, 2, 2, 200);
        t.lay = LAY_UNALIGNED;
        t.mask = MASK_HOLES;
        run_case(&t, F32_NEXT, NULL, NULL);
    }
    /* 7. longer: all rows at 2049 (v3: mostly saturated tiles), sampled rows at 8K */
    {
        tcase t = base_case(DATTN_F32, 64, 1, 2, 2049);
        t.mask = MASK_RIGHT;
        t.force = f32_force;
        run_case(&t, F32_NEXT, NULL, NULL);
        t = base_case(DATTN_F32, 128, 1, 2, 8192);
        t.sample = 32;
        t.mask = MASK_HOLES;
        t.force = f32_force;
        run_case(&t, F32_NEXT, NULL, NULL);
    }
    /* 8. determinism: the same fp32 call twice, bitwise */
    {
        tcase t = base_case(DATTN_F32, 64, 2, 3, 777);
        t.mask = MASK_HOLES;
        t.force = f32_force;
        if (t.L > max_l) goto f32_done; /* --max-l: both calls skipped, nothing to compare */
        run_out r1, r2;
        memset(&r1, 0, sizeof r1);
        memset(&r2, 0, sizeof r2);
        const uint64_t sd = F32_NEXT;
        run_case(&t, sd, &r1, NULL);
        run_case(&t, sd, &r2, NULL);
        if (!r1.out || !r2.out || memcmp(r1.out, r2.out, r1.out_bytes) || memcmp(r1.lse, r2.lse, r1.lse_bytes)) {
            printf("FAIL determinism (f32): two identical calls differ\n");
            n_fail++;
        } else {
            n_pass++;
        }
        free(r1.out); free(r1.lse); free(r2.out); free(r2.lse);
        for (int k = 0; k < 5; k++) {
            free(r1.in[k]);
            free(r2.in[k]);
        }
    }
f32_done:;
#undef F32_NEXT
}

/* The TF32 tensor-core kernel (src/cuda/fwd_tf32.cu): fp32 in DATTN_MATH_TF32 mode, cases
 * pinned with DATTN_CUDA_FWD=tf32 (UNSUPPORTED instead of a silent IEEE fallback). Same
 * geometry as the IEEE tiled kernel (64 x 64 tiles): L across tile edges, every mask and
 * padded-row mode, each term alone / both / none, v3 log, linear and small-log positions
 * (every tile class), fused strides, packed incl. max_seqlen > the longest sequence,
 * packed == padded bitwise, dropout, a long L, determinism; bound TF32_TOL_*. */
static int only_tf32;

/* 1 when this GPU has the shared memory of the TF32 kernel's instance for head dim D
 * (t32_geom<D>::SMEM of fwd_tf32.cu: 100 / 140 / 221 KB; an H100/H200 has all three, an
 * A100 D 32 and 64, sm_86/89 none): elsewhere the library runs the IEEE kernels in TF32
 * mode, so the cases run unpinned there (same bound, IEEE kernel). */
static int tf32_fits(int D)
{
    static int optin = -1;
    if (optin < 0) {
        int dev = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
            optin = 0;
    }
    const int need = D == 32 ? 102400 : D == 64 ? 143616 : 226048;
    return optin >= need;
}

/* One TF32 case at the given seed; keep as run_case. */
static int tf32_run(tcase t, uint64_t seed, run_out *keep)
{
    t.math = DATTN_MATH_TF32;
    if (!t.force) t.force = tf32_fits(t.D) ? "tf32" : "auto";
    return run_case(&t, seed, keep, NULL);
}

static void free_run(run_out *r)
{
    free(r->out);
    free(r->lse);
    for (int k = 0; k < 5; k++) free(r->in[k]);
    memset(r, 0, sizeof *r);
}

/* The mode switch is real and IEEE mode is untouched, on the same inputs:
 *   TF32 mode (library's choice) == TF32 pinned (DATTN_CUDA_FWD=tf32), bitwise;
 *   IEEE mode (library's choice) == the IEEE tiled kernel pinned (f32) == TF32 mode pinned
 *     to the IEEE kernel (f32), bitwise: IEEE mode never reaches the TF32 kernel;
 *   TF32 output != IEEE output (some element differs: the tensor-core path ran), each within
 *     its own bound of the float64 reference (run_case);
 *   an IEEE-mode call pinned to the TF32 kernel is UNSUPPORTED (never silently TF32). */
static void tf32_mode_checks(uint64_t seed)
{
    for (int v = 0; v < 2; v++) {
        tcase t = base_case(DATTN_F32, v ? 128 : 64, 2, 2, v ? 200 : 300);
        t.mask = v ? MASK_RIGHT : MASK_HOLES;
        set_pos(&t, v ? 2 : 0);
        if (t.L > max_l || !tf32_fits(t.D)) continue;
        run_out r[5];
        memset(r, 0, sizeof r);
        const char *names[5] = {"tf32 auto", "tf32 pinned", "ieee auto", "ieee pinned f32", "tf32-mode pinned f32"};
        const int math[5] = {1, 1, 0, 0, 1};
        /* "auto": a DATTN_CUDA_FWD value no path answers to, i.e. the library's choice even
         * under --path or an outside DATTN_CUDA_FWD */
        const char *force[5] = {"auto", "tf32", "auto", "f32", "f32"};
        int bad = 0;
        for (int k = 0; k < 5; k++) {
            tcase x = t;
            x.math = math[k];
            x.force = force[k];
            bad |= run_case(&x, seed, &r[k], NULL);
        }
        int ok = !bad;
        for (int k = 0; k < 5 && ok; k++)
            if (!r[k].out) ok = 0;
        if (ok) {
            const size_t ob = r[0].out_bytes, lb = r[0].lse_bytes;
            if (memcmp(r[0].out, r[1].out, ob) || memcmp(r[0].lse, r[1].lse, lb)) {
                printf("FAIL tf32 mode (D=%d): %s != %s\n", t.D, names[0], names[1]);
                ok = 0;
            }
            for (int k = 3; k < 5; k++)
                if (memcmp(r[2].out, r[k].out, ob) || memcmp(r[2].lse, r[k].lse, lb)) {
                    printf("FAIL tf32 mode (D=%d): %s != %s (IEEE mode must stay on the IEEE kernel)\n", t.D,
                           names[2], names[k]);
                    ok = 0;
                }
            if (!memcmp(r[0].out, r[2].out, ob)) {
                printf("FAIL tf32 mode (D=%d): TF32 and IEEE outputs are bitwise equal (TF32 path not taken?)\n", t.D);
                ok = 0;
            } else {
                /* how far apart, for the log */
                double dmax = 0.0;
                for (size_t e = 0; e < ob / 4; e++) {
                    const double d = fabs((double)((float *)r[0].out)[e] - (double)((float *)r[2].out)[e]);
                    if (d > dmax) dmax = d;
                }
                if (getenv("DATTN_TEST_VERBOSE")) printf("ok   tf32 mode (D=%d): max |tf32 - ieee| = %.3g\n", t.D, dmax);
            }
        }
        if (ok) n_pass++;
        else n_fail++;
        for (int k = 0; k < 5; k++) free_run(&r[k]);
    }
    /* IEEE mode pinned to the TF32 kernel: UNSUPPORTED, nothing written */
    {
        const int L = 64, D = 64;
        const size_t n = (size_t)L * D;
        float *buf[4];
        for (int k = 0; k < 4; k++) {
            CK(cudaMalloc((void **)&buf[k], n * 4));
            CK(cudaMemset(buf[k], k == 3 ? 0xFF : 0x3c, n * 4));
        }
        float *pkq;
        CK(cudaMalloc((void **)&pkq, 512 * 64 * 4));
        CK(cudaMemset(pkq, 0x3c, 512 * 64 * 4));
        dattn_params p;
        dattn_params_init(&p);
        p.device = DATTN_DEVICE_CUDA;
        p.dtype = DATTN_F32;
        p.fp32_math = DATTN_MATH_IEEE;
        p.batch = 1; p.seqlen = L; p.heads = 1; p.head_dim = D;
        dattn_tensor *ts[4] = {&p.q, &p.k, &p.v, &p.out};
        for (int k = 0; k < 4; k++) {
            ts[k]->data = buf[k];
            ts[k]->stride[0] = (int64_t)L * D; ts[k]->stride[1] = D; ts[k]->stride[2] = D; ts[k]->stride[3] = 1;
        }
        p.pk.data = pkq; p.pk.stride[0] = 512 * 64; p.pk.stride[1] = 64; p.pk.stride[2] = 1;
        p.pq = p.pk;
        set_force("tf32");
        const dattn_status st = dattn_fwd(&p);
        p.fp32_math = DATTN_MATH_TF32;
        const dattn_status st2 = dattn_fwd(&p);
        set_force(NULL);
        CK(cudaDeviceSynchronize());
        uint32_t *hb = malloc(n * 4);
        CK(cudaMemcpy(hb, buf[3], n * 4, cudaMemcpyDeviceToHost));
        int written = 0;
        for (size_t e = 0; e < n && st2 != DATTN_OK; e++) written |= hb[e] != 0xFFFFFFFFu;
        if (st != DATTN_UNSUPPORTED || st2 != DATTN_OK) {
            printf("FAIL tf32 pin: IEEE mode + DATTN_CUDA_FWD=tf32 gave %s (want UNSUPPORTED), TF32 mode %s (want OK)\n",
                   dattn_status_string(st), dattn_status_string(st2));
            n_fail++;
        } else if (written) {
            printf("FAIL tf32 pin: a rejected call wrote the output\n");
            n_fail++;
        } else {
            n_pass++;
        }
        free(hb);
        for (int k = 0; k < 4; k++) cudaFree(buf[k]);
        cudaFree(pkq);
    }
}

static void tf32_cases(int q, uint64_t *cs)
{
#define T32_NEXT (*cs = *cs * 6364136223846793005ull + 1442695040888963407ull)
    if (q) {
        for (int di = 0; di < 3; di++) {
            const int D = di == 0 ? 32 : di == 1 ? 64 : 128;
            tcase t = base_case(DATTN_F32, D, 2, 2, 150);
            t.mask = di == 1 ? MASK_HOLES : MASK_RIGHT;
            t.padrows = di == 2;
            set_pos(&t, 2);
            tf32_run(t, T32_NEXT, NULL);
        }
        tcase t = base_case(DATTN_F32, 64, 3, 2, 140);
        t.packed = 1;
        set_pos(&t, 2);
        tf32_run(t, T32_NEXT, NULL);
        t = base_case(DATTN_F32, 64, 2, 2, 130);
        t.mask = MASK_HOLES;
        t.drop = 0.3f;
        set_pos(&t, 2);
        tf32_run(t, T32_NEXT, NULL);
        tf32_mode_checks(T32_NEXT);
        return;
    }
    /* 1. L across tile edges, all rows: D x L, cycling masks, positions, terms, padded-row
     *    modes, strided layouts */
    static const int Ls[] = {1, 2, 7, 63, 64, 65, 127, 128, 129, 191, 255, 257, 513, 700, 1031};
    const int nL = (int)(sizeof Ls / sizeof Ls[0]);
    int cyc = 0;
    for (int di = 0; di < 3; di++)
        for (int li = 0; li < nL; li++, cyc++) {
            const int D = di == 0 ? 32 : di == 1 ? 64 : 128;
            tcase t = base_case(DATTN_F32, D, 2, 2, Ls[li]);
            t.mask = cyc % MASK_KINDS;
            set_pos(&t, cyc % 3);
            t.pos_att = (cyc / 3) % 4 == 0 ? 3 : (cyc / 3) % 4 == 3 ? 0 : (cyc / 3) % 4;
            t.padrows = (cyc / 2) % 2;
            if (cyc % 4 == 3) t.lay = LAY_FUSED;
            tf32_run(t, T32_NEXT, NULL);
        }
    /* 2. each term alone, both and none, every position kind, at a length with every tile
     *    class (v3: band up to ~506, then saturated) */
    for (int pk = 0; pk < 3; pk++)
        for (int pa = 0; pa < 4; pa++) {
            tcase t = base_case(DATTN_F32, pa == 2 ? 128 : 64, 2, 2, pk == 0 ? 700 : 300);
            set_pos(&t, pk);
            t.pos_att = pa;
            t.mask = pa % 2 ? MASK_RIGHT : MASK_NONE;
            tf32_run(t, T32_NEXT, NULL);
        }
    /* 3. every mask x padded-row mode, strided layouts */
    for (int m = 0; m < MASK_KINDS; m++)
        for (int pr = 0; pr < 2; pr++) {
            tcase t = base_case(DATTN_F32, m % 3 == 0 ? 32 : m % 3 == 1 ? 64 : 128, 3, 2, 333);
            t.mask = m;
            t.padrows = pr;
            t.lay = pr ? LAY_FUSED : LAY_CONTIG;
            set_pos(&t, (m + pr) % 3);
            tf32_run(t, T32_NEXT, NULL);
        }
    /* 4. packed (varlen), max_seqlen > the longest sequence, fused layout; packed == padded */
    for (int k = 0; k < 6; k++) {
        tcase t = base_case(DATTN_F32, k % 3 == 0 ? 32 : k % 3 == 1 ? 64 : 128, 5, 2, k < 3 ? 300 : 800);
        t.packed = 1;
        set_pos(&t, k % 3);
        t.maxlen_short = k == 4;
        t.lay = k == 5 ? LAY_FUSED : LAY_CONTIG;
        tf32_run(t, T32_NEXT, NULL);
    }
    for (int k = 0; k < 3; k++)
        packed_vs_padded(DATTN_F32, k == 0 ? 32 : k == 1 ? 64 : 128, k == 1 ? 700 : 260, k, T32_NEXT,
                         DATTN_MATH_TF32, tf32_fits(k == 0 ? 32 : k == 1 ? 64 : 128) ? "tf32" : "auto");
    /* 5. dropout: masks (HF padded rows go to the padrows kernel), ZERO rows, packed,
     *    saturated and band tiles, every D */
    for (int k = 0; k < 6; k++) {
        tcase t = base_case(DATTN_F32, k % 3 == 0 ? 32 : k % 3 == 1 ? 64 : 128, 3, 2, k < 3 ? 200 : 650);
        t.drop = k % 2 ? 0.1f : 0.4f;
        t.mask = k == 0 ? MASK_HOLES : k == 1 ? MASK_LEFT : k == 2 ? MASK_ALLPAD : MASK_RIGHT;
        t.padrows = k == 3;
        t.packed = k == 4;
        set_pos(&t, k % 3);
        tf32_run(t, T32_NEXT, NULL);
    }
    /* 6. TF32 mode where the TF32 kernel does not apply: the library falls back to an IEEE
     *    kernel (unaligned rows; D = 48) and says nothing (same bound) */
    {
        tcase t = base_case(DATTN_F32, 64, 2, 2, 200);
        t.lay = LAY_UNALIGNED;
        t.mask = MASK_HOLES;
        t.math = DATTN_MATH_TF32;
        run_case(&t, T32_NEXT, NULL, NULL);
        t = base_case(DATTN_F32, 48, 2, 2, 150);
        t.math = DATTN_MATH_TF32;
        run_case(&t, T32_NEXT, NULL, NULL);
    }
    /* 7. longer: all rows at 2049 (v3: mostly saturated tiles), sampled rows at 8K */
    {
        tcase t = base_case(DATTN_F32, 64, 1, 2, 2049);
        t.mask = MASK_RIGHT;
        tf32_run(t, T32_NEXT, NULL);
        t = base_case(DATTN_F32, 128, 1, 2, 8192);
        t.sample = 32;
        t.mask = MASK_HOLES;
        tf32_run(t, T32_NEXT, NULL);
        t = base_case(DATTN_F32, 64, 2, 2, 8192);
        t.sample = 24;
        set_pos(&t, 1);
        tf32_run(t, T32_NEXT, NULL);
    }
    /* 8. determinism: the same TF32 call twice, bitwise; the mode checks */
    {
        tcase t = base_case(DATTN_F32, 64, 2, 3, 777);
        t.mask = MASK_HOLES;
        if (t.L <= max_l) {
            run_out r1, r2;
            memset(&r1, 0, sizeof r1);
            memset(&r2, 0, sizeof r2);
            const uint64_t sd = T32_NEXT;
            tf32_run(t, sd, &r1);
            tf32_run(t, sd, &r2);
            if (!r1.out || !r2.out || memcmp(r1.out, r2.out, r1.out_bytes) || memcmp(r1.lse, r2.lse, r1.lse_bytes)) {
                printf("FAIL determinism (tf32): two identical calls differ\n");
                n_fail++;
            } else {
                n_pass++;
            }
            free_run(&r1);
            free_run(&r2);
        }
    }
    tf32_mode_checks(T32_NEXT);
#undef T32_NEXT
}

/* --path ws: the warp-specialized forward's own sweep (its cases: ws_case). Lengths across its
 * 128-row blocks and 64-key tiles (a last tile of 1 key, of 63, a second warpgroup without
 * rows, ...), both dtypes, the three slot maps (v3 log: band and saturated tiles from L 513; the
 * small log map saturates from |r| 32: saturated tiles of both sides early; linear), with and
 * without position terms, contiguous and fused (qkv) layouts, without a mask and with each mask
 * kind in both padded-row modes; all rows checked, then sampled rows at 8K; packed calls (random
 * lengths) up to 2049 and at 8K. small: a few small cases (sanitizers). */
static void ws_cases(int small, uint64_t *cs)
{
#define WS_NEXT (*cs = *cs * 6364136223846793005ull + 1442695040888963407ull)
    static const int Ls[] = {1, 2, 7, 63, 64, 65, 127, 128, 129, 191, 192, 255, 256, 257, 383, 511, 512, 513, 640, 1031, 2049};
    const int nL = small ? 3 : (int)(sizeof Ls / sizeof Ls[0]);
    static const int qL[] = {65, 200, 300};
    int cyc = 0;
    for (int dti = 0; dti < 2; dti++)
        for (int li = 0; li < nL; li++)
            for (int pk = 0; pk < 3; pk++, cyc++) {
                tcase t = base_case(dti ? DATTN_BF16 : DATTN_F16, 64, 2, 2, small ? qL[li] : Ls[li]);
                set_pos(&t, small ? 2 : pk);
                t.pos_att = cyc % 7 == 3 ? 0 : 3;
                if (cyc % 4 == 1) t.lay = LAY_FUSED;
                /* masks: none every other case, else each kind in turn, both padded-row modes */
                t.mask = cyc % 2 ? (cyc / 2) % MASK_KINDS : MASK_NONE;
                t.padrows = (cyc / 3) % 2;
                if (small && pk) break;
                run_case(&t, WS_NEXT, NULL, NULL);
            }
    if (small) { /* one packed call */
        tcase t = base_case(DATTN_F16, 64, 3, 2, 200);
        t.packed = 1;
        set_pos(&t, 2);
        run_case(&t, WS_NEXT, NULL, NULL);
        return;
    }
    tcase t = base_case(DATTN_F16, 64, 3, 5, 700); /* odd B, H */
    run_case(&t, WS_NEXT, NULL, NULL);
    t = base_case(DATTN_BF16, 64, 2, 1, 130); /* one head (its stride 0 in the call) */
    run_case(&t, WS_NEXT, NULL, NULL);
    t = base_case(DATTN_F16, 64, 1, 1, 1);
    run_case(&t, WS_NEXT, NULL, NULL);
    t = base_case(DATTN_BF16, 64, 2, 2, 8192);
    t.sample = 48;
    run_case(&t, WS_NEXT, NULL, NULL);
    t.mask = MASK_HOLES;
    run_case(&t, WS_NEXT, NULL, NULL);
    t = base_case(DATTN_F16, 64, 1, 2, 8192);
    t.sample = 32;
    set_pos(&t, 2);
    run_case(&t, WS_NEXT, NULL, NULL);
    /* packed (random lengths, empty ones included; the longest sequence at max_seqlen or
     * shorter): both dtypes, every slot map, with and without position terms, then 8K sampled */
    for (int k = 0; k < 12; k++) {
        t = base_case(k & 1 ? DATTN_BF16 : DATTN_F16, 64, 3 + k % 3, 2, Ls[9 + k % 12]);
        t.packed = 1;
        t.maxlen_short = k % 4 == 2;
        set_pos(&t, k % 3);
        t.pos_att = k % 5 == 4 ? 0 : 3;
        if (k % 3 == 1) t.lay = LAY_FUSED;
        run_case(&t, WS_NEXT, NULL, NULL);
    }
    t = base_case(DATTN_BF16, 64, 3, 2, 8192);
    t.packed = 1;
    t.sample = 32;
    run_case(&t, WS_NEXT, NULL, NULL);
#undef WS_NEXT
}

int main(int argc, char **argv)
{
    uint64_t seed = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--only-f32")) { /* f32_cases options (see there) */
            only_f32 = 1;
            continue;
        }
        if (!strcmp(argv[i], "--only-tf32")) { /* tf32_cases only (with --quick its small subset) */
            only_tf32 = 1;
            continue;
        }
        if (!strcmp(argv[i], "--f32-force") && i + 1 < argc) {
            f32_force = argv[++i];
            continue;
        }
        if (!strcmp(argv[i], "--quick")) quick = 1;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--max-l") && i + 1 < argc) max_l = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--path") && i + 1 < argc) path = argv[++i];
        else if (!strcmp(argv[i], "--same-as") && i + 1 < argc) same_as = argv[++i];
        else if (!strcmp(argv[i], "--lse-tol") && i + 1 < argc) lse_tol = atof(argv[++i]);
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    if (dattn_device_supported(DATTN_DEVICE_CUDA, -1) != DATTN_OK) {
        printf("CUDA device not supported (%s): skipped\n", dattn_last_error());
        return 77;
    }
    if (!seed) {
        FILE *f = fopen("/dev/urandom", "rb");
        if (!f || fread(&seed, sizeof seed, 1, f) != 1) seed = 12345;
        if (f) fclose(f);
        seed %= 1000000007ull;
    }
    if (path && strcmp(path, "sm80") && strcmp(path, "sm90") && strcmp(path, "sm90n64") && strcmp(path, "sm90n128") &&
        strcmp(path, "sm90w1") && strcmp(path, "sm90w1ov") && strcmp(path, "sm90w1b") && strcmp(path, "sm90w1c") &&
        strcmp(path, "sm90w1d") && strcmp(path, "sm90w1e") && strcmp(path, "sm90w1f") &&
        strcmp(path, "sm90w1g") && strcmp(path, "sm90w1h") && !ws_path()) {
        fprintf(stderr, "--path: sm80, sm90, sm90n64, sm90n128, sm90w1, sm90w1ov, sm90w1b, sm90w1c, sm90w1d, sm90w1e, sm90w1f, sm90w1g, sm90w1h, ws, wsk, wsg, wskg or wsp\n");
        return 2;
    }
    if (lse_tol >= 0.0 && !same_as) {
        fprintf(stderr, "--lse-tol TOL needs --same-as NAME\n");
        return 2;
    }
    if (same_as && !(path && !strncmp(path, "sm90", 4) && !strncmp(same_as, "sm90", 4)) &&
        !(ws_path() && ws_name(same_as))) {
        fprintf(stderr, "--same-as NAME needs --path sm90* and an sm90* NAME, or two ws forms (the cases both run)\n");
        return 2;
    }
    /* an outside DATTN_CUDA_FWD keeps applying to every unforced case */
    static char env_path[32];
    if (!path && getenv("DATTN_CUDA_FWD")) {
        snprintf(env_path, sizeof env_path, "%s", getenv("DATTN_CUDA_FWD"));
        path = env_path;
    }
    printf("test_cuda_fwd: seed %llu (--seed to repeat), reference: %s, path: %s%s%s\n", (unsigned long long)seed,
           ref64_fwd_row ? "ref64" : "local float64", path ? path : "library's choice",
           same_as ? (lse_tol >= 0.0 ? ", lse near " : ", bitwise the same as ") : "", same_as ? same_as : "");
    uint64_t cs = seed;
#define NEXT (cs = cs * 6364136223846793005ull + 1442695040888963407ull)

    api_checks();

    if (only_tf32) {
        tf32_cases(quick, &cs);
        printf("%d passed, %d failed\n", n_pass, n_fail);
        return n_fail ? 1 : 0;
    }
    if (only_f32) {
        f32_cases(quick, &cs);
        printf("%d passed, %d failed\n", n_pass, n_fail);
        return n_fail ? 1 : 0;
    }
    if (ws_path()) {
        ws_cases(quick, &cs);
        if (quick) {
            printf("%d passed, %d failed\n", n_pass, n_fail);
            return n_fail ? 1 : 0;
        }
    }
    if (quick) {
        /* small shapes for compute-sanitizer: every path once */
        const int dts[2] = {DATTN_F16, DATTN_BF16};
        for (int di = 0; di < 3; di++) {
            const int D = di == 0 ? 32 : di == 1 ? 64 : 128;
            for (int k = 0; k < 2; k++) {
                tcase t = base_case(dts[k], D, 2, 2, 150);
                t.mask = k ? MASK_HOLES : MASK_RIGHT;
                set_pos(&t, 2);
                run_case(&t, NEXT, NULL, NULL);
                t.force = "small";
                run_case(&t, NEXT, NULL, NULL);
                if (D != 32) { /* both tensor-core kernels on Hopper */
                    t.force = "sm80";
                    run_case(&t, NEXT, NULL, NULL);
                }
            }
        }
        tcase t = base_case(DATTN_F16, 64, 3, 2, 200);
        t.packed = 1;
        set_pos(&t, 2);
        run_case(&t, NEXT, NULL, NULL);
        /* the default's warp-specialized form on sm_90 (padded, unmasked, both terms, L >=
         * FWD_WS_MIN_L: wskgt, its expanded tables in the workspace), saturated tiles or none */
        for (int k = 0; k < 2; k++) {
            t = base_case(dts[k], 64, 1, 2, 400);
            set_pos(&t, k ? 0 : 2);
            run_case(&t, NEXT, NULL, NULL);
        }
        t = base_case(DATTN_F32, 64, 2, 1, 70);
        t.mask = MASK_LEFT;
        run_case(&t, NEXT, NULL, NULL);
        t = base_case(DATTN_F16, 64, 2, 1, 70);
        t.lay = LAY_UNALIGNED;
        t.padrows = DATTN_PADROWS_ZERO;
        t.mask = MASK_ALLPAD;
        run_case(&t, NEXT, NULL, NULL);
        f32_cases(1, &cs);
        tf32_cases(1, &cs);
        printf("%d passed, %d failed\n", n_pass, n_fail);
        return n_fail ? 1 : 0;
    }

    /* 1. L across tile edges, all rows checked: dtype x D x L, cycling masks, positions,
     *    terms and padded-row modes. */
    static const int Ls[] = {1, 2, 7, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1031};
    const int nL = (int)(sizeof Ls / sizeof Ls[0]);
    int cyc = 0;
    for (int dti = 0; dti < 2; dti++)
        for (int di = 0; di < 3; di++)
            for (int li = 0; li < nL; li++, cyc++) {
                const int D = di == 0 ? 32 : di == 1 ? 64 : 128;
                tcase t = base_case(dti ? DATTN_BF16 : DATTN_F16, D, 2, 2, Ls[li]);
                t.mask = cyc % MASK_KINDS;
                set_pos(&t, cyc % 3);
                t.pos_att = (cyc / 3) % 4 == 0 ? 3 : (cyc / 3) % 4;
                t.padrows = (cyc / 2) % 2;
                if (cyc % 5 == 4) t.lay = LAY_FUSED;
                run_case(&t, NEXT, NULL, NULL);
            }
    /* 2. each term alone and all, every position kind, both tile configurations */
    for (int pk = 0; pk < 3; pk++)
        for (int pa = 0; pa < 4; pa++)
            for (int f = 0; f < 2; f++) {
                tcase t = base_case(DATTN_F16, 64, 2, 2, pk == 2 ? 700 : 300);
                set_pos(&t, pk);
                t.pos_att = pa;
                t.mask = MASK_RIGHT;
                t.force = f ? "small" : NULL;
                run_case(&t, NEXT, NULL, NULL);
            }
    /* 3. masks x padded-row modes x layouts, D = 64 */
    for (int m = 0; m < MASK_KINDS; m++)
        for (int pr = 0; pr < 2; pr++)
            for (int lay = 0; lay < 3; lay++) {
                tcase t = base_case(m % 2 ? DATTN_BF16 : DATTN_F16, 64, 3, 2, 333);
                t.mask = m;
                t.padrows = pr;
                t.lay = lay;
                set_pos(&t, 2);
                run_case(&t, NEXT, NULL, NULL);
            }
    /* 4. packed (varlen), including max_seqlen > longest sequence */
    for (int k = 0; k < 8; k++) {
        const int D = k % 3 == 0 ? 32 : k % 3 == 1 ? 64 : 128;
        tcase t = base_case(k % 2 ? DATTN_BF16 : DATTN_F16, D, 5, 2, k < 4 ? 300 : 1100);
        t.packed = 1;
        set_pos(&t, k % 3);
        t.maxlen_short = k % 4 == 3;
        t.lay = k == 5 ? LAY_FUSED : k == 6 ? LAY_UNALIGNED : LAY_CONTIG;
        t.force = k == 7 ? "small" : NULL;
        run_case(&t, NEXT, NULL, NULL);
    }
    for (int k = 0; k < 4; k++)
        packed_vs_padded(k % 2 ? DATTN_BF16 : DATTN_F16, k < 2 ? 64 : 128, k % 2 ? 700 : 260, k % 3, NEXT, DATTN_MATH_IEEE, NULL);
    /* 5. fp32 (IEEE and TF32 mode), other head dims on the simple path, forced paths */
    for (int k = 0; k < 6; k++) {
        const int D = k % 3 == 0 ? 32 : k % 3 == 1 ? 64 : 128;
        tcase t = base_case(DATTN_F32, D, 2, 2, k < 3 ? 65 : 257);
        t.math = k % 2;
        t.mask = k % MASK_KINDS;
        set_pos(&t, k % 3);
        run_case(&t, NEXT, NULL, NULL);
    }
    {
        tcase t = base_case(DATTN_F16, 48, 2, 2, 200);
        t.mask = MASK_HOLES;
        run_case(&t, NEXT, NULL, NULL);
        t = base_case(DATTN_BF16, 256, 1, 2, 130);
        run_case(&t, NEXT, NULL, NULL);
        t = base_case(DATTN_F16, 64, 2, 2, 300);
        t.force = "simple";
        t.mask = MASK_LEFT;
        run_case(&t, NEXT, NULL, NULL);
        t = base_case(DATTN_BF16, 64, 3, 5, 200); /* odd B, H */
        t.mask = MASK_RIGHT;
        run_case(&t, NEXT, NULL, NULL);
    }
    /* 6. longer sequences: all rows at 2049, sampled rows at 8K and 32K */
    {
        tcase t = base_case(DATTN_F16, 64, 1, 2, 2049);
        t.mask = MASK_RIGHT;
        run_case(&t, NEXT, NULL, NULL);
        t = base_case(DATTN_BF16, 64, 2, 2, 8192);
        t.sample = 48;
        t.mask = MASK_HOLES;
        run_case(&t, NEXT, NULL, NULL);
        t = base_case(DATTN_F16, 128, 1, 2, 8192);
        t.sample = 32;
        set_pos(&t, 1);
        run_case(&t, NEXT, NULL, NULL);
        t = base_case(DATTN_F16, 64, 1, 2, 32768);
        t.sample = 32;
        run_case(&t, NEXT, NULL, NULL);
        t = base_case(DATTN_BF16, 64, 2, 1, 32768);
        t.sample = 24;
        t.packed = 1;
        run_case(&t, NEXT, NULL, NULL);
        t = base_case(DATTN_F16, 32, 1, 1, 8192);
        t.sample = 24;
        t.force = "small";
        set_pos(&t, 2);
        run_case(&t, NEXT, NULL, NULL);
    }
    determinism(NEXT);
    f32_cases(0, &cs);
    tf32_cases(0, &cs);
    printf("%d passed, %d failed\n", n_pass, n_fail);
    return n_fail ? 1 : 0;
}
#endif
