/* One checked attention problem (see tprob.h).
 *
 * The tolerance rule used by every comparison with ref64 (tprob_bound below, constants
 * in tprob.h) and its justification are documented at the top of test_sweep.c. */
#include "tprob.h"

#include "ref64.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ tolerances */

double tprob_fp32_floor(int64_t L) { return TOL_F32 * fmax(1.0, sqrt((double)L / 512.0)); }

double tprob_bound(int32_t dtype, int64_t L, int kind, double ref, double mag, double smag)
{
    double b = kind == TOL_KIND_OUT        ? TOL_B_OUT
               : kind == TOL_KIND_OUT_DROP ? TOL_B_OUT_DROP
               : kind == TOL_KIND_DV       ? TOL_B_DV
                                           : TOL_B_DS;
    return tu_eps(dtype) * (TOL_A * fabs(ref) + b * mag) +
           tprob_fp32_floor(L) * tu_eps(DATTN_F32) * smag + tu_tiny(dtype) +
           TOL_UNDERFLOW * fmax(1.0, (double)L);
}

double tprob_dv_p1_extra(int32_t dtype, double mag, double sdout)
{
    return TOL_B_DV_P1 * tu_eps(dtype) * mag + 0.5 * tu_tiny(dtype) * sdout;
}

double *tprob_dv_p1_sdout(const tprob *P)
{
    const int64_t HD = P->c.H * P->c.D, ntok = P->ntok;
    double *sd = (double *)tu_xcalloc((size_t)(ntok * HD > 0 ? ntok * HD : 1), sizeof(double));
    for (int64_t b = 0; b < P->c.B; b++) {
        const int packed = P->c.layout == DATTN_LAYOUT_PACKED;
        const int64_t t0 = packed ? P->cu[b] : b * P->c.L, t1 = packed ? P->cu[b + 1] : (b + 1) * P->c.L;
        for (int64_t hd = 0; hd < HD; hd++) {
            double s = 0.0;
            for (int64_t t = t0; t < t1; t++) s += fabs(tview_get(&P->dout, t * HD + hd));
            for (int64_t t = t0; t < t1; t++) sd[t * HD + hd] = s;
        }
    }
    return sd;
}

double tprob_bound_lse(int64_t L, double ref)
{
    return TOL_LSE * tu_eps(DATTN_F32) * fmax(1.0, sqrt((double)L / 512.0)) * (1.0 + fabs(ref));
}

/* ------------------------------------------------------------------ names */

const char *tu_mask_name(int m)
{
    static const char *const n[] = {"none", "ones", "right", "left", "holes", "empty", "single", "mixed"};
    return m >= 0 && m < MK_COUNT ? n[m] : "?";
}

const char *tu_variant_name(int v)
{
    static const char *const n[] = {"contig", "fused", "trans", "padded"};
    return v >= 0 && v < LY_COUNT ? n[v] : "?";
}

static const char *pos_name(int32_t pa)
{
    static const char *const n[] = {"none", "c2p", "p2c", "c2p+p2c"};
    return n[pa & 3];
}

/* ------------------------------------------------------------------ building */

enum { ST_CONTIG, ST_FUSED, ST_TRANS, ST_PAD };

static int new_arena(tprob *P)
{
    if (P->nar >= 16) abort();
    P->need[P->nar] = 0;
    return P->nar++;
}

static void mkview(tprob *P, tview *v, int ai, const char *name, int rank, const int64_t *e,
                   const int64_t *st, int64_t off_el, int32_t dtype)
{
    memset(v, 0, sizeof *v);
    v->a = &P->ar[ai];
    v->rank = rank;
    for (int k = 0; k < rank; k++) {
        v->ext[k] = e[k];
        v->stride[k] = st[k];
    }
    v->dtype = dtype;
    v->name = name;
    v->off = (size_t)off_el * tu_esize(dtype);
    size_t end = v->off + tview_span(v);
    if (end > P->need[ai]) P->need[ai] = end;
}

/* q/k/v/out/dout/grads: [B,L,H,D] or [T,H,D] in one of the storage styles; part = which
 * of the three fused views. */
