#!/usr/bin/env python3
"""`memtide check --junit` writes JUnit XML that a parser reads back with the right counts.

usage: junit_test.py PRELOAD CLI LEAKY_PROGRAM
"""
import atexit
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET

preload, cli, leaky = sys.argv[1:4]
tmp = tempfile.mkdtemp(prefix="memtide-junit.")
atexit.register(shutil.rmtree, tmp, True)


def record(trace, *args):
    env = dict(os.environ, LD_PRELOAD=preload, MEMTIDE_OUTPUT=trace)
    subprocess.run([leaky, *args], env=env, check=True, stdout=subprocess.DEVNULL)


def check(trace, xml, *extra):
    return subprocess.run([cli, "check", trace, "--junit", xml, *extra], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)


failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


leaky_trace, clean_trace = os.path.join(tmp, "leaky.mtide"), os.path.join(tmp, "clean.mtide")
record(leaky_trace)
record(clean_trace, "clean")

# A leaking run: one test case, the process's, named after its program, failing with each broken
# limit in its message and the leak stacks in the body.
xml = os.path.join(tmp, "leaky.xml")
r = check(leaky_trace, xml, "--max-peak-bytes", "1GiB")
expect(r.returncode == 1, f"check on the leaking trace exited {r.returncode}")
root = ET.parse(xml).getroot()
expect(root.tag == "testsuites", f"root element {root.tag}")
suites = root.findall("testsuite")
expect(len(suites) == 1, f"{len(suites)} test suites")
suite = suites[0]
cases = suite.findall("testcase")
names = [c.get("name") for c in cases]
expect(names == [os.path.basename(leaky)], f"test cases {names}")
expect(suite.get("tests") == "1" and suite.get("failures") == "1", f"suite counts {suite.attrib}")
failure = cases[0].find("failure") if cases else None
expect(failure is not None, "the leaking process's test case did not fail")
message = failure.get("message") if failure is not None else ""
expect("leaked bytes" in message and "peak" not in message, f"failure message {message!r}")
body = failure.text if failure is not None else ""
for fn in ("leak_a", "leak_b", "inlined_leak"):
    expect(fn in body, f"{fn} missing from the failure text")
out = cases[0].find("system-out") if cases else None
expect(out is not None and leaky_trace in out.text, "the trace is not named")

# A clean run: the same test case, not failing.
xml2 = os.path.join(tmp, "clean.xml")
r = check(clean_trace, xml2)
expect(r.returncode == 0, f"check on the clean trace exited {r.returncode}: {r.stdout}")
suite = ET.parse(xml2).getroot().find("testsuite")
expect(suite.get("failures") == "0" and suite.get("tests") == "1", f"clean suite counts {suite.attrib}")
expect(all(c.find("failure") is None for c in suite.findall("testcase")), "a clean case failed")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("junit: ok")
