#!/usr/bin/env python3
"""Executed instructions per CUDA source line of two Nsight Compute source pages, the second
scaled to the first's work: where a short-item launch spends instructions that a long-item one
does not (session 18 found the prefill kernel's per-item integer divisions this way).

  scripts/ncu-insts-per-item.py short.csv.gz long.csv.gz SCALE ITEMS [top-N]

SCALE: the first launch's key tiles / the second's (e.g. 9216 / 66560 for K2 8 x 1024 against
1 x 8192), so that work proportional to tiles cancels; ITEMS: the first launch's work items (the
excess is printed per item). The inputs are `ncu -i rep --page source --csv --print-source
cuda,sass` outputs (scripts/ncu-stalls-by-line.py says how to make them).
"""
import collections
import csv
import gzip
import sys


def fold(path):
    """Instructions executed by (file, line), and each line's source text."""
    inst, text = collections.Counter(), {}
    opener = gzip.open if path.endswith(".gz") else open
    fname, col, line = None, None, "?"
    with opener(path, "rt", newline="") as f:
        for row in csv.reader(f):
            if not row or row[0] == "Function Name":
                continue
            if row[0] == "File Path":
                fname = row[1].split("/")[-1]
                continue
            if row[0] == "Line No":
                col = row.index("Instructions Executed")
                continue
            if col is None or len(row) <= col:
                continue
            if row[0].strip():  # a CUDA line; the SASS rows under it have no line number
                line = row[0]
                text[(fname, line)] = row[1][:90]
            else:
                try:
                    inst[(fname, line)] += int(row[col].replace(",", "") or 0)
                except ValueError:
                    pass
    return inst, text


def main():
    short, long_, scale, items = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    top = int(sys.argv[5]) if len(sys.argv) > 5 else 30
    a, ta = fold(short)
    b, tb = fold(long_)
    tb.update(ta)
    total_a, total_b = sum(a.values()), sum(b.values())
    print(f"# instructions: {total_a} and {total_b}; excess of the first over the scaled second "
          f"{total_a - scale * total_b:.0f} = {(total_a - scale * total_b) / items:.0f} per item")
    excess = {k: a[k] - scale * b[k] for k in set(a) | set(b)}
    for k, v in sorted(excess.items(), key=lambda kv: -kv[1])[:top]:
        print(f"{v / items:8.1f} per item  {a[k]:>10} {b[k]:>11}  {k[0]}:{k[1]} {tb.get(k, '')}")


if __name__ == "__main__":
    main()