static void mk_tok(tprob *P, tview *v, int ai, const char *name, int style, int part)
{
    const tcase *c = &P->c;
    int64_t B = c->B, L = c->L, H = c->H, D = c->D, T = P->T;
    int64_t e[4], st[4] = {0, 0, 0, 0}, off = 0;
    if (c->layout == DATTN_LAYOUT_PACKED) {
        e[0] = T, e[1] = H, e[2] = D;
        switch (style) {
        case ST_CONTIG: st[0] = H * D, st[1] = D, st[2] = 1; break;
        case ST_FUSED: st[0] = 3 * H * D, st[1] = D, st[2] = 1, off = part * H * D; break;
        case ST_TRANS: st[0] = D, st[1] = T * D, st[2] = 1; break;
        default: /* padding differs per tensor (part), so that no two share strides */
            st[1] = D + 3 + part, st[0] = H * st[1] + 5 + 2 * part, st[2] = 1, off = 1 + part % 2;
            break;
        }
        mkview(P, v, ai, name, 3, e, st, off, c->dtype);
    } else {
        e[0] = B, e[1] = L, e[2] = H, e[3] = D;
        switch (style) {
        case ST_CONTIG: st[0] = L * H * D, st[1] = H * D, st[2] = D, st[3] = 1; break;
        case ST_FUSED:
            st[0] = 3 * L * H * D, st[1] = 3 * H * D, st[2] = D, st[3] = 1, off = part * H * D;
            break;
        case ST_TRANS: st[0] = H * L * D, st[1] = D, st[2] = L * D, st[3] = 1; break;
        default: /* padding differs per tensor (part), so that no two share strides */
            st[3] = 1, st[2] = D + 3 + part, st[1] = H * st[2] + 5 + 2 * part,
            st[0] = L * st[1] + 7 + part, off = 1 + part % 2;
            break;
        }
        mkview(P, v, ai, name, 4, e, st, off, c->dtype);
    }
}

/* pk/pq/dpk/dpq: [H, 2S, D]; style ST_TRANS here means head stride 0 (inputs only). */
static void mk_pos(tprob *P, tview *v, int ai, const char *name, int style, int part)
{
    const tcase *c = &P->c;
    int64_t S2 = 2 * (int64_t)P->S, D = c->D;
    int64_t e[3] = {c->H, S2, D}, st[3], off = 0;
    switch (style) {
    case ST_CONTIG: st[0] = S2 * D, st[1] = D, st[2] = 1; break;
    case ST_FUSED: st[0] = 2 * S2 * D, st[1] = 2 * D, st[2] = 1, off = part * D; break;
    case ST_TRANS: st[0] = 0, st[1] = D, st[2] = 1; break;
    default: st[1] = D + 2 + part, st[0] = S2 * st[1] + 3 + part, st[2] = 1, off = 1 + part % 2; break;
    }
    mkview(P, v, ai, name, 3, e, st, off, c->dtype);
}

static void mk_lse(tprob *P, int ai, int style)
{
    const tcase *c = &P->c;
    if (c->layout == DATTN_LAYOUT_PACKED) {
        int64_t e[2] = {c->H, P->T}, st[2] = {P->T, 1}, off = 0;
        if (style == ST_PAD) st[0] = P->T + 3, off = 1;
        mkview(P, &P->lse, ai, "lse", 2, e, st, off, TU_F32RAW);
    } else {
        int64_t e[3] = {c->B, c->H, c->L}, st[3] = {c->H * c->L, c->L, 1}, off = 0;
        if (style == ST_PAD) st[2] = 1, st[1] = c->L + 3, st[0] = c->H * st[1] + 1, off = 1;
        mkview(P, &P->lse, ai, "lse", 3, e, st, off, TU_F32RAW);
    }
}

static uint8_t token_byte(trng *r)
{
    static const uint8_t vals[4] = {1, 2, 0x80, 0xFF}; /* any nonzero byte is a token */
    return vals[trng_int(r, 4)];
}

static void fill_mask(tprob *P, trng *r)
{
    const tcase *c = &P->c;
    int64_t B = c->B, L = c->L;
    for (int64_t b = 0; b < B; b++) {
        static const int mixed[6] = {MK_RIGHT, MK_LEFT, MK_HOLES, MK_EMPTY, MK_SINGLE, MK_ONES};
        int pat = c->mask;
        if (pat == MK_MIXED) pat = mixed[b % 6];
        else if (pat == MK_EMPTY) pat = b == 0 ? MK_EMPTY : MK_RIGHT;
        int64_t len = L > 1 ? 1 + trng_int(r, L - 1) : L; /* < L when L > 1 */
        int64_t single = L > 0 ? trng_int(r, L) : 0;
        for (int64_t i = 0; i < L; i++) {
            int tok;
            switch (pat) {
            case MK_ONES: tok = 1; break;
            case MK_RIGHT: tok = i < len; break;
            case MK_LEFT: tok = i >= L - len; break;
            case MK_HOLES: tok = trng_unif(r) < 0.7 || i == single; break;
            case MK_EMPTY: tok = 0; break;
            case MK_SINGLE: tok = i == single; break;
            default: tok = 1; break;
            }
            int64_t lin = b * L + i;
            tview_set(&P->mask, lin, tok ? token_byte(r) : 0);
        }
    }
}

static void fill(const tview *v, trng *r, double amp)
{
    int64_t n = tview_numel(v);
    for (int64_t e = 0; e < n; e++) tview_set(v, e, trng_sym(r, amp));
}

