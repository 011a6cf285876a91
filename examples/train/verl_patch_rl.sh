#!/usr/bin/env bash
# Single-turn patch RL with verl alone (no rLLM): the model reads the issue and answers with a
# diff; compute_score applies it in a fresh sandbox of the task and runs the task's tests.
#
#   sandbox-runtime tasks rllm r2e_subset.jsonl --out data --split train --prompt patch
#   sandbox-runtime tasks rllm swebench_lite.jsonl --out data --split test --prompt patch
#   BACKEND=docker bash examples/train/verl_patch_rl.sh [more Hydra overrides]
#
# The reward keys are the ones verl 0.9.1 reads (custom_reward_function.*; not
# reward_model.reward_kwargs). Keep verl's reward manager 'naive': a sandbox fault then
# fails the step instead of becoming a reward of 0 (docs/training.md).
set -euo pipefail
data="${DATA:-$PWD/data}"
backend="${BACKEND:-docker}"
reward_py="$(python3 -c 'import sandbox_runtime.swe.patch_reward as m; print(m.__file__)')"

python3 -m verl.trainer.main_ppo \
  algorithm.adv_estimator=grpo \
  data.train_files="$data/train_verl.parquet" \
  data.val_files="$data/test_verl.parquet" \
  data.train_batch_size=32 \
  data.max_prompt_length=8192 \
  data.max_response_length=4096 \
  data.truncation=left \
  actor_rollout_ref.model.path="${MODEL:-Qwen/Qwen3-8B}" \
  actor_rollout_ref.actor.optim.lr=1e-6 \
  actor_rollout_ref.actor.ppo_mini_batch_size=32 \
  actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.rollout.name=vllm \
  actor_rollout_ref.rollout.n=8 \
  actor_rollout_ref.rollout.gpu_memory_utilization=0.5 \
  actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu=1 \
  actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=1 \
  custom_reward_function.path="$reward_py" \
  custom_reward_function.name=compute_score \
  +custom_reward_function.reward_kwargs.backend="$backend" \
  +custom_reward_function.reward_kwargs.retries=1 \
  reward.reward_manager.name=naive \
  trainer.n_gpus_per_node="${GPUS:-8}" \
  trainer.nnodes=1 \
  trainer.total_epochs=1 \
  trainer.logger="['console']" \
  "$@"
