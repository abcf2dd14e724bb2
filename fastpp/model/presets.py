"""Published model shapes (the papers' and model cards' configurations)."""

from .transformer import Transformer

MODELS = {model.name: model for model in (
    # LLaMA 2 (Touvron et al. 2023): SwiGLU, RMSNorm, untied embeddings; GQA for 70B
    Transformer(32, 4096, 32, ffn=11008, vocab=32000, swiglu=True, name="llama2-7b"),
    Transformer(40, 5120, 40, ffn=13824, vocab=32000, swiglu=True, name="llama2-13b"),
    Transformer(80, 8192, 64, kv_heads=8, ffn=28672, vocab=32000, swiglu=True,
                name="llama2-70b"),
    # LLaMA 3 (Dubey et al. 2024): GQA with 8 KV heads, vocabulary 128,256
    Transformer(32, 4096, 32, kv_heads=8, ffn=14336, vocab=128256, swiglu=True,
                name="llama3-8b"),
    Transformer(80, 8192, 64, kv_heads=8, ffn=28672, vocab=128256, swiglu=True,
                name="llama3-70b"),
    Transformer(126, 16384, 128, kv_heads=8, ffn=53248, vocab=128256, swiglu=True,
                name="llama3-405b"),
    Transformer(126, 16384, 128, kv_heads=8, ffn=53248, vocab=128256, swiglu=True,
                name="llama3.1-405b"),  # Llama 3.1 405B: Llama 3's 405B shape
    # Mixtral (Jiang et al. 2024; the model cards' config.json): 8 experts, top 2, GQA 8
    Transformer(32, 4096, 32, kv_heads=8, ffn=14336, vocab=32000, swiglu=True, experts=8,
                top_k=2, name="mixtral-8x7b"),
    Transformer(56, 6144, 48, kv_heads=8, ffn=16384, vocab=32768, swiglu=True, experts=8,
                top_k=2, name="mixtral-8x22b"),
    # Qwen3's dense models (their config.json files, torchtitan's qwen3 flavors alike): GQA
    # with 8 KV heads of 128, SwiGLU, embeddings tied up to 4B; their per-head Q/K norms
    # (256 parameters a layer) left out
    *(Transformer(layers, hidden, heads, kv_heads=8, head_dim=128, ffn=ffn, vocab=151936,
                  swiglu=True, tied_embeddings=tied, name=f"qwen3-{size}")
      for size, layers, hidden, heads, ffn, tied in (
          ("0.6b", 28, 1024, 16, 3072, True), ("1.7b", 28, 2048, 16, 6144, True),
          ("4b", 36, 2560, 32, 9728, True), ("8b", 36, 4096, 32, 12288, False),
          ("14b", 40, 5120, 40, 17408, False), ("32b", 64, 5120, 64, 25600, False))),
    # Qwen3-235B-A22B (config.json): 128 experts of 1536, top 8, no shared expert, 64 query
    # heads of 128 (a d = 8192 != h) and 4 KV heads; its per-head Q/K norms (256 parameters a
    # layer) left out
    Transformer(94, 4096, 64, kv_heads=4, head_dim=128, ffn=12288, expert_ffn=1536,
                vocab=151936, swiglu=True, experts=128, top_k=8, name="qwen3-235b-a22b"),
    # Qwen3-30B-A3B (config.json): 128 experts of 768, top 8, no shared expert, 32 query
    # heads of 128 (a d = 4096 != h) and 4 KV heads
    Transformer(48, 2048, 32, kv_heads=4, head_dim=128, ffn=6144, expert_ffn=768,
                vocab=151936, swiglu=True, experts=128, top_k=8, name="qwen3-30b-a3b"),
    # Kimi K2 (config.json): DeepSeek-V3's shape with 64 heads, 384 routed experts of 2048 (top
    # 8) and one shared, one dense layer first, no MTP module, vocabulary 163,840
    Transformer(61, 7168, 64, head_dim=128, v_head_dim=128, ffn=18432, expert_ffn=2048,
                vocab=163840, swiglu=True, experts=384, top_k=8, shared_experts=1,
                dense_layers=1, q_rank=1536, kv_rank=512, rope_dim=64, name="kimi-k2"),
    # DeepSeek-V3 (Liu et al. 2024, config.json): MLA (q_rank 1536, kv_rank 512, heads of
    # 128 + 64 RoPE, V 128), 3 dense layers of 18,432 then 58 MoE layers of 256 routed experts
    # of 2048 (top 8) and one shared, one MTP module; its router's bias (256) left out
    Transformer(61, 7168, 128, head_dim=128, v_head_dim=128, ffn=18432, expert_ffn=2048,
                vocab=129280, swiglu=True, experts=256, top_k=8, shared_experts=1,
                dense_layers=3, mtp_depth=1, q_rank=1536, kv_rank=512, rope_dim=64,
                name="deepseek-v3"),
    # GPT-3 (Brown et al. 2020): 4h GeLU MLP, tied embeddings, dropout
    Transformer(96, 12288, 96, vocab=50257, tied_embeddings=True, dropout=True,
                flash_attention=False, name="gpt3-175b"),
)}
