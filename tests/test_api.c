/* The small public functions and the test infrastructure itself:
 * status strings, version, build info, params defaults and size, att span and scale,
 * the slot function (argument errors, an independent float32 evaluation of SPEC.md's
 * formula, the v3 facts and symmetries SPEC.md states), workspace queries, device
 * support, the thread-local error message, the CPU kernel family switch, and the tests'
 * own fp16/bf16 codecs (tests/half.h) on all 65536 bit patterns.
 *
 * Usage: test_api [--seed N] [--quick] [--verbose]
 */
#include "half.h"
#include "internal.h"
#include "tprob.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static trng rng;

#define STR2(x) #x
#define STR(x) STR2(x)

static void test_strings(void)
{
    const dattn_status all[] = {DATTN_OK, DATTN_INVALID_ARG, DATTN_UNSUPPORTED, DATTN_CUDA_ERROR,
                                DATTN_INTERNAL};
    const char *s[7];
    for (int i = 0; i < 5; i++) {
        s[i] = dattn_status_string(all[i]);
        tu_check(s[i] && s[i][0], "dattn_status_string(%d) is empty", (int)all[i]);
    }
    s[5] = dattn_status_string((dattn_status)99);
    s[6] = dattn_status_string((dattn_status)-1);
    tu_check(s[5] && s[5][0] && s[6] && s[6][0], "dattn_status_string of unknown values is empty");
    for (int i = 0; i < 7; i++)
        for (int j = i + 1; j < (i < 5 ? 7 : 5); j++)
            tu_check(strcmp(s[i], s[j]) != 0, "dattn_status_string: \"%s\" used twice", s[i]);
    tu_check(!strcmp(dattn_version(),
                     STR(DATTN_VERSION_MAJOR) "." STR(DATTN_VERSION_MINOR) "." STR(DATTN_VERSION_PATCH)),
             "dattn_version() = \"%s\"", dattn_version());
    const char *bi = dattn_build_info();
    tu_check(bi && strstr(bi, dattn_version()) && strstr(bi, dattn_cpu_isa()),
             "dattn_build_info() = \"%s\" names the version and the CPU kernels", bi ? bi : "(null)");
}

static void test_params(void)
{
    dattn_params p;
    memset(&p, 0x5A, sizeof p);
    dattn_params_init(&p);
    tu_check(p.abi_version == DATTN_ABI_VERSION && p.device == DATTN_DEVICE_CPU && p.device_index == -1 &&
                 p.dtype == DATTN_F32 && p.layout == DATTN_LAYOUT_PADDED &&
                 p.pos_att == (DATTN_POS_C2P | DATTN_POS_P2C) && p.position_buckets == 256 &&
                 p.max_relative_positions == 512 && p.padded_rows == DATTN_PADROWS_HF &&
                 p.fp32_math == DATTN_MATH_IEEE && p.num_threads == 0,
             "dattn_params_init: documented defaults");
    tu_check(!p.q.data && !p.k.data && !p.v.data && !p.pk.data && !p.pq.data && !p.mask.data &&
                 !p.cu_seqlens && !p.out.data && !p.lse.data && !p.dout.data && !p.dq.data &&
                 !p.dk.data && !p.dv.data && !p.dpk.data && !p.dpq.data && !p.workspace &&
                 !p.stream && p.workspace_size == 0 && p.dropout_p == 0.0f,
             "dattn_params_init: pointers NULL, no dropout");
    dattn_params_init(NULL); /* must not crash */
    tu_check(dattn_params_sizeof() == sizeof(dattn_params), "dattn_params_sizeof() = %zu, sizeof = %zu",
             dattn_params_sizeof(), sizeof(dattn_params));
    tu_check(dattn_att_span(256, 512) == 256 && dattn_att_span(0, 512) == 512 && dattn_att_span(-1, 24) == 24,
             "dattn_att_span");
    for (int64_t D = 1; D <= 256; D++)
        for (int pa = 0; pa < 4; pa++) {
            int f = 1 + (pa & 1) + ((pa >> 1) & 1);
            float want = sqrtf((float)D * (float)f);
            if (dattn_scale(D, pa) != want) {
                tu_check(0, "dattn_scale(%lld, %d) = %.9g, want float32 sqrt(%lld) = %.9g", (long long)D, pa,
                         (double)dattn_scale(D, pa), (long long)(D * f), (double)want);
                return;
            }
        }
    tu_check(1, "dattn_scale");
}

