/* Shape / mode sweep of dattn_fwd and dattn_bwd on the CPU against the float64
 * reference (ref64.c), under every CPU kernel family this machine has.
 *
 * TOLERANCE RULE (tprob.c implements it; ref64.h defines mag and smag)
 * ------------------------------------------------------------------------------------
 * Every output element (out, dq, dk, dv, dpk, dpq) must satisfy
 *
 *   |got - ref| <= eps(dtype) * (A |ref| + B mag) + F(L) eps32 smag + tiny(dtype)
 *                   + 4 FLT_MIN max(1, L)
 *
 * with ref the float64 value (ref64), eps = ulp(1) (2^-23 fp32, 2^-10 fp16, 2^-7 bf16),
 *   mag  = sum of |terms| of the element (out: sum_j p|v|; gradients: sums of
 *          p (|dp| + |D|) |operand| / scale, see ref64.h) — what the rounding of
 *          intermediates held in the storage dtype scales with;
 *   smag = the same sums with every pair weighted by 1 + sigma_ij + sum_k p_ik sigma_ik,
 *          sigma_ij = sum_d |q k| + |q pk| + |k pq| over scale — what fp32 rounding inside
 *          the scores, exp and the softmax scales with (an fp32 score has absolute error
 *          ~eps32 sigma, which is the relative error it gives p);
 *   A = 1  (twice the half-ulp rounding of the stored result, unavoidable for any
 *           implementation, transformers' eager path included),
 *   B = 0.5 for out, with or without attention dropout (intermediates kept in the storage
 *           dtype, e.g. P in fp16 / bf16 before a tensor-core P.V: the worst case of one
 *           rounding of each p (or kept p / (1 - p)), u = eps / 2 per term. It was 0.25
 *           without dropout, relying on the rounding errors of many terms averaging out;
 *           that allowance was exceeded by 1% on one fp16 row on the H200 (test_cuda_bwd,
 *           seed 136196970, B5 L129 amp 2, the sm90w1c forward) and by 4% in emulation
 *           (seed 23); with dropout at p = 0.5 by 3% (H200, seed 486723380) and by 10-43% in
 *           bf16 emulation runs at p >= 0.3), 0.125 for dv,
 *           0.5 for dq, dk, dpk, dpq: SPEC's backward
 *           uses D_i = rowsum(dout * out) with out re-read in the storage dtype, whose
 *           half-ulp error reaches every ds_ij of the row coherently — first order,
 *           eps/2 times the D part of mag (v0 needs more than 0.125 at D = 1),
 *   F(L) = 4 max(1, sqrt(L / 512))  (fp32 accumulation; slow growth with the length),
 *   4 FLT_MIN max(1, L): a sum of L fp32 terms near FLT_MIN may lose each one to a
 *           subnormal flush (seen: bf16, amp 8, dpk = 0 against a float64 -5.1e-38,
 *           4.3 FLT_MIN); harmless at every magnitude that matters,
 *   lse:  |got - ref| <= 32 eps32 (1 + |ref|) max(1, sqrt(L / 512)); -inf exactly on
 *         ZERO-mode padded rows.
 * The per-element form (not a norm) means one wrong row, key or slot fails the check.
 *
 * Against the SPEC rule ("error vs float64 <= 2x transformers' eager error in the same
 * dtype, plus a small rounding floor"), measured with tests/calibrate_eager.py: it runs
 * the real DisentangledSelfAttention (q, k, v, pos_key, pos_query injected by hooks,
 * drawn like these tests draw them) and reports max(err / bound) of the eager path; a
 * value >= 0.5 means this bound is at most 2x eager's error (minimum over L = 64..513,
 * D = 64, masks with padding; amp = the input scale, 2 by default here):
 *                         out    dv     dq     dk     dpk    dpq
 *   fp16 / bf16, amp 2    2.6    3.1    0.11   0.16   0.13   0.20
 *   fp16 / bf16, amp 4   >14    >16     0.71   1.26   1.37   1.51   (peaked softmax)
 *   fp16 / bf16, amp 0.5  0.30   0.42   0.03   0.03   0.08   0.08   (nearly uniform)
 *   fp32, any amp         0.10   0.125 <0.006 <0.006 <0.013 <0.010
 *   (the out column was measured with B = 0.25 for out; at B = 0.5 it is at least half
 *   these values: 1.3 at amp 2, still within the rule there)
 * So in fp16/bf16 the bound is 5-30x tighter than the rule for out and dv, and for
 * every output on peaked attention; for dq/dk/dpk/dpq at the default scale it is ~2.5-4x
 * eager's error (the rule allows 2x): eager keeps P and never re-reads out, a fused
 * kernel that follows SPEC's D_i cannot avoid that term. For nearly uniform attention
 * and for fp32, where eager's error is at rounding level, the bound is the rule's "small
 * rounding floor" (fp32: ~8x eager's error, i.e. ~2e-6 relative to the magnitudes).
 * The v0 kernels use at most ~0.5 of the bound on these cases (the half-ulp of A), so
 * a 2x margin for kernels that round differently. Inputs are exact in the storage dtype
 * (no input rounding), and sweep_exact() below checks bit-exact round-to-nearest-even
 * of exactly computable results, which the A = 1 term alone would not.
 *
 * Every call also runs the generic checks of tprob.c: fresh random inputs (seeded, never
 * zeros; the gaps of strided inputs are NaN), outputs and workspace poisoned with 0xFF
 * bytes, status OK, inputs unchanged, no byte written outside the output elements,
 * every output element written and finite (lse: -inf exactly on ZERO-mode padded rows).
 *
 * Usage: test_sweep [--seed N] [--quick] [--verbose] [--isa portable|avx2|avx512]
 */
