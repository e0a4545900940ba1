/* Relative position -> table slot, bit-identical to transformers.
 *
 * transformers (modeling_deberta_v2.make_log_bucket_position) evaluates, on int64
 * relative positions r:
 *     mid     = bucket_size // 2
 *     abs_pos = mid - 1 if -mid < r < mid else |r|
 *     log_pos = ceil(log(abs_pos / mid) / log(float32((M - 1) / mid)) * (mid - 1)) + mid
 *     bucket  = r if abs_pos <= mid else log_pos * sign(r)
 * with every floating-point step in float32 (abs_pos / mid is a float32 true division;
 * the denominator is the float32 rounding of the double (M - 1) / mid). We repeat the
 * same float32 operations in the same order; this file is compiled with
 * -ffp-contract=off so that no step is fused. The slot is clamp(bucket + S, 0, 2S - 1).
 *
 * Because log() is monotone, bucket(|r|) is monotone beyond mid, so the slot becomes
 * constant on each side from some distance R on; the slot map stores 2R + 1 entries
 * and two saturation values (see internal.h).
 */
#include "internal.h"

#include <math.h>
#include <stdlib.h>

#define SLOT_MAX_SPAN (1 << 20)  /* pk/pq rows = 2S; sanity bound */
#define SLOT_MAX_SCAN (1 << 24)  /* float32 represents every integer below this */

int32_t dattn_att_span(int32_t position_buckets, int32_t max_rel)
{
    return position_buckets > 0 ? position_buckets : max_rel;
}

static float log_denominator(int32_t mid, int32_t max_rel)
{
    /* Python: torch.tensor((max_position - 1) / mid) -> float32 of a double. */
    double ratio = (double)(max_rel - 1) / (double)mid;
    return logf((float)ratio);
}

/* bucket(r) for r with |r| > mid, log mode: sign(r) * log_pos(|r|). */
static int64_t log_bucket(int64_t r, int32_t mid, float den)
{
    int64_t a = r < 0 ? -r : r;
    float x = (float)a / (float)mid;
    float t = logf(x) / den;
    t = t * (float)(mid - 1);
    float lp = ceilf(t) + (float)mid;
    float b = r < 0 ? -lp : lp;
    return (int64_t)b;
}

static int64_t bucket_of(int32_t pb, float den, int64_t r)
{
    if (pb <= 0) return r;
    int32_t mid = pb / 2;
    int64_t a = (r < mid && r > -mid) ? (int64_t)mid - 1 : (r < 0 ? -r : r);
    if (a <= mid) return r;
    return log_bucket(r, mid, den);
}

static int32_t clamp_slot(int64_t bucket, int32_t S)
{
    int64_t s = bucket + S;
    if (s < 0) s = 0;
    if (s > 2 * (int64_t)S - 1) s = 2 * (int64_t)S - 1;
    return (int32_t)s;
}

dattn_status dattn_slot_config_check(int32_t pb, int32_t max_rel)
{
    if (max_rel < 1)
        return dattn_set_error(DATTN_INVALID_ARG,
                               "max_relative_positions must be >= 1 (got %d); transformers "
                               "replaces values < 1 by max_position_embeddings",
                               max_rel);
    int32_t S = dattn_att_span(pb, max_rel);
    if (S > SLOT_MAX_SPAN)
        return dattn_set_error(DATTN_INVALID_ARG,
                               "att span %d (position_buckets if > 0, else "
                               "max_relative_positions) must be <= %d",
                               S, SLOT_MAX_SPAN);
    if (pb > 0) {
        if (pb < 2)
            return dattn_set_error(DATTN_INVALID_ARG,
                                   "position_buckets must be >= 2 or <= 0 (got %d): with "
                                   "position_buckets // 2 == 0 transformers divides by zero",
                                   pb);
        float den = log_denominator(pb / 2, max_rel);
        if (!(den != 0.0f) || !isfinite(den))
            return dattn_set_error(DATTN_INVALID_ARG,
                                   "position_buckets=%d with max_relative_positions=%d gives "
                                   "log((M - 1) / (position_buckets // 2)) = %g: transformers "
                                   "divides by it",
                                   pb, max_rel, (double)den);
    }
    return DATTN_OK;
}