/* SPEC.md's slot formula in float32, written here independently. */
static int32_t slot_spec(int32_t pb, int32_t M, int64_t r)
{
    int32_t S = pb > 0 ? pb : M;
    int64_t bucket = r;
    if (pb > 0) {
        int32_t mid = pb / 2;
        int64_t a = (r > -mid && r < mid) ? mid - 1 : (r < 0 ? -r : r);
        if (a > mid) {
            float den = logf((float)((double)(M - 1) / (double)mid));
            float x = (float)a / (float)mid;
            float lx = logf(x);
            float t = lx / den;
            float u = t * (float)(mid - 1);
            float lp = ceilf(u) + (float)mid;
            bucket = (int64_t)(r < 0 ? -lp : lp);
        }
    }
    int64_t s = bucket + S;
    return (int32_t)(s < 0 ? 0 : s > 2 * (int64_t)S - 1 ? 2 * (int64_t)S - 1 : s);
}

static void test_slots(void)
{
    static const int32_t cfg[][2] = {{256, 512}, {32, 128},  {64, 1024}, {128, 512}, {512, 2048},
                                     {32, 2048}, {64, 128},  {0, 64},    {-1, 24},   {16, 64},
                                     {2, 8},     {3, 10},    {64, 16},   {4, 5},     {256, 256}};
    int n = (int)(sizeof cfg / sizeof cfg[0]);
    for (int c = 0; c < n; c++) {
        int32_t pb = cfg[c][0], M = cfg[c][1], S = pb > 0 ? pb : M;
        int64_t R = 4 * (int64_t)(M > S ? M : S) + 7, cnt = 2 * R + 1;
        int32_t *s = tu_xcalloc((size_t)cnt, sizeof(int32_t));
        dattn_status st = dattn_slots(pb, M, -R, cnt, s);
        if (!tu_check(st == DATTN_OK, "dattn_slots(%d, %d): %s", pb, M, dattn_last_error())) {
            free(s);
            continue;
        }
        int64_t bad = 0, sym = 0, range = 0, mono = 0;
        for (int64_t k = 0; k < cnt; k++) {
            int64_t r = k - R;
            if (s[k] != slot_spec(pb, M, r) && bad++ < 3)
                printf("  slot(%d, %d, r=%lld) = %d, formula %d\n", pb, M, (long long)r, s[k],
                       slot_spec(pb, M, r));
            range += s[k] < 0 || s[k] > 2 * S - 1;
            /* slot(-r) = 2S - slot(r) wherever neither side clamps */
            int32_t a = s[k], b = s[2 * R - k];
            if (a > 0 && a < 2 * S - 1 && 2 * S - a > 0 && 2 * S - a < 2 * S - 1 && b != 2 * S - a &&
                b > 0 && b < 2 * S - 1)
                sym++;
            if (k > 0 && (pb <= 0 || M - 1 >= pb / 2) && s[k] < s[k - 1]) mono++;
        }
        tu_check(bad == 0, "dattn_slots(%d, %d) differs from the float32 formula at %lld positions", pb, M,
                 (long long)bad);
        tu_check(range == 0, "dattn_slots(%d, %d): %lld slots outside [0, 2S)", pb, M, (long long)range);
        tu_check(sym == 0, "dattn_slots(%d, %d): slot(-r) != 2S - slot(r) at %lld positions", pb, M,
                 (long long)sym);
        tu_check(mono == 0, "dattn_slots(%d, %d): not monotone at %lld positions", pb, M, (long long)mono);
        if (pb <= 0) {
            int64_t lin = 0;
            for (int64_t k = 0; k < cnt; k++) {
                int64_t want = k - R + S;
                want = want < 0 ? 0 : want > 2 * S - 1 ? 2 * S - 1 : want;
                lin += s[k] != want;
            }
            tu_check(lin == 0, "linear slots (%d, %d) != clamp(r + S)", pb, M);
        }
        if (pb == 256 && M == 512) { /* SPEC.md's v3 facts */
            int64_t f = 0;
            for (int64_t r = -128; r <= 128; r++) f += s[r + R] != r + 256;
            for (int64_t r = 512; r <= R; r++) f += s[r + R] != 511;
            for (int64_t r = -R; r <= -512; r++) f += s[r + R] != 0;
            for (int64_t r = -511; r <= -506; r++) f += s[r + R] != 1;
            f += s[505 + R] == 511 || s[506 + R] != 511 || s[-505 + R] == 1;
            tu_check(f == 0, "v3 slot facts of SPEC.md (linear to 128, saturation at 506 / -512)");
        }
        free(s);
    }
    /* argument errors */
    int32_t out[4];
    dattn_status st = dattn_slots(256, 512, 0, -1, out);
    tu_check(st == DATTN_INVALID_ARG && strstr(dattn_last_error(), "count"), "dattn_slots count < 0: \"%s\"",
             dattn_last_error());
    st = dattn_slots(256, 512, 0, 4, NULL);
    tu_check(st == DATTN_INVALID_ARG && strstr(dattn_last_error(), "out"), "dattn_slots out NULL: \"%s\"",
             dattn_last_error());
    tu_check(dattn_slots(256, 512, 0, 0, NULL) == DATTN_OK, "dattn_slots with count 0 and out NULL is fine");
    st = dattn_slots(256, 512, (int64_t)1 << 40, 4, out);
    tu_check(st == DATTN_INVALID_ARG && strstr(dattn_last_error(), "r0"), "dattn_slots r0 = 2^40: \"%s\"",
             dattn_last_error());
    st = dattn_slots(256, 512, -((int64_t)1 << 40), 4, out);
    tu_check(st == DATTN_INVALID_ARG && strstr(dattn_last_error(), "r0"), "dattn_slots r0 = -2^40: \"%s\"",
             dattn_last_error());
    st = dattn_slots(256, 512, 0, (int64_t)1 << 40, out);
    tu_check(st == DATTN_INVALID_ARG && strstr(dattn_last_error(), "count"), "dattn_slots count = 2^40: \"%s\"",
             dattn_last_error());
    st = dattn_slots(1, 512, 0, 4, out);
    tu_check(st == DATTN_INVALID_ARG && strstr(dattn_last_error(), "position_buckets"),
             "dattn_slots position_buckets = 1: \"%s\"", dattn_last_error());
    st = dattn_slots(256, 0, 0, 4, out);
    tu_check(st == DATTN_INVALID_ARG && strstr(dattn_last_error(), "max_relative_positions"),
             "dattn_slots max_relative_positions = 0: \"%s\"", dattn_last_error());
}

