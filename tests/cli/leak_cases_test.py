#!/usr/bin/env python3
"""The exit scan's verdicts on programs whose leaks are known (programs/leak_cases.cpp), one per
way a scan can be wrong: pointers in dead frames of the exiting thread and of a waiting one,
threads that free as the program exits (the same verdict in every run), a thread pool, leaks
handed to threads and returned by them (glibc keeps their stacks), a block with a read-only
page, malloc(0), `new T[0]`. Each is recorded under the real LD_PRELOAD with --leak-scan;
valgrind's memcheck, where installed, is the oracle for the cases whose verdict does not depend
on scheduling.

usage: leak_cases_test.py MEMTIDE CLI LEAK_CASES [RUNS]
"""
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

memtide, cli, cases = (os.path.abspath(a) for a in sys.argv[1:4])
runs = int(sys.argv[4]) if len(sys.argv) > 4 else 50
tmp = tempfile.mkdtemp(prefix="memtide-leak-cases.")
atexit.register(shutil.rmtree, tmp, True)
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)


def run(cmd, **kw):
    env = dict(os.environ)
    env.pop("MEMTIDE_CHECK_OPTIONS", None)
    return subprocess.run(cmd, env=env, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=300, **kw)


def scanned(case, trace):
    """The run's definite leaks as (bytes, blocks), and the report's leak list."""
    r = run([memtide, "run", "-q", "--leak-scan", "-o", trace, "--", cases, case])
    if r.returncode != 0:
        return None, f"{case}: the program exited {r.returncode}: {r.stderr}"
    rep = run([cli, "report", "--json", trace])
    if rep.returncode != 0:
        return None, f"{case}: report exited {rep.returncode}: {rep.stderr}"
    j = json.loads(rep.stdout)
    scan = j.get("leak_scan") or {}
    if not scan.get("complete", True) is True and "definite_bytes" not in scan:
        return None, f"{case}: no complete scan: {scan}"
    return (scan.get("definite_bytes"), scan.get("definite_blocks")), j


def valgrind_definite(case):
    # (Its heuristics on, as LeakSanitizer counts `new T[0]`'s pointer past the element count.)
    r = run(["valgrind", "--leak-check=full", "--leak-check-heuristics=all", cases, case])
    m = re.search(r"definitely lost: ([\d,]+) bytes in ([\d,]+) blocks", r.stderr)
    if not m:
        return (0, 0) if "All heap blocks were freed" in r.stderr or "definitely lost" not in r.stderr else None
    return int(m.group(1).replace(",", "")), int(m.group(2).replace(",", ""))


have_valgrind = shutil.which("valgrind") is not None

# Deterministic cases: (case, definite bytes, definite blocks, whether valgrind agrees).
known = [
    ("stale-stack", 77, 1, True),             # the exiting thread's dead frames are no roots
    ("stale-stack-exit", 77, 1, True),        # ... when the program calls exit() itself
    # A waiting thread's stack below its stack pointer (as LeakSanitizer reads it; memcheck
    # reads other threads' stacks whole and calls the block still reachable).
    ("thread-stale-stack", 77, 1, False),
    ("thread-args", 50 * 16 + 50 * 24, 100, True),  # glibc's cached stacks are no roots
    ("protected-block", 0, 0, True),          # a block whose first page is read-only is reachable
    ("zero-size", 0, 1, True),                # malloc(0) leaked: a block of 0 bytes
    # new T[0]: a pointer past the element count keeps the block, as LeakSanitizer counts it
    # (memcheck's heuristics look inside a block only).
    ("new-array0", 0, 0, False),
]
for case, nbytes, nblocks, oracle in known:
    trace = os.path.join(tmp, case + ".mtide")
    got, j = scanned(case, trace)
    if got is None:
        expect(False, j)
        continue
    expect(got == (nbytes, nblocks), f"{case}: definite {got}, expected ({nbytes}, {nblocks})")
    if have_valgrind and oracle:
        v = valgrind_definite(case)
        expect(v == (nbytes, nblocks), f"{case}: valgrind's definite {v}, the test expects ({nbytes}, {nblocks})")
    # The gate agrees with the scan, and lists what it counts.
    chk = run([cli, "check", "--json", trace])
    cj = json.loads(chk.stdout) if chk.stdout.strip().startswith("{") else {}
    if nblocks:
        expect(chk.returncode == 1, f"{case}: check exited {chk.returncode}, expected 1 (a leak)")
        expect(cj.get("leaked_blocks") == nblocks, f"{case}: check counts {cj.get('leaked_blocks')} blocks")
        expect(len(cj.get("leaks", [])) > 0, f"{case}: check lists no leak: {chk.stdout[:400]}")
    else:
        expect(chk.returncode == 0, f"{case}: check exited {chk.returncode}, expected 0: {chk.stdout[:600]}")

# malloc(0): the per-stack list and --max-leaked-blocks see the block of 0 bytes.
trace = os.path.join(tmp, "zero-size.mtide")
rep = run([cli, "report", "--json", trace])
if rep.returncode == 0:
    leaks = json.loads(rep.stdout).get("leaks", [])
    expect(any(l.get("count") == 1 and l.get("bytes") == 0 for l in leaks),
           f"zero-size: the report lists no 0-byte leak: {json.dumps(leaks)[:400]}")
expect(run([cli, "check", "--max-leaked-blocks", "0", trace]).returncode == 1,
       "zero-size: --max-leaked-blocks 0 passes a leaked malloc(0)")

# __lsan_default_suppressions(), defined by the program, applies as LeakSanitizer applies it:
# hidden_leak's 31 bytes are suppressed (and said where from), shown_leak's 33 fail the gate.
trace = os.path.join(tmp, "default-suppressions.mtide")
r = run([memtide, "run", "-q", "--check", "-o", trace, "--", cases, "default-suppressions"])
expect(r.returncode == 1, f"default-suppressions: exit {r.returncode}: {r.stderr[-800:]}")
expect("shown_leak" in r.stderr and "33 B leaked in 1 block" in r.stderr, f"default-suppressions: {r.stderr[-1200:]}")
expect("leak:hidden_leak (__lsan_default_suppressions()" in r.stderr,
       f"default-suppressions: the program's suppression is not named: {r.stderr[-1200:]}")
rep = run([cli, "report", "--json", trace])
if rep.returncode == 0:
    names = json.dumps(json.loads(rep.stdout).get("leaks", []))
    expect("hidden_leak" not in names and "shown_leak" in names, f"default-suppressions: report leaks {names[:600]}")

# Threads racing the exit: the same verdict (no definite leak) in every run.
for case in ("detached-free", "pool"):
    bad = 0
    for i in range(runs):
        trace = os.path.join(tmp, f"{case}.{i}.mtide")
        r = run([memtide, "run", "-q", "--check", "-o", trace, "--", cases, case])
        if r.returncode != 0:
            bad += 1
            if bad <= 2:
                print(f"{case} run {i}: exit {r.returncode}\n{r.stdout[-1500:]}\n{r.stderr[-1500:]}", flush=True)
        else:
            os.unlink(trace)
    expect(bad == 0, f"{case}: the gate failed {bad} of {runs} runs")
    print(f"{case}: {runs - bad} of {runs} runs passed the gate", flush=True)

if failures:
    print(f"{len(failures)} failed")
    sys.exit(1)
print("leak cases: all agree")
