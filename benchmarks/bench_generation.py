"""Generation throughput of the GRPO step on the embedded SmolLM2-135M with a LoRA adapter as in
training: the roof (a bare bfloat16 forward) and each sampling implementation, side by side in ONE
run (a benchmark, not a test).

    .venv/bin/python benchmarks/bench_generation.py [--rounds 2] [--threads N] [--model DIR]

The batch is a GRPO step's: ``--prompts`` prompts x N = ``--generations`` completions (4 x 4 = 16),
left-padded as TRL pads them, sampled with the learning study's settings (T = 0.8, top-p 1,
``--max-new-tokens`` 192) and the quickstart's LoRA (r 16, alpha 32, q/k/v/o of the top 12 layers,
dropout 0.05; the model in training mode, as TRL samples it). Rows, interleaved in every round so
that other work on the machine hits each of them alike:

* ``roof``: the bare bf16 model (no adapter), one token per row per forward at the batch's size,
  ``--roof-steps`` steps from the pre-filled prompts (transformers' own cache): only the model's
  forward calls, nothing around them. tokens/s = batch x steps / time;
* ``roof, LoRA attached``: the same forward through the PEFT model (training mode: dropout);
* ``generate (TRL's call)``: ``model.generate(input_ids, attention_mask, generation_config=...)``
  exactly as TRL's GRPOTrainer calls it (no RubriQ option);
* ``RubriQ before``: the GRPO step's sampling before RubriQ's decoding loop: shared-prompt pre-fill,
  completions ended after their code block, fast sampling (``install_prefix_generate`` with
  ``fast_decoding`` off);
* ``RubriQ decode loop, all rows to the end``: ``fast_decoding`` on, ``drop_finished_rows`` off;
* ``RubriQ decode loop``: both on (``fast_decoding`` is off by default: this benchmark measured it no faster);
* ``..., eval mode``: the same with ``sample_without_dropout`` (no dropout while sampling);
* ``..., eval mode, LoRA merged``: the same with the adapter merged into the weights while sampling
  (PEFT ``merge_adapter`` / ``unmerge_adapter``; a measurement, not an option of RubriQ).

tokens/s counts completion tokens up to and including each row's first end-of-sequence token (TRL's
completion mask) per second of wall time; ``tokens/CPU-s`` per second of this process's CPU time
(on a machine shared with other work the CPU time moves less than the wall time). ``outside the
model`` is the share of the wall time not spent in the transformers model's forward (sampling,
logits processing, cache handling, Python). The last round is also run under cProfile for
``RubriQ before`` and ``RubriQ decode loop``: the top entries by own time.
Writes benchmarks/results/generation.md (``--out``).
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

IMPLEMENTATIONS = [
    "roof",
    "roof, LoRA attached",
    "generate (TRL's call)",
    "RubriQ before",
    "RubriQ decode loop, all rows to the end",
    "RubriQ decode loop",
    "RubriQ decode loop, eval mode",
    "RubriQ decode loop, eval mode, LoRA merged",
]


class ForwardClock:
    """Wall time spent inside ``module``'s forward calls (pre/post hooks)."""

    def __init__(self, module) -> None:
        self.seconds, self._start = 0.0, 0.0
        module.register_forward_pre_hook(self._enter)
        module.register_forward_hook(self._exit)

    def _enter(self, *_):
        self._start = time.perf_counter()

    def _exit(self, *_):
        self.seconds += time.perf_counter() - self._start


def load(args):
    import torch
    from peft import LoraConfig, get_peft_model

    from rubriq.models import load_model, load_tokenizer, to_policy_precision
    from rubriq.training.config import TrainSettings
    from rubriq.training.train_rubriq import lora_kwargs

    tokenizer = load_tokenizer()
    qs = TrainSettings.from_yaml(ROOT / "configs" / "quickstart_cpu.yaml")
    bare = to_policy_precision(load_model(args.model)).eval()
    policy = get_peft_model(
        to_policy_precision(load_model(args.model)), LoraConfig(task_type="CAUSAL_LM", **lora_kwargs(qs))
    )
    policy.train()
    return tokenizer, bare, policy, torch


def batch(tokenizer, args):
    """A GRPO generation batch as TRL builds it: each prompt N times, left-padded."""
    import torch

    from rubriq.data.prompts import load_split

    rows = load_split(args.data, "train")
    prompts = random.Random(args.seed).sample(rows, args.prompts)
    ids = [
        tokenizer(
            tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True),
            add_special_tokens=False,
        )["input_ids"]
        for r in prompts
        for _ in range(args.generations)
    ]
    width = max(map(len, ids))
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    input_ids = torch.tensor([[pad] * (width - len(x)) + x for x in ids])
    mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in ids])
    return input_ids, mask


