/* Times dattn's CPU forward and backward on one shape (DeBERTa-v3-base settings:
 * position_buckets 256, max_relative_positions 512, c2p|p2c, fp32 unless told).
 *
 *   make && cc -std=c11 -O2 -D_GNU_SOURCE -Iinclude bench/bench_cpu.c build/libdattn.so \
 *        -Wl,-rpath,$PWD/build -lm -o build/bench_cpu
 *   build/bench_cpu L B [H=12] [D=64] [threads=0] [reps=5] [dtype=f32|f16|bf16] [bwd=1]
 *                   [dropout_p=0]
 *
 * Prints one JSON line: median and min seconds of forward and of backward (wall clock;
 * and the minimum process CPU time, which on a shared machine is the steadier figure
 * for single-thread runs), effective
 * forward GFLOP/s = 4 B H L^2 D / t, and the workspace sizes. Inputs are random normal
 * (fixed seed); the first call of each kind is a warm-up and not counted. */
#include "dattn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float randn(void)
{
    double u1, u2;
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    u1 = ((rng >> 11) + 1.0) / 9007199254740993.0;
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    u2 = (rng >> 11) / 9007199254740992.0;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static void *fill(size_t n, int dtype)
{
    size_t es = dtype == DATTN_F32 ? 4 : 2;
    void *p = malloc(n * es);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < n; i++) {
        float x = randn();
        if (dtype == DATTN_F32) {
            ((float *)p)[i] = x;
        } else {
            uint32_t b;
            memcpy(&b, &x, 4);
            ((uint16_t *)p)[i] = (uint16_t)(b >> 16); /* bf16 bits; fine as fp16 noise too */
            if (dtype == DATTN_F16) ((uint16_t *)p)[i] = (uint16_t)(0x3800 + (b & 0x3ff));
        }
    }
    return p;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void set4(dattn_tensor *t, void *data, int64_t s0, int64_t s1, int64_t s2, int64_t s3)
{
    t->data = data;
    t->stride[0] = s0;
    t->stride[1] = s1;
    t->stride[2] = s2;
    t->stride[3] = s3;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s L B [H] [D] [threads] [reps] [f32|f16|bf16] [bwd 0|1] [dropout_p]\n",
                argv[0]);
        return 2;
    }
    int64_t L = atoll(argv[1]), B = atoll(argv[2]);
    int64_t H = argc > 3 ? atoll(argv[3]) : 12, D = argc > 4 ? atoll(argv[4]) : 64;
    int threads = argc > 5 ? atoi(argv[5]) : 0, reps = argc > 6 ? atoi(argv[6]) : 5;
    int dtype = DATTN_F32;
    if (argc > 7) dtype = !strcmp(argv[7], "f16") ? DATTN_F16 : !strcmp(argv[7], "bf16") ? DATTN_BF16 : DATTN_F32;
    int do_bwd = argc > 8 ? atoi(argv[8]) : 1;
    float drop = argc > 9 ? (float)atof(argv[9]) : 0.0f;
    const int64_t S = 256;
    size_t n = (size_t)(B * L * H * D), nt = (size_t)(H * 2 * S * D);

    dattn_params p;
    dattn_params_init(&p);
    p.dtype = dtype;
    p.num_threads = threads;
    p.batch = B;
    p.seqlen = L;
    p.heads = H;
    p.head_dim = D;
    p.dropout_p = drop;
    p.dropout_seed = 0x5eed;
    void *q = fill(n, dtype), *k = fill(n, dtype), *v = fill(n, dtype), *o = fill(n, dtype);
    void *pk = fill(nt, dtype), *pq = fill(nt, dtype);
    float *lse = malloc(sizeof(float) * (size_t)(B * H * L));
    set4(&p.q, q, L * H * D, H * D, D, 1);
    set4(&p.k, k, L * H * D, H * D, D, 1);
    set4(&p.v, v, L * H * D, H * D, D, 1);
    set4(&p.out, o, L * H * D, H * D, D, 1);
    set4(&p.pk, pk, 2 * S * D, D, 1, 0);
    set4(&p.pq, pq, 2 * S * D, D, 1, 0);
    set4(&p.lse, lse, H * L, L, 1, 0);
    size_t wsf = 0, wsb = 0;
    if (dattn_fwd_workspace_size(&p, &wsf) != DATTN_OK) {
        fprintf(stderr, "%s\n", dattn_last_error());
        return 1;
    }
    void *ws = wsf ? aligned_alloc(256, (wsf + 255) / 256 * 256) : NULL;
    p.workspace = ws;
    p.workspace_size = wsf;
    double *tf = calloc((size_t)reps, sizeof(double)), *tb = calloc((size_t)reps, sizeof(double));
    double *cf = calloc((size_t)reps, sizeof(double)), *cb = calloc((size_t)reps, sizeof(double));
    for (int r = -1; r < reps; r++) {
        double t0 = now(), c0 = cpu_now();
        if (dattn_fwd(&p) != DATTN_OK) {
            fprintf(stderr, "fwd: %s\n", dattn_last_error());
            return 1;
        }
        if (r >= 0) {
            tf[r] = now() - t0;
            cf[r] = cpu_now() - c0;
        }
    }
    free(ws);
    if (do_bwd) {
        void *dout = fill(n, dtype), *dq = fill(n, dtype), *dk = fill(n, dtype), *dv = fill(n, dtype);
        void *dpk = fill(nt, dtype), *dpq = fill(nt, dtype);
        set4(&p.dout, dout, L * H * D, H * D, D, 1);
        set4(&p.dq, dq, L * H * D, H * D, D, 1);
        set4(&p.dk, dk, L * H * D, H * D, D, 1);
        set4(&p.dv, dv, L * H * D, H * D, D, 1);
        set4(&p.dpk, dpk, 2 * S * D, D, 1, 0);
        set4(&p.dpq, dpq, 2 * S * D, D, 1, 0);
        if (dattn_bwd_workspace_size(&p, &wsb) != DATTN_OK) {
            fprintf(stderr, "%s\n", dattn_last_error());
            return 1;
        }
        ws = wsb ? aligned_alloc(256, (wsb + 255) / 256 * 256) : NULL;
        p.workspace = ws;
        p.workspace_size = wsb;
        for (int r = -1; r < reps; r++) {
            double t0 = now(), c0 = cpu_now();
            if (dattn_bwd(&p) != DATTN_OK) {
                fprintf(stderr, "bwd: %s\n", dattn_last_error());
                return 1;
            }
            if (r >= 0) {
                tb[r] = now() - t0;
                cb[r] = cpu_now() - c0;
            }
        }
        free(ws);
    }
    qsort(tf, (size_t)reps, sizeof(double), cmp);
    qsort(tb, (size_t)reps, sizeof(double), cmp);
    qsort(cf, (size_t)reps, sizeof(double), cmp);
    qsort(cb, (size_t)reps, sizeof(double), cmp);
    double flops = 4.0 * (double)B * (double)H * (double)L * (double)L * (double)D;
    printf("{\"L\": %lld, \"B\": %lld, \"H\": %lld, \"D\": %lld, \"threads\": %d, \"info\": \"%s\", "
           "\"fwd_median_s\": %.6f, \"fwd_min_s\": %.6f, \"fwd_gflops\": %.1f, "
           "\"bwd_median_s\": %.6f, \"bwd_min_s\": %.6f, \"fwd_cpu_min_s\": %.6f, \"bwd_cpu_min_s\": %.6f, "
           "\"fwd_workspace\": %zu, \"bwd_workspace\": %zu}\n",
           (long long)L, (long long)B, (long long)H, (long long)D, threads, dattn_build_info(),
           tf[reps / 2], tf[0], flops / tf[reps / 2] * 1e-9, do_bwd ? tb[reps / 2] : 0.0,
           do_bwd ? tb[0] : 0.0, cf[0], do_bwd ? cb[0] : 0.0, wsf, wsb);
    return 0;
}