void tprob_init(tprob *P, const tcase *cin, trng *r)
{
    memset(P, 0, sizeof *P);
    P->c = *cin;
    tcase *c = &P->c;
    if (c->amp == 0.0) c->amp = 2.0;
    int packed = c->layout == DATTN_LAYOUT_PACKED;
    int c2p = (c->pos_att & DATTN_POS_C2P) != 0, p2c = (c->pos_att & DATTN_POS_P2C) != 0;
    P->S = c->pb > 0 ? c->pb : c->M;

    P->lens = (int64_t *)tu_xcalloc((size_t)(c->B + 1), sizeof(int64_t));
    if (packed) {
        P->cu = (int32_t *)tu_xcalloc((size_t)(c->B + 1), sizeof(int32_t));
        P->cu_snap = (int32_t *)tu_xcalloc((size_t)(c->B + 1), sizeof(int32_t));
        int64_t T = 0;
        for (int64_t b = 0; b < c->B; b++) {
            int64_t len;
            if (c->lens) len = c->lens[b];
            else if (trng_int(r, 5) == 0) len = 0;
            else len = trng_int(r, c->L + 1);
            P->lens[b] = len;
        }
        if (!c->lens && c->B > 0) P->lens[trng_int(r, c->B)] = c->L; /* the longest = L */
        for (int64_t b = 0; b < c->B; b++) {
            P->cu[b] = (int32_t)T;
            T += P->lens[b];
        }
        P->cu[c->B] = (int32_t)T;
        P->T = T;
        P->ntok = T;
    } else {
        for (int64_t b = 0; b < c->B; b++) P->lens[b] = c->L;
        P->ntok = c->B * c->L;
    }

    int v = c->variant;
    int tst = v == LY_CONTIG ? ST_CONTIG : v == LY_FUSED ? ST_FUSED : v == LY_TRANS ? ST_TRANS : ST_PAD;
    /* q, k, v */
    if (tst == ST_FUSED) {
        int a = new_arena(P);
        mk_tok(P, &P->q, a, "q", ST_FUSED, 0);
        mk_tok(P, &P->k, a, "k", ST_FUSED, 1);
        mk_tok(P, &P->v, a, "v", ST_FUSED, 2);
    } else {
        mk_tok(P, &P->q, new_arena(P), "q", tst, 0);
        mk_tok(P, &P->k, new_arena(P), "k", tst, 1);
        mk_tok(P, &P->v, new_arena(P), "v", tst, 2);
    }
    /* out, dout: transposed when the inputs are fused */
    int ost = tst == ST_FUSED ? ST_TRANS : tst;
    mk_tok(P, &P->out, new_arena(P), "out", ost, 3);
    mk_tok(P, &P->dout, new_arena(P), "dout", ost, 4);
    if (tst == ST_FUSED) {
        int a = new_arena(P);
        mk_tok(P, &P->dq, a, "dq", ST_FUSED, 0);
        mk_tok(P, &P->dk, a, "dk", ST_FUSED, 1);
        mk_tok(P, &P->dv, a, "dv", ST_FUSED, 2);
    } else {
        mk_tok(P, &P->dq, new_arena(P), "dq", tst, 5);
        mk_tok(P, &P->dk, new_arena(P), "dk", tst, 6);
        mk_tok(P, &P->dv, new_arena(P), "dv", tst, 7);
    }
    /* pk, pq (only for the terms that are on: the others stay NULL) */
    int pst = tst, dpst = tst == ST_TRANS ? ST_CONTIG : tst;
    if (tst == ST_FUSED && c2p && p2c) {
        int a = new_arena(P);
        mk_pos(P, &P->pk, a, "pk", ST_FUSED, 0);
        mk_pos(P, &P->pq, a, "pq", ST_FUSED, 1);
        int g = new_arena(P);
        mk_pos(P, &P->dpk, g, "dpk", ST_FUSED, 0);
        mk_pos(P, &P->dpq, g, "dpq", ST_FUSED, 1);
    } else {
        if (pst == ST_FUSED) pst = dpst = ST_CONTIG;
        if (c2p) {
            mk_pos(P, &P->pk, new_arena(P), "pk", pst, 0);
            mk_pos(P, &P->dpk, new_arena(P), "dpk", dpst, 0);
        }
        if (p2c) {
            mk_pos(P, &P->pq, new_arena(P), "pq", pst, 1);
            mk_pos(P, &P->dpq, new_arena(P), "dpq", dpst, 1);
        }
    }
    mk_lse(P, new_arena(P), tst == ST_PAD ? ST_PAD : ST_CONTIG);
    if (!packed && c->mask != MK_NONE) {
        int64_t e[2] = {c->B, c->L}, st[2] = {c->L, 1}, off = 0;
        if (tst == ST_PAD) st[0] = c->L + 5, off = 3;
        mkview(P, &P->mask, new_arena(P), "mask", 2, e, st, off, TU_U8);
    }
    for (int a = 0; a < P->nar; a++) tarena_alloc(&P->ar[a], P->need[a]);

    /* fresh inputs, never zeros; the gaps between elements stay NaN (0xFF bytes) */
    fill(&P->q, r, c->amp);
    fill(&P->k, r, c->amp);
    fill(&P->v, r, 2.0);
    if (c2p) fill(&P->pk, r, c->amp);
    if (p2c) fill(&P->pq, r, c->amp);
    fill(&P->dout, r, 1.0);
    if (P->mask.a) fill_mask(P, r);

    dattn_params *p = &P->p;
    dattn_params_init(p);
    p->dtype = c->dtype;
    p->layout = c->layout;
    p->pos_att = c->pos_att;
    p->position_buckets = c->pb;
    p->max_relative_positions = c->M;
    p->padded_rows = c->padrows;
    p->num_threads = c->threads;
    p->batch = c->B;
    p->seqlen = c->L;
    p->heads = c->H;
    p->head_dim = c->D;
    p->total_tokens = packed ? P->T : 0;
    p->q = tview_tensor(&P->q);
    p->k = tview_tensor(&P->k);
    p->v = tview_tensor(&P->v);
    if (c2p) p->pk = tview_tensor(&P->pk);
    if (p2c) p->pq = tview_tensor(&P->pq);
    if (P->mask.a) p->mask = tview_tensor(&P->mask);
    p->cu_seqlens = P->cu;
    p->out = tview_tensor(&P->out);
    if (!c->no_lse) p->lse = tview_tensor(&P->lse);
    p->dropout_p = c->dropout;
    p->dropout_seed = trng_u64(r);
    p->dropout_offset = trng_u64(r);
    p->dout = tview_tensor(&P->dout);
    p->dq = tview_tensor(&P->dq);
    p->dk = tview_tensor(&P->dk);
    p->dv = tview_tensor(&P->dv);
    if (c2p) p->dpk = tview_tensor(&P->dpk);
    if (p2c) p->dpq = tview_tensor(&P->dpq);

    snprintf(P->name, sizeof P->name,
             "[%s %s B=%lld L=%lld H=%lld D=%lld %s pb=%d M=%d mask=%s rows=%s %s drop=%g amp=%g thr=%d]",
             tu_dtype_name(c->dtype), packed ? "packed" : "padded", (long long)c->B,
             (long long)c->L, (long long)c->H, (long long)c->D, pos_name(c->pos_att), c->pb, c->M,
             packed ? "-" : tu_mask_name(c->mask), c->padrows == DATTN_PADROWS_ZERO ? "zero" : "hf",
             tu_variant_name(c->variant), (double)c->dropout, c->amp, c->threads);
}

