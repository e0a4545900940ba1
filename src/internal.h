/* Internal interfaces shared by the front end (dattn.c), the slot table (buckets.c)
 * and the backends (src/cpu, src/cuda). Not installed. Plain C11; the CUDA launchers
 * include it from .cu files, so it stays C++-clean too. */
#ifndef DATTN_INTERNAL_H
#define DATTN_INTERNAL_H

#include "dattn.h"

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Relative position -> slot, for |r| < the longest sequence of a call.
 *   slot(r) = r + S                   for |r| <= lin
 *   slot(r) = tab[r + R]              for |r| <= R (the whole table, lin zone included)
 *   slot(r) = sat_pos (r >= R), sat_neg (r <= -R)
 * R is the smallest distance from which the slot is constant on both sides, capped at
 * rmax + 1 (rmax = longest |r| the call can see), so the table has 2R + 1 entries. */
typedef struct dattn_slotmap {
    int32_t S;
    int32_t lin;
    int32_t R;
    int32_t sat_pos;
    int32_t sat_neg;
    int32_t *tab; /* 2R + 1 entries, owned (free with dattn_slotmap_free) */
} dattn_slotmap;

/* Checks the position configuration; on failure sets the error and returns it. */
dattn_status dattn_slot_config_check(int32_t position_buckets, int32_t max_rel);
/* Builds the map for |r| <= rmax (rmax >= 0). DATTN_INTERNAL if out of host memory. */
dattn_status dattn_slotmap_build(dattn_slotmap *m, int32_t position_buckets,
                                 int32_t max_rel, int64_t rmax);
void dattn_slotmap_free(dattn_slotmap *m);
/* slot(r) for one r (any r), straight from the float32 formula. */
int32_t dattn_slot_of(int32_t position_buckets, int32_t max_rel, int64_t r);

static inline int32_t dattn_slotmap_get(const dattn_slotmap *m, int64_t r)
{
    if (r >= m->R) return m->sat_pos;
    if (r <= -m->R) return m->sat_neg;
    return m->tab[r + m->R];
}

/* the CUDA backward's CTAs a call (G H <= this: one wave of 1-CTA/SM kernels on an H200) */
#define DATTN_BWD_TC_CTAS 132
#define DATTN_WS_UB_MAX (DATTN_BWD_TC_CTAS + 1)
/* The warp-specialized CUDA backward's work split (ws_units.c): the B * ceil(L / 128) row
 * blocks of a head (b-major) in G contiguous ranges [ub[g], ub[g + 1]), each of one block at
 * least, the most expensive range as cheap as the block costs allow: with position terms
 * (R >= 1: the slot map's R) a block's band tiles weigh ~3x its saturated ones; without (R
 * <= 0) equal counts, U g / G. Needs 1 <= G <= min(U, DATTN_WS_UB_MAX - 1); fills ub[0..G].
 * Returns 0, -1 on arguments out of range, -2 out of host memory. Depends on its arguments
 * only (the table-gradient partials' summation order follows it). */
int dattn_ws_unit_bounds(int64_t B, int64_t L, int64_t R, int G, int32_t *ub);
/* The cost it gives row block m (rows 128 m ..) of a sequence of length L: per 64-row tile
 * inside L, W_BAND per band key tile (a relative position in (-R, R)) and W_SAT per other
 * one, plus W_UNIT (R <= 0: no band tiles). */
#define DATTN_WS_W_BAND 31
#define DATTN_WS_W_SAT 10
#define DATTN_WS_W_UNIT 20
int64_t dattn_ws_unit_cost(int64_t m, int64_t L, int64_t R);

/* Error reporting: the thread-local message of dattn_last_error(). Returns `st`. */
dattn_status dattn_set_error(dattn_status st, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void dattn_clear_error(void);

/* Facts about a validated call, derived once by the front end and handed to the
 * backends (so that they never re-derive them differently). */
typedef struct dattn_call {
    const dattn_params *p;
    int is_bwd;
    int packed;
    int c2p, p2c;
    int64_t B, L, H, D, T;
    int32_t S;             /* att span; pk/pq have 2S rows */
    float scale;           /* sqrt(D * (1 + c2p + p2c)) in float32 */
    int64_t max_len;       /* longest sequence (padded: L; packed: max over cu_seqlens
                              when known on the host, else L = max_seqlen) */
    uint32_t drop_threshold; /* floor(dropout_p * 2^16) (16-bit uniforms); 0 = no dropout */
    float drop_scale;        /* 1 / (1 - dropout_p) */
} dattn_call;

/* Element size of a dattn_dtype (0 if invalid). */
size_t dattn_dtype_size(int32_t dtype);

/* Philox4x32-10 as used by dropout (see dattn.h). out[4]. */
void dattn_philox4x32(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0,
                      uint32_t k1, uint32_t out[4]);

/* --- CPU backend (src/cpu) --- */
size_t dattn_cpu_fwd_workspace(const dattn_call *c);
size_t dattn_cpu_bwd_workspace(const dattn_call *c);
dattn_status dattn_cpu_fwd(const dattn_call *c, const dattn_slotmap *sm);
dattn_status dattn_cpu_bwd(const dattn_call *c, const dattn_slotmap *sm);
const char *dattn_cpu_isa(void);
/* Forces the CPU kernel family ("portable", "avx2", "avx512"; NULL or "auto" = best the
 * CPU has). UNSUPPORTED if this CPU or build lacks it. Not thread-safe against running
 * calls; tests and benchmarks use it. The environment variable DATTN_CPU_ISA has the same
 * effect at the first call. */
dattn_status dattn_cpu_set_isa(const char *name);

/* --- CUDA backend (src/cuda/launch.cu); stubs in dattn.c when built without CUDA --- */
int dattn_cuda_built(void);
const char *dattn_cuda_archs(void);
dattn_status dattn_cuda_device_supported(int32_t device_index);
/* UNSUPPORTED (with the reason) for a validated CUDA call the kernels cannot run, from
 * the call's parameters alone (no device access): the front end calls it in validation,
 * so that workspace-size queries already answer "would this call run". */
dattn_status dattn_cuda_check(const dattn_call *c);
size_t dattn_cuda_fwd_workspace(const dattn_call *c);
size_t dattn_cuda_bwd_workspace(const dattn_call *c);
dattn_status dattn_cuda_fwd(const dattn_call *c, const dattn_slotmap *sm);
dattn_status dattn_cuda_bwd(const dattn_call *c, const dattn_slotmap *sm);

#ifdef __cplusplus
}
#endif
#endif
