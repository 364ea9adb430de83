"""bench/benchreport.py: the statistics, targets and markdown of bench/run (imported by it).

Sections: [constants] [statistics and targets] [markdown]
"""

import datetime
import os
import platform
import re
import statistics
import subprocess

# ---- [constants] -----------------------------------------------------------------------------

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
GIB = 1 << 30
ALL_TOOLS = ["untraced", "memtide", "sampled", "sampled-preload", "floor", "heaptrack",
             "heaptrack-raw", "massif"]
# sampled: `memtide run --sample` at jemalloc's default interval. sampled-preload: the same
# recording with libmemtide.so set in LD_PRELOAD by hand (MEMTIDE_SAMPLE), without the wrapper
# and its follower, whose start and final naming are a cost per run, not per event. floor: the
# same shims built with the heap hooks compiled out (build/lib/libmemtide-floor.so in
# LD_PRELOAD), forwarding every call without recording: the cost of interposing itself, which
# no mode can go below.
SAMPLE_INTERVAL = "512KiB"


# ---- [statistics and targets] ----------------------------------------------------------------

def summary(samples, attr):
    vals = [getattr(s, attr) for s in samples]
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals)}


def ratio(a, b):
    return a / b if a is not None and b not in (None, 0) else None


def derive(res):
    """Medians, ratios and per-event costs of one workload's result."""
    st = {t: {"wall": summary(s, "wall"), "cpu": summary(s, "cpu"),
              "maxrss_mib": summary(s, "maxrss_kib")}
          for t, s in res["samples"].items() if s}
    for t in st:
        st[t]["maxrss_mib"] = {k: v / 1024 for k, v in st[t]["maxrss_mib"].items()}
    d = {"stats": st}
    un = st.get("untraced")
    for t in st:
        for m in ("wall", "cpu"):
            d[f"{t}/untraced {m}"] = ratio(st[t][m]["median"], un[m]["median"]) if un else None
    mt, ht, raw = st.get("memtide"), st.get("heaptrack"), st.get("heaptrack-raw")
    fixed = res.get("fixed_duration")
    for m in ("wall", "cpu"):
        d[f"memtide/heaptrack {m}"] = ratio(mt[m]["median"], ht[m]["median"]) if mt and ht else None
        for key, other in (("overhead ratio", ht), ("raw overhead ratio", raw)):
            d[f"{key} {m}"] = None
            if mt and other and un:
                mo = mt[m]["median"] - un[m]["median"]
                ho = other[m]["median"] - un[m]["median"]
                d[f"{key} {m}"] = mo / ho if ho > 0 else None
    # Overhead per event of the last counted run. For a fixed-duration workload the medians are
    # µs per unit of work: the overhead per unit times the units that run did, over its events.
    def per_event(tool, events):
        if not (events and un and st.get(tool)):
            return None
        over = st[tool]["cpu"]["median"] - un["cpu"]["median"]
        if fixed:
            return over * 1e3 * res["samples"][tool][-1].work / events
        return over * 1e9 / events

    ev = res.get("memtide_trace")
    d["memtide ns/event cpu"] = per_event("memtide", ev and ev["events"])
    d["heaptrack ns/call cpu"] = per_event("heaptrack", res.get("heaptrack_calls"))
    return d


def trace_units(r, tool):
    """Units of work done by the run whose trace was kept (the last counted one) of a workload
    that runs for a set time; None for the others. Its traces, and the reports made from them,
    are compared per unit: a faster tracer's run does more work in the same time."""
    if not r.get("fixed_duration"):
        return None
    s = r.get("samples", {}).get(tool)
    return s[-1].work if s and s[-1].work else None


def size_ratio(r):
    """memtide's trace size over heaptrack's (per unit of work for a fixed-duration workload)."""
    mt, hs = r.get("memtide_trace"), r.get("heaptrack_size")
    if not (mt and hs and mt.get("size")):
        return None
    if r.get("fixed_duration"):
        mu, hu = trace_units(r, "memtide"), trace_units(r, "heaptrack")
        return (mt["size"] / mu) / (hs / hu) if mu and hu else None
    return mt["size"] / hs


def report_ratio(r):
    """heaptrack_print's wall time over memtide report's (per unit of work for a fixed-duration
    workload)."""
    rep = r.get("report_stats", {})
    m, h = rep.get("memtide report"), rep.get("heaptrack_print")
    if not (m and h):
        return None
    v = h["wall"]["median"] / m["wall"]["median"]
    if r.get("fixed_duration"):
        mu, hu = trace_units(r, "memtide"), trace_units(r, "heaptrack")
        return v * mu / hu if mu and hu else None
    return v


