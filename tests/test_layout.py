"""fastpp.model.layout: Megatron's layout strings, its first/last counts, torchtitan's split,
uneven stages in the costs, bytes and plan."""

import numpy as np
import pandas as pd
import pytest
from helpers import held_bytes
from hypothesis import given, settings
from hypothesis import strategies as st
from reference import assert_agrees, simulate_reference

from fastpp import ScheduleError, ScheduleTypeError, build_schedule, simulate
from fastpp.model import (
    Hardware,
    Layout,
    Link,
    Transformer,
    device_bytes,
    even_layers,
    megatron_layers,
    parse_layout,
    plan,
    torchtitan_layers,
    transformer_costs,
)
from fastpp.model.layout import _expand

GPT = Transformer(layers=4, hidden=8, heads=2, vocab=10, dropout=True, flash_attention=False)
# products at half the peak whatever their shape, memory and launches free: FLOPs / 5e5 s
TOY = Hardware("toy", peak_flops=1e6, memory_bytes=1e5, node=Link("toy-node", 1000.0, 0.01),
               network=Link("toy-net", 100.0, 0.1), efficiency=0.5, gpus_per_node=4,
               memory_bandwidth=1e30, op_overhead=0.0, matmul_half=1e-9)


def stages_of(text):
    """A layout's stages as Megatron's parse_str_to_list gives them: lists of symbols."""
    layout = parse_layout(text)
    return [["E"] * e + ["t"] * k + ["m"] * q + ["L"] * lo
            for k, e, lo, q in zip(layout.layers, layout.embedding, layout.loss, layout.mtp,
                                   strict=True)]


def test_megatrons_documented_examples():
    # the docstring of PipelineParallelLayerLayout.parse_str_to_list
    assert stages_of("Ettt|(tt|)*29,m|L") == ([["E", "t", "t", "t"]] + [["t", "t"]] * 29
                                              + [["m"], ["L"]])
    # docs/user-guide/features/pipeline_parallel_layout.md: DeepSeek-V3 (61 layers + 1 MTP)
    # on PP16 VPP2; stage s is virtual stage s // 16 of rank s % 16
    deepseek = parse_layout("Et*3|(tt|)*29,m|L")
    assert deepseek.stages == 32 and sum(deepseek.layers) == 61 and sum(deepseek.mtp) == 1
    rank = {r: [s for s in range(32) if s % 16 == r] for r in range(16)}
    assert [deepseek.layers[s] for s in rank[0]] == [3, 2] and deepseek.embedding[0]
    assert all([deepseek.layers[s] for s in rank[r]] == [2, 2] for r in range(1, 14))
    assert [deepseek.layers[s] for s in rank[14]] == [2, 0] and deepseek.mtp[rank[14][1]] == 1
    assert [deepseek.layers[s] for s in rank[15]] == [2, 0] and deepseek.loss[rank[15][1]]
    # "it is legal to have empty stages, e.g., E||t|L (the second stage is empty)"
    assert stages_of("E||t|L") == [["E"], [], ["t"], ["L"]]


@pytest.mark.parametrize("text, expanded", [
    # the comments of Megatron's parser, its letters read as our symbols
    ("tm(tt|mm|Et)*2,LE", "tmtt|mm|Ettt|mm|EtLE"),  # xy(ab|cd|ef)*2,pq
    ("(tm)*3", "tmtmtm"),  # (ab)*3
    ("tm,(Et|)*2", "tmEt|Et|"),  # ab,(cd|)*2
    ("(|tm)*2,Et", "|tm|tmEt"),  # (|ab)*2,cd
    ("t*1,2", "t" * 12),  # commas are dropped first, even between digits
    ("Et|*3L", "Et|||L"), ("t*0E", "E"),
])
def test_expansion_follows_megatrons_grammar(text, expanded):
    assert "".join(c for c, _ in _expand(text)) == expanded


@pytest.mark.parametrize("text", [
    "Et*3|(tt|)*29,m|L",  # Megatron's documentation (DeepSeek-V3, PP16 VPP2)
    "Ett|(tt|)*22,t|(tt|)*7,mL",  # DeepSeek-V3 PP8 VPP4 ("Et*2|(tt|)*22t|(tt|)*7mL")
    "Et*11|t*11|t*11|t*10mL", "Et*6|t*6|t*6|(t*5|)*4,t*5L", "E||t|L", "EL", "Et|L",
])
def test_canonical_strings_round_trip(text):
    assert str(parse_layout(text)) == text


