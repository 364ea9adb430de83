#!/usr/bin/env python3
"""`memtide export` read back by each format's own tools, its figures compared with the report's.

usage: export_test.py PRELOAD CLI LEAKY EXACT_WORKLOAD

Traces of real programs under the real LD_PRELOAD: tests/cli/programs/leaky (exact leaks and an
inlined allocation site), tests/programs/exact_workload (8 threads, every API), and the latter
recorded sampled. Each export is read by what its users read it with:
  pprof       `go tool pprof -raw` (samples, locations with inlined lines, mappings with
              build-ids) and `-top`; totals equal the report's allocations, allocated bytes and
              bytes in use at the end (or at --at, or in a --from/--to window)
  speedscope  JSON checked against the required fields of the published file format; the
              weights add up to the report's allocated bytes, one profile per thread
  massif      ms_print prints it; its peak snapshot is the report's peak, with the peak's stacks
"""
import atexit
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

preload, cli, leaky, workload = sys.argv[1:5]
tmp = tempfile.mkdtemp(prefix="memtide-export.")
atexit.register(shutil.rmtree, tmp, True)
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def record(trace, argv, **env):
    e = dict(os.environ, LD_PRELOAD=preload, MEMTIDE_OUTPUT=trace, **env)
    subprocess.run(argv, env=e, check=True, stdout=subprocess.DEVNULL, cwd=tmp)
    return trace


def run(*args, check=True):
    r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and r.returncode != 0:
        raise SystemExit(f"{' '.join(args)} exited {r.returncode}:\n{r.stderr}")
    return r


def report(trace, *extra):
    return json.loads(run(cli, "report", "--json", "--top", "100000", *extra, trace).stdout)


def export(trace, out, *extra):
    run(cli, "export", trace, "-o", out, *extra)
    return out


# ------------------------------------------------------------------------------------------
# pprof
# ------------------------------------------------------------------------------------------

def pprof_raw(path):
    """The -raw listing's sample totals, location lines and mapping lines."""
    out = run("go", "tool", "pprof", "-raw", path).stdout
    types, totals, section = None, None, None
    locations, mappings = [], []
    for line in out.splitlines():
        if line in ("Samples:", "Locations", "Mappings"):
            section = line
            continue
        if section == "Samples:":
            if types is None:
                types = line.split()
                totals = [0] * len(types)
            elif ":" in line:
                values = line.split(":")[0].split()
                totals = [t + int(v) for t, v in zip(totals, values)]
        elif section == "Locations":
            locations.append(line)
        elif section == "Mappings":
            mappings.append(line)
    return dict(zip(types or [], totals or [])), locations, mappings


def check_pprof_totals(name, trace, out, *extra, inuse=None):
    rep = report(trace, *extra)
    totals, locations, mappings = pprof_raw(export(trace, out, *extra))
    expect(list(totals) == ["alloc_objects/count", "alloc_space/bytes", "inuse_objects/count", "inuse_space/bytes"],
           f"{name}: pprof sample types {list(totals)}")
    want_inuse = inuse(rep) if inuse else (rep["leaked_blocks"], rep["leaked_bytes"])
    got = (totals.get("alloc_objects/count"), totals.get("alloc_space/bytes"),
           totals.get("inuse_objects/count"), totals.get("inuse_space/bytes"))
    want = (rep["total_allocations"], rep["total_allocated_bytes"], *want_inuse)
    expect(got == want, f"{name}: pprof totals {got}, report {want}")
    return rep, totals, locations, mappings


def build_id(path):
    m = re.search(r"Build ID: ([0-9a-f]+)", run("readelf", "-n", path).stdout)
    return m.group(1) if m else None


leaky_trace = record(os.path.join(tmp, "leaky.mtide"), [leaky])
work_trace = record(os.path.join(tmp, "work.mtide"), [workload, "--out", os.path.join(tmp, "tally.json")])
sampled_trace = record(os.path.join(tmp, "sampled.mtide"), [workload, "--out", os.path.join(tmp, "tally2.json")],
                       MEMTIDE_SAMPLE="16KiB", MEMTIDE_SAMPLE_SEED="7")

# Exact: the counts, bytes and bytes in use at the end, as the report gives them.
rep, totals, locations, mappings = check_pprof_totals("leaky", leaky_trace, os.path.join(tmp, "leaky.pb.gz"))
with gzip.open(os.path.join(tmp, "leaky.pb.gz")) as f:
    expect(len(f.read()) > 0, "leaky: the profile is gzip")
