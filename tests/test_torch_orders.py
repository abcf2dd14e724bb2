"""fastpp's orders equal PyTorch's own where PyTorch has the schedule (optional: needs torch).

PyTorch computes every rank's order in ``_calculate_single_rank_operations``, which reads only
a few attributes; a bare instance with those set needs no process group and no stages.
PyTorch 2.13's own ``Schedule1F1B`` order is wrong on the last rank, so 1F1B is not compared.
"""

import pytest

from fastpp import build_schedule

schedules = pytest.importorskip("torch.distributed.pipelining.schedules")


def torch_rows(cls, p, n, m, **attrs):
    sched = cls.__new__(cls)
    sched.pp_group_size = p
    sched._n_microbatches = n
    sched._stages = [None] * m
    sched.n_local_stages = m
    sched.num_stages = p * m
    for key, value in attrs.items():
        setattr(sched, key, value)
    return [[str(a) for a in sched._calculate_single_rank_operations(r) if a is not None]
            for r in range(p)]


CASES = [(p, n) for p in (2, 3, 4, 6, 8) for n in (p, 2 * p, 2 * p + 1, 3 * p + 2)]


@pytest.mark.parametrize("p, n", CASES)
@pytest.mark.parametrize("m", [1, 2, 3])
def test_looped_bfs(p, n, m):
    expected = torch_rows(schedules.ScheduleLoopedBFS, p, n, m)
    assert build_schedule("looped-bfs", p, n, m).tokens() == expected


@pytest.mark.parametrize("p, n", [(p, k * p) for p in (2, 3, 4, 8) for k in (1, 2, 3)])
@pytest.mark.parametrize("m", [2, 3, 4])
def test_interleaved_1f1b(p, n, m):
    # PyTorch's rounds of p microbatches are Megatron's groups with G = p
    expected = torch_rows(schedules.ScheduleInterleaved1F1B, p, n, m,
                          number_of_rounds=n // p, microbatches_per_round=p)
    assert build_schedule("interleaved-1f1b", p, n, m).tokens() == expected


@pytest.mark.parametrize("p, n", [(4, 10), (4, 6), (4, 5), (4, 3), (4, 1), (8, 12), (8, 5),
                                  (3, 8), (2, 1)])
@pytest.mark.parametrize("m", [2, 3])
def test_interleaved_1f1b_in_pytorchs_rounds(p, n, m):
    """Where n is not a multiple of p, PyTorch runs max(1, n // p) rounds of n // rounds
    microbatches, one round of n < p too: Megatron's groups of that G (which fastpp had
    refused, and so measure("ScheduleInterleaved1F1B", p=4, n=10))."""
    rounds = max(1, n // p)
    G = n // rounds
    assert n % rounds == 0  # (PyTorch refuses the others, as fastpp does)
    expected = torch_rows(schedules.ScheduleInterleaved1F1B, p, n, m,
                          number_of_rounds=rounds, microbatches_per_round=G)
    assert build_schedule("interleaved-1f1b", p, n, m, G=G).tokens() == expected


@pytest.mark.parametrize("p, n", CASES + [(4, 1), (4, 3), (8, 5)])
def test_zbv(p, n):
    expected = torch_rows(schedules.ScheduleZBVZeroBubble, p, n, 2)
    assert build_schedule("zbv", p, n, 2).tokens() == expected


@pytest.mark.parametrize("p, n", [(p, n) for p in (2, 3, 4, 6, 8) for n in (2 * p, 2 * p + 1,
                                                                             3 * p + 2)])
def test_dualpipev(p, n):
    expected = torch_rows(schedules.ScheduleDualPipeV, p, n, 2)
    assert build_schedule("dualpipev", p, n, 2).tokens() == expected


@pytest.mark.parametrize("p, n", [(p, n) for p, n in CASES + [(4, 1), (4, 3), (8, 5), (4, 10)]
                                  if n % max(1, n // p) == 0])
@pytest.mark.parametrize("m", [2, 3, 4])
def test_interleaved_zb(p, n, m):
    rounds = max(1, n // p)
    expected = torch_rows(schedules.ScheduleInterleavedZeroBubble, p, n, m,
                          number_of_rounds=rounds, microbatches_per_round=n // rounds)
    assert build_schedule("interleaved-zb", p, n, m).tokens() == expected
