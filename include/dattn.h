/*
 * dattn — exact, fused DeBERTa-v2/v3 disentangled attention.
 *
 * Public C11 API. One entry point per direction (dattn_fwd, dattn_bwd) for every
 * backend; the `device` field of dattn_params selects the CPU or the CUDA backend.
 *
 * What is computed (the contract is ../shared/SPEC.md; short form):
 *
 *   slot(r)  = clamp(bucket(r) + S, 0, 2S-1),  r = i - j  (positions restart at 0 in
 *              every sequence; bucket() is transformers' make_log_bucket_position when
 *              position_buckets > 0, else the identity)
 *   s[i,j]   = ( q_i.k_j + [c2p] q_i.pk[slot(i-j)] + [p2c] k_j.pq[slot(i-j)] ) / scale
 *   scale    = float32 sqrt(D * (1 + [c2p] + [p2c]))
 *   p        = softmax_j(s) over the valid keys of the row (key padding mask)
 *   out[i]   = sum_j p[i,j] v_j          (with dropout: p * keep / (1 - dropout_p))
 *   lse[i]   = log sum_j exp(s[i,j])     (natural log, float32, saved for backward)
 *
 * Padded query rows (mask[b,i] == 0) follow transformers by default: their output is
 * the mean of v over all L keys, padded keys included (DATTN_PADROWS_HF); the option
 * DATTN_PADROWS_ZERO writes zeros there instead. For such rows lse is log(L) (HF) or
 * -inf (ZERO), so that exp(0 - lse) is the probability each key received.
 *
 * Conventions
 *   - Plain fields only (pointers, int64 strides counted in elements, int32 enums), so
 *     that ctypes or any FFI can fill the struct. Call dattn_params_init() first.
 *   - Every call validates all of its inputs before it touches any output; a rejected
 *     call writes nothing and returns DATTN_INVALID_ARG (a malformed call) or
 *     DATTN_UNSUPPORTED (a valid call this build or backend cannot run; callers may
 *     fall back). dattn_last_error() names the offending field.
 *   - The library never prints, never exits, never allocates device memory and never
 *     synchronizes a CUDA stream: the caller passes the stream and a workspace of at
 *     least dattn_fwd_workspace_size()/dattn_bwd_workspace_size() bytes, 256-byte
 *     aligned, on the call's device. (The CPU backend may allocate small host tiles.)
 *   - All outputs are overwritten, never accumulated into. An output may not share
 *     memory with an input, cu_seqlens or the workspace (checked on address ranges, so
 *     an output interleaved with an input is rejected) nor with another output (outputs
 *     may be interleaved views of one buffer; only identical starts are detected).
 *   - Results of the CPU backend are bitwise identical for any thread count; backward
 *     results of every backend are bitwise identical run to run.
 *
 * Tensors (shape as documented per field; the last dimension must be contiguous):
 *   padded layout:  q, k, v, out, dout, dq, dk, dv     [B, L, H, D]
 *                   mask                                [B, L]  uint8, nonzero = token
 *                   lse                                 [B, H, L] float32
 *   packed layout:  q, k, v, out, dout, dq, dk, dv     [T, H, D]
 *                   cu_seqlens                          [B + 1] int32, cu[0] = 0,
 *                                                       cu[B] = T, non-decreasing
 *                   lse                                 [H, T] float32
 *   both:           pk, pq, dpk, dpq                    [H, 2S, D]
 * dattn_tensor.stride[k] is the stride of dimension k of that shape, in elements;
 * entries past the tensor's rank are ignored.
 */
#ifndef DATTN_H
#define DATTN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DATTN_VERSION_MAJOR 0
#define DATTN_VERSION_MINOR 1
#define DATTN_VERSION_PATCH 0
/* Bumped whenever dattn_params changes layout; dattn_params_init() stores it. */
#define DATTN_ABI_VERSION 1

#if defined(_WIN32)
#define DATTN_API __declspec(dllexport)
#else
#define DATTN_API __attribute__((visibility("default")))
#endif

