/* Packed (varlen) == padded on the valid rows: the same sequences given both ways —
 * packed [T,H,D] with cu_seqlens, and padded [B,L,H,D] with a right-padding mask of the
 * same lengths (empty sequences included: all padding in the padded layout) — must give
 * the same forward on every token row and the same backward (ZERO padded rows, so that
 * padded rows add nothing to dv; dpk/dpq compared whole). Both calls are also checked
 * against ref64 on their own (tprob.c); here the two results are compared with each
 * other within the sum of their two tolerances, and bitwise equality is reported.
 *
 * Usage: test_packed [--seed N] [--quick] [--verbose] [--isa NAME]
 */
#include "ref64.h"
#include "tprob.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static trng rng;

static void copy_tok(const tprob *pad, const tview *src, const tprob *pk, const tview *dst)
{
    int64_t H = pad->c.H, D = pad->c.D, L = pad->c.L;
    for (int64_t b = 0; b < pad->c.B; b++)
        for (int64_t i = 0; i < pk->lens[b]; i++)
            for (int64_t hd = 0; hd < H * D; hd++)
                tview_set(dst, ((int64_t)pk->cu[b] + i) * H * D + hd,
                          tview_get(src, (b * L + i) * H * D + hd));
}

static void copy_all(const tview *src, const tview *dst)
{
    int64_t n = tview_numel(src);
    for (int64_t e = 0; e < n; e++) tview_set(dst, e, tview_get(src, e));
}

/* Compares view a (padded) and b (packed) on the valid rows. */
static void cmp_tok(const tprob *A, const tview *a, const tprob *Bp, const tview *b,
                    const double *ref, const double *mag, const double *smag, int kind,
                    const char *what, int *bitwise)
{
    int64_t H = A->c.H, D = A->c.D, L = A->c.L, bad = 0;
    for (int64_t s = 0; s < A->c.B; s++)
        for (int64_t i = 0; i < Bp->lens[s]; i++)
            for (int64_t hd = 0; hd < H * D; hd++) {
                int64_t ea = (s * L + i) * H * D + hd, eb = ((int64_t)Bp->cu[s] + i) * H * D + hd;
                double x = tview_get(a, ea), y = tview_get(b, eb);
                if (x != y) *bitwise = 0;
                double tol = 2.0 * tprob_bound(A->c.dtype, L, kind, ref[eb], mag[eb], smag[eb]);
                if (!(fabs(x - y) <= tol)) {
                    if (bad < 3)
                        printf("  %s seq %lld pos %lld [%lld]: padded %.9g packed %.9g\n", what,
                               (long long)s, (long long)i, (long long)hd, x, y);
                    bad++;
                }
            }
    tu_check(bad == 0, "%s vs %s: %s differs on %lld elements", A->name, Bp->name, what, (long long)bad);
}

static void cmp_pos(const tprob *A, const tview *a, const tview *b, const double *ref,
                    const double *mag, const double *smag, const char *what, int *bitwise)
{
    int64_t n = tview_numel(a), bad = 0;
    for (int64_t e = 0; e < n; e++) {
        double x = tview_get(a, e), y = tview_get(b, e);
        if (x != y) *bitwise = 0;
        if (!(fabs(x - y) <= 2.0 * tprob_bound(A->c.dtype, A->c.L, TOL_KIND_DS, ref[e], mag[e], smag[e]))) bad++;
    }
    tu_check(bad == 0, "%s: %s differs between padded and packed on %lld elements", A->name, what,
             (long long)bad);
}

