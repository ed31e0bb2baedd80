# SPDX-License-Identifier: Apache-2.0
"""The project's X-macro tables read from Python: runtime/core/options.def (the runtime's
options, for docs/runtime.md) and passes/modes.def (the compiler modes and their options, for
`pmkit cc`). A table is C: /* */ and // comments, preprocessor lines, then calls
NAME(FIELD, ...) whose fields are string literals (adjacent ones joined, as C joins them),
identifiers, NULL, numbers or flag expressions (A | B)."""

from __future__ import annotations

import re
from pathlib import Path

_LITERAL = r'"(?:[^"\\]|\\.)*"'
_FIELD = re.compile(rf"\s*((?:{_LITERAL}\s*)+|[^,\"]+?)\s*(?:,|$)", re.S)


def _value(field: str) -> str | None:
    """A field's value: its string literals joined, None for NULL, else its text."""
    if field.startswith('"'):
        return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', field))
    return None if field == "NULL" else " ".join(field.split())


def calls(path: Path, name: str, arity: int) -> list[list[str | None]]:
    """The fields of every NAME(...) call in the table at PATH; a call without ARITY fields is
    an error naming it."""
    text = re.sub(r"/\*.*?\*/|//[^\n]*|^[ \t]*#[^\n]*", "", path.read_text(), flags=re.S | re.M)
    out = []
    for m in re.finditer(rf"\b{name}\((.*?)\)\s*(?=\b[A-Z_]+\(|$)", text, flags=re.S):
        fields = [_value(f.group(1)) for f in _FIELD.finditer(m.group(1).strip()) if f.group(1)]
        if len(fields) != arity:
            raise ValueError(f"{path.name}: cannot read {m.group(0)[:60]!r}")
        out.append(fields)
    return out
