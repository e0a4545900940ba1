#include "../src/cuda/tma.cuh"
#include <chrono>
#include <stdio.h>
int main() {
  void *p; cudaMalloc(&p, 64ull << 20);
  CUtensorMap m; int rf;
  cudaError_t e = dattn_tma_rows_map(&m, &rf, p, 8, 2048, 12, 2048ll * 12 * 64, 12 * 64, 64, 32);
  printf("first encode: %s\n", cudaGetErrorString(e));
  for (int rep = 0; rep < 3; rep++) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 10000; i++) dattn_tma_rows_map(&m, &rf, (char *)p + 16 * (i & 7), 8, 2048, 12, 2048ll * 12 * 64, 12 * 64, 64, 32);
    auto t1 = std::chrono::steady_clock::now();
    printf("encode: %.3f us each\n", std::chrono::duration<double, std::micro>(t1 - t0).count() / 10000);
  }
  return 0;
}