@pytest.mark.parametrize("text, same", [
    ("Ettt|(tt|)*29,m|L", "Et*3|(tt|)*29,m|L"),
    ("Et*2|(tt|)*22t|(tt|)*7mL", "Ett|(tt|)*22,t|(tt|)*7,mL"),
    ("Et*6|t*6|t*6|t*5|t*5|t*5|t*5|t*5L", "Et*6|t*6|t*6|(t*5|)*4,t*5L"),
    ("E|(|)*3|L", "E|||||L"), ("E(t|)*2,t*2,|L", "Et|t|tt|L"),
])
def test_other_spellings_parse_to_the_canonical_one(text, same):
    assert str(parse_layout(text)) == same and parse_layout(same) == parse_layout(text)


@st.composite
def layouts(draw):
    stages = draw(st.integers(1, 40))
    layers = draw(st.lists(st.integers(0, 13), min_size=stages, max_size=stages))
    last_t = max([s for s, k in enumerate(layers) if k] or [0])
    mtp = [draw(st.integers(0, 3)) if s >= last_t else 0 for s in range(stages)]
    return Layout(tuple(layers), tuple(s == 0 for s in range(stages)),
                  tuple(s == stages - 1 for s in range(stages)), tuple(mtp))


@given(layouts())
@settings(max_examples=300, deadline=None)
def test_any_layout_round_trips(layout):
    assert parse_layout(str(layout)) == layout


@pytest.mark.parametrize("text, message", [
    ("", r"must hold the embedding 'E' and the loss 'L' \(got '', position 0\)"),
    ("Et*|L", r"must follow '\*' with a count \(got 'Et\*\|L', position 3\)"),
    ("Ex|L", r"must hold only E, t, m, L, .* \(got 'Ex\|L', position 1\)"),
    ("Et|L ", r"must hold only .* \(got 'Et\|L ', position 4\)"),
    ("E(tt|L", r"must close every parenthesis \(got 'E\(tt\|L', position 1\)"),
    ("E(tt)|L", r"must follow a group '\(...\)' with '\*' and a count .* position 5"),
    ("E((t|)*2)*2|L", r"must not nest parentheses .* position 2"),
    ("E)t|L", r"must close only an opened parenthesis .* position 1"),
    ("E()*2|L", r"must repeat a group that holds something .* position 1"),
    ("Et3|L", r"must hold only .* counts after '\*' \(got 'Et3\|L', position 2\)"),
    ("*3E|L", r"must put '\*' after a symbol or a group .* position 0"),
    ("tE|L", r"must start with the embedding 'E' .* position 0"),
    ("EtE|L", r"must hold the embedding 'E' once .* position 2"),
    ("E|t|", r"must end with the loss 'L' .* position 2"),
    ("Et|LL", r"must hold the loss 'L' once .* position 3"),
    ("Emt|L", r"must place MTP layers 'm' after every transformer layer 't' .* position 1"),
])
def test_bad_layout_strings_name_the_position(text, message):
    with pytest.raises(ScheduleError, match=r"layout " + message):
        parse_layout(text)
    with pytest.raises(ScheduleTypeError, match=r"layout must be a string \(got int\)"):
        parse_layout(3)


def test_megatron_first_and_last_counts():
    # megatron.core's get_num_layers_to_build: the first and last ranks hold the counts, the
    # others the rest evenly, each rank's layers evenly over its chunks (stage c p + r)
    assert megatron_layers(80, 8, 1, first=5, last=3).layers == (5, 12, 12, 12, 12, 12, 12, 3)
    assert megatron_layers(80, 4, 2, first=18, last=18).layers == (9, 11, 11, 9, 9, 11, 11, 9)
    assert megatron_layers(80, 4, 2, first=14).layers == (7, 11, 11, 11, 7, 11, 11, 11)
    # its comments: 8 layers on 2 ranks with 4 chunks, or with 2 chunks
    assert megatron_layers(8, 2, 4).layers == (1,) * 8
    assert megatron_layers(8, 2, 2).layers == (2,) * 4
    with pytest.raises(ScheduleError, match=r"leave the other 6 devices the rest of "
                                            r"layers=80 evenly \(got first=9, last=9: 62 left"):
        megatron_layers(80, 8, 1, first=9, last=9)
    with pytest.raises(ScheduleError, match=r"divide evenly over its m=2 chunks \(got 9 on "
                                            r"device 0\)"):
        megatron_layers(80, 4, 2, first=9, last=9)


