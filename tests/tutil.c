/* Test support (see tutil.h). */
#include "tutil.h"

#include "half.h"
#include "internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

long tu_passed, tu_failed, tu_skipped;
tu_args tu_opt;

static uint64_t seed_from_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t x = (uint64_t)ts.tv_sec * 1000003u ^ (uint64_t)ts.tv_nsec;
    x ^= (uint64_t)(uintptr_t)&ts; /* ASLR adds a little more */
    x ^= x >> 31;
    x *= 0x9E3779B97F4A7C15ull;
    return (x ^ (x >> 29)) % 1000000000ull;
}

void tu_init(int argc, char **argv, const char *prog)
{
    memset(&tu_opt, 0, sizeof tu_opt);
    int have_seed = 0;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--seed") && a + 1 < argc) {
            tu_opt.seed = strtoull(argv[++a], NULL, 0);
            have_seed = 1;
        } else if (!strcmp(argv[a], "--quick")) {
            tu_opt.quick = 1;
        } else if (!strcmp(argv[a], "--verbose") || !strcmp(argv[a], "-v")) {
            tu_opt.verbose = 1;
        } else if (!strcmp(argv[a], "--isa") && a + 1 < argc) {
            tu_opt.isa = argv[++a];
        } else {
            fprintf(stderr, "usage: %s [--seed N] [--quick] [--verbose] [--isa NAME]\n",
                    argv[0]);
            exit(2);
        }
    }
    if (!have_seed) {
        const char *e = getenv("DATTN_TEST_SEED");
        tu_opt.seed = e && *e ? strtoull(e, NULL, 0) : seed_from_clock();
    }
    printf("%s: seed %llu (reproduce with --seed %llu%s)\n", prog,
           (unsigned long long)tu_opt.seed, (unsigned long long)tu_opt.seed,
           tu_opt.quick ? " --quick" : "");
    fflush(stdout);
}

int tu_finish(void)
{
    printf("%ld passed, %ld failed, %ld skipped\n", tu_passed, tu_failed, tu_skipped);
    fflush(stdout);
    return tu_failed ? 1 : 0;
}

