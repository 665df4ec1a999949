#!/usr/bin/env python3
"""Per-step kernel timeline from an `nsys stats --report cuda_gpu_trace --format csv` file, or
kernel times from an `ncu --csv --metrics gpu__time_duration.sum` log.

Steps are cut after each sampling kernel (a name with "sample", or the split sampler's last, "rank_kernel"); the decode steps are the
ones with the most common kernel count, and the step of median length among them is printed:
per kernel name, the count, the summed busy time and the summed idle time before it (from the
previous kernel's end to its start), then the step's totals. Used by scripts/gpu-b3-timeline.sh.
"""
import csv
import statistics
import sys
from collections import Counter, OrderedDict


def short(name):
    """The kernel's bare name: no return type, namespaces, template or call arguments."""
    for anon in ("(anonymous namespace)::", "<unnamed>::"):
        name = name.replace(anon, "")
    for cut in ("<", "("):
        name = name.split(cut)[0]
    return name.replace("void ", "").strip().split("::")[-1][:48]


UNIT_NS = {"nsecond": 1, "ns": 1, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6}


def load_ncu(path):
    """ncu --csv --metrics gpu__time_duration.sum: each kernel alone (replayed), no start times;
    kernels are laid end to end, so the idle column reads zero and busy is the isolated sum."""
    rows, t = [], 0
    with open(path, newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # skip ncu's own log lines
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        d = int(float(r["Metric Value"].replace(",", "")) * UNIT_NS[r["Metric Unit"]])
        rows.append((t, t + d, short(r["Kernel Name"])))
        t += d
    return rows


def load(path):
    with open(path, newline="") as f:
        text = f.read()
    if '"Metric Name"' in text:
        return load_ncu(path)
    rows = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            name = r.get("Name", "")
            if name.startswith("[CUDA"):  # memcpy / memset rows
                continue
            start = int(r["Start (ns)"])
            rows.append((start, start + int(r["Duration (ns)"]), short(name)))
    rows.sort()
    return rows


def steps(rows):
    out, cur = [], []
    for row in rows:
        cur.append(row)
        if "sample" in row[2] or "rank_kernel" in row[2]:
            out.append(cur)
            cur = []
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: b3_timeline.py TRACE.csv")
    rows = load(sys.argv[1])
    all_steps = steps(rows)
    if not all_steps:
        sys.exit("no sampling kernel in the trace: no steps to cut")
    modal = Counter(len(s) for s in all_steps).most_common(1)[0][0]
    decode = [s for s in all_steps if len(s) == modal]
    spans = [s[-1][1] - s[0][0] for s in decode]
    step = decode[spans.index(sorted(spans)[len(spans) // 2])]
    per = OrderedDict()
    prev_end = step[0][0]
    for start, end, name in step:
        c = per.setdefault(name, [0, 0, 0])
        c[0] += 1
        c[1] += end - start
        c[2] += max(0, start - prev_end)
        prev_end = max(prev_end, end)
    print(f"{len(decode)} steps of {modal} kernels; median step {sorted(spans)[len(spans)//2]/1e3:.1f} us"
          f" (min {min(spans)/1e3:.1f}, max {max(spans)/1e3:.1f})")
    print(f"{'kernel':48} {'count':>5} {'busy us':>9} {'mean us':>8} {'idle before us':>14}")
    busy = idle = 0
    for name, (n, b, i) in per.items():
        busy += b
        idle += i
        print(f"{name:48} {n:5d} {b/1e3:9.1f} {b/n/1e3:8.2f} {i/1e3:14.1f}")
    print(f"{'total':48} {modal:5d} {busy/1e3:9.1f} {'':8} {idle/1e3:14.1f}")
    overlap = busy + idle - (step[-1][1] - step[0][0])
    print(f"kernels overlapping (PDL): {overlap/1e3:.1f} us counted twice in busy")
    means = statistics.mean(spans) / 1e3
    print(f"mean decode step {means:.1f} us")


if __name__ == "__main__":
    main()