typedef enum dattn_status {
    DATTN_OK = 0,
    DATTN_INVALID_ARG = 1,  /* malformed call: a field is wrong (see dattn_last_error) */
    DATTN_UNSUPPORTED = 2,  /* well-formed, but this build/backend/GPU cannot run it */
    DATTN_CUDA_ERROR = 3,   /* the CUDA runtime reported an error (launch, device) */
    DATTN_INTERNAL = 4      /* a bug in dattn, or the host ran out of memory */
} dattn_status;

typedef enum dattn_device { DATTN_DEVICE_CPU = 0, DATTN_DEVICE_CUDA = 1 } dattn_device;

typedef enum dattn_dtype { DATTN_F32 = 0, DATTN_F16 = 1, DATTN_BF16 = 2 } dattn_dtype;

typedef enum dattn_layout {
    DATTN_LAYOUT_PADDED = 0, /* [B, L, H, D] with an optional key padding mask */
    DATTN_LAYOUT_PACKED = 1  /* [T, H, D] with cu_seqlens (varlen), no mask */
} dattn_layout;

/* Bits of dattn_params.pos_att (transformers' pos_att_type). */
enum { DATTN_POS_C2P = 1, DATTN_POS_P2C = 2 };

typedef enum dattn_padrows {
    DATTN_PADROWS_HF = 0,  /* padded query rows = mean of v over all L keys */
    DATTN_PADROWS_ZERO = 1 /* padded query rows = 0 */
} dattn_padrows;

/* fp32 inputs only (fp16 / bf16 calls ignore it). TF32: the CUDA forward may run its
 * products (q.k, c2p, p2c, P.v) on TF32 tensor cores, operands rounded to tf32 (10-bit
 * mantissa, round to nearest), fp32 accumulation and softmax; calls its TF32 kernel cannot
 * take run IEEE. The CPU backend and every backward compute IEEE fp32 in either mode. */
typedef enum dattn_fp32_math {
    DATTN_MATH_IEEE = 0, /* fp32 inputs: full fp32 products */
    DATTN_MATH_TF32 = 1  /* fp32 inputs: TF32 tensor cores allowed (CUDA forward only) */
} dattn_fp32_math;

typedef struct dattn_tensor {
    void *data;
    int64_t stride[4];
} dattn_tensor;

typedef struct dattn_params {
    int32_t abi_version;   /* DATTN_ABI_VERSION (set by dattn_params_init) */
    int32_t device;        /* dattn_device */
    int32_t device_index;  /* CUDA ordinal of the data; -1 = current device */
    int32_t dtype;         /* dattn_dtype of q, k, v, pk, pq, out and all gradients */
    int32_t layout;        /* dattn_layout */
    int32_t pos_att;       /* DATTN_POS_C2P | DATTN_POS_P2C, any subset */
    int32_t position_buckets;       /* > 0: log buckets; <= 0: linear positions */
    int32_t max_relative_positions; /* M >= 1 (resolve transformers' default first) */
    int32_t padded_rows;   /* dattn_padrows (padded layout only) */
    int32_t fp32_math;     /* dattn_fp32_math */
    int32_t num_threads;   /* CPU: worker threads, 0 = OpenMP default */
    int32_t reserved0;

    int64_t batch;         /* B: batch size (packed: number of sequences) */
    int64_t seqlen;        /* L: padded length (packed: max_seqlen, >= every length) */
    int64_t heads;         /* H */
    int64_t head_dim;      /* D */
    int64_t total_tokens;  /* T (packed only) */

    dattn_tensor q, k, v;  /* inputs */
    dattn_tensor pk, pq;   /* [H, 2S, D], S = dattn_att_span(...) */
    dattn_tensor mask;     /* padded only; data NULL = every token valid */
    const int32_t *cu_seqlens; /* packed only; on the call's device */
    dattn_tensor out;      /* forward output; backward input */
    dattn_tensor lse;      /* forward output (data may be NULL in forward); bwd input */

    float dropout_p;       /* probability of dropping an attention probability, [0,1) */
    int32_t reserved1;
    uint64_t dropout_seed;   /* counter-based RNG key (see DROPOUT below) */
    uint64_t dropout_offset; /* counter offset, advanced by the caller per call */

    dattn_tensor dout;                 /* backward input */
    dattn_tensor dq, dk, dv, dpk, dpq; /* backward outputs (dpk/dpq: needed only for the
                                          terms that are on; NULL otherwise) */

    void *workspace;        /* >= the queried size, 256-byte aligned, call's device */
    size_t workspace_size;
    void *stream;           /* CUDA: cudaStream_t (NULL = legacy default stream) */
} dattn_params;

