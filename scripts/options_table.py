"""Write the options table generated from ``aipq.config.KNOBS`` into docs/guide/commands.md, between its
``<!-- knobs: begin … -->`` and ``<!-- knobs: end -->`` markers (tests/test_knobs.py checks the two agree).

Run from the repository's root: ``python scripts/options_table.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

from aipq.config import knob_table

GUIDE = Path(__file__).resolve().parent.parent / "docs" / "guide" / "commands.md"
MARKERS = re.compile(r"(<!-- knobs: begin[^\n]*-->\n)(.*?)(\n<!-- knobs: end -->)", re.DOTALL)


def main() -> None:
    text = GUIDE.read_text()
    if MARKERS.search(text) is None:
        raise SystemExit(f"{GUIDE}: no knobs markers")
    GUIDE.write_text(MARKERS.sub(lambda m: m.group(1) + knob_table() + m.group(3), text, count=1))
    print(f"wrote {GUIDE}")


if __name__ == "__main__":
    main()
