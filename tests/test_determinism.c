/* Bitwise reproducibility of the CPU backend:
 *   - forward and backward run twice give identical bytes (run-to-run determinism);
 *   - num_threads 1, 2, 3 and 0 (OpenMP default) give identical bytes, forward and
 *     backward (dattn.h: "bitwise identical for any thread count");
 * for each CPU kernel family, on problems with padding, packing, dropout, log buckets.
 * The first run of each problem is also checked against ref64 (tprob.c rule).
 *
 * Usage: test_determinism [--seed N] [--quick] [--verbose] [--isa NAME]
 */
#include "tprob.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static trng rng;

static tcase mk(int32_t dtype, int layout, int64_t B, int64_t L, int64_t H, int64_t D)
{
    tcase c;
    memset(&c, 0, sizeof c);
    c.dtype = dtype;
    c.layout = layout;
    c.pos_att = DATTN_POS_C2P | DATTN_POS_P2C;
    c.pb = 256;
    c.M = 512;
    c.B = B, c.L = L, c.H = H, c.D = D;
    c.bwd = 1;
    return c;
}

static int same(const unsigned char *a, size_t na, const unsigned char *b, size_t nb)
{
    return na == nb && !memcmp(a, b, na);
}

static void run(const tcase *c)
{
    tprob P;
    tprob_init(&P, c, &rng);
    const char *isas[3];
    int n = tu_isas(isas);
    for (int f = 0; f < n; f++) {
        if (!tu_set_isa(isas[f])) continue;
        P.tag = isas[f];
        P.p.num_threads = 1;
        if (!tprob_fwd(&P, 1) || !tprob_bwd(&P, 1)) continue;
        size_t nf, nb, n2;
        unsigned char *f1 = tprob_fwd_bits(&P, &nf), *b1 = tprob_bwd_bits(&P, &nb);
        /* same thread count, again: the backward alone, then forward + backward */
        if (tprob_bwd(&P, 0)) {
            unsigned char *b2 = tprob_bwd_bits(&P, &n2);
            tu_check(same(b1, nb, b2, n2), "%s %s: backward run twice differs", P.name, isas[f]);
            free(b2);
        }
        static const int32_t thr[] = {1, 2, 3, 0};
        for (int t = 0; t < 4; t++) {
            P.p.num_threads = thr[t];
            if (!tprob_fwd(&P, 0)) continue;
            unsigned char *f2 = tprob_fwd_bits(&P, &n2);
            tu_check(same(f1, nf, f2, n2), "%s %s: forward with num_threads=%d differs from num_threads=1",
                     P.name, isas[f], thr[t]);
            free(f2);
            if (!tprob_bwd(&P, 0)) continue;
            unsigned char *b2 = tprob_bwd_bits(&P, &n2);
            tu_check(same(b1, nb, b2, n2), "%s %s: backward with num_threads=%d differs from num_threads=1",
                     P.name, isas[f], thr[t]);
            free(b2);
        }
        free(f1);
        free(b1);
    }
    tu_set_isa(NULL);
    tprob_free(&P);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, "test_determinism");
    trng_seed(&rng, tu_opt.seed);
    int q = tu_opt.quick;
    tcase c = mk(DATTN_F32, DATTN_LAYOUT_PADDED, 6, q ? 37 : 131, 3, 64);
    c.mask = MK_MIXED;
    run(&c);
    c = mk(DATTN_BF16, DATTN_LAYOUT_PACKED, 5, q ? 40 : 200, 2, 32);
    c.dropout = 0.2f;
    c.variant = LY_FUSED;
    run(&c);
    c = mk(DATTN_F16, DATTN_LAYOUT_PADDED, 2, q ? 65 : 300, 2, 40);
    c.pb = 32, c.M = 128;
    c.mask = MK_HOLES;
    c.padrows = DATTN_PADROWS_ZERO;
    c.variant = LY_PADDED;
    run(&c);
    c = mk(DATTN_F32, DATTN_LAYOUT_PADDED, 1, q ? 30 : 97, 7, 16);
    c.pb = 0, c.M = 24; /* linear, clamped inside L */
    c.pos_att = DATTN_POS_P2C;
    c.variant = LY_TRANS;
    run(&c);
    return tu_finish();
}
