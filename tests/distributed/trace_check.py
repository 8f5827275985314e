"""Traces of 2-locality runs, checked end to end (run by ctest as dist_trace_n2).

usage: trace_check.py TESSERA_CLI

- `tessera run -n 2 --trace DIR` of a program with collectives and of a
  data-parallel fit prints what the same run prints without --trace;
- `tessera report DIR` merges both localities: the Chrome trace has the
  trace-event format's fields, one process per locality with its
  communication, events in time order and nested on every track; the DOT
  tree parses and its totals are those of the counters CSV; training steps
  of both localities are split into phases;
- a trace with a locality's file missing or truncated still gives a report
  that says so; a directory that is not a trace is a clear error;
- the HTML report renders in headless Chromium with its
  Gantt chart, split and tree, without script errors; a screenshot is kept.
"""

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import tessera

HERE = os.path.dirname(os.path.abspath(__file__))
CLI = sys.argv[1]
WORK = tempfile.mkdtemp(prefix="tessera-trace-check-")


def run(*args, expect=0):
    p = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=120)
    if p.returncode != expect:
        sys.exit(f"FAIL: tessera {' '.join(args)} exited with {p.returncode}, expected {expect}\n"
                 f"{p.stdout}\n{p.stderr}")
    return p


def results(p, prefix=""):
    """The program's output lines (rank order does not matter)."""
    return sorted(line for line in p.stdout.splitlines() if line.startswith("[rank") and prefix in line)


def check(cond, msg):
    if not cond:
        sys.exit("FAIL: " + msg)


def check_chrome(path):
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    tracks = {}
    for e in events:
        for field in ("ph", "ts", "pid", "tid", "name"):
            check(field in e, f"event without {field}: {e}")
        check(e["ph"] in ("X", "M"), f"unexpected phase {e['ph']}")
        if e["ph"] == "X":
            check(isinstance(e["dur"], (int, float)) and e["dur"] >= 0, f"bad dur: {e}")
            tracks.setdefault((e["pid"], e["tid"]), []).append(e)
    for key, evs in tracks.items():
        # Monotonic, and complete events on one track nest (matched begin/end).
        stack = []
        last = -1.0
        for e in evs:
            check(e["ts"] >= last, f"track {key} goes back in time at {e}")
            last = e["ts"]
            end = e["ts"] + e["dur"]
            # Times are microseconds with three decimals: compare within half a nanosecond.
            while stack and stack[-1] <= e["ts"] + 5e-4:
                stack.pop()
            check(not stack or end <= stack[-1] + 5e-4, f"track {key}: {e} overlaps its enclosing event")
            stack.append(end)
    return doc, tracks


def parse_dot(path):
    """A tiny DOT reader: node statements with attributes, edges."""
    nodes, edges = {}, []
    with open(path) as f:
        text = f.read()
    check(text.startswith("digraph") and text.rstrip().endswith("}"), "DOT is not one digraph")
    check(text.count("{") == text.count("}"), "DOT braces do not match")
    for m in re.finditer(r'^\s*(p\d+n\d+) \[(.*)\];$', text, re.M):
        attrs = dict(re.findall(r'(\w+)=("(?:[^"\\]|\\.)*"|[^,\]]+)', m.group(2)))
        nodes[m.group(1)] = {k: v.strip('"') for k, v in attrs.items()}
    for m in re.finditer(r'^\s*(p\d+n\d+) -> (p\d+n\d+);$', text, re.M):
        edges.append((m.group(1), m.group(2)))
    check(nodes, "DOT has no nodes")
    for a, b in edges:
        check(a in nodes and b in nodes, f"edge {a} -> {b} names an unknown node")
    return nodes, edges


def check_exports(d, localities=2, comm=True):
    out = run("report", d)
    doc, tracks = check_chrome(os.path.join(d, "trace.json"))
    pids = {e["pid"] for e in doc["traceEvents"]}
    check(pids == set(range(localities)), f"processes {pids}, expected localities 0..{localities - 1}")
    if comm:
        for r in range(localities):
            ops = [e for e in doc["traceEvents"] if e["pid"] == r and e.get("cat") == "communication"]
            check(ops, f"locality {r} has no communication in the merged trace")
            check(all(e["args"]["bytes"] > 0 for e in ops), "communication without bytes")
    nodes, _ = parse_dot(os.path.join(d, "tree.dot"))
    with open(os.path.join(d, "counters.csv")) as f:
        rows = list(csv.DictReader(f))
    check(rows, "counters CSV is empty")
    check({int(r["locality"]) for r in rows} == set(range(localities)), "CSV misses a locality")
    by_node = {}
    for r in rows:
        key = f"p{r['program']}n{r['node']}"
        ev, ex = by_node.get(key, (0, 0))
        by_node[key] = (ev + int(r["evaluations"]), ex + int(r["exclusive_ns"]))
    for key, (ev, ex) in by_node.items():
        check(key in nodes, f"CSV node {key} is not in the DOT tree")
        check(int(nodes[key]["evaluations"]) == ev and int(nodes[key]["exclusive_ns"]) == ex,
              f"DOT {key} {nodes[key]} does not match the CSV ({ev}, {ex})")
    dot_total = sum(int(n["exclusive_ns"]) for n in nodes.values())
    check(dot_total == sum(ex for _, ex in by_node.values()), "DOT and CSV totals differ")
    return out, doc