def check_targets(results):
    """[(target, workload, measured, verdict)] for the issue's targets."""
    rows = []
    by = {r["name"]: r for r in results if "derived" in r}

    def verdict(ok):
        return "n/a" if ok is None else ("met" if ok else "**MISSED**")

    def fmt(x, suffix="x"):
        return "n/a" if x is None else f"{x:.2f}{suffix}"

    limits = {"churn-1t": 2.0, "churn-work": 2.0, "sqlite3": 1.3, "python3": 1.3, "gxx": 1.3}
    for name, limit in limits.items():
        if name not in by:
            continue
        d = by[name]["derived"]
        for m in ("wall", "cpu"):
            v = d.get(f"memtide/untraced {m}")
            rows.append((f"memtide <= {limit}x untraced ({m})", name, fmt(v),
                         verdict(None if v is None else v <= limit)))
    base = by.get("churn-1t", {}).get("derived", {}).get("memtide ns/event cpu")
    # A worker's one thread costs what a lone main thread does (within 10%); threads that record
    # at the same time at most 1.3x (recording CPU per event: traced CPU minus untraced).
    for name, limit, what in (("churn-pool", 1.1, "one worker thread"), ("churn-2t", 1.3, "2 threads"),
                              ("churn-4t", 1.3, "4 threads")):
        if name in by and base:
            v = by[name]["derived"].get("memtide ns/event cpu")
            rows.append((f"CPU per event on {what} <= {limit}x the 1-thread {base:.0f} ns", name, fmt(v, " ns"),
                         verdict(None if v is None else v <= limit * base)))
    for name, r in by.items():
        d = r["derived"]
        for m in ("wall", "cpu"):
            v = d.get(f"overhead ratio {m}")
            missing = "heaptrack" not in r["samples"]
            rows.append((f"memtide overhead <= 1/3 of heaptrack's ({m})", name,
                         "heaptrack failed" if missing else fmt(v),
                         verdict(None if v is None else v <= 1 / 3)))
    for name, r in by.items():
        v = report_ratio(r)
        if v is not None:
            rows.append(("memtide report >= 3x faster than heaptrack_print" +
                         (" (per unit of work)" if r.get("fixed_duration") else ""), name, fmt(v),
                         verdict(v >= 3.0)))
    return rows


# ---- [markdown] ------------------------------------------------------------------------------

def fmt_range(s, digits=2):
    return f"{s['median']:.{digits}f} ({s['min']:.{digits}f}–{s['max']:.{digits}f})"


def fmt_bytes(n):
    if n is None:
        return "n/a"
    for unit, scale in (("GiB", GIB), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def fmt_x(x):
    return "n/a" if x is None else f"{x:.2f}x"


def machine_info(ctx):
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.*)$", f.read(), re.M)
            model = m.group(1).strip() if m else model
    except OSError:
        pass
    mem = "unknown"
    try:
        with open("/proc/meminfo") as f:
            m = re.search(r"^MemTotal:\s*(\d+) kB", f.read(), re.M)
            mem = fmt_bytes(int(m.group(1)) * 1024) if m else mem
    except OSError:
        pass

    def version(argv):
        try:
            r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                               timeout=30)
            return r.stdout.strip().splitlines()[0] if r.stdout.strip() else "?"
        except (OSError, subprocess.TimeoutExpired):
            return "not installed"

    commit = subprocess.run(["git", "-C", REPO, "describe", "--always", "--dirty"],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "nproc": os.cpu_count(),
        "cpu": model,
        "memory": mem,
        "kernel": platform.release(),
        "memtide": commit.stdout.strip() or "?",
        "heaptrack": version(["heaptrack", "--version"]),
        "valgrind": version(["valgrind", "--version"]),
        "sqlite3": version(["sqlite3", "--version"]).split(" ")[0],
        "python3": version([PYTHON, "--version"]),
        "g++": version(["g++", "--version"]),
    }