static void test_workspace_and_device(void)
{
    tcase c;
    memset(&c, 0, sizeof c);
    c.dtype = DATTN_BF16;
    c.pos_att = 3, c.pb = 256, c.M = 512;
    c.B = 2, c.L = 300, c.H = 3, c.D = 64;
    tprob P;
    tprob_init(&P, &c, &rng);
    for (int dir = 0; dir < 2; dir++) {
        size_t a = 1, b = 2;
        dattn_status s1 = dir ? dattn_bwd_workspace_size(&P.p, &a) : dattn_fwd_workspace_size(&P.p, &a);
        dattn_status s2 = dir ? dattn_bwd_workspace_size(&P.p, &b) : dattn_fwd_workspace_size(&P.p, &b);
        tu_check(s1 == DATTN_OK && s2 == DATTN_OK && a == b, "%s workspace size query: %s, %zu then %zu",
                 dir ? "bwd" : "fwd", dattn_last_error(), a, b);
        tu_log("%s workspace for %s: %zu bytes\n", dir ? "bwd" : "fwd", P.name, a);
    }
    tprob_free(&P);
    tu_check(dattn_device_supported(DATTN_DEVICE_CPU, -1) == DATTN_OK, "CPU device supported");
    dattn_status st = dattn_device_supported(7, 0);
    tu_check(st == DATTN_INVALID_ARG && strstr(dattn_last_error(), "device"), "device 7: \"%s\"",
             dattn_last_error());
    st = dattn_device_supported(DATTN_DEVICE_CUDA, 0);
    if (!dattn_cuda_built())
        tu_check(st == DATTN_UNSUPPORTED && strstr(dattn_last_error(), "CUDA"),
                 "CUDA device without a CUDA build: %d \"%s\"", (int)st, dattn_last_error());
    else
        tu_check(st == DATTN_OK || st == DATTN_UNSUPPORTED, "CUDA device query: %d", (int)st);
}

