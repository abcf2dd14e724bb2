"""Real costs and real runs: a transformer on real hardware, in seconds and bytes.

``transformer_costs`` turns a model, a microbatch and a tensor-parallel degree into the
``fastpp.Costs`` of a schedule (per-stage times in seconds, activations in bytes, hand-offs
over the link), so ``simulate`` and ``sweep`` price a real run exactly; ``plan`` walks every
factorization of a GPU count into tensor, pipeline and data parallelism with every schedule,
microbatch size and recomputation, each an exact pipeline timeline. The formulas and their
sources are in ``fastpp.model.transformer`` (FLOPs, bytes), ``compute`` (per-op times),
``comm`` (collectives) and ``moe`` (experts, expert parallelism, the all-to-alls and one
layer's ``LayerParts``); presets in ``MODELS`` and ``HARDWARE``. ``validate`` holds the model
against published training runs (docs/fidelity.md); ``pricing`` holds
``transformer_costs`` and ``device_bytes``.
"""

from .config import RunConfig, RunGrid
from .errorbar import ErrorBar
from .foundry import from_llm_foundry, to_llm_foundry
from .hardware import GB, HARDWARE, LINKS, Hardware, Link
from .hf import from_hf
from .layout import Layout, even_layers, megatron_layers, parse_layout, torchtitan_layers
from .megatron import from_megatron, to_megatron
from .moe import layer_parts
from .overlap import overlap_reason
from .plan import PLAN_COLUMNS, plan
from .presets import MODELS
from .pricing import ModelCosts, device_bytes, pair_partner, transformer_costs
from .recipes import RECIPES, Recipe
from .stages import device_held_bytes, device_working_bytes, stage_table
from .torchtitan import from_torchtitan, to_torchtitan
from .transformer import RECOMPUTE, Transformer, chunk_layers, layer_costs
from .validate import validate
from .vtrain import from_vtrain, to_vtrain, vtrain_cluster

__all__ = ["GB", "HARDWARE", "LINKS", "MODELS", "PLAN_COLUMNS", "RECIPES", "RECOMPUTE",
           "ErrorBar", "Hardware", "Layout", "Link", "ModelCosts", "Recipe", "RunConfig",
           "RunGrid", "Transformer", "chunk_layers", "device_bytes", "device_held_bytes",
           "device_working_bytes",
           "even_layers", "from_hf", "from_llm_foundry",
           "from_megatron", "from_torchtitan", "from_vtrain", "layer_costs", "layer_parts",
           "megatron_layers", "overlap_reason", "pair_partner", "parse_layout", "plan",
           "stage_table", "to_llm_foundry", "to_megatron", "to_torchtitan", "to_vtrain",
           "torchtitan_layers",
           "transformer_costs", "validate", "vtrain_cluster"]
