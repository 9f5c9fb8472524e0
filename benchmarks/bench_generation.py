"""Sampling throughput against this machine's own roof, measured in the same run (a benchmark, not
a test).

    .venv/bin/python benchmarks/bench_generation.py --data DIR [--model DIR] [--rounds 2] [--batches 16 64]

1. **The machine**: the CPU's model and its bf16 units (AMX, AVX512-BF16, from /proc/cpuinfo),
   the torch threads, the load average before and after.
2. **The roof** of a decoding step of this model at each batch size, measured here:
   * memory: a copy of a 512 MB bf16 tensor (read + write); as in issue 51, half the copy rate
     counts as the read rate. A step must read every weight once (the parameters' bytes) and the
     keys/values it attends to (each shared prompt once, each row's own completion: the fewest
     bytes any sampler must read at this batch, at the mean completion length measured below);
     memory roof = batch / (bytes / read rate);
   * compute: the step's matrix products at the batch size (q/k/v, o, gate/up, down per layer, the
     LM head; separately and fused q/k/v and gate/up, the faster counts), each timed in bf16 (and
     in fp32 for reference); compute roof = batch / (their summed time). Attention's products are
     left out (a few % of the FLOPs), so the roof is a little optimistic;
   * **roof** = the lower of the two, the "x hardware roof" column's denominator.
3. **Every sampling path** on one GRPO generation batch of the rewriting study (its prompts x
   N = 8, T = 0.8, top-p 1, at most ``--max-new-tokens`` 192, the policy in bf16 with the study's
   GRPO LoRA in training mode, as TRL samples it), interleaved in ``--rounds`` rounds (medians):
   * ``transformers generate (TRL's call)``: ``model.generate(generation_config=...)`` as TRL's
     GRPOTrainer calls it;
   * ``sampler: generate``: the GRPO step before the static sampler (shared-prompt pre-fill,
     completions ended after their code block, fast sampling, transformers' generate);
   * ``sampler: loop``: RubriQ's decoding loop over the transformers forward;
   * ``sampler: static``: the loop over the static decoder (the default);
   and, for fixed ``--steps`` one-token steps from the pre-filled prompts (no sampling, no
   ending), the model's step alone: ``transformers forward`` (dynamic cache), ``transformers
   forward, static cache`` and the same under ``torch.compile`` (inductor; with ``--compile``;
   its compile time reported apart), and the ``static decoder step``.

tokens/s counts completion tokens up to and including each row's end-of-sequence token (TRL's
completion mask) per second of wall time. The last part profiles (torch.profiler, self CPU time)
one batch of ``sampler: static`` at the largest batch size. Writes
benchmarks/results/generation.md (``--out``).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STUDY = ROOT / "configs" / "studies" / "rewriting_train.yaml"
PATHS = ["transformers generate (TRL's call)", "sampler: generate", "sampler: loop", "sampler: static"]


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def cpu_info() -> tuple[str, str]:
    """(model name, bf16 units) from /proc/cpuinfo."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "?", "?"
    name = next((x.split(":", 1)[1].strip() for x in text.splitlines() if x.startswith("model name")), "?")
    flags = next((x.split(":", 1)[1].split() for x in text.splitlines() if x.startswith("flags")), [])
    units = [f for f in ("amx_bf16", "amx_tile", "avx512_bf16") if f in flags]
    return name, ", ".join(units) or "none"