static void *other_thread(void *arg)
{
    char *res = (char *)arg;
    snprintf(res, 256, "%s", dattn_last_error());
    dattn_params p;
    dattn_params_init(&p);
    p.dtype = 17;
    dattn_fwd(&p);
    snprintf(res + 256, 256, "%s", dattn_last_error());
    return NULL;
}

static void test_thread_local_error(void)
{
    dattn_params p;
    dattn_params_init(&p);
    p.layout = 9;
    tu_check(dattn_fwd(&p) == DATTN_INVALID_ARG, "layout 9 rejected");
    char mine[256], res[512] = {0};
    snprintf(mine, sizeof mine, "%s", dattn_last_error());
    pthread_t t;
    if (!tu_check(pthread_create(&t, NULL, other_thread, res) == 0, "pthread_create")) return;
    pthread_join(t, NULL);
    tu_check(res[0] == '\0', "a new thread sees an empty dattn_last_error(), got \"%s\"", res);
    tu_check(strstr(res + 256, "dtype") != NULL, "the other thread's own error names dtype: \"%s\"", res + 256);
    tu_check(!strcmp(mine, dattn_last_error()) && strstr(mine, "layout"),
             "this thread's message is unchanged by the other thread: \"%s\"", dattn_last_error());
}

static void test_isa_switch(void)
{
    dattn_status st = dattn_cpu_set_isa("portable");
    tu_check(st == DATTN_OK && !strcmp(dattn_cpu_isa(), "portable"), "dattn_cpu_set_isa(\"portable\"): %d, isa %s",
             (int)st, dattn_cpu_isa());
    st = dattn_cpu_set_isa("sse9000");
    tu_check(st != DATTN_OK && dattn_last_error()[0], "dattn_cpu_set_isa(\"sse9000\") fails with a message");
    tu_check(!strcmp(dattn_cpu_isa(), "portable"), "a failed switch keeps the family (%s)", dattn_cpu_isa());
    tu_check(dattn_cpu_set_isa("auto") == DATTN_OK && dattn_cpu_set_isa(NULL) == DATTN_OK,
             "dattn_cpu_set_isa(\"auto\") and (NULL)");
    const char *isas[3];
    tu_isas(isas); /* probes and reports the families */
}

