/* Shared by the CUDA kernels and their launcher: the kernel argument blocks (passed by
 * value as __grid_constant__ parameters), the slot lookup, addressing, element loads and
 * stores, and the dropout RNG. */
#ifndef DATTN_CUDA_COMMON_CUH
#define DATTN_CUDA_COMMON_CUH

#include <stdint.h>

#include "ptx.cuh"

/* Log-zone slot entries carried in the argument block (both signs together). v2/v3
 * (position_buckets 256, M 512) need 766; configurations needing more are UNSUPPORTED
 * on the GPU (the Python layer falls back). */
#define DATTN_CUDA_TAB_MAX 1024

/* The ws forward's variants (dattn_launch_fwd_ws's var, bits; launch.cu's DATTN_CUDA_FWD pins):
 * KC a saturated tile's column constants through the score product (wsk), GR a band tile's G
 * of its window's second half kept from the previous band tile (wsg; both: wskg), PS
 * persistent CTAs over the units (wsp: unmasked calls, neither KC nor GR). */
enum { FWS_VAR_KC = 1, FWS_VAR_GR = 2, FWS_VAR_PS = 4, FWS_VAR_TE = 8 };

/* TE (with KC and GR: wskgt; padded unmasked calls with position terms): the ring blocks by TMA
 * from the expanded tables E_pk[h][u] = pk[h][slot(u - off)], E_pq the same of pq (u in 0..rows-1),
 * which a prologue kernel writes into the workspace. Every r = i - j a band tile's window reads
 * lies in (-Rc - 190, Rc + 191), Rc = min(R, L + 64) (NOTES, 2026-12-03, "ring blocks by TMA"):
 * rows = 2 Rc + 384, off = Rc + 192. */
static inline int dattn_fws_exp_rc(int R, int L) { return R < L + 64 ? R : L + 64; }
static inline int dattn_fws_exp_rows(int R, int L) { return 2 * dattn_fws_exp_rc(R, L) + 384; }
static inline int dattn_fws_exp_off(int R, int L) { return dattn_fws_exp_rc(R, L) + 192; }
/* Whether a call of the ws forward with variant bits var takes TE: KC, GR and TE in var, not PS, both
 * position terms (pos), padded, unmasked (fwd_ws_d64_sm90.cu's fws_pick; launch.cu's layout_ws sizes
 * the expanded tables by the same test). */
static inline int dattn_fws_te(int var, int packed, int masked, int pos)
{
    return (var & FWS_VAR_TE) && (var & FWS_VAR_KC) && (var & FWS_VAR_GR) && !(var & FWS_VAR_PS) && pos && !packed &&
           !masked;
}

/* Everything a forward kernel reads. Strides are in elements. Row (b, token t, head h)
 * of q lives at q + b*q_sb + (tok0 + t)*q_sl + h*q_sh, where tok0 = cu[b] in the packed
 * layout (q_sb = 0 there) and 0 in the padded one. */
typedef struct dattn_fwd_args {
    const void *q, *k, *v, *pk, *pq;
    void *out;
    float *lse;              /* may be NULL */
    const uint8_t *mask;     /* padded only; NULL = all valid */
    const int32_t *cu;       /* packed only */
    const float *kps;        /* workspace: k_j . pq[sat_pos / sat_neg] planes, or NULL */
    uint16_t *pexp;          /* workspace: the ws forward's expanded tables (FWS_VAR_TE), or NULL */
    const float *vmean;      /* workspace: mean of v over all L keys, [B*H][D] fp32, or NULL */
    const int32_t *kvr;      /* workspace: [B][2] first valid key, last valid key + 1, or NULL */
    int64_t q_sb, q_sl, q_sh;
    int64_t k_sb, k_sl, k_sh;
    int64_t v_sb, v_sl, v_sh;
    int64_t o_sb, o_sl, o_sh;
    int64_t l_sb, l_sh, l_sl; /* lse: batch (0 packed), head, token */
    int64_t m_sb, m_sl;
    int64_t pk_sh, pk_ss, pq_sh, pq_ss;
    int64_t kps_ld;           /* length of one kps plane (tokens) */
    int32_t B, H, L, D;       /* L: padded length / max_seqlen */
    int32_t packed, c2p, p2c, hf;
    int32_t S, lin, R, sat_pos, sat_neg, nlog; /* slot map (see dev_slot) */
    float sl2;                /* log2(e) / scale */
    float logL;               /* logf(L): lse of HF padded rows */
    /* dropout (dattn.h DROPOUT): keep iff 16-bit Philox half >= drop_thr; drop_thr 0 = off */
    uint32_t drop_thr, drop_k0, drop_k1, drop_c3; /* threshold, key, counter word 3 */
    float drop_scale;         /* 1 / (1 - dropout_p) */
    uint16_t tab[DATTN_CUDA_TAB_MAX]; /* slot(r), lin < r < R at [r-lin-1]; -R < r < -lin at
                                         [nlog + (-r)-lin-1] */
} dattn_fwd_args;

