#!/usr/bin/env python3
"""The flamegraph SVG opens in headless Chromium, its script runs, and it shows the top
functions; a screenshot is taken too. Exits 77 (skipped) when chromium is not installed.

usage: svg_chromium_test.py PRELOAD CLI LEAKY_PROGRAM
"""
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile

preload, cli, leaky = sys.argv[1:4]
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    print("SKIP: chromium is not installed (Debian package 'chromium'; scripts/setup installs it)")
    sys.exit(77)

tmp = tempfile.mkdtemp(prefix="memtide-svg.")
atexit.register(shutil.rmtree, tmp, True)
trace, svg, png = (os.path.join(tmp, n) for n in ("t.mtide", "leaked.svg", "leaked.png"))
env = dict(os.environ, LD_PRELOAD=preload, MEMTIDE_OUTPUT=trace)
subprocess.run([leaky], env=env, check=True, stdout=subprocess.DEVNULL)
subprocess.run([cli, "flamegraph", "--metric", "leaked", "-o", svg, trace], check=True)

base = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run", "--user-data-dir=" + os.path.join(tmp, "profile")]
failures = []


def shown_labels(url):
    """The labels the browser shows after the script ran (it fits them to the frames)."""
    dom = subprocess.run(base + ["--dump-dom", url], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         timeout=120).stdout
    ready = re.search(r'data-memtide-ready="(\d+)"', dom)
    if not ready or int(ready.group(1)) < 5:
        failures.append(f"{url}: the embedded script did not run (no data-memtide-ready)")
    # Frames hidden by a zoom have style="display: none;" on their <g>.
    visible = [g for g in re.findall(r"<g class=\"f[^>]*>.*?</g>", dom) if "display: none" not in g]
    return [t for g in visible for t in re.findall(r"<text [^>]*>([^<]*)</text>", g)], ready


# The whole graph: the biggest leaks' callers are labelled.
labels, ready = shown_labels("file://" + svg)
for fn in ("main", "_dl_init"):
    if fn not in labels:
        failures.append(f"{fn} is not shown (labels: {labels[:20]})")
# Zoomed on main (as a click on it does): the program's leaking functions are labelled.
zoomed, _ = shown_labels("file://" + svg + "#zoom=main")
for fn in ("leak_b()", "leak_a()"):
    if fn not in zoomed:
        failures.append(f"{fn} is not shown when zoomed on main (labels: {zoomed[:30]})")
if "_dl_init" in zoomed:
    failures.append("frames outside the zoomed one are still shown")
subprocess.run(base + ["--screenshot=" + png, "--window-size=1200,600", "file://" + svg], stdout=subprocess.DEVNULL,
               stderr=subprocess.DEVNULL, timeout=120)
if not os.path.exists(png) or os.path.getsize(png) < 1000:
    failures.append("no screenshot")
if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print(f"svg: ok ({ready.group(1)} frames, screenshot of {os.path.getsize(png)} bytes)")
