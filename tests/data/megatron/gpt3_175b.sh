#!/bin/bash
# GPT-3 175B (Brown et al. 2020) pretraining on 128 nodes of 8 GPUs:
# 8-way tensor and 16-way pipeline parallelism, 8 data-parallel replicas.

export CUDA_DEVICE_MAX_CONNECTIONS=1

GPUS_PER_NODE=8
NNODES=${NNODES:-128}
CHECKPOINT_PATH=$1   # where to save and load checkpoints
DATA_PATH=$2         # prefix of the preprocessed corpus
TP=8
PP=16

LAUNCHER=(
    --nproc_per_node $GPUS_PER_NODE
    --nnodes $NNODES
    --master_addr ${MASTER_ADDR:-localhost}
    --master_port 6000
)

GPT_MODEL=(
    --num-layers 96
    --hidden-size 12288
    --num-attention-heads 96
    --seq-length 2048               # GPT-3's context
    --max-position-embeddings 2048
    --attention-backend unfused     # scores kept: the paper predates fused attention
)

OPTIMIZATION=(
    --micro-batch-size 1
    --global-batch-size 1536
    --train-iters 500000
    --lr 6.0e-5 --min-lr 6.0e-6 --lr-decay-style cosine
    --weight-decay 0.1 --adam-beta1 0.9 --adam-beta2 0.95
    --clip-grad 1.0
    --init-method-std 0.006
    --bf16
)

PARALLELISM=(
    --tensor-model-parallel-size $TP
    --pipeline-model-parallel-size $PP
    --sequence-parallel             # split the norms' and dropouts' activations over TP
    --use-distributed-optimizer     # ZeRO-1
)

DATA=(
    --data-path $DATA_PATH
    --tokenizer-type GPT2BPETokenizer
    --vocab-file gpt2-vocab.json
    --merge-file gpt2-merges.txt
    --split 969,30,1
)

torchrun "${LAUNCHER[@]}" pretrain_gpt.py \
    "${GPT_MODEL[@]}" \
    "${OPTIMIZATION[@]}" \
    "${PARALLELISM[@]}" \
    "${DATA[@]}" \
    --log-interval 10 \
    --save $CHECKPOINT_PATH \
    --load $CHECKPOINT_PATH