# 1. A program with collectives: same output, merged exports.
tsl = os.path.join(HERE, "trace_program.tsl")
plain = results(run("run", "-n", "2", tsl))
d1 = os.path.join(WORK, "program")
traced = results(run("run", "-n", "2", "--trace", d1, tsl))
check(len(plain) == 2 and plain == traced, f"tracing changed the output: {plain} vs {traced}")
out, doc = check_exports(d1)
check("2 of 2 localities" in out.stdout, out.stdout)

# 2. Data-parallel training: same result, steps split into phases on both localities.
fit = os.path.join(HERE, "trace_fit.py")
plain = results(run("run", "-n", "2", fit), "result")
d2 = os.path.join(WORK, "fit")
traced = results(run("run", "-n", "2", "--trace", d2, fit), "result")
check(len(plain) == 1 and plain == traced, f"tracing changed the training: {plain} vs {traced}")
check_exports(d2)
summary = tessera.trace(d2).summary
for loc in summary["localities"]:
    steps = loc["steps"]
    check(len(steps) == 4, f"locality {loc['locality']} has {len(steps)} steps, expected 4")
    check(all(s[3] for s in steps), "a step was not split into phases")
    check(all(s[4] > 0 and s[5] > 0 and s[7] > 0 for s in steps), "a phase is missing")
    check(any(s[6] > 0 for s in steps), "no step waited for communication")

# 3. The report in a browser.
browser = shutil.which("chromium") or shutil.which("chromium-browser")
check(browser is not None, "chromium is not installed (scripts/install-deps installs it)")
page = "file://" + os.path.join(d2, "report.html")
flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,2200"]
p = subprocess.run([browser, *flags, "--enable-logging=stderr", "--v=0", "--dump-dom", page],
                   capture_output=True, text=True, timeout=120)
dom = p.stdout
errors = [line for line in p.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
check(not errors, "the report's script failed:\n" + "\n".join(errors))
check('data-rendered="yes"' in dom, "the report's script did not finish")
check('<canvas id="gantt"' in dom, "no Gantt chart")
check(dom.count('class="locality-row"') == 2, "the split does not show both localities")
check(dom.count('class="node') > 5, "the execution tree is not drawn")
check(dom.count('class="top-row"') > 3, "no top primitives")
check("utilization-line" in dom, "no utilization chart")
shot = os.path.join(os.getcwd(), "trace-report.png")  # ctest's: the build's tests/distributed
subprocess.run([browser, *flags, "--screenshot=" + shot, page], capture_output=True, timeout=120)
check(os.path.getsize(shot) > 10000, "no screenshot")
print("screenshot:", shot)

# 4. Incomplete traces still give exports that say what is missing.
os.remove(os.path.join(d1, "locality-1.trace"))
out = run("report", d1)
check("warning: locality 1 of 2 wrote no trace (locality-1.trace is missing)" in out.stderr, out.stderr)
with open(os.path.join(d1, "trace.json")) as f:
    problems = json.load(f)["otherData"]["problems"]
check(any("locality 1 of 2 wrote no trace" in p for p in problems), f"problems: {problems}")
with open(os.path.join(d1, "report.html")) as f:
    check("locality 1 of 2 wrote no trace" in f.read(), "the report does not say what is missing")
path = os.path.join(d1, "locality-0.trace")
with open(path, "rb") as f:
    data = f.read()
with open(path, "wb") as f:
    f.write(data[: len(data) // 2])
out = run("report", d1)
check("warning: locality-0.trace is truncated" in out.stderr or "locality-0.trace is damaged" in out.stderr,
      out.stderr)
check_chrome(os.path.join(d1, "trace.json"))

# 5. Not a trace.
empty = os.path.join(WORK, "empty")
os.makedirs(empty)
out = run("report", empty, expect=1)
check(f"ValueError: [report] '{empty}' is not a trace directory: it has no locality-N.trace files" in out.stderr,
      out.stderr)
out = run("report", os.path.join(WORK, "nowhere"), expect=1)
check("does not exist" in out.stderr, out.stderr)

shutil.rmtree(WORK)
print("ok")