def test_torchtitan_less_layers():
    # torchtitan's own tests of generate_llm_fqn_per_model_part: 6 layers on 3 stages give
    # the embedding + 2 layers, 3 layers, 1 layer + the output; 4 layers, weights 2 and 2, on
    # 2 stages give 2 and 2
    assert torchtitan_layers(6, 3).layers == (2, 3, 1)
    assert torchtitan_layers(4, 2, 2, 2).layers == (2, 2)
    assert torchtitan_layers(80, 8, 0, 0).layers == (10,) * 8
    assert torchtitan_layers(5, 1).layers == (5,)
    with pytest.raises(ScheduleError, match=r"at most each stage's share 2 of 8 weights over "
                                            r"3 stages"):
        torchtitan_layers(4, 3, 3, 1)


def test_even_layers_with_first_and_last():
    assert even_layers(10, 4).layers == (2, 3, 3, 2)
    assert even_layers(80, 8, 9, 9).layers == (9, 10, 10, 11, 11, 10, 10, 9)
    assert even_layers(8, 2, 5).layers == (5, 3)
    with pytest.raises(ScheduleError, match=r"need at least 2 model chunks \(got 1\)"):
        even_layers(8, 1, 3)
    with pytest.raises(ScheduleError, match=r"must leave the other stages the rest of "
                                            r"layers=8 \(got first_layers=3, last_layers=3"):
        even_layers(8, 2, 3, 3)
    with pytest.raises(ScheduleError, match=r"at least one layer for each of the 4 other "
                                            r"stages \(got 2 layers left\)"):
        even_layers(8, 6, 3, 3)
    with pytest.raises(ScheduleError, match=r"first_layers must be an integer >= 0 "
                                            r"\(got -1\)"):
        even_layers(8, 2, -1)


def test_uneven_costs_by_hand():
    """Per stage: its layers' times, the output layer's on the stage with the loss; the same
    from a layout string, a Layout and a layers vector."""
    sched = build_schedule("1f1b", 2, 4)
    flat = dict(seq=16, microbatch=2, blocking_handoffs=False)  # compute alone, by hand
    even = transformer_costs(GPT, sched, TOY, **flat).per_stage(sched)
    uneven = transformer_costs(GPT, sched, TOY, **flat, layout="Et|t*3L")
    layer = 256 * 256 / 5e5  # a layer's forward at 5e5 FLOP/s (s b h = 256)
    logits = 2 * 256 * 10 / 5e5
    np.testing.assert_allclose(even.tf, [2 * layer, 2 * layer + logits])
    np.testing.assert_allclose(uneven.per_stage(sched).tf, [layer, 3 * layer + logits])
    assert uneven == transformer_costs(GPT, sched, TOY, **flat, layers=[1, 3])
    assert uneven == transformer_costs(GPT, sched, TOY, **flat,
                                       layout=Layout.from_layers([1, 3]))
    by = device_bytes(GPT, sched, zero=0, layers=[1, 3])
    assert by["parameter_bytes"].tolist() == [2 * (784 + 80), 2 * (3 * 784 + 80)]


@pytest.mark.parametrize("name, p, n, m, text", [
    ("1f1b", 2, 4, 1, "Et|t*3L"),
    ("interleaved-1f1b", 2, 4, 3, "Et|tt|t|t|t|tL"),
    ("zbv", 2, 4, 2, "Et|t|tt|ttL"),
    ("dualpipe", 2, 4, 1, "Et*4|tL"),
])
def test_uneven_layouts_agree_with_the_reference(name, p, n, m, text):
    model = Transformer(layers=sum(parse_layout(text).layers), hidden=8, heads=2, vocab=10,
                        dropout=True, flash_attention=False)
    sched = build_schedule(name, p, n, m)
    costs = transformer_costs(model, sched, TOY, seq=16, microbatch=2, tp=2, layout=text)
    assert_agrees(simulate(sched, costs), simulate_reference(sched, costs))


