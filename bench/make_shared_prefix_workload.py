#!/usr/bin/env python3
"""Writes a shared-prefix workload for `folio bench throughput|serve` (SGLang's
generated-shared-prefix dataset): GROUPS groups of PER_GROUP requests; the requests of a group
share a SYSTEM_LEN-token prefix ("prefix_group", "prefix_len": a system prompt or few-shot
examples) followed by QUESTION_LEN tokens of their own, and generate OUTPUT_LEN tokens (EOS
ignored). The lines are shuffled with SEED, as SGLang's bench_serving shuffles them, so a group's
requests arrive spread over the run. Usage:
  bench/make_shared_prefix_workload.py GROUPS PER_GROUP SYSTEM_LEN QUESTION_LEN OUTPUT_LEN SEED > FILE
SGLang's defaults are 64 16 2048 128 256 (bench/workloads/shared_prefix_64x16.jsonl); one system
prompt for every request is GROUPS = 1 (shared_prefix_1x1024.jsonl). SEED 0 keeps each group's
requests adjacent, in group order, as the n samples of one prompt arrive together
(shared_prefix_256x4_adjacent.jsonl: 256 prompts x 4, the cascade kernel's items of 4 rows).
"""
import json
import random
import sys


def main(argv):
    if len(argv) != 7:
        sys.exit(__doc__)
    groups, per_group, system_len, question_len, output_len, seed = (int(a) for a in argv[1:])
    if min(groups, per_group, system_len, question_len, output_len) < 1:
        sys.exit("every count and length must be at least 1")
    lines = [{"input_len": system_len + question_len, "output_len": output_len,
              "prefix_group": g, "prefix_len": system_len}
             for g in range(groups) for _ in range(per_group)]
    if seed != 0:
        random.Random(seed).shuffle(lines)
    for line in lines:
        print(json.dumps(line))


if __name__ == "__main__":
    main(sys.argv)
