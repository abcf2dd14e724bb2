#!/bin/bash
# GPT 3.6B of Narayanan et al. 2021 ("Efficient Large-Scale Language Model Training on
# GPU Clusters Using Megatron-LM"), Table 1: 64 A100s, 2-way tensor and 1-way
# pipeline parallelism, full activation recomputation, fp16.

NODES=8
GPUS_PER_NODE=8
NUM_LAYERS=30
HIDDEN=3072
HEADS=32
TP=2
PP=1
GLOBAL_BATCH=512

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
    # no interleaving, as the authors ran it (run_table_1.sh)
)

TRAIN_ARGS=(
    --micro-batch-size 16   # as the authors ran it (run_table_1.sh)
    --global-batch-size $GLOBAL_BATCH
    --recompute-granularity full    # recompute each layer's forward in its backward
    --recompute-method uniform
    --recompute-num-layers 1
    --fp16
    --overlap-grad-reduce  # 2021: PyTorch's DDP (--DDP-impl torch), reducing under the backward
    --lr 1.5e-4 --lr-decay-style cosine --min-lr 1.0e-5
    --train-iters 100
)

torchrun --nproc_per_node $GPUS_PER_NODE --nnodes $NODES pretrain_gpt.py \
    ${GPT_ARGS[@]} \
    ${PARALLEL_ARGS[@]} \
    ${TRAIN_ARGS[@]} \
    --data-path $DATA_PATH \
    --save $CHECKPOINT_PATH
