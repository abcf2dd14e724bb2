"""The outputs the pages paste from a real run are what the code prints today: plan.md's
default job and its layout demo had drifted (peak memory 10% off, tokens/s by a few)."""

import contextlib
import io
import re
import runpy
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PLAN = (ROOT / "docs" / "plan.md").read_text()


def _block(text: str, first: str) -> list[str]:
    """The lines of the page's code block that opens with ``first``."""
    start = text.index("```\n" + first) + 4
    return text[start:text.index("```", start)].splitlines()


def _printed(run) -> list[str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run()
    return out.getvalue().splitlines()


def test_plans_default_job_prints_what_the_page_shows(tmp_path):
    """Every line but the first's timing and the files' folder, as printed."""
    pytest.importorskip("pandas")
    from fastpp.__main__ import main

    shown = _block(PLAN, "llama3-70b on 64 x H100-80GB")
    printed = _printed(lambda: main(["plan", "--out", str(tmp_path)]))
    timing = re.compile(r"planned in [\d.]+ s \([\d,]+ simulated configurations per second\)")
    assert [timing.sub("", x) for x in printed[:1]] == [timing.sub("", x) for x in shown[:1]]
    assert [x.replace(f"{tmp_path}/", "results/") for x in printed[1:]] == shown[1:]


def test_the_layout_demo_prints_what_the_page_shows(monkeypatch):
    """plan.md's interleaving table, "from a real run of scripts/layout_demo.py"."""
    pytest.importorskip("pandas")
    monkeypatch.setattr("sys.argv", ["layout_demo.py"])  # (it parses them: --help)
    shown = _block(PLAN, "        schedule  m                layout")
    printed = _printed(lambda: runpy.run_path(str(ROOT / "scripts" / "layout_demo.py")))
    at = printed.index(shown[0])
    assert printed[at:at + len(shown)] == shown


def test_the_fixed_times_costs_states_are_the_sample_traces():
    """``MeasuredRun.costs`` and docs/measured.md state the fixed parts of ``B``, ``I`` and ``W``
    on the traces in tests/data (per device, the typical duration less the typical operators,
    as ``costs()`` splits them): they said 0.09-0.51 ms, where the reader since gives up to
    0.526 ms (dualpipev's)."""
    import numpy as np

    import fastpp
    from fastpp.ops import B, I, W

    fixed = []
    for name in ("gpipe", "interleaved-1f1b", "looped-bfs", "interleaved-zb", "zbv",
                 "dualpipev"):
        run = fastpp.read_torch_trace(ROOT / "tests" / "data" / name)
        s = run.schedule
        used = np.arange(s.kind.shape[1]) < s.length[:, None]
        for r in range(s.p):
            for kind in (B, I, W):
                mine = used[r] & (s.kind[r] == kind)
                if mine.any():
                    fixed.append(np.median(run.durations[r][mine])
                                 - np.median(run.operators[r][mine]))
    said = f"{min(fixed) * 1e3:.2f}-{max(fixed) * 1e3:.2f} ms"
    assert said in " ".join(fastpp.MeasuredRun.costs.__doc__.split())
    assert said in " ".join((ROOT / "docs" / "measured.md").read_text().split())
