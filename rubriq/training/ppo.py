"""Sparse-PPO, the paper's PPO baseline: a value head on the policy's LoRA stack, terminal reward.

TRL 1.x removed its PPO trainer and no maintained PPO for Hugging Face causal LMs installs
here, so this module implements PPO (Schulman et al. 2017) with the same model, tokenizer,
LoRA and reward functions as GRPO.  The math is in small pure functions, each tested against
hand-derived values:

* per-token reward: r_t = -beta * (log pi(a_t|s_t) - log pi_ref(a_t|s_t)), plus the terminal
  reward R(c) (default 1/T(c) for correct circuits) on the last completion token;
* GAE: delta_t = r_t + gamma V_{t+1} - V_t, A_t = sum_l (gamma lambda)^l delta_{t+l}, returns
  G_t = A_t + V_t (V after the last token is 0);
* clipped surrogate: L = -E[min(rho A, clip(rho, 1 - eps, 1 + eps) A)], rho = exp(log pi - log pi_old);
* clipped value loss: 0.5 E[max((V - G)^2, (V_old + clip(V - V_old, -eps_v, eps_v) - G)^2)].

The value head is a linear layer on the last hidden state of the shared backbone (the
architecture of TRL's former ``AutoModelForCausalLMWithValueHead``); the reference policy is
the same model with the LoRA adapter disabled, so no second copy is held in memory.

Devices and processes: every tensor lives on the model's device (``accelerate``'s device: a
GPU per process under ``accelerate launch``, else the CPU).  With several processes
(``torch.distributed`` initialized by accelerate: gloo on CPUs, NCCL on GPUs) each rank rolls
out its own share of the prompts, gradients are averaged over the ranks before each optimizer
step (what DDP does; done by hand because the value head and the PEFT model are two modules),
and rank 0 alone writes logs and checkpoints.  Checkpoints hold the adapter, the value head, the optimizer, the RNG states and the step; the
prompt order is a seeded permutation per epoch, so ``--resume`` replays the same data order.
"""

from __future__ import annotations

import json
import logging
import math
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from rubriq.training.config import PPOSettings

log = logging.getLogger(__name__)


# -- the math ----------------------------------------------------------------------------------
def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of ``x`` over the positions where ``mask`` is 1."""
    return (x * mask).sum() / mask.sum().clamp(min=1)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / std over the masked entries (population variance)."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) * torch.rsqrt(var + eps) * mask


def token_rewards(
    terminal: torch.Tensor, logprobs: torch.Tensor, ref_logprobs: torch.Tensor, mask: torch.Tensor, kl_coef: float
) -> torch.Tensor:
    """Per-token rewards: -beta * KL estimate, plus the terminal reward on each row's last token.

    >>> m = torch.tensor([[1., 1., 0.]])
    >>> token_rewards(torch.tensor([2.]), torch.zeros(1, 3), torch.zeros(1, 3), m, 0.1).tolist()
    [[0.0, 2.0, 0.0]]
    """
    rewards = kl_coef * (ref_logprobs - logprobs) * mask
    last = (mask.sum(dim=1) - 1).clamp(min=0).long()
    rewards[torch.arange(len(terminal), device=rewards.device), last] += terminal.to(rewards.device)
    return rewards


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float, lam: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalized advantage estimates and returns over right-padded rows (V after the last
    valid token is 0).

    >>> r = torch.tensor([[0., 1.]]); v = torch.tensor([[0.5, 0.25]]); m = torch.ones(1, 2)
    >>> adv, ret = gae(r, v, m, gamma=1.0, lam=1.0)
    >>> adv.tolist(), ret.tolist()
    ([[0.5, 0.75]], [[1.0, 1.0]])
    """
    values = values * mask
    advantages = torch.zeros_like(rewards)
    last = torch.zeros(rewards.shape[0], dtype=rewards.dtype, device=rewards.device)
    for t in reversed(range(rewards.shape[1])):
        next_value = values[:, t + 1] if t + 1 < rewards.shape[1] else torch.zeros_like(last)
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        last = (delta + gamma * lam * last) * mask[:, t]
        advantages[:, t] = last
    return advantages, (advantages + values) * mask


