/* Dropout: the mask definition, its statistics, and that the kernels apply exactly
 * that mask — the same one in forward and backward.
 *
 *  1. An independent Philox4x32-10 (from Salmon et al., SC'11) checked on Random123's
 *     known-answer vectors; dattn_dropout_keep() checked against dattn.h's definition
 *     built on it, for random (seed, offset, b, h, H, i, j, p).
 *  2. Keep rate of dattn_dropout_keep(): within 5 sigma of 1 - p, per output lane (16-bit
 *     half of a Philox word, j & 7) too.
 *  3. The kernels' own masks, read back from the outputs: with no position terms and
 *     identical keys every probability of a row is equal, v_j = e_j makes
 *     out[i, j] = keep_ij / (1 - p) / n, and dout_i = e_i makes
 *     dv[j, i] = keep_ij / (1 - p) / n. Both masks must equal dattn_dropout_keep() bit
 *     for bit (padded with holes and HF padded rows; packed), their keep rate must be
 *     within 5 sigma, and another dropout_offset must give another mask.
 * (The sweep also checks dropout forward/backward values against ref64.)
 *
 * Usage: test_dropout [--seed N] [--quick] [--verbose] [--isa NAME]
 */
#include "tprob.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static trng rng;

/* ---------------------------------------------------------------- Philox4x32-10 */
static void mulhilo(uint32_t a, uint32_t b, uint32_t *hi, uint32_t *lo)
{
    uint64_t p = (uint64_t)a * b;
    *hi = (uint32_t)(p >> 32);
    *lo = (uint32_t)p;
}

static void philox(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t c[4] = {ctr[0], ctr[1], ctr[2], ctr[3]}, k0 = key[0], k1 = key[1];
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u; /* Weyl key schedule between rounds */
            k1 += 0xBB67AE85u;
        }
        uint32_t hi0, lo0, hi1, lo1;
        mulhilo(0xD2511F53u, c[0], &hi0, &lo0);
        mulhilo(0xCD9E8D57u, c[2], &hi1, &lo1);
        uint32_t n0 = hi1 ^ c[1] ^ k0, n1 = lo1, n2 = hi0 ^ c[3] ^ k1, n3 = lo0;
        c[0] = n0, c[1] = n1, c[2] = n2, c[3] = n3;
    }
    memcpy(out, c, sizeof c);
}

static void test_kat(void)
{
    /* Random123 tests/kat_vectors, "philox4x32 10": ctr[4] key[2] -> out[4] */
    static const uint32_t v[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1}};
    for (int t = 0; t < 3; t++) {
        uint32_t out[4];
        philox(v[t], v[t] + 4, out);
        tu_check(!memcmp(out, v[t] + 6, sizeof out), "Philox4x32-10 known-answer vector %d", t);
    }
}

/* dattn.h's DROPOUT definition, from the independent Philox. */
static int keep_def(uint64_t seed, uint64_t offset, float p, int64_t b, int64_t h, int64_t H,
                    int64_t i, int64_t j)
{
    uint32_t thr = p > 0.0f ? (uint32_t)floor((double)p * 65536.0) : 0;
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32) ^ (uint32_t)(offset >> 32)};
    uint32_t ctr[4] = {(uint32_t)(j / 8), (uint32_t)i, (uint32_t)(b * H + h), (uint32_t)offset};
    uint32_t out[4];
    philox(ctr, key, out);
    uint32_t w = out[(j % 8) / 2];
    uint32_t u = (j % 2) ? w >> 16 : w & 0xFFFFu; /* 16-bit uniform: half j % 2 of word (j % 8) / 2 */
    return u >= thr;
}

static void test_definition(void)
{
    static const float ps[] = {0.1f, 0.5f, 0.9f, 1e-9f, 0.999999f, 0.0f, 0.3333333f};
    int n = tu_opt.quick ? 20000 : 200000, bad = 0;
    for (int t = 0; t < n; t++) {
        uint64_t seed = trng_u64(&rng), off = trng_u64(&rng);
        float p = ps[trng_int(&rng, 7)];
        int64_t H = 1 + trng_int(&rng, 64), b = trng_int(&rng, 4096), h = trng_int(&rng, H);
        int64_t i = trng_int(&rng, (int64_t)1 << 31), j = trng_int(&rng, (int64_t)1 << 31);
        if (t % 2) i %= 4096, j %= 4096;
        int a = dattn_dropout_keep(seed, off, p, b, h, H, i, j), e = keep_def(seed, off, p, b, h, H, i, j);
        if (a != e && bad++ < 3)
            printf("  keep(seed=%llu off=%llu p=%g b=%lld h=%lld H=%lld i=%lld j=%lld) = %d, definition %d\n",
                   (unsigned long long)seed, (unsigned long long)off, (double)p, (long long)b,
                   (long long)h, (long long)H, (long long)i, (long long)j, a, e);
    }
    tu_check(bad == 0, "dattn_dropout_keep differs from the dattn.h definition on %d of %d draws", bad, n);
}