static void test_codecs(void)
{
    long bad16 = 0, badbf = 0, badtie = 0;
    for (uint32_t u = 0; u < 65536; u++) {
        uint16_t h = (uint16_t)u;
        double x = th_f16_to_double(h), y = th_bf16_to_double(h);
        if (isnan(x) ? !isnan(th_f16_to_double(th_double_to_f16(x))) : th_double_to_f16(x) != h) bad16++;
        if (isnan(y) ? !isnan(th_bf16_to_double(th_double_to_bf16(y))) : th_double_to_bf16(y) != h) badbf++;
        /* halfway to the next finite value rounds to the even one; a quarter rounds down */
        if ((h & 0x7C00) != 0x7C00 && (h & 0x7FFF) != 0x7BFF && !(h & 0x8000)) {
            double nx = th_f16_to_double((uint16_t)(h + 1));
            uint16_t mid = th_double_to_f16((x + nx) / 2), q = th_double_to_f16(x + (nx - x) / 4);
            if (mid != ((h & 1) ? h + 1 : h) || q != h) badtie++;
        }
    }
    tu_check(bad16 == 0, "fp16 codec: %ld bit patterns do not round-trip", bad16);
    tu_check(badbf == 0, "bf16 codec: %ld bit patterns do not round-trip", badbf);
    tu_check(badtie == 0, "fp16 codec: %ld ties / quarters rounded wrongly", badtie);
    tu_check(th_double_to_f16(65519.0) == 0x7BFF && th_double_to_f16(65520.0) == 0x7C00 &&
                 th_double_to_f16(-1e9) == 0xFC00 && th_double_to_f16(0x1p-25) == 0 &&
                 th_double_to_f16(0x1.8p-25) == 1 && th_f16_to_double(1) == 0x1p-24,
             "fp16 codec: overflow, underflow and subnormals");
    tu_check(th_double_to_bf16(1.0 + 0x1p-8) == 0x3F80 && th_double_to_bf16(1.0 + 0x1.8p-8) == 0x3F81 &&
                 th_double_to_bf16(1.0 + 3 * 0x1p-8) == 0x3F82,
             "bf16 codec: ties to even");
    /* tu_round agrees with the codecs on random values */
    long badr = 0;
    for (int t = 0; t < 100000; t++) {
        double x = trng_sym(&rng, 8.0) * pow(2.0, (double)trng_int(&rng, 40) - 20);
        badr += tu_round(DATTN_F16, x) != th_f16_to_double(th_double_to_f16(x));
        badr += tu_round(DATTN_BF16, x) != th_bf16_to_double(th_double_to_bf16(x));
        badr += tu_round(DATTN_F32, x) != (double)(float)x;
    }
    tu_check(badr == 0, "tu_round vs codecs: %ld mismatches", badr);
}

/* ---- the ws backward's work split (src/ws_units.c) ---- */

/* a unit's cost by brute force: every 64-row tile inside L against every 64-key tile, with
 * ws_is_band's rule (rmin = r0 - (n0 + 63), rmax = r0 + 63 - n0; band unless rmin >= R or
 * rmax <= -R) */
static int64_t ws_cost_ref(int64_t m, int64_t L, int64_t R)
{
    int64_t c = DATTN_WS_W_UNIT;
    for (int w = 0; w < 2; w++) {
        const int64_t r0 = 128 * m + 64 * w;
        if (r0 >= L) break;
        for (int64_t n0 = 0; n0 < L; n0 += 64) {
            const int band = R >= 1 && !(r0 - (n0 + 63) >= R || r0 + 63 - n0 <= -R);
            c += band ? DATTN_WS_W_BAND : DATTN_WS_W_SAT;
        }
    }
    return c;
}

/* the most expensive range of a split (reference costs) */
static int64_t ws_split_max(const int32_t *ub, int G, int64_t L, int64_t R)
{
    const int64_t nblk = (L + 127) / 128;
    int64_t mx = 0;
    for (int g = 0; g < G; g++) {
        int64_t c = 0;
        for (int64_t u = ub[g]; u < ub[g + 1]; u++) c += ws_cost_ref(u % nblk, L, R);
        if (c > mx) mx = c;
    }
    return mx;
}

/* the best possible most expensive range over all splits into G non-empty contiguous ranges
 * (dynamic programming; small U only) */
