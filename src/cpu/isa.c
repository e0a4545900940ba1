/* Choice of the CPU kernel family at run time.
 *
 * "avx512" needs AVX-512 F/BW/VL/DQ (+ the OS saving zmm state, which
 * __builtin_cpu_supports checks); "avx2" needs AVX2, FMA and F16C; "portable" runs
 * anywhere. The first use takes DATTN_CPU_ISA from the environment ("portable", "avx2",
 * "avx512", "auto" or empty = the best this CPU has); a value naming a family this
 * build or CPU cannot run makes every CPU call fail with DATTN_UNSUPPORTED (saying so)
 * rather than silently running something else. dattn_cpu_set_isa() overrides it. */
#include "cpu.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Atomic(const dattn_cpu_kernels *) g_active;
static pthread_once_t g_env_once = PTHREAD_ONCE_INIT;
static const dattn_cpu_kernels *g_env_kernels; /* written once, under g_env_once */
static char g_env_error[200];

static int has_avx512(void)
{
#if defined(DATTN_CPU_X86) && defined(__GNUC__)
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
    return 0;
#endif
}

static int has_avx2(void)
{
#if defined(DATTN_CPU_X86) && defined(__GNUC__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
           __builtin_cpu_supports("f16c");
#else
    return 0;
#endif
}

static const dattn_cpu_kernels *best(void)
{
#ifdef DATTN_CPU_X86
    if (has_avx512()) return &dattn_cpu_kernels_avx512;
    if (has_avx2()) return &dattn_cpu_kernels_avx2;
#endif
    return &dattn_cpu_kernels_portable;
}

/* The family called `name`, or NULL with a reason in why[]. */
static const dattn_cpu_kernels *lookup(const char *name, char *why, size_t whylen)
{
    if (!name || !*name || !strcmp(name, "auto")) return best();
    if (!strcmp(name, "portable")) return &dattn_cpu_kernels_portable;
    if (!strcmp(name, "avx2") || !strcmp(name, "avx512")) {
#ifdef DATTN_CPU_X86
        int avx512 = name[3] == '5';
        if (avx512 ? has_avx512() : has_avx2())
            return avx512 ? &dattn_cpu_kernels_avx512 : &dattn_cpu_kernels_avx2;
        snprintf(why, whylen, "CPU kernel family '%s': this CPU lacks %s", name,
                 avx512 ? "AVX-512 F/BW/VL/DQ" : "AVX2/FMA/F16C");
#else
        snprintf(why, whylen, "CPU kernel family '%s' is not built for this architecture", name);
#endif
        return NULL;
    }
    snprintf(why, whylen,
             "unknown CPU kernel family '%.40s' (portable, avx2, avx512 or auto)", name);
    return NULL;
}

static void env_init(void)
{
    char why[160] = "";
    g_env_kernels = lookup(getenv("DATTN_CPU_ISA"), why, sizeof why);
    if (!g_env_kernels) snprintf(g_env_error, sizeof g_env_error, "DATTN_CPU_ISA: %s", why);
}

const dattn_cpu_kernels *dattn_cpu_kernels_active(void)
{
    const dattn_cpu_kernels *k = atomic_load(&g_active);
    if (k) return k;
    pthread_once(&g_env_once, env_init);
    if (g_env_kernels) {
        const dattn_cpu_kernels *expected = NULL;
        atomic_compare_exchange_strong(&g_active, &expected, g_env_kernels);
        return atomic_load(&g_active);
    }
    dattn_set_error(DATTN_UNSUPPORTED, "%s", g_env_error);
    return NULL;
}

const char *dattn_cpu_isa(void)
{
    const dattn_cpu_kernels *k = dattn_cpu_kernels_active();
    return k ? k->name : "none";
}

dattn_status dattn_cpu_set_isa(const char *name)
{
    char why[160] = "";
    const dattn_cpu_kernels *k = lookup(name, why, sizeof why);
    if (!k) return dattn_set_error(DATTN_UNSUPPORTED, "%s", why);
    atomic_store(&g_active, k);
    return DATTN_OK;
}
