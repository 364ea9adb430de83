#!/usr/bin/env python3
"""docs/CI.md's jobs, run: the commands of the GitHub Actions job's steps and of the GitLab CI
job's script, on a copy of tests/install/gate_project (one leaking test of three), against this
build installed where the jobs install memtide ($MEMTIDE_PREFIX). memtide's own install (a clone
and a build) is replaced by `cmake --install` of this build, the command the jobs end it with.
Each job must fail at its ctest step, on cache_test alone, and leave the JUnit reports and the
failing test's trace where it collects them.

usage: ci_doc_test.py SOURCE_DIR BUILD_DIR
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

src, build = sys.argv[1:3]
doc = open(os.path.join(src, "docs", "CI.md")).read()
blocks = [b.split("\n", 1)[1] for b in doc.split("```yaml")[1:]]
blocks = [b[: b.index("```")] for b in blocks]
assert len(blocks) == 2, f"{len(blocks)} yaml blocks in docs/CI.md"
github, gitlab = (yaml.safe_load(b) for b in blocks)
tmp = tempfile.mkdtemp(prefix="memtide-ci.")
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


def run_job(name, install, commands, env):
    """Runs `commands` in order in a fresh copy of the project, as the CI would; returns the
    index of the first that failed (None: all passed) and the project's directory."""
    expect(install and install[-1].startswith("cmake --install ") and install[-1].endswith('--prefix "$MEMTIDE_PREFIX"'),
           f"{name}: memtide's install does not end with cmake --install ... --prefix: {install[-1:]}")
    root = os.path.join(tmp, name)
    shutil.copytree(os.path.join(src, "tests", "install", "gate_project"), root)
    prefix = os.path.join(tmp, name + "-memtide")
    e = dict(os.environ, **env, MEMTIDE_PREFIX=prefix)
    e.pop("MEMTIDE_CHECK_OPTIONS", None)
    subprocess.run(["cmake", "--install", build, "--prefix", prefix], check=True, stdout=subprocess.DEVNULL, env=e)
    for i, cmd in enumerate(commands):
        r = subprocess.run(["bash", "-e", "-c", cmd], cwd=root, env=e, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True)
        if r.returncode != 0:
            return i, root, r.stdout
    return None, root, ""


def check_outcome(name, commands, failed, root, out, junit_glob, trace_glob):
    expect(failed is not None and commands[failed].startswith("ctest "),
           f"{name}: the job did not fail at its ctest step (failed at {failed})")
    expect("cache_test (Failed)" in out and "parse_test (Failed)" not in out and "list_test (Failed)" not in out,
           f"{name}: ctest's failures:\n{out}")
    expect("cache_insert" in out, f"{name}: the leak's stack is not in the log")
    reports = sorted(os.path.basename(p) for p in glob.glob(os.path.join(root, junit_glob)))
    expect(reports == ["cache_test.xml", "list_test.xml", "parse_test.xml"], f"{name}: JUnit reports {reports}")
    traces = [os.path.basename(p) for p in glob.glob(os.path.join(root, trace_glob), recursive=True)]
    expect(len(traces) == 1 and traces[0].startswith("memtide.cache_test."), f"{name}: traces kept {traces}")


# GitHub Actions: the run: steps after memtide's install, in order.
job = github["jobs"]["memtide"]
steps = job["steps"]
at = next(i for i, s in enumerate(steps) if s.get("name") == "Install memtide")
install = steps[at]["run"].strip().splitlines()
commands = [s["run"] for s in steps[at + 1:] if "run" in s]
env = {k: str(v) for k, v in job.get("env", {}).items() if k != "MEMTIDE_PREFIX"}
failed, root, out = run_job("github", install, commands, env)
paths = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact"))["with"]["path"].split()
expect(next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")).get("if") == "always()",
       "github: the artifacts are not kept when the job fails")
check_outcome("github", commands, failed, root, out, paths[0], paths[1])

# GitLab CI: the script's lines.
job = gitlab["memtide"]
install = job["before_script"]
env = {k: str(v) for k, v in job.get("variables", {}).items() if k != "MEMTIDE_PREFIX"}
failed, root, out = run_job("gitlab", install, job["script"], env)
art = job["artifacts"]
expect(art.get("when") == "always", "gitlab: the artifacts are not kept when the job fails")
check_outcome("gitlab", job["script"], failed, root, out, art["reports"]["junit"], art["paths"][0])

shutil.rmtree(tmp, True)
if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("CI.md jobs: ok")
