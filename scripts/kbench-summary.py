#!/usr/bin/env python3
"""Per variant and shape, the range of the K2 (and K1 "default") figures in an AttentionBench log.

    scripts/kbench-summary.py bench.log [more.log ...]

Reads the output of `FOLIO_CUDA_BENCH=1 folio_cuda_tests --gtest_filter='AttentionBench.*'`, plain
or as scripts/gpu-build-ab.sh writes it (sections "== NAME round R"; lines before any section
count as variant "-"). Prints one line per (variant, kernel, shape): the runs' min-max and mean,
per launch and queued. Why: every A/B of whole builds ends in reading 3-4 rounds x 5 shapes x
variants by eye; the ranges are what the notes and results tables quote.
"""
import re
import sys
from collections import defaultdict

K2 = re.compile(r"^K2 prefill (\S+) (\S+)\s*: [\d.]+ us, ([\d.]+) TFLOP/s.*?"
                r"(?:queued \(L2 cold, launch not timed\) [\d.]+ us, ([\d.]+) TFLOP/s)?$")
K1 = re.compile(r"^K1 decode (b\d+ L\d+ page \d+) default \((\w+)\): ([\d.]+) us.*?"
                r"queued ([\d.]+) us")
SECTION = re.compile(r"^== (\S+) round")


def span(values):
    if not values:
        return "-"
    return f"{min(values):.1f}-{max(values):.1f} (mean {sum(values) / len(values):.1f}, n {len(values)})"


def main(paths):
    k2 = defaultdict(lambda: ([], []))  # (variant, kernel, shape) -> (per launch, queued)
    k1 = defaultdict(lambda: ([], []))
    for path in paths:
        variant = "-"
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                line = line.rstrip("\n")
                m = SECTION.match(line)
                if m:
                    variant = m.group(1)
                    continue
                m = K2.match(line)
                if m:
                    launch, queued = k2[(variant, m.group(2), m.group(1))]
                    launch.append(float(m.group(3)))
                    if m.group(4):
                        queued.append(float(m.group(4)))
                    continue
                m = K1.match(line)
                if m:
                    launch, queued = k1[(variant, m.group(2), m.group(1))]
                    launch.append(float(m.group(3)))
                    queued.append(float(m.group(4)))
    if not k2 and not k1:
        sys.exit("no K1/K2 bench lines found")
    for (variant, kernel, shape), (launch, queued) in k2.items():
        print(f"K2 {variant:10} {kernel:7} {shape:7} TFLOP/s per launch {span(launch)}; "
              f"queued {span(queued)}")
    for (variant, kernel, shape), (launch, queued) in k1.items():
        print(f"K1 {variant:10} {kernel:7} {shape:17} us per launch {span(launch)}; "
              f"queued {span(queued)}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1:])
