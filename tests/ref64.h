/* float64 reference of ../shared/SPEC.md, for tests only.
 *
 * Written from SPEC.md alone, independently of the fast paths: it reads the same
 * dattn_params (inputs in their storage dtype, any strides, padded or packed, mask,
 * dropout) and computes in double, with the slot of every (i, j) pair recomputed from
 * the float32 formula (dattn_slots), never from the fast path's slot map.
 *
 * Outputs are contiguous double arrays in the "natural" layout of the call:
 *   padded: [B, L, H, D] (lse [B, H, L]);  packed: [T, H, D] (lse [H, T]);
 *   dpk/dpq: [H, 2S, D].
 * Row indices: b is the batch index (packed: the sequence index) and i the position
 * inside that sequence (packed: token cu_seqlens[b] + i).
 */
#ifndef DATTN_REF64_H
#define DATTN_REF64_H

#include "dattn.h"

#include <stdint.h>

/* One query row (b, h, i) of the forward: out_row[D] and its lse (may be NULL).
 * Cost O(L * D); use it to check sampled rows of long sequences. */
void ref64_fwd_row(const dattn_params *p, int64_t b, int64_t h, int64_t i, double *out_row,
                   double *lse);

/* The whole forward. */
void ref64_fwd(const dattn_params *p, double *out, double *lse);

/* The whole backward: gradients of sum(out * dout) with dout read from p->dout (storage
 * dtype). The reference recomputes its own forward in double (it does not read p->out or
 * p->lse). dpk/dpq may be NULL when their term is off. Cost O(B H L^2 D). */
void ref64_bwd(const dattn_params *p, double *dq, double *dk, double *dv, double *dpk,
               double *dpq);

/* --- Error magnitudes (for tolerances) ---------------------------------------------
 * The *_mag functions also return, per output element, first-order magnitudes that
 * floating-point error bounds scale with (sums of absolute values of the terms; they do
 * not shrink when the terms cancel). With kd_ij the dropout factor (or 1),
 *   sigma_ij = sum_d (|q_id k_jd| + [c2p] |q_id pk_td| + [p2c] |k_jd pq_td|) / scale
 *              (t = slot(i-j): an fp32 score has absolute error ~ eps32 * sigma_ij),
 *   e_ij     = 1 + sigma_ij + sum_k p_ik sigma_ik  (relative error factor of p_ij;
 *              1 on padded rows),
 *   dpm_ij   = kd_ij sum_d |dout_id v_jd|,  Dm_i = sum_j p_ij dpm_ij,
 *   w_ij     = p_ij (dpm_ij + Dm_i) / scale  (bounds |ds_ij| / scale and its error terms),
 * the magnitudes ("mag") are
 *   out: sum_j p_ij kd_ij |v_jd|                     dv:  sum_i p_ij kd_ij |dout_id|
 *   dq:  sum_j w_ij (|k_j| + [c2p] |pk_t|)            dk:  sum_i w_ij (|q_i| + [p2c] |pq_t|)
 *   dpk: sum w_ij |q_i|                               dpq: sum w_ij |k_j|
 * and the score-weighted magnitudes ("smag") are the same sums with every pair's term
 * multiplied by e_ij: what fp32 rounding inside the scores and the softmax scales with.
 * Layouts as above. Any mag / smag pointer may be NULL; in ref64_grads, dq, dk, dv are
 * required and dpk, dpq optional. */
typedef struct ref64_grads {
    double *dq, *dk, *dv, *dpk, *dpq;
} ref64_grads;

void ref64_fwd_row_mag(const dattn_params *p, int64_t b, int64_t h, int64_t i, double *out_row,
                       double *lse, double *mag_row, double *smag_row);
void ref64_fwd_mag(const dattn_params *p, double *out, double *lse, double *mag, double *smag);
void ref64_bwd_mag(const dattn_params *p, double *dq, double *dk, double *dv, double *dpk,
                   double *dpq, const ref64_grads *mag, const ref64_grads *smag);

#endif
