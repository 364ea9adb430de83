#!/usr/bin/env python3
"""The leak gate's habits, on real runs of the `leaky` program under the real LD_PRELOAD:
--error-exitcode, --gen-suppressions pasted back, MEMTIDE_CHECK_OPTIONS (read by `memtide check`
and by a direct LD_PRELOAD run), a run's directory judged with one JUnit test case per process,
and --keep-traces=failed.

usage: gate_habits_test.py MEMTIDE PRELOAD CLI LEAKY REACH

(`leaky` keeps its leaks in a global: they leak when no leak scan is recorded; `reach` loses
some for good, which a leak scan finds, as it runs under the gate.)
"""
import atexit
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

memtide, preload, cli, leaky, reach = (os.path.abspath(a) for a in sys.argv[1:6])
tmp = tempfile.mkdtemp(prefix="memtide-gate.")
atexit.register(shutil.rmtree, tmp, True)
# A second program name for the same code (a program is named as started): `tidy clean`.
tidy = os.path.join(tmp, "tidy")
os.symlink(leaky, tidy)
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


def run(cmd, env=None, cwd=tmp):
    e = dict(os.environ)
    e.pop("MEMTIDE_CHECK_OPTIONS", None)
    e.update(env or {})
    return subprocess.run(cmd, env=e, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def record(trace, *args, env=None, program=leaky):
    return run([program, *args], env=dict(env or {}, LD_PRELOAD=preload, MEMTIDE_OUTPUT=trace))


leaking, clean = os.path.join(tmp, "leaking.mtide"), os.path.join(tmp, "clean.mtide")
assert record(leaking).returncode == 0
assert record(clean, "clean").returncode == 0

# --error-exitcode: the status of a broken limit; 2 stays the status of an error.
r = run([cli, "check", leaking, "--error-exitcode", "23"])
expect(r.returncode == 23, f"check --error-exitcode 23 on a leak exited {r.returncode}")
expect(run([cli, "check", clean, "--error-exitcode", "23"]).returncode == 0, "clean trace with --error-exitcode")
r = run([cli, "check", leaking, "--error-exitcode", "2"])
expect(r.returncode == 2 and "status of an error" in r.stderr, f"--error-exitcode 2: {r.returncode} {r.stderr}")
# memtide run: the leak's status, but a program's own failure is its own status.
r = run([memtide, "run", "-q", "--check", "--error-exitcode", "23", "--", reach])
expect(r.returncode == 23, f"memtide run --check --error-exitcode 23 exited {r.returncode}: {r.stderr}")
r = run([memtide, "run", "-q", "--check", "--error-exitcode", "23", "--", "sh", "-c", f"{reach} >/dev/null; exit 3"])
expect(r.returncode == 3, f"a failing program under the gate exited {r.returncode}, not its own 3")

# --gen-suppressions: one block per leaking stack; pasted into a file, the check passes.
lost = os.path.join(tmp, "lost.mtide")
assert record(lost, env={"MEMTIDE_LEAK_SCAN": "1"}, program=reach).returncode == 0
r = run([cli, "check", lost, "--gen-suppressions"])
expect(r.returncode == 1, f"check --gen-suppressions exited {r.returncode}")
m = re.search(r"^suppressions \(--gen-suppressions\).*?\n(.*)\nmemtide check: FAILED", r.stdout, re.S | re.M)
expect(m is not None, f"no suppression blocks in:\n{r.stdout}")
blocks = m.group(1) if m else ""
rules = [l for l in blocks.splitlines() if l.startswith("leak:")]
stacks = len(json.loads(run([cli, "check", lost, "--json"]).stdout)["leaks"])
expect(len(rules) == stacks >= 3, f"{len(rules)} suppression blocks for {stacks} leaking stacks:\n{blocks}")
expect(any("lost" in l for l in rules), f"no block names lost: {rules}")
expect(all(l.startswith("#") or l.startswith("leak:") or not l for l in blocks.splitlines()), "a line a file would refuse")
supp = os.path.join(tmp, "pasted.supp")
with open(supp, "w") as f:
    f.write(blocks + "\n")
r = run([cli, "check", lost, "--suppressions", supp])
expect(r.returncode == 0, f"the pasted suppressions did not pass the check ({r.returncode}):\n{r.stdout}{r.stderr}")
j = run([cli, "check", lost, "--json", "--gen-suppressions"]).stdout
expect('"suppression": "leak:' in j, "no suppression in the JSON leaks")

# MEMTIDE_CHECK_OPTIONS, read by memtide check (the command line wins) ...
r = run([cli, "check", leaking], env={"MEMTIDE_CHECK_OPTIONS": "error-exitcode=23"})
expect(r.returncode == 23, f"MEMTIDE_CHECK_OPTIONS=error-exitcode=23: {r.returncode}")
r = run([cli, "check", leaking, "--error-exitcode=5"], env={"MEMTIDE_CHECK_OPTIONS": "error-exitcode=23"})
expect(r.returncode == 5, f"the command line's --error-exitcode did not win: {r.returncode}")
r = run([cli, "check", leaking], env={"MEMTIDE_CHECK_OPTIONS": f"max-leaked-bytes=1MiB:max-mismatched-frees=1:no-builtin-suppressions"})
expect(r.returncode == 0, f"two options, colon-separated: {r.returncode} {r.stderr}")
r = run([cli, "check", leaking], env={"MEMTIDE_CHECK_OPTIONS": "max-leaked-byte=1"})
expect(r.returncode == 2 and "max-leaked-byte" in r.stderr, f"an unknown option: {r.returncode} {r.stderr}")
# ... and by a direct LD_PRELOAD run: the program gates itself at exit, its report on stderr.
direct = os.path.join(tmp, "direct.mtide")
untraced = run([reach]).stdout
r = record(direct, env={"MEMTIDE_CHECK_OPTIONS": "error-exitcode=23"}, program=reach)
expect(r.returncode == 23, f"a direct run with MEMTIDE_CHECK_OPTIONS exited {r.returncode}: {r.stderr}")
expect(r.stdout == untraced, f"the program's stdout is not its own: {r.stdout!r}")
expect("memtide check: FAILED" in r.stderr and "lost" in r.stderr, f"no report on stderr: {r.stderr}")
expect("unreachable at exit" in r.stderr, "the direct run's gate without the leak scan")
r = record(os.path.join(tmp, "direct-clean.mtide"), "reachable", env={"MEMTIDE_CHECK_OPTIONS": "error-exitcode=23"},
           program=reach)
expect(r.returncode == 0, f"a clean direct run exited {r.returncode}: {r.stderr}")
r = record(os.path.join(tmp, "direct-supp.mtide"), env={"MEMTIDE_CHECK_OPTIONS": f"suppressions={supp}"}, program=reach)
expect(r.returncode == 0, f"a direct run with the pasted suppressions exited {r.returncode}: {r.stderr}")

# A run's directory: every process judged, one JUnit test case per process named after its
# program; --keep-traces=failed leaves only the traces of those that failed.
rundir = os.path.join(tmp, "run")
os.mkdir(rundir)
xml = os.path.join(tmp, "run.xml")
r = run([memtide, "run", "-q", "-o", os.path.join(rundir, "%e.%p.mtide"), "--", "sh", "-c",
         f"{leaky} >/dev/null; {tidy} clean >/dev/null"])
expect(r.returncode == 0, f"the run exited {r.returncode}: {r.stderr}")
traces = sorted(os.listdir(rundir))
expect(len(traces) >= 3, f"traces of the run: {traces}")
r = run([cli, "check", rundir, "--junit", xml, "--keep-traces=failed"])
expect(r.returncode == 1, f"check DIR exited {r.returncode}: {r.stdout} {r.stderr}")
root = ET.parse(xml).getroot()
suites = root.findall("testsuite")
expect(len(suites) == 1, f"{len(suites)} test suites")
cases = {c.get("name"): c for c in suites[0].findall("testcase")} if suites else {}
expect("leaky" in cases and "tidy" in cases, f"test cases {sorted(cases)}")
expect(len(cases) == len(traces), f"{len(cases)} test cases for {len(traces)} traces")
if "leaky" in cases and "tidy" in cases:
    expect(cases["leaky"].find("failure") is not None, "leaky's test case did not fail")
    body = cases["leaky"].find("failure").text or ""
    expect("leak_a" in body, "leaky's failure without its stack")
    expect(cases["tidy"].find("failure") is None, "tidy's test case failed")
failed_cases = [n for n, c in cases.items() if c.find("failure") is not None or c.find("error") is not None]
left = sorted(os.listdir(rundir))
expect(len(left) == len(failed_cases) and all(t.startswith(tuple(failed_cases)) for t in left),
       f"kept {left} for the failed {failed_cases}")
# The report names only the traces that are still there.
for name, c in cases.items():
    out = c.find("system-out")
    named = (out.text or "").removeprefix("trace: ") if out is not None else ""
    expect(not named or os.path.exists(named), f"{name}'s test case names the removed trace {named}")
    expect(name not in failed_cases or os.path.exists(named), f"{name}'s failed test case names no kept trace")

# The errors of memtide run name what was typed: the flag, not its variable; a key of
# MEMTIDE_CHECK_OPTIONS that check does not know is the variable's error, before the program runs.
r = run([memtide, "run", "--max-size", "64k", "--", "true"])
expect(r.returncode == 2 and "bad value --max-size 64k:" in r.stderr, f"--max-size 64k: {r.returncode} {r.stderr}")
r = run([memtide, "run", "-q", "--check", "--", "sh", "-c", "echo ran"], env={"MEMTIDE_CHECK_OPTIONS": "bogus=1"})
expect(r.returncode == 2 and "MEMTIDE_CHECK_OPTIONS: unknown option 'bogus'" in r.stderr and "ran" not in r.stdout,
       f"MEMTIDE_CHECK_OPTIONS=bogus=1: {r.returncode} {r.stdout} {r.stderr}")
r = run([memtide, "run", "--sample", "4KiB", "--check", "--", "sh", "-c", "echo ran"])
expect(r.returncode == 2 and "--sample" in r.stderr and "ran" not in r.stdout, f"--sample with --check: {r.stderr}")
r = run([cli, "check", os.path.join(tmp, "empty-dir-that-is-not")])
expect(r.returncode == 2, f"a missing file: {r.returncode}")
os.mkdir(os.path.join(tmp, "empty"))
r = run([cli, "check", os.path.join(tmp, "empty")])
expect(r.returncode == 2 and "holds no trace" in r.stderr, f"an empty directory: {r.returncode} {r.stderr}")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("gate habits: ok")
