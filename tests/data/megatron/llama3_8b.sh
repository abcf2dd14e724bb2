#!/bin/bash
# Llama 3 8B on one node of 8 H100s: TP 2 with sequence parallelism, context parallelism 2
# over 8k tokens, FP8 with Transformer Engine, the distributed optimizer, overlapped
# gradient reduction and parameter gather.

GPUS_PER_NODE=8
NUM_NODES=1
TP_SIZE=2
CP_SIZE=2
SEQ_LEN=8192
MBS=1
GBS=128
TOKENIZER=meta-llama/Meta-Llama-3-8B

DISTRIBUTED_ARGS="--nproc_per_node $GPUS_PER_NODE --nnodes $NUM_NODES"

MODEL_ARGS=(
    --num-layers 32
    --hidden-size 4096
    --ffn-hidden-size 14336
    --num-attention-heads 32
    --group-query-attention          # 8 key-value heads
    --num-query-groups 8
    --kv-channels 128
    --swiglu
    --untie-embeddings-and-output-weights
    --normalization RMSNorm
    --position-embedding-type rope
    --rotary-base 500000
    --disable-bias-linear
    --attention-dropout 0.0
    --hidden-dropout 0.0
    --seq-length $SEQ_LEN
    --max-position-embeddings $SEQ_LEN
)

PARALLEL_ARGS=(
    --tensor-model-parallel-size ${TP_SIZE}
    --pipeline-model-parallel-size 1
    --context-parallel-size ${CP_SIZE}
    --cp-comm-type p2p               # K and V passed round a ring
    --sequence-parallel
    --use-distributed-optimizer
    --overlap-grad-reduce
    --overlap-param-gather
)

TRAIN_ARGS=(
    --micro-batch-size $MBS
    --global-batch-size $GBS
    --recompute-granularity selective
    --bf16
    --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max
    --lr 3e-4 --min-lr 3e-5 --lr-warmup-iters 2000
    --tokenizer-type HuggingFaceTokenizer
    --tokenizer-model $TOKENIZER
)

torchrun $DISTRIBUTED_ARGS pretrain_gpt.py ${MODEL_ARGS[@]} ${PARALLEL_ARGS[@]} \
    ${TRAIN_ARGS[@]} --mock-data
