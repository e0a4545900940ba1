/* Bad input: every malformed call returns DATTN_INVALID_ARG (or DATTN_UNSUPPORTED when
 * it is well-formed but cannot run here), dattn_last_error() names the offending field,
 * and nothing is written: every buffer of the call (outputs, inputs, workspace) is
 * compared byte for byte with its poisoned / filled state before the call. The same
 * mutation is also fed to the matching workspace-size query, which must fail the same
 * way. Positive controls (optional pointers left NULL, the untouched base call) must
 * succeed, and a valid call after the failures still gives the right result.
 *
 * Usage: test_badinput [--seed N] [--quick] [--verbose]
 */
#include "internal.h"
#include "tprob.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static trng rng;

enum { FWD = 1, BWD = 2, NOQUERY = 4 };

/* Snapshot every buffer of P (+ workspace); 1 if all unchanged. */
static void snap(tprob *P)
{
    for (int a = 0; a < P->nar; a++) tarena_snapshot(&P->ar[a]);
    if (P->ws.mem) tarena_snapshot(&P->ws);
    if (P->cu) memcpy(P->cu_snap, P->cu, sizeof(int32_t) * (size_t)(P->c.B + 1));
}

static int untouched(const tprob *P)
{
    for (int a = 0; a < P->nar; a++)
        if (!tarena_unchanged(&P->ar[a])) return 0;
    if (P->ws.mem && !tarena_unchanged(&P->ws)) return 0;
    if (P->cu && memcmp(P->cu, P->cu_snap, sizeof(int32_t) * (size_t)(P->c.B + 1))) return 0;
    return 1;
}

static void poison_outputs(tprob *P)
{
    const tview *o[7] = {&P->out, &P->lse, &P->dq, &P->dk, &P->dv, &P->dpk, &P->dpq};
    for (int t = 0; t < 7; t++)
        if (o[t]->a) tarena_poison(o[t]->a);
    if (P->ws.mem) tarena_poison(&P->ws);
}

/* 1 if msg contains field, or one of the '|'-separated alternatives in field. */
static int names(const char *msg, const char *field)
{
    if (!field) return 1;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", field);
    for (char *tok = strtok(buf, "|"); tok; tok = strtok(NULL, "|"))
        if (strstr(msg, tok)) return 1;
    return 0;
}

/* Runs the mutated params p in the directions of `dirs`; expects status st and a
 * message containing `field`. */
static void expect(tprob *P, const dattn_params *p, int dirs, dattn_status st, const char *field,
                   const char *what)
{
    for (int dir = 1; dir <= 2; dir++) {
        if (!(dirs & dir)) continue;
        const char *dn = dir == FWD ? "dattn_fwd" : "dattn_bwd";
        poison_outputs(P);
        snap(P);
        dattn_status got = dir == FWD ? dattn_fwd(p) : dattn_bwd(p);
        const char *msg = dattn_last_error();
        int ok = tu_check(got == st, "%s with %s: returned %d (%s), expected %s; message: \"%s\"", dn,
                          what, (int)got, dattn_status_string(got), dattn_status_string(st), msg);
        if (st != DATTN_OK) {
            tu_check(names(msg, field),
                     "%s with %s: message \"%s\" does not name \"%s\"", dn, what, msg, field);
            tu_check(untouched(P), "%s with %s: a buffer was written by a rejected call", dn, what);
        }
        tu_log("  %-9s %-48s -> %s: %s\n", dn, what, dattn_status_string(got), msg);
        if (!ok) continue;
        if (!(dirs & NOQUERY)) {
            size_t bytes = 12345;
            dattn_status q = dir == FWD ? dattn_fwd_workspace_size(p, &bytes)
                                        : dattn_bwd_workspace_size(p, &bytes);
            if (st != DATTN_OK) {
                tu_check(q == st && names(dattn_last_error(), field),
                         "%s_workspace_size with %s: returned %d \"%s\", expected %s naming \"%s\"",
                         dir == FWD ? "fwd" : "bwd", what, (int)q, dattn_last_error(),
                         dattn_status_string(st), field ? field : "");
                tu_check(bytes == 12345, "%s_workspace_size with %s wrote *bytes on failure",
                         dir == FWD ? "fwd" : "bwd", what);
            } else {
                tu_check(q == DATTN_OK, "%s_workspace_size with %s: %s", dir == FWD ? "fwd" : "bwd",
                         what, dattn_last_error());
            }
        }
    }
}

