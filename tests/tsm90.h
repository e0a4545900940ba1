/* tsm90_need: the gate of the sm_90a GPU unit tests (tests/test_*.cu): 0 on a compute
 * capability 9.0 device, else prints why and returns 77 (skipped). */
#ifndef DATTN_TESTS_TSM90_H
#define DATTN_TESTS_TSM90_H
#include <cuda_runtime.h>
#include <stdio.h>

#include "tcuda.h"

static inline int tsm90_need(const char *what)
{
    int ndev = 0, major = 0, minor = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
    CK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0));
    if (major != 9 || minor != 0) {
        printf("compute capability %d.%d: %s (sm_90a) needs 9.0: skipped\n", major, minor, what);
        return 77;
    }
    return 0;
}

#endif
