#!/bin/bash
# Mixtral 8x7B on 8 nodes of 8 GPUs: expert parallelism 8 across the data-parallel ranks,
# a 4-stage pipeline with 2 model chunks per device (4 layers each), full recomputation.

NODES=8
PER_NODE=8
EP=8
PP=4
LAYERS=32
LAYERS_PER_CHUNK=$(( LAYERS / (PP * 2) ))

MOE_ARGS=(
    --num-experts 8
    --moe-router-topk 2
    --moe-router-load-balancing-type aux_loss
    --moe-aux-loss-coeff 1e-2
    --moe-grouped-gemm
    --moe-token-dispatcher-type alltoall
    --expert-model-parallel-size $EP
    --expert-tensor-parallel-size 1
)

MODEL_ARGS=(
    --num-layers $LAYERS
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention
    --num-query-groups 8
    --swiglu
    --untie-embeddings-and-output-weights
    --normalization RMSNorm
    --disable-bias-linear
    --attention-dropout 0 --hidden-dropout 0
    --seq-length 4096 --max-position-embeddings 32768
    --tokenizer-type Llama2Tokenizer --tokenizer-model tokenizer.model
    --vocab-size 32000
)

PARALLEL_ARGS=(
    --tensor-model-parallel-size 1
    --pipeline-model-parallel-size $PP
    --num-layers-per-virtual-pipeline-stage $LAYERS_PER_CHUNK
    --use-distributed-optimizer
)

TRAINING_ARGS=(
    --micro-batch-size 1
    --global-batch-size 256
    --recompute-granularity full
    --recompute-method uniform
    --recompute-num-layers 1
    --bf16
)

torchrun --nproc_per_node=$PER_NODE --nnodes=$NODES \
    pretrain_gpt.py \
    ${MODEL_ARGS[@]} \
    ${MOE_ARGS[@]} \
    ${PARALLEL_ARGS[@]} \
    ${TRAINING_ARGS[@]}