# The known leaks, each at its own allocation site (flat), the inlined one as pprof marks it.
def flat(path, index):
    out = run("go", "tool", "pprof", "-top", "-nodecount=100000", "-nodefraction=0", "-unit=B",
              f"-sample_index={index}", path).stdout
    return {m.group(2): int(m.group(1)) for m in re.finditer(r"^\s*(\d+)B?\s.*%\s+(\S+(?: \(inline\))?)$", out, re.M)}


space, objects = flat(os.path.join(tmp, "leaky.pb.gz"), "inuse_space"), flat(os.path.join(tmp, "leaky.pb.gz"), "inuse_objects")
for fn, b, n in (("::leak_a", 500, 5), ("::leak_b", 4000, 1), ("inlined_leak (inline)", 192, 3)):
    expect(space.get(fn) == b and objects.get(fn) == n, f"leaky: {fn} in use {space.get(fn)} B in {objects.get(fn)}, "
                                                        f"known {b} B in {n}")
text = "\n".join(locations)
for fn in ("leak_a", "leak_b", "leak_c", "churn", "main"):
    expect(fn in text, f"leaky: no location names {fn}")
expect(re.search(r"leaky\.cpp:\d+", text), "leaky: no file:line in the locations")
# The inlined allocation site: one location, inlined_leak's line first, then leak_c's.
inl = [i for i, l in enumerate(locations) if "inlined_leak" in l]
expect(inl and "leak_c" in locations[inl[0] + 1] and not re.match(r"\s*\d+:", locations[inl[0] + 1]),
       "leaky: inlined_leak is not a line inlined into leak_c's location")
bid = build_id(leaky)
expect(bid and any(bid in m and leaky in m for m in mappings), f"leaky: no mapping of {leaky} with build-id {bid}")
expect(mappings and leaky in mappings[0], "leaky: the program is not the first mapping")
top = run("go", "tool", "pprof", "-top", "-sample_index=inuse_space", os.path.join(tmp, "leaky.pb.gz")).stdout
expect("leak_b" in top and "Type: inuse_space" in top, "leaky: go tool pprof -top does not show leak_b")

# Many threads, every API; --at (in use at a time), a --from/--to window, and the sampled
# recording's estimates.
check_pprof_totals("workload", work_trace, os.path.join(tmp, "work.pb.gz"))
wrep = report(work_trace)
mid = f"{wrep['peak_time_ns'] / 1e9:.9f}"
check_pprof_totals("workload --at", work_trace, os.path.join(tmp, "work-at.pb.gz"), "--at", mid,
                   inuse=lambda r: (r["live_at"]["blocks"], r["live_at"]["bytes"]))
window = ("--from", f"{wrep['peak_time_ns'] / 2e9:.9f}", "--to", mid)
wwin, _, _, _ = check_pprof_totals("workload window", work_trace, os.path.join(tmp, "work-win.pb.gz"), *window)
expect(0 < wwin["total_allocations"] < wrep["total_allocations"], "workload: the window holds a part of the allocations")
srep, stotals, _, _ = check_pprof_totals("sampled", sampled_trace, os.path.join(tmp, "sampled.pb.gz"))
raw = run("go", "tool", "pprof", "-raw", os.path.join(tmp, "sampled.pb.gz")).stdout
expect("Period: 16384" in raw and "estimates" in raw, "sampled: period and note of the estimates")
tally = json.load(open(os.path.join(tmp, "tally2.json")))
print("sampled: estimated", stotals["alloc_space/bytes"], "bytes allocated; report", srep["total_allocated_bytes"])

# ------------------------------------------------------------------------------------------
# speedscope
# ------------------------------------------------------------------------------------------

