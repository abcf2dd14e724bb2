"""fastpp.checks: the one way a missing optional extra is reported."""

import subprocess
import sys

import pytest

from fastpp.checks import MissingExtraError, ScheduleError, missing_extra, require

# Each call in a fresh interpreter where the extra's package cannot be imported, as on a
# machine without it: (blocked module, call, the message it must print).
WITHOUT = [
    ("pandas", "fastpp.sweep('1f1b', p=2, n=2, progress=False)",
     "fastpp.sweep needs pandas: pip install 'fastpp[sweep]'"),
    ("pandas", "fastpp.sweeps.load('nowhere')",
     "fastpp.sweeps.load needs pandas: pip install 'fastpp[sweep]'"),
    ("pandas", "fastpp.MeasuredRun",
     "fastpp.measured needs pandas: pip install 'fastpp[measured]'"),
    ("pandas", "fastpp.model.plan('llama3-8b', gpus=8, seq=4096, global_batch=8)",
     "fastpp.model.plan needs pandas: pip install 'fastpp[sweep]'"),
    ("matplotlib", "fastpp.plot.gantt(fastpp.simulate(fastpp.build_schedule('1f1b', 2, 2), "
     "fastpp.Costs(1, 2)), 'never.png')",
     "fastpp.plot needs matplotlib: pip install 'fastpp[plot]'"),
    ("dask", "fastpp.sweep('1f1b', p=2, n=2, executor='dask', progress=False)",
     "executor='dask' needs Dask: pip install 'fastpp[dask]'"),
    ("plotly", "fastpp.report(fastpp.sweep('1f1b', p=2, n=2, progress=False))",
     "fastpp.report needs plotly: pip install 'fastpp[report]'"),
]


@pytest.mark.parametrize("blocked", sorted({blocked for blocked, _, _ in WITHOUT}))
def test_a_missing_extra_is_one_error_naming_it(blocked):
    cases = [(call, message) for name, call, message in WITHOUT if name == blocked]
    code = [f"import sys; sys.modules[{blocked!r}] = None",
            "import fastpp, fastpp.model, fastpp.plot, fastpp.sweeps"]
    for call, _ in cases:
        code += ["try:", f"    {call}", "except fastpp.checks.MissingExtraError as err:",
                 "    assert isinstance(err, fastpp.ScheduleError) and isinstance(err, "
                 "ImportError)", "    print(err)", "else:", "    print('no error')"]
    run = subprocess.run([sys.executable, "-c", "\n".join(code)], capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines() == [message for _, message in cases]


def test_require_imports_or_names_the_extra():
    assert require("json", "sweep", "x").dumps([1]) == "[1]"
    with pytest.raises(MissingExtraError, match=r"^thing needs nopkg: pip install 'fastpp\[x\]'$"):
        require("nopkg.sub", "x", "thing")
    err = missing_extra("method='exact'", "OR-Tools", "search")
    assert isinstance(err, ScheduleError) and isinstance(err, ImportError)
