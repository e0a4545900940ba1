#!/usr/bin/env python3
"""Writes BENCHMARKS.md from the committed raw results (nothing is measured here).

  python3 bench/make_benchmarks_md.py [--results bench/results/issue7] [--out BENCHMARKS.md]

Reads <results>/bench.json (python -m dattn bench) and <results>/mnli.json (python -m dattn
mnli); either may be missing, and the page then says so and how to produce it. PNG plots
next to the JSON (bench_latency.png, bench_memory.png) are linked when present.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "python"))

from dattn.bench import groups, speedup  # noqa: E402  (pure functions: no torch needed)


def md_table(headers, rows):
    out = ["| " + " | ".join(map(str, headers)) + " |",
           "|" + "|".join(" --- " if i == 0 else " ---: " for i in range(len(headers))) + "|"]
    out += ["| " + " | ".join(map(str, r)) + " |" for r in rows]
    return "\n".join(out)


def env_lines(meta) -> list[str]:
    e = meta.get("env", {})
    keys = [("card", "GPU / CPU"), ("capability", "compute capability"), ("driver", "driver"),
            ("cuda", "CUDA (torch)"), ("torch", "torch"), ("transformers", "transformers"),
            ("triton", "triton"), ("disentangled-flash", "disentangled-flash"),
            ("flashdeberta", "flashdeberta"), ("library", "libdattn build"),
            ("git", "dattn commit"), ("python", "python")]
    lines = [f"- command: `{meta.get('command')}`", f"- date: {meta.get('date')}"]
    lines += [f"- {label}: {e.get(k) if e.get(k) is not None else 'not installed / n.a.'}"
              for k, label in keys]
    for part in meta.get("parts", []):
        lines.append(f"- cases the run above did not reach, from `{part['file']}`: command "
                     f"`{part['command']}`, date {part['date']}, dattn commit {part['git']}")
    return lines


def cell(r):
    if r is None:
        return "–"
    st = r["status"]
    if st == "ok":
        return f"{r['ms']:.2f}"
    if st == "oom":
        return "OOM"
    if st == "skipped":
        return "(OOM)" if str(r.get("reason", "")).startswith("OOM") else "skipped"
    return st


def bench_section(res, rel_dir) -> list[str]:
    meta = res["meta"]
    impls = [i for i in meta["impls"] if i not in meta.get("skipped_impls", {})]
    out = ["## Encoder benchmark (`python -m dattn bench`)", ""]
    out += env_lines(meta)
    out += [f"- model: DeBERTa-v3-base-shaped encoder, {meta['layers']} layers, vocabulary "
            f"{meta['vocab']}, random weights (seed {meta['seed']}), eval, inference_mode",
            f"- packed case: {meta['packed_rule']}",
            f"- timing: median of CUDA-event-timed repetitions after warm-up (about "
            f"{meta['target_s']} s of repetitions per measurement, at least 3); peak = "
            f"torch.cuda.max_memory_allocated over one call (weights and inputs included)",
            f"- sweep time: {meta.get('seconds', 0):.0f} s (case budget {meta.get('budget_s')} s)"]
    for name, why in meta.get("skipped_impls", {}).items():
        out.append(f"- **{name} skipped**: {why}")
    out.append("")
    for name in ("bench_latency.png", "bench_memory.png"):
        if (ROOT / rel_dir / name).exists():
            out += [f"![{name}]({rel_dir}/{name})", ""]
    others = [i for i in impls if i != "dattn"]
    if "dattn" in impls:
        out += ["### Geometric mean speed-up of dattn",
                "", "Other implementation's time / dattn's time, geometric mean over the L "
                "where both ran (n); > 1 means dattn is faster. `sdpa` is the floor (no "
                "position terms): there a value < 1 is expected.", ""]
        rows = []
        for (d, B, lay) in groups(res):
            row = [d, B, lay]
            for o in others:
                g, n = speedup(res, d, B, lay, o, "dattn")
                row.append("–" if g is None else f"{g:.2f}x (n={n})")
            rows.append(row)
        out += [md_table(["dtype", "B", "layout"] + others, rows), ""]
    idx = {(r["dtype"], r["B"], r["layout"], r["L"], r["impl"]): r for r in res["runs"]}
    out += ["### Latency (ms per forward, median) and peak memory (MB)", "",
            "OOM: out of memory; (OOM): not run, a shorter L ran out of memory; skipped: "
            "time budget or a call slower than the --slow limit at a shorter L.", ""]
    for (d, B, lay) in groups(res):
        Ls = sorted({r["L"] for r in res["runs"] if (r["dtype"], r["B"], r["layout"]) == (d, B, lay)})
        rows = []
        for L in Ls:
            rs = [idx.get((d, B, lay, L, i)) for i in impls]
            rows.append([L] + [cell(r) for r in rs] +
                        [f"{r['peak_mb']:.0f}" if r and r.get("peak_mb") else "–" for r in rs])
        out += [f"#### {d}, B={B}, {lay}", "",
                md_table(["L"] + [f"{i} ms" for i in impls] + [f"{i} MB" for i in impls], rows), ""]
    errs = [r for r in res["runs"] if r["status"] in ("error", "fallback")]
    if errs:
        out += ["### Errors and fallbacks", ""]
        out += [f"- {r['impl']} {r['dtype']} B={r['B']} L={r['L']} {r['layout']}: "
                f"{r.get('error') or r.get('path')}" for r in errs[:40]]
        out.append("")
    return out


def mnli_section(res) -> list[str]:
    meta = res["meta"]
    st = meta["lengths"]
    cfg = meta["config"]
    out = ["## MNLI-shaped end-to-end run (`python -m dattn mnli`)", ""]
    out += env_lines(meta)
    out += [f"- model: deberta-v2-xlarge-mnli architecture ({cfg['num_hidden_layers']} layers, "
            f"hidden {cfg['hidden_size']}, {cfg['num_attention_heads']} heads, FFN "
            f"{cfg['intermediate_size']}, conv kernel {cfg['conv_kernel_size']}, position "
            f"buckets {cfg['position_buckets']}, {cfg['num_labels']} labels), {meta['weights']}",
            f"- data: {st['n']} examples, lengths: {meta['length_model']}: mean {st['mean']:.1f}, "
            f"median {st['median']}, p90 {st['p90']}, p99 {st['p99']}, max {st['max']} tokens; "
            f"batches of {meta['batch']} padded to {st['pad_to']} "
            f"({100 * st['padding_at_pad_to']:.1f}% padding); {meta['dtype']}",
            f"- agreement: argmax per example against transformers; a disagreement passes "
            f"only as a near-tie (transformers' top-1 minus top-2 logit below the largest "
            f"|delta logit| seen)"]
    for name, why in meta.get("skipped", {}).items():
        out.append(f"- **{name} skipped**: {why}")
    out.append("")
    rows = []
    for name, r in res["runs"].items():
        if r.get("status") != "ok":
            rows.append([name, r.get("status"), "–", "–", "–", "–", "–", "–"])
            continue
        rows.append([name, r.get("path", r.get("layout")), f"{r['seconds']:.2f}",
                     f"{r.get('speedup_vs_transformers', 1):.2f}x",
                     f"{100 * r['agreement']:.2f}%" if "agreement" in r else "(reference)",
                     r.get("disagreements", "–"),
                     f"{r['max_abs_dlogit']:.3g}" if "max_abs_dlogit" in r else "–",
                     ("yes" if r["near_ties_only"] else "**NO**") if "near_ties_only" in r else "–"])
    out += [md_table(["implementation", "ran", "total s", "speed-up", "agreement",
                      "disagreements", "max abs dlogit", "only near-ties"], rows), ""]
    legend = {"dattn-padded": "`dattn.patch(model, mode=\"padded\")`: the padded batch, mask in the kernel",
              "dattn-packed": "`dattn.patch(model, mode=\"packed\")`: the batch's tokens packed "
                              "(cu_seqlens on the device), no work on the padding",
              "dattn-packed-graphs": "`dattn.patch(model, mode=\"packed\", cuda_graphs=True)`: packed, and the "
                                     "layers replayed as one CUDA graph per batch shape (no "
                                     "per-kernel launch cost from Python)",
              "disentangled-flash-packed": "the peer's `forward_packed` (its own pack / unpack timed too)"}
    notes = [f"- {n}: {legend[n]}" for n in res["runs"] if n in legend]
    if notes:
        out += ["What each row runs:", ""] + notes + [""]
    return out


def _key(r):
    return tuple(r.get(k) for k in ("dtype", "B", "layout", "L", "impl"))


def merge_parts(res, parts):
    """bench.json plus later runs of the same protocol over the cases the first one did
    not reach (bench-<part>.json, e.g. one dtype each: the device tool's calls are 10
    minutes): a case measured in a part replaces the case skipped in the main run. The
    parts' commands and dates are listed with the main run's."""
    if not parts:
        return res
    runs = {_key(r): r for r in res["runs"]}
    order = [_key(r) for r in res["runs"]]
    meta = dict(res["meta"])
    meta["parts"] = []
    for p in parts:
        part = json.loads(p.read_text())
        pm = part["meta"]
        meta["parts"].append(dict(file=p.name, command=pm.get("command"), date=pm.get("date"),
                                  git=pm.get("env", {}).get("git"), seconds=pm.get("seconds")))
        for r in part["runs"]:
            k = _key(r)
            if r.get("status") == "skipped" and k in runs:
                continue
            if k not in runs:
                order.append(k)
            runs[k] = r
        for i in pm.get("impls", []):
            if i not in meta["impls"]:
                meta["impls"].append(i)
        for d in pm.get("dtypes", []):
            if "dtypes" in meta and d not in meta["dtypes"]:
                meta["dtypes"].append(d)
    return dict(res, meta=meta, runs=[runs[k] for k in order])


HEAD_BEGIN = "<!-- headline: generated by bench/make_benchmarks_md.py -->"
HEAD_END = "<!-- /headline -->"


def headline(bench, mnli) -> list[str]:
    """The README's headline figures, from the same results as BENCHMARKS.md."""
    out = []
    if bench is not None:
        e = bench["meta"].get("env", {})
        parts = []
        for d, B, lay in groups(bench):
            if (d, B, lay) != ("fp16", 16, "padded"):
                continue
            for o in ("transformers", "disentangled-flash", "flashdeberta", "sdpa"):
                g, n = speedup(bench, d, B, lay, o, "dattn")
                if g is not None:
                    parts.append(f"{g:.2f}x vs {o}" if o != "sdpa"
                                 else f"{1 / g:.2f}x the time of the SDPA floor (no position terms)")
        if parts:
            out.append(f"- full v3-base encoder, fp16, B=16, L=64..8192 on an {e.get('card')} "
                       f"(geometric mean of time ratios): dattn is " + ", ".join(parts) + ".")
        for d, B, lay in groups(bench):
            if (d, B, lay) != ("fp32", 16, "padded"):
                continue
            g, n = speedup(bench, d, B, lay, "transformers", "dattn")
            if g is None:
                continue
            how = (f"{g:.2f}x vs transformers" if g >= 1
                   else f"{1 / g:.1f}x transformers' time")
            out.append(f"- fp32 without autocast: dattn runs an IEEE fp32 kernel on the CUDA cores "
                       f"(no tensor cores, no TF32): {how} at B=16 (geometric mean). "
                       f"fp16/bf16 autocast is the fast path on a GPU.")
        oom = sorted({r["L"] for r in bench["runs"] if r["impl"] == "transformers"
                      and r.get("status") == "oom"})
        if oom:
            out.append(f"- transformers runs out of memory from L={oom[0]} (B=16); dattn does not.")
    if mnli is not None:
        runs = mnli["runs"]
        t = runs.get("transformers", {})
        best = min((r for n, r in runs.items() if n.startswith("dattn") and r.get("status") == "ok"),
                   key=lambda r: r["seconds"], default=None)
        name = next((n for n, r in runs.items() if r is best), None)
        if best is not None and t.get("status") == "ok":
            ties = ("every disagreement a near-tie" if best.get("near_ties_only")
                    else "NOT every disagreement a near-tie")
            out.append(f"- MNLI-shaped run (deberta-v2-xlarge architecture, "
                       f"{mnli['meta']['lengths']['n']} examples, {mnli['meta']['dtype']}): "
                       f"transformers {t['seconds']:.1f} s, {name} {best['seconds']:.1f} s "
                       f"({t['seconds'] / best['seconds']:.1f}x), "
                       f"{100 * best['agreement']:.2f}% prediction agreement, {ties}.")
    return out