@pytest.mark.parametrize("kwargs, message, bytes_too", [
    (dict(layout="Et|tL"), r"layout must hold the model's layers=4 \(got 2: 'Et\|tL'\)", True),
    (dict(layers=[1, 2]), r"layout must hold the model's layers=4 \(got 3", True),
    (dict(layout="Et|t|tt|L"), r"layout must have 2 stages, the schedule's model chunks "
                               r"\(got 4: 'Et\|t\|tt\|L'\)", True),
    (dict(layout="Et*4|mL"), r"layout must have no MTP layers 'm'", True),
    (dict(layout="Et*2|ttL", layers=[2, 2]), r"give layout or layers, not both", True),
    (dict(layers=[2, -2]), r"layers must hold integers >= 0 \(got -2 at stage 1\)", True),
    (dict(layers=[2.0, 2]), r"layers must hold integers >= 0 \(got 2.0 at stage 0\)", True),
    (dict(layers=4), r"layers must be a sequence of layer counts per stage \(got int\)", True),
    (dict(layout="Et*4|"), r"layout must end with the loss 'L'", True),
])
def test_bad_layouts_for_a_model(kwargs, message, bytes_too):
    sched = build_schedule("1f1b", 2, 4)
    with pytest.raises(ScheduleError, match=message):
        transformer_costs(GPT, sched, TOY, seq=16, **kwargs)
    if bytes_too:
        with pytest.raises(ScheduleError, match=message):
            device_bytes(GPT, sched, **kwargs)
    else:
        assert device_bytes(GPT, sched, **kwargs)["parameter_bytes"].min() > 0


@pytest.mark.parametrize("embedding, loss, message", [
    ((True, True), (False, True), r"layout.embedding must mark stage 0 alone, the first \(got "
                                  r"stages \[0, 1\]\)"),
    ((False, False), (False, True), r"layout.embedding must mark stage 0 alone, the first \(got "
                                    r"stages \[\]\)"),
    ((True, False), (True, False), r"layout.loss must mark stage 1 alone, the last \(got "
                                   r"stages \[0\]\)"),
    ((True, False), (True, True), r"layout.loss must mark stage 1 alone"),
    ((True,), (False,), r"layout.loss must mark stage 0 alone, the last \(got stages \[\]\)"),
])
def test_a_hand_built_layout_holds_one_embedding_first_and_one_loss_last(embedding, loss,
                                                                          message):
    """Megatron's rule for its layout strings holds for a Layout built by hand too, so none
    reaches a price (which counts a tied output layer per model copy's two ends: two or no
    ends were numpy's broadcast error there)."""
    with pytest.raises(ScheduleError, match=message):
        Layout((2,) * len(embedding), embedding, loss, (0,) * len(embedding))


def test_a_stage_with_only_the_loss_runs_one_with_nothing_does_not():
    sched = build_schedule("1f1b", 2, 4)
    tf = transformer_costs(GPT, sched, TOY, seq=16, layout="Et*4|L",
                           blocking_handoffs=False).per_stage(sched).tf
    # s b h = 128: a layer sbh(24h + 4s) FLOPs, the output layer 2sbhv, at 5e5 FLOP/s
    np.testing.assert_allclose(tf, [4 * 128 * 256 / 5e5, 2 * 128 * 10 / 5e5])
    three = build_schedule("1f1b", 3, 6)
    with pytest.raises(ScheduleError, match=r"layout must give every stage work \(got stage 1 "
                                            r"holding nothing"):
        transformer_costs(GPT, three, TOY, seq=16, layout="Et*4||L")
    # a stage with only the embedding has work in the per-op model: the gather and its
    # weight gradient's scatter-add (memory-bound: vanishing on TOY, real on a preset)
    alone = transformer_costs(GPT, sched, "A100-80GB", seq=16, layout="E|t*4L")
    assert alone.per_stage(sched).tf[0] > 0 and alone.per_stage(sched).tw[0] > 0


def test_costs_need_a_schedule():
    with pytest.raises(ScheduleTypeError, match=r"schedule must be a fastpp.Schedule \(got "
                                                r"str\)"):
        transformer_costs(GPT, "zbv", TOY, seq=16)


