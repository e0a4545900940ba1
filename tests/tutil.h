/* Test support shared by the tests/test_*.c programs: result counting, arguments, a
 * seeded RNG, storage-dtype values, and "arenas" — poisoned host buffers that hold one
 * or more strided tensor views, so that a test can check that a call read only its
 * elements (gaps are NaN) and wrote only its elements (gaps stay 0xFF). */
#ifndef DATTN_TESTS_TUTIL_H
#define DATTN_TESTS_TUTIL_H

#include "dattn.h"

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ results and arguments */
extern long tu_passed, tu_failed, tu_skipped;

typedef struct tu_args {
    uint64_t seed;
    int quick;         /* reduced sweep (valgrind) */
    int verbose;
    const char *isa;   /* only this CPU kernel family (NULL: every family the CPU has) */
} tu_args;
extern tu_args tu_opt;

/* Parses --seed N, --quick, --verbose, --isa NAME; prints the program name and seed. */
void tu_init(int argc, char **argv, const char *prog);
/* Prints "N passed, N failed, N skipped" and returns the exit status (0 or 1). */
int tu_finish(void);

/* Records one check. On failure prints "FAIL: <msg>" (printf-style). Returns ok. */
int tu_check(int ok, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void tu_skip(const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;
void tu_log(const char *fmt, ...) /* printed only with --verbose */
#if defined(__GNUC__)
    __attribute__((format(printf, 1, 2)))
#endif
    ;

/* The CPU kernel families ("portable", "avx2", "avx512") that dattn_cpu_set_isa()
 * accepts here, in that order (--isa NAME keeps only NAME). The first call probes them,
 * counts each unavailable family as one skip and prints the list. Returns the count. */
int tu_isas(const char *names[3]);
/* Selects a family (NULL: automatic); a failure is a test failure. */
int tu_set_isa(const char *name);

/* ------------------------------------------------------------ random numbers */
typedef struct trng {
    uint64_t s[4];
} trng;
void trng_seed(trng *r, uint64_t seed);
uint64_t trng_u64(trng *r);
double trng_unif(trng *r);              /* [0, 1) */
int64_t trng_int(trng *r, int64_t n);   /* [0, n), n >= 1 */
double trng_sym(trng *r, double amp);   /* (-amp, amp), never exactly 0 */

/* ------------------------------------------------------------ storage dtypes */
size_t tu_esize(int32_t dtype);
const char *tu_dtype_name(int32_t dtype);
double tu_round(int32_t dtype, double x);     /* nearest representable value (RNE) */
double tu_eps(int32_t dtype);                 /* ulp(1): 2^-23, 2^-10, 2^-7 */
double tu_tiny(int32_t dtype);                /* spacing at 0 (smallest subnormal) */
double tu_load(const void *base, int32_t dtype, int64_t off);
void tu_store(void *base, int32_t dtype, int64_t off, double v); /* rounds RNE */

/* ------------------------------------------------------------ arenas and views */
typedef struct tarena {
    unsigned char *mem;  /* posix_memalign(64), exactly `bytes` long (sanitizers see overruns) */
    size_t bytes;
    unsigned char *snap; /* copy for "unchanged" checks */
} tarena;

typedef struct tview {
    tarena *a;
    size_t off;          /* byte offset of element (0, ..., 0) */
    int rank;
    int64_t ext[4];
    int64_t stride[4];   /* in elements, >= 0 */
    int32_t dtype;       /* element type; mask: -1 (uint8), lse: -2 (float32) */
    const char *name;
} tview;

#define TU_U8 (-1)
#define TU_F32RAW (-2)

size_t tview_esize(const tview *v);
int64_t tview_numel(const tview *v);
/* Bytes from element 0 to the end of the last element (0 if empty). */
size_t tview_span(const tview *v);
/* Element offset of the lin-th element in row-major logical order. */
int64_t tview_elem(const tview *v, int64_t lin);
void *tview_ptr(const tview *v);
dattn_tensor tview_tensor(const tview *v);
double tview_get(const tview *v, int64_t lin);
void tview_set(const tview *v, int64_t lin, double x);

/* Allocates `bytes` (>= 1) filled with 0xFF. */
void tarena_alloc(tarena *a, size_t bytes);
void tarena_free(tarena *a);
void tarena_poison(tarena *a);
void tarena_snapshot(tarena *a);
int tarena_unchanged(const tarena *a);  /* memcmp with the snapshot */

/* Bytes of `a` covered by none of the views vs[0..n) that lie in it: 1 if all are still
 * 0xFF. On failure reports the first bad byte offset in *bad. */
int tarena_gaps_poisoned(const tarena *a, const tview *const *vs, int n, size_t *bad);

/* Copies the raw element bytes of a view into dst (numel * esize bytes, logical order). */
void tview_copy_bits(const tview *v, unsigned char *dst);

/* ------------------------------------------------------------ misc */
void *tu_xmalloc(size_t n);
void *tu_xcalloc(size_t n, size_t sz);
double tu_now(void); /* seconds, monotonic */

#endif
