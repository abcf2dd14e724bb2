"""``from_hf``: a Hugging Face ``config.json`` as a ``Transformer``.

One table, ``FAMILIES``, says per ``model_type`` how the architecture's fields are spelled
and what its configuration class assumes when a field is absent (the traps: three names for
the expert count; ``intermediate_size`` the expert width for Mixtral, gpt-oss and MiniMax-M2
but the dense width elsewhere; ``head_dim`` apart from ``hidden / heads`` on Gemma, Qwen3,
GLM-4.5 and MiniMax-M2; the class's own ``tie_word_embeddings`` default; GPT-2's ``n_embd``;
the model nested under ``text_config``).
"""

from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass, field

from ..checks import (
    MAX_INT,
    MISSPELT,
    ScheduleError,
    ScheduleTypeError,
    in_file,
    known_keywords,
    near,
)
from .presets import MODELS
from .transformer import Transformer, dense_placed


@dataclass(frozen=True)
class Family:
    """How one ``model_type`` spells its fields, and its configuration class's defaults."""

    tied: bool                      # the class's tie_word_embeddings default
    gated: bool = True              # three MLP matrices (SwiGLU, GeGLU) or two (GeLU)
    names: dict = field(default_factory=dict)  # our name -> the config's key(s)
    head_dim: int | None = None     # the class's head_dim default when absent
    # how experts read: "", "mixtral", "qwen", "deepseek" (with MLA), "glm" (DeepSeek's
    # layout of experts beside grouped-query attention) or "llama4" (a shared expert beside
    # the routed ones, every interleave_moe_layer_step-th layer)
    moe: str = ""
    note: str = ""                  # what Transformer approximates for this family
    # the class's defaults of the shape's fields (our names), where official files leave them
    # out (Gemma 3's and LLaVA's text_config); a field absent and not here is an error
    defaults: dict = field(default_factory=dict)
    # sliding-window attention: which layers slide ("all", "qwen": those from
    # max_window_layers on with use_sliding_window, "qwen2_moe": the even ones below
    # max_window_layers with it, "qwen3_moe": all with it, "alternate": every other from the
    # first, "gemma3": all but every sliding_window_pattern-th, "olmo3": all but every
    # fourth, "smollm3": its NoPE layers with use_sliding_window, "llama4": its RoPE layers,
    # chunked by attention_chunk_size; a layer_types list overrides), and the class's
    # sliding_window (attention_chunk_size) default
    sliding: str = ""
    window: int | None = None
    # the routed experts' count: its keys, the class's own first and its alias after
    # (transformers' attribute_map; save_pretrained writes the class's own)
    experts: tuple = ()
    # grouped-query attention and a head size apart from hidden / heads: GPT-2's and
    # GPT-NeoX's classes have neither, and ignore num_key_value_heads and head_dim
    grouped: bool = True
    # the class's defaults of keys whose absence is not a null (transformers' save_pretrained
    # leaves out what equals them; a null takes the class's fallback: the heads, no rank)
    absent: dict = field(default_factory=dict)


LLAMA_NAMES = {"layers": "num_hidden_layers", "hidden": "hidden_size",
               "heads": "num_attention_heads", "kv_heads": "num_key_value_heads",
               "ffn": "intermediate_size", "vocab": "vocab_size"}
GPT2_NAMES = {"layers": "n_layer", "hidden": "n_embd", "heads": "n_head", "ffn": "n_inner",
              "vocab": "vocab_size"}
SLIDING_TYPE = "sliding_attention"  # transformers' layer_types entry for a sliding layer
CHUNKED_TYPE = "chunked_attention"  # and for a chunked one (Llama 4's)
FULL_TYPE = "full_attention"  # and for one attending to every earlier key
QWEN_FULL_LAYERS = 28  # Qwen2Config's and Qwen3Config's max_window_layers

