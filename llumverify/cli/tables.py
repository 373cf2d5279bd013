"""Tables that fit a terminal: a wide table's columns split into as few blocks as keep every line
within WIDTH (used by `simulate` and `check`), and a line of text wrapped to it."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence

WIDTH = 100  # columns every printed line fits in


def fit(columns: Sequence[str], render: Callable[[list[str]], str], width: int = WIDTH) -> list[str]:
    """render(some columns) for consecutive groups of `columns`, each group as large as fits in
    `width` (a single column that does not fit still gets its own block)."""
    groups: list[list[str]] = []
    for col in columns:
        if groups and max(map(len, render([*groups[-1], col]).splitlines())) <= width:
            groups[-1].append(col)
        else:
            groups.append([col])
    return [render(g) for g in groups]


def wrap(line: str, width: int = WIDTH) -> str:
    """`line` wrapped to `width`, its continuation lines indented two spaces; a path or name stays whole (no break
    at its hyphens or inside a word longer than the width)."""
    return textwrap.fill(line, width, subsequent_indent="  ", break_on_hyphens=False, break_long_words=False)
