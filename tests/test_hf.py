"""``fastpp.model.from_hf``: published config.json files give their model cards' counts."""

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from fastpp import ScheduleError
from fastpp.model import MODELS, Transformer, from_hf
from fastpp.model.hf import FAMILIES
from fastpp.model.stages import chunk_kinds

DATA = Path(__file__).parent / "data" / "hf"

# file, total, active (billions) as the model cards (or the papers they cite) state them,
# how many vocabulary matrices the card's active count leaves out (DeepSeek's README and
# OpenAI's gpt-oss card count the output head but not the embedding lookup: 1; GLM's cards
# neither: 12.18B and 32.08B against their 12B and 32B, where 12.80B and 32.85B count the
# head), and the source. A card that gives fewer digits than 1% resolves is checked to its
# last stated digit.
CARDS = [
    ("llama-2-7b.json", 6.74, None, 0, "HF page: 6.74B params"),
    ("llama-3.1-8b.json", 8.03, None, 0, "HF page: 8.03B params"),
    ("llama-3.1-70b.json", 70.6, None, 0, "HF page: 70.6B params"),
    ("mistral-7b-v0.1.json", 7.24, None, 0, "HF page: 7.24B params"),
    ("mixtral-8x7b-v0.1.json", 46.7, 12.9, 0, "Mixtral paper: 47B total, 13B active; "
                                               "HF page 46.7B"),
    ("qwen2-7b.json", 7.62, None, 0, "HF page: 7.62B params"),
    ("qwen1.5-moe-a2.7b.json", 14.3, 2.7, 0, "card: 14.3B total, 2.7B activated"),
    ("qwen3-0.6b.json", 0.6, None, 0, "card: 0.6B, 0.44B non-embedding"),
    ("qwen3-8b.json", 8.2, None, 0, "card: 8.2B, 6.95B non-embedding"),
    ("qwen3-30b-a3b.json", 30.5, 3.3, 0, "card: 30.5B total, 3.3B activated"),
    ("deepseek-v2-lite.json", 15.7, 2.4, 1, "DeepSeek-V2 paper: 15.7B total, 2.4B"),
    ("deepseek-v3.json", 671, 36.7, 1, "README_WEIGHTS: 671B main model, 36.7B "
                                        "activated including 0.9B output head"),
    ("gemma-7b.json", 8.54, None, 0, "HF page: 8.54B params"),
    ("gemma-2-9b.json", 9.24, None, 0, "HF page: 9.24B params"),
    ("gemma-3-1b.json", 1.0, None, 0, "HF page: 1,000M params"),
    ("phi-3-mini-4k.json", 3.82, None, 0, "HF page: 3.82B params"),
    ("olmo-1b-hf.json", 1.18, None, 0, "HF page of allenai/OLMo-1B-hf: 1.18B params"),
    ("olmo-2-1124-7b.json", 7.3, None, 0, "HF page: 7.3B params"),
    ("gpt-oss-20b.json", 20.91, 3.61, 1, "gpt-oss model card Table 1: 20.91B total, "
                                          "3.61B active"),
    ("glm-4.5-air.json", 106, 12, 2, "GLM-4.5 README: GLM-4.5-Air 106B total, 12B active"),
    ("glm-4.6.json", 355, 32, 2, "GLM-4.5 README, GLM-4.6's architecture: 355B total, 32B "
                                 "active"),
    ("gpt2.json", 0.124, None, 0, "card: 124M parameters"),
    ("gpt-neox-20b.json", 20.55, None, 0, "GPT-NeoX-20B paper: 20,554,567,680"),
]


def tolerance(card: float) -> float:
    """1% of the card's figure, or one unit of its last stated digit when that is coarser."""
    digits = str(card).split(".")[1] if "." in str(card) else ""
    return max(0.01 * card, 10.0 ** -len(digits))


@pytest.mark.parametrize("file, total, active, left_out, source", CARDS,
                         ids=[c[0] for c in CARDS])
def test_cards(file, total, active, left_out, source):
    model = from_hf(DATA / file)
    assert abs(model.parameters / 1e9 - total) <= tolerance(total), source
    if active is None:  # a dense model: every parameter active
        assert model.active_parameters == model.parameters
        return
    ours = model.active_parameters - left_out * model.vocab * model.hidden
    assert abs(ours / 1e9 - active) <= tolerance(active), source
    assert model.moe


