/* Validates the float64 reference itself:
 *  1. Finite differences: on tiny shapes, every gradient of ref64_bwd (dq, dk, dv, dpk,
 *     dpq) against central differences of F = sum(ref64_fwd(x) * dout), Richardson-
 *     extrapolated (steps h and h/2, error O(h^4)). Inputs are multiples of 2^-10 so
 *     that x +- h stays exact in the storage dtype (fp32). Both terms, each alone, log
 *     and linear (clamping) positions, masks with holes and HF padded rows, an
 *     all-padding sequence, packed sequences, and dropout (its mask is fixed).
 *  2. Invariant: sum over slots t of dpk[h, t, :] is 0, because every row of ds sums to 0
 *     (softmax). Checked on ref64 at a length where the slots saturate, and on the
 *     library's dpk (within the sum of its per-element tolerances).
 *  3. Forward rows: ref64_fwd_row == ref64_fwd, and ZERO padded rows are exactly 0.
 *
 * Usage: test_fd [--seed N] [--quick] [--verbose] [--isa NAME]
 */
#include "ref64.h"
#include "tprob.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static trng rng;

static double objective(const tprob *P, double *out, const double *dout, size_t n)
{
    ref64_fwd(&P->p, out, NULL);
    double f = 0.0;
    for (size_t e = 0; e < n; e++) f += out[e] * dout[e];
    return f;
}

static void quantize(const tview *v)
{
    int64_t n = tview_numel(v);
    for (int64_t e = 0; e < n; e++) {
        double x;
        do x = nearbyint(trng_sym(&rng, 1.5) * 1024.0) / 1024.0;
        while (x == 0.0);
        tview_set(v, e, x);
    }
}

static void fd_case(const tcase *c)
{
    tprob P;
    tprob_init(&P, c, &rng);
    quantize(&P.q);
    quantize(&P.k);
    quantize(&P.v);
    if (P.pk.a) quantize(&P.pk);
    if (P.pq.a) quantize(&P.pq);
    size_t nt = (size_t)(P.ntok * c->H * c->D), np = (size_t)(c->H * 2 * P.S * c->D);
    double *out = tu_xcalloc(nt, sizeof(double)), *dout = tu_xcalloc(nt, sizeof(double));
    for (size_t e = 0; e < nt; e++) dout[e] = tview_get(&P.dout, (int64_t)e);
    double *g[5];
    for (int t = 0; t < 5; t++) g[t] = tu_xcalloc(t < 3 ? nt : np, sizeof(double));
    ref64_bwd(&P.p, g[0], g[1], g[2], g[3], g[4]);
    const tview *vs[5] = {&P.q, &P.k, &P.v, &P.pk, &P.pq};
    const double h = 1.0 / 128.0;
    for (int t = 0; t < 5; t++) {
        const tview *v = vs[t];
        if (!v->a) continue;
        if (t == 3 && !(c->pos_att & DATTN_POS_C2P)) continue;
        if (t == 4 && !(c->pos_att & DATTN_POS_P2C)) continue;
        int64_t n = tview_numel(v);
        double gmax = 0.0, emax = 0.0;
        int64_t worst = -1;
        for (int64_t e = 0; e < n; e++) gmax = fmax(gmax, fabs(g[t][e]));
        for (int64_t e = 0; e < n; e++) {
            double x = tview_get(v, e), d[2];
            for (int s = 0; s < 2; s++) {
                double hs = s ? h / 2 : h;
                tview_set(v, e, x + hs);
                double fp = objective(&P, out, dout, nt);
                tview_set(v, e, x - hs);
                double fm = objective(&P, out, dout, nt);
                d[s] = (fp - fm) / (2.0 * hs);
            }
            tview_set(v, e, x);
            double fd = (4.0 * d[1] - d[0]) / 3.0, err = fabs(fd - g[t][e]);
            if (err > emax) emax = err, worst = e;
        }
        tu_check(emax <= 1e-9 * fmax(gmax, 1e-3),
                 "%s: ref64_bwd %s vs finite differences: max |err| %.3g at [%lld] (max |grad| %.3g)",
                 P.name, v->name, emax, (long long)worst, gmax);
        tu_log("%s %s: fd max err %.3g, max |grad| %.3g\n", P.name, v->name, emax, gmax);
    }
    for (int t = 0; t < 5; t++) free(g[t]);
    free(out);
    free(dout);
    tprob_free(&P);
}

static tcase tiny(int64_t B, int64_t L, int64_t H, int64_t D, int pos, int pb, int M)
{
    tcase c;
    memset(&c, 0, sizeof c);
    c.dtype = DATTN_F32;
    c.pos_att = pos;
    c.pb = pb, c.M = M;
    c.B = B, c.L = L, c.H = H, c.D = D;
    return c;
}

static void test_fd(void)
{
    tcase c = tiny(2, 6, 2, 3, 3, 4, 8); /* log buckets: mid 2, saturating inside L */
    c.mask = MK_HOLES;
    fd_case(&c);
    c = tiny(3, 5, 1, 4, 3, 0, 3); /* linear, clamped at |r| >= 3 */
    c.mask = MK_MIXED;
    fd_case(&c);
    c = tiny(1, 7, 2, 3, DATTN_POS_C2P, 6, 16);
    c.mask = MK_LEFT;
    fd_case(&c);
    c = tiny(1, 7, 2, 3, DATTN_POS_P2C, 6, 16);
    c.mask = MK_RIGHT;
    fd_case(&c);
    c = tiny(2, 5, 1, 3, 0, 256, 512);
    c.mask = MK_EMPTY;
    fd_case(&c);
    c = tiny(2, 6, 2, 2, 3, 4, 8);
    c.mask = MK_HOLES;
    c.dropout = 0.3f;
    fd_case(&c);
    static const int64_t lens[4] = {4, 0, 6, 1};
    c = tiny(4, 6, 2, 3, 3, 4, 12);
    c.layout = DATTN_LAYOUT_PACKED;
    c.lens = lens;
    c.variant = LY_PADDED;
    fd_case(&c);
}