static void test_rates(void)
{
    static const float ps[] = {0.1f, 0.5f, 0.9f};
    long n = tu_opt.quick ? (1L << 16) : (1L << 20);
    for (int k = 0; k < 3; k++) {
        uint64_t seed = trng_u64(&rng), off = trng_u64(&rng);
        long kept = 0, lane_kept[8] = {0}, lane_n[8] = {0}; /* lane j & 7: word and 16-bit half */
        for (long t = 0; t < n; t++) {
            /* consecutive (i, j) in a grid, as the kernels use them */
            int64_t j = t % 1024, i = (t / 1024) % 1024, bh = t / (1024 * 1024);
            int kp = dattn_dropout_keep(seed, off, ps[k], bh / 12, bh % 12, 12, i, j);
            kept += kp;
            lane_kept[j & 7] += kp;
            lane_n[j & 7]++;
        }
        tu_check(tprob_keep_rate_ok(kept, n, ps[k]), "keep rate %.5f for p = %g over %ld draws (expected %.5f)",
                 (double)kept / (double)n, (double)ps[k], n, 1.0 - ps[k]);
        for (int l = 0; l < 8; l++)
            tu_check(tprob_keep_rate_ok(lane_kept[l], lane_n[l], ps[k]), "keep rate of lane %d: %.5f for p = %g", l,
                     (double)lane_kept[l] / (double)lane_n[l], (double)ps[k]);
    }
}

/* ---------------------------------------------------------------- kernel masks */


static void test_kernel_masks(int layout)
{
    tcase c;
    memset(&c, 0, sizeof c);
    c.dtype = DATTN_F32;
    c.layout = layout;
    c.pos_att = 0;
    c.pb = 256, c.M = 512;
    c.H = 3, c.D = 64;
    c.dropout = 0.25f;
    c.bwd = 1;
    static const int64_t lens[3] = {20, 64, 33};
    if (layout == DATTN_LAYOUT_PACKED) c.B = 3, c.L = 64, c.lens = lens;
    else c.B = 2, c.L = 48, c.mask = MK_HOLES;
    if (tu_opt.quick) c.H = 1;
    tprob P;
    tprob_init(&P, &c, &rng);
    tprob_dropout_shape_inputs(&P);
    const char *isas[3];
    int n = tu_isas(isas);
    for (int f = 0; f < n; f++) {
        if (!tu_set_isa(isas[f])) continue;
        P.tag = isas[f];
        if (!tprob_fwd(&P, 1)) continue;
        long nf = 0, nb = 0;
        size_t cap = (size_t)(P.ntok * c.H * c.L) + 1;
        unsigned char *mf = tu_xcalloc(cap, 1), *mb = tu_xcalloc(cap, 1);
        tprob_dropout_check_masks(&P, 0, 1e-3, mf, &nf);
        if (tprob_bwd(&P, 1)) {
            tprob_dropout_check_masks(&P, 1, 1e-3, mb, &nb);
            tu_check(nf == nb && !memcmp(mf, mb, (size_t)nf), "%s %s: forward and backward masks differ",
                     P.name, isas[f]);
        }
        /* another offset: another mask, differing in about 2 p (1 - p) of the entries */
        uint64_t off0 = P.p.dropout_offset;
        P.p.dropout_offset = off0 + 1;
        if (tprob_fwd(&P, 0)) {
            long n2 = 0, diff = 0;
            unsigned char *m2 = tu_xcalloc(cap, 1);
            tprob_dropout_check_masks(&P, 0, 1e-3, m2, &n2);
            for (long t = 0; t < n2 && t < nf; t++) diff += m2[t] != mf[t];
            double q = 2.0 * 0.25 * 0.75;
            tu_check(fabs((double)diff / (double)nf - q) <= 5.0 * sqrt(q * (1 - q) / (double)nf),
                     "%s: dropout_offset + 1 changes %ld of %ld mask entries (expected ~%.3f)", P.name,
                     diff, nf, q);
            free(m2);
        }
        P.p.dropout_offset = off0;
        free(mf);
        free(mb);
    }
    tu_set_isa(NULL);
    tprob_free(&P);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, "test_dropout");
    trng_seed(&rng, tu_opt.seed);
    test_kat();
    test_definition();
    test_rates();
    test_kernel_masks(DATTN_LAYOUT_PADDED);
    test_kernel_masks(DATTN_LAYOUT_PACKED);
    return tu_finish();
}
