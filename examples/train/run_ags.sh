#!/usr/bin/env bash
# PPO (RLOO) on R2E-Gym tasks with rLLM + verl, every rollout's sandbox on Tencent AGS.
# The seeds' settings, scaled to one 8-GPU node.
#
#   export TENCENTCLOUD_SECRET_ID=... TENCENTCLOUD_SECRET_KEY=... E2B_API_KEY=...
#   sandbox-runtime ags sync --dataset r2e_subset.jsonl --out mapping.json -j 8  # one tool per image
#   sandbox-runtime tasks rllm r2e_subset.jsonl --register R2E_Gym_Subset --split train --sort-by-image
#   bash examples/train/run_ags.sh [more Hydra overrides]
#
# The seeds' stack of docs/training.md (rLLM 4762c2dd, verl 0.5.0, vLLM 0.8.5.post1, R2E-Gym
# 0d94c4e: uv pip install -r requirements/stack-seeds.txt '.[all]', then rLLM and R2E-Gym
# --no-deps).  BACKEND=docker|kubernetes moves the rollouts elsewhere (local only with
# +rllm.env.env_args.backend_options.isolation=namespace); ENV=r2egym uses rLLM's own SWEEnv
# and R2E-Gym's RepoEnv instead of this library's SWEEnv.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
model="${MODEL:-Qwen/Qwen3-8B}"
backend="${BACKEND:-ags}"
env_kind="${ENV:-ours}"
mapping="${TOOL_MAPPING:-$PWD/mapping.json}"

backend_overrides=("+rllm.env.env_args.backend=$backend")
if [ "$backend" = ags ]; then
  # Each task's image -> its AGS tool (the file 'ags sync' wrote); read in every Ray worker.
  backend_overrides+=("+rllm.env.env_args.backend_options.tool_mapping=$mapping")
fi

python3 "$here/train.py" \
  algorithm.adv_estimator=rloo \
  algorithm.kl_ctrl.kl_coef=0.001 \
  data.train_batch_size=4 \
  data.val_batch_size=8 \
  data.max_prompt_length=4096 \
  data.max_response_length=32768 \
  actor_rollout_ref.model.path="$model" \
  actor_rollout_ref.actor.ppo_mini_batch_size=4 \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=40000 \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.5 \
  rllm.agent.name=sweagent \
  rllm.agent.max_steps=50 \
  rllm.env.name=swe \
  "${backend_overrides[@]}" \
  +rllm.env.env_args.step_timeout=90 \
  +rllm.env.env_args.reward_timeout=300 \
  +sandbox_runtime.env="$env_kind" \
  +sandbox_runtime.train_dataset=R2E_Gym_Subset \
  trainer.n_gpus_per_node=8 \
  trainer.nnodes=1 \
  trainer.total_epochs=2 \
  trainer.logger="['console']" \
  "$@"