@pytest.fixture(scope="module")
def uneven_plan():
    model = Transformer(layers=12, hidden=64, heads=8, kv_heads=4, ffn=160, vocab=500,
                        swiglu=True, name="toy")
    return model, plan(model, 8, TOY, seq=32, global_batch=32, capacity=4e6,
                       first_layers=[0, 1, 3], last_layers=[1, 2], tp=[1, 2],
                       recompute=["none", "full"], zero=[1])


def test_plan_rows_with_uneven_layouts_equal_simulate(uneven_plan):
    model, df = uneven_plan
    ran = df[df["step_time"].notna()]
    # every pair of counts on p * m chunks, m = 3 among them
    assert ran["layout"].nunique() > 12 and (df[df["step_time"].isna()]["reason"] != "").all()
    three = ran[ran["m"] == 3]
    assert three["layout"].nunique() > 3
    for r in pd.concat([ran.sample(60, random_state=0), three.sample(12, random_state=1)]
                       ).itertuples():
        layout = parse_layout(r.layout)
        chunks = r.p * r.m if r.schedule not in ("dualpipe", "chimera") else r.p
        assert layout.stages == chunks and sum(layout.layers) == 12
        sched = build_schedule(r.schedule, r.p, r.n, r.m)
        costs = transformer_costs(model, sched, TOY, seq=32, microbatch=r.microbatch, tp=r.t,
                                  dp=r.d, recompute=r.recompute, layout=r.layout)
        res = simulate(sched, costs)
        by = device_bytes(model, sched, tp=r.t, dp=r.d, zero=r.zero, layout=r.layout)
        held = held_bytes(costs, sched, res)
        total = sum(by.values()) + held
        worst = int(np.argmax(total))
        assert (r.makespan, r.bubble_ratio) == (res.makespan, res.bubble_ratio), r
        assert (r.peak_memory, r.activation_bytes) == pytest.approx(
            (total[worst], held[worst]), rel=1e-12), r


def test_plan_layout_reasons(uneven_plan):
    model, df = uneven_plan
    reasons = set(df["reason"])
    assert "first_layers and last_layers need at least 2 model chunks (got 1)" in reasons
    # first_layers = 0: a first stage with only the embedding, which runs (it has work)
    assert df[df["layout"].str.startswith("E|", na=False)]["step_time"].notna().any()
    assert any(r.startswith("first_layers and last_layers must leave") for r in reasons)
    # a layout string fixes the model chunks: other chunk counts are rows with a reason
    given = plan(model, 8, TOY, seq=32, global_batch=32, schedules=["1f1b", "interleaved-1f1b"],
                 tp=1, pp=4, microbatch=1, recompute="none", layout="Et*2|t*4|t*4|ttL")
    assert given[given["schedule"] == "1f1b"]["layout"].tolist() == ["Ett|t*4|t*4|ttL"]
    assert (given[given["schedule"] != "1f1b"]["reason"]
            .str.startswith("layout must have 8 stages").any())
    with pytest.raises(ScheduleError, match=r"layout must hold the model's layers=12 \(got 3"):
        plan(model, 8, TOY, seq=32, global_batch=32, layout="Et|t|tL")
    with pytest.raises(ScheduleError, match=r"give layout or first_layers/last_layers"):
        plan(model, 8, TOY, seq=32, global_batch=32, layout="Et*12L", first_layers=2)
    with pytest.raises(ScheduleError, match=r"first_layers must be integers >= 0 \(got -1\)"):
        plan(model, 8, TOY, seq=32, global_batch=32, first_layers=[2, -1])
    with pytest.raises(ScheduleError, match=r"layout must close every parenthesis"):
        plan(model, 8, TOY, seq=32, global_batch=32, layout="E(t*12L")


def test_layer_counts_of_a_0d_array_are_refused_by_name():
    """A 0-d array has ``__len__`` but no length: iterating it was NumPy's TypeError, through
    ``Layout.from_layers``, ``transformer_costs(layers=)`` and ``device_bytes(layers=)``."""
    with pytest.raises(ScheduleTypeError, match=r"layers must be a sequence of layer counts"):
        Layout.from_layers(np.array(2))
    with pytest.raises(ScheduleTypeError, match=r"layers must be a sequence of layer counts"):
        device_bytes("llama2-7b", build_schedule("1f1b", 2, 4), layers=np.array(2))
