"""The package's imports run one way: no module imports, directly or through others, a module
that imports it back (the drawing of the imports has floors and no circle)."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fastpp"


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> dict[str, set[str]]:
    """Every fastpp module and the fastpp modules it imports, anywhere in its body (lazy
    imports inside functions included: they run too)."""
    modules = {_module(path): path for path in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:  # a submodule, or a name from the module
                    sub = f"{base}.{alias.name}"
                    found.add(sub if sub in modules else base)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_no_import_circle():
    graph = imports()
    assert len(graph) > 60 and "fastpp.placement" in graph["fastpp.generators.registry"]
    state = {}  # 1: on the current path, 2: done
    path = []

    def visit(m):
        state[m] = 1
        path.append(m)
        for d in sorted(graph[m]):
            if state.get(d) == 1:
                circle = path[path.index(d):] + [d]
                raise AssertionError("import circle: " + " -> ".join(circle))
            if d not in state:
                visit(d)
        path.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m)


def test_private_emit_stays_in_generators():
    """``generators._emit`` holds the generators' private writers; placement and the op block
    are public (``fastpp.placement``, ``fastpp.ops``)."""
    users = {m for m, deps in imports().items() if "fastpp.generators._emit" in deps}
    assert users and all(m.startswith("fastpp.generators.") for m in users), sorted(users)


def test_one_version():
    """pyproject.toml's version is fastpp.__version__, which sweep manifests record."""
    import tomllib

    import fastpp

    with open(PACKAGE.parent / "pyproject.toml", "rb") as handle:
        assert tomllib.load(handle)["project"]["version"] == fastpp.__version__