/* slot(i - j): arithmetic in the linear zone, the log-zone table (a shared-memory copy of
 * a.tab), the saturated constants beyond R. */
DATTN_DEV int dev_slot(const dattn_fwd_args &a, const uint16_t *tab, int r)
{
    if (r >= a.R) return a.sat_pos;
    if (r <= -a.R) return a.sat_neg;
    int ar = r < 0 ? -r : r;
    if (ar <= a.lin) return r + a.S;
    return tab[(r < 0 ? a.nlog : 0) + ar - a.lin - 1];
}

/* Per-sequence facts of sequence b: first token and length. */
DATTN_DEV void dev_seq(const dattn_fwd_args &a, int b, int &tok0, int &len)
{
    if (a.packed) {
        tok0 = a.cu[b];
        len = a.cu[b + 1] - tok0;
    } else {
        tok0 = 0;
        len = a.L;
    }
}

/* DT: 0 fp32, 1 fp16, 2 bf16 */
template <int DT>
DATTN_DEV float ld_el(const void *p, int64_t i)
{
    if (DT == 0) return ((const float *)p)[i];
    return h2f<DT == 2>(((const uint16_t *)p)[i]);
}

template <int DT>
DATTN_DEV void st_el(void *p, int64_t i, float x)
{
    if (DT == 0) ((float *)p)[i] = x;
    else ((uint16_t *)p)[i] = f2h<DT == 2>(x);
}

/* Philox4x32-10, exactly dattn_philox4x32() of src/dattn.c. Unrolled, each 32 x 32 -> 64-bit
 * product one wide multiply (IMAD.WIDE.U32: hi and lo in one instruction): ~7 instructions
 * per round instead of the rolled loop's 12 (counter, branch, moves, separate hi / lo). */