/*
 * DROPOUT (training). With dropout_p > 0, attention probability (b, h, i, j) — b the
 * batch index (packed: sequence index), h the head, i and j the query and key
 * positions inside their sequence — is kept iff  u >= floor(dropout_p * 2^16),  where
 * u is the 16-bit half (j & 1) (0: the low 16 bits) of output word ((j >> 1) & 3) of
 * Philox4x32-10 (Salmon et al., Random123) with
 *   key     = ( lo32(seed), hi32(seed) ^ hi32(offset) )
 *   counter = ( j >> 3, i, b * H + h, lo32(offset) ),
 * so one Philox call decides 8 consecutive keys, and kept probabilities are scaled by
 * 1 / (1 - dropout_p). The rate is thus dropout_p rounded down to a multiple of 2^-16;
 * dropout_p < 2^-16 (threshold 0) is no dropout at all (no draw, no scaling). Forward
 * and backward regenerate the same mask; nothing is stored. dattn_dropout_keep() below
 * is this definition, exported for tests and for other implementations.
 */

/* Fill *p with defaults: CPU, fp32, padded, c2p|p2c, position_buckets 256,
 * max_relative_positions 512, HF padded rows, IEEE fp32 math, all pointers NULL. */
DATTN_API void dattn_params_init(dattn_params *p);

DATTN_API dattn_status dattn_fwd_workspace_size(const dattn_params *p, size_t *bytes);
DATTN_API dattn_status dattn_bwd_workspace_size(const dattn_params *p, size_t *bytes);

/* Forward: reads q, k, v, pk/pq (terms that are on), mask or cu_seqlens; writes out
 * and (if lse.data != NULL) lse. */
DATTN_API dattn_status dattn_fwd(const dattn_params *p);

/* Backward: reads q, k, v, pk/pq, mask or cu_seqlens, out, lse, dout; writes dq, dk,
 * dv and dpk (if c2p is on) and dpq (if p2c is on). */
DATTN_API dattn_status dattn_bwd(const dattn_params *p);

DATTN_API const char *dattn_status_string(dattn_status s);
/* Message of the last failed call on this thread ("" if none). */
DATTN_API const char *dattn_last_error(void);

DATTN_API const char *dattn_version(void);  /* "0.1.0" */
/* sizeof(dattn_params) as compiled into the library (FFI bindings check their mirror). */
DATTN_API size_t dattn_params_sizeof(void);
/* One line: version, CPU kernel ISA, CUDA architectures compiled in (if any). */
DATTN_API const char *dattn_build_info(void);

/* DATTN_OK when `device` can run here: always for the CPU; for CUDA when the library
 * was built with CUDA and device_index (-1: current) is a GPU the kernels support.
 * Otherwise UNSUPPORTED with the reason in dattn_last_error(). */
DATTN_API dattn_status dattn_device_supported(int32_t device, int32_t device_index);

/* S (att_span): position_buckets if > 0, else max_relative_positions. */
DATTN_API int32_t dattn_att_span(int32_t position_buckets, int32_t max_relative_positions);
/* The softmax scale: float32 sqrt(head_dim * (1 + #terms on)). */
DATTN_API float dattn_scale(int64_t head_dim, int32_t pos_att);

/* slot(r) for r = r0 .. r0 + count - 1 into out[count], exactly as transformers'
 * make_log_bucket_position (float32) followed by clamp(. + S, 0, 2S - 1). */
DATTN_API dattn_status dattn_slots(int32_t position_buckets, int32_t max_relative_positions,
                                   int64_t r0, int64_t count, int32_t *out);

/* 1 if attention probability (b, h, i, j) is kept under dropout, else 0. */
DATTN_API int dattn_dropout_keep(uint64_t seed, uint64_t offset, float dropout_p,
                                 int64_t b, int64_t h, int64_t heads, int64_t i, int64_t j);

#ifdef __cplusplus
}
#endif
#endif /* DATTN_H */
