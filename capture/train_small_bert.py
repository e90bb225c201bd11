#!/usr/bin/env python3
"""train_small_bert.py - a small BERT-like masked-LM training loop for gmcapture.

The model is built from a transformers BertConfig with random weights: nothing
is downloaded, no network is used. Each iteration is marked for gmcapture:
an NVTX mark "iteration <i>", and NVTX ranges "forward", "backward" and
"optimizer" (torch.cuda.nvtx.range_push / range_pop), which gmcapture turns
into /markers rows and the phase column of /events.

The last stdout line is "RESULT {json}" with the timing of the steps after the
warm-up (loop_s) and PyTorch's own peak memory counters, which
capture/device-check.sh compares between runs with and without capture.
"""
import argparse
import json
import os
import sys
import time

# No network, ever: transformers must not try to reach the Hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import torch  # noqa: E402
from transformers import BertConfig, BertForMaskedLM  # noqa: E402


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=30, help="training steps (default 30)")
    p.add_argument("--warmup", type=int, default=3, help="untimed first steps (default 3)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args()


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        print("train_small_bert: no CUDA device visible to PyTorch", file=sys.stderr)
        return 1
    if args.warmup >= args.steps:
        print("train_small_bert: --warmup must be smaller than --steps", file=sys.stderr)
        return 2
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    config = BertConfig(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=args.heads,
        intermediate_size=4 * args.hidden,
        max_position_embeddings=max(512, args.seq),
    )
    model = BertForMaskedLM(config).to(dev)  # random init from the config
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    nvtx = torch.cuda.nvtx

    torch.cuda.synchronize()
    t_loop = None
    for step in range(args.steps):
        if step == args.warmup:
            torch.cuda.synchronize()
            t_loop = time.perf_counter()
        nvtx.mark(f"iteration {step}")
        ids = torch.randint(0, args.vocab, (args.batch, args.seq), device=dev)
        labels = ids.clone()
        keep = torch.rand(ids.shape, device=dev) > 0.15  # predict ~15% of tokens
        labels[keep] = -100

        nvtx.range_push("forward")
        loss = model(input_ids=ids, labels=labels).loss
        nvtx.range_pop()

        nvtx.range_push("backward")
        loss.backward()
        nvtx.range_pop()

        nvtx.range_push("optimizer")
        opt.step()
        opt.zero_grad(set_to_none=True)
        nvtx.range_pop()
    torch.cuda.synchronize()
    loop_s = time.perf_counter() - t_loop

    result = {
        "steps": args.steps,
        "timed_steps": args.steps - args.warmup,
        "loop_s": round(loop_s, 6),
        "loss": round(float(loss.detach()), 4),
        "max_allocated_bytes": torch.cuda.max_memory_allocated(),
        "max_reserved_bytes": torch.cuda.max_memory_reserved(),
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "no_caching": os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING", ""),
    }
    print("RESULT " + json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
