/* fp32 FMA peak of this machine's cores, measured.
 *
 *   cc -O2 -fopenmp bench/fma_peak.c -o build/fma_peak   (bench/bench_cpu.py does this)
 *   build/fma_peak [threads] [seconds]
 *
 * Each thread runs independent chains of vector FMAs (enough of them to hide the FMA
 * latency: 12 zmm or 12 ymm accumulators) for a fixed number of iterations, and the
 * total is timed on the wall clock. Prints one JSON object with the GFLOP/s of the
 * AVX-512 (16 lanes) and the AVX2 (8 lanes) loop, for 1 thread and for N threads.
 * Counting: one FMA instruction on a W-lane vector = 2*W FLOPs.
 * Also prints the DRAM bandwidth of a STREAM-style triad a[i] = b[i] + s*c[i] over three
 * 128 MiB arrays on the same threads (bytes counted: 3 x 4 per element; the best of 5),
 * for the byte floor in NOTES.md. */
#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

#define NACC 12

/* volatile so that the compiler cannot fold the chains */
static volatile float g_mul = 0.999999f, g_add = 1e-7f;

__attribute__((target("avx512f,fma"), noinline)) static float run512(long iters)
{
    __m512 a[NACC];
    const __m512 x = _mm512_set1_ps(g_mul), y = _mm512_set1_ps(g_add);
    for (int k = 0; k < NACC; k++) a[k] = _mm512_set1_ps((float)k);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int k = 0; k < NACC; k++) a[k] = _mm512_fmadd_ps(a[k], x, y);
    }
    __m512 s = a[0];
    for (int k = 1; k < NACC; k++) s = _mm512_add_ps(s, a[k]);
    return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"), noinline)) static float run256(long iters)
{
    __m256 a[NACC];
    const __m256 x = _mm256_set1_ps(g_mul), y = _mm256_set1_ps(g_add);
    for (int k = 0; k < NACC; k++) a[k] = _mm256_set1_ps((float)k);
    for (long it = 0; it < iters; it++) {
#pragma GCC unroll 12
        for (int k = 0; k < NACC; k++) a[k] = _mm256_fmadd_ps(a[k], x, y);
    }
    float buf[8], s = 0;
    __m256 t = a[0];
    for (int k = 1; k < NACC; k++) t = _mm256_add_ps(t, a[k]);
    _mm256_storeu_ps(buf, t);
    for (int k = 0; k < 8; k++) s += buf[k];
    return s;
}

/* GFLOP/s of `threads` threads each running `iters` iterations (best of 3). */
static double measure(int threads, int wide, long iters)
{
    double best = 0;
    for (int rep = 0; rep < 3; rep++) {
        volatile float sink = 0;
        double t0 = now();
#pragma omp parallel num_threads(threads)
        {
            float r = wide ? run512(iters) : run256(iters);
#pragma omp atomic
            sink += r;
        }
        double t = now() - t0;
        double flops = (double)threads * iters * NACC * 2.0 * (wide ? 16 : 8);
        if (flops / t > best) best = flops / t;
        (void)sink;
    }
    return best * 1e-9;
}

/* GB/s of the triad on `threads` threads (arrays first touched by the same threads). */
static double triad(int threads)
{
    const long n = 32L << 20; /* 32 Mi floats = 128 MiB per array */
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n), *c = malloc(sizeof(float) * n);
    if (!a || !b || !c) return 0;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (long i = 0; i < n; i++) {
        a[i] = 0;
        b[i] = 1;
        c[i] = 2;
    }
    double best = 0;
    const float s = g_mul;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
#pragma omp parallel for num_threads(threads) schedule(static)
        for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
        double t = now() - t0;
        double gbs = 3.0 * 4.0 * (double)n / t * 1e-9;
        if (gbs > best) best = gbs;
    }
    volatile float sink = a[n / 2];
    (void)sink;
    free(a);
    free(b);
    free(c);
    return best;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 ? atoi(argv[1]) : omp_get_max_threads();
    double secs = argc > 2 ? atof(argv[2]) : 0.5;
    int has512 = __builtin_cpu_supports("avx512f");
    /* Calibrate the iteration count on one thread. */
    long iters = 1000000;
    double t0 = now();
    run256(iters);
    double t = now() - t0;
    iters = (long)(iters * secs / (t > 1e-6 ? t : 1e-6));
    if (iters < 1000) iters = 1000;
    double a2_1 = measure(1, 0, iters), a2_n = measure(threads, 0, iters);
    double a5_1 = has512 ? measure(1, 1, iters / 2) : 0, a5_n = has512 ? measure(threads, 1, iters / 2) : 0;
    double bw = triad(threads);
    printf("{\"threads\": %d, \"avx2_1t_gflops\": %.1f, \"avx2_nt_gflops\": %.1f, "
           "\"avx512_1t_gflops\": %.1f, \"avx512_nt_gflops\": %.1f, "
           "\"peak_nt_gflops\": %.1f, \"triad_gbs\": %.1f}\n",
           threads, a2_1, a2_n, a5_1, a5_n, a5_n > a2_n ? a5_n : a2_n, bw);
    return 0;
}