def generation_config(tokenizer, policy, args):
    """The GenerationConfig TRL's GRPOTrainer builds (trl/trainer/grpo_trainer.py) for these settings."""
    from transformers import GenerationConfig
    from trl import GRPOConfig

    trl = GRPOConfig(
        output_dir="unused", temperature=args.temperature, top_p=args.top_p, report_to=[], use_cpu=True, bf16=False
    )
    eos = policy.generation_config.eos_token_id
    eos = [] if eos is None else [eos] if isinstance(eos, int) else list(eos)
    if tokenizer.eos_token_id not in eos:
        eos = [tokenizer.eos_token_id, *eos]
    return GenerationConfig(
        max_new_tokens=args.max_new_tokens,
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
    ), eos


def completion_tokens(sequences, prompt_length: int, eos: list[int]) -> int:
    """Tokens up to and including each row's first end-of-sequence token (TRL's completion mask)."""
    import torch

    completions = sequences[:, prompt_length:]
    is_eos = torch.isin(completions, torch.tensor(eos))
    ends = torch.where(is_eos.any(1), is_eos.int().argmax(1) + 1, completions.shape[1])
    return int(ends.sum())


def roof(model, input_ids, mask, steps: int, torch):
    """(tokens, wall s, CPU s, model s) of ``steps`` one-token forwards of the whole batch."""
    from transformers import DynamicCache

    cache = DynamicCache()
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    with torch.no_grad():
        out = model(input_ids=input_ids, attention_mask=mask, position_ids=positions, cache=cache, use_cache=True)
        tokens = out.logits[:, -1:].argmax(-1)
        masks = torch.cat([mask, mask.new_ones((mask.shape[0], steps))], dim=1)
        lengths = mask.sum(-1, keepdim=True)
        wall, cpu = time.perf_counter(), time.process_time()
        for step in range(steps):
            out = model(
                input_ids=tokens,
                attention_mask=masks[:, : input_ids.shape[1] + step + 1],
                position_ids=lengths + step,
                cache=cache,
                use_cache=True,
                logits_to_keep=1,
            )
            tokens = out.logits[:, -1:].argmax(-1)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    return input_ids.shape[0] * steps, wall, cpu, wall


def sampler(name: str, policy, tokenizer):
    """The generate function of a sampling implementation."""
    from rubriq.models.generation import generate_with_options

    if name == "generate (TRL's call)":
        return policy.generate
    common = {"end_after_block": None, "fast_sampling": True}
    from rubriq.models.generation import fence_token_ids

    common["end_after_block"] = (tuple(fence_token_ids(tokenizer)), tokenizer.eos_token_id)
    options = {
        "RubriQ before": {},
        "RubriQ decode loop, all rows to the end": {"fast_decoding": True, "drop_finished_rows": False},
        "RubriQ decode loop": {"fast_decoding": True},
        "RubriQ decode loop, eval mode": {"fast_decoding": True, "sample_without_dropout": True},
        "RubriQ decode loop, eval mode, LoRA merged": {"fast_decoding": True, "sample_without_dropout": True},
    }[name]
    return generate_with_options(policy, **common, **options)


def run_one(name: str, parts, args, seed: int, profile: cProfile.Profile | None = None) -> dict:
    tokenizer, bare, policy, torch, input_ids, mask, config, eos, clocks = parts
    torch.manual_seed(seed)
    before = {k: c.seconds for k, c in clocks.items()}
    if name.startswith("roof"):
        model = bare if name == "roof" else policy
        tokens, wall, cpu, inside = roof(model, input_ids, mask, args.roof_steps, torch)
        return {"name": name, "tokens": tokens, "wall": wall, "cpu": cpu, "inside": inside, "steps": args.roof_steps}
    generate = sampler(name, policy, tokenizer)
    merged = name.endswith("LoRA merged")
    with torch.no_grad():
        wall, cpu = time.perf_counter(), time.process_time()
        if merged:
            policy.eval()
            policy.merge_adapter()
        if profile is not None:
            profile.enable()
        out = generate(input_ids=input_ids, attention_mask=mask, generation_config=config)
        if profile is not None:
            profile.disable()
        if merged:
            policy.unmerge_adapter()
            policy.train()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    inside = clocks["policy"].seconds - before["policy"]
    return {
        "name": name,
        "tokens": completion_tokens(out, input_ids.shape[1], eos),
        "wall": wall,
        "cpu": cpu,
        "inside": inside,
        "steps": out.shape[1] - input_ids.shape[1],
    }


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def cpu_name() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        return "?"
    return next((line.split(":", 1)[1].strip() for line in out.splitlines() if line.startswith("Model name")), "?")


