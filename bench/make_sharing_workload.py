#!/usr/bin/env python3
"""Writes the KV-sharing workload of the decoding issue (the PagedAttention paper's §6.3):
32 prompts of 100-299 random token ids, 64 output tokens each, n=4, either parallel sampling
(temperature 0.8, a seed per request) or beam search (width 4). Usage:
  bench/make_sharing_workload.py parallel > sharing_parallel.jsonl
  bench/make_sharing_workload.py beam > sharing_beam.jsonl
"""
import json
import random
import sys

mode = sys.argv[1] if len(sys.argv) > 1 else "parallel"
random.seed(0)
for i in range(32):
    prompt = [random.randrange(1000, 100000) for _ in range(random.randrange(100, 300))]
    req = {"prompt_token_ids": prompt, "max_tokens": 64, "ignore_eos": True, "n": 4}
    if mode == "parallel":
        req.update(temperature=0.8, seed=i)
    else:
        req.update(use_beam_search=True, temperature=0)
    print(json.dumps(req))
