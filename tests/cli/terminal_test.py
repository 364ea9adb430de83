#!/usr/bin/env python3
"""The terminal habits of the reading commands, on a real C++ program's trace: C++ names with
their template arguments shortened (--full-names for the whole), lines cut to the terminal's
width, colour on a terminal (--color, NO_COLOR), a progress bar on stderr (info), and
`memtide help CMD`. A terminal is a pseudo-terminal of a given size.

usage: terminal_test.py MEMTIDE CLI
"""
import atexit
import fcntl
import os
import pty
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import termios

memtide, cli = (os.path.abspath(a) for a in sys.argv[1:3])
tmp = tempfile.mkdtemp(prefix="memtide-term.")
atexit.register(shutil.rmtree, tmp, True)
failures = []


def expect(cond, what):
    if not cond:
        failures.append(what)


def run(cmd, env=None):
    e = dict(os.environ, **(env or {}))
    e.pop("NO_COLOR", None) if env is None or "NO_COLOR" not in env else None
    return subprocess.run(cmd, env=e, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_tty(cmd, columns, env=None):
    """Runs cmd with stdout and stderr on a pseudo-terminal `columns` wide; returns its output."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    e = dict(os.environ, TERM="xterm", **(env or {}))
    if not env or "NO_COLOR" not in env:
        e.pop("NO_COLOR", None)
    p = subprocess.Popen(cmd, env=e, cwd=tmp, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    p.wait()
    os.close(master)
    return p.returncode, out.decode("utf-8", "replace").replace("\r\n", "\n")


ANSI = re.compile(r"\x1b\[[0-9;]*m")

# A C++ program that leaks a vector of strings, built here.
src = os.path.join(tmp, "templates.cpp")
with open(src, "w") as f:
    f.write("""#include <string>
#include <vector>
__attribute__((noinline)) std::vector<std::string>* make() {
  auto* v = new std::vector<std::string>;
  for (int i = 0; i < 8; ++i) v->push_back(std::string(40, 'x'));
  return v;
}
int main() { std::vector<std::string>* volatile lost = make(); lost = nullptr; return 0; }
""")
subprocess.run(["g++", "-O0", "-g", src, "-o", os.path.join(tmp, "templates")], check=True)
r = run([memtide, "run", "-q", "-o", "t.mtide", "--", "./templates"])
expect(r.returncode == 0, f"the recording failed: {r.stderr}")

# Names: shortened by default (also when not on a terminal), whole with --full-names.
short = run([cli, "check", "t.mtide"]).stdout
full = run([cli, "check", "t.mtide", "--full-names"]).stdout
expect("std::allocator<char>" in full, f"--full-names lost the template arguments:\n{full}")
expect("std::allocator<char>" not in short and "std::vector<...>::push_back(" in short, f"names not shortened:\n{short}")
expect(short.count("\n") == full.count("\n"), "shortening changed the lines")
expect(run([cli, "--full-names", "check", "t.mtide"]).stdout == full, "--full-names before the command")
expect("\x1b[" not in short, "colour in a pipe")
expect(run([cli, "report", "t.mtide"]).stdout.find("std::vector<...>::") >= 0, "report's names not shortened")
j = run([cli, "report", "--json", "t.mtide"]).stdout
expect("std::allocator<" in j, "the JSON's names were shortened")

# On a terminal: lines fit its width, in colour unless NO_COLOR or --color=never.
status, out = run_tty([cli, "check", "--full-names", "t.mtide"], 60)
expect(status == 1, f"check on a terminal exited {status}")
plain = ANSI.sub("", out)
long_lines = [l for l in plain.splitlines() if len(l) > 60 and l.lstrip().startswith("#")]
expect(not long_lines, f"frame lines wider than the terminal: {long_lines}")
expect(any(l.endswith("...") for l in plain.splitlines()), "no frame line was cut")
expect("\x1b[1;31mFAILED" in out, f"no colour on a terminal: {out[:400]!r}")
_, wide = run_tty([cli, "check", "t.mtide"], 300)  # (shortened, every line fits)
cut = [l for l in ANSI.sub("", wide).splitlines() if l.endswith("...")]
expect(not cut, f"lines cut on a wide terminal: {cut}")
_, out = run_tty([cli, "check", "t.mtide"], 80, env={"NO_COLOR": "1"})
expect("\x1b[" not in out, "colour with NO_COLOR")
_, out = run_tty([cli, "check", "t.mtide", "--color=never"], 80)
expect("\x1b[" not in out, "colour with --color=never")
expect("\x1b[1;31mFAILED" in run([cli, "check", "t.mtide", "--color=always"]).stdout, "no colour with --color=always")
r = run([cli, "check", "t.mtide", "--color=sometimes"])
expect(r.returncode == 2, f"--color=sometimes exited {r.returncode}")

# A progress bar on stderr while info reads, on a terminal only.
_, out = run_tty([cli, "info", "t.mtide"], 80)
expect("] 100%" in out, f"no progress bar from info on a terminal: {out[:300]!r}")
r = run([cli, "info", "t.mtide"])
expect("%" not in r.stderr, f"a progress bar in a pipe: {r.stderr!r}")

# The size histogram: its classes sum to the report's totals.
import json
rep = json.loads(run([cli, "report", "--json", "t.mtide"]).stdout)
h = json.loads(run([cli, "report", "--histogram", "--json", "t.mtide"]).stdout)
expect(sum(r["allocations"] for r in h["histogram"]) == rep["total_allocations"], "histogram counts")
expect(sum(r["bytes"] for r in h["histogram"]) == rep["total_allocated_bytes"], "histogram bytes")
expect(all(r["min_size"] <= r["max_size"] for r in h["histogram"]), "histogram classes")
text = run([cli, "report", "--histogram", "t.mtide"]).stdout
expect(text.startswith("heap allocations by size") and "#" in text, f"histogram text:\n{text}")
# A window's histogram counts what the report's window counts (allocations made in it): a
# program that allocates, sleeps past the recorder's clock tick, and allocates again.
with open(os.path.join(tmp, "phases.c"), "w") as f:
    f.write("""#include <stdlib.h>
#include <unistd.h>
int main() { void* volatile p; for (int i = 0; i < 3; ++i) p = malloc(100);
  usleep(100000); for (int i = 0; i < 5; ++i) p = malloc(5000); (void)p; return 0; }
""")
subprocess.run(["gcc", "-O0", os.path.join(tmp, "phases.c"), "-o", os.path.join(tmp, "phases")], check=True)
expect(run([memtide, "run", "-q", "-o", "p.mtide", "--", "./phases"]).returncode == 0, "phases recorded")
def made_in(*window):
    return json.loads(run([cli, "report", "--json", *window, "p.mtide"]).stdout)["total_allocations"]
def histogram_of(*window):
    return json.loads(run([cli, "report", "--histogram", "--json", *window, "p.mtide"]).stdout)
all_made = made_in()
# The first allocation's time (bisected): the first phase's blocks are made by then, not the second's.
lo_t, hi_t = 0, json.loads(run([cli, "info", "--json", "p.mtide"]).stdout)["duration_ns"]
for _ in range(40):
    mid = (lo_t + hi_t) // 2
    if made_in("--to", f"{mid}ns") == 0:
        lo_t = mid
    else:
        hi_t = mid
# (Before the first allocation: none, measured from the process's start as the report does.)
for window in (["--to", f"{hi_t}ns"], ["--from", f"{hi_t + 1}ns"], ["--to", f"{hi_t // 2}ns"]):
    made = made_in(*window)
    expect(0 < made < all_made or window[1] == f"{hi_t // 2}ns", f"the window {window} holds a part: {made} of {all_made}")
    h = histogram_of(*window)
    expect(sum(r["allocations"] for r in h["histogram"]) == made, f"windowed histogram counts {window}")
    expect(sum(r["bytes"] for r in h["histogram"]) == json.loads(run([cli, "report", "--json", *window, "p.mtide"]).stdout)["total_allocated_bytes"],
           f"windowed histogram bytes {window}")
h = histogram_of("--from", "1ns", "--to", f"{hi_t}ns")
expect(h["window"]["from_ns"] == 1 and h["window"]["to_ns"] == hi_t, f"histogram window: {h.get('window')}")
text = run([cli, "report", "--histogram", "--from", "1ns", "p.mtide"]).stdout
expect("made in [" in text and ", end]" in text, f"windowed histogram text:\n{text[:200]}")
expect(run([cli, "report", "--histogram", "--at", "1ms", "t.mtide"]).returncode == 2, "--histogram with --at")

# memtide help CMD
r = run([memtide, "help", "check"])
expect(r.returncode == 0 and "--gen-suppressions" in r.stdout, f"memtide help check: {r.returncode}")
r = run([memtide, "help", "run"])
expect(r.returncode == 0 and "--max-depth" in r.stdout, "memtide help run")

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("terminal: ok")