def check_speedscope(name, path, rep):
    with open(path) as f:
        doc = json.load(f)
    # The required fields of the published format (file-format-spec: File, Frame, SampledProfile).
    expect(doc.get("$schema") == "https://www.speedscope.app/file-format-schema.json", f"{name}: $schema")
    frames = doc.get("shared", {}).get("frames")
    expect(isinstance(frames, list) and all(isinstance(fr.get("name"), str) for fr in frames), f"{name}: frames")
    for fr in frames:
        expect(set(fr) <= {"name", "file", "line", "col"}, f"{name}: frame fields {set(fr)}")
    profiles = doc.get("profiles")
    expect(isinstance(profiles, list) and profiles, f"{name}: profiles")
    total = 0
    for p in profiles:
        for key in ("type", "name", "unit", "startValue", "endValue", "samples", "weights"):
            expect(key in p, f"{name}: profile without {key}")
        expect(p["type"] == "sampled" and p["unit"] == "bytes", f"{name}: profile type {p['type']} unit {p['unit']}")
        expect(len(p["samples"]) == len(p["weights"]), f"{name}: samples and weights differ in length")
        expect(all(isinstance(i, int) and 0 <= i < len(frames) for s in p["samples"] for i in s),
               f"{name}: a sample names a frame that is not there")
        expect(p["endValue"] - p["startValue"] == sum(p["weights"]), f"{name}: {p['name']} end value")
        total += sum(p["weights"])
    expect(0 <= doc.get("activeProfileIndex", 0) < len(profiles), f"{name}: activeProfileIndex")
    expect(total == rep["total_allocated_bytes"], f"{name}: weights {total}, report {rep['total_allocated_bytes']}")
    return doc


doc = check_speedscope("workload", export(work_trace, os.path.join(tmp, "work.json")), wrep)
threads = [t for t in wrep["thread_list"] if t["allocations"]]
expect(len(doc["profiles"]) == len(threads), f"workload: {len(doc['profiles'])} profiles, {len(threads)} threads allocate")
names = {fr["name"] for fr in doc["shared"]["frames"]}
expect(any("worker" in n for n in names), "workload: no frame of the workers")
check_speedscope("workload window", export(work_trace, os.path.join(tmp, "work-win.json"), *window), wwin)
check_speedscope("sampled", export(sampled_trace, os.path.join(tmp, "sampled.speedscope.json")), srep)
check_speedscope("leaky", export(leaky_trace, os.path.join(tmp, "x.out"), "--format", "speedscope"), rep)

# ------------------------------------------------------------------------------------------
# massif
# ------------------------------------------------------------------------------------------

def check_massif(name, trace, rep, functions):
    path = export(trace, os.path.join(tmp, "massif.out." + name))
    out = run("ms_print", path).stdout
    m = re.search(r"Detailed snapshots: \[([^\]]*)\]", out)
    peak = re.search(r"(\d+) \(peak\)", m.group(1)) if m else None
    expect(peak, f"{name}: ms_print names no peak snapshot")
    if not peak:
        return
    row = re.search(r"^\s*%s\s+[\d.,]+\s+([\d,]+)" % peak.group(1), out, re.M)
    expect(row and int(row.group(1).replace(",", "")) == rep["peak_bytes"],
           f"{name}: ms_print's peak {row and row.group(1)}, report {rep['peak_bytes']}")
    expect("(heap allocation functions)" in out, f"{name}: no heap tree")
    for fn in functions:
        expect(fn in out, f"{name}: {fn} is not in the heap trees")


check_massif("leaky", leaky_trace, rep, ["leak_b"])  # (leak_a and leak_c are under 1% of the peak: folded)
check_massif("workload", work_trace, wrep, ["leak_small", "worker"])
check_massif("sampled", sampled_trace, srep, [])

# ------------------------------------------------------------------------------------------
# Usage errors: exit 2, one line, nothing written
# ------------------------------------------------------------------------------------------

for args, what in ((["-o", os.path.join(tmp, "out.txt")], "a name that tells no format"),
                   (["-o", os.path.join(tmp, "massif.out.x"), "--from", "1ms"], "massif with a window"),
                   (["-o", os.path.join(tmp, "w.json"), "--at", "1ms"], "speedscope with --at"),
                   (["-o", os.path.join(tmp, "f.pb.gz"), "--format", "svg"], "an unknown format"),
                   (["-o", leaky_trace, "--format", "pprof"], "the input as output")):
    r = run(cli, "export", leaky_trace, *args, check=False)
    expect(r.returncode == 2 and r.stderr.startswith("memtide: ") and r.stderr.count("\n") == 1,
           f"{what}: exit {r.returncode}, stderr {r.stderr!r}")
    expect(not os.path.exists(args[1]) or args[1] == leaky_trace, f"{what}: {args[1]} was written")
r = run(cli, "export", os.path.join(tmp, "missing.mtide"), "-o", os.path.join(tmp, "m.pb.gz"), check=False)
expect(r.returncode == 2 and not os.path.exists(os.path.join(tmp, "m.pb.gz")), "a missing trace: exit 2")

if failures:
    print(f"{len(failures)} failure(s)")
    sys.exit(1)
print("ok")