static void run(int32_t dtype, int64_t L, int64_t H, int64_t D, const int64_t *lens, int64_t B,
                float drop, int variant, int pos)
{
    tcase c;
    memset(&c, 0, sizeof c);
    c.dtype = dtype;
    c.pos_att = pos;
    c.pb = 256, c.M = 512;
    c.B = B, c.L = L, c.H = H, c.D = D;
    c.padrows = DATTN_PADROWS_ZERO;
    c.dropout = drop;
    c.variant = variant;
    c.bwd = 1;
    c.mask = MK_ONES;
    tprob A, Q;
    tprob_init(&A, &c, &rng);
    c.layout = DATTN_LAYOUT_PACKED;
    c.mask = MK_NONE;
    c.lens = lens;
    /* a different memory layout, same values (not LY_TRANS: its pk/pq are shared by all
     * heads, so they cannot hold A's per-head tables) */
    c.variant = variant == LY_CONTIG ? LY_PADDED : LY_CONTIG;
    tprob_init(&Q, &c, &rng);
    /* right-padding mask of the packed lengths; the packed data = the padded valid rows */
    for (int64_t b = 0; b < B; b++)
        for (int64_t i = 0; i < L; i++) tview_set(&A.mask, b * L + i, i < lens[b] ? 1 : 0);
    copy_tok(&A, &A.q, &Q, &Q.q);
    copy_tok(&A, &A.k, &Q, &Q.k);
    copy_tok(&A, &A.v, &Q, &Q.v);
    copy_tok(&A, &A.dout, &Q, &Q.dout);
    if (pos & DATTN_POS_C2P) copy_all(&A.pk, &Q.pk);
    if (pos & DATTN_POS_P2C) copy_all(&A.pq, &Q.pq);
    Q.p.dropout_seed = A.p.dropout_seed;
    Q.p.dropout_offset = A.p.dropout_offset;

    const char *isas[3];
    int n = tu_isas(isas);
    for (int f = 0; f < n; f++) {
        if (!tu_set_isa(isas[f])) continue;
        A.tag = Q.tag = isas[f];
        if (!tprob_fwd(&A, 1) || !tprob_fwd(&Q, 1)) continue;
        /* reference values and magnitudes of the packed problem */
        int64_t T = Q.T;
        size_t nt = (size_t)(T * H * D), np = (size_t)(H * 2 * Q.S * D);
        double *ro = tu_xcalloc(nt, sizeof(double)), *rm = tu_xcalloc(nt, sizeof(double)),
               *rs = tu_xcalloc(nt, sizeof(double));
        ref64_fwd_mag(&Q.p, ro, NULL, rm, rs);
        int bit = 1;
        cmp_tok(&A, &A.out, &Q, &Q.out, ro, rm, rs, TOL_KIND_OUT, "out", &bit);
        tu_log("%s: forward padded == packed bitwise: %s\n", A.name, bit ? "yes" : "no");
        if (tprob_bwd(&A, 1) && tprob_bwd(&Q, 1)) {
            double *r[5], *m[5], *s[5];
            for (int t = 0; t < 5; t++) {
                size_t k = t < 3 ? nt : np;
                r[t] = tu_xcalloc(k, sizeof(double));
                m[t] = tu_xcalloc(k, sizeof(double));
                s[t] = tu_xcalloc(k, sizeof(double));
            }
            ref64_grads mg = {m[0], m[1], m[2], m[3], m[4]}, sg = {s[0], s[1], s[2], s[3], s[4]};
            ref64_bwd_mag(&Q.p, r[0], r[1], r[2], r[3], r[4], &mg, &sg);
            bit = 1;
            cmp_tok(&A, &A.dq, &Q, &Q.dq, r[0], m[0], s[0], TOL_KIND_DS, "dq", &bit);
            cmp_tok(&A, &A.dk, &Q, &Q.dk, r[1], m[1], s[1], TOL_KIND_DS, "dk", &bit);
            cmp_tok(&A, &A.dv, &Q, &Q.dv, r[2], m[2], s[2], TOL_KIND_DV, "dv", &bit);
            if (pos & DATTN_POS_C2P) cmp_pos(&A, &A.dpk, &Q.dpk, r[3], m[3], s[3], "dpk", &bit);
            if (pos & DATTN_POS_P2C) cmp_pos(&A, &A.dpq, &Q.dpq, r[4], m[4], s[4], "dpq", &bit);
            tu_log("%s: backward padded == packed bitwise: %s\n", A.name, bit ? "yes" : "no");
            for (int t = 0; t < 5; t++) {
                free(r[t]);
                free(m[t]);
                free(s[t]);
            }
        }
        free(ro);
        free(rm);
        free(rs);
    }
    tu_set_isa(NULL);
    tprob_free(&A);
    tprob_free(&Q);
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, "test_packed");
    trng_seed(&rng, tu_opt.seed);
    static const int64_t l1[] = {5, 0, 17, 1, 17, 9}, l2[] = {129, 0, 64, 65, 3},
                         l3[] = {0, 0, 31}, l4[] = {300, 257, 0, 1};
    run(DATTN_F32, 17, 2, 32, l1, 6, 0.0f, LY_CONTIG, 3);
    run(DATTN_BF16, 17, 3, 16, l1, 6, 0.3f, LY_FUSED, 3);
    run(DATTN_F16, 31, 1, 8, l3, 3, 0.0f, LY_TRANS, DATTN_POS_P2C);
    if (!tu_opt.quick) {
        run(DATTN_F32, 129, 2, 64, l2, 5, 0.0f, LY_PADDED, 3);
        run(DATTN_F16, 129, 2, 32, l2, 5, 0.1f, LY_CONTIG, DATTN_POS_C2P);
        run(DATTN_BF16, 300, 1, 32, l4, 4, 0.0f, LY_FUSED, 3);
    }
    return tu_finish();
}
