"""A schedule's name is spelled only in its generator and its registry entry (issue 22): the
rest of the library asks the registry (``ScheduleSpec``'s flags and closed forms)."""

import ast
from pathlib import Path

from fastpp import SCHEDULES

PACKAGE = Path(__file__).resolve().parents[1] / "fastpp"
# generators/ (the registry included) owns the names; seed.py's teaching-chapter mapping is
# that chapter's public API, and model/validate.py's tables say which schedule a published
# run used; the run configuration's importers and exporters translate Megatron-LM's and
# torchtitan's own names (and RunConfig defaults to Megatron's); llm-foundry's states the
# one schedule Composer's gradient accumulation runs
# the published runs' loaders name the schedule each run used, as the importers name the
# frameworks' schedules
ALLOWED = ("generators/", "seed.py", "model/published.py", "model/validate.py",
           "model/validate_long.py",
           "model/validate_moe.py", "model/validate_small.py", "model/config.py",
           "model/megatron.py", "model/torchtitan.py", "model/foundry.py", "model/vtrain.py")


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def spelled_names(source: str) -> list[tuple[int, str]]:
    """Each string literal in code (docstrings aside; comments are not in the tree) that is a
    registered schedule's name, with its line."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    return sorted((node.lineno, node.value) for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str)
                  and node.value in SCHEDULES and id(node) not in skip)


def test_the_scan_finds_a_spelled_name():
    source = 'def f(name):\n    """For "1f1b" only."""\n    # "zbv" here\n' \
             '    return name == "1f1b" or f"{name}" in ("zbv",)\n'
    assert spelled_names(source) == [(4, "1f1b"), (4, "zbv")]


def test_schedule_names_only_in_the_registry():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = path.relative_to(PACKAGE).as_posix()
        if where.startswith(ALLOWED):
            continue
        found += [f"{where}:{line}: {name!r}" for line, name in spelled_names(path.read_text())]
    assert len(list(PACKAGE.rglob("*.py"))) > 60
    assert not found, "schedule names outside the registry:\n" + "\n".join(found)
