#include <stdio.h>
#include <stdlib.h>
/* Bank-conflict search for the ws band tile's D scratch (src/cuda/ws_band.cuh, NOTES "The band
 * gathers as one store per element"): address = row * P + (col ^ f[row & 7]) floats, pitch P in
 * 64..96, f an XOR swizzle of the column by the row mod 8 (f[0] = 0, values 0..63 in steps FS),
 * found by backtracking. A layout passes when every warp instruction of the chosen access
 * patterns (bit 1: the G gather's stores, row q, column q - 2c + K; bit 2: the H gather's stores,
 * row q + 2c + K', column C0 + q; bit 4: ws_add_d's LDS.64 reads, each half-warp) touches 32
 * distinct banks, for every offset. Usage: bank_search PATTERN_BITS FS; prints up to 3 layouts
 * per pitch and a count line. Built with gcc -O2. */
static int P, f[8], FS, pats;
static int bank(int row, int col) { return (row * P + (col ^ f[row & 7])) & 31; }
static int ok(int nq) { /* constraints among lanes whose rows' q < nq (pattern 1, 3); pattern 2 only when nq == 8 */
  if (pats & 1) for (int K = 0; K < 64; K++) { unsigned m = 0;
    for (int q = 0; q < nq; q++) for (int c = 0; c < 4; c++) { int b = bank(q, (q - 2*c + K) & 63); if (m >> b & 1) return 0; m |= 1u << b; } }
  if (pats & 4) for (int nb = 0; nb < 8; nb++) for (int hq = 0; hq < 2; hq++) { unsigned m = 0;
    for (int q = 4*hq; q < 4*hq+4 && q < nq; q++) for (int c = 0; c < 4; c++) for (int e = 0; e < 2; e++) { int b = bank(q, 8*nb + 2*c + e); if (m >> b & 1) return 0; m |= 1u << b; } }
  if ((pats & 2) && nq == 8) for (int K = 0; K < 64; K++) for (int C0 = 0; C0 < 64; C0 += 8) { unsigned m = 0;
    for (int q = 0; q < 8; q++) for (int c = 0; c < 4; c++) { int b = bank((q + 2*c + K) & 63, C0 + q); if (m >> b & 1) return 0; m |= 1u << b; } }
  return 1;
}
static long found;
static void rec(int q) {
  if (q == 8) { if (found++ < 3) { printf("P %d f", P); for (int i = 0; i < 8; i++) printf(" %d", f[i]); printf("\n"); } return; }
  for (int v = 0; v < 64; v += FS) { f[q] = v; if (ok(q + 1)) rec(q + 1); if (found > 1000) return; }
}
int main(int argc, char **argv) {
  pats = argc > 1 ? atoi(argv[1]) : 7; FS = argc > 2 ? atoi(argv[2]) : 2;
  long total = 0;
  for (P = 64; P <= 96; P++) { found = 0; f[0] = 0; rec(1); if (found) printf("P %d: %ld%s\n", P, found, found > 1000 ? "+" : ""); total += found; }
  printf("patterns %d, step %d: %ld layouts found over pitches 64..96\n", pats, FS, total);
  return 0;
}
