/* CK(x): a CUDA runtime call in a GPU test; on failure print where and what, exit(1). */
#ifndef DATTN_TESTS_TCUDA_H
#define DATTN_TESTS_TCUDA_H
#include <stdio.h>
#include <stdlib.h>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#endif