/* Sum over slots of dpk is zero. */
static void test_invariant(void)
{
    tcase c = tiny(2, tu_opt.quick ? 40 : 120, 2, 16, 3, 16, 64); /* saturates at |r| ~ 60 */
    c.mask = MK_MIXED;
    c.B = 6;
    c.bwd = 1;
    tprob P;
    tprob_init(&P, &c, &rng);
    int64_t H = c.H, S2 = 2 * P.S, D = c.D;
    size_t nt = (size_t)(P.ntok * H * D), np = (size_t)(H * S2 * D);
    double *r[5], *m[5], *sm[5];
    for (int t = 0; t < 5; t++) {
        r[t] = tu_xcalloc(t < 3 ? nt : np, sizeof(double));
        m[t] = tu_xcalloc(t < 3 ? nt : np, sizeof(double));
        sm[t] = tu_xcalloc(t < 3 ? nt : np, sizeof(double));
    }
    ref64_grads mg = {m[0], m[1], m[2], m[3], m[4]}, smg = {sm[0], sm[1], sm[2], sm[3], sm[4]};
    ref64_bwd_mag(&P.p, r[0], r[1], r[2], r[3], r[4], &mg, &smg);
    int logslots = 0; /* slots past the linear zone |r| <= mid = 8 */
    for (int64_t t = P.S + 9; t < S2; t++) logslots += r[3][t * D] != 0.0;
    tu_check(logslots > 0, "the invariant case reaches the log-bucket slots");
    double worst = 0.0;
    for (int64_t h = 0; h < H; h++)
        for (int64_t d = 0; d < D; d++) {
            double s = 0.0, msum = 0.0;
            for (int64_t t = 0; t < S2; t++) {
                s += r[3][(h * S2 + t) * D + d];
                msum += m[3][(h * S2 + t) * D + d];
            }
            worst = fmax(worst, fabs(s) / msum);
        }
    tu_check(worst <= 1e-12, "ref64: |sum_t dpk[h,t,d]| / sum_t mag = %.3g (want ~0)", worst);
    const char *isas[3];
    int n = tu_isas(isas);
    for (int f = 0; f < n; f++) {
        if (!tu_set_isa(isas[f])) continue;
        P.tag = isas[f];
        if (!tprob_fwd(&P, 0) || !tprob_bwd(&P, 0)) continue;
        int bad = 0;
        for (int64_t h = 0; h < H; h++)
            for (int64_t d = 0; d < D; d++) {
                double s = 0.0, tol = 0.0;
                for (int64_t t = 0; t < S2; t++) {
                    int64_t e = (h * S2 + t) * D + d;
                    s += tview_get(&P.dpk, e);
                    tol += tprob_bound(c.dtype, c.L, TOL_KIND_DS, r[3][e], m[3][e], sm[3][e]);
                }
                bad += !(fabs(s) <= tol);
            }
        tu_check(bad == 0, "%s %s: sum over slots of the library's dpk is not ~0 for %d (h, d)", P.name,
                 isas[f], bad);
    }
    tu_set_isa(NULL);
    for (int t = 0; t < 5; t++) {
        free(r[t]);
        free(m[t]);
        free(sm[t]);
    }
    tprob_free(&P);
}

/* ref64_fwd_row agrees with ref64_fwd; ZERO-mode padded rows are exactly 0 / -inf. */
static void test_rows(void)
{
    for (int lay = 0; lay < 2; lay++) {
        tcase c = tiny(6, 23, 2, 8, 3, 8, 32);
        c.mask = lay ? MK_NONE : MK_MIXED;
        c.layout = lay ? DATTN_LAYOUT_PACKED : DATTN_LAYOUT_PADDED;
        c.padrows = DATTN_PADROWS_ZERO;
        c.dropout = 0.2f;
        tprob P;
        tprob_init(&P, &c, &rng);
        size_t nt = (size_t)(P.ntok * c.H * c.D);
        double *o = tu_xcalloc(nt, sizeof(double)), *l = tu_xcalloc((size_t)(P.ntok * c.H), sizeof(double));
        ref64_fwd(&P.p, o, l);
        long bad = 0, zeros = 0;
        for (int64_t b = 0; b < c.B; b++)
            for (int64_t i = 0; i < P.lens[b]; i++)
                for (int64_t h = 0; h < c.H; h++) {
                    double row[8], lse;
                    ref64_fwd_row(&P.p, b, h, i, row, &lse);
                    int64_t base = lay ? ((int64_t)P.cu[b] + i) * c.H + h : (b * c.L + i) * c.H + h;
                    int64_t li = lay ? h * P.T + P.cu[b] + i : (b * c.H + h) * c.L + i;
                    for (int d = 0; d < 8; d++) bad += row[d] != o[base * 8 + d];
                    bad += !(lse == l[li]);
                    if (isinf(lse)) {
                        zeros++;
                        for (int d = 0; d < 8; d++) bad += row[d] != 0.0;
                        bad += lse != -INFINITY;
                    }
                }
        tu_check(bad == 0, "%s: ref64_fwd_row differs from ref64_fwd on %ld values", P.name, bad);
        if (!lay) tu_check(zeros > 0, "%s: the mixed mask has padded rows", P.name);
        free(o);
        free(l);
        tprob_free(&P);
    }
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, "test_fd");
    trng_seed(&rng, tu_opt.seed);
    test_fd();
    test_invariant();
    test_rows();
    return tu_finish();
}
