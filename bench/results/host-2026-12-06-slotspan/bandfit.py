"""The backward's extra cost of a saturated / band tile over a plain one (NOTES.md, "Correction:
the band tiles, not the saturated ones, are the lever at L2048" and "What the ncu profile says
about the backward at B8 L2048"), from committed figures and slotspan.c's band shares:

  t = nopos + es (1 - f) + eb f + Fp      (f: band share; Fp: fixed passes, set to 0 / 0.05 / 0.1 ms)

1. H200, the bench's backward times (gpu-2026-12-04-main8a02/call2-train/gc/bwd_bench.json):
   least squares at each L over the three configurations with position terms.
2. H100, ncu durations per kernel at B8 L2048 (gpu-2026-12-06-h100b/prof-satmost/summary.txt;
   its kernels in profile order: default, nopos, satmost), solved exactly with Fp = 0.

    python3 bench/results/host-2026-12-06-slotspan/bandfit.py > bench/results/host-2026-12-06-slotspan/bandfit.txt
"""
import json
import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
RES = os.path.dirname(HERE)
# band shares (slotspan.c's run.txt): satmost, band256, default
SHARE = {512: (0.344, 0.812, 1.0), 2048: (0.092, 0.262, 0.461), 8192: (0.023, 0.069, 0.128)}


def fit(nopos, times, shares, fp):
    """Least squares for (es, eb) with y = t - nopos - fp = es (1 - f) + eb f; returns es, eb, residuals."""
    s11 = s12 = s22 = b1 = b2 = 0.0
    for t, f in zip(times, shares):
        y, a1, a2 = t - nopos - fp, 1 - f, f
        s11, s12, s22, b1, b2 = s11 + a1 * a1, s12 + a1 * a2, s22 + a2 * a2, b1 + a1 * y, b2 + a2 * y
    d = s11 * s22 - s12 * s12
    es, eb = (b1 * s22 - b2 * s12) / d, (s11 * b2 - s12 * b1) / d
    return es, eb, [t - nopos - fp - es * (1 - f) - eb * f for t, f in zip(times, shares)]


def main():
    rows = json.load(open(os.path.join(RES, "gpu-2026-12-04-main8a02/call2-train/gc/bwd_bench.json")))["rows"]
    print("1. H200 bwd_bench (ms): es, eb; the default's saturated and band parts")
    for r in rows:
        L, f = r["L"], SHARE[r["L"]]
        times = (r["dattn_satmost_bwd_ms"], r["dattn_band256_bwd_ms"], r["dattn_bwd_ms"])
        for fp in (0.0, 0.05, 0.1):
            es, eb, res = fit(r["dattn_nopos_bwd_ms"], times, f, fp)
            print(f"  L {L} Fp {fp:.2f}: nopos {r['dattn_nopos_bwd_ms']:.3f} es {es:.3f} eb {eb:.3f} "
                  f"max |resid| {max(abs(x) for x in res):.3f}; default bwd {r['dattn_bwd_ms']:.3f}: "
                  f"saturated {es * (1 - f[2]):.3f} band {eb * f[2]:.3f}")
    txt = open(os.path.join(RES, "gpu-2026-12-06-h100b/prof-satmost/summary.txt")).read()
    print("2. H100 ncu B8 L2048 (us): per kernel, default / satmost / nopos; extra per tile over plain")
    fd, fs = SHARE[2048][2], SHARE[2048][0]
    for k in ("kv0", "kv1"):
        us = [float(m) * (1000.0 if u == "ms" else 1.0)
              for m, u in re.findall(r"dattn_bwd_ws_f16_d64_" + k + r" \| Duration=([\d.]+) (ms|us)", txt)]
        dflt, nopos, sat = us  # profile order: default, nopos, satmost
        es, eb, _ = fit(nopos, (dflt, sat), (fd, fs), 0.0)  # (two equations: the exact solution)
        print(f"  {k}: {dflt:.0f} / {sat:.0f} / {nopos:.0f}; saturated +{100 * es / nopos:.0f} %, "
              f"band +{100 * eb / nopos:.0f} %; the default's saturated part {es * (1 - fd):.0f}, band part {eb * fd:.0f}")


if __name__ == "__main__":
    main()
