/* Front end: error strings, parameter validation, workspace sizing, dispatch to the
 * CPU or CUDA backend, dropout RNG. Everything a backend may assume about a call is
 * checked here, once, before any output is touched. */
#include "internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---------------------------------------------------------------- errors */

static _Thread_local char err_buf[512];

dattn_status dattn_set_error(dattn_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_buf, sizeof err_buf, fmt, ap);
    va_end(ap);
    return st;
}

void dattn_clear_error(void) { err_buf[0] = '\0'; }

const char *dattn_last_error(void) { return err_buf; }

const char *dattn_status_string(dattn_status s)
{
    switch (s) {
    case DATTN_OK: return "ok";
    case DATTN_INVALID_ARG: return "invalid argument";
    case DATTN_UNSUPPORTED: return "unsupported";
    case DATTN_CUDA_ERROR: return "CUDA error";
    case DATTN_INTERNAL: return "internal error";
    }
    return "unknown status";
}

#define STR2(x) #x
#define STR(x) STR2(x)

const char *dattn_version(void)
{
    return STR(DATTN_VERSION_MAJOR) "." STR(DATTN_VERSION_MINOR) "." STR(DATTN_VERSION_PATCH);
}

size_t dattn_params_sizeof(void) { return sizeof(dattn_params); }

const char *dattn_build_info(void)
{
    static _Thread_local char buf[256];
    snprintf(buf, sizeof buf, "dattn %s; cpu: %s; cuda: %s", dattn_version(), dattn_cpu_isa(),
             dattn_cuda_built() ? dattn_cuda_archs() : "not built");
    return buf;
}

/* ---------------------------------------------------------------- defaults */

void dattn_params_init(dattn_params *p)
{
    if (!p) return;
    memset(p, 0, sizeof *p);
    p->abi_version = DATTN_ABI_VERSION;
    p->device = DATTN_DEVICE_CPU;
    p->device_index = -1;
    p->dtype = DATTN_F32;
    p->layout = DATTN_LAYOUT_PADDED;
    p->pos_att = DATTN_POS_C2P | DATTN_POS_P2C;
    p->position_buckets = 256;
    p->max_relative_positions = 512;
    p->padded_rows = DATTN_PADROWS_HF;
    p->fp32_math = DATTN_MATH_IEEE;
}

size_t dattn_dtype_size(int32_t dtype)
{
    switch (dtype) {
    case DATTN_F32: return 4;
    case DATTN_F16: return 2;
    case DATTN_BF16: return 2;
    }
    return 0;
}

float dattn_scale(int64_t head_dim, int32_t pos_att)
{
    int f = 1 + ((pos_att & DATTN_POS_C2P) != 0) + ((pos_att & DATTN_POS_P2C) != 0);
    /* transformers: torch.sqrt(float32(D) * f) in float32 */
    return sqrtf((float)head_dim * (float)f);
}

dattn_status dattn_device_supported(int32_t device, int32_t device_index)
{
    dattn_clear_error();
    if (device == DATTN_DEVICE_CPU) return DATTN_OK;
    if (device != DATTN_DEVICE_CUDA)
        return dattn_set_error(DATTN_INVALID_ARG, "device must be DATTN_DEVICE_CPU (0) or "
                                                  "DATTN_DEVICE_CUDA (1), got %d",
                               device);
    if (!dattn_cuda_built())
        return dattn_set_error(DATTN_UNSUPPORTED, "this build of dattn has no CUDA backend");
    return dattn_cuda_device_supported(device_index);
}

/* ---------------------------------------------------------------- dropout RNG */