void tprob_free(tprob *P)
{
    for (int t = 0; t < 4; t++) free(P->rf[t]);
    for (int t = 0; t < 15; t++) free(P->rb[t]);
    for (int a = 0; a < P->nar; a++) tarena_free(&P->ar[a]);
    if (P->ws.mem) tarena_free(&P->ws);
    free(P->cu);
    free(P->cu_snap);
    free(P->lens);
    memset(P, 0, sizeof *P);
}

/* ------------------------------------------------------------------ running */

static const char *NM(const tprob *P)
{
    static _Thread_local char buf[320];
    snprintf(buf, sizeof buf, "%s%s%s", P->name, P->tag ? " " : "", P->tag ? P->tag : "");
    return buf;
}

static int collect(const tview *const *vs, int n, tarena **out)
{
    int m = 0;
    for (int t = 0; t < n; t++) {
        if (!vs[t]->a) continue;
        int seen = 0;
        for (int u = 0; u < m; u++) seen |= out[u] == vs[t]->a;
        if (!seen) out[m++] = vs[t]->a;
    }
    return m;
}

static void prep_workspace(tprob *P, int is_bwd)
{
    size_t bytes = 0;
    dattn_status st = is_bwd ? dattn_bwd_workspace_size(&P->p, &bytes)
                             : dattn_fwd_workspace_size(&P->p, &bytes);
    tu_check(st == DATTN_OK, "%s: %s_workspace_size: %s", NM(P), is_bwd ? "bwd" : "fwd",
             dattn_last_error());
    if (P->ws.mem) tarena_free(&P->ws);
    P->p.workspace = NULL;
    P->p.workspace_size = 0;
    if (bytes > 0) {
        void *m = NULL;
        if (posix_memalign(&m, 256, bytes) != 0) abort();
        P->ws.mem = (unsigned char *)m;
        P->ws.bytes = bytes;
        tarena_poison(&P->ws);
        P->p.workspace = m;
        P->p.workspace_size = bytes;
    }
}

