/* Shape / mode sweep of dattn_fwd and dattn_bwd on the CPU against the float64
 * reference (ref64.c), under every CPU kernel family this machine has.
 *
 * TOLERANCE_DOC_PLACEHOLDER
 *
 * Every call also runs the generic checks of tprob.c: fresh random inputs (seeded, never
 * zeros; the gaps of strided inputs are NaN), outputs and workspace poisoned with 0xFF
 * bytes, status OK, inputs unchanged, no byte written outside the output elements,
 * every output element written and finite (lse: -inf exactly on ZERO-mode padded rows).
 *
 * Usage: test_sweep [--seed N] [--quick] [--verbose] [--isa portable|avx2|avx512]
 */
#include "tprob.h"

#include <stdio.h>
#include <string.h>

static trng rng;
static int ncases;

static tcase mk(int32_t dtype, int64_t B, int64_t L, int64_t H, int64_t D)
{
    tcase c;
    memset(&c, 0, sizeof c);
    c.dtype = dtype;
    c.layout = DATTN_LAYOUT_PADDED;
    c.pos_att = DATTN_POS_C2P | DATTN_POS_P2C;
    c.pb = 256;
    c.M = 512;
    c.padrows = DATTN_PADROWS_HF;
    c.B = B, c.L = L, c.H = H, c.D = D;
    c.mask = MK_NONE;
    c.variant = LY_CONTIG;
    c.bwd = 1;
    return c;
}

/* Builds the problem once (one reference), then runs it under every kernel family. */
static void run(const tcase *c)
{
    tprob P;
    tprob_init(&P, c, &rng);
    const char *isas[3];
    int n = tu_isas(isas);
    double t0 = tu_now();
    for (int f = 0; f < n; f++) {
        if (!tu_set_isa(isas[f])) continue;
        P.tag = n > 1 ? isas[f] : NULL;
        int ok = tprob_fwd(&P, 1);
        if (ok && c->bwd && !c->no_lse) tprob_bwd(&P, 1);
    }
    tu_set_isa(NULL);
    tu_log("%s  %.2fs\n", P.name, tu_now() - t0);
    ncases++;
    tprob_free(&P);
}

static const int32_t DT[3] = {DATTN_F32, DATTN_F16, DATTN_BF16};

/* 1. Lengths across every tile edge, up to > 2048. */
static void sweep_lengths(void)
{
    static const int64_t Ls[] = {1, 2, 7, 63, 64, 65, 127, 128, 129, 255, 256, 257, 511, 512, 513, 1031};
    static const int64_t Ds[] = {64, 32, 128, 40};
    static const int masks[] = {MK_MIXED, MK_RIGHT, MK_LEFT, MK_HOLES, MK_NONE, MK_EMPTY, MK_SINGLE};
    int nL = (int)(sizeof Ls / sizeof Ls[0]);
    for (int k = 0; k < nL; k++) {
        int64_t L = Ls[k];
        if (tu_opt.quick && L > 129) break;
        int64_t B = L <= 129 ? 3 : 2, H = L <= 257 ? 2 : 1;
        if (tu_opt.quick) B = 2, H = 1;
        tcase c = mk(DT[k % 3], B, L, H, Ds[k % 4]);
        c.mask = masks[k % 7];
        c.variant = k % LY_COUNT;
        c.padrows = (k / 2) % 2;
        if (L == 1031) { /* forward on sampled rows; backward on a small problem */
            c.B = 2, c.H = 2, c.rows = 40, c.bwd = 0;
            run(&c);
            c = mk(DATTN_F32, 1, L, 1, 32);
            c.mask = MK_HOLES;
        }
        run(&c);
    }
    if (tu_opt.quick) return;
    /* Longer than 2048: one past a power-of-two tile edge. */
    tcase c = mk(DATTN_BF16, 1, 2049, 2, 64);
    c.mask = MK_RIGHT, c.rows = 32, c.bwd = 0;
    run(&c);
    c = mk(DATTN_F32, 1, 2049, 1, 32);
    c.mask = MK_NONE, c.variant = LY_PADDED;
    run(&c);
}

/* 2. Head dims: the three public ones, odd ones, the CPU maximum. */
static void sweep_dims(void)
{
    static const int64_t Ds[] = {32, 64, 128, 40, 1, 3, 8, 17, 96, 200, 256};
    int n = tu_opt.quick ? 5 : (int)(sizeof Ds / sizeof Ds[0]);
    for (int k = 0; k < n; k++) {
        tcase c = mk(DT[k % 3], 2, tu_opt.quick ? 19 : 67, 2, Ds[k]);
        c.mask = MK_HOLES;
        c.variant = (k + 1) % LY_COUNT;
        run(&c);
    }
}

/* 3. Position terms x position configurations (log buckets of several sizes, incl.
 * non-v3 ones and degenerate ones, linear with and without clamping inside L). */