static int64_t ws_split_best(int64_t B, int64_t L, int64_t R, int G)
{
    const int64_t nblk = (L + 127) / 128, U = B * nblk;
    int64_t *pre = tu_xcalloc((size_t)U + 1, sizeof(int64_t)), *f = tu_xcalloc((size_t)(U + 1) * (size_t)(G + 1), sizeof(int64_t));
    for (int64_t u = 0; u < U; u++) pre[u + 1] = pre[u] + ws_cost_ref(u % nblk, L, R);
    const int64_t INF = INT64_MAX / 4;
    for (int64_t i = 0; i <= U; i++)
        for (int g = 0; g <= G; g++) f[i * (G + 1) + g] = INF;
    f[0] = 0; /* f[i][g]: units [0, i) in g ranges */
    for (int g = 1; g <= G; g++)
        for (int64_t i = g; i <= U; i++)
            for (int64_t j = g - 1; j < i; j++) {
                const int64_t a = f[j * (G + 1) + g - 1], c = pre[i] - pre[j];
                const int64_t v = a > c ? a : c;
                if (v < f[i * (G + 1) + g]) f[i * (G + 1) + g] = v;
            }
    const int64_t best = f[U * (G + 1) + G];
    free(pre);
    free(f);
    return best;
}

static void test_ws_units(void)
{
    /* the cost's closed form against brute force */
    int64_t bad = 0;
    for (int k = 0; k < 400; k++) {
        const int64_t L = 1 + trng_int(&rng, 3000), R = trng_int(&rng, 4) == 0 ? 0 : 1 + trng_int(&rng, 1100);
        const int64_t m = trng_int(&rng, (L + 127) / 128);
        if (dattn_ws_unit_cost(m, L, R) != ws_cost_ref(m, L, R) && bad++ < 3)
            printf("  dattn_ws_unit_cost(%lld, L %lld, R %lld) = %lld, brute force %lld\n", (long long)m,
                   (long long)L, (long long)R, (long long)dattn_ws_unit_cost(m, L, R), (long long)ws_cost_ref(m, L, R));
    }
    tu_check(bad == 0, "dattn_ws_unit_cost against the tiles counted one by one (%lld of 400 differ)", (long long)bad);

    /* splits: the shapes (v3's R 512, 11 CTAs a head at H 12), fixed edge cases, random ones */
    static const int64_t fixed[][4] = {{32, 512, 512, 11}, {8, 2048, 512, 11}, {2, 8192, 512, 11}, {4, 2048, 512, 11},
                                       {1, 1, 512, 1},     {1, 129, 16, 2},    {3, 1000, 256, 3},  {1, 2048, 512, 16},
                                       {64, 8192, 512, 132}, {5, 640, 0, 7}};
    int32_t ub[DATTN_WS_UB_MAX], ub2[DATTN_WS_UB_MAX], eq[DATTN_WS_UB_MAX];
    int64_t shape_fail = 0, worse = 0, notbest = 0, nodet = 0, noeq = 0;
    for (int k = 0; k < 10 + 300; k++) {
        int64_t B, L, R;
        int G;
        if (k < 10) {
            B = fixed[k][0], L = fixed[k][1], R = fixed[k][2], G = (int)fixed[k][3];
        } else {
            B = 1 + trng_int(&rng, 12), L = 1 + trng_int(&rng, 2500);
            R = trng_int(&rng, 5) == 0 ? 0 : 1 + trng_int(&rng, 1100);
            const int64_t U = B * ((L + 127) / 128), gmax = U < 132 ? U : 132;
            G = (int)(1 + trng_int(&rng, gmax));
        }
        const int64_t U = B * ((L + 127) / 128);
        if (!tu_check(dattn_ws_unit_bounds(B, L, R, G, ub) == 0, "dattn_ws_unit_bounds(B %lld, L %lld, R %lld, G %d) failed",
                      (long long)B, (long long)L, (long long)R, G))
            continue;
        int ok = ub[0] == 0 && ub[G] == U;
        for (int g = 0; g < G; g++) ok = ok && ub[g + 1] > ub[g];
        for (int g = 0; g <= G; g++) eq[g] = (int32_t)(U * g / G);
        if (!ok && shape_fail++ < 3) printf("  B %lld L %lld R %lld G %d: ranges not contiguous, non-empty, covering [0, %lld)\n",
                                            (long long)B, (long long)L, (long long)R, G, (long long)U);
        if (R <= 0 && memcmp(ub, eq, sizeof(int32_t) * (size_t)(G + 1)) && noeq++ < 3)
            printf("  B %lld L %lld G %d: without position terms the split is not U g / G\n", (long long)B, (long long)L, G);
        const int64_t got = ws_split_max(ub, G, L, R), equal = ws_split_max(eq, G, L, R);
        if (got > equal && worse++ < 3)
            printf("  B %lld L %lld R %lld G %d: most expensive range %lld, the equal-count split's %lld\n", (long long)B,
                   (long long)L, (long long)R, G, (long long)got, (long long)equal);
        if (R >= 1 && U <= 48 && got != ws_split_best(B, L, R, G) && notbest++ < 3)
            printf("  B %lld L %lld R %lld G %d: most expensive range %lld, the best split's %lld\n", (long long)B, (long long)L,
                   (long long)R, G, (long long)got, (long long)ws_split_best(B, L, R, G));
        /* the same split again, after another shape (its per-thread cache) */
        dattn_ws_unit_bounds(B + 1, L, R, 1, ub2);
        dattn_ws_unit_bounds(B, L, R, G, ub2);
        if (memcmp(ub, ub2, sizeof(int32_t) * (size_t)(G + 1)) && nodet++ < 3)
            printf("  B %lld L %lld R %lld G %d: a second call split differently\n", (long long)B, (long long)L, (long long)R, G);
        if (k == 1) { /* B8 L2048 (why the split exists): the equal-count split's most expensive range
                       * is ~6 % over the balanced one's under these costs */
            tu_check(equal * 100 >= got * 105, "B8 L2048 R512 G11: balanced %lld against equal counts %lld (want >= 5 %% less)",
                     (long long)got, (long long)equal);
        }
    }
    tu_check(shape_fail == 0, "dattn_ws_unit_bounds: contiguous non-empty ranges covering every unit (%lld bad)", (long long)shape_fail);
    tu_check(noeq == 0, "dattn_ws_unit_bounds without position terms: U g / G (%lld differ)", (long long)noeq);
    tu_check(worse == 0, "dattn_ws_unit_bounds: never costlier than the equal-count split (%lld worse)", (long long)worse);
    tu_check(notbest == 0, "dattn_ws_unit_bounds with position terms: the best split where U <= 48 (%lld not)", (long long)notbest);
    tu_check(nodet == 0, "dattn_ws_unit_bounds: the same split for the same call (%lld differ)", (long long)nodet);
    /* arguments out of range */
    tu_check(dattn_ws_unit_bounds(0, 512, 512, 1, ub) == -1 && dattn_ws_unit_bounds(1, 0, 512, 1, ub) == -1 &&
                 dattn_ws_unit_bounds(1, 512, 512, 0, ub) == -1 && dattn_ws_unit_bounds(1, 512, 512, 5, ub) == -1 &&
                 dattn_ws_unit_bounds(64, 8192, 512, DATTN_WS_UB_MAX, ub) == -1,
             "dattn_ws_unit_bounds: B, L, G < 1, G > U, G > DATTN_WS_UB_MAX - 1 refused");
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, "test_api");
    trng_seed(&rng, tu_opt.seed);
    test_strings();
    test_params();
    test_slots();
    test_workspace_and_device();
    test_thread_local_error();
    test_isa_switch();
    test_codecs();
    test_ws_units();
    return tu_finish();
}