/* The checks shared by both directions around one call. */
static int checked_call(tprob *P, int is_bwd, const tview *const *in, int nin,
                        const tview *const *outs, int nout)
{
    tarena *ia[16], *oa[16];
    int ni = collect(in, nin, ia), no = collect(outs, nout, oa);
    for (int a = 0; a < no; a++) tarena_poison(oa[a]);
    for (int a = 0; a < ni; a++) tarena_snapshot(ia[a]);
    if (P->cu) memcpy(P->cu_snap, P->cu, sizeof(int32_t) * (size_t)(P->c.B + 1));
    dattn_status st;
    if (P->runner) {
        st = P->runner(P, is_bwd, P->runner_ctx);
    } else {
        prep_workspace(P, is_bwd);
        st = is_bwd ? dattn_bwd(&P->p) : dattn_fwd(&P->p);
    }
    const char *dir = is_bwd ? "bwd" : "fwd";
    if (!tu_check(st == DATTN_OK, "%s %s returned %s: %s", NM(P), dir,
                  dattn_status_string(st), dattn_last_error()))
        return 0;
    int ok = 1;
    for (int a = 0; a < ni; a++) {
        int same = tarena_unchanged(ia[a]);
        ok &= tu_check(same, "%s %s wrote into an input buffer (arena %d)", NM(P), dir, a);
    }
    if (P->cu)
        ok &= tu_check(!memcmp(P->cu, P->cu_snap, sizeof(int32_t) * (size_t)(P->c.B + 1)),
                       "%s %s changed cu_seqlens", NM(P), dir);
    for (int a = 0; a < no; a++) {
        size_t bad = 0;
        int clean = tarena_gaps_poisoned(oa[a], outs, nout, &bad);
        ok &= tu_check(clean, "%s %s wrote outside the output elements (byte %zu of a %zu-byte buffer)",
                       NM(P), dir, bad, oa[a]->bytes);
    }
    return ok;
}

/* Every element finite; returns the count of bad ones (reports the first). */
static int all_finite(tprob *P, const tview *v, const char *dir)
{
    int64_t n = tview_numel(v), bad = 0, first = -1;
    for (int64_t e = 0; e < n; e++)
        if (!isfinite(tview_get(v, e))) {
            if (first < 0) first = e;
            bad++;
        }
    tu_check(bad == 0, "%s %s: %lld of %lld elements of %s not written or not finite (first at %lld = %g)",
             NM(P), dir, (long long)bad, (long long)n, v->name, (long long)first,
             first >= 0 ? tview_get(v, first) : 0.0);
    return bad == 0;
}

/* |got - ref| <= bound for one element; updates *worst with err / bound. */
static int within(double got, double ref, double bound, double *worst)
{
    double err = fabs(got - ref);
    double r = err / bound;
    if (!(r <= *worst)) *worst = isnan(r) ? INFINITY : r;
    return err <= bound;
}

static int lse_ok(double got, double ref, int64_t L, double *worst)
{
    if (isinf(ref)) return got == ref;
    double err = fabs(got - ref), bound = tprob_bound_lse(L, ref);
    if (!(err / bound <= *worst)) *worst = isnan(err) ? INFINITY : err / bound;
    return err <= bound;
}

static int64_t nat_row(const tprob *P, int64_t b, int64_t i, int64_t h)
{
    if (P->c.layout == DATTN_LAYOUT_PACKED) return ((int64_t)P->cu[b] + i) * P->c.H + h;
    return (b * P->c.L + i) * P->c.H + h;
}

static int64_t nat_lse(const tprob *P, int64_t b, int64_t i, int64_t h)
{
    if (P->c.layout == DATTN_LAYOUT_PACKED) return h * P->T + P->cu[b] + i;
    return (b * P->c.H + h) * P->c.L + i;
}

static int cmp_rows(tprob *P, const double *ref, const double *mag, const double *smag,
                    const double *rlse,
                    int64_t b, int64_t h, int64_t i, int64_t *nbad)
{
    int64_t D = P->c.D, base = nat_row(P, b, i, h) * D;
    int ok = 1;
    for (int64_t d = 0; d < D; d++) {
        double got = tview_get(&P->out, base + d);
        double bound = tprob_bound(P->c.dtype, P->c.L, P->p.dropout_p > 0 ? TOL_KIND_OUT_DROP : TOL_KIND_OUT,
                                   ref[d], mag[d], smag[d]);
        if (!within(got, ref[d], bound, &P->worst_fwd)) {
            if (ok && *nbad < 3)
                printf("  out[b=%lld i=%lld h=%lld d=%lld] = %.9g, ref %.9g (|err| %.3g, bound %.3g)\n",
                       (long long)b, (long long)i, (long long)h, (long long)d, got, ref[d],
                       fabs(got - ref[d]), bound);
            ok = 0;
        }
    }
    if (P->p.lse.data) {
        double got = tview_get(&P->lse, nat_lse(P, b, i, h));
        if (!lse_ok(got, *rlse, P->c.L, &P->worst_lse)) {
            if (*nbad < 3)
                printf("  lse[b=%lld i=%lld h=%lld] = %.9g, ref %.9g\n", (long long)b,
                       (long long)i, (long long)h, got, *rlse);
            ok = 0;
        }
    }
    if (!ok) (*nbad)++;
    return ok;
}

