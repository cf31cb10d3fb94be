#!/usr/bin/env python3
"""Renders a bench_wtconv JSON file (Google Benchmark, --benchmark_out) as markdown: a device block,
then one row per problem with lkjit's median time, GB/s, % of the copy bandwidth measured in the same
run, and ratios against cuDNN depthwise 5x5 / 7x7 and the tiled path measured in the same run.

    bench/report.py bench.json [--diff older.json]
"""
import json
import re
import sys


def medians(doc):
    out = {}
    for b in doc["benchmarks"]:
        if b.get("aggregate_name") not in (None, "median"):
            continue
        name = b["run_name"] if "run_name" in b else b["name"]
        name = re.sub(r"/(min_time|min_warmup_time|repeats|manual_time).*$", "", name)
        if b.get("error_occurred"):
            out[name] = {"error": b.get("error_message", "error")}
            continue
        ms = b["real_time"] * {"ms": 1, "us": 1e-3, "ns": 1e-6, "s": 1e3}[b.get("time_unit", "ms")]
        out[name] = {"ms": ms, "gbs": b.get("GB/s", 0) / 1e9, "copy": b.get("%copy", 0), "label": b.get("label", "")}
    return out


def best_layout(m, name):
    """The baseline's time in its best layout: the faster of the NCHW row and its /nhwc twin."""
    times = [m.get(n, {}).get("ms") for n in (name, name + "/nhwc")]
    times = [t for t in times if t]
    return min(times) if times else None


def main(argv):
    doc = json.load(open(argv[1]))
    old = medians(json.load(open(argv[argv.index("--diff") + 1]))) if "--diff" in argv else {}
    ctx = doc["context"]
    print(f"\n### WTConv forward ({ctx.get('gpu', '?')}, {ctx.get('arch', '?')}, {ctx.get('sm_count', '?')} SMs, "
          f"driver {ctx.get('driver', '?')}, NVRTC {ctx.get('nvrtc', '?')}, cuDNN {ctx.get('cudnn', '?')}; "
          f"copy {float(ctx.get('copy_GBps', 0)) / 1000:.2f} TB/s; {ctx.get('date', '')})\n")
    m = medians(doc)
    print("| dtype | B x C x H x W | L | lkjit ms | GB/s | %copy | tiled ms | dw5 ms | dw7 ms | vs dw5 | vs dw7 |"
          + (" vs old |" if old else ""))
    print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if old else ""))
    for name, r in m.items():
        if not name.startswith("wtconv_fwd/"):
            continue
        _, dt, shape, lv = name.split("/")
        if "error" in r:
            print(f"| {dt} | {shape} | {lv[1:]} | error: {r['error']} |")
            continue
        tiled = m.get(f"wtconv_fwd_tiled/{dt}/{shape}/{lv}", {}).get("ms")
        d5 = best_layout(m, f"cudnn_dw5_fwd/{dt}/{shape}")
        d7 = best_layout(m, f"cudnn_dw7_fwd/{dt}/{shape}")
        f = lambda v: f"{v:.3f}" if v else "-"
        ratio = lambda base: f"{base / r['ms']:.2f}x" if base else "-"
        row = (f"| {dt} | {shape} | {lv[1:]} | {r['ms']:.3f} | {r['gbs']:.0f} | {r['copy']:.0f}% | {f(tiled)} | {f(d5)} | "
               f"{f(d7)} | {ratio(d5)} | {ratio(d7)} |")
        if old:
            o = old.get(name, {}).get("ms")
            row += f" {o / r['ms']:.2f}x |" if o else " - |"
        print(row)
    print("\nRatios > 1 mean lkjit is faster. GB/s counts the 2N floor (read X, write out). dw5/dw7: cuDNN in the "
          "faster of NCHW and NHWC.")
    print("\n### WTConv training step (forward + backward, every gradient)\n")
    print("| dtype | B x C x H x W | L | lkjit train ms | bwd ms | bwd GB/s | dw5 train ms | dw7 train ms | vs dw5 | vs dw7 |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, r in m.items():
        if not name.startswith("wtconv_train/"):
            continue
        _, dt, shape, lv = name.split("/")
        if "error" in r:
            print(f"| {dt} | {shape} | {lv[1:]} | error: {r['error']} |")
            continue
        b = m.get(f"wtconv_bwd/{dt}/{shape}/{lv}", {})
        d5 = best_layout(m, f"cudnn_dw5_train/{dt}/{shape}")
        d7 = best_layout(m, f"cudnn_dw7_train/{dt}/{shape}")
        f = lambda v: f"{v:.3f}" if v else "-"
        ratio = lambda base: f"{base / r['ms']:.2f}x" if base else "-"
        print(f"| {dt} | {shape} | {lv[1:]} | {r['ms']:.3f} | {f(b.get('ms'))} | {b.get('gbs', 0):.0f} | {f(d5)} | {f(d7)} | "
              f"{ratio(d5)} | {ratio(d7)} |")
    print("\nbwd GB/s counts 3N (read X and dOut, write dX).")


if __name__ == "__main__":
    main(sys.argv)
