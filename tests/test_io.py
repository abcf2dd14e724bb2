"""PyTorch schedule CSV: round trips, PyTorch's own files, malformed files."""

import pytest

import fastpp
from fastpp import ScheduleError, build_schedule, simulate
from fastpp.io import read_torch_csv, write_torch_csv


def _cases():
    for name, spec in fastpp.SCHEDULES.items():
        m = spec.default_m
        for p, n in ((2, 4), (4, 8), (6, 12)):
            if not spec.reasons(p, n, m, p)[0]:
                yield name, p, n, m


@pytest.mark.parametrize("name, p, n, m", list(_cases()))
def test_round_trip_is_exact(tmp_path, name, p, n, m):
    sched = build_schedule(name, p, n, m)
    path = write_torch_csv(sched, tmp_path / "s.csv")
    again = read_torch_csv(path, n=n, placement=name, name=name)
    assert again.tokens() == sched.tokens()
    assert again.stage_to_device.tolist() == sched.stage_to_device.tolist()
    assert again.route_first.tolist() == sched.route_first.tolist()
    assert (again.n, again.m, again.V) == (sched.n, sched.m, sched.V)
    assert simulate(again).makespan == simulate(sched).makespan
    if fastpp.SCHEDULES[name].placement != "two-directions":  # the map PyTorch would infer
        inferred = read_torch_csv(path)
        assert inferred.tokens() == sched.tokens()
        assert inferred.stage_to_device.tolist() == sched.stage_to_device.tolist()


def test_idle_cells_and_trailing_blank_lines(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("0F0,,0B0\n1F0,1B0,\n\n")
    sched = read_torch_csv(path)
    assert sched.tokens() == [["0F0", "0B0"], ["1F0", "1B0"]]
    assert sched.name == "s"


@pytest.mark.parametrize("text, message", [
    ("0F0,0X0\n", r"row 1, column 2: op token must look like"),
    ("0F0,0B0\n1F0,1SEND_F0,1B0\n", r"row 2, column 2: '1SEND_F0' is a communication action"),
    ("", r"must hold at least one row"),
    ("0F0,0B0\n0F1,0B1\n", r"stage 0 appears on devices 0 and 1"),
    ("0F0,0F1,0B0\n", r"stage 0, microbatch 1 on device 0 needs exactly one B"),
    ("4F4,4B4\n", r"every stage 0\.\.4 needs at least one op"),
])
def test_malformed_files_are_named(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(ScheduleError, match=message):
        read_torch_csv(path)



def test_a_stray_stage_id_is_named_in_one_line(tmp_path):
    """A typo of 5000000F0 listed all 4,999,998 stages it left out (a 44 MB message, printed
    whole by ``simulate --from-csv``); one of 2**31 - 2 built a list of 2e9 (out of memory)."""
    path = tmp_path / "typo.csv"
    for stage, missing in ((5_000_000, "4,999,998"), (2**31 - 2, "2,147,483,644")):
        path.write_text(f"0F0,0B0\n1F0,1B0\n{stage}F0,{stage}B0\n")
        with pytest.raises(ScheduleError, match=rf"missing \[2, 3, .*, 41, \.\.\. "
                           rf"\({missing} in all\)\]") as err:
            read_torch_csv(path)
        assert len(str(err.value)) < 500



def test_a_stray_stage_id_with_a_placement_is_refused_before_its_map(tmp_path):
    """With placement="loop", 2147483646F0 built the loop's map of every stage (p m = 2**31
    int32, 8.6 GB) before the V*n bound refused it: out of memory under a 3 GB limit."""
    import resource
    import subprocess
    import sys

    path = tmp_path / "typo.csv"
    path.write_text(f"0F0,0B0\n{2**31 - 2}F0,{2**31 - 2}B0\n")
    limit = 3 * 2**30
    code = ("import fastpp.io, sys\ntry: fastpp.io.read_torch_csv(sys.argv[1], placement='loop')\n"
            "except fastpp.ScheduleError as err: print(err)")
    run = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True,
                         text=True, timeout=300,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS,
                                                               (limit, limit)))
    assert "V*n must be at most 60000000 (got V=2147483648, n=1)" in run.stdout, run.stderr


def test_two_directions_needs_its_placement(tmp_path):
    path = write_torch_csv(build_schedule("dualpipe", 4, 8), tmp_path / "d.csv")
    with pytest.raises(ScheduleError, match="pass placement='two-directions'"):
        read_torch_csv(path)
    with pytest.raises(ScheduleError, match=r"placement must be one of"):
        read_torch_csv(path, placement="ring")
    assert read_torch_csv(path, placement="two-directions").num_ops == 62


def test_unreadable_file(tmp_path):
    with pytest.raises(ScheduleError, match="cannot be read as CSV"):
        read_torch_csv(tmp_path / "missing.csv")
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(ScheduleError):
        read_torch_csv(binary)


def test_csv_written_by_pytorch_loads(tmp_path):
    """PyTorch 2.13 dumps its own schedules (optional: needs torch)."""
    schedules = pytest.importorskip("torch.distributed.pipelining.schedules")
    for cls, p, n, name in ((schedules.ScheduleZBVZeroBubble, 4, 8, "zbv"),
                            (schedules.ScheduleDualPipeV, 4, 8, "dualpipev"),
                            (schedules.ScheduleInterleaved1F1B, 4, 8, "interleaved-1f1b")):
        obj = cls.__new__(cls)
        obj.pp_group_size, obj._n_microbatches, obj._stages = p, n, [None, None]
        obj.n_local_stages, obj.num_stages = 2, 2 * p
        obj.number_of_rounds, obj.microbatches_per_round = n // p, p
        obj.pipeline_order = {r: obj._calculate_single_rank_operations(r) for r in range(p)}
        path = tmp_path / f"{name}.csv"
        schedules.PipelineScheduleMulti._dump_csv(obj, str(path))
        assert ",," in path.read_text() or name == "dualpipev"  # idle steps as empty cells
        loaded = read_torch_csv(path)
        assert loaded.tokens() == build_schedule(name, p, n, 2).tokens()
        assert simulate(loaded).makespan > 0