def test_at_least_ten_models():
    assert len({c[0] for c in CARDS}) >= 10
    assert len(list(DATA.glob("*.json"))) == len(CARDS)


def test_presets_agree():
    """The hand-written presets and the config.json files describe the same models."""
    for file, preset in (("mixtral-8x7b-v0.1.json", "mixtral-8x7b"),
                         ("deepseek-v3.json", "deepseek-v3")):
        ours, theirs = from_hf(DATA / file), MODELS[preset]
        for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "experts",
                     "top_k", "expert_ffn", "shared_experts", "dense_layers", "mtp_depth",
                     "q_rank", "kv_rank", "rope_dim", "head_dim", "v_head_dim",
                     "tied_embeddings", "swiglu"):
            assert getattr(ours, name) == getattr(theirs, name), (file, name)


def load(file):
    return json.loads((DATA / file).read_text())


def test_traps():
    # head_dim apart from hidden / heads
    assert from_hf(DATA / "qwen3-8b.json").head_dim == 128
    gemma = from_hf(DATA / "gemma-7b.json")
    assert gemma.head_dim == 256 and gemma.heads * gemma.head_dim != gemma.hidden
    # the class default of tie_word_embeddings: True for Gemma, GPT-2; False for Llama
    assert gemma.tied_embeddings and "tie_word_embeddings" not in load("gemma-7b.json")
    assert from_hf(DATA / "gpt2.json").tied_embeddings
    assert not from_hf(DATA / "llama-2-7b.json").tied_embeddings
    # GemmaConfig's head_dim default (256) when absent
    config = load("gemma-7b.json")
    del config["head_dim"]
    assert from_hf(config).head_dim == 256
    # intermediate_size is the expert width for Mixtral and gpt-oss
    assert from_hf(DATA / "gpt-oss-20b.json").expert_ffn == 2880
    assert from_hf(DATA / "qwen3-30b-a3b.json").expert_ffn == 768
    # GPT-2's names, its n_inner null meaning 4h, dropout read from the *_pdrop fields
    gpt2 = from_hf(DATA / "gpt2.json")
    assert (gpt2.layers, gpt2.hidden, gpt2.heads, gpt2.ffn) == (12, 768, 12, 3072)
    assert gpt2.dropout and not gpt2.swiglu
    # DeepSeek: first_k_dense_replace, MLA ranks (q_lora_rank null: queries uncompressed), MTP
    lite = from_hf(DATA / "deepseek-v2-lite.json")
    assert (lite.dense_layers, lite.q_rank, lite.kv_rank, lite.shared_experts) == (1, 0, 512, 2)
    assert from_hf(DATA / "deepseek-v3.json").mtp_depth == 1


def test_layer_patterns_place_dense_layers():
    """Dense layers anywhere (Qwen's mlp_only_layers, decoder_sparse_step; DeepSeek's
    moe_layer_freq) are kept where the file puts them (until 6 December 2026 their count was
    placed first, so a pipeline's first stages held every dense layer and its last every
    expert), and a pipeline's stages hold them so."""
    config = load("qwen3-30b-a3b.json")
    config["decoder_sparse_step"] = 2  # transformers: experts where (i + 1) % 2 == 0
    alternate = from_hf(config)
    assert alternate.dense_layers == tuple(range(0, 48, 2)) and alternate.moe_layers == 24
    layers = np.full(4, 12.0)  # four stages of 12 layers: 6 with experts each
    assert chunk_kinds(alternate, layers, [False] * 3 + [True], 0)[0].tolist() == [6.0] * 4
    config["decoder_sparse_step"], config["mlp_only_layers"] = 1, [0, 5, 47]
    assert from_hf(config).dense_layers == (0, 5, 47)
    config["mlp_only_layers"] = [1, 0, 2]  # the first ones: a count
    assert from_hf(config).dense_layers == 3
    config = load("deepseek-v3.json")
    config["moe_layer_freq"] = 2  # MoE on even layers from the 4th: 4, 6, ..., 60
    assert from_hf(config).moe_layers == len(range(4, 61, 2))
    assert from_hf(config).dense_layers == (0, 1, 2, *range(3, 61, 2))


def test_text_config_nesting():
    inner = load("gemma-3-1b.json")
    wrapped = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
               "text_config": {k: v for k, v in inner.items() if k != "model_type"},
               "vision_config": {"hidden_size": 1152, "model_type": "siglip_vision_model"}}
    assert from_hf(wrapped, name="x") == from_hf(inner, name="x")