DATTN_DEV void dev_philox(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                          uint32_t k1, uint32_t &o0, uint32_t &o1, uint32_t &o2, uint32_t &o3)
{
#pragma unroll
    for (int round = 0; round < 10; round++) {
        const unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
        const uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        const uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c1 = lo1;
        c3 = lo0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    o0 = c0;
    o1 = c1;
    o2 = c2;
    o3 = c3;
}

/* The 8 keep bits of one Philox call (dattn.h DROPOUT: keys 8 (j >> 3) + 0..7): bit
 * 2 w + s = 16-bit half s of word w >= thr, i.e. bit (j & 7) is key j. */
DATTN_DEV uint32_t dev_keep8(uint32_t o0, uint32_t o1, uint32_t o2, uint32_t o3, uint32_t thr)
{
    return (uint32_t)((o0 & 0xFFFFu) >= thr) | ((uint32_t)((o0 >> 16) >= thr) << 1) |
           ((uint32_t)((o1 & 0xFFFFu) >= thr) << 2) | ((uint32_t)((o1 >> 16) >= thr) << 3) |
           ((uint32_t)((o2 & 0xFFFFu) >= thr) << 4) | ((uint32_t)((o2 >> 16) >= thr) << 5) |
           ((uint32_t)((o3 & 0xFFFFu) >= thr) << 6) | ((uint32_t)((o3 >> 16) >= thr) << 7);
}

/* Keep decision of attention probability (b, h, i, j) (positions inside the sequence),
 * as dattn_dropout_keep(): counter (j >> 3, i, b*H + h, lo32(offset)), bit j & 7 of that
 * call's dev_keep8 (16-bit half j & 1 of word (j >> 1) & 3). */
DATTN_DEV int dev_keep(const dattn_fwd_args &a, int b, int h, int i, int j)
{
    uint32_t o0, o1, o2, o3;
    dev_philox((uint32_t)j >> 3, (uint32_t)i, (uint32_t)b * (uint32_t)a.H + (uint32_t)h, a.drop_c3,
               a.drop_k0, a.drop_k1, o0, o1, o2, o3);
    return (int)((dev_keep8(o0, o1, o2, o3, a.drop_thr) >> (j & 7)) & 1u);
}

/* Everything a backward kernel reads besides the forward block: dout, the gradients,
 * their strides and the workspace regions (see launch.cu, bwd workspace). Row (b, i, h)
 * of a workspace row array sits at ws_row(): (b*H + h)*L + i padded, h*T + tok0 + i
 * packed. */
typedef struct dattn_bwd_args {
    dattn_fwd_args f;         /* q, k, v, pk, pq, out, lse, mask, cu, slot map, dropout */
    const void *dout;
    void *dq, *dk, *dv, *dpk, *dpq;
    float *di;                /* [rows] D_i = dout_i . out_i */
    float *rsat;              /* [rows][2] row sums of ds/scale over r >= R, r <= -R (c2p) */
    float *csat;              /* [rows][2] column sums of the same (p2c) */
    float *ppk, *ppq;         /* [sgb*H][2S][D] per-(sequence group, head) table gradient partials
                                 (tensor-core path: [H][tcg][2S][D], one per CTA) */
    int32_t *tcr;             /* tensor-core path: [2 tables][H][tcg][2] written slot range */
    int32_t tcg;              /* tensor-core path: CTAs (row-block groups) per head; 0 = none ran */
    int32_t sgb;              /* simple path: sequence groups of the table-gradient partials */
    int64_t do_sb, do_sl, do_sh;
    int64_t dq_sb, dq_sl, dq_sh;
    int64_t dk_sb, dk_sl, dk_sh;
    int64_t dv_sb, dv_sl, dv_sh;
    int64_t dpk_sh, dpk_ss, dpq_sh, dpq_ss;
    float *hfv;               /* ws backward, mask with HF padded rows: [B][H][D] fp32, (1 / L) x the
                                 sum of dout over the sequence's padded query rows (their uniform
                                 softmax's dv term, the same for every key); NULL otherwise */
    int64_t T;                /* packed: total tokens */
    float inv_scale;          /* 1 / scale */
    uint16_t *pexp;           /* ws backward with position terms (not DATTN_CUDA_BWD=wsr): the expanded
                                 tables [2 signs][2 tables pk, pq][H][rows][64], row u of sign s the
                                 table's row slot(+-(u - off)) (rows, off: dattn_fws_exp_rows / _off),
                                 written by a prologue kernel; NULL: the rings filled row by row */
} dattn_bwd_args;

/* PK: the layout known at compile time (1 packed, 0 padded) */
template <int PK>
DATTN_DEV int64_t ws_row_of(const dattn_bwd_args &A, int b, int h, int tok0, int i)
{
    if (PK) return (int64_t)h * A.T + tok0 + i;
    return ((int64_t)b * A.f.H + h) * A.f.L + i;
}

DATTN_DEV int64_t ws_row(const dattn_bwd_args &A, int b, int h, int tok0, int i)
{
    return A.f.packed ? ws_row_of<1>(A, b, h, tok0, i) : ws_row_of<0>(A, b, h, tok0, i);
}

#endif