#define BAD(P, dirs, st, field, stmt)                                                          \
    do {                                                                                       \
        dattn_params mut_ = (P)->p;                                                            \
        {                                                                                      \
            dattn_params *p = &mut_;                                                           \
            stmt;                                                                              \
        }                                                                                      \
        expect((P), &mut_, (dirs), (st), (field), #stmt);                                      \
    } while (0)

#define INV DATTN_INVALID_ARG
#define UNS DATTN_UNSUPPORTED

static tcase base_case(int layout)
{
    tcase c;
    memset(&c, 0, sizeof c);
    c.dtype = DATTN_F32;
    c.layout = layout;
    c.pos_att = DATTN_POS_C2P | DATTN_POS_P2C;
    c.pb = 256, c.M = 512;
    c.B = 2, c.L = 5, c.H = 2, c.D = 8;
    c.mask = layout == DATTN_LAYOUT_PADDED ? MK_HOLES : MK_NONE;
    c.bwd = 1;
    return c;
}

static void prepare(tprob *P)
{
    /* A valid forward first, so that out/lse hold real values for the backward. */
    tu_check(tprob_fwd(P, 1), "base forward %s", P->name);
    size_t fb = 0, bb = 0;
    dattn_fwd_workspace_size(&P->p, &fb);
    dattn_bwd_workspace_size(&P->p, &bb);
    size_t need = fb > bb ? fb : bb;
    if (P->ws.mem) tarena_free(&P->ws);
    P->p.workspace = NULL;
    P->p.workspace_size = 0;
    if (need) {
        void *m = NULL;
        if (posix_memalign(&m, 256, need + 512)) abort();
        P->ws.mem = m;
        P->ws.bytes = need + 512;
        P->p.workspace = m;
        P->p.workspace_size = need;
    }
}

/* Each named tensor of the call: pointer to its dattn_tensor in params, rank, whether
 * it is an output of fwd / bwd, and when it is required. */
typedef struct tinfo {
    const char *name;
    size_t off; /* offsetof(dattn_params, X) */
    int rank;
    int dirs;   /* calls that read or write it */
    int out_dir;
} tinfo;

#define TI(x, r, d, o) {#x, offsetof(dattn_params, x), r, d, o}

static dattn_tensor *tensor_of(dattn_params *p, const tinfo *t)
{
    return (dattn_tensor *)((char *)p + t->off);
}

static void tensor_tests(tprob *P, int packed)
{
    int r = packed ? 3 : 4;
    const tinfo ts[] = {TI(q, r, FWD | BWD, 0),  TI(k, r, FWD | BWD, 0),   TI(v, r, FWD | BWD, 0),
                        TI(pk, 3, FWD | BWD, 0), TI(pq, 3, FWD | BWD, 0),  TI(out, r, FWD | BWD, FWD),
                        TI(lse, packed ? 2 : 3, BWD, FWD), TI(dout, r, BWD, 0), TI(dq, r, BWD, BWD),
                        TI(dk, r, BWD, BWD),     TI(dv, r, BWD, BWD),     TI(dpk, 3, BWD, BWD),
                        TI(dpq, 3, BWD, BWD)};
    int nts = (int)(sizeof ts / sizeof ts[0]);
    char field[64], what[128];
    for (int t = 0; t < nts; t++) {
        const tinfo *ti = &ts[t];
        dattn_params m;
        /* NULL data */
        m = P->p;
        tensor_of(&m, ti)->data = NULL;
        snprintf(field, sizeof field, "%s.data", ti->name);
        snprintf(what, sizeof what, "%s.data = NULL", ti->name);
        expect(P, &m, ti->dirs, INV, field, what);
        /* misaligned by one byte */
        m = P->p;
        tensor_of(&m, ti)->data = (char *)tensor_of(&m, ti)->data + 1;
        snprintf(what, sizeof what, "%s.data misaligned by 1 byte", ti->name);
        expect(P, &m, ti->dirs, INV, field, what);
        /* last dimension not contiguous */
        m = P->p;
        tensor_of(&m, ti)->stride[ti->rank - 1] = 2;
        snprintf(field, sizeof field, "%s.stride[%d]", ti->name, ti->rank - 1);
        snprintf(what, sizeof what, "%s.stride[%d] = 2", ti->name, ti->rank - 1);
        expect(P, &m, ti->dirs, INV, field, what);
        /* a negative stride */
        m = P->p;
        int k = ti->rank - 2;
        tensor_of(&m, ti)->stride[k] = -tensor_of(&m, ti)->stride[k];
        snprintf(field, sizeof field, "%s.stride[%d]", ti->name, k);
        snprintf(what, sizeof what, "%s.stride[%d] negative", ti->name, k);
        expect(P, &m, ti->dirs, INV, field, what);
        /* strides whose offsets overflow 64 bits */
        m = P->p;
        tensor_of(&m, ti)->stride[0] = (int64_t)1 << 62;
        /* (names "<t>.stride": the library reports the stride at which the running sum
         * of offsets overflows, here stride[1], not the huge stride[0]) */
        snprintf(field, sizeof field, "%s.stride", ti->name);
        snprintf(what, sizeof what, "%s.stride[0] = 2^62", ti->name);
        expect(P, &m, ti->dirs, INV, field, what);
        m = P->p;
        tensor_of(&m, ti)->stride[0] = (int64_t)1 << 61; /* offsets fit, bytes do not */
        snprintf(field, sizeof field, "%s: byte offsets|%s.stride[0]", ti->name, ti->name);
        snprintf(what, sizeof what, "%s.stride[0] = 2^61", ti->name);
        expect(P, &m, ti->dirs, INV, field, what);
        if (ti->out_dir) {
            /* stride 0 / overlapping elements in an output */
            m = P->p;
            tensor_of(&m, ti)->stride[0] = 0;
            snprintf(field, sizeof field, "%s.stride[0]", ti->name);
            snprintf(what, sizeof what, "output %s.stride[0] = 0", ti->name);
            expect(P, &m, ti->out_dir, INV, field, what);
            m = P->p;
            tensor_of(&m, ti)->stride[ti->rank - 2] = tensor_of(&m, ti)->stride[ti->rank - 1];
            snprintf(field, sizeof field, "%s.stride", ti->name);
            snprintf(what, sizeof what, "output %s with overlapping rows", ti->name);
            expect(P, &m, ti->out_dir, INV, field, what);
            m = P->p;
            tensor_of(&m, ti)->stride[0] = tensor_of(&m, ti)->stride[1];
            snprintf(what, sizeof what, "output %s with overlapping outer dims", ti->name);
            expect(P, &m, ti->out_dir, INV, field, what);
            /* an output aliasing q (or, for lse, out) */
            m = P->p;
            tensor_of(&m, ti)->data = strcmp(ti->name, "lse") ? m.q.data : m.out.data;
            snprintf(field, sizeof field, "%s.data must not alias", ti->name);
            snprintf(what, sizeof what, "%s.data = %s.data", ti->name, strcmp(ti->name, "lse") ? "q" : "out");
            expect(P, &m, ti->out_dir, INV, ti->name, what);
        }
    }
    /* outputs aliasing each other / inputs of the backward */
    BAD(P, BWD, INV, "dq", p->dq.data = p->dout.data);
    BAD(P, BWD, INV, "dk", p->dk.data = p->dq.data);
    BAD(P, BWD, INV, "dv", p->dv.data = p->v.data);
    BAD(P, BWD, INV, "dpk", p->dpk.data = p->pk.data);
    BAD(P, BWD, INV, "dpq", p->dpq.data = p->dpk.data);
    /* partial overlap: an output starting one element into an input, or into the
     * workspace */
    BAD(P, FWD, INV, "out", p->out.data = (char *)p->q.data + (p->dtype == DATTN_F32 ? 4 : 2));
    BAD(P, BWD, INV, "dv", p->dv.data = (char *)p->dout.data + (p->dtype == DATTN_F32 ? 4 : 2));
    BAD(P, BWD, INV, "lse", p->lse.data = (char *)p->workspace + 4);
    /* Optional tensors: NULL is fine when not needed. */
    BAD(P, FWD | BWD, DATTN_OK, NULL, (p->pos_att = DATTN_POS_P2C, p->pk.data = NULL, p->dpk.data = NULL));
    BAD(P, FWD | BWD, DATTN_OK, NULL, (p->pos_att = DATTN_POS_C2P, p->pq.data = NULL, p->dpq.data = NULL));
    BAD(P, FWD | BWD, DATTN_OK, NULL,
        (p->pos_att = 0, p->pk.data = p->pq.data = p->dpk.data = p->dpq.data = NULL));
    BAD(P, FWD, DATTN_OK, NULL, p->lse.data = NULL);
}

static void field_tests(tprob *P)
{
    BAD(P, FWD | BWD, INV, "abi_version", p->abi_version = 0);
    BAD(P, FWD | BWD, INV, "abi_version", p->abi_version = DATTN_ABI_VERSION + 1);
    BAD(P, FWD | BWD, INV, "device", p->device = 2);
    BAD(P, FWD | BWD, INV, "device", p->device = -1);
    if (!dattn_cuda_built())
        BAD(P, FWD | BWD, UNS, "CUDA", p->device = DATTN_DEVICE_CUDA);
    else
        tu_skip("device = CUDA with host pointers: this build has CUDA (not a bad input there)");
    BAD(P, FWD | BWD, INV, "device_index", p->device_index = -2);
    BAD(P, FWD | BWD, INV, "dtype", p->dtype = 3);
    BAD(P, FWD | BWD, INV, "dtype", p->dtype = -1);
    BAD(P, FWD | BWD, INV, "layout", p->layout = 2);
    BAD(P, FWD | BWD, INV, "layout", p->layout = -1);
    BAD(P, FWD | BWD, INV, "pos_att", p->pos_att = 4);
    BAD(P, FWD | BWD, INV, "pos_att", p->pos_att = -1);
    BAD(P, FWD | BWD, INV, "padded_rows", p->padded_rows = 2);
    BAD(P, FWD | BWD, INV, "padded_rows", p->padded_rows = -1);
    BAD(P, FWD | BWD, INV, "fp32_math", p->fp32_math = 2);
    BAD(P, FWD | BWD, INV, "fp32_math", p->fp32_math = -1);
    BAD(P, FWD | BWD, INV, "num_threads", p->num_threads = -1);
    BAD(P, FWD | BWD, INV, "max_relative_positions", p->max_relative_positions = 0);
    BAD(P, FWD | BWD, INV, "max_relative_positions", p->max_relative_positions = -3);
    BAD(P, FWD | BWD, INV, "max_relative_positions", (p->position_buckets = 0, p->max_relative_positions = 0));
    BAD(P, FWD | BWD, INV, "position_buckets", p->position_buckets = 1);
    BAD(P, FWD | BWD, INV, "position_buckets", (p->position_buckets = 2, p->max_relative_positions = 2));
    BAD(P, FWD | BWD, INV, "position_buckets", (p->position_buckets = 4, p->max_relative_positions = 3));
    BAD(P, FWD | BWD, INV, "position_buckets", p->position_buckets = 1 << 21);
    BAD(P, FWD | BWD, INV, "max_relative_positions", (p->position_buckets = 0, p->max_relative_positions = 1 << 21));
    BAD(P, FWD | BWD, INV, "dropout_p", p->dropout_p = NAN);
    BAD(P, FWD | BWD, INV, "dropout_p", p->dropout_p = -0.1f);
    BAD(P, FWD | BWD, INV, "dropout_p", p->dropout_p = 1.0f);
    BAD(P, FWD | BWD, INV, "dropout_p", p->dropout_p = 1.5f);
    BAD(P, FWD | BWD, INV, "dropout_p", p->dropout_p = INFINITY);
    BAD(P, FWD | BWD, INV, "batch", p->batch = -1);
    BAD(P, FWD | BWD, INV, "seqlen", p->seqlen = -1);
    BAD(P, FWD | BWD, INV, "heads", p->heads = 0);
    BAD(P, FWD | BWD, INV, "heads", p->heads = -2);
    BAD(P, FWD | BWD, INV, "head_dim", p->head_dim = 0);
    BAD(P, FWD | BWD, INV, "head_dim", p->head_dim = -8);
    /* overflow-prone sizes */
    BAD(P, FWD | BWD, INV, "seqlen", p->seqlen = (int64_t)1 << 31);
    BAD(P, FWD | BWD, INV, "batch", p->batch = (int64_t)1 << 60);
    BAD(P, FWD | BWD, INV, "heads", (p->heads = (int64_t)1 << 40, p->head_dim = (int64_t)1 << 30));
    BAD(P, FWD | BWD, INV, "head_dim", p->head_dim = INT64_MAX);
    BAD(P, FWD | BWD, INV, "batch", (p->batch = INT64_MAX, p->seqlen = INT32_MAX));
    /* cu_seqlens in the padded layout */
    static const int32_t cu[3] = {0, 5, 10};
    BAD(P, FWD | BWD, INV, "cu_seqlens", p->cu_seqlens = cu);
    /* mask problems */
    BAD(P, FWD | BWD, INV, "mask.stride[1]", p->mask.stride[1] = 2);
    BAD(P, FWD | BWD, INV, "mask.stride[0]", p->mask.stride[0] = -5);
    BAD(P, FWD | BWD, INV, "mask", p->mask.stride[0] = (int64_t)1 << 62);
}

static void packed_tests(tprob *P)
{
    int32_t *cu = P->cu, B = (int32_t)P->c.B, save[8];
    memcpy(save, cu, sizeof(int32_t) * (size_t)(B + 1));
    static uint8_t fake_mask[64];
    BAD(P, FWD | BWD, INV, "mask", (p->mask.data = fake_mask, p->mask.stride[0] = 4, p->mask.stride[1] = 1));
    BAD(P, FWD | BWD, INV, "cu_seqlens", p->cu_seqlens = NULL);
    BAD(P, FWD | BWD, INV, "cu_seqlens", p->cu_seqlens = (const int32_t *)((const char *)p->cu_seqlens + 2));
    BAD(P, FWD | BWD, INV, "total_tokens", p->total_tokens = -1);
    BAD(P, FWD | BWD, INV, "total_tokens", p->total_tokens = (int64_t)1 << 31);
    /* cu_seqlens[B] != total_tokens (lse strides widened so that only this is wrong) */
    BAD(P, FWD | BWD, INV, "total_tokens", (p->total_tokens = P->T + 1, p->lse.stride[0] = P->T + 1));
    /* the contents of cu_seqlens (host memory on the CPU: fully checked) */
    cu[0] = 1;
    BAD(P, FWD | BWD, INV, "cu_seqlens[0]", (void)p);
    memcpy(cu, save, sizeof(int32_t) * (size_t)(B + 1));
    cu[1] = cu[2] + 1; /* decreasing */
    BAD(P, FWD | BWD, INV, "cu_seqlens", (void)p);
    memcpy(cu, save, sizeof(int32_t) * (size_t)(B + 1));
    cu[B] = (int32_t)P->T - 1;
    BAD(P, FWD | BWD, INV, "cu_seqlens", (void)p);
    memcpy(cu, save, sizeof(int32_t) * (size_t)(B + 1));
    int64_t longest = 0;
    for (int b = 0; b < B; b++) longest = P->lens[b] > longest ? P->lens[b] : longest;
    BAD(P, FWD | BWD, INV, "seqlen", p->seqlen = longest - 1);
    BAD(P, FWD | BWD, DATTN_OK, NULL, p->seqlen = longest + 7); /* max_seqlen may exceed */
    memcpy(cu, save, sizeof(int32_t) * (size_t)(B + 1));
}

static void workspace_tests(tprob *P)
{
    for (int dir = FWD; dir <= BWD; dir++) {
        size_t need = 0;
        if (dir == FWD) dattn_fwd_workspace_size(&P->p, &need);
        else dattn_bwd_workspace_size(&P->p, &need);
        const char *dn = dir == FWD ? "forward" : "backward";
        if (need == 0) {
            tu_skip("workspace NULL / too small / misaligned: the %s of %s needs no workspace here", dn,
                    P->name);
            BAD(P, dir, DATTN_OK, NULL, (p->workspace = NULL, p->workspace_size = 0));
            continue;
        }
        tu_log("  %s workspace: %zu bytes\n", dn, need);
        BAD(P, dir | NOQUERY, INV, "workspace", p->workspace = NULL);
        BAD(P, dir | NOQUERY, INV, "workspace_size", p->workspace_size = need - 1);
        BAD(P, dir | NOQUERY, INV, "workspace", (p->workspace = (char *)p->workspace + 64, p->workspace_size = need));
        BAD(P, dir | NOQUERY, INV, "workspace", (p->workspace = (char *)p->workspace + 128, p->workspace_size = need));
        BAD(P, dir, DATTN_OK, NULL, p->workspace_size = need);
    }
}

static void null_tests(tprob *P)
{
    dattn_status st = dattn_fwd(NULL);
    tu_check(st == INV && strstr(dattn_last_error(), "params"), "dattn_fwd(NULL): %d \"%s\"", (int)st,
             dattn_last_error());
    st = dattn_bwd(NULL);
    tu_check(st == INV && strstr(dattn_last_error(), "params"), "dattn_bwd(NULL): %d \"%s\"", (int)st,
             dattn_last_error());
    size_t b = 7;
    st = dattn_fwd_workspace_size(NULL, &b);
    tu_check(st == INV && b == 7 && strstr(dattn_last_error(), "params"),
             "dattn_fwd_workspace_size(NULL, &b): %d \"%s\"", (int)st, dattn_last_error());
    st = dattn_bwd_workspace_size(NULL, &b);
    tu_check(st == INV && b == 7 && strstr(dattn_last_error(), "params"),
             "dattn_bwd_workspace_size(NULL, &b): %d \"%s\"", (int)st, dattn_last_error());
    st = dattn_fwd_workspace_size(&P->p, NULL);
    tu_check(st == INV && strstr(dattn_last_error(), "bytes"), "dattn_fwd_workspace_size(p, NULL): %d \"%s\"",
             (int)st, dattn_last_error());
    st = dattn_bwd_workspace_size(&P->p, NULL);
    tu_check(st == INV && strstr(dattn_last_error(), "bytes"), "dattn_bwd_workspace_size(p, NULL): %d \"%s\"",
             (int)st, dattn_last_error());
}

int main(int argc, char **argv)
{
    tu_init(argc, argv, "test_badinput");
    trng_seed(&rng, tu_opt.seed);

    tcase c = base_case(DATTN_LAYOUT_PADDED);
    tprob P;
    tprob_init(&P, &c, &rng);
    prepare(&P);
    null_tests(&P);
    field_tests(&P);
    tensor_tests(&P, 0);
    workspace_tests(&P);
    /* after all the failures, the untouched call still works and is right */
    tu_check(tprob_fwd(&P, 1) && tprob_bwd(&P, 1), "valid call after the bad ones");
    tprob_free(&P);

    c = base_case(DATTN_LAYOUT_PACKED);
    static const int64_t lens[3] = {2, 0, 4};
    c.B = 3, c.L = 4, c.lens = lens;
    tprob_init(&P, &c, &rng);
    prepare(&P);
    packed_tests(&P);
    tensor_tests(&P, 1);
    workspace_tests(&P);
    tu_check(tprob_fwd(&P, 1) && tprob_bwd(&P, 1), "valid packed call after the bad ones");
    tprob_free(&P);

    /* D > 256 on the CPU: well-formed, not runnable here */
    c = base_case(DATTN_LAYOUT_PADDED);
    c.dtype = DATTN_F16;
    c.B = 1, c.L = 2, c.H = 1, c.D = 257;
    tprob_init(&P, &c, &rng);
    expect(&P, &P.p, FWD | BWD, UNS, "head_dim", "head_dim = 257 on the CPU");
    tprob_free(&P);
    c.D = 256; /* the largest supported: runs */
    tprob_init(&P, &c, &rng);
    tu_check(tprob_fwd(&P, 1) && tprob_bwd(&P, 1), "head_dim = 256 runs on the CPU");
    tprob_free(&P);
    return tu_finish();
}