def _best(fn, repeat: int = 5, inner: int = 3) -> float:
    """The fastest of ``repeat`` timings of ``inner`` calls, per call (seconds)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - start) / inner)
    return best


def bandwidth(torch) -> float:
    """Copy rate of a 512 MB bf16 tensor, GB/s of read + write traffic."""
    src = torch.ones(256 * 1024 * 1024, dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    seconds = _best(lambda: dst.copy_(src), repeat=5, inner=1)
    return 2 * src.numel() * 2 / seconds / 1e9


def step_shapes(config) -> tuple[list[tuple[int, int]], list[tuple[int, int]], tuple[int, int]]:
    """(per-layer (in, out) products, the same with q/k/v and gate/up fused, the LM head)."""
    h = config.hidden_size
    d = getattr(config, "head_dim", None) or h // config.num_attention_heads
    q, kv, i = config.num_attention_heads * d, config.num_key_value_heads * d, config.intermediate_size
    separate = [(h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h)]
    fused = [(h, q + 2 * kv), (q, h), (h, 2 * i), (i, h)]
    return separate, fused, (h, config.vocab_size)


def matmul_step(torch, config, batch: int, dtype) -> dict:
    """Seconds of one decoding step's matrix products at ``batch`` (the faster of separate and fused
    layer products), and their FLOPs."""
    import torch.nn.functional as F

    separate, fused, head = step_shapes(config)
    layers = config.num_hidden_layers

    def time_of(shapes) -> float:
        total = 0.0
        for k, n in shapes:
            x, w = torch.randn(batch, k, dtype=dtype), torch.randn(n, k, dtype=dtype)
            total += _best(lambda x=x, w=w: F.linear(x, w))
        return total

    layer = min(time_of(separate), time_of(fused))
    seconds = layers * layer + time_of([head])
    flops = 2 * batch * (layers * sum(k * n for k, n in separate) + head[0] * head[1])
    return {"seconds": seconds, "gflops": flops / seconds / 1e9}


def peak_matmul(torch, dtype) -> float:
    a, b = torch.randn(512, 2048, dtype=dtype), torch.randn(2048, 2048, dtype=dtype)
    return 2 * 512 * 2048 * 2048 / _best(lambda: a @ b) / 1e9


def load_policy(args, tmp: Path):
    """(tokenizer, policy): the warm-start merged into its base, bf16, the study's GRPO LoRA on it
    (B initialised at random, so the merged weights differ from the base's), training mode."""
    import torch
    from peft import LoraConfig, PeftModel, get_peft_model

    from rubriq.models import adapter_base, load_model, load_tokenizer, to_policy_precision
    from rubriq.training.config import TrainSettings
    from rubriq.training.train_rubriq import lora_kwargs

    study = TrainSettings.from_yaml(STUDY)
    path = args.model
    if (Path(path) / "adapter_config.json").is_file():
        base = adapter_base(path)
        merged = PeftModel.from_pretrained(load_model(base), path).merge_and_unload()
        merged.save_pretrained(tmp / "model")
        path = str(tmp / "model")
        tokenizer = load_tokenizer(base)
    else:
        tokenizer = load_tokenizer(path)
    model = to_policy_precision(load_model(path), study.model.precision)
    policy = get_peft_model(model, LoraConfig(task_type="CAUSAL_LM", **lora_kwargs(study)))
    torch.manual_seed(0)
    with torch.no_grad():
        for name, p in policy.named_parameters():
            if "lora_B" in name:
                p.normal_(std=1e-3)
    policy.train()
    return tokenizer, policy, study


def make_batch(tokenizer, rows: list[dict], prompts: int, n: int, seed: int):
    """A GRPO generation batch as TRL builds it: each prompt N times, left-padded."""
    import torch

    chosen = random.Random(seed).sample(rows, prompts)
    ids = [
        tokenizer(
            tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True),
            add_special_tokens=False,
        )["input_ids"]
        for r in chosen
        for _ in range(n)
    ]
    width = max(map(len, ids))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids])
    mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids])
    return input_ids, mask


def generation_config(tokenizer, policy, grpo: dict, max_new_tokens: int):
    """The GenerationConfig TRL's GRPOTrainer builds (trl/trainer/grpo_trainer.py)."""
    from transformers import GenerationConfig
    from trl import GRPOConfig

    trl = GRPOConfig(output_dir="unused", report_to=[], use_cpu=True, bf16=False, **grpo)
    eos = policy.generation_config.eos_token_id
    eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    if tokenizer.eos_token_id not in eos:
        eos = [tokenizer.eos_token_id, *eos]
    config = GenerationConfig(
        max_new_tokens=max_new_tokens,
        do_sample=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos,
        temperature=trl.temperature,
        top_p=trl.top_p,
        top_k=trl.top_k,
        min_p=trl.min_p,
        repetition_penalty=trl.repetition_penalty,
        cache_implementation=trl.cache_implementation,
        disable_compile=True,
    )
    return config, eos