def test_folder_and_name(tmp_path):
    (tmp_path / "Llama-3.1-8B").mkdir()
    (tmp_path / "Llama-3.1-8B" / "config.json").write_text((DATA / "llama-3.1-8b.json")
                                                           .read_text())
    model = from_hf(tmp_path / "Llama-3.1-8B")
    assert isinstance(model, Transformer) and model.name == "Llama-3.1-8B"
    assert from_hf(str(tmp_path / "Llama-3.1-8B" / "config.json")) == model


def test_bad_input(tmp_path):
    with pytest.raises(ScheduleError, match=r"model_type must be one of \[.*'llama'.*got "
                                            r"'mamba'"):
        from_hf({"model_type": "mamba"})
    config = load("qwen3-8b.json")  # (a family without class defaults: Llama's has them)
    del config["intermediate_size"]
    with pytest.raises(ScheduleError, match="no 'intermediate_size'"):
        from_hf(config)
    config["intermediate_size"] = "11008"
    with pytest.raises(ScheduleError, match="'intermediate_size' must be an integer"):
        from_hf(config)
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ScheduleError, match=f"{bad} is not JSON"):
        from_hf(tmp_path)
    with pytest.raises(ScheduleError, match="no file"):
        from_hf(tmp_path / "missing.json")
    with pytest.raises(ScheduleError, match="must be a dict, a path"):
        from_hf(3)
    with pytest.raises(ScheduleError, match="model_type must be one of"):
        from_hf({"hidden_size": 8})


def test_class_defaults_where_official_files_leave_fields_out():
    """Google's gemma-3-4b-it gives its text_config only the fields that differ from
    Gemma3TextConfig's defaults, and LLaVA 1.5's text_config none of LlamaConfig's: both were
    refused. With the classes' defaults, Gemma 3 4B's language model is the Gemma 3 report's
    3,884M parameters (675M embedding, 3,209M the rest; Table 1), and LlamaConfig's own
    shape is LLaMA 7B's 6.74B."""
    gemma = {"model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
             "text_config": {"hidden_size": 2560, "intermediate_size": 10240,
                             "model_type": "gemma3_text", "num_hidden_layers": 34,
                             "sliding_window": 1024},
             "vision_config": {"hidden_size": 1152, "num_attention_heads": 16}}
    model = from_hf(gemma)
    assert (model.heads, model.kv_heads, model.head_dim, model.vocab) == (8, 4, 256, 262208)
    assert model.parameters / 3.884e9 == pytest.approx(1.0, abs=0.002)
    llava = from_hf({"model_type": "llava", "text_config": {}})
    assert (llava.layers, llava.hidden, llava.ffn, llava.vocab) == (32, 4096, 11008, 32000)
    assert llava.parameters / 6.74e9 == pytest.approx(1.0, abs=0.002)
    with pytest.raises(ScheduleError, match="has no 'hidden_size': for a 'qwen3' model fastpp "
                                            "reads it from the file"):
        from_hf({"model_type": "qwen3", "num_hidden_layers": 2})


def _saved_cases():
    """Every shipped file's fields that equal its class's default (``Family.absent``)."""
    for path in sorted(DATA.glob("*.json")):
        data = json.loads(path.read_text())
        for key, default in FAMILIES[data["model_type"]].absent.items():
            if data.get(key) == default:
                yield pytest.param(path, key, id=f"{path.stem}-{key}")


@pytest.mark.parametrize("path, key", list(_saved_cases()))
def test_a_field_left_at_its_class_default_may_be_absent(path, key):
    """transformers' save_pretrained leaves out the fields that equal the class's defaults
    (Mistral's 8 key-value heads, Qwen3's head size 128): read without them, the model is the
    same (they had been taken as the heads' count or the hidden size over it: Mistral 7B 11%
    heavier, Qwen3 0.6B 15% lighter)."""
    data = json.loads(path.read_text())
    whole = from_hf(data)
    del data[key]
    assert from_hf(data) == whole


