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
    # GPT-3 (Brown et al. 2020): 4h GeLU MLP, tied embeddings, dropout
    Transformer(96, 12288, 96, vocab=50257, tied_embeddings=True, dropout=True,
                flash_attention=False, name="gpt3-175b"),
)}
