#!/usr/bin/env python3
"""The Hugging Face transformers peer for folio's throughput benchmarks (B1, B2).

Runs transformers' continuous batching (`model.generate_batch`, paged attention) on the same
workload folio reads (bench/workloads/*.jsonl: {"input_len", "output_len"} per line, or a fixed
shape), with random weights of the shape a config.json describes (configs/llama-3-8b.json), and
prints requests/s and output tokens/s the way `folio bench throughput` does, plus an optional
JSON result with the same keys.

For the GPU machine only (it needs torch with CUDA and transformers >= 5); not run in CI.

    python3 bench/hf_peer.py --model-config configs/llama-3-8b.json \
        --workload bench/workloads/sharegpt_like_1000.jsonl --output-json out.json

Prompts are random token ids (seeded), EOS never stops a request (eos_token_id -1; the counted
output is what came back), and sampling is greedy. All requests go into one continuous batch
with their own output lengths through the ContinuousBatchingManager that generate_batch wraps;
the timed region starts after its warm-up.
"""

import argparse
import datetime
import json
import random
import sys
import time


def load_workload(path, num_prompts):
    items = []
    with open(path) as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                item = (int(obj["input_len"]), int(obj["output_len"]))
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"{path}:{line_no}: bad workload line: {e}")
            if item[0] < 1 or item[1] < 1:
                sys.exit(f"{path}:{line_no}: lengths must be >= 1")
            items.append(item)
            if num_prompts and len(items) == num_prompts:
                break
    if num_prompts and len(items) < num_prompts:
        sys.exit(f"{path} has only {len(items)} requests, --num-prompts asks for {num_prompts}")
    return items


def build_model(config_path, attn_implementation):
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    with open(config_path) as f:
        cfg_dict = json.load(f)
    model_type = cfg_dict.pop("model_type", "llama")
    config = AutoConfig.for_model(model_type, **cfg_dict)
    # Random weights, built directly on the GPU in bf16 (no 8B-parameter CPU init).
    with torch.device("cuda"):
        try:
            model = AutoModelForCausalLM.from_config(
                config, dtype=torch.bfloat16, attn_implementation=attn_implementation)
        except TypeError:  # older spelling of the dtype argument
            model = AutoModelForCausalLM.from_config(
                config, torch_dtype=torch.bfloat16, attn_implementation=attn_implementation)
    model.eval()
    return model, config


def make_generation_config(max_new_tokens):
    from transformers.generation import GenerationConfig

    # eos_token_id -1 disables EOS (transformers' own convention in continuous batching): a
    # request runs to its max_new_tokens like folio's ignore_eos.
    return GenerationConfig(max_new_tokens=max_new_tokens, do_sample=False,
                            eos_token_id=-1, pad_token_id=0)


def run_manager(model, prompts, items, timeout_s):
    """All requests in one continuous batch, each with its own max_new_tokens (the workload's
    output length), through the ContinuousBatchingManager that generate_batch wraps. The timed
    region starts after the manager's warm-up (CUDA graph capture) and ends with the last result.
    Returns (seconds, output tokens)."""
    import torch

    gc = make_generation_config(max(o for _, o in items))
    with model.continuous_batching_context_manager(generation_config=gc, block=True,
                                                   timeout=60) as manager:
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i, (prompt, (_, n_out)) in enumerate(zip(prompts, items)):
            manager.add_request(input_ids=prompt, request_id=f"req_{i}", max_new_tokens=n_out,
                                eos_token_id=-1)
        done, out_tokens = set(), 0
        deadline = t0 + timeout_s
        while len(done) < len(items):
            if time.perf_counter() > deadline:
                sys.exit(f"timed out after {timeout_s} s with {len(done)} of {len(items)} done")
            result = manager.get_result(timeout=1)
            if result is None:
                if not manager.is_running():
                    sys.exit("the generation thread stopped early (see the log above)")
                continue
            if result.is_finished() and result.request_id not in done:
                done.add(result.request_id)
                out_tokens += len(result.generated_tokens)
        elapsed = time.perf_counter() - t0
    return elapsed, out_tokens