def test_a_misspelt_key_is_warned_of():
    """transformers reads a misspelt key as an attribute and the field it meant at its
    class default, silently: Llama-3 70B with ``num_hidden_layer`` is a 32-layer 29.5B
    model, priced so without a word. fastpp warns where a key it does not read misspells
    one it read and found absent; a Qwen2 file without ``num_key_value_heads`` is refused
    naming the key, not as heads its writer never gave."""
    data = json.loads((DATA / "llama-3.1-8b.json").read_text())
    data["num_hidden_layer"] = data.pop("num_hidden_layers")
    with pytest.warns(UserWarning, match=r"'num_hidden_layer' \(not read: a misspelt "
                                         r"'num_hidden_layers'\?\): 'num_hidden_layers' is "
                                         r"absent"):
        assert from_hf(data).layers == 32  # LlamaConfig's default, as transformers reads it
    qwen = {"model_type": "qwen2", "num_hidden_layers": 28, "hidden_size": 3584,
            "num_attention_heads": 28, "intermediate_size": 18944, "vocab_size": 152064}
    with pytest.raises(ScheduleError, match=r"has no 'num_key_value_heads': a 'qwen2' model's "
                                            r"default, 32, does not divide its 28 heads"):
        from_hf(qwen)
    assert from_hf({**qwen, "num_key_value_heads": 4}).kv_heads == 4


def test_an_absent_field_is_not_a_null():
    """A null takes the class's fallback, an absent field its default: DeepSeek-V2-Lite's null
    query rank is no query compression, where an absent one is the class's 1536."""
    data = json.loads((DATA / "deepseek-v2-lite.json")
                      .read_text())
    assert data["q_lora_rank"] is None and from_hf(data).q_rank == 0
    del data["q_lora_rank"]
    assert from_hf(data).q_rank == 1536


def _file(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def test_the_expert_count_under_transformers_alias():
    """transformers 5's ``Qwen3MoeConfig`` maps ``num_experts`` to ``num_local_experts``,
    and ``save_pretrained`` writes the latter: such a file was refused (a review against
    transformers 5.23's classes, 6 December 2026). Mixtral and gpt-oss take the alias the
    other way, DeepSeek ``num_local_experts`` for ``n_routed_experts``; two keys that
    disagree are refused, as no class could hold both."""
    qwen = _file("qwen3-30b-a3b")
    saved = {k: v for k, v in qwen.items() if k != "num_experts"} | {"num_local_experts": 128}
    assert from_hf(saved) == from_hf(qwen)
    mixtral = _file("mixtral-8x7b-v0.1")
    alias = {k: v for k, v in mixtral.items() if k != "num_local_experts"} | {"num_experts": 8}
    assert from_hf(alias) == from_hf(mixtral)
    deepseek = _file("deepseek-v3")
    alias = {k: v for k, v in deepseek.items() if k != "n_routed_experts"}
    assert from_hf(alias | {"num_local_experts": 256}) == from_hf(deepseek)
    with pytest.raises(ScheduleError, match=r"'num_local_experts' and 'num_experts' name one "
                                            r"field \(transformers reads either\): they must "
                                            r"agree \(got 128 and 64\)"):
        from_hf(qwen | {"num_local_experts": 128, "num_experts": 64})


def test_deepseek_v3s_mtp_module_at_the_class_default():
    """``DeepseekV3Config`` holds one MTP module where ``num_nextn_predict_layers`` is absent
    (its ``num_mtp_layers`` alias too): 0 had left out 11.6B trained parameters."""
    deepseek = _file("deepseek-v3")
    assert deepseek["num_nextn_predict_layers"] == 1
    absent = {k: v for k, v in deepseek.items() if k != "num_nextn_predict_layers"}
    assert from_hf(absent).mtp_depth == 1
    assert from_hf(absent | {"num_mtp_layers": 2}).mtp_depth == 2
    lite = _file("deepseek-v2-lite")  # DeepseekV2Config has none
    assert "num_nextn_predict_layers" not in lite and from_hf(lite).mtp_depth == 0


def test_glm_moe_is_deepseeks_layout_of_experts_beside_grouped_query_attention():
    """GLM-4.5's class (``Glm4MoeConfig``) lays its experts out as DeepSeek-V3 does (dense
    layers first, one shared expert, an MTP module) but attends with grouped-query heads of
    its own size: 96 heads of 128 beside a width of 4096 or 5120, 8 KV heads, no latent
    ranks. A field the file leaves at the class's default (GLM-4.5-Air's shape) may be
    absent; an absent MTP count is the class's none."""
    air = from_hf(DATA / "glm-4.5-air.json")
    assert (air.heads, air.kv_heads, air.head_dim, air.hidden) == (96, 8, 128, 4096)
    assert (air.q_rank, air.kv_rank, air.rope_dim, air.v_head_dim) == (0, 0, 0, 128)
    assert (air.experts, air.top_k, air.shared_experts, air.expert_ffn) == (128, 8, 1, 1408)
    assert (air.dense_layers, air.mtp_depth, air.ffn) == (1, 1, 10944)
    big = from_hf(DATA / "glm-4.6.json")
    assert (big.dense_layers, big.experts, big.mtp_depth, big.layers) == (3, 160, 1, 92)
    defaults = ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
                "vocab_size", *FAMILIES["glm4_moe"].absent)
    bare = {k: v for k, v in _file("glm-4.5-air").items() if k not in defaults}
    assert from_hf(bare, name=air.name) == replace(air, mtp_depth=0)
    # no fallback for a null or no experts: GLM's MoE layer cannot be built without them
    for key, value in (("n_routed_experts", 0), ("n_routed_experts", None),
                       ("n_shared_experts", None), ("first_k_dense_replace", None)):
        with pytest.raises(ScheduleError, match=repr(key)):
            from_hf(_file("glm-4.5-air") | {key: value})
    # without head_dim its 96 heads do not divide the width: the file must say it
    with pytest.raises(ScheduleError, match=r"has no 'head_dim', and its 96 heads do not "
                                            r"divide hidden_size 4096: give the head size"):
        from_hf({k: v for k, v in _file("glm-4.5-air").items() if k != "head_dim"})
    # dense layers past the last: every layer the dense MLP, as the class builds it
    dense = from_hf(_file("glm-4.5-air") | {"first_k_dense_replace": 50})
    assert (dense.experts, dense.moe_layers, dense.ffn) == (0, 0, 10944)