void dattn_philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                      uint32_t k1, uint32_t out[4])
{
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0;
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* floor(p * 2^16) in [0, 65535] (p < 1); 0 (p < 2^-16) turns dropout off (dattn.h). */
static uint32_t drop_threshold(float p)
{
    if (!(p > 0.0f)) return 0;
    return (uint32_t)floor((double)p * 65536.0);
}

int dattn_dropout_keep(uint64_t seed, uint64_t offset, float dropout_p, int64_t b, int64_t h,
                       int64_t heads, int64_t i, int64_t j)
{
    uint32_t thr = drop_threshold(dropout_p);
    if (thr == 0) return 1;
    uint32_t r[4];
    dattn_philox4x32((uint32_t)(j >> 3), (uint32_t)i, (uint32_t)(b * heads + h),
                     (uint32_t)offset, (uint32_t)seed,
                     (uint32_t)(seed >> 32) ^ (uint32_t)(offset >> 32), r);
    return ((r[(j >> 1) & 3] >> (16 * (j & 1))) & 0xFFFFu) >= thr;
}

/* ---------------------------------------------------------------- validation */

#define MAX_INDEX ((int64_t)1 << 62)

/* a * b, or -1 on overflow past MAX_INDEX (a, b >= 0). */
static int64_t mul_ck(int64_t a, int64_t b)
{
    if (a < 0 || b < 0) return -1;
    if (a != 0 && b > MAX_INDEX / a) return -1;
    return a * b;
}

typedef struct tdesc {
    const char *name;
    const dattn_tensor *t;
    int rank;
    int64_t ext[4];
    size_t elsize;
    int output;       /* 0 input, 1 output, 2 scratch (the workspace) */
    uintptr_t lo, hi; /* bytes [lo, hi) the tensor can touch (set by check_tensor) */
} tdesc;

static int64_t numel_of(const tdesc *d)
{
    int64_t n = 1;
    for (int k = 0; k < d->rank; k++) {
        n = mul_ck(n, d->ext[k]);
        if (n < 0) return -1;
    }
    return n;
}

static dattn_status check_tensor(tdesc *d)
{
    d->lo = d->hi = 0;
    int64_t n = numel_of(d);
    if (n < 0)
        return dattn_set_error(DATTN_INVALID_ARG, "%s: element count overflows", d->name);
    if (n == 0) return DATTN_OK;
    if (!d->t->data)
        return dattn_set_error(DATTN_INVALID_ARG, "%s.data must not be NULL", d->name);
    if ((uintptr_t)d->t->data % d->elsize != 0)
        return dattn_set_error(DATTN_INVALID_ARG, "%s.data must be aligned to %zu bytes",
                               d->name, d->elsize);
    int last = d->rank - 1;
    if (d->ext[last] > 1 && d->t->stride[last] != 1)
        return dattn_set_error(DATTN_INVALID_ARG,
                               "%s.stride[%d] must be 1 (the last dimension must be "
                               "contiguous), got %lld",
                               d->name, last, (long long)d->t->stride[last]);
    int64_t span = 0; /* largest element offset */
    int big = -1;     /* dimension with the largest offset so far */
    int64_t big_o = 0;
    for (int k = 0; k < d->rank; k++) {
        if (d->ext[k] <= 1) continue;
        int64_t s = d->t->stride[k];
        if (s < 0 || (d->output && s == 0))
            return dattn_set_error(DATTN_INVALID_ARG, "%s.stride[%d] must be %s, got %lld",
                                   d->name, k, d->output ? "> 0" : ">= 0", (long long)s);
        int64_t o = mul_ck(d->ext[k] - 1, s);
        if (o >= 0 && o > big_o) big = k, big_o = o;
        if (o < 0 || span > MAX_INDEX - o) {
            int k2 = o < 0 || big < 0 ? k : big;
            return dattn_set_error(DATTN_INVALID_ARG,
                                   "%s.stride[%d] = %lld: offsets overflow 64 bits", d->name, k2,
                                   (long long)d->t->stride[k2]);
        }
        span += o;
    }
    if (mul_ck(span + 1, (int64_t)d->elsize) < 0)
        return dattn_set_error(DATTN_INVALID_ARG, "%s: byte offsets overflow 64 bits", d->name);
    d->lo = (uintptr_t)d->t->data;
    d->hi = d->lo + (uintptr_t)((span + 1) * (int64_t)d->elsize);
    if (d->hi < d->lo)
        return dattn_set_error(DATTN_INVALID_ARG, "%s: the tensor wraps around the address space",
                               d->name);
    if (d->output) {
        /* No two elements of an output may share memory: sorted by stride, each
         * dimension must step past the whole extent of the ones below it. */
        int idx[4], m = 0;
        for (int k = 0; k < d->rank; k++)
            if (d->ext[k] > 1) idx[m++] = k;
        for (int a = 1; a < m; a++)
            for (int b = a; b > 0 && d->t->stride[idx[b]] < d->t->stride[idx[b - 1]]; b--) {
                int tmp = idx[b];
                idx[b] = idx[b - 1];
                idx[b - 1] = tmp;
            }
        int64_t need = 1;
        for (int a = 0; a < m; a++) {
            int k = idx[a];
            if (d->t->stride[k] < need)
                return dattn_set_error(DATTN_INVALID_ARG,
                                       "%s.stride[%d] = %lld makes elements of the output "
                                       "overlap (needs >= %lld)",
                                       d->name, k, (long long)d->t->stride[k], (long long)need);
            need = d->t->stride[k] * d->ext[k];
        }
    }
    return DATTN_OK;
}

static dattn_status check_enum(const char *name, int32_t v, int32_t lo, int32_t hi)
{
    if (v < lo || v > hi)
        return dattn_set_error(DATTN_INVALID_ARG, "%s must be in [%d, %d], got %d", name, lo, hi,
                               v);
    return DATTN_OK;
}

#define TRY(x)                                                                                 \
    do {                                                                                       \
        dattn_status st_ = (x);                                                                \
        if (st_ != DATTN_OK) return st_;                                                       \
    } while (0)

static void set_desc(tdesc *d, const char *name, const dattn_tensor *t, int rank, int64_t e0,
                     int64_t e1, int64_t e2, int64_t e3, size_t elsize, int output)
{
    d->name = name;
    d->t = t;
    d->rank = rank;
    d->ext[0] = e0;
    d->ext[1] = e1;
    d->ext[2] = e2;
    d->ext[3] = e3;
    d->elsize = elsize;
    d->output = output;
}

static dattn_status validate(const dattn_params *p, int is_bwd, dattn_call *c)
{
    memset(c, 0, sizeof *c);
    if (!p) return dattn_set_error(DATTN_INVALID_ARG, "params must not be NULL");
    if (p->abi_version != DATTN_ABI_VERSION)
        return dattn_set_error(DATTN_INVALID_ARG,
                               "abi_version is %d, this library expects %d (fill the params "
                               "with dattn_params_init)",
                               p->abi_version, DATTN_ABI_VERSION);
    TRY(check_enum("device", p->device, DATTN_DEVICE_CPU, DATTN_DEVICE_CUDA));
    TRY(check_enum("dtype", p->dtype, DATTN_F32, DATTN_BF16));
    TRY(check_enum("layout", p->layout, DATTN_LAYOUT_PADDED, DATTN_LAYOUT_PACKED));
    TRY(check_enum("pos_att", p->pos_att, 0, DATTN_POS_C2P | DATTN_POS_P2C));
    TRY(check_enum("padded_rows", p->padded_rows, DATTN_PADROWS_HF, DATTN_PADROWS_ZERO));
    TRY(check_enum("fp32_math", p->fp32_math, DATTN_MATH_IEEE, DATTN_MATH_TF32));
    if (p->num_threads < 0)
        return dattn_set_error(DATTN_INVALID_ARG, "num_threads must be >= 0, got %d",
                               p->num_threads);
    if (p->device_index < -1)
        return dattn_set_error(DATTN_INVALID_ARG, "device_index must be >= -1, got %d",
                               p->device_index);
    TRY(dattn_slot_config_check(p->position_buckets, p->max_relative_positions));
    if (!(p->dropout_p >= 0.0f && p->dropout_p < 1.0f))
        return dattn_set_error(DATTN_INVALID_ARG, "dropout_p must be in [0, 1), got %g",
                               (double)p->dropout_p);

    c->p = p;
    c->is_bwd = is_bwd;
    c->packed = p->layout == DATTN_LAYOUT_PACKED;
    c->c2p = (p->pos_att & DATTN_POS_C2P) != 0;
    c->p2c = (p->pos_att & DATTN_POS_P2C) != 0;
    c->B = p->batch;
    c->L = p->seqlen;
    c->H = p->heads;
    c->D = p->head_dim;
    c->T = c->packed ? p->total_tokens : 0;
    c->S = dattn_att_span(p->position_buckets, p->max_relative_positions);
    c->scale = dattn_scale(p->head_dim, p->pos_att);
    c->drop_threshold = drop_threshold(p->dropout_p);
    c->drop_scale = 1.0f / (1.0f - p->dropout_p);

    if (c->B < 0) return dattn_set_error(DATTN_INVALID_ARG, "batch must be >= 0, got %lld", (long long)c->B);
    if (c->L < 0) return dattn_set_error(DATTN_INVALID_ARG, "seqlen must be >= 0, got %lld", (long long)c->L);
    if (c->H < 1) return dattn_set_error(DATTN_INVALID_ARG, "heads must be >= 1, got %lld", (long long)c->H);
    if (c->D < 1) return dattn_set_error(DATTN_INVALID_ARG, "head_dim must be >= 1, got %lld", (long long)c->D);
    if (c->packed && c->T < 0)
        return dattn_set_error(DATTN_INVALID_ARG, "total_tokens must be >= 0, got %lld", (long long)c->T);
    if (c->L > ((int64_t)1 << 31) - 1 || c->T > ((int64_t)1 << 31) - 1)
        return dattn_set_error(DATTN_INVALID_ARG, "%s must be < 2^31",
                               c->L > ((int64_t)1 << 31) - 1 ? "seqlen" : "total_tokens");
    if (mul_ck(mul_ck(mul_ck(c->packed ? c->T : mul_ck(c->B, c->L), c->H), c->D), 8) < 0)
        return dattn_set_error(DATTN_INVALID_ARG, "batch * seqlen * heads * head_dim overflows");
    if (mul_ck(mul_ck(mul_ck(c->B, c->H), c->L), 8) < 0)
        return dattn_set_error(DATTN_INVALID_ARG, "batch * heads * seqlen overflows");

    size_t es = dattn_dtype_size(p->dtype);
    int64_t rows = c->packed ? c->T : c->B; /* leading extents of [B,L,H,D] / [T,H,D] */
    int rk = c->packed ? 3 : 4;
    int64_t e0 = rows, e1 = c->packed ? c->H : c->L, e2 = c->packed ? c->D : c->H,
            e3 = c->packed ? 0 : c->D;
    int64_t twoS = 2 * (int64_t)c->S;

    tdesc d[20];
    int nd = 0;
    set_desc(&d[nd++], "q", &p->q, rk, e0, e1, e2, e3, es, 0);
    set_desc(&d[nd++], "k", &p->k, rk, e0, e1, e2, e3, es, 0);
    set_desc(&d[nd++], "v", &p->v, rk, e0, e1, e2, e3, es, 0);
    if (c->c2p) set_desc(&d[nd++], "pk", &p->pk, 3, c->H, twoS, c->D, 0, es, 0);
    if (c->p2c) set_desc(&d[nd++], "pq", &p->pq, 3, c->H, twoS, c->D, 0, es, 0);
    if (!c->packed && p->mask.data) set_desc(&d[nd++], "mask", &p->mask, 2, c->B, c->L, 0, 0, 1, 0);
    set_desc(&d[nd++], "out", &p->out, rk, e0, e1, e2, e3, es, !is_bwd);
    int lse_needed = is_bwd || p->lse.data;
    if (lse_needed) {
        if (c->packed) set_desc(&d[nd++], "lse", &p->lse, 2, c->H, c->T, 0, 0, 4, !is_bwd);
        else set_desc(&d[nd++], "lse", &p->lse, 3, c->B, c->H, c->L, 0, 4, !is_bwd);
    }
    if (is_bwd) {
        set_desc(&d[nd++], "dout", &p->dout, rk, e0, e1, e2, e3, es, 0);
        set_desc(&d[nd++], "dq", &p->dq, rk, e0, e1, e2, e3, es, 1);
        set_desc(&d[nd++], "dk", &p->dk, rk, e0, e1, e2, e3, es, 1);
        set_desc(&d[nd++], "dv", &p->dv, rk, e0, e1, e2, e3, es, 1);
        if (c->c2p) set_desc(&d[nd++], "dpk", &p->dpk, 3, c->H, twoS, c->D, 0, es, 1);
        if (c->p2c) set_desc(&d[nd++], "dpq", &p->dpq, 3, c->H, twoS, c->D, 0, es, 1);
    }
    for (int n = 0; n < nd; n++) TRY(check_tensor(&d[n]));
    /* An output may not share a byte with an input, cu_seqlens or the workspace
     * (compared as address ranges [first byte, last byte], so an output interleaved with
     * an input is rejected too). Outputs may be interleaved views of one buffer (dq, dk,
     * dv of a fused [.., 3, H, D] gradient): between outputs only equal starts are caught,
     * the rest is the caller's promise. */
    dattn_tensor ws_t = {p->workspace, {1, 0, 0, 0}}, cu_t = {(void *)p->cu_seqlens, {1, 0, 0, 0}};
    if (p->workspace && p->workspace_size > 0 && p->workspace_size < (size_t)MAX_INDEX) {
        tdesc *w = &d[nd++];
        set_desc(w, "workspace", &ws_t, 1, (int64_t)p->workspace_size, 0, 0, 0, 1, 2);
        w->lo = (uintptr_t)p->workspace;
        w->hi = w->lo + p->workspace_size;
    }
    if (c->packed && p->cu_seqlens) {
        tdesc *w = &d[nd++];
        set_desc(w, "cu_seqlens", &cu_t, 1, c->B + 1, 0, 0, 0, 4, 0);
        w->lo = (uintptr_t)p->cu_seqlens;
        w->hi = w->lo + (uintptr_t)(c->B + 1) * 4u;
    }
    for (int a = 0; a < nd; a++) {
        if (!d[a].output || d[a].lo == d[a].hi) continue;
        for (int b = 0; b < nd; b++)
            if (b != a && d[b].lo < d[b].hi &&
                (d[a].output == 1 && d[b].output == 1 ? d[a].lo == d[b].lo
                                                      : d[a].lo < d[b].hi && d[b].lo < d[a].hi))
                return dattn_set_error(DATTN_INVALID_ARG,
                                       "%s.data overlaps %s.data in memory (an output may not "
                                       "share memory with another tensor or the workspace)",
                                       d[a].name, d[b].name);
    }

    c->max_len = c->L;
    if (c->packed) {
        if (p->mask.data)
            return dattn_set_error(DATTN_INVALID_ARG,
                                   "mask.data must be NULL in the packed layout (cu_seqlens "
                                   "delimits the sequences)");
        if (!p->cu_seqlens)
            return dattn_set_error(DATTN_INVALID_ARG, "cu_seqlens must not be NULL in the "
                                                      "packed layout");
        if ((uintptr_t)p->cu_seqlens % 4 != 0)
            return dattn_set_error(DATTN_INVALID_ARG, "cu_seqlens must be 4-byte aligned");
        if (p->device == DATTN_DEVICE_CPU) {
            /* Host memory: check it completely. */
            const int32_t *cu = p->cu_seqlens;
            if (cu[0] != 0)
                return dattn_set_error(DATTN_INVALID_ARG, "cu_seqlens[0] must be 0, got %d", cu[0]);
            int64_t longest = 0;
            for (int64_t b = 0; b < c->B; b++) {
                int64_t len = (int64_t)cu[b + 1] - cu[b];
                if (len < 0)
                    return dattn_set_error(DATTN_INVALID_ARG,
                                           "cu_seqlens must be non-decreasing: cu_seqlens[%lld] = "
                                           "%d < cu_seqlens[%lld] = %d",
                                           (long long)b + 1, cu[b + 1], (long long)b, cu[b]);
                if (len > c->L)
                    return dattn_set_error(DATTN_INVALID_ARG,
                                           "sequence %lld has %lld tokens, more than seqlen "
                                           "(max_seqlen) = %lld",
                                           (long long)b, (long long)len, (long long)c->L);
                if (len > longest) longest = len;
            }
            if (cu[c->B] != c->T)
                return dattn_set_error(DATTN_INVALID_ARG,
                                       "cu_seqlens[batch] = %d must equal total_tokens = %lld",
                                       cu[c->B], (long long)c->T);
            c->max_len = longest;
        }
    } else if (p->cu_seqlens) {
        return dattn_set_error(DATTN_INVALID_ARG,
                               "cu_seqlens must be NULL in the padded layout (use mask)");
    }

    if (p->device == DATTN_DEVICE_CPU) {
        if (c->D > 256)
            return dattn_set_error(DATTN_UNSUPPORTED, "head_dim %lld > 256 is not supported on "
                                                      "the CPU",
                                   (long long)c->D);
    } else if (!dattn_cuda_built()) {
        return dattn_set_error(DATTN_UNSUPPORTED, "device is CUDA but this build of dattn has "
                                                  "no CUDA backend");
    } else {
        /* what the CUDA kernels cannot run (so workspace queries report it up front) */
        TRY(dattn_cuda_check(c));
    }
    return DATTN_OK;
}

static size_t workspace_of(const dattn_call *c)
{
    if (c->p->device == DATTN_DEVICE_CPU)
        return c->is_bwd ? dattn_cpu_bwd_workspace(c) : dattn_cpu_fwd_workspace(c);
    return c->is_bwd ? dattn_cuda_bwd_workspace(c) : dattn_cuda_fwd_workspace(c);
}

static dattn_status query(const dattn_params *p, int is_bwd, size_t *bytes)
{
    dattn_clear_error();
    if (!bytes) return dattn_set_error(DATTN_INVALID_ARG, "bytes must not be NULL");
    dattn_call c;
    TRY(validate(p, is_bwd, &c));
    *bytes = workspace_of(&c);
    return DATTN_OK;
}

dattn_status dattn_fwd_workspace_size(const dattn_params *p, size_t *bytes)
{
    return query(p, 0, bytes);
}

dattn_status dattn_bwd_workspace_size(const dattn_params *p, size_t *bytes)
{
    return query(p, 1, bytes);
}

static dattn_status run(const dattn_params *p, int is_bwd)
{
    dattn_clear_error();
    dattn_call c;
    TRY(validate(p, is_bwd, &c));
    size_t need = workspace_of(&c);
    if (need > 0) {
        if (!p->workspace)
            return dattn_set_error(DATTN_INVALID_ARG,
                                   "workspace must not be NULL: this call needs %zu bytes", need);
        if (p->workspace_size < need)
            return dattn_set_error(DATTN_INVALID_ARG,
                                   "workspace_size is %zu bytes, this call needs %zu", p->workspace_size,
                                   need);
        if ((uintptr_t)p->workspace % 256 != 0)
            return dattn_set_error(DATTN_INVALID_ARG, "workspace must be 256-byte aligned");
    }
    int64_t rows = c.packed ? c.T : c.B * c.L;
    if (rows == 0 && !(is_bwd && (c.c2p || c.p2c))) return DATTN_OK;

    if (p->device == DATTN_DEVICE_CUDA) return is_bwd ? dattn_cuda_bwd(&c, NULL) : dattn_cuda_fwd(&c, NULL);

    dattn_slotmap sm;
    TRY(dattn_slotmap_build(&sm, p->position_buckets, p->max_relative_positions,
                            c.max_len > 0 ? c.max_len - 1 : 0));
    dattn_status st = is_bwd ? dattn_cpu_bwd(&c, &sm) : dattn_cpu_fwd(&c, &sm);
    dattn_slotmap_free(&sm);
    return st;
}

dattn_status dattn_fwd(const dattn_params *p) { return run(p, 0); }

dattn_status dattn_bwd(const dattn_params *p) { return run(p, 1); }

/* ---------------------------------------------------------------- no-CUDA builds */
#ifndef DATTN_WITH_CUDA
int dattn_cuda_built(void) { return 0; }
const char *dattn_cuda_archs(void) { return ""; }
dattn_status dattn_cuda_device_supported(int32_t device_index)
{
    (void)device_index;
    return dattn_set_error(DATTN_UNSUPPORTED, "this build of dattn has no CUDA backend");
}
dattn_status dattn_cuda_check(const dattn_call *c)
{
    (void)c;
    return dattn_set_error(DATTN_UNSUPPORTED, "this build of dattn has no CUDA backend");
}
size_t dattn_cuda_fwd_workspace(const dattn_call *c)
{
    (void)c;
    return 0;
}
size_t dattn_cuda_bwd_workspace(const dattn_call *c)
{
    (void)c;
    return 0;
}
dattn_status dattn_cuda_fwd(const dattn_call *c, const dattn_slotmap *sm)
{
    (void)c;
    (void)sm;
    return dattn_set_error(DATTN_UNSUPPORTED, "this build of dattn has no CUDA backend");
}
dattn_status dattn_cuda_bwd(const dattn_call *c, const dattn_slotmap *sm)
{
    (void)c;
    (void)sm;
    return dattn_set_error(DATTN_UNSUPPORTED, "this build of dattn has no CUDA backend");
}
#endif