def run_generate_batch(model, prompts, items):
    """Fallback for a transformers without the context manager: generate_batch takes one
    max_new_tokens for all its inputs, so requests are grouped by output length and the groups
    run one after another (slower than one batch: say so when reporting). Each call's warm-up is
    inside the timed region. Returns (seconds, output tokens)."""
    import torch

    groups = {}
    for prompt, (_, n_out) in zip(prompts, items):
        groups.setdefault(n_out, []).append(prompt)
    elapsed, out_tokens = 0.0, 0
    for n_out, group in sorted(groups.items()):
        t0 = time.perf_counter()
        outputs = model.generate_batch(inputs=group, generation_config=make_generation_config(n_out),
                                       progress_bar=False)
        torch.cuda.synchronize()
        elapsed += time.perf_counter() - t0
        out_tokens += sum(len(o.generated_tokens) for o in outputs.values())
    return elapsed, out_tokens


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-config", default="configs/llama-3-8b.json")
    p.add_argument("--workload", help="JSONL of {input_len, output_len}")
    p.add_argument("--input-len", type=int, help="fixed shape instead of --workload")
    p.add_argument("--output-len", type=int)
    p.add_argument("--num-prompts", type=int, default=0, help="0: the whole workload (or 1000)")
    p.add_argument("--attn-implementation", default="paged|sdpa",
                   help='"paged|sdpa" (as measured in docs/performance.md) or "paged|flash_attention_2"')
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timeout", type=float, default=3600.0, help="seconds for the timed run")
    p.add_argument("--output-json")
    args = p.parse_args()

    if args.workload:
        items = load_workload(args.workload, args.num_prompts)
    elif args.input_len and args.output_len:
        items = [(args.input_len, args.output_len)] * (args.num_prompts or 1000)
    else:
        sys.exit("give --workload FILE, or --input-len and --output-len")

    import torch
    import transformers

    model, config = build_model(args.model_config, args.attn_implementation)
    rng = random.Random(args.seed)
    vocab = config.vocab_size
    prompts = [[rng.randrange(vocab) for _ in range(n_in)] for n_in, _ in items]

    if hasattr(model, "continuous_batching_context_manager"):
        elapsed, out_tokens = run_manager(model, prompts, items, args.timeout)
        mode = "manager"
    else:
        elapsed, out_tokens = run_generate_batch(model, prompts, items)
        mode = "generate_batch"

    n = len(items)
    in_tokens = sum(i for i, _ in items)
    result = {
        "requests_per_second": n / elapsed,
        "output_tokens_per_second": out_tokens / elapsed,
        "total_tokens_per_second": (in_tokens + out_tokens) / elapsed,
        "elapsed_seconds": elapsed,
        "num_requests": n,
        "prompt_tokens": in_tokens,
        "output_tokens": out_tokens,
        "expected_output_tokens": sum(o for _, o in items),
        "api": mode,
        "attn_implementation": args.attn_implementation,
        "transformers_version": transformers.__version__,
        "torch_version": torch.__version__,
        "gpu_name": torch.cuda.get_device_name(0),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "command": " ".join(sys.argv),
    }
    print(f"HF transformers {transformers.__version__} ({args.attn_implementation}) on "
          f"{result['gpu_name']}: {result['requests_per_second']:.2f} requests/s, "
          f"{result['total_tokens_per_second']:.2f} total tokens/s, "
          f"{result['output_tokens_per_second']:.2f} output tokens/s "
          f"({n} requests via {mode}, {elapsed:.1f} s)")
    if out_tokens != result["expected_output_tokens"]:
        print(f"note: {out_tokens} output tokens, the workload asked for "
              f"{result['expected_output_tokens']} (a request stopped early)")
    if args.output_json:
        with open(args.output_json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")


if __name__ == "__main__":
    main()