def test_kimi_k2_files_are_deepseek_v3s_architecture():
    """Kimi K2's config.json names its own ``model_type`` (``kimi_k2``) over DeepSeek-V3's
    architecture and configuration class: it was refused. Read as that class reads it, it is
    the hand-written preset."""
    kimi = _file("deepseek-v3") | {"model_type": "kimi_k2", "num_attention_heads": 64,
                                   "num_key_value_heads": 64, "n_routed_experts": 384,
                                   "first_k_dense_replace": 1, "num_nextn_predict_layers": 0,
                                   "vocab_size": 163840, "_name_or_path": "kimi-k2"}
    assert from_hf(kimi) == MODELS["kimi-k2"]


def test_minimax_m2_every_layer_experts_at_its_card():
    """MiniMax-M2 (``MiniMaxM2Config``): every layer 256 experts of ``intermediate_size``
    (Mixtral's spelling), top 8, no shared expert, 48 heads of 128 beside a width of 3072.
    Its README: 230B total, 10B active (fastpp: 228.7B, 10.4B). Its MTP modules
    (``use_mtp``, ``num_mtp_modules``) are not in transformers' class, and are left out. A
    file at the class's defaults reads the same model."""
    released = {"architectures": ["MiniMaxM2ForCausalLM"], "model_type": "minimax_m2",
                "vocab_size": 200064, "hidden_size": 3072, "intermediate_size": 1536,
                "num_hidden_layers": 62, "num_attention_heads": 48, "num_key_value_heads": 8,
                "head_dim": 128, "num_local_experts": 256, "num_experts_per_tok": 8,
                "use_mtp": True, "num_mtp_modules": 3, "mtp_transformer_layers": 1,
                "use_qk_norm": True, "rotary_dim": 64, "tie_word_embeddings": False}
    model = from_hf(released)
    assert (model.experts, model.top_k, model.expert_ffn, model.shared_experts) == (256, 8,
                                                                                   1536, 0)
    assert model.moe_layers == 62 and model.mtp_depth == 0
    assert abs(model.parameters / 1e9 - 230) <= tolerance(230)
    # the card's 10B is within its last digit with either vocabulary matrix left out or both
    # (10.4B, 9.8B): it does not say which it counts
    for left_out in (1, 2):
        active = model.active_parameters - left_out * model.vocab * model.hidden
        assert abs(active / 1e9 - 10) <= tolerance(10)
    assert from_hf({"model_type": "minimax_m2"}) == model


