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

#endif