# transformers' LlamaConfig and Gemma3TextConfig (kv_heads absent: the heads, as the class)
LLAMA_DEFAULTS = {"layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008, "vocab": 32000}
GEMMA3_DEFAULTS = {"layers": 26, "hidden": 2304, "heads": 8, "kv_heads": 4, "ffn": 9216,
                   "vocab": 262208}

# transformers' class defaults (v5) of the key-value heads, where absent (not null)
KV = "num_key_value_heads"
DEEPSEEK_V2_ABSENT = {"q_lora_rank": 1536, "n_routed_experts": 64, "n_shared_experts": 2,
                      "first_k_dense_replace": 0}
DEEPSEEK_V3_ABSENT = {"q_lora_rank": 1536, "n_routed_experts": 256, "n_shared_experts": 1,
                      "first_k_dense_replace": 3, "num_experts_per_tok": 8,
                      "num_nextn_predict_layers": 1}
DEEPSEEK_EXPERTS = ("n_routed_experts", "num_local_experts")
# transformers' Olmo3Config and SmolLM3Config (SmolLM3-3B's shape)
OLMO3_DEFAULTS = {"layers": 32, "hidden": 4096, "heads": 32, "ffn": 11008, "vocab": 50304}
SMOLLM3_DEFAULTS = {"layers": 36, "hidden": 2048, "heads": 16, "ffn": 11008, "vocab": 128256}
# transformers' Llama4TextConfig (Llama 4 Scout's shape; its dense layers' width is
# intermediate_size_mlp, its experts' intermediate_size)
LLAMA4_DEFAULTS = {"layers": 48, "hidden": 5120, "heads": 40, "ffn": 16384, "vocab": 202048}
# transformers' MiniMaxM2Config (MiniMax-M2's shape)
MINIMAX_M2_DEFAULTS = {"layers": 62, "hidden": 3072, "heads": 48, "ffn": 1536, "vocab": 200064}
# transformers' Glm4MoeConfig (GLM-4.5, 4.6, 4.7 and their Air): its shape's defaults, GLM-4.5-Air's
GLM4_MOE_DEFAULTS = {"layers": 46, "hidden": 4096, "heads": 96, "ffn": 10944, "vocab": 151552}
GLM4_MOE_ABSENT = {KV: 8, "n_routed_experts": 128, "n_shared_experts": 1,
                   "first_k_dense_replace": 1, "num_experts_per_tok": 8,
                   "moe_intermediate_size": 1408, "num_nextn_predict_layers": 0}
MTP_KEYS = ("num_nextn_predict_layers", "num_mtp_layers")  # DeepseekV3Config's alias
# Transformer's fields that a family's experts (and MLA) read, and the keys they read, for
# Transformer's own messages (a cross-field rule: top_k at most the experts)
FIELD_KEYS = {
    "mixtral": {"top_k": ("num_experts_per_tok", "experts_per_token"),
                "expert_ffn": "intermediate_size"},
    "qwen": {"top_k": "num_experts_per_tok", "expert_ffn": "moe_intermediate_size",
             "dense_layers": ("mlp_only_layers", "decoder_sparse_step")},
    "llama4": {"top_k": "num_experts_per_tok", "expert_ffn": "intermediate_size",
               "dense_layers": ("moe_layers", "interleave_moe_layer_step")},
    "deepseek": {"top_k": "num_experts_per_tok", "expert_ffn": "moe_intermediate_size",
                 "shared_experts": "n_shared_experts", "dense_layers": "first_k_dense_replace",
                 "mtp_depth": MTP_KEYS[:1], "head_dim": "qk_nope_head_dim",
                 "v_head_dim": "v_head_dim", "q_rank": "q_lora_rank",
                 "kv_rank": "kv_lora_rank", "rope_dim": "qk_rope_head_dim"}}
FIELD_KEYS["glm"] = {k: v for k, v in FIELD_KEYS["deepseek"].items()
                     if k not in ("head_dim", "v_head_dim", "q_rank", "kv_rank", "rope_dim")}
ALIASED = ("num_local_experts", "num_experts")

FAMILIES = {
    "llama": Family(tied=False, defaults=LLAMA_DEFAULTS),
    "mistral": Family(tied=False, sliding="all", window=4096, absent={KV: 8}),
    "qwen2": Family(tied=False, sliding="qwen", window=4096, absent={KV: 32}),
    "qwen3": Family(tied=False, sliding="qwen", window=4096, absent={KV: 32, "head_dim": 128},
                    note="per-head Q/K norms (2 d a layer) left out"),
    # (OlmoConfig: OLMo 1, a Llama with layer norms of no weights)
    "olmo": Family(tied=False, note="its layer norms have no weights: counted as RMSNorm's "
                                    "(2 h a layer)"),
    "olmo2": Family(tied=False, note="Q/K norms (h + kv a layer) left out"),
    # (Olmo3Config: OLMo 2 with a sliding window on three layers in four, the fourth full)
    "olmo3": Family(tied=False, defaults=OLMO3_DEFAULTS, sliding="olmo3", window=4096,
                    note="Q/K norms (h + kv a layer) left out"),
    "smollm3": Family(tied=True, defaults=SMOLLM3_DEFAULTS, absent={KV: 4}, sliding="smollm3"),
    "phi3": Family(tied=False, sliding="all"),
    "gemma": Family(tied=True, head_dim=256, absent={KV: 16}),
    "gemma2": Family(tied=True, head_dim=256, sliding="alternate", window=4096,
                     absent={KV: 4}, note="four norms a layer counted as two"),
    "gemma3_text": Family(tied=True, head_dim=256, defaults=GEMMA3_DEFAULTS, sliding="gemma3",
                          window=4096,
                          note="four norms and Q/K norms counted as two norms"),
    "mixtral": Family(tied=False, moe="mixtral", sliding="all",
                      absent={KV: 8, "num_local_experts": 8, "num_experts_per_tok": 2},
                      experts=ALIASED),
    "gpt_oss": Family(tied=False, head_dim=64, moe="mixtral", sliding="alternate", window=128,
                      absent={KV: 8, "num_experts_per_tok": 4, "num_local_experts": 128},
                      experts=ALIASED,
                      note="the attention sinks and biases left out"),
    "qwen2_moe": Family(tied=False, moe="qwen", sliding="qwen2_moe", window=4096,
                        absent={KV: 16, "shared_expert_intermediate_size": 5632,
                                "num_experts": 60},
                        experts=("num_experts",),
                        note="the shared expert's sigmoid gate (h a layer) left out"),
    "qwen3_moe": Family(tied=False, moe="qwen", sliding="qwen3_moe", window=4096,
                        absent={KV: 4, "num_local_experts": 128}, experts=ALIASED,
                        note="per-head Q/K norms left out"),
    "deepseek_v2": Family(tied=False, moe="deepseek", absent=DEEPSEEK_V2_ABSENT,
                          experts=DEEPSEEK_EXPERTS),
    "deepseek_v3": Family(tied=False, moe="deepseek", absent=DEEPSEEK_V3_ABSENT,
                          experts=DEEPSEEK_EXPERTS,
                          note="the router's correction bias (E a layer) left out"),
    "llama4_text": Family(tied=False, moe="llama4", defaults=LLAMA4_DEFAULTS,
                          names={"ffn": "intermediate_size_mlp"},
                          absent={KV: 8, "head_dim": 128, "num_local_experts": 16,
                                  "num_experts_per_tok": 1, "intermediate_size": 8192,
                                  "interleave_moe_layer_step": 1},
                          experts=("num_local_experts",), sliding="llama4", window=8192,
                          note="Q/K norms left out"),
    "minimax_m2": Family(tied=False, moe="mixtral", defaults=MINIMAX_M2_DEFAULTS,
                         absent={KV: 8, "head_dim": 128, "num_experts_per_tok": 8,
                                 "num_local_experts": 256},
                         experts=ALIASED,
                         note="Q/K norms, the router's bias and the MTP modules (use_mtp: "
                              "their layers are not in the class) left out"),
    "glm4_moe": Family(tied=False, moe="glm", defaults=GLM4_MOE_DEFAULTS,
                       absent=GLM4_MOE_ABSENT, experts=DEEPSEEK_EXPERTS,
                       note="the attention's biases, Q/K norms (use_qk_norm) and the "
                            "router's correction bias left out"),
    # (GPT-2's class drops out at 0.1 where a rate is absent)
    "gpt2": Family(tied=True, gated=False, names=GPT2_NAMES, grouped=False,
                   absent={"resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1},
                   note="the learned position embedding and the biases left out (0.7% of "
                        "GPT-2 small, 1% of distilgpt2)"),
    "gpt_neox": Family(tied=False, gated=False, grouped=False, note="biases left out"),
}
# Kimi K2's files name their own model_type over DeepSeek-V3's architecture and configuration
# class (its auto_map's configuration_deepseek.DeepseekV3Config)
FAMILIES["kimi_k2"] = FAMILIES["deepseek_v3"]
# multimodal wrappers whose text model's model_type is not written inside text_config
TEXT_TYPES = {"gemma3": "gemma3_text", "llava": "llama", "mistral3": "mistral",
              "llama4": "llama4_text"}
DROPOUTS = ("attention_dropout", "hidden_dropout", "resid_pdrop", "attn_pdrop", "embd_pdrop",
            "hidden_dropout_prob", "attention_probs_dropout_prob")
_MISSING = object()


class _Read(dict):
    """A config's dict that records the keys asked of it (``asked``), so that a key it holds
    but nobody asked for can be told a misspelling of one asked for and absent."""

    def __init__(self, data: dict):
        super().__init__(data)
        self.asked = set()

    def get(self, key, default=None):
        self.asked.add(key)
        return super().get(key, default)

    def __contains__(self, key):
        self.asked.add(key)
        return super().__contains__(key)

    def __getitem__(self, key):
        self.asked.add(key)
        return super().__getitem__(key)


def _misspelt(data: _Read, where: str) -> None:
    """Warn of each key of ``data`` that no field read and that misspells one read and
    absent (``num_hidden_layer``: the layers then took the class's default, as transformers
    takes them, silently)."""
    absent = [key for key in data.asked if not dict.__contains__(data, key)]
    for key in data.keys() - data.asked:
        meant = near(key, absent)
        if meant is not None:
            warnings.warn(f"{where}: {key!r} ({MISSPELT} {meant!r}?): {meant!r} is "
                          f"absent, so the class's default stands for it", UserWarning,
                          stacklevel=4)  # (the caller's line: past known_keywords' frame)


class _Config:
    """A config dict and where it came from, reading fields that name both when absent."""

    def __init__(self, data: dict, where: str, absent: dict):
        self.data, self.where, self.absent = data, where, absent

    def get(self, key, default=_MISSING):
        if key not in self.data and key in self.absent:  # the class's default
            return self.absent[key]
        value = self.data.get(key)
        if value is None:
            if default is _MISSING:
                raise ScheduleError(f"{self.where} has no {key!r}: for a "
                                    f"{self.data['model_type']!r} model fastpp reads it from "
                                    f"the file (it holds no class default for it)")
            return default
        return value

    def int(self, key, default=_MISSING, low: int = 0) -> int:
        """An integer field in ``low..2**31 - 1`` (a bool or a float is not one)."""
        value = self.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value < MAX_INT:
            raise ScheduleError(f"{self.where}: {key!r} must be an integer in {low}..2**31-1 "
                                f"(got {value!r})")
        return value

    def flag(self, key, default) -> bool:
        """A true/false field (JSON's ``true``, not the string ``"false"``)."""
        value = self.get(key, default)
        if not isinstance(value, bool):
            raise ScheduleError(f"{self.where}: {key!r} must be true or false (got {value!r})")
        return value

    def fraction(self, key) -> float:
        """A probability field such as a dropout rate, in [0, 1] (0 when absent)."""
        value = self.get(key, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not 0 <= value <= 1:
            raise ScheduleError(f"{self.where}: {key!r} must be a number in [0, 1] (got "
                                f"{value!r})")
        return float(value)

    def layers(self, key, layers: int) -> set:
        """A list of indices of the ``layers`` layers (empty when absent)."""
        value = self.get(key, [])
        if not isinstance(value, list) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers
                for i in value):
            raise ScheduleError(f"{self.where}: {key!r} must be a list of layer indices in "
                                f"0..{layers - 1} (got {value!r})")
        return set(value)


def read_config(config, what: str = "a config.json or a folder holding one"
                ) -> tuple[dict, str]:
    """A config as a dict and a name for messages: a dict, a path to a JSON file, or a folder
    holding ``config.json`` (``what`` the caller's kind of file, for the messages)."""
    if isinstance(config, dict):
        return config, "the config"
    if not isinstance(config, str | os.PathLike):
        raise ScheduleTypeError(f"config must be a dict, a path to a config.json or a folder "
                                f"holding one (got {type(config).__name__})")
    path = os.fspath(config)
    if os.path.isdir(path):
        path = os.path.join(path, "config.json")
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        raise ScheduleError(f"config must be {what} (no file {path})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ScheduleError(f"{path} is not JSON ({e})") from None
    except (OSError, ValueError) as e:  # a folder, a NUL, a name too long; a number too long
        raise ScheduleError(f"config must be a readable config.json ({path}: {e})") from None
    except RecursionError:
        raise ScheduleError(f"{path} is not JSON (nested too deep)") from None
    if not isinstance(data, dict):
        raise ScheduleError(f"{path} must hold a JSON object (got {type(data).__name__})")
    return data, path


def _text_model(data: dict) -> dict:
    """The language model's fields: ``text_config`` over the outer ones for multimodal files."""
    inner = data.get("text_config")
    if not isinstance(inner, dict):
        return data
    merged = {**data, **inner}
    if "model_type" not in inner:
        outer = data.get("model_type")
        merged["model_type"] = TEXT_TYPES.get(outer, outer) if isinstance(outer, str) else outer
    return merged


@known_keywords("from_hf")
def from_hf(config, name: str | None = None) -> Transformer:
    """The ``Transformer`` a Hugging Face ``config.json`` describes.

    Parameters
    ----------
    config : str, os.PathLike or dict
        A path to a ``config.json``, a folder holding one, or its contents as a dict. A
        multimodal file's language model is read from its ``text_config``.
    name : str, optional
        The model's name in tables (default: the file's ``_name_or_path``; else for a
        ``config.json`` the name of the folder the path names, ``config.json`` itself when the
        path names none (the current folder's name is no model's), for another file its
        stem; for a dict the ``model_type``).

    Returns
    -------
    Transformer
        With the class defaults of each family where a field is absent (``FAMILIES``), as
        transformers reads the file (its ``save_pretrained`` leaves out what equals them):
        Mistral's 8 key-value heads, Qwen3's head size 128, DeepSeek's query rank 1536 and
        so on; a null takes the class's fallback (the heads; no query compression; GPT-2's
        ``4h``), but a null layer count, width, head count, MLP width or vocabulary, which
        has none, is an error naming it.
        Approximations, none changing the parameter count by more than 1% (GPT-2's learned
        positions: 0.7% of GPT-2 small, 1% of distilgpt2; under 0.04% elsewhere):

        - sliding-window attention (Gemma 2 and 3, gpt-oss's alternate layers, Mistral's,
          Qwen's with ``use_sliding_window``) is read as ``Transformer.window`` and
          ``window_layers`` (from ``layer_types``, else the class's pattern), the layers
          placed as if spread evenly over the stages; Llama 4's chunked attention likewise,
          with ``chunked`` (its chunk, ``attention_chunk_size``, as the window; its RoPE
          layers, three in four, chunked);
        - norms beyond two a layer, Q/K norms, biases, GPT-2's learned positions, gpt-oss's
          attention sinks and the routers' biases are left out.

        A multi-token-prediction module is priced where the file counts DeepSeek-V3's kind
        (``num_nextn_predict_layers``: DeepSeek-V3's, GLM-4.5's; an MoE layer, a projection
        and norms beside the shared embedding and output layer); MiniMax-M2's
        (``num_mtp_modules``), of a kind no configuration class describes, are left out.
        ``explain --hf`` prints what a family leaves out (``approximations``).

    Raises
    ------
    ScheduleError
        A file that is not JSON (naming it), an unknown ``model_type`` (listing those known),
        a missing, null (without a fallback) or non-integer field (naming it).
    """
    data, where = read_config(config)
    data = _Read(_text_model(data))
    kind, family = _family(data, where)
    cfg = _Config(data, where, family.absent)
    names = {**LLAMA_NAMES, **family.names}

    def shape_field(ours, default=_MISSING):
        key = names[ours]
        # a null where the size has no fallback (the key-value heads' null is the heads,
        # GPT-2's n_inner's 4h) is no size at all (transformers stores the None, and the
        # model cannot be built): not the class's default for an absent key
        if key in data and data[key] is None and default is _MISSING:
            raise ScheduleError(f"{where}: {key!r} must be an integer >= 1 for a {kind!r} "
                                f"model (got null)")
        return cfg.int(key, family.defaults.get(ours, default), low=1)

    hidden, heads = shape_field("hidden"), shape_field("heads")
    shape = {"layers": shape_field("layers"), "hidden": hidden, "heads": heads,
             "kv_heads": shape_field("kv_heads", heads) if family.grouped else heads,
             "vocab": shape_field("vocab"), "swiglu": family.gated,
             "tied_embeddings": cfg.flag("tie_word_embeddings", family.tied),
             "dropout": any(cfg.fraction(k) > 0 for k in DROPOUTS),
             "head_dim": cfg.int("head_dim", family.head_dim, low=1) if family.grouped
             else None}
    if kind == "gpt2" and cfg.flag("add_cross_attention", False):
        raise ScheduleError(f"{where}: 'add_cross_attention' must be false: fastpp prices "
                            f"decoder-only models, and a GPT-2 with cross-attention is an "
                            f"encoder-decoder's decoder (got true)")
    # n_inner and intermediate_size may be null (GPT-2: 4h)
    shape["ffn"] = shape_field("ffn", None if kind == "gpt2" else _MISSING)
    shape.update(_experts(family, cfg, shape["layers"]))
    shape.update(_window(family, cfg, shape["layers"]))
    if family.grouped and shape["head_dim"] is None and hidden % heads:
        # (the classes would floor hidden / heads, a head size no model uses)
        raise ScheduleError(f"{where} has no 'head_dim', and its {heads} heads do not divide "
                            f"hidden_size {hidden}: give the head size (a {kind!r} model's "
                            f"class would take {hidden // heads})")
    name = _name(data, where, kind) if name is None else name
    _misspelt(data, where)
    # (the class's default, not the file's)
    if family.grouped and KV not in data and heads % shape["kv_heads"]:
        raise ScheduleError(f"{where} has no {KV!r}: a {kind!r} model's default, "
                            f"{shape['kv_heads']}, does not divide its {heads} heads (give it)")
    try:
        return Transformer(name=name, **shape)
    except ScheduleError as error:  # Transformer's own checks name its fields: add the keys
        keys = {**{ours: names[ours] for ours in ("layers", "hidden", "heads", "ffn", "vocab")},
                "kv_heads": names["kv_heads"] if family.grouped else names["heads"],
                **FIELD_KEYS.get(family.moe, {}),  # (the experts' key the file holds)
                "experts": next((k for k in family.experts if k in data), family.experts[:1])}
        raise ScheduleError(f"{where}: {error}{in_file(error, keys)}") from None


def given_model(model) -> Transformer | None:
    """An importer's ``model=`` as a ``Transformer``: itself, a preset's by name, or a
    ``config.json``'s (a path, its folder or its dict: ``from_hf``); None stays None.

    Raises
    ------
    ScheduleError
        A name that is neither a preset nor a path to a config.json, or as ``from_hf``.
    """
    if model is None or isinstance(model, Transformer):
        return model
    if isinstance(model, str) and model in MODELS:
        return MODELS[model]
    if not isinstance(model, str | os.PathLike | dict):
        raise ScheduleTypeError(f"model must be a Transformer, a preset name or a config.json "
                                f"(got {type(model).__name__})")
    if isinstance(model, str) and not (model.endswith(".json") or os.path.exists(model)):
        raise ScheduleError(f"model must be a preset name among {sorted(MODELS)} or a "
                            f"config.json (got {model!r})")
    return from_hf(model)


def _family(data: dict, where: str) -> tuple[str, Family]:
    """The ``model_type`` of a config's language model and its ``Family``."""
    kind = data.get("model_type")
    if not isinstance(kind, str) or kind not in FAMILIES:
        raise ScheduleError(f"{where}: model_type must be one of {sorted(FAMILIES)} (got "
                            f"{kind!r})")
    return kind, FAMILIES[kind]


@known_keywords("approximations")
def approximations(config) -> tuple[str, ...]:
    """What ``from_hf`` leaves out of the model ``config`` describes: its family's note
    (``FAMILIES``), for ``explain``'s notes.

    Parameters
    ----------
    config : str, os.PathLike or dict
        As ``from_hf`` takes it.

    Returns
    -------
    tuple of str
        ``("model_type <kind>: <note>",)``, or ``()`` for a family that approximates
        nothing.

    Raises
    ------
    ScheduleError
        As ``from_hf`` for a file it cannot read or an unknown ``model_type``.
    """
    data, where = read_config(config)
    kind, family = _family(_text_model(data), where)
    return (f"model_type {kind}: {family.note}",) if family.note else ()


def _name(data: dict, where: str, kind: str) -> str:
    """``_name_or_path``, else the folder a ``config.json``'s path names (``config.json``
    where it names none: ``--hf config.json`` run inside the folder), or the file's stem."""
    if data.get("_name_or_path"):
        return data["_name_or_path"]
    if where == "the config":
        return kind
    folder, file = os.path.split(os.path.normpath(where))
    stem = os.path.splitext(file)[0]
    if stem != "config":
        return stem
    return os.path.basename(folder) if folder not in ("", os.curdir) else file


def _window(family: Family, cfg: _Config, layers: int) -> dict:
    """``window`` and ``window_layers`` of a family with sliding-window attention (``Family.
    sliding``); an explicit null ``sliding_window`` is none (Mistral v0.3's)."""
    if not family.sliding:
        return {}
    chunked = family.sliding == "llama4"
    key = "attention_chunk_size" if chunked else "sliding_window"
    window = cfg.data.get(key, family.window)
    if (family.sliding.startswith("qwen") or family.sliding == "smollm3") \
            and not cfg.flag("use_sliding_window", False):
        window = None
    if window is None:
        return {}
    if isinstance(window, bool) or not isinstance(window, int) or not 1 <= window < MAX_INT:
        raise ScheduleError(f"{cfg.where}: {key!r} must be null or an integer in "
                            f"1..2**31-1 (got {window!r})")
    types = cfg.data.get("layer_types")
    if types is not None and not (isinstance(types, list) and len(types) == layers
                                  and all(isinstance(kind, str) for kind in types)):
        raise ScheduleError(f"{cfg.where}: 'layer_types' must be null or a list of {layers} "
                            f"names, one a layer (got {types!r})")
    kinds = (FULL_TYPE, CHUNKED_TYPE if chunked else SLIDING_TYPE)
    if types is not None:
        wrong = [(i, kind) for i, kind in enumerate(types) if kind not in kinds]
        if wrong:  # (transformers refuses a type it does not know)
            raise ScheduleError(f"{cfg.where}: 'layer_types' entries must be among "
                                f"{list(kinds)} for a model of this kind (got {wrong[0][1]!r} "
                                f"at layer {wrong[0][0]})")
        sliding = types.count(kinds[1])
    elif family.sliding == "qwen":
        # the classes' default: 28 (transformers slides the layers from it on)
        sliding = layers - min(cfg.int("max_window_layers", QWEN_FULL_LAYERS), layers)
    elif family.sliding == "qwen2_moe":  # (Qwen2MoeConfig: the even layers below it)
        sliding = (min(cfg.int("max_window_layers", QWEN_FULL_LAYERS), layers) + 1) // 2
    elif family.sliding == "alternate":
        sliding = (layers + 1) // 2
    elif family.sliding == "gemma3":
        sliding = layers - layers // cfg.int("sliding_window_pattern", 6, low=1)
    elif family.sliding == "olmo3":
        sliding = layers - layers // 4
    elif family.sliding in ("smollm3", "llama4"):
        # a 0 in no_rope_layers is a NoPE layer: SmolLM3's slide, Llama 4's RoPE layers (the
        # 1s) are chunked; absent (or empty), a NoPE layer every no_rope_layer_interval-th
        rope = cfg.data.get("no_rope_layers")
        if rope and not (isinstance(rope, list) and len(rope) >= layers and all(
                type(x) is int and x in (0, 1) for x in rope[:layers])):
            raise ScheduleError(f"{cfg.where}: 'no_rope_layers' must be null or a list of a 0 "
                                f"or 1 for each of the {layers} layers (got {rope!r})")
        nope = (rope[:layers].count(0) if rope
                else layers // cfg.int("no_rope_layer_interval", 4, low=1))
        sliding = layers - nope if chunked else nope
    else:
        sliding = layers
    if not sliding:
        return {}
    return {"window": window, "window_layers": min(sliding, layers)} | (
        {"chunked": True} if chunked else {})


def _experts(family: Family, cfg: _Config, layers: int) -> dict:
    """The mixture of experts' and MLA's fields of ``Transformer``."""
    if family.moe == "mixtral":  # intermediate_size is each expert's width
        # (gpt-oss names it experts_per_token, transformers' alias num_experts_per_tok)
        top_k = _aliased(cfg, ("num_experts_per_tok", "experts_per_token"), low=1)
        return {"experts": _aliased(cfg, family.experts), "top_k": top_k,
                "expert_ffn": cfg.int("intermediate_size", family.defaults.get("ffn", _MISSING),
                                      low=1)}
    if family.moe == "qwen":
        # (transformers divides by the step: 0 is no configuration)
        experts = _aliased(cfg, family.experts)
        step = cfg.int("decoder_sparse_step", 1, low=1)
        dense_only = cfg.layers("mlp_only_layers", layers)
        if experts == 0:  # every layer the dense MLP, as transformers builds it
            return {}
        dense = tuple(sorted(dense_only)) if step == 1 else dense_placed(
            layers, lambda i: i in dense_only or (i + 1) % step, f"{cfg.where}: "
            f"'decoder_sparse_step'")
        if len(dense) == layers:
            return {}
        width = cfg.int("moe_intermediate_size", low=1)
        shared = cfg.int("shared_expert_intermediate_size", 0)
        if shared % width:  # (fastpp prices shared experts as routed experts' MLPs)
            raise ScheduleError(f"{cfg.where}: 'shared_expert_intermediate_size' must be a "
                                f"multiple of 'moe_intermediate_size' = {width} (got {shared})")
        return {"experts": experts, "top_k": cfg.int("num_experts_per_tok", low=1),
                "expert_ffn": width, "shared_experts": shared // width, "dense_layers": dense}
    if family.moe == "llama4":  # (Llama4TextMoe: one shared expert of the routed width)
        step = cfg.int("interleave_moe_layer_step", 1, low=1)
        if cfg.data.get("moe_layers") is None:  # (the class's: every step-th from step - 1)
            dense = dense_placed(layers, lambda i: (i + 1) % step,
                                 f"{cfg.where}: 'interleave_moe_layer_step'")
        else:
            moe = cfg.layers("moe_layers", layers)
            dense = tuple(i for i in range(layers) if i not in moe)
        if len(dense) == layers:
            return {}
        return {"experts": _aliased(cfg, family.experts), "top_k": cfg.int("num_experts_per_tok",
                                                                         low=1),
                "expert_ffn": cfg.int("intermediate_size", low=1), "shared_experts": 1,
                "dense_layers": dense}
    if family.moe in ("deepseek", "glm"):
        # a null is DeepSeek's own classes' none (no experts, no shared one, no dense layer
        # first); GLM's class has no such fallback (its layers cannot be built with one)
        glm = family.moe == "glm"
        none = _MISSING if glm else 0
        experts = _aliased(cfg, family.experts, none)
        if glm and experts < 1:
            raise ScheduleError(f"{cfg.where}: 'n_routed_experts' must be at least 1 for a "
                                f"'glm4_moe' model (got {experts})")
        # (DeepSeek's own modeling code reads moe_layer_freq; transformers' classes ignore
        # it: every published file has 1, and GLM's class has none)
        first = cfg.int("first_k_dense_replace", none)
        freq = 1 if glm else cfg.int("moe_layer_freq", 1, low=1)
        dense = min(first, layers) if freq == 1 else dense_placed(
            layers, lambda i: i < first or i % freq, f"{cfg.where}: 'moe_layer_freq'")
        fields = {"mtp_depth": _aliased(cfg, MTP_KEYS, 0)}
        if not glm:  # multi-head latent attention
            fields.update(head_dim=cfg.int("qk_nope_head_dim", low=1),
                          v_head_dim=cfg.int("v_head_dim", low=1),
                          q_rank=cfg.int("q_lora_rank", 0), kv_rank=cfg.int("kv_lora_rank", low=1),
                          rope_dim=cfg.int("qk_rope_head_dim"))
        if not experts or (dense if freq == 1 else len(dense)) == layers:
            return fields  # every layer the dense MLP, as the classes build it
        if fields["mtp_depth"] and not (layers - 1 >= first and (layers - 1) % freq == 0):
            raise ScheduleError(f"{cfg.where}: 'moe_layer_freq' = {freq} leaves the last layer "
                                f"dense, which an MTP module repeats ('num_nextn_predict_layers' "
                                f"= {fields['mtp_depth']}): fastpp prices an MTP module with "
                                f"experts")
        return {**fields, "experts": experts, "top_k": cfg.int("num_experts_per_tok", low=1),
                "expert_ffn": cfg.int("moe_intermediate_size", low=1),
                "shared_experts": cfg.int("n_shared_experts", none), "dense_layers": dense}
    return {}


def _aliased(cfg: _Config, keys: tuple, default=_MISSING, low: int = 0) -> int:
    """An integer field (at least ``low``) that ``keys`` name alike (transformers'
    ``attribute_map``: the class's own key first), read from the one the file holds; both
    held must agree."""
    held = [key for key in keys if key in cfg.data]
    if len(held) > 1 and cfg.data[held[0]] != cfg.data[held[1]]:
        raise ScheduleError(f"{cfg.where}: {held[0]!r} and {held[1]!r} name one field "
                            f"(transformers reads either): they must agree (got "
                            f"{cfg.data[held[0]]!r} and {cfg.data[held[1]]!r})")
    return cfg.int(held[0] if held else keys[0], default, low)