int32_t dattn_slot_of(int32_t pb, int32_t max_rel, int64_t r)
{
    int32_t S = dattn_att_span(pb, max_rel);
    float den = pb > 0 ? log_denominator(pb / 2, max_rel) : 0.0f;
    return clamp_slot(bucket_of(pb, den, r), S);
}

dattn_status dattn_slots(int32_t pb, int32_t max_rel, int64_t r0, int64_t count, int32_t *out)
{
    dattn_clear_error();
    dattn_status st = dattn_slot_config_check(pb, max_rel);
    if (st != DATTN_OK) return st;
    if (count < 0)
        return dattn_set_error(DATTN_INVALID_ARG, "count must be >= 0 (got %lld)",
                               (long long)count);
    if (count > 0 && !out) return dattn_set_error(DATTN_INVALID_ARG, "out must not be NULL");
    if (r0 < -(int64_t)SLOT_MAX_SCAN * 64 || r0 > (int64_t)SLOT_MAX_SCAN * 64 ||
        count > (int64_t)SLOT_MAX_SCAN * 64)
        return dattn_set_error(DATTN_INVALID_ARG,
                               "r0 and count must stay within +-%lld",
                               (long long)SLOT_MAX_SCAN * 64);
    int32_t S = dattn_att_span(pb, max_rel);
    float den = pb > 0 ? log_denominator(pb / 2, max_rel) : 0.0f;
    for (int64_t n = 0; n < count; n++) out[n] = clamp_slot(bucket_of(pb, den, r0 + n), S);
    return DATTN_OK;
}

void dattn_slotmap_free(dattn_slotmap *m)
{
    if (m) {
        free(m->tab);
        m->tab = NULL;
    }
}

dattn_status dattn_slotmap_build(dattn_slotmap *m, int32_t pb, int32_t max_rel, int64_t rmax)
{
    m->tab = NULL;
    int32_t S = dattn_att_span(pb, max_rel);
    float den = pb > 0 ? log_denominator(pb / 2, max_rel) : 0.0f;
    m->S = S;
    if (rmax < 0) rmax = 0;

    /* Distance from which both sides are constant. */
    int64_t R;
    if (pb <= 0) {
        m->lin = S - 1;
        R = S; /* r >= S - 1 -> 2S - 1, r <= -S -> 0 */
    } else {
        int32_t mid = pb / 2;
        m->lin = mid;
        int64_t stop = rmax + 1 < SLOT_MAX_SCAN ? rmax + 1 : SLOT_MAX_SCAN;
        if (mid == 1) {
            R = 2; /* log_pos == mid for every |r| > mid: constant at once */
        } else {
            /* log_pos moves monotonically with |r| (up when den > 0, down otherwise);
             * once |bucket| >= S both slots sit on a clamp bound for good. */
            int up = den > 0.0f;
            int64_t a = (int64_t)mid + 1;
            for (; a < stop; a++) {
                int64_t b = log_bucket(a, mid, den);
                if (up ? b >= S : b <= -(int64_t)S) break;
            }
            if (a >= stop && stop < rmax + 1)
                return dattn_set_error(DATTN_UNSUPPORTED,
                                       "position_buckets=%d, max_relative_positions=%d: the "
                                       "slot does not saturate within |r| < %d",
                                       pb, max_rel, SLOT_MAX_SCAN);
            R = a;
        }
    }
    if (R > rmax + 1) R = rmax + 1;
    m->R = (int32_t)R;
    m->sat_pos = clamp_slot(bucket_of(pb, den, R), S);
    m->sat_neg = clamp_slot(bucket_of(pb, den, -R), S);
    m->tab = (int32_t *)malloc(sizeof(int32_t) * (size_t)(2 * R + 1));
    if (!m->tab) return dattn_set_error(DATTN_INTERNAL, "out of host memory for the slot table");
    for (int64_t r = -R; r <= R; r++) m->tab[r + R] = clamp_slot(bucket_of(pb, den, r), S);
    if (m->lin > m->R) m->lin = m->R;
    return DATTN_OK;
}