static void sweep_positions(void)
{
    static const int32_t cfg[][2] = {{256, 512}, {32, 128}, {64, 1024}, {128, 512}, {0, 64},
                                     {-1, 24},   {16, 64},  {2, 8},     {3, 10},    {64, 16},
                                     {4, 5}};
    int ncfg = (int)(sizeof cfg / sizeof cfg[0]);
    int k = 0;
    for (int pa = 0; pa < 4; pa++)
        for (int g = 0; g < ncfg; g++, k++) {
            if (tu_opt.quick && (k % 4) != 0) continue;
            tcase c = mk(DT[k % 3], 2, tu_opt.quick ? 40 : 150, 2, k % 5 == 0 ? 64 : 16);
            c.pos_att = pa;
            c.pb = cfg[g][0];
            c.M = cfg[g][1];
            c.mask = (k % 3 == 0) ? MK_MIXED : (k % 3 == 1) ? MK_NONE : MK_LEFT;
            if (c.mask == MK_MIXED) c.B = 6, c.L = tu_opt.quick ? 40 : 140;
            c.variant = k % LY_COUNT;
            run(&c);
        }
}

/* 4. Every mask pattern x both padded-row modes. */
static void sweep_masks(void)
{
    int k = 0;
    for (int m = 0; m < MK_COUNT; m++)
        for (int pr = 0; pr < 2; pr++, k++) {
            if (tu_opt.quick && (k % 3) != 0) continue;
            tcase c = mk(k % 2 ? DATTN_BF16 : DATTN_F32, m == MK_MIXED ? 6 : 4,
                         tu_opt.quick ? 20 : 70, 2, 32);
            c.mask = m;
            c.padrows = pr;
            c.variant = k % LY_COUNT;
            run(&c);
        }
}

/* 5. Memory layouts x padded/packed x dtype. */
static void sweep_layouts(void)
{
    int k = 0;
    for (int v = 0; v < LY_COUNT; v++)
        for (int lay = 0; lay < 2; lay++)
            for (int d = 0; d < 3; d++, k++) {
                if (tu_opt.quick && (k % 3) != 0) continue;
                tcase c = mk(DT[d], lay ? 7 : 6, tu_opt.quick ? 21 : 45, 3, 24);
                c.layout = lay ? DATTN_LAYOUT_PACKED : DATTN_LAYOUT_PADDED;
                c.mask = lay ? MK_NONE : MK_MIXED;
                c.variant = v;
                c.padrows = k % 2;
                run(&c);
            }
}

/* 6. Packed special cases: all sequences empty, one sequence, lengths at tile edges. */
static void sweep_packed(void)
{
    static const int64_t empty[3] = {0, 0, 0}, one[1] = {77}, edges[7] = {63, 64, 65, 1, 0, 128, 129},
                         tail[4] = {5, 0, 0, 0};
    struct {
        int64_t B, L;
        const int64_t *lens;
    } cs[] = {{3, 16, empty}, {1, 77, one}, {7, 129, edges}, {4, 9, tail}};
    for (int k = 0; k < 4; k++) {
        if (tu_opt.quick && cs[k].L > 80) continue;
        tcase c = mk(DT[k % 3], cs[k].B, cs[k].L, 2, 32);
        c.layout = DATTN_LAYOUT_PACKED;
        c.lens = cs[k].lens;
        c.variant = k % LY_COUNT;
        run(&c);
    }
    /* empty batches (padded): nothing to compute, backward still zeroes dpk/dpq */
    tcase c = mk(DATTN_F32, 0, 5, 2, 8);
    run(&c);
    c = mk(DATTN_F16, 2, 0, 2, 8);
    c.mask = MK_ONES;
    run(&c);
}

/* 7. Dropout (checked against ref64, which applies dattn_dropout_keep). */
static void sweep_dropout(void)
{
    static const float ps[] = {0.1f, 0.5f, 0.9f};
    int k = 0;
    for (int i = 0; i < 3; i++)
        for (int lay = 0; lay < 2; lay++, k++) {
            if (tu_opt.quick && k % 2) continue;
            tcase c = mk(DT[k % 3], 6, tu_opt.quick ? 23 : 77, 2, 32);
            c.dropout = ps[i];
            if (lay) c.layout = DATTN_LAYOUT_PACKED;
            else c.mask = MK_MIXED;
            c.padrows = k % 2 ? DATTN_PADROWS_ZERO : DATTN_PADROWS_HF;
            c.variant = k % LY_COUNT;
            run(&c);
        }
}

/* 8. Score scales: nearly uniform and strongly peaked softmax; thread counts; no lse. */
static void sweep_misc(void)
{
    static const double amps[] = {0.25, 4.0, 8.0};
    for (int k = 0; k < 3; k++)
        for (int d = 0; d < 3; d++) {
            if (tu_opt.quick && d != k) continue;
            tcase c = mk(DT[d], 2, tu_opt.quick ? 33 : 130, 2, 64);
            c.amp = amps[k];
            c.mask = MK_HOLES;
            run(&c);
        }
    for (int t = 1; t <= 3; t++) {
        tcase c = mk(DT[t - 1], 3, tu_opt.quick ? 17 : 97, 3, 32);
        c.threads = t;
        c.mask = MK_MIXED;
        run(&c);
    }
    tcase c = mk(DATTN_F32, 2, 33, 2, 32);
    c.no_lse = 1;
    c.mask = MK_RIGHT;
    run(&c);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, "test_sweep");
    trng_seed(&rng, tu_opt.seed);
    printf("%s\n", dattn_build_info());
    double t0 = tu_now();
    sweep_lengths();
    sweep_dims();
    sweep_positions();
    sweep_masks();
    sweep_layouts();
    sweep_packed();
    sweep_dropout();
    sweep_misc();
    printf("%d cases in %.1f s\n", ncases, tu_now() - t0);
    return tu_finish();
}