#include "tprob.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static trng rng;
static int ncases;

static tcase mk(int32_t dtype, int64_t B, int64_t L, int64_t H, int64_t D)
{
    return tprob_case_v3(dtype, B, L, H, D);
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
    c = mk(DATTN_F16, 1, 4097, 1, 32); /* deep in the saturated region: 4096 + 1 */
    c.mask = MK_LEFT, c.rows = 24, c.bwd = 0, c.variant = LY_FUSED;
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

/* 9. Exact rounding: with identical keys (exact small-integer dot products) every
 * attended key gets probability exactly 1/n (n a power of two), so out is an exact mean,
 * computed exactly in fp32 whatever the summation order (the forward normalizes by the
 * row sum, exactly n); the stored result must then be that mean rounded to nearest-even
 * in the storage dtype, bit for bit. Catches truncating or double-rounding fp32 ->
 * fp16/bf16 conversions, which the tolerance alone (A = 1: up to one ulp) would let
 * through (the kernels store dq/dk/dv/dpk/dpq through the same conversion).
 * dv is held to one ulp of fp16/bf16 here, not bit-exactness: the backward recomputes
 * p = exp(s - lse) from the stored fp32 lse = log(n) (itself rounded), so p is 1/n only to
 * the exp's last bits; in fp32 storage those bits, amplified by cancellation in the sum,
 * exceed an ulp of the result, so fp32 dv is left to the general tolerance. */
static double grid(int bits, int shift)
{
    int64_t m;
    do m = trng_int(&rng, 2 * ((int64_t)1 << bits) + 1) - ((int64_t)1 << bits);
    while (m == 0);
    return (double)m / (double)((int64_t)1 << shift);
}

/* got is the exact value x rounded to nearest-even in dtype, or one of its two
 * neighbours there. */
static int within_ulp(int32_t dtype, double got, double x)
{
    double r = tu_round(dtype, x);
    if (got == r) return 1;
    int bits = dtype == DATTN_F32 ? 24 : dtype == DATTN_F16 ? 11 : 8, e;
    frexp(r != 0.0 ? r : x, &e); /* |r| in [2^(e-1), 2^e): one ulp is 2^(e - bits) */
    return fabs(got - r) <= ldexp(1.0, e - bits);
}

static void sweep_exact(void)
{
    for (int d = 0; d < 3; d++)
        for (int64_t L = 2; L <= 16; L *= 2) {
            tcase c = mk(DT[d], 2, L, 2, 64);
            c.pos_att = 0;
            c.mask = MK_ONES;
            c.variant = (int)(L % LY_COUNT);
            tprob P;
            tprob_init(&P, &c, &rng);
            int64_t H = c.H, D = c.D;
            /* sequence 0: every token; sequence 1: every other token (n = L / 2) */
            for (int64_t i = 0; i < L; i++) {
                tview_set(&P.mask, i, 1);
                tview_set(&P.mask, L + i, (i % 2 == 0) ? 1 : 0);
            }
            int vb = DT[d] == DATTN_BF16 ? 7 : 10; /* v, dout: exact in the dtype, finer than its output */
            for (int64_t b = 0; b < 2; b++)
                for (int64_t i = 0; i < L; i++)
                    for (int64_t hd = 0; hd < H * D; hd++) {
                        int64_t e = (b * L + i) * H * D + hd;
                        tview_set(&P.q, e, grid(5, 4));
                        tview_set(&P.k, e, i == 0 ? grid(5, 4) : tview_get(&P.k, (b * L) * H * D + hd));
                        tview_set(&P.v, e, grid(vb, vb - 1));
                        tview_set(&P.dout, e, grid(vb, vb - 1));
                    }
            const char *isas[3];
            int n = tu_isas(isas);
            for (int f = 0; f < n; f++) {
                if (!tu_set_isa(isas[f])) continue;
                P.tag = isas[f];
                if (!tprob_fwd(&P, 1) || !tprob_bwd(&P, 1)) continue;
                int64_t bad_o = 0, bad_v = 0;
                for (int64_t b = 0; b < 2; b++)
                    for (int64_t h = 0; h < H; h++)
                        for (int64_t dd = 0; dd < D; dd++) {
                            /* out[i]: mean over the attended keys; dv[j]: sum over rows of p * dout */
                            for (int64_t i = 0; i < L; i++) {
                                int row_valid = b == 0 || i % 2 == 0;
                                double sum = 0.0, cnt = 0.0, g = 0.0;
                                for (int64_t j = 0; j < L; j++) {
                                    int key_valid = b == 0 || j % 2 == 0;
                                    if (row_valid && !key_valid) continue;
                                    sum += tview_get(&P.v, ((b * L + j) * H + h) * D + dd);
                                    cnt += 1.0;
                                }
                                /* dv of key i */
                                for (int64_t r = 0; r < L; r++) {
                                    int rv = b == 0 || r % 2 == 0, kv = b == 0 || i % 2 == 0;
                                    if (rv && !kv) continue;
                                    double pr = 1.0 / (rv ? (b == 0 ? (double)L : (double)(L / 2)) : (double)L);
                                    g += pr * tview_get(&P.dout, ((b * L + r) * H + h) * D + dd);
                                }
                                int64_t e = ((b * L + i) * H + h) * D + dd;
                                bad_o += tview_get(&P.out, e) != tu_round(c.dtype, sum / cnt);
                                bad_v += c.dtype != DATTN_F32 && !within_ulp(c.dtype, tview_get(&P.dv, e), g);
                            }
                        }
                tu_check(bad_o == 0, "%s %s: %lld out values are not the exact mean rounded to nearest even",
                         P.name, isas[f], (long long)bad_o);
                tu_check(bad_v == 0, "%s %s: %lld dv values are more than one ulp from the exact sum",
                         P.name, isas[f], (long long)bad_v);
            }
            tu_set_isa(NULL);
            ncases++;
            tprob_free(&P);
        }
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
    sweep_exact();
    printf("%d cases in %.1f s\n", ncases, tu_now() - t0);
    return tu_finish();
}