int tu_check(int ok, const char *fmt, ...)
{
    if (ok) {
        tu_passed++;
        return 1;
    }
    tu_failed++;
    va_list ap;
    va_start(ap, fmt);
    printf("FAIL: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
    return 0;
}

void tu_skip(const char *fmt, ...)
{
    tu_skipped++;
    va_list ap;
    va_start(ap, fmt);
    printf("skip: ");
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    fflush(stdout);
}

void tu_log(const char *fmt, ...)
{
    if (!tu_opt.verbose) return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

int tu_isas(const char *names[3])
{
    static const char *const fams[] = {"portable", "avx2", "avx512"};
    static const char *have[3];
    static int probed = 0, n = 0;
    if (!probed) {
        probed = 1;
        for (int f = 0; f < 3; f++) {
            if (tu_opt.isa && strcmp(tu_opt.isa, fams[f])) continue;
            dattn_status st = dattn_cpu_set_isa(fams[f]);
            if (st == DATTN_OK) have[n++] = fams[f];
            else if (st == DATTN_UNSUPPORTED)
                tu_skip("CPU kernel family %s: not available here (%s)", fams[f],
                        dattn_last_error());
            else
                tu_check(0, "dattn_cpu_set_isa(\"%s\") returned %d (%s)", fams[f], (int)st,
                         dattn_last_error());
        }
        if (tu_opt.isa && n == 0 && strcmp(tu_opt.isa, "avx2") && strcmp(tu_opt.isa, "avx512"))
            tu_check(0, "--isa %s: no such CPU kernel family", tu_opt.isa);
        tu_check(dattn_cpu_set_isa(NULL) == DATTN_OK, "dattn_cpu_set_isa(NULL) (automatic)");
        printf("CPU kernel families tested:");
        for (int f = 0; f < n; f++) printf(" %s", have[f]);
        printf(" (automatic choice: %s)\n", dattn_cpu_isa());
        fflush(stdout);
    }
    for (int f = 0; f < n; f++) names[f] = have[f];
    return n;
}

int tu_set_isa(const char *name)
{
    dattn_status st = dattn_cpu_set_isa(name);
    if (st == DATTN_OK) return 1;
    return tu_check(0, "dattn_cpu_set_isa(%s%s%s): %s", name ? "\"" : "",
                    name ? name : "NULL", name ? "\"" : "", dattn_last_error());
}

/* ------------------------------------------------------------ RNG: xoshiro256** */
static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void trng_seed(trng *r, uint64_t seed)
{
    for (int k = 0; k < 4; k++) r->s[k] = splitmix(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t trng_u64(trng *r)
{
    uint64_t *s = r->s;
    uint64_t res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

double trng_unif(trng *r) { return (double)(trng_u64(r) >> 11) * 0x1.0p-53; }

int64_t trng_int(trng *r, int64_t n) { return (int64_t)(trng_u64(r) % (uint64_t)n); }

double trng_sym(trng *r, double amp)
{
    double x;
    do x = (2.0 * trng_unif(r) - 1.0) * amp;
    while (x == 0.0);
    return x;
}

/* ------------------------------------------------------------ dtypes */
size_t tu_esize(int32_t dtype)
{
    switch (dtype) {
    case DATTN_F32: return 4;
    case DATTN_F16: return 2;
    case DATTN_BF16: return 2;
    case TU_U8: return 1;
    case TU_F32RAW: return 4;
    }
    return 0;
}

const char *tu_dtype_name(int32_t dtype)
{
    switch (dtype) {
    case DATTN_F32: return "fp32";
    case DATTN_F16: return "fp16";
    case DATTN_BF16: return "bf16";
    }
    return "?";
}

double tu_round(int32_t dtype, double x)
{
    switch (dtype) {
    case DATTN_F16: return th_round_f16(x);
    case DATTN_BF16: return th_round_bf16(x);
    default: return (double)(float)x;
    }
}

double tu_eps(int32_t dtype)
{
    switch (dtype) {
    case DATTN_F16: return 0x1.0p-10;
    case DATTN_BF16: return 0x1.0p-7;
    default: return 0x1.0p-23;
    }
}

double tu_tiny(int32_t dtype)
{
    switch (dtype) {
    case DATTN_F16: return 0x1.0p-24;
    case DATTN_BF16: return 0x1.0p-133;
    default: return 0x1.0p-149;
    }
}

double tu_load(const void *base, int32_t dtype, int64_t off)
{
    switch (dtype) {
    case DATTN_F16: return th_f16_to_double(((const uint16_t *)base)[off]);
    case DATTN_BF16: return th_bf16_to_double(((const uint16_t *)base)[off]);
    case TU_U8: return (double)((const uint8_t *)base)[off];
    default: return (double)((const float *)base)[off];
    }
}

void tu_store(void *base, int32_t dtype, int64_t off, double v)
{
    switch (dtype) {
    case DATTN_F16: ((uint16_t *)base)[off] = th_double_to_f16(v); break;
    case DATTN_BF16: ((uint16_t *)base)[off] = th_double_to_bf16(v); break;
    case TU_U8: ((uint8_t *)base)[off] = (uint8_t)v; break;
    default: ((float *)base)[off] = (float)v; break;
    }
}

/* ------------------------------------------------------------ arenas and views */
void *tu_xmalloc(size_t n)
{
    void *m = malloc(n ? n : 1);
    if (!m) {
        fprintf(stderr, "out of memory (%zu bytes)\n", n);
        abort();
    }
    return m;
}

void *tu_xcalloc(size_t n, size_t sz)
{
    void *m = calloc(n ? n : 1, sz ? sz : 1);
    if (!m) {
        fprintf(stderr, "out of memory (%zu x %zu bytes)\n", n, sz);
        abort();
    }
    return m;
}

double tu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void tarena_alloc(tarena *a, size_t bytes)
{
    if (bytes == 0) bytes = 1;
    void *m = NULL;
    if (posix_memalign(&m, 64, bytes) != 0 || !m) {
        fprintf(stderr, "out of memory (%zu bytes)\n", bytes);
        abort();
    }
    a->mem = (unsigned char *)m;
    a->bytes = bytes;
    a->snap = NULL;
    memset(a->mem, 0xFF, bytes);
}

void tarena_free(tarena *a)
{
    free(a->mem);
    free(a->snap);
    a->mem = a->snap = NULL;
    a->bytes = 0;
}

void tarena_poison(tarena *a) { memset(a->mem, 0xFF, a->bytes); }

void tarena_snapshot(tarena *a)
{
    if (!a->snap) a->snap = (unsigned char *)tu_xmalloc(a->bytes);
    memcpy(a->snap, a->mem, a->bytes);
}

int tarena_unchanged(const tarena *a) { return a->snap && !memcmp(a->mem, a->snap, a->bytes); }

size_t tview_esize(const tview *v) { return tu_esize(v->dtype); }

int64_t tview_numel(const tview *v)
{
    int64_t n = 1;
    for (int k = 0; k < v->rank; k++) n *= v->ext[k];
    return n;
}

size_t tview_span(const tview *v)
{
    if (tview_numel(v) == 0) return 0;
    int64_t last = 0;
    for (int k = 0; k < v->rank; k++) last += (v->ext[k] - 1) * v->stride[k];
    return (size_t)(last + 1) * tview_esize(v);
}

int64_t tview_elem(const tview *v, int64_t lin)
{
    int64_t off = 0;
    for (int k = v->rank - 1; k >= 0; k--) {
        int64_t i = lin % v->ext[k];
        lin /= v->ext[k];
        off += i * v->stride[k];
    }
    return off;
}

void *tview_ptr(const tview *v) { return v->a ? v->a->mem + v->off : NULL; }

dattn_tensor tview_tensor(const tview *v)
{
    dattn_tensor t;
    memset(&t, 0, sizeof t);
    t.data = tview_ptr(v);
    for (int k = 0; k < v->rank; k++) t.stride[k] = v->stride[k];
    return t;
}

double tview_get(const tview *v, int64_t lin)
{
    return tu_load(tview_ptr(v), v->dtype, tview_elem(v, lin));
}

void tview_set(const tview *v, int64_t lin, double x)
{
    tu_store(tview_ptr(v), v->dtype, tview_elem(v, lin), x);
}

int tarena_gaps_poisoned(const tarena *a, const tview *const *vs, int n, size_t *bad)
{
    unsigned char *cov = (unsigned char *)tu_xcalloc(a->bytes, 1);
    for (int t = 0; t < n; t++) {
        const tview *v = vs[t];
        if (v->a != a) continue;
        int64_t ne = tview_numel(v);
        size_t es = tview_esize(v);
        for (int64_t e = 0; e < ne; e++) {
            size_t o = v->off + (size_t)tview_elem(v, e) * es;
            memset(cov + o, 1, es);
        }
    }
    int ok = 1;
    for (size_t b = 0; b < a->bytes; b++)
        if (!cov[b] && a->mem[b] != 0xFF) {
            ok = 0;
            if (bad) *bad = b;
            break;
        }
    free(cov);
    return ok;
}

void tview_copy_bits(const tview *v, unsigned char *dst)
{
    int64_t ne = tview_numel(v);
    size_t es = tview_esize(v);
    const unsigned char *base = (const unsigned char *)tview_ptr(v);
    for (int64_t e = 0; e < ne; e++) memcpy(dst + (size_t)e * es, base + (size_t)tview_elem(v, e) * es, es);
}
