#!/usr/bin/env python3
"""A model of one decode step's attention over B1's uneven contexts: why row order matters.

The decode kernels (tc, v2) launch one block per (sequence, KV head) over a grid whose blocks are
dispatched in row order onto the GPU's resident slots (2 per SM for tc: 264 on a 132-SM H100 or
H200). A block's time is taken as proportional to its context plus a fixed cost, the same for
every slot (a block that runs alone at the tail does not get the whole GPU's bandwidth: it is
bound by its own loads in flight). Greedy list scheduling then gives the launch's makespan:
  - rows in queue order (FIFO): a long context whose blocks start late decides the end;
  - rows longest first (LPT, FOLIO_DECODE_ROWS=longest-first): the tail holds short blocks;
  - every context split into partitions of at most P tokens (more blocks, plus a merge not
    counted here).
Printed: ideal / makespan (1.0 = every slot busy to the end). A model, not a measurement:
AttentionBench.K1UnevenContexts times the same three cases on a GPU.

  python3 bench/decode_tail_sim.py [--seats 256 1000] [--slots 264] [--fixed 20] [--trials 3]
"""
import argparse
import heapq
import json
import os
import random


def makespan(durations, slots):
    free = [0.0] * slots
    for d in durations:
        t = heapq.heappop(free)
        heapq.heappush(free, t + d)
    return max(free)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seats", type=int, nargs="+", default=[256, 1000])
    ap.add_argument("--slots", type=int, default=264, help="resident blocks (2 per SM x 132)")
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--fixed", type=float, default=20.0, help="per-block cost, in tokens")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--seed", type=int, default=41)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--workload", default=os.path.join(here, "workloads", "sharegpt_like_1000.jsonl"))
    a = ap.parse_args()
    work = [json.loads(line) for line in open(a.workload)]
    rng = random.Random(a.seed)
    for seats in a.seats:
        for _ in range(a.trials):
            lens = []
            for _ in range(seats):
                w = work[rng.randrange(len(work))]
                lens.append(w["input_len"] + rng.randint(1, w["output_len"]))
            blocks = [n + a.fixed for n in lens for _ in range(a.kv_heads)]
            ideal = sum(blocks) / a.slots
            parts = []
            for p in (512, 1024):
                split = [min(p, n - i * p) + a.fixed
                         for n in lens for _ in range(a.kv_heads) for i in range((n + p - 1) // p)]
                parts.append(f"split {p}: {ideal / makespan(split, a.slots):.2f}")
            print(f"seats {seats}: contexts mean {sum(lens) / seats:.0f}, max {max(lens)}; "
                  f"queue order {ideal / makespan(blocks, a.slots):.2f}, longest first "
                  f"{ideal / makespan(sorted(blocks, reverse=True), a.slots):.2f}, "
                  + ", ".join(parts))


if __name__ == "__main__":
    main()
