# SPDX-License-Identifier: Apache-2.0
"""The runtime's environment variables as a Markdown table, from runtime/core/options.def (the
one table of them): docs/runtime.md carries it between its `options` markers, and make test
checks that it is this script's output.

Usage: python scripts/options_doc.py [--write]   (--write: replace the table in docs/runtime.md)
"""

from __future__ import annotations

import sys
from pathlib import Path

from pmkit import deftable

ROOT = Path(__file__).resolve().parents[1]
DEF = ROOT / "runtime" / "core" / "options.def"
DOC = ROOT / "docs" / "runtime.md"
BEGIN = "<!-- options: generated from runtime/core/options.def by scripts/options_doc.py -->"
END = "<!-- end of options -->"


def options() -> list[dict[str, str | None]]:
    """Each PMK_OPTION(ID, KIND, DEFAULT, VALUES, ON_BAD, HELP) of options.def."""
    return [
        {"name": f"PMKIT_{ident}", "kind": kind, "default": dflt, "values": values,
         "onbad": onbad, "help": text}
        for ident, kind, dflt, values, onbad, text in deftable.calls(DEF, "PMK_OPTION", 6)
    ]  # fmt: skip


def table() -> str:
    rows = ["| variable | values | default | a bad value | what |", "|---|---|---|---|---|"]
    for o in options():
        values = {"NUM": "a number", "TEXT": "text"}.get(o["kind"], "")
        if o["kind"] == "CHOICE":
            values = ", ".join(f"`{v}`" for v in o["values"].split("|"))
        default = f"`{o['default']}`" if o["default"] else "none"
        if o["kind"] == "TEXT":
            bad = "-"
        elif o["onbad"] is None:
            bad = "refused (exit 2)"
        else:
            bad = f"warning, then `{o['onbad']}`" if o["onbad"] else "warning, then the default"
        rows.append(f"| `{o['name']}` | {values} | {default} | {bad} | {o['help']} |")
    return "\n".join([BEGIN, *rows, END])


def main(argv: list[str]) -> int:
    doc = DOC.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"options_doc: {DOC} has no options markers")
    new = doc[: doc.index(BEGIN)] + table() + doc[doc.index(END) + len(END) :]
    if argv[1:] == ["--write"]:
        DOC.write_text(new)
    else:
        print(table())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
