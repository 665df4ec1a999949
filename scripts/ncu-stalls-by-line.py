#!/usr/bin/env python3
"""Warp-stall samples of one Nsight Compute report, folded by CUDA source line.

Nsight Compute's source page lists SASS instructions with their sampled stalls; this sums each
instruction into the CUDA line it came from (the last line named above it) and prints the share
of all samples per file, then the top lines with their three largest stall reasons. On the GPU
machine (the kernel built with -lineinfo, as the Release build is):

  ncu --set full --import-source yes -k regex:prefill_v3tmaq --launch-skip 26 --launch-count 1 \\
      -o rep folio_cuda_tests --gtest_filter='AttentionBench.*'
  ncu -i rep.ncu-rep --page source --csv --print-source cuda,sass | gzip > source.csv.gz

then here or there: scripts/ncu-stalls-by-line.py source.csv.gz [top-N]. Session 14 and 15's
bench/results/*-ncu-*-stalls-by-line.txt were made this way.
"""
import collections
import csv
import gzip
import sys


def rows_of(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", newline="") as f:
        yield from csv.reader(f)


def fold(path):
    """(samples by (file, line), stall reasons by (file, line), source text by (file, line))."""
    samples = collections.Counter()
    reasons = collections.defaultdict(collections.Counter)
    text = {}
    file_name, col, stall_cols = None, None, []
    line, source = "?", ""
    for row in rows_of(path):
        if not row:
            continue
        if row[0] == "File Path":  # a new source file's block
            file_name, col = row[1].split("/")[-1], None
            continue
        if row[0] == "Line No":  # the block's header
            col = {name: i for i, name in enumerate(row)}
            stall_cols = [(n[len("stall_"):], i) for i, n in enumerate(row)
                          if n.startswith("stall_") and "(Not Issued)" not in n]
            continue
        if col is None or "Warp Stall Sampling (All Samples)" not in col:
            continue
        try:
            s = int(row[col["Warp Stall Sampling (All Samples)"]] or 0)
        except ValueError:
            continue
        if row[0]:  # a CUDA line; the SASS rows below it belong to it
            line, source = row[0], row[1]
        key = (file_name, line)
        text[key] = source
        samples[key] += s
        for name, i in stall_cols:
            try:
                reasons[key][name] += int(row[i] or 0)
            except ValueError:
                pass
    return samples, reasons, text


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 40
    samples, reasons, text = fold(sys.argv[1])
    total = sum(samples.values())
    if total == 0:
        sys.exit("no warp-stall samples in " + sys.argv[1])
    print("# total samples", total)
    print("## by file")
    by_file = collections.Counter()
    for (f, _), s in samples.items():
        by_file[f] += s
    for f, s in by_file.most_common(12):
        print(f"{100 * s / total:5.1f}% {f}")
    print("## top lines")
    for key, s in samples.most_common(top):
        r = reasons[key]
        rt = sum(r.values()) or 1
        why = ", ".join(f"{n} {100 * c / rt:.0f}%" for n, c in r.most_common(3))
        print(f"{100 * s / total:5.1f}% {key[0]}:{key[1]} {text[key].strip()[:90]}  [{why}]")


if __name__ == "__main__":
    main()