int tprob_fwd(tprob *P, int check_ref)
{
    const tview *in[6] = {&P->q, &P->k, &P->v, &P->pk, &P->pq, &P->mask};
    const tview *outs[2] = {&P->out, &P->lse};
    int nout = P->p.lse.data ? 2 : 1;
    if (!checked_call(P, 0, in, 6, outs, nout)) return 0;
    int ok = all_finite(P, &P->out, "fwd");
    if (P->p.lse.data) {
        /* lse: finite everywhere except ZERO-mode padded rows, which are -inf */
        int64_t n = tview_numel(&P->lse), bad = 0;
        for (int64_t e = 0; e < n; e++) {
            double x = tview_get(&P->lse, e);
            if (!isfinite(x) && !(x == -INFINITY && P->c.padrows == DATTN_PADROWS_ZERO)) bad++;
        }
        ok &= tu_check(bad == 0, "%s fwd: %lld lse elements not written / not finite", NM(P),
                       (long long)bad);
    }
    if (!check_ref) return ok;

    const tcase *c = &P->c;
    int64_t D = c->D, H = c->H, nbad = 0, nrows = 0;
    if (c->rows <= 0) {
        if (!P->rf[0]) {
            size_t n = (size_t)(P->ntok * H * D);
            for (int t = 0; t < 3; t++) P->rf[t] = (double *)tu_xcalloc(n, sizeof(double));
            P->rf[3] = (double *)tu_xcalloc((size_t)(P->ntok * H), sizeof(double));
            ref64_fwd_mag(&P->p, P->rf[0], P->rf[3], P->rf[1], P->rf[2]);
        }
        double *ro = P->rf[0], *rm = P->rf[1], *rs = P->rf[2], *rl = P->rf[3];
        for (int64_t b = 0; b < c->B; b++)
            for (int64_t i = 0; i < P->lens[b]; i++)
                for (int64_t h = 0; h < H; h++) {
                    int64_t o = nat_row(P, b, i, h) * D;
                    cmp_rows(P, ro + o, rm + o, rs + o, rl + nat_lse(P, b, i, h), b, h, i, &nbad);
                    nrows++;
                }
    } else {
        /* sampled rows: tile edges and ends of every kind, then random ones */
        static const int64_t edges[] = {0, 1, 15, 16, 31, 32, 63, 64, 65, 127, 128, 129, 255, 256, 511, 512};
        trng r;
        trng_seed(&r, tu_opt.seed ^ 0x5EEDull ^ (uint64_t)c->L * 131u);
        double *ro = (double *)tu_xcalloc((size_t)D, sizeof(double));
        double *rm = (double *)tu_xcalloc((size_t)D, sizeof(double));
        double *rs = (double *)tu_xcalloc((size_t)D, sizeof(double));
        int64_t nedge = (int64_t)(sizeof edges / sizeof edges[0]);
        for (int s = 0; s < c->rows; s++) {
            int64_t b = trng_int(&r, c->B), h = trng_int(&r, H);
            int64_t tries = 0;
            while (P->lens[b] == 0 && tries++ < 64) b = trng_int(&r, c->B);
            int64_t n = P->lens[b];
            if (n == 0) continue;
            int64_t i;
            if (s < nedge) i = edges[s] < n ? edges[s] : n - 1 - (edges[s] % n);
            else if (s < nedge + 4) i = n - 1 - (s - nedge) % n;
            else i = trng_int(&r, n);
            double rl;
            ref64_fwd_row_mag(&P->p, b, h, i, ro, &rl, rm, rs);
            cmp_rows(P, ro, rm, rs, &rl, b, h, i, &nbad);
            nrows++;
        }
        free(ro);
        free(rm);
        free(rs);
    }
    ok &= tu_check(nbad == 0, "%s fwd: %lld of %lld rows differ from ref64 (worst err/bound %.3g)",
                   NM(P), (long long)nbad, (long long)nrows, P->worst_fwd);
    tu_log("  %s fwd: worst err/bound out %.3g lse %.3g\n", NM(P), P->worst_fwd, P->worst_lse);
    return ok;
}

