/* dattn demo: DeBERTa-v3-base attention (12 heads, head dim 64, 256 log buckets,
 * max_relative_positions 512) on the CPU through the public C API.
 *
 * It fills random q, k, v, pk, pq (seed printed), masks the tail of some sequences
 * like a padded batch, runs forward and backward, checks sampled rows of the forward
 * and a whole small backward against the float64 reference, and prints the speed.
 *
 *   build/demo [--batch B] [--seqlen L] [--threads N] [--seed S] [--dtype f32|f16|bf16]
 */
#include "dattn.h"
#include "ref64.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct opts {
    int64_t B, L;
    int threads, reps;
    uint64_t seed;
    int32_t dtype;
} opts;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state;
static double urand(void) /* splitmix64 -> [0, 1) */
{
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}
static float nrand(void) /* Box-Muller */
{
    double u = urand(), v = urand();
    return (float)(sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v));
}

static uint16_t to_half(float f, int32_t dtype)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if (dtype == DATTN_BF16) return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
    /* fp16, round to nearest even; alloc_random keeps values in the normal range */
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    return (uint16_t)(sign | ((ax + 0xc8000fffu + ((ax >> 13) & 1)) >> 13));
}
static float from_half(uint16_t h, int32_t dtype)
{
    uint32_t x;
    if (dtype == DATTN_BF16) {
        x = (uint32_t)h << 16;
    } else {
        uint32_t e = (h >> 10) & 0x1f, m = h & 0x3ff;
        x = ((uint32_t)(h & 0x8000u) << 16) | (e ? ((e + 112) << 23) | (m << 13) : 0);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

static void *alloc_random(int64_t n, int32_t dtype, float sd)
{
    size_t es = dtype == DATTN_F32 ? 4 : 2;
    void *p = malloc((size_t)n * es);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++) {
        float v = sd * nrand();
        if (fabsf(v) < 0x1p-14f) v = v < 0 ? -0x1p-14f : 0x1p-14f; /* stay normal in fp16 */
        if (dtype == DATTN_F32) ((float *)p)[i] = v;
        else ((uint16_t *)p)[i] = to_half(v, dtype);
    }
    return p;
}

static float get(const void *p, int64_t i, int32_t dtype)
{
    return dtype == DATTN_F32 ? ((const float *)p)[i] : from_half(((const uint16_t *)p)[i], dtype);
}

static dattn_tensor t4(void *data, int64_t L, int64_t H, int64_t D)
{
    dattn_tensor t = {data, {L * H * D, H * D, D, 1}};
    return t;
}

static void check(dattn_status st, const char *what)
{
    if (st != DATTN_OK) {
        fprintf(stderr, "%s failed: %s: %s\n", what, dattn_status_string(st), dattn_last_error());
        exit(1);
    }
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    return p;
}

/* Sets up a v3-base problem of batch B, length L on p (buffers owned by the caller). */
typedef struct problem {
    dattn_params p;
    void *q, *k, *v, *pk, *pq, *out, *dout, *dq, *dk, *dv, *dpk, *dpq, *ws;
    uint8_t *mask;
    float *lse;
} problem;

static void problem_init(problem *pr, int64_t B, int64_t L, const opts *o)
{
    const int64_t H = 12, D = 64, S = 256, n = B * L * H * D;
    dattn_params *p = &pr->p;
    dattn_params_init(p);
    p->dtype = o->dtype;
    p->num_threads = o->threads;
    p->batch = B;
    p->seqlen = L;
    p->heads = H;
    p->head_dim = D;
    size_t es = o->dtype == DATTN_F32 ? 4 : 2;
    pr->q = alloc_random(n, o->dtype, 1.0f);
    pr->k = alloc_random(n, o->dtype, 1.0f);
    pr->v = alloc_random(n, o->dtype, 1.0f);
    pr->pk = alloc_random(H * 2 * S * D, o->dtype, 1.0f);
    pr->pq = alloc_random(H * 2 * S * D, o->dtype, 1.0f);
    pr->dout = alloc_random(n, o->dtype, 1.0f);
    pr->out = xmalloc((size_t)n * es);
    pr->dq = xmalloc((size_t)n * es);
    pr->dk = xmalloc((size_t)n * es);
    pr->dv = xmalloc((size_t)n * es);
    pr->dpk = xmalloc((size_t)(H * 2 * S * D) * es);
    pr->dpq = xmalloc((size_t)(H * 2 * S * D) * es);
    pr->lse = xmalloc(sizeof(float) * (size_t)(B * H * L));
    pr->mask = xmalloc((size_t)(B * L));
    for (int64_t b = 0; b < B; b++) /* every other sequence ends early, like a padded batch */
        for (int64_t i = 0; i < L; i++) pr->mask[b * L + i] = (b % 2 == 0) || i < L - L / 4;
    p->q = t4(pr->q, L, H, D);
    p->k = t4(pr->k, L, H, D);
    p->v = t4(pr->v, L, H, D);
    p->out = t4(pr->out, L, H, D);
    p->dout = t4(pr->dout, L, H, D);
    p->dq = t4(pr->dq, L, H, D);
    p->dk = t4(pr->dk, L, H, D);
    p->dv = t4(pr->dv, L, H, D);
    dattn_tensor tab = {NULL, {2 * S * D, D, 1, 0}};
    p->pk = tab;
    p->pk.data = pr->pk;
    p->pq = tab;
    p->pq.data = pr->pq;
    p->dpk = tab;
    p->dpk.data = pr->dpk;
    p->dpq = tab;
    p->dpq.data = pr->dpq;
    dattn_tensor m = {pr->mask, {L, 1, 0, 0}};
    p->mask = m;
    dattn_tensor l = {pr->lse, {H * L, L, 1, 0}};
    p->lse = l;
    size_t wf = 0, wb = 0;
    check(dattn_fwd_workspace_size(p, &wf), "dattn_fwd_workspace_size");
    check(dattn_bwd_workspace_size(p, &wb), "dattn_bwd_workspace_size");
    size_t w = wf > wb ? wf : wb;
    pr->ws = w ? aligned_alloc(256, (w + 255) / 256 * 256) : NULL;
    if (w && !pr->ws) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    p->workspace = pr->ws;
    p->workspace_size = w;
}

static void problem_free(problem *pr)
{
    void *all[] = {pr->q, pr->k, pr->v, pr->pk, pr->pq, pr->out, pr->dout, pr->dq, pr->dk,
                   pr->dv, pr->dpk, pr->dpq, pr->ws, pr->mask, pr->lse};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

/* Relative error of a (storage dtype) against ref (double) over n elements. */
static double rel_err(const void *a, const double *ref, int64_t n, int32_t dtype)
{
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)get(a, i, dtype) - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static double median(double *x, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && x[j] < x[j - 1]; j--) {
            double t = x[j];
            x[j] = x[j - 1];
            x[j - 1] = t;
        }
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

int main(int argc, char **argv)
{
    opts o = {8, 512, 0, 5, (uint64_t)time(NULL), DATTN_F32};
    for (int a = 1; a < argc; a++) {
        const char *v = a + 1 < argc ? argv[a + 1] : "";
        if (!strcmp(argv[a], "--batch")) o.B = atoll(v), a++;
        else if (!strcmp(argv[a], "--seqlen")) o.L = atoll(v), a++;
        else if (!strcmp(argv[a], "--threads")) o.threads = atoi(v), a++;
        else if (!strcmp(argv[a], "--reps")) o.reps = atoi(v), a++;
        else if (!strcmp(argv[a], "--seed")) o.seed = strtoull(v, NULL, 10), a++;
        else if (!strcmp(argv[a], "--dtype")) {
            o.dtype = !strcmp(v, "f16") ? DATTN_F16 : !strcmp(v, "bf16") ? DATTN_BF16 : DATTN_F32;
            a++;
        } else {
            fprintf(stderr, "usage: %s [--batch B] [--seqlen L] [--threads N] [--reps R] "
                            "[--seed S] [--dtype f32|f16|bf16]\n", argv[0]);
            return 2;
        }
    }
    if (o.B < 1 || o.L < 1 || o.reps < 1) {
        fprintf(stderr, "--batch, --seqlen and --reps must be >= 1\n");
        return 2;
    }
    rng_state = o.seed;
    static const char *dn[] = {"fp32", "fp16", "bf16"};
    printf("%s\n", dattn_build_info());
    printf("DeBERTa-v3-base attention: B=%lld L=%lld H=12 D=64 S=256, %s, seed %llu\n",
           (long long)o.B, (long long)o.L, dn[o.dtype], (unsigned long long)o.seed);

    problem pr;
    problem_init(&pr, o.B, o.L, &o);
    double tf[64], tb[64];
    int reps = o.reps > 64 ? 64 : o.reps;
    check(dattn_fwd(&pr.p), "dattn_fwd"); /* warm-up */
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        check(dattn_fwd(&pr.p), "dattn_fwd");
        tf[r] = now() - t0;
    }
    check(dattn_bwd(&pr.p), "dattn_bwd");
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        check(dattn_bwd(&pr.p), "dattn_bwd");
        tb[r] = now() - t0;
    }
    double f_ms = 1e3 * median(tf, reps), b_ms = 1e3 * median(tb, reps);
    double flops = 4.0 * (double)o.B * 12 * (double)o.L * (double)o.L * 64;

    /* Forward check: 32 sampled rows (valid and padded) against float64. */
    double worst = 0;
    int rows = 0;
    for (int s = 0; s < 32; s++) {
        int64_t b = (int64_t)(urand() * (double)o.B), h = (int64_t)(urand() * 12),
                i = (int64_t)(urand() * (double)o.L);
        double ref[64], lse;
        ref64_fwd_row(&pr.p, b, h, i, ref, &lse);
        const int64_t base = ((b * o.L + i) * 12 + h) * 64;
        double num = 0, den = 0;
        for (int d = 0; d < 64; d++) {
            double e = (double)get(pr.out, base + d, o.dtype) - ref[d];
            num += e * e;
            den += ref[d] * ref[d];
        }
        double e = den > 0 ? sqrt(num / den) : sqrt(num);
        if (e > worst) worst = e;
        rows++;
    }
    double tol = o.dtype == DATTN_F32 ? 1e-5 : o.dtype == DATTN_F16 ? 2e-3 : 1.6e-2;
    int ok = worst <= tol;
    printf("forward   %9.2f ms  %7.1f GFLOP/s (4*B*H*L^2*D / t)  max rel err %.2e over %d rows "
           "vs float64  %s\n",
           f_ms, flops / (f_ms * 1e6), worst, rows, worst <= tol ? "ok" : "FAIL");
    printf("backward  %9.2f ms  %7.1f GFLOP/s (10*B*H*L^2*D / t)\n", b_ms,
           2.5 * flops / (b_ms * 1e6));
    problem_free(&pr);

    /* Backward check on a small problem (the float64 backward is O(B H L^2 D)). */
    problem sm;
    problem_init(&sm, 2, 96, &o);
    check(dattn_fwd(&sm.p), "dattn_fwd");
    check(dattn_bwd(&sm.p), "dattn_bwd");
    const int64_t n = 2 * 96 * 12 * 64, nt = 12 * 512 * 64;
    double *g[5];
    for (int i = 0; i < 5; i++) g[i] = xmalloc(sizeof(double) * (size_t)(i < 3 ? n : nt));
    ref64_bwd(&sm.p, g[0], g[1], g[2], g[3], g[4]);
    const void *mine[5] = {sm.dq, sm.dk, sm.dv, sm.dpk, sm.dpq};
    static const char *nm[5] = {"dq", "dk", "dv", "dpk", "dpq"};
    double btol = o.dtype == DATTN_F32 ? 1e-5 : o.dtype == DATTN_F16 ? 4e-3 : 3e-2;
    printf("backward check (B=2, L=96) vs float64:");
    for (int i = 0; i < 5; i++) {
        double e = rel_err(mine[i], g[i], i < 3 ? n : nt, o.dtype);
        printf("  %s %.1e", nm[i], e);
        if (!(e <= btol)) ok = 0;
        free(g[i]);
    }
    printf("  %s\n", ok ? "ok" : "FAIL");
    problem_free(&sm);
    return ok ? 0 : 1;
}
