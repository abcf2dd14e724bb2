"""How close fastpp's activation bytes are to what PyTorch keeps: the memory error bar.

    python scripts/memorybars.py           # prints every measured variant and the regimes
    python scripts/memorybars.py --write   # also rewrites fastpp/model/memorybars.json

Needs torch (the ``torch`` extra). See fastpp.model.memorybar for the layer, the variants and
what the bar does not cover.
"""

from __future__ import annotations

import argparse
import json

from fastpp.checks import atomic_write, until_interrupted
from fastpp.model.memorybar import FACTS, TABLE, measure, memory_table, regime_of


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", action="store_true", help=f"rewrite {TABLE.name}")
    args = ap.parse_args(argv)
    rows = measure()
    print(f"{'layer':<14}{'s':>5}{'b':>3} {'attention':<7}{'mlp':<14}{'norm':<10}{'dropout':<8}"
          f"{'recompute':<10}{'measured':>10}{'formula':>10}{'error':>8}")
    for r in rows:
        m = r["model"]
        mlp = regime_of(m, r["recompute"]).mlp
        print(f"{m.name:<14}{r['seq']:>5}{r['microbatch']:>3} "
              f"{'flash' if m.flash_attention else 'eager':<7}{mlp:<14}{r['norm']:<10}"
              f"{'yes' if m.dropout else 'no':<8}{r['recompute']:<10}{r['measured']:>10}"
              f"{r['formula']:>10.0f}{r['error']:>+8.2%}")
    regimes = memory_table(rows)
    print(f"\n{'attention':<10}{'mlp':<14}{'recompute':<10}{'rows':>5}{'rms':>8}{'bias':>8}"
          f"{'worst':>8}")
    for g in regimes:
        print(f"{g['attention']:<10}{g['mlp']:<14}{g['recompute']:<10}{g['rows']:>5}"
              f"{g['rms']:>8.2%}{g['bias']:>+8.2%}{g['worst']:>8.2%}")
    if args.write:
        text = json.dumps({"written_by": "python scripts/memorybars.py --write",
                           "facts": list(FACTS), "regimes": regimes}, indent=1)
        # (through a temporary file: interrupted, an in-place write left the package's
        # table empty, as errorbars.json's did)
        atomic_write(TABLE, lambda tmp: tmp.write_text(text + "\n", encoding="utf-8"))
        print(f"\nwrote {TABLE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(until_interrupted(main))  # (Ctrl-C: a line, not a traceback)