static int cmp_grad(tprob *P, const tview *v, int kind, const double *ref, const double *mag,
                    const double *smag, const double *p1_sdout, double *worst)
{
    int64_t n = tview_numel(v), bad = 0;
    for (int64_t e = 0; e < n; e++) {
        double got = tview_get(v, e);
        double bound = tprob_bound(P->c.dtype, P->c.L, kind, ref[e], mag[e], smag[e]);
        if (p1_sdout) {
            /* (logged: how much of the fp32-P bound alone this dv uses) */
            const double r0 = fabs(got - ref[e]) / bound;
            if (r0 > P->worst_dv_fp32p) P->worst_dv_fp32p = r0;
            bound += tprob_dv_p1_extra(P->c.dtype, mag[e], p1_sdout[e]);
        }
        if (!within(got, ref[e], bound, worst)) {
            if (bad < 3)
                printf("  %s[%lld] = %.9g, ref %.9g (|err| %.3g, bound %.3g)\n", v->name,
                       (long long)e, got, ref[e], fabs(got - ref[e]), bound);
            bad++;
        }
    }
    return tu_check(bad == 0, "%s bwd: %lld of %lld elements of %s differ from ref64 (worst err/bound %.3g)",
                    NM(P), (long long)bad, (long long)n, v->name, *worst);
}

int tprob_bwd(tprob *P, int check_ref)
{
    const tview *in[9] = {&P->q, &P->k, &P->v, &P->pk, &P->pq, &P->mask, &P->out, &P->lse, &P->dout};
    const tview *outs[5] = {&P->dq, &P->dk, &P->dv, &P->dpk, &P->dpq};
    if (!checked_call(P, 1, in, 9, outs, 5)) return 0;
    int ok = 1;
    for (int t = 0; t < 5; t++)
        if (outs[t]->a) ok &= all_finite(P, outs[t], "bwd");
    if (!check_ref) return ok;
    const tcase *c = &P->c;
    size_t nt = (size_t)(P->ntok * c->H * c->D), np = (size_t)(c->H * 2 * P->S * c->D);
    double **r = P->rb, **m = P->rb + 5, **sm = P->rb + 10;
    if (!r[0]) {
        for (int t = 0; t < 5; t++) {
            size_t n = t < 3 ? nt : np;
            r[t] = (double *)tu_xcalloc(n, sizeof(double));
            m[t] = (double *)tu_xcalloc(n, sizeof(double));
            sm[t] = (double *)tu_xcalloc(n, sizeof(double));
        }
        ref64_grads mg = {m[0], m[1], m[2], m[3], m[4]}, smg = {sm[0], sm[1], sm[2], sm[3], sm[4]};
        ref64_bwd_mag(&P->p, r[0], r[1], r[2], r[3], r[4], &mg, &smg);
    }
    double *sd = P->dv_p1 ? tprob_dv_p1_sdout(P) : NULL;
    for (int t = 0; t < 5; t++)
        if (outs[t]->a) ok &= cmp_grad(P, outs[t], t == 2 ? TOL_KIND_DV : TOL_KIND_DS, r[t], m[t], sm[t],
                                       t == 2 ? sd : NULL, &P->worst_bwd[t]);
    free(sd);
    tu_log("  %s bwd: worst err/bound dq %.3g dk %.3g dv %.3g dpk %.3g dpq %.3g\n", NM(P),
           P->worst_bwd[0], P->worst_bwd[1], P->worst_bwd[2], P->worst_bwd[3], P->worst_bwd[4]);
    if (P->dv_p1)
        tu_log("  %s bwd: dv from P rounded once: worst err / (the fp32-P dv bound) %.3g\n", NM(P),
               P->worst_dv_fp32p);
    return ok;
}

int tprob_locate(const tprob *P, const void *ptr, size_t *off)
{
    const unsigned char *c = (const unsigned char *)ptr;
    for (int a = 0; a < P->nar; a++)
        if (c >= P->ar[a].mem && c < P->ar[a].mem + P->ar[a].bytes) {
            if (off) *off = (size_t)(c - P->ar[a].mem);
            return a;
        }
    return -1;
}

static unsigned char *bits_of(const tview *const *vs, int n, size_t *len)
{
    size_t tot = 0;
    for (int t = 0; t < n; t++)
        if (vs[t]->a) tot += (size_t)tview_numel(vs[t]) * tview_esize(vs[t]);
    unsigned char *buf = (unsigned char *)tu_xmalloc(tot), *w = buf;
    for (int t = 0; t < n; t++)
        if (vs[t]->a) {
            tview_copy_bits(vs[t], w);
            w += (size_t)tview_numel(vs[t]) * tview_esize(vs[t]);
        }
    *len = tot;
    return buf;
}

unsigned char *tprob_fwd_bits(const tprob *P, size_t *n)
{
    const tview *vs[2] = {&P->out, &P->lse};
    return bits_of(vs, P->p.lse.data ? 2 : 1, n);
}

unsigned char *tprob_bwd_bits(const tprob *P, size_t *n) { return tprob_bwd_bits_of(P, 31u, n); }

