"""verl reward code that starts processes of its own, run in a fresh interpreter: the test process
has run numba's OpenMP kernels (other tests scored in it), after which a forked child that
scores in-process is terminated by numba, and Ray's threads stay out of it.

Reads ``{"mode", "tokenizer", "items": [[response, ground truth], ...], "overrides": [...]}`` as
JSON on stdin and prints each row's reward as verl's trainer reads it (the reward tensor summed
over the response):

- ``ray``: verl's RewardLoopManager on a local Ray cluster (RewardLoopWorker actors), with the
  Hydra ``overrides``: ``{"rewards": [...], "extra": {key: [...]}}`` (the reward_extra_info arrays);
- ``prime``: verl's PrimeRewardManager (a process pool forked from this process) once per
  reward function, ``overrides`` being one list of Hydra overrides per function:
  ``{"rewards": [[...], ...]}``.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    from transformers import AutoTokenizer

    from tests.verl_helpers import compose, data_proto

    request = json.load(sys.stdin)
    tokenizer = AutoTokenizer.from_pretrained(request["tokenizer"])
    data = data_proto(tokenizer, [tuple(item) for item in request["items"]])
    if request["mode"] == "prime":
        from verl.trainer.ppo.reward import get_custom_reward_fn
        from verl.workers.reward_manager.prime import PrimeRewardManager

        rewards = []
        for overrides in request["overrides"]:
            function = get_custom_reward_fn(compose(overrides))
            rewards.append(PrimeRewardManager(tokenizer, num_examine=0, compute_score=function)(data).sum(-1).tolist())
        print(json.dumps({"rewards": rewards}))
        return
    import ray

    config = compose([f"actor_rollout_ref.model.path={request['tokenizer']}", *request["overrides"]])
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        from verl.experimental.reward_loop import RewardLoopManager

        out = RewardLoopManager(config).compute_rm_score(data)
        extra = {k: [float(x) for x in v] for k, v in out.non_tensor_batch.items()}
        print(json.dumps({"rewards": out.batch["rm_scores"].sum(-1).tolist(), "extra": extra}))
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main()