def completion_tokens(sequences, prompt_length: int, eos: list[int]) -> tuple[int, float]:
    """(tokens up to and including each row's first end-of-sequence token, their mean per row)."""
    import torch

    completions = sequences[:, prompt_length:]
    is_eos = torch.isin(completions, torch.tensor(eos))
    ends = torch.where(is_eos.any(1), is_eos.int().argmax(1) + 1, completions.shape[1])
    return int(ends.sum()), float(ends.float().mean())


def sampler_of(name: str, policy, tokenizer, study):
    from rubriq.models.generation import GenerateOptions, generate_with_options

    if name == "transformers generate (TRL's call)":
        return policy.generate
    flags = dataclasses.replace(study.generation, sampler=name.removeprefix("sampler: "))
    options = GenerateOptions.from_flags(flags, tokenizer)
    return generate_with_options(policy, **dataclasses.asdict(options))


def sample(name, policy, tokenizer, study, input_ids, mask, config, eos, seed: int) -> dict:
    import torch

    generate = sampler_of(name, policy, tokenizer, study)
    torch.manual_seed(seed)
    with torch.no_grad():
        start = time.perf_counter()
        out = generate(input_ids=input_ids, attention_mask=mask, generation_config=config)
        wall = time.perf_counter() - start
    tokens, mean = completion_tokens(out, input_ids.shape[1], eos)
    return {"tokens": tokens, "wall": wall, "steps": out.shape[1] - input_ids.shape[1], "mean": mean}


def forward_steps(kind: str, policy, input_ids, mask, steps: int) -> dict:
    """``steps`` one-token steps of the whole batch from the pre-filled prompts (greedy, no end);
    a compiled forward is compiled on its first two steps (``compile_s``), then timed."""
    import torch
    from transformers import DynamicCache, StaticCache

    from rubriq.models.static_decoding import StaticDecoder

    batch, prompt = input_ids.shape
    with torch.no_grad():
        if kind == "static decoder step":
            start = time.perf_counter()
            decoder = StaticDecoder.from_model(policy)
            logits = decoder.prefill(input_ids, mask, 8, steps + 1)
            tokens = logits.argmax(-1)
            start = time.perf_counter()
            for t in range(steps):
                tokens = decoder.step(tokens, t).argmax(-1)
            return {"tokens": batch * steps, "wall": time.perf_counter() - start, "steps": steps}
        lm = policy.get_base_model()
        static = kind != "transformers forward"
        warm = 2 if kind.endswith("torch.compile") else 0
        total = steps + warm
        cache = StaticCache(config=lm.config, max_cache_len=prompt + total + 1) if static else DynamicCache()
        positions = (mask.cumsum(-1) - 1).clamp(min=0)
        out = lm(input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True)
        tokens = out.logits[:, -1:].argmax(-1)
        masks = torch.cat([mask, mask.new_ones((batch, total + 1))], dim=1)
        lengths = mask.sum(-1, keepdim=True)

        def step(tokens, m, pos):
            return lm(
                input_ids=tokens, attention_mask=m, position_ids=pos, cache=cache, use_cache=True, logits_to_keep=1
            )

        fn = torch.compile(step, dynamic=False) if warm else step
        compile_s, start = 0.0, time.perf_counter()
        for s in range(total):
            if s == warm and warm:
                compile_s, start = time.perf_counter() - start, time.perf_counter()
            if static:  # the whole static width, not yet written positions masked
                m = masks.clone()
                m[:, prompt + s + 1 :] = 0
            else:
                m = masks[:, : prompt + s + 1]
            out = fn(tokens, m, lengths + s)
            tokens = out.logits[:, -1:].argmax(-1)
        return {"tokens": batch * steps, "wall": time.perf_counter() - start, "steps": steps, "compile_s": compile_s}