def policy_loss(
    logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor, mask: torch.Tensor, clip_range: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The clipped surrogate loss and the fraction of tokens where clipping was active."""
    ratio = torch.exp(logprobs - old_logprobs)
    unclipped = -advantages * ratio
    clipped = -advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
    loss = masked_mean(torch.maximum(unclipped, clipped), mask)
    clipfrac = masked_mean((clipped > unclipped).float(), mask)
    return loss, clipfrac


def value_loss(
    values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor, clip_range_value: float
) -> torch.Tensor:
    """PPO's clipped value loss (max of the clipped and unclipped squared errors), masked mean."""
    clipped = old_values + torch.clamp(values - old_values, -clip_range_value, clip_range_value)
    return 0.5 * masked_mean(torch.maximum((values - returns) ** 2, (clipped - returns) ** 2), mask)


# -- the model ---------------------------------------------------------------------------------
class ValueHead(torch.nn.Module):
    """A linear value head on the policy's last hidden state (Sparse-PPO's critic)."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.linear.weight)
        torch.nn.init.zeros_(self.linear.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.linear(hidden).squeeze(-1)


def forward_logprobs_values(
    model, head: ValueHead | None, input_ids: torch.Tensor, attention: torch.Tensor, prompt_len: int
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Log-probabilities of the completion tokens (positions >= prompt_len) and their values."""
    out = model(input_ids=input_ids, attention_mask=attention, output_hidden_states=head is not None)
    logits = out.logits[:, prompt_len - 1 : -1].float()
    targets = input_ids[:, prompt_len:]
    logprobs = torch.log_softmax(logits, dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    values = None
    if head is not None:
        values = head(out.hidden_states[-1][:, prompt_len - 1 : -1].float())
    return logprobs, values


# -- processes ---------------------------------------------------------------------------------
def _world() -> tuple[int, int]:
    """(rank, world size) of torch.distributed, (0, 1) when it is not initialized."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def average_gradients(params: list[torch.Tensor]) -> None:
    """Average ``params``' gradients over the processes (no-op in one process)."""
    rank, world = _world()
    if world == 1:
        return
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
        torch.distributed.all_reduce(p.grad)
        p.grad /= world


def _device():
    """The device accelerate assigns this process (initializes torch.distributed under a launcher)."""
    from accelerate import PartialState

    return PartialState().device


# -- the loop ----------------------------------------------------------------------------------
class PPOTrainer:
    """Sparse-PPO on chat prompt rows with a TRL-style reward function (one scalar per completion)."""

    def __init__(
        self,
        model,
        tokenizer,
        rows: list[dict],
        reward_fn: Callable[..., list[float]],
        settings: PPOSettings,
        output_dir: str | Path,
        lora: dict | None = None,
        callbacks: list[Callable[[dict], bool]] | None = None,
    ) -> None:
        from peft import LoraConfig, get_peft_model

        if not rows:
            raise ValueError("PPO needs at least one prompt row")
        self.settings, self.rows, self.reward_fn = settings, rows, reward_fn
        self.tokenizer = tokenizer
        self.output_dir = Path(output_dir)
        self.callbacks = callbacks or []
        self.rubriq_rewards: Any = None
        """The RubricRewards scoring this run (its stats count the simulations)."""
        if lora is None:
            raise ValueError("PPO here runs on a LoRA adapter (the reference policy is the adapter-off model)")
        self.device = _device()
        self.rank, self.world = _world()
        torch.manual_seed(settings.seed)  # the same adapter and head on every rank
        self.model = get_peft_model(model.to(self.device), LoraConfig(task_type="CAUSAL_LM", **lora))
        self.head = ValueHead(model.config.hidden_size).to(self.device)
        if self.rank:
            torch.manual_seed(settings.seed + self.rank)  # each rank samples its own completions
        params = [p for p in self.model.parameters() if p.requires_grad] + list(self.head.parameters())
        self.optimizer = torch.optim.AdamW(params, lr=settings.learning_rate)
        self.step = 0
        self.writer: Any = None
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"

    # order of prompts: a seeded permutation per epoch (deterministic across resumes); rank r
    # of w processes takes the r-th of w consecutive batches
    def batch_rows(self, step: int) -> list[dict]:
        n, b = len(self.rows), self.settings.batch_size
        first = (step * self.world + self.rank) * b
        out = []
        for i in range(first, first + b):
            epoch, pos = divmod(i, n)
            order = list(range(n))
            random.Random(self.settings.seed + epoch).shuffle(order)
            out.append(self.rows[order[pos]])
        return out

    @torch.no_grad()
    def rollout(self, rows: list[dict]) -> dict[str, Any]:
        s = self.settings
        prompts = [
            self.tokenizer.apply_chat_template(r["prompt"], tokenize=False, add_generation_prompt=True) for r in rows
        ]
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        start = time.perf_counter()
        self.model.eval()
        seq = self.model.generate(
            **enc,
            **s.sampling.generate_kwargs(),
            pad_token_id=self.tokenizer.pad_token_id,
        )
        gen_s = time.perf_counter() - start
        prompt_len = enc["input_ids"].shape[1]
        completion = seq[:, prompt_len:]
        eos = self.tokenizer.eos_token_id
        mask = torch.ones_like(completion, dtype=torch.float)
        for i, row in enumerate(completion.tolist()):  # up to and including the first EOS
            if eos in row:
                mask[i, row.index(eos) + 1 :] = 0
        attention = torch.cat([enc["attention_mask"], mask.long()], dim=1)
        texts = self.tokenizer.batch_decode(
            completion * mask.long() + (1 - mask.long()) * self.tokenizer.pad_token_id, skip_special_tokens=True
        )
        start = time.perf_counter()
        logged: dict[str, list[float]] = {}
        terminal = torch.tensor(
            self.reward_fn(
                prompts=prompts,
                completions=texts,
                target=[r["target"] for r in rows],
                log_metric=lambda k, v: logged.setdefault(k, []).append(v),
            ),
            dtype=torch.float,
            device=self.device,
        )
        reward_s = time.perf_counter() - start
        logprobs, values = forward_logprobs_values(self.model, self.head, seq, attention, prompt_len)
        with self.model.disable_adapter():
            ref_logprobs, _ = forward_logprobs_values(self.model, None, seq, attention, prompt_len)
        return {
            "seq": seq,
            "attention": attention,
            "prompt_len": prompt_len,
            "mask": mask,
            "terminal": terminal,
            "logprobs": logprobs,
            "ref_logprobs": ref_logprobs,
            "values": values,
            "texts": texts,
            "metrics": {k: sum(v) / len(v) for k, v in logged.items()},
            "generation_s": gen_s,
            "reward_s": reward_s,
            "tokens": float(mask.sum()),
        }

    def ppo_update(self, ro: dict[str, Any]) -> dict[str, float]:
        s = self.settings
        mask = ro["mask"]
        rewards = token_rewards(ro["terminal"], ro["logprobs"], ro["ref_logprobs"], mask, s.kl_coef)
        advantages, returns = gae(rewards, ro["values"], mask, s.gamma, s.lam)
        if s.whiten_advantages and mask.sum() > 1:
            advantages = masked_whiten(advantages, mask)
        self.model.train()
        stats: dict[str, list[float]] = {"policy_loss": [], "value_loss": [], "clipfrac": []}
        n = len(mask)
        for _ in range(s.ppo_epochs):
            for idx in torch.randperm(n, device=mask.device).split(s.mini_batch_size):
                logprobs, values = forward_logprobs_values(
                    self.model, self.head, ro["seq"][idx], ro["attention"][idx], ro["prompt_len"]
                )
                pl, clipfrac = policy_loss(logprobs, ro["logprobs"][idx], advantages[idx], mask[idx], s.clip_range)
                assert values is not None  # the policy has a value head here
                vl = value_loss(values, ro["values"][idx], returns[idx], mask[idx], s.clip_range_value)
                loss = pl + s.vf_coef * vl
                self.optimizer.zero_grad()
                loss.backward()
                params = [p for g in self.optimizer.param_groups for p in g["params"]]
                average_gradients(params)
                torch.nn.utils.clip_grad_norm_(params, s.max_grad_norm)
                self.optimizer.step()
                stats["policy_loss"].append(pl.item())
                stats["value_loss"].append(vl.item())
                stats["clipfrac"].append(clipfrac.item())
        kl = masked_mean(ro["logprobs"] - ro["ref_logprobs"], mask).item()
        return {k: sum(v) / len(v) for k, v in stats.items()} | {"kl": kl}

    # -- checkpoints ------------------------------------------------------------------------
    def save(self, directory: Path) -> None:
        """Adapter, value head, optimizer, RNG and step (rank 0 writes; the others wait for it)."""
        if self.rank != 0:
            self._barrier()
            return
        directory.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(str(directory))
        torch.save(
            {
                "head": self.head.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "step": self.step,
                "torch_rng": torch.get_rng_state(),
            },
            directory / "ppo_state.pt",
        )
        (directory / "trainer_state.json").write_text(json.dumps({"global_step": self.step}))
        self._barrier()

    def _barrier(self) -> None:
        if self.world > 1:
            torch.distributed.barrier()

    def load(self, directory: Path) -> None:
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        set_peft_model_state_dict(self.model, load_file(str(directory / "adapter_model.safetensors")))
        state = torch.load(directory / "ppo_state.pt", weights_only=False, map_location=self.device)
        self.head.load_state_dict(state["head"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.step = state["step"]
        torch.set_rng_state(state["torch_rng"].cpu())
        if self.rank:  # the checkpoint holds rank 0's stream; the others get their own
            torch.manual_seed(self.settings.seed + self.rank + 1_000 * self.step)

    # -- training ---------------------------------------------------------------------------
    def train(self, resume_from_checkpoint: str | None = None) -> None:
        from rubriq.training.callbacks import append_jsonl

        s = self.settings
        if resume_from_checkpoint:
            self.load(Path(resume_from_checkpoint))
        self.output_dir.mkdir(parents=True, exist_ok=True)
        if s.tensorboard and self.rank == 0:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(str(self.output_dir / "runs"))
        from rich.progress import Progress

        with Progress(transient=True, disable=self.rank != 0) as progress:
            task = progress.add_task("PPO", total=s.max_steps, completed=self.step)
            while self.step < s.max_steps:
                start = time.perf_counter()
                ro = self.rollout(self.batch_rows(self.step))
                update = self.ppo_update(ro)
                self.step += 1
                step_s = time.perf_counter() - start
                reward = ro["terminal"].mean()
                if self.world > 1:  # the mean over every rank's completions
                    torch.distributed.all_reduce(reward)
                    reward = reward / self.world
                record = {
                    "phase": "ppo",
                    "step": self.step,
                    "reward": float(reward),
                    **ro["metrics"],
                    **update,
                    "step_time": step_s,
                    "timing/generation_s": ro["generation_s"],
                    "timing/reward_s": ro["reward_s"],
                    "timing/update_s": step_s - ro["generation_s"] - ro["reward_s"],
                    "tokens_per_s": ro["tokens"] / ro["generation_s"] if ro["generation_s"] else math.nan,
                }
                if self.step % s.logging_steps == 0 and self.rank == 0:
                    append_jsonl(self.output_dir / "metrics.jsonl", record)
                    if self.writer is not None:
                        for k, v in record.items():
                            if isinstance(v, float) and math.isfinite(v):
                                self.writer.add_scalar(f"train/{k}", v, self.step)
                if s.save_steps and self.step % s.save_steps == 0:
                    self.save(self.output_dir / f"checkpoint-{self.step}")
                progress.update(task, completed=self.step)
                if any(cb(record) for cb in self.callbacks):
                    log.info("early stopping at PPO step %d", self.step)
                    break
        if self.writer is not None:
            self.writer.close()

    def save_model(self, directory: str) -> None:
        self.save(Path(directory))


__all__ = ["PPOSettings", "PPOTrainer", "gae", "masked_whiten", "policy_loss", "token_rewards", "value_loss"]
