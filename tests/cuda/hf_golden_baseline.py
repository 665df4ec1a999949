"""Calibration, not a test: how far Hugging Face transformers itself lands from the fixtures'
float64 goldens when run in bf16 / fp16 on the GPU (the same metric as cuda_engine_test.cc:
||got - want|| / ||want|| per logits vector). Run on the GPU machine, which has torch and
transformers: python3 tests/cuda/hf_golden_baseline.py"""
import json
import sys

import torch
from transformers import AutoModelForCausalLM


def rel(a, b):
    return float(torch.linalg.norm(a - b) / torch.linalg.norm(b))


root = sys.argv[1] if len(sys.argv) > 1 else "tests/data/models"
for model in ["qwen3_hd64", "llama_hd128"]:
    golden = json.load(open(f"{root}/{model}/golden.json"))
    for dtype in [torch.bfloat16, torch.float16]:
        m = AutoModelForCausalLM.from_pretrained(f"{root}/{model}", dtype=dtype).cuda().eval()
        errs = []
        for case in golden["cases"]:
            ids = torch.tensor([case["prompt"]], device="cuda")
            with torch.no_grad():
                logits = m(ids).logits[0].double().cpu()
            errs.append(rel(logits[-1], torch.tensor(case["last_logits"], dtype=torch.float64)))
            for p, want in enumerate(case.get("all_logits", [])):
                errs.append(rel(logits[p], torch.tensor(want, dtype=torch.float64)))
        print(f"transformers {model} {str(dtype)[6:]}: logits rel error mean "
              f"{sum(errs) / len(errs):.4f} max {max(errs):.4f} over {len(errs)} vectors")
