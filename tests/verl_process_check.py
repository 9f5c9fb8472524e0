"""verl reward code that starts processes of its own, run in a fresh interpreter: the test process
has run numba's OpenMP kernels (other tests scored in it), after which a forked child that
scores in-process is terminated by numba; and Ray's threads stay out of it.

``python -m tests.verl_process_check REQUEST OUT`` reads ``{"tokenizer": dir, "items": [[response,
ground truth], ...], "prime": [overrides], "ray": [overrides]}`` (Hydra overrides of verl's config
for each run) from the JSON file REQUEST and writes ``{"prime": [...], "ray": [...], "ray_extra":
{key: [...]}}`` to OUT, each row's reward as verl's trainer reads it (the reward tensor summed
over the response); files, not pipes, since processes Ray leaves behind for a moment may hold
this one's stdout:

- ``prime``: verl's PrimeRewardManager (a process pool forked from this process) with the reward
  function of ``reward.custom_reward_function``;
- ``ray``: verl's RewardLoopManager on a local Ray cluster (RewardLoopWorker actors), and its
  ``reward_extra_info`` arrays.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    from transformers import AutoTokenizer

    from tests.verl_helpers import compose, data_proto

    request = json.loads(Path(sys.argv[1]).read_text(encoding="utf-8"))
    tokenizer = AutoTokenizer.from_pretrained(request["tokenizer"])
    data = data_proto(tokenizer, [tuple(item) for item in request["items"]])
    out: dict = {}
    if "prime" in request:  # before Ray starts threads in this process
        from verl.trainer.ppo.reward import get_custom_reward_fn
        from verl.workers.reward_manager.prime import PrimeRewardManager

        function = get_custom_reward_fn(compose(request["prime"]))
        out["prime"] = PrimeRewardManager(tokenizer, num_examine=0, compute_score=function)(data).sum(-1).tolist()
    if "ray" in request:
        import ray

        config = compose([f"actor_rollout_ref.model.path={request['tokenizer']}", *request["ray"]])
        start_ray(ray)
        try:
            from verl.experimental.reward_loop import RewardLoopManager

            scored = RewardLoopManager(config).compute_rm_score(data)
            out["ray"] = scored.batch["rm_scores"].sum(-1).tolist()
            out["ray_extra"] = {k: [float(x) for x in v] for k, v in scored.non_tensor_batch.items()}
        finally:
            ray.shutdown()
    Path(sys.argv[2]).write_text(json.dumps(out), encoding="utf-8")


def start_ray(ray, tries: int = 3) -> None:
    """A local Ray cluster; Ray gives its raylet a fixed 30 s to register, which a loaded machine
    can miss ("The current node timed out during startup"): then a fresh start, ``tries`` times."""
    for attempt in range(1, tries + 1):
        try:
            ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
            return
        except Exception as exc:
            if "timed out during startup" not in str(exc) or attempt == tries:
                raise
            print(f"Ray did not start ({exc}); try {attempt + 1} of {tries}", file=sys.stderr)
            ray.shutdown()


if __name__ == "__main__":
    main()