def update_readme(readme: Path, lines: list[str]) -> bool:
    text = readme.read_text()
    if HEAD_BEGIN not in text or HEAD_END not in text:
        return False
    a = text.index(HEAD_BEGIN) + len(HEAD_BEGIN)
    b = text.index(HEAD_END)
    body = "\n".join(lines) if lines else "(no benchmark results committed yet)"
    readme.write_text(text[:a] + "\n" + body + "\n" + text[b:])
    return True


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="bench/results/issue7")
    ap.add_argument("--out", default="BENCHMARKS.md")
    ap.add_argument("--readme", default=None,
                    help="README whose headline block (between the markers) is rewritten "
                         "(default: README.md when --results is the committed default)")
    a = ap.parse_args(argv)
    rdir = Path(a.results)
    rel = os.path.relpath(ROOT / rdir if not rdir.is_absolute() else rdir, ROOT)
    lines = ["# Benchmarks", "",
             "Generated by `python3 bench/make_benchmarks_md.py` from the raw results in "
             f"`{rel}/` (do not edit by hand). Every figure below is read from those JSON "
             "files, which hold every repetition, the card, driver, versions and command.",
             "Reproduce on a CUDA machine from a clean clone: `sh scripts/gpu_bench7.sh` (both "
             "runs; the peers are installed from wheels in `.whl/` when present), or "
             "`python -m dattn bench` and `python -m dattn mnli`.", ""]
    loaded = {}
    for fname, section in (("bench.json", bench_section), ("mnli.json", mnli_section)):
        p = ROOT / rel / fname
        if not p.exists():
            what = "encoder benchmark" if fname == "bench.json" else "MNLI-shaped run"
            lines += [f"## {what}", "", f"No results committed yet (`{rel}/{fname}` is missing).",
                      ""]
            continue
        res = json.loads(p.read_text())
        if fname == "bench.json":
            parts = sorted((ROOT / rel).glob("bench-*.json"))
            res = merge_parts(res, parts)
            if parts:  # the plots show the merged cases too
                try:
                    from dattn.bench import plot

                    plot(res, ROOT / rel)
                except ImportError as e:  # no matplotlib: keep the main run's plots
                    print(f"plots not redrawn ({e})")
        loaded[fname] = res
        lines += section(res, rel) if section is bench_section else section(res)
    text = "\n".join(lines).rstrip() + "\n"
    out = Path(a.out)
    if not out.is_absolute():
        out = ROOT / out
    out.write_text(text)
    print(f"wrote {out}")
    if a.readme is None and a.results != ap.get_default("results"):
        return 0
    readme = Path(a.readme or "README.md")
    if not readme.is_absolute():
        readme = ROOT / readme
    if readme.exists() and update_readme(readme, headline(loaded.get("bench.json"),
                                                          loaded.get("mnli.json"))):
        print(f"updated the headline block of {readme}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