def test_llama4_experts_every_step_th_layer_beside_a_shared_one():
    """Llama 4 (``Llama4TextConfig``, under the multimodal file's ``text_config``): one shared
    expert beside the routed ones (top 1), on every ``interleave_moe_layer_step``-th layer
    from ``step - 1``; the other layers dense at ``intermediate_size_mlp``. Maverick's text
    model (its released text_config's fields; vLLM's tests copy them, cut to two layers) holds
    its card's 400B total and 17B active; the class's defaults are Scout's shape (its card's
    109B holds the vision encoder beside the 107.8B text model)."""
    text = {"attention_chunk_size": 8192, "head_dim": 128, "hidden_size": 5120,
            "interleave_moe_layer_step": 2, "intermediate_size": 8192,
            "intermediate_size_mlp": 16384, "model_type": "llama4_text",
            "num_attention_heads": 40, "num_experts_per_tok": 1, "num_hidden_layers": 48,
            "num_key_value_heads": 8, "num_local_experts": 128, "use_qk_norm": False,
            "vocab_size": 202048, "tie_word_embeddings": False}
    maverick = from_hf({"model_type": "llama4", "text_config": text})
    assert maverick.dense_layers == tuple(range(0, 48, 2)) and maverick.moe_layers == 24
    assert (maverick.shared_experts, maverick.top_k, maverick.expert_ffn, maverick.ffn) == (
        1, 1, 8192, 16384)
    assert abs(maverick.parameters / 1e9 - 400) <= tolerance(400)
    assert abs(maverick.active_parameters / 1e9 - 17) <= tolerance(17)
    listed = from_hf({"model_type": "llama4", "text_config": text | {
        "moe_layers": list(range(1, 48, 2))}}, name=maverick.name)
    assert listed == maverick
    scout = from_hf({"model_type": "llama4", "text_config": {}})
    assert (scout.experts, scout.moe_layers, scout.kv_heads, scout.heads) == (16, 48, 8, 40)
    h, q, kv = 5120, 40 * 128, 8 * 128  # a layer: Q, K, V, O; router; 16 + 1 experts; norms
    layer = 2 * h * q + 2 * h * kv + 16 * h + 17 * 3 * h * 8192 + 2 * h
    assert scout.parameters == 48 * layer + 2 * 202048 * h  # 107.8B


def test_olmo3_and_smollm3_at_their_classes_defaults():
    """OLMo 3 (``Olmo3Config``): OLMo 2's layer with a 4,096-token sliding window on three
    layers in four (``layer_types``, else the class's pattern), key-value heads the heads'
    count where absent. SmolLM3 (``SmolLM3Config``): Llama's layer, 4 key-value heads and a
    tied embedding where absent. Their parameters, counted by hand from the classes'
    defaults."""
    olmo = from_hf({"model_type": "olmo3"})
    assert (olmo.kv_heads, olmo.window, olmo.window_layers, olmo.tied_embeddings) == (
        32, 4096, 24, False)
    h, f = 4096, 11008
    assert olmo.parameters == 32 * (4 * h * h + 3 * h * f + 2 * h) + 2 * 50304 * h
    types = ["sliding_attention"] * 3 + ["full_attention"]
    toy = from_hf({"model_type": "olmo3", "num_hidden_layers": 8, "layer_types": types * 2,
                   "sliding_window": 64})
    assert (toy.window, toy.window_layers) == (64, 6)
    smol = from_hf({"model_type": "smollm3"})
    assert (smol.kv_heads, smol.tied_embeddings, smol.window) == (4, True, 0)
    # with use_sliding_window its NoPE layers slide: every fourth, or no_rope_layers' zeros
    sliding = {"model_type": "smollm3", "use_sliding_window": True, "sliding_window": 4096}
    assert from_hf(sliding).window_layers == 9
    assert from_hf(sliding | {"no_rope_layers": [1, 0] * 18}).window_layers == 18
    assert from_hf(sliding | {"use_sliding_window": False}).window == 0
    h, kv = 2048, 4 * 128
    assert smol.parameters == 36 * (2 * h * h + 2 * h * kv + 3 * h * 11008 + 2 * h) + 128256 * h