unsigned char *tprob_bwd_bits_of(const tprob *P, unsigned which, size_t *n)
{
    const tview *all[5] = {&P->dq, &P->dk, &P->dv, &P->dpk, &P->dpq};
    const tview *vs[5];
    int k = 0;
    for (int t = 0; t < 5; t++)
        if (which >> t & 1u) vs[k++] = all[t];
    return bits_of(vs, k, n);
}

/* ------------------------------------------------------------------ shared test pieces */

/* A v3-base-like case (c2p|p2c, 256 buckets, max 512, HF padded rows, padded contiguous
 * layout, no mask, backward on): the starting point the sweeps modify. */
tcase tprob_case_v3(int32_t dtype, int64_t B, int64_t L, int64_t H, int64_t D)
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

/* Dropout mask read-back (test_dropout.c on the CPU, test_cuda_bwd.c on the GPU). */

int tprob_keep_rate_ok(long kept, long n, double p)
{
    double sd = sqrt(p * (1.0 - p) / (double)n), r = (double)kept / (double)n;
    return fabs(r - (1.0 - p)) <= 5.0 * sd;
}

/* Sets k_j = k_0 (per b, h), v_j = e_j, dout_i = e_i. */
void tprob_dropout_shape_inputs(tprob *P)
{
    int64_t H = P->c.H, D = P->c.D;
    for (int64_t b = 0; b < P->c.B; b++) {
        int64_t base = P->c.layout == DATTN_LAYOUT_PACKED ? P->cu[b] : b * P->c.L;
        for (int64_t j = 0; j < P->lens[b]; j++)
            for (int64_t h = 0; h < H; h++)
                for (int64_t d = 0; d < D; d++) {
                    int64_t e = ((base + j) * H + h) * D + d;
                    tview_set(&P->k, e, tview_get(&P->k, (base * H + h) * D + d));
                    tview_set(&P->v, e, d == j ? 1.0 : 0.0);
                    tview_set(&P->dout, e, d == j ? 1.0 : 0.0);
                }
    }
}

static int tok(const tprob *P, int64_t b, int64_t i)
{
    return !P->mask.a || tview_get(&P->mask, b * P->c.L + i) != 0.0;
}

void tprob_dropout_check_masks(tprob *P, int which, double unclear_tol, unsigned char *bits, long *nbits)
{
    int64_t H = P->c.H, D = P->c.D;
    double p = P->p.dropout_p, ds = 1.0 / (1.0 - (double)P->p.dropout_p);
    long bad = 0, unclear = 0, kept = 0, n = 0;
    for (int64_t b = 0; b < P->c.B; b++) {
        int64_t base = P->c.layout == DATTN_LAYOUT_PACKED ? P->cu[b] : b * P->c.L, len = P->lens[b];
        int64_t nv = 0;
        for (int64_t j = 0; j < len; j++) nv += tok(P, b, j);
        for (int64_t h = 0; h < H; h++)
            for (int64_t i = 0; i < len; i++) {
                int prow = !tok(P, b, i);
                double denom = prow ? (double)len : (double)nv;
                for (int64_t j = 0; j < len; j++) {
                    if (!prow && !tok(P, b, j)) continue; /* masked key: probability 0 */
                    double x = which == 0 ? tview_get(&P->out, ((base + i) * H + h) * D + j)
                                          : tview_get(&P->dv, ((base + j) * H + h) * D + i);
                    double k = x * denom / ds;
                    int kk = k > 0.5;
                    if (fabs(k - kk) > unclear_tol) unclear++;
                    int e = dattn_dropout_keep(P->p.dropout_seed, P->p.dropout_offset, (float)p, b, h, H, i, j);
                    if (kk != e && bad++ < 3)
                        printf("  %s mask (b=%lld h=%lld i=%lld j=%lld): kernel %d, dattn_dropout_keep %d (%.6g)\n",
                               which ? "backward" : "forward", (long long)b, (long long)h, (long long)i,
                               (long long)j, kk, e, k);
                    if (bits) bits[*nbits + n] = (unsigned char)kk;
                    kept += kk;
                    n++;
                }
            }
    }
    const char *w = which ? "backward (dv)" : "forward (out)";
    const char *tag = P->tag ? P->tag : "";
    tu_check(unclear == 0, "%s%s: %ld %s values are neither kept nor dropped", P->name, tag, unclear, w);
    tu_check(bad == 0, "%s%s: the %s dropout mask differs from dattn_dropout_keep on %ld of %ld entries",
             P->name, tag, w, bad, n);
    tu_check(n > 0 && tprob_keep_rate_ok(kept, n, p), "%s%s: %s keep rate %.4f, expected %.4f", P->name, tag, w,
             n ? (double)kept / (double)n : 0.0, 1.0 - p);
    if (nbits) *nbits += n;
}
