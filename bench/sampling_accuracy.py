#!/usr/bin/python3
"""bench/sampling_accuracy.py: how close sampled recording's estimates come to the truth.

usage: bench/sampling_accuracy.py [--build-dir DIR] [--interval SIZE] [--runs N]
                                  [--requests N] [--leak-seconds S] [--size-seconds S]
                                  [--service-allocs N] [--skip PART[,PART]]

Parts (each can be skipped with --skip):
  accuracy  the example worker on a fixed amount of work (--requests, one thread, so the same
            allocations every run) recorded once exactly and --runs times sampled with seeds
            1..N: total bytes allocated, each stack holding at least 5% of the bytes, the peak.
  leak      --runs sampled runs of the worker for --leak-seconds each: in how many is its slow
            leak (write_audit_line) among the leaks, on its stack.
  size      the worker for --size-seconds exactly and sampled: the traces' sizes per request.
  service   the worker paced to --service-allocs allocations a second for --size-seconds,
            sampled: the trace's size, and that size over a day.
Prints one markdown document (medians, the 2.5th..97.5th percentiles of the runs as the 95%
interval, the bounds of the targets); progress on stderr.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log(msg):
    print(f"sampling: {msg}", file=sys.stderr, flush=True)


def run(argv, **kw):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: exit {r.returncode}\n{r.stderr}")
    return r


def record(ctx, out, worker_args, sample=None, seed=None):
    argv = [ctx.memtide, "run", "-q", "-o", out]
    if sample:
        argv += ["--sample", sample]
    if seed is not None:
        argv += ["--sample-seed", str(seed)]
    r = run(argv + ["--", ctx.worker] + worker_args)
    return r.stdout


def report(ctx, trace):
    return json.loads(run([ctx.memtide, "report", "--json", "--top", "100", trace]).stdout)


FUNCTIONS = ("remember_session", "write_audit_line", "parse_request", "build_response")


def function_of(stack):
    for f in stack:
        for name in FUNCTIONS:
            if name in (f.get("function") or ""):
                return name
    return "(other)"


def by_function(rep):
    out = {}
    for item in rep["top_allocators"]:
        k = function_of(item["stack"])
        out[k] = out.get(k, 0) + item["bytes"]
    return out


def interval95(values):
    v = sorted(values)
    if len(v) < 2:
        return (v[0], v[0]) if v else (None, None)
    lo = v[max(0, int(round(0.025 * (len(v) - 1))))]
    hi = v[min(len(v) - 1, int(round(0.975 * (len(v) - 1))))]
    return lo, hi


def pct(x):
    return f"{(x - 1) * 100:+.1f}%"


def accuracy(ctx, out):
    args = ["--threads", "1", "--requests", str(ctx.requests)]
    exact = os.path.join(ctx.dir, "exact.mtide")
    log(f"accuracy: exact run, {ctx.requests:,} requests")
    record(ctx, exact, args)
    e = report(ctx, exact)
    e_fn = by_function(e)
    total = e["total_allocated_bytes"]
    big = [k for k, v in e_fn.items() if k != "(other)" and v >= 0.05 * total]
    totals, peaks, stacks = [], [], {k: [] for k in big}
    covered = 0
    for seed in range(1, ctx.runs + 1):
        t = os.path.join(ctx.dir, f"sampled.{seed}.mtide")
        record(ctx, t, args, ctx.interval, seed)
        s = report(ctx, t)
        totals.append(s["total_allocated_bytes"] / total)
        peaks.append(s["peak_bytes"] / e["peak_bytes"])
        if abs(s["total_allocated_bytes"] - total) <= s["sampling"]["allocated_bytes_ci95"]:
            covered += 1
        s_fn = by_function(s)
        for k in big:
            stacks[k].append(s_fn.get(k, 0) / e_fn[k])
        os.unlink(t)
        log(f"accuracy: seed {seed}: total {pct(totals[-1])}, peak {pct(peaks[-1])}")
    out.append(f"### Accuracy: the example worker, {ctx.requests:,} requests on one thread, "
               f"{ctx.runs} sampled runs at {ctx.interval} against one exact run")
    out.append("")
    out.append(f"Exact: {total / 2**20:,.0f} MiB allocated in {e['total_allocations']:,} allocations, "
               f"peak {e['peak_bytes'] / 2**20:.2f} MiB.")
    out.append("")
    out.append("| figure | target | median | 95% of runs within | runs within target |")
    out.append("|---|---|---|---|---|")

    def row(name, target, vals):
        lo, hi = interval95(vals)
        inside = sum(1 for v in vals if abs(v - 1) <= target)
        out.append(f"| {name} | ±{target * 100:.0f}% | {pct(statistics.median(vals))} | "
                   f"{pct(lo)} .. {pct(hi)} | {inside} of {len(vals)} |")

    row("total bytes allocated", 0.02, totals)
    for k in big:
        row(f"bytes of {k} ({e_fn[k] / total * 100:.0f}% of all)", 0.10, stacks[k])
    row("peak", 0.05, peaks)
    out.append("")
    out.append(f"The report's 95% interval of the total covered the exact figure in {covered} of "
               f"{ctx.runs} runs.")
    out.append("")
    os.unlink(exact)


def leak(ctx, out):
    found = 0
    estimates = []
    for seed in range(1, ctx.runs + 1):
        t = os.path.join(ctx.dir, f"leak.{seed}.mtide")
        record(ctx, t, ["--seconds", str(ctx.leak_seconds)], ctx.interval, seed)
        s = report(ctx, t)
        hit = [x for x in s["leaks"] if function_of(x["stack"]) == "write_audit_line"]
        if hit:
            found += 1
            estimates.append(hit[0]["bytes"])
        log(f"leak: seed {seed}: {'found' if hit else 'missed'}")
        os.unlink(t)
    out.append(f"### The worker's slow leak, {ctx.runs} sampled runs of {ctx.leak_seconds} s at "
               f"{ctx.interval}")
    out.append("")
    out.append(f"Found on its stack (write_audit_line) in {found} of {ctx.runs} runs (target: 19 of "
               "20)" + (f"; estimated leak median {statistics.median(estimates) / 1024:.0f} KiB." if estimates else "."))
    out.append("")


def size(ctx, out):
    sizes = {}
    for mode, sample in (("exact", None), ("sampled", ctx.interval)):
        t = os.path.join(ctx.dir, f"size.{mode}.mtide")
        stdout = record(ctx, t, ["--seconds", str(ctx.size_seconds)], sample)
        requests = int(stdout.split()[1])
        sizes[mode] = (os.path.getsize(t), requests)
        log(f"size: {mode}: {sizes[mode][0]:,} bytes, {requests:,} requests")
        os.unlink(t)
    per = {m: s / r for m, (s, r) in sizes.items()}
    out.append(f"### Trace size: the example worker for {ctx.size_seconds} s")
    out.append("")
    out.append("| mode | trace | requests | bytes per request |")
    out.append("|---|---|---|---|")
    for m, (s, r) in sizes.items():
        out.append(f"| {m} | {s / 1e6:.2f} MB | {r:,} | {per[m]:.2f} |")
    out.append("")
    out.append(f"Sampled over exact, per request: 1/{per['exact'] / per['sampled']:.0f} "
               f"(whole files: 1/{sizes['exact'][0] / sizes['sampled'][0]:.0f}; target 1/100).")
    out.append("")


def service(ctx, out):
    # Allocations per request of the worker, from a short exact run.
    t = os.path.join(ctx.dir, "probe.mtide")
    record(ctx, t, ["--threads", "1", "--requests", "20000"])
    per_request = report(ctx, t)["total_allocations"] / 20000
    os.unlink(t)
    rate = ctx.service_allocs / per_request
    t = os.path.join(ctx.dir, "service.mtide")
    record(ctx, t, ["--seconds", str(ctx.size_seconds), "--rate", f"{rate:.1f}"], ctx.interval)
    s = report(ctx, t)
    bytes_ = os.path.getsize(t)
    allocs_per_s = s["total_allocations"] / (s["duration_ns"] / 1e9)
    day = bytes_ / (s["duration_ns"] / 1e9) * 86400
    log(f"service: {bytes_:,} bytes in {s['duration_ns'] / 1e9:.1f} s, ~{allocs_per_s:,.0f} allocations/s")
    os.unlink(t)
    out.append(f"### A service at {ctx.service_allocs:,} allocations a second, sampled at {ctx.interval}")
    out.append("")
    out.append(f"The worker paced to {rate:,.0f} requests a second ({per_request:.1f} allocations each; "
               f"estimated from the trace: {allocs_per_s:,.0f} allocations a second) for "
               f"{s['duration_ns'] / 1e9:.0f} s wrote {bytes_ / 1e6:.2f} MB: {day / 1e6:.0f} MB a day "
               "(target: under 100 MB).")
    out.append("")


def main(argv):
    p = argparse.ArgumentParser(prog="bench/sampling_accuracy.py")
    p.add_argument("--build-dir", default=os.path.join(REPO, "build"))
    p.add_argument("--interval", default="512KiB")
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--requests", type=int, default=3000000)
    p.add_argument("--leak-seconds", type=int, default=30)
    p.add_argument("--size-seconds", type=int, default=60)
    p.add_argument("--service-allocs", type=int, default=100000)
    p.add_argument("--skip", default="")
    ctx = p.parse_args(argv)
    ctx.memtide = os.path.join(ctx.build_dir, "bin", "memtide")
    ctx.worker = os.path.join(ctx.build_dir, "bin", "memtide-example-worker")
    skip = set(x for x in ctx.skip.split(",") if x)
    out = [f"## Sampled recording at {ctx.interval}", ""]
    with tempfile.TemporaryDirectory(prefix="memtide-sampling-") as d:
        ctx.dir = d
        for name, part in (("accuracy", accuracy), ("leak", leak), ("size", size), ("service", service)):
            if name not in skip:
                part(ctx, out)
    print("\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
