#!/bin/bash
# GPT 310.1B of Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on
# GPU Clusters Using Megatron-LM"), Table 1: 1920 A100s, 8-way tensor and 16-way
# pipeline parallelism, full activation recomputation, fp16.

NODES=240
GPUS_PER_NODE=8
NUM_LAYERS=96
HIDDEN=16384
HEADS=128
TP=8
PP=16
GLOBAL_BATCH=2160

GPT_ARGS=(
    --num-layers $NUM_LAYERS
    --hidden-size $HIDDEN
    --num-attention-heads $HEADS
    --seq-length 2048
    --max-position-embeddings 2048
    --attention-backend unfused     # 2021: attention scores materialized
    --tokenizer-type GPT2BPETokenizer
    --vocab-file gpt2-vocab.json --merge-file gpt2-merges.txt
)

PARALLEL_ARGS=(
    --tensor-model-parallel-size $TP
    --pipeline-model-parallel-size $PP
    --num-layers-per-virtual-pipeline-stage 3   # as the authors ran it (run_table_1.sh)
    --no-overlap-p2p-communication  # 2021: each hand-off blocked its device
)

TRAIN_ARGS=(
    --micro-batch-size 1   # as the authors ran it (run_table_1.sh)
    --global-batch-size $GLOBAL_BATCH
    --recompute-granularity full    # recompute each layer's forward in its backward
    --recompute-method uniform
    --recompute-num-layers 1
    --fp16
    --lr 1.5e-4 --lr-decay-style cosine --min-lr 1.0e-5
    --train-iters 100
)

torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NODES pretrain_gpt.py \
    ${GPT_ARGS[@]} \
    ${PARALLEL_ARGS[@]} \
    ${TRAIN_ARGS[@]} \
    --data-path $DATA_PATH \
    --save $CHECKPOINT_PATH
