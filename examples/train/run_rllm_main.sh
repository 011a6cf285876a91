#!/usr/bin/env bash
# GRPO on SWE tasks with rLLM main + verl, the rollouts by this project's AgentFlow
# (entry point sandbox-runtime-swe), graded by its evaluator; today's stack of docs/training.md.
#
#   sandbox-runtime tasks rllm R2E-Gym/R2E-Gym-Subset --split train --register R2E_Gym_Subset --sort-by-image
#   bash examples/train/run_rllm_main.sh [more Hydra overrides]
#
# Where the sandboxes run (every backend of this library, with its options) is the flow's own
# configuration: docs/rllm-main.md.  Settings scaled to one 8-GPU node, as the seeds' run.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"

python3 "$here/train_rllm_main.py" \
  rllm/backend=verl \
  algorithm.adv_estimator=grpo \
  data.train_batch_size="${BATCH:-4}" \
  data.max_prompt_length=4096 \
  data.max_response_length=32768 \
  actor_rollout_ref.model.path="${MODEL:-Qwen/Qwen3-8B}" \
  actor_rollout_ref.actor.ppo_mini_batch_size="${BATCH:-4}" \
  actor_rollout_ref.actor.ppo_max_token_len_per_gpu=40000 \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.mode=async \
  actor_rollout_ref.rollout.n=4 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.5 \
  +sandbox_runtime.train_dataset="${TRAIN_DATASET:-R2E_Gym_Subset}" \
  trainer.n_gpus_per_node="${GPUS:-8}" \
  trainer.nnodes=1 \
  trainer.total_epochs=2 \
  trainer.logger="['console']" \
  "$@"