def markdown(ctx, results, targets, machine, notes):
    out = []
    a = ctx.args
    out.append(f"## memtide benchmark{' (short mode: not comparable)' if a.short else ''}")
    out.append("")
    out.append(f"- date: {machine['date']}; memtide {machine['memtide']}")
    out.append(f"- machine: {machine['nproc']} CPUs, {machine['cpu']}, {machine['memory']} RAM, "
               f"Linux {machine['kernel']}")
    out.append(f"- load average before / after: {ctx.load_before} / {ctx.load_after} "
               "(other work on the machine shows up in wall times first)")
    out.append(f"- {machine['heaptrack']}, {machine['valgrind']}, sqlite3 {machine['sqlite3']}, "
               f"{machine['python3']}, {machine['g++']}")
    out.append(f"- {a.warmup} warm-up round(s), {a.runs} counted run(s) per command, commands "
               "alternating; median (min–max); CPU = user+sys of the whole process tree; max "
               "RSS = largest single process of the tree (for heaptrack that can be its "
               "interpreter)")
    if ctx.mem_limit:
        out.append(f"- every measured process runs with a {ctx.mem_limit / GIB:g} GiB "
                   "address-space limit (RLIMIT_AS), so that a runaway tracer fails instead of "
                   "exhausting the machine; a tool that fails is reported and dropped")
    for n in notes:
        out.append(f"- {n}")
    if any(r.get("fixed_duration") and "derived" in r for r in results):
        out.append("- a workload that runs for a set time (worker) is compared per unit of work "
                   "(µs/unit: wall or CPU time over the requests it reports), since a slower run "
                   "does fewer requests in the same time; so are its trace sizes and report times "
                   "(each tool's trace is that of its last counted run, with that run's requests)")
    out.append("")

    out.append("### Summary (medians; overhead = time − untraced)")
    out.append("")
    out.append("| workload | untraced wall / CPU s | memtide ×untraced wall / CPU | heaptrack "
               "×untraced wall / CPU | memtide ÷ heaptrack wall / CPU | memtide overhead ÷ "
               "heaptrack overhead wall / CPU | memtide overhead ÷ heaptrack -r overhead wall / "
               "CPU | memtide CPU ns/event | heaptrack CPU ns/call |")
    out.append("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "derived" not in r:
            out.append(f"| {r['name']} | skipped: {r['skip']} | | | | | | | |")
            continue
        d = r["derived"]
        un = d["stats"]["untraced"]

        def pair(k):
            return f"{fmt_x(d.get(k + ' wall'))} / {fmt_x(d.get(k + ' cpu'))}"

        ns = d.get("memtide ns/event cpu")
        hns = d.get("heaptrack ns/call cpu")
        unit = " µs/unit" if r.get("fixed_duration") else ""
        out.append(f"| {r['name']} | {un['wall']['median']:.2f} / {un['cpu']['median']:.2f}{unit} | "
                   f"{pair('memtide/untraced')} | {pair('heaptrack/untraced')} | "
                   f"{pair('memtide/heaptrack')} | {pair('overhead ratio')} | "
                   f"{pair('raw overhead ratio')} | "
                   f"{'n/a' if ns is None else f'{ns:.0f}'} | "
                   f"{'n/a' if hns is None else f'{hns:.0f}'} |")
    out.append("")

    if any("derived" in r and "sampled" in r["derived"]["stats"] for r in results):
        out.append(f"### Sampled mode ({SAMPLE_INTERVAL}) and the floor (medians)")
        out.append("")
        out.append("| workload | sampled ×untraced wall / CPU | sampled, preload only ×untraced wall / "
                   "CPU | floor ×untraced wall / CPU | sampled trace | exact trace | exact ÷ "
                   "sampled size |")
        out.append("|---|---|---|---|---|---|---|")
        for r in results:
            if "derived" not in r or "sampled" not in r["derived"]["stats"]:
                continue
            d = r["derived"]
            ssize = r.get("sampled_size")
            esize = (r.get("memtide_trace") or {}).get("size")
            if r.get("fixed_duration") and ssize and esize:
                # per request: each run did its own number of requests in the same time
                su, eu = trace_units(r, "sampled"), trace_units(r, "memtide")
                per = (esize / eu) / (ssize / su) if su and eu else None
            else:
                per = esize / ssize if ssize and esize else None
            out.append(f"| {r['name']} | {fmt_x(d.get('sampled/untraced wall'))} / "
                       f"{fmt_x(d.get('sampled/untraced cpu'))} | "
                       f"{fmt_x(d.get('sampled-preload/untraced wall'))} / "
                       f"{fmt_x(d.get('sampled-preload/untraced cpu'))} | "
                       f"{fmt_x(d.get('floor/untraced wall'))} / "
                       f"{fmt_x(d.get('floor/untraced cpu'))} | "
                       f"{'n/a' if ssize is None else f'{ssize / 1e6:.2f} MB'} | "
                       f"{'n/a' if esize is None else f'{esize / 1e6:.1f} MB'} | "
                       f"{'n/a' if per is None else f'{per:.0f}'} |")
        out.append("")

    out.append("### Runs")
    out.append("")
    out.append("| workload | tool | wall s | CPU s | max RSS MiB | wall ×untraced | "
               "CPU ×untraced |")
    out.append("|---|---|---|---|---|---|---|")
    for r in results:
        if "derived" not in r:
            continue
        d = r["derived"]
        for t in ALL_TOOLS:
            if t in d["stats"]:
                s = d["stats"][t]
                unit = " µs/unit" if r.get("fixed_duration") else ""
                out.append(f"| {r['name']} | {t} | {fmt_range(s['wall'])}{unit} | "
                           f"{fmt_range(s['cpu'])}{unit} | {fmt_range(s['maxrss_mib'], 0)} | "
                           f"{fmt_x(d.get(t + '/untraced wall'))} | "
                           f"{fmt_x(d.get(t + '/untraced cpu'))} |")
            elif t in r["dropped"]:
                out.append(f"| {r['name']} | {t} | failed: {r['dropped'][t]} | | | | |")
    out.append("")

    out.append("### Traces (last counted run)")
    out.append("")
    out.append("| workload | memtide size | memtide events (alloc+free) | B/event | memtide "
               "B/alloc call | heaptrack .zst | heaptrack alloc calls | heaptrack B/alloc call "
               "| heaptrack -r .raw.zst | memtide ÷ heaptrack size |")
    out.append("|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        if "derived" not in r:
            continue
        mt = r.get("memtide_trace") or {}
        hs, calls, raw = r.get("heaptrack_size"), r.get("heaptrack_calls"), r.get("raw_size")
        files = f" in {mt['files']} files" if mt.get("files", 1) > 1 else ""
        events, allocs, size = mt.get("events"), mt.get("allocs"), mt.get("size")
        cells = [r["name"], fmt_bytes(size) + files,
                 "n/a" if events is None else f"{events:,}",
                 f"{size / events:.2f}" if events else "n/a",
                 f"{size / allocs:.2f}" if allocs else "n/a",
                 fmt_bytes(hs), "n/a" if calls is None else f"{calls:,}",
                 f"{hs / calls:.2f}" if hs and calls else "n/a",
                 fmt_bytes(raw), fmt_x(size_ratio(r)) + (" per unit" if r.get("fixed_duration") and size_ratio(r) else "")]
        out.append("| " + " | ".join(cells) + " |")
    out.append("")

    out.append("### Full report from the trace")
    out.append("")
    if not ctx.report_available:
        out.append("`memtide-cli report` does not exist in this build: only heaptrack_print is "
                   "timed.")
        out.append("")
    out.append("| workload | memtide report wall s (CPU s) | peak RSS MiB | heaptrack_print wall s "
               "(CPU s) | peak RSS MiB | heaptrack_print ÷ memtide report |")
    out.append("|---|---|---|---|---|---|")
    for r in results:
        rep = r.get("report_stats")
        if not rep:
            continue
        m, h = rep.get("memtide report"), rep.get("heaptrack_print")

        def cell(s):
            if not s:
                return "n/a | n/a"
            return (f"{fmt_range(s['wall'])} ({s['cpu']['median']:.2f}) | "
                    f"{s['maxrss_mib']['median']:.0f}")

        rr = report_ratio(r)
        per = " per unit" if r.get("fixed_duration") and rr else ""
        out.append(f"| {r['name']} | {cell(m)} | {cell(h)} | {fmt_x(rr)}{per} |")
    out.append("")

    out.append("### Targets" + (" (not enforced in short mode)" if a.short else ""))
    out.append("")
    out.append("| target | workload | measured | verdict |")
    out.append("|---|---|---|---|")
    for t in targets:
        out.append(f"| {t[0]} | {t[1]} | {t[2]} | {t[3]} |")
    out.append("")

    out.append("### Workloads")
    out.append("")
    for r in results:
        out.append(f"- **{r['name']}** — {r['title']}: "
                   f"{r['skip'] if 'skip' in r else r['note']}"
                   + (f"; command: `{r['command']}`" if r.get("command") else ""))
    out.append("")
    return "\n".join(out)
