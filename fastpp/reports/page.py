"""The page: one HTML file holding plotly.js once, the sections as JSON, and the script that
draws them (``page.js``), so that it opens offline."""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path

from ..checks import atomic_write

STYLE = """
body { font-family: system-ui, sans-serif; margin: 0; color: #222; }
header { background: #2d3e50; color: white; padding: 12px 24px; }
header h1 { margin: 0; font-size: 20px; }
header p { margin: 4px 0 0; font-size: 13px; opacity: 0.85; }
nav { position: sticky; top: 0; background: #f4f6f8; padding: 6px 24px; z-index: 10;
      border-bottom: 1px solid #ddd; font-size: 13px; }
nav a { margin-right: 14px; color: #2d5d8a; text-decoration: none; }
main { padding: 0 24px 40px; }
section { margin-top: 18px; }
h2 { font-size: 17px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
.fastpp-plot { min-height: 200px; margin: 8px 0; }
.fastpp-table { max-height: 520px; overflow: auto; font-size: 12px; margin: 8px 0; }
.fastpp-table table { border-collapse: collapse; }
.fastpp-table th, .fastpp-table td { padding: 2px 8px; border-bottom: 1px solid #eee;
      text-align: right; white-space: nowrap; }
.fastpp-table thead th { position: sticky; background: white; cursor: pointer; }
.fastpp-table thead tr:first-child th { top: 0; }
.fastpp-table thead tr:nth-child(2) th { top: 22px; cursor: default; }
.fastpp-table th.asc::after { content: " \\25B2"; }
.fastpp-table th.desc::after { content: " \\25BC"; }
.fastpp-table input { width: 70px; font-size: 11px; }
select { margin: 6px 0; }
"""


def _json(data) -> str:
    """JSON safe inside a <script> element: every ``<`` (found only inside its strings) as
    ``\\u003c``, so that neither ``</script`` nor ``<!--`` can end or change the element."""
    text = json.dumps(data, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c")


def write(path, title: str, subtitle: str, data: dict, plotly_js: str) -> None:
    """The page at ``path``, whole or not at all: the data are turned into JSON first (a
    non-finite number raises ValueError here), and the file is written beside ``path`` and
    renamed over it (a report that failed halfway had replaced the last good one)."""
    script = resources.files(__package__).joinpath("page.js").read_text()
    body = _json(data)
    atomic_write(Path(path), lambda tmp: _page(tmp, title, subtitle, body, plotly_js, script))


def _page(path, title: str, subtitle: str, body: str, plotly_js: str, script: str) -> None:
    with open(path, "w", encoding="utf-8") as out:
        out.write(f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                  f"<title>{html.escape(title)}</title><style>{STYLE}</style>"
                  f"<script>{plotly_js}</script></head>\n<body><header><h1>"
                  f"{html.escape(title)}</h1><p>{html.escape(subtitle)}</p></header>"
                  "<nav id=\"fastpp-nav\"></nav><main id=\"fastpp-main\"></main>\n"
                  "<script type=\"application/json\" id=\"fastpp-data\">")
        out.write(body)
        out.write(f"</script>\n<script>{script}</script></body></html>\n")