def test_explain_says_what_the_family_leaves_out(capsys, tmp_path):
    """``explain --hf`` prints the family's note (what ``from_hf`` leaves out) as the other
    importers print theirs; a family with none prints no note."""
    from fastpp.__main__ import main
    from fastpp.model.hf import approximations

    args = ["--gpus", "8", "--tp", "2", "--global-batch", "8", "--seq", "1024",
            "--neighbours", "0", "--workers", "1"]
    assert main(["explain", "--hf", str(DATA / "qwen3-8b.json"), *args]) == 0
    assert "  note: model_type qwen3: per-head Q/K norms (2 d a layer) left out" in (
        capsys.readouterr().out)
    assert approximations(DATA / "llama-3.1-8b.json") == ()
    with pytest.raises(ScheduleError, match="model_type must be one of"):
        approximations({"model_type": "bert"})
    # a Megatron launch's shape from --model config.json: that file's family, said alike
    script = str(Path(__file__).parent / "data" / "megatron" / "llama3_8b.sh")
    assert main(["explain", "--megatron-script", script, "--model", str(DATA / "qwen3-8b.json"),
                 "--hardware", "H100-80GB", "--neighbours", "0", "--workers", "1"]) == 0
    assert "  note: model_type qwen3: per-head Q/K norms" in capsys.readouterr().out
    # and a torchtitan job's (as every source that takes --model)
    job = ('[model]\nname = "llama3"\nflavor = "8B"\n[parallelism]\n'
           'data_parallel_shard_degree = 8\n[training]\nseq_len = 8192\nlocal_batch_size = 1\n')
    toml = tmp_path / "job.toml"
    toml.write_text(job)
    assert main(["explain", "--torchtitan", str(toml), "--gpus", "8", "--model",
                 str(DATA / "qwen3-8b.json"), "--neighbours", "0", "--workers", "1"]) == 0
    out = capsys.readouterr().out
    assert out.count("  note: model_type qwen3: per-head Q/K norms") == 1
    assert main(["explain", "--hf", str(DATA / "llama-3.1-8b.json"), *args]) == 0
    assert "note:" not in capsys.readouterr().out


def test_gpt2_and_neox_heads_are_neither_grouped_nor_resized():
    """``GPT2Attention`` and ``GPTNeoXAttention`` build ``h -> 3h`` with heads of ``h / a``
    whatever ``num_key_value_heads`` or ``head_dim`` say: read, they had made Pythia-160m's
    shape 5.9% and 8.8% light. GPT-2's class drops out at 0.1 where a rate is absent."""
    neox = _file("gpt-neox-20b")
    plain = from_hf(neox)
    assert (plain.kv_heads, plain.head_dim) == (64, 96)
    assert from_hf(neox | {"num_key_value_heads": 8, "head_dim": 32}) == plain
    gpt2 = _file("gpt2")
    assert from_hf(gpt2 | {"num_key_value_heads": 4, "head_dim": 32}) == from_hf(gpt2)
    bare = {k: v for k, v in gpt2.items() if not k.endswith("_pdrop")}
    assert from_hf(bare).dropout
    assert not from_hf(bare | {"resid_pdrop": 0, "embd_pdrop": 0, "attn_pdrop": 0}).dropout
    with pytest.raises(ScheduleError, match=r"'add_cross_attention' must be false"):
        from_hf(gpt2 | {"add_cross_attention": True})


def test_qwen_moe_windows_slide_the_layers_transformers_slides():
    """With ``use_sliding_window``: ``Qwen3MoeAttention`` slides every layer;
    ``Qwen2MoeConfig``'s ``layer_types`` the even layers below ``max_window_layers`` (24
    layers, 21: 0, 2, ..., 20); fastpp had applied the dense Qwens' rule (the layers from
    ``max_window_layers`` on) to both: 0 and 3."""
    on = {"use_sliding_window": True, "sliding_window": 4096}
    assert from_hf(_file("qwen3-30b-a3b") | on).window_layers == 48
    assert from_hf(_file("qwen1.5-moe-a2.7b") | on).window_layers == 11
    assert from_hf(_file("qwen1.5-moe-a2.7b") | on | {"max_window_layers": 4}).window_layers == 2


def test_qwen_moe_without_experts_is_the_dense_model():
    """``num_experts`` 0 (or every layer in ``mlp_only_layers``): transformers builds every
    layer's dense MLP of ``intermediate_size``; fastpp had refused a top-k of no experts."""
    qwen = _file("qwen1.5-moe-a2.7b")
    dense = from_hf(qwen | {"num_experts": 0})
    assert not dense.moe and dense.ffn == qwen["intermediate_size"]
    assert from_hf(qwen | {"mlp_only_layers": list(range(24))}) == dense


def test_deepseek_mtp_after_a_dense_last_layer_names_the_file_keys():
    """An MTP module repeats the last layer, which ``moe_layer_freq`` may leave dense: the
    refusal names the file's keys, not fastpp's fields."""
    config = load("deepseek-v3.json")
    config["moe_layer_freq"] = 3  # of 59 layers the last, 58, is dense (58 % 3 != 0)
    config["num_hidden_layers"] = 59
    with pytest.raises(ScheduleError, match=r"'moe_layer_freq' = 3 leaves the last layer "
                                            r"dense, which an MTP module repeats"):
        from_hf(config)


