"""The sixteenth wave's trial: what the pages and the command line's messages say of fastpp
is what it does (each test failed before its fix)."""

import re
from pathlib import Path

import fastpp

ROOT = Path(__file__).resolve().parents[1]


def _text(page: str) -> str:
    return " ".join((ROOT / page).read_text().split())  # lines joined: a sentence may wrap


def test_default_m_is_listed_exactly():
    """sweeps.md and cli.md name every schedule whose default_m is 2 (interleaved-zb and
    combined-1f1b were left out of one, looped-bfs of the other)."""
    two = {name for name, spec in fastpp.SCHEDULES.items() if spec.default_m == 2}
    assert {spec.default_m for spec in fastpp.SCHEDULES.values()} == {1, 2}
    for page in ("docs/sweeps.md", "docs/cli.md"):
        said = re.search(r"default_m`: 2 for (.+?), 1 for the others", _text(page))
        assert said, page
        assert set(re.findall(r"`([^`]+)`", said.group(1))) == two, page
