/* Shared by the CUDA forward kernels and their launcher: the kernel argument block
 * (passed by value as a __grid_constant__ parameter), the slot lookup, addressing. */
#ifndef DATTN_CUDA_COMMON_CUH
#define DATTN_CUDA_COMMON_CUH

#include <stdint.h>

#include "ptx.cuh"

/* Log-zone slot entries carried in the argument block (both signs together). v2/v3
 * (position_buckets 256, M 512) need 766; configurations needing more are UNSUPPORTED
 * on the GPU (the Python layer falls back). */
#define DATTN_CUDA_TAB_MAX 1024

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

#endif