def test_a_pattern_over_a_billion_layers_is_refused_not_built():
    """Dense layers placed one by one (``dense_placed``) for at most 100,000 layers: a
    billion had filled the memory (the whole interpreter killed, found by the API fuzz)."""
    config = load("qwen3-30b-a3b.json") | {"num_hidden_layers": 10**9, "decoder_sparse_step": 2}
    with pytest.raises(ScheduleError, match=r"'decoder_sparse_step' places each layer: the "
                                            r"layers must be at most 100,000"):
        from_hf(config)
    from fastpp.model.megatron import from_megatron
    with pytest.raises(ScheduleError, match=r"--moe-layer-freq places each layer"):
        from_megatron("--num-layers 1000000000 --hidden-size 256 --num-attention-heads 8 "
                      "--seq-length 512 --vocab-size 1000 --micro-batch-size 1 "
                      "--num-experts 8 --moe-layer-freq 2", gpus=1)


def test_a_files_bad_layer_lists_and_aliases_are_named():
    """A reviewer's probes (6 December 2026, night), each accepted before: an unknown
    ``layer_types`` name counted as full attention (transformers refuses it), ``no_rope_layers``
    of strings or shorter than the layers fell back to the class's pattern or counted wrong,
    and gpt-oss's two spellings of its top-k disagreeing took one silently."""
    gemma = _file("gemma-2-9b")
    with pytest.raises(ScheduleError, match=r"'layer_types' entries must be among "
                                            r"\['full_attention', 'sliding_attention'\] .*"
                                            r"\(got 'sliding' at layer 0\)"):
        from_hf(gemma | {"layer_types": ["sliding"] * gemma["num_hidden_layers"]})
    text = {"model_type": "llama4_text", "num_hidden_layers": 8}
    for bad in (["1", "1", "1", "0"] * 2, [1, 1, 0], "1110", [1, 2] * 4, [True, False] * 4):
        with pytest.raises(ScheduleError, match=r"'no_rope_layers' must be null or a list of "
                                                r"a 0 or 1 for each of the 8 layers"):
            from_hf(text | {"no_rope_layers": bad})
    assert from_hf(text | {"no_rope_layers": []}).sliding_layers == 6  # empty: the pattern
    oss = _file("gpt-oss-20b")
    with pytest.raises(ScheduleError, match=r"'num_experts_per_tok' and 'experts_per_token' "
                                            r"name one field .* \(got 2 and 4\)"):
        from_hf(oss | {"num_experts_per_tok": 2})


def test_the_models_own_checks_name_the_files_keys():
    """Transformer's checks name its fields (``head_dim``, ``top_k``, ``kv_heads``), which a
    config.json spells otherwise: DeepSeek-V3 with ``qk_nope_head_dim`` 0 said "head_dim must
    be a positive integer". A size that cannot be 0 is refused by its key; a rule across
    fields names the keys behind them."""
    deepseek = _file("deepseek-v3")
    for key in ("qk_nope_head_dim", "v_head_dim", "kv_lora_rank", "moe_intermediate_size",
                "num_experts_per_tok"):
        with pytest.raises(ScheduleError, match=rf"'{key}' must be an integer in 1\.\."):
            from_hf(deepseek | {key: 0})
    with pytest.raises(ScheduleError, match=r"top_k must be from 1 to the experts 256 \(got "
                                            r"top_k=300\) \(in the file, top_k is "
                                            r"'num_experts_per_tok', experts is "
                                            r"'n_routed_experts'\)"):
        from_hf(deepseek | {"num_experts_per_tok": 300})
    with pytest.raises(ScheduleError, match=r"kv_heads must divide heads .*\(in the file, "
                                            r"hidden is 'hidden_size', heads is "
                                            r"'num_attention_heads', kv_heads is "
                                            r"'num_key_value_heads'\)"):
        from_hf(_file("llama-3.1-8b") | {"num_key_value_heads": 5})
    with pytest.raises(ScheduleError, match=r"\(in the file, hidden is 'n_embd', heads is "
                                            r"'n_head', kv_heads is 'n_head'\)"):
        from_hf(_file("gpt2") | {"n_head": 7})