def top_entries(profile: cProfile.Profile, n: int) -> str:
    stream = io.StringIO()
    stats = pstats.Stats(profile, stream=stream)
    stats.sort_stats("tottime").print_stats(n)
    lines = [x for x in stream.getvalue().splitlines() if x.strip()]
    start = next(i for i, x in enumerate(lines) if x.lstrip().startswith("ncalls"))
    return "\n".join(x.replace(str(ROOT) + "/", "").replace(sys.prefix + "/", "") for x in lines[start - 1 :])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    learning = ROOT / "runs" / "studies" / "learning"
    model = learning / "sft" / "model"
    parser.add_argument("--model", default=str(model) if (model / "config.json").is_file() else "embedded")
    parser.add_argument("--data", default=str(learning / "data"), help="a `rubriq data build` folder (train split)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=192)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--roof-steps", type=int, default=110, help="decoding steps of the roof (~ a mean completion)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="+", choices=IMPLEMENTATIONS, metavar="NAME", help="run only these")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "generation.md"))
    args = parser.parse_args()
    tokenizer, bare, policy, torch = load(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    input_ids, mask = batch(tokenizer, args)
    config, eos = generation_config(tokenizer, policy, args)
    clocks = {"policy": ForwardClock(policy.get_base_model())}
    parts = (tokenizer, bare, policy, torch, input_ids, mask, config, eos, clocks)
    names = args.only or IMPLEMENTATIONS
    loads = [load_average()]
    results: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(args.rounds):
        for name in names:
            results[name].append(run_one(name, parts, args, seed=args.seed + r))
            x = results[name][-1]
            print(f"round {r + 1} {name}: {x['tokens']} tokens in {x['wall']:.1f} s ({x['cpu']:.1f} CPU s)", flush=True)
        loads.append(load_average())
    profiles = {}
    if not args.no_profile:
        for name in ("RubriQ before", "RubriQ decode loop"):
            if name in names:
                profile = cProfile.Profile()
                run_one(name, parts, args, seed=args.seed, profile=profile)
                profiles[name] = top_entries(profile, 14)
        loads.append(load_average())

    def rate(x: dict, key: str) -> float:
        return x["tokens"] / x[key] if x[key] > 0 else float("nan")

    roof_rate = statistics.median(rate(x, "wall") for x in results["roof"]) if "roof" in results else float("nan")
    roof_cpu = statistics.median(rate(x, "cpu") for x in results["roof"]) if "roof" in results else float("nan")
    lines = [
        f"Generation on `{args.model}` with the quickstart's LoRA adapter (training mode), batch "
        f"{input_ids.shape[0]} ({args.prompts} prompts x {args.generations}), prompts padded to "
        f"{input_ids.shape[1]} tokens, T = {args.temperature}, top-p {args.top_p}, at most "
        f"{args.max_new_tokens} new tokens; {args.rounds} interleaved rounds, medians; "
        f"{torch.get_num_threads()} torch threads on {os.cpu_count()} cores ({cpu_name()}); load average "
        f"(1/5/15 min) before, after each round{', after the profile' if profiles else ''}: {' | '.join(loads)}.",
        "",
        "| implementation | completion tokens | decoding steps | tokens/s | tokens/CPU-s | x roof (wall) | "
        "x roof (CPU) | outside the model |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in names:
        xs = results[name]
        wall = statistics.median(rate(x, "wall") for x in xs)
        cpu = statistics.median(rate(x, "cpu") for x in xs)
        outside = statistics.median(1 - x["inside"] / x["wall"] for x in xs)
        lines.append(
            f"| {name} | {statistics.mean(x['tokens'] for x in xs):.0f} | "
            f"{statistics.mean(x['steps'] for x in xs):.0f} | {wall:.1f} | {cpu:.1f} | "
            f"{wall / roof_rate:.2f} | {cpu / roof_cpu:.2f} | {100 * outside:.0f}% |"
        )
    for name, text in profiles.items():
        lines += ["", f"cProfile of one batch, {name} (top entries by own time):", "", "```", text, "```"]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.out).write_text(text)
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        raise SystemExit(main())
