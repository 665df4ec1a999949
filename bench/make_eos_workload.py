#!/usr/bin/env python3
"""Writes workloads whose outputs stop early, as at an EOS, for `folio bench throughput`: each line
{"input_len", "output_len", "max_tokens"} is sent with max_tokens and EOS honoured, and ended by the
benchmark after output_len tokens (dummy weights never stop on their own), so the scheduler cannot
know a request's length in advance. Two forms:
  bench/make_eos_workload.py geometric N MEAN MAX_TOKENS SEED > FILE
      N requests: prompts uniform in 32-512 tokens, outputs 1 + geometric(1 / MEAN), at most
      MAX_TOKENS (the loads of tests/sched's AdmissionSimBench.OutputsThatStopEarly);
  bench/make_eos_workload.py from WORKLOAD MAX_TOKENS > FILE
      WORKLOAD's lines with "max_tokens": MAX_TOKENS added (its output lengths become where each
      request stops: sharegpt_like_1000's are ShareGPT's reply lengths);
  bench/make_eos_workload.py fixed N INPUT_LEN OUTPUT_LEN MAX_TOKENS > FILE
      N equal requests; with MAX_TOKENS = OUTPUT_LEN, B2's shape with EOS honoured ("capped":
      the outputs do run to max_tokens, but the scheduler cannot count on it).
"""
import json
import math
import random
import sys


def geometric(n, mean, max_tokens, seed):
    rng = random.Random(seed)
    p = 1.0 / mean
    for _ in range(n):
        prompt = rng.randint(32, 512)
        u = 1.0 - rng.random()  # (0, 1]
        out = 1 + int(math.floor(math.log(u) / math.log(1.0 - p)))
        yield {"input_len": prompt, "output_len": min(out, max_tokens), "max_tokens": max_tokens}


def from_workload(path, max_tokens):
    with open(path) as f:
        for line in f:
            if not line.strip():
                continue
            item = json.loads(line)
            if item["output_len"] > max_tokens:
                sys.exit(f"{path}: output_len {item['output_len']} is over max_tokens {max_tokens}")
            item["max_tokens"] = max_tokens
            yield item


def fixed(n, input_len, output_len, max_tokens):
    if max_tokens < output_len:
        sys.exit(f"max_tokens {max_tokens} is below output_len {output_len}")
    for _ in range(n):
        yield {"input_len": input_len, "output_len": output_len, "max_tokens": max_tokens}


def main():
    args = sys.argv[1:]
    if len(args) == 5 and args[0] == "geometric":
        items = geometric(int(args[1]), float(args[2]), int(args[3]), int(args[4]))
    elif len(args) == 3 and args[0] == "from":
        items = from_workload(args[1], int(args[2]))
    elif len(args) == 5 and args[0] == "fixed":
        items = fixed(int(args[1]), int(args[2]), int(args[3]), int(args[4]))
    else:
        sys.exit(__doc__)
    for item in items:
        print(json.dumps(item))


main()