def profile_static(policy, tokenizer, study, input_ids, mask, config) -> str:
    import torch
    from torch.profiler import ProfilerActivity, profile

    generate = sampler_of("sampler: static", policy, tokenizer, study)
    torch.manual_seed(0)
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU]) as prof:
        generate(input_ids=input_ids, attention_mask=mask, generation_config=config)
    return prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14, max_name_column_width=48)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=str(ROOT / "results" / "studies" / "rewriting" / "warm_start"))
    parser.add_argument("--data", required=True, help="the rewriting study's `rubriq data build` folder")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--batches", type=int, nargs="+", default=[16, 64], help="rows: prompts x N = 8")
    parser.add_argument("--max-new-tokens", type=int, default=192)
    parser.add_argument("--steps", type=int, default=48, help="one-token steps of the step-only rows")
    parser.add_argument("--compile", action="store_true", help="also time the torch.compile'd forward")
    parser.add_argument(
        "--generate-rounds", type=int, default=0, help="time TRL's generate call in the first N rounds only (0: all)"
    )
    parser.add_argument("--only", nargs="+", choices=PATHS, metavar="NAME", help="sampling paths to run")
    parser.add_argument("--roof-only", action="store_true", help="measure the roof only (no sampling)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "generation.md"))
    args = parser.parse_args()
    import torch

    from rubriq.data.prompts import load_split

    if args.threads:
        torch.set_num_threads(args.threads)
    loads = [load_average()]
    name, units = cpu_info()
    tmp = Path(tempfile.mkdtemp(prefix="bench_generation_"))
    tokenizer, policy, study = load_policy(args, tmp)
    lm = policy.get_base_model()
    rows = load_split(args.data, "train")
    grpo = study.grpo.to_trl() if hasattr(study.grpo, "to_trl") else dict(study.grpo)
    grpo = {k: v for k, v in grpo.items() if k in ("temperature", "top_p", "top_k")}
    config, eos = generation_config(tokenizer, policy, grpo, args.max_new_tokens)
    paths = [] if args.roof_only else args.only or PATHS
    steps_rows = ["transformers forward", "transformers forward, static cache"]
    steps_rows += ["transformers forward, static cache, torch.compile"] if args.compile else []
    steps_rows = [] if args.roof_only else [*steps_rows, "static decoder step"]

    print(f"CPU {name} (bf16 units: {units}), {torch.get_num_threads()} threads, load {loads[0]}", flush=True)
    copy_rate = bandwidth(torch)
    peak = {dt: peak_matmul(torch, dt) for dt in (torch.bfloat16, torch.float32)}
    batches = {b: make_batch(tokenizer, rows, b // 8, 8, args.seed + b) for b in args.batches}
    results: dict[tuple[int, str], list[dict]] = {}
    compile_s: dict[int, float] = {}
    warm, _ = generation_config(tokenizer, policy, grpo, 4)
    for p in paths:  # one-time costs (allocator, oneDNN primitives) out of the first timed path
        sample(p, policy, tokenizer, study, *batches[min(batches)], warm, eos, seed=args.seed)
    for r in range(args.rounds):
        for b, (input_ids, mask) in batches.items():
            for p in paths:
                if p == PATHS[0] and args.generate_rounds and r >= args.generate_rounds:
                    continue  # the slowest path, timed in fewer rounds (said in the table)
                x = sample(p, policy, tokenizer, study, input_ids, mask, config, eos, seed=args.seed + r)
                results.setdefault((b, p), []).append(x)
                print(f"round {r + 1} batch {b} {p}: {x['tokens']} tokens in {x['wall']:.1f} s", flush=True)
            for p in steps_rows:
                if p.endswith("torch.compile") and r > 0:
                    continue  # compiled once (round 1): each compile takes minutes on a CPU
                x = forward_steps(p, policy, input_ids, mask, args.steps)
                if p.endswith("torch.compile"):
                    compile_s[b] = x["compile_s"]
                results.setdefault((b, p), []).append(x)
                print(f"round {r + 1} batch {b} {p}: {x['tokens'] / x['wall']:.1f} tokens/s", flush=True)
        loads.append(load_average())
    weights = sum(p.numel() * p.element_size() for n, p in lm.named_parameters() if "lora_" not in n)
    kv_dim = (
        2
        * lm.config.num_hidden_layers
        * lm.config.num_key_value_heads
        * (getattr(lm.config, "head_dim", None) or lm.config.hidden_size // lm.config.num_attention_heads)
    )
    roofs = {}
    for b, (_, mask) in batches.items():
        mean = (
            statistics.median(x["mean"] for x in results[(b, "sampler: static")]) if "sampler: static" in paths else 96
        )
        prompt = float(mask[::8].sum(-1).float().mean())
        kv_bytes = 2 * kv_dim * ((b // 8) * prompt + b * mean / 2)  # bf16; mean completion length so far: half
        memory = b / ((weights + kv_bytes) / (copy_rate / 2 * 1e9))
        bf16 = matmul_step(torch, lm.config, b, torch.bfloat16)
        fp32 = matmul_step(torch, lm.config, b, torch.float32)
        roofs[b] = {
            "memory": memory,
            "compute": b / bf16["seconds"],
            "compute_fp32": b / fp32["seconds"],
            "gflops": bf16["gflops"],
            "gflops_fp32": fp32["gflops"],
            "bytes": weights + kv_bytes,
            "roof": min(memory, b / bf16["seconds"]),
        }
    loads.append(load_average())
    largest = max(batches)
    profile = profile_static(policy, tokenizer, study, *batches[largest], config) if "sampler: static" in paths else ""
    loads.append(load_average())

    lines = [
        f"Machine: {name}, {os.cpu_count()} cores, bf16 units: {units}; {torch.get_num_threads()} torch threads; "
        f"load average (1/5/15 min) at the start, after each round, after the roofs, after the profile: "
        f"{' | '.join(loads)}.",
        "",
        f"Model: `{args.model}` merged into its base, bf16 ({weights / 1e6:.0f} MB of weights), the rewriting study's "
        f"GRPO LoRA attached in training mode; batches of the study's training prompts x N = 8, T = "
        f"{config.temperature}, top-p {config.top_p}, at most {args.max_new_tokens} new tokens; {args.rounds} "
        "rounds interleaved, medians.",
        "",
        "## The roof, measured in this run",
        "",
        f"- memory: 512 MB bf16 copy {copy_rate:.1f} GB/s (read + write); read rate counted as half: "
        f"{copy_rate / 2:.1f} GB/s",
        f"- matmul peak (512 x 2048 x 2048): bf16 {peak[torch.bfloat16]:.0f} GFLOP/s, fp32 "
        f"{peak[torch.float32]:.0f} GFLOP/s",
        "",
        "| batch | bytes per step (weights + keys/values) | memory roof, tokens/s | bf16 matmuls of a step, GFLOP/s | "
        "compute roof (bf16), tokens/s | fp32 matmuls, GFLOP/s | compute roof (fp32), tokens/s | **roof**, tokens/s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for b, x in roofs.items():
        lines.append(
            f"| {b} | {x['bytes'] / 1e6:.0f} MB | {x['memory']:.0f} | {x['gflops']:.0f} | {x['compute']:.0f} | "
            f"{x['gflops_fp32']:.0f} | {x['compute_fp32']:.0f} | **{x['roof']:.0f}** |"
        )
    lines += [
        "",
        "## Every path",
        "",
        "| batch | path | completion tokens | decoding steps | tokens/s | x hardware roof |",
        "|---|---|---|---|---|---|",
    ]
    for b in batches:
        for p in [*paths, *steps_rows]:
            xs = results[(b, p)]
            rate = statistics.median(x["tokens"] / x["wall"] for x in xs)
            label = f"{p} ({args.steps} steps, no sampling)" if p in steps_rows else p
            if len(xs) < args.rounds:
                label += f" ({len(xs)} round{'s' if len(xs) > 1 else ''})"
            lines.append(
                f"| {b} | {label} | {statistics.mean(x['tokens'] for x in xs):.0f} | "
                f"{statistics.mean(x['steps'] for x in xs):.0f} | {rate:.1f} | {rate / roofs[b]['roof']:.2f} |"
            )
    if compile_s:
        lines += ["", "torch.compile (inductor) of the forward, timed in round 1 only; its compile time: "]
        lines[-1] += ", ".join(f"batch {b}: {s:.0f} s" for b, s in compile_s.items())
    if profile:
        lines += [
            "",
            f"torch.profiler of one `sampler: static` batch of {largest} (self CPU time):",
            "",
            "```",
            profile,
            "```",
        ]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
