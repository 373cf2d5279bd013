"""`llumverify check`'s summary: a variant x property table of verdicts, a line per variant as it
finishes, and the legends of the verdicts and of the trace's state fields.

Rows and columns come from the results, so a new property or variant appears without a change here.
"""

from __future__ import annotations

import re
import textwrap
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from tabulate import tabulate

from llumverify import protocol
from llumverify.cli.tables import WIDTH, fit
from llumverify.models.check import Verdict
from llumverify.models.liveness import LivenessResult
from llumverify.models.scope import Obligation
from llumverify.protocol.state import ENUM_FIELDS, FIELDS

TITLE = "summary (variant x property):"
STATE_TITLE = "state fields in the traces (S = the source instance, D = the destination):"

LEGEND = ("PROVED = holds in every reachable state of the protocol model, any block and token counts, unbounded "
          "(what the model covers: docs/protocol.md) | TRIVIAL = true whatever the protocol does "
          "(the fields it reads never change in that variant): not counted as proved | HOLDS<=d = no violation within d steps "
          "(bounded model checking, not a proof) | HOLDS (bounded: ...) = the real scheduler code run on every input "
          "within the bound, not a proof | HOLDS(fin) = liveness holds on the finite explicit state "
          "space only | VIOLATED(n) = a shortest counterexample of n steps (a lasso's prefix + loop for "
          "liveness) | FAILS = a scope obligation fails | - = not checked for that variant. "
          "scope = composition obligations (and, for safe, any number of stages). "
          "--traces prints each counterexample and the state legend; --format json everything.")

# One variant's results: safety verdicts, unreachable goals, liveness results, scope obligations.
Results = tuple[list[Verdict], list[str], list[LivenessResult], list[Obligation]]


def cells(results: Results) -> dict[tuple[str, str], str]:
    """(kind, property) -> its table cell; kinds in the order safety, liveness, scope."""
    verdicts, _, liveness, scope = results
    out = {}
    for v in verdicts:
        out["safety", v.prop] = {"PROVED": "PROVED", "TRIVIAL": "TRIVIAL", "HOLDS": f"HOLDS<={v.depth}"}.get(
            v.verdict, f"VIOLATED({v.depth})")
    for r in liveness:
        out["liveness", r.name] = {"PROVED": "PROVED", "HOLDS": "HOLDS(fin)"}.get(
            r.verdict, f"VIOLATED({len(r.lasso) if r.lasso is not None else '?'})")
    for o in scope:
        out["scope", o.name] = "PROVED" if o.holds else "FAILS"
    return out


def finished_line(name: str, results: Results, seconds: float) -> str:
    """The line printed as a variant's last task ends: how many properties got each verdict."""
    row = cells(results)
    counts = Counter(c.split("(")[0].split("<")[0] for c in row.values())
    tally = ", ".join(f"{counts[k]} {k}" for k in ("PROVED", "TRIVIAL", "HOLDS", "VIOLATED", "FAILS") if counts[k])
    vacuity = f"; {len(results[1])} goals unreachable (vacuity!)" if results[1] else ""
    return f"variant {name} done at {seconds:.0f} s: {len(row)} properties: {tally}{vacuity}"


def table(per_variant: Mapping[str, Results]) -> str:
    """The verdict table, properties down (grouped by kind) and variants across, split into blocks
    within 100 columns; then any unreachable goals (a vacuous proof)."""
    grid = {name: cells(r) for name, r in per_variant.items()}
    props = list(dict.fromkeys(p for row in grid.values() for p in row))

    def render(variants: list[str]) -> str:
        rows = [[kind if i == 0 or props[i - 1][0] != kind else "", prop, *(grid[v].get((kind, prop), "-")
                                                                           for v in variants)]
                for i, (kind, prop) in enumerate(props)]
        return tabulate(rows, headers=["", "property", *variants], disable_numparse=True)

    lines = [TITLE, "\n\n".join(fit(list(grid), render))]
    lines += [f"variant {name}: unreachable (vacuity!): {', '.join(r[1])}" for name, r in per_variant.items() if r[1]]
    return "\n".join(lines)


def verdict(per_variant: Mapping[str, Results], strict: list[str], variants_failed: bool,
            others_failed: bool = False) -> str:
    """The run's one-line outcome, last: which variants had to prove everything and did (or not), whether the
    scheduler's or the mutants' checks failed, and that the other variants' violations are findings about them."""
    bad = {n for n, r in per_variant.items() if any(c.startswith(("VIOLATED", "FAILS")) for c in cells(r).values())}
    others = [n for n in per_variant if n not in strict and n in bad]
    unproved = [n for n in strict if n in bad or any(c.startswith("HOLDS") for c in cells(per_variant[n]).values())]
    failures = ([f"{', '.join(unproved)}: not every property PROVED or TRIVIAL"] if unproved
                else ["a variant's proof is vacuous (a goal unreachable)"] if variants_failed else [])
    failures += ["the scheduler's or the mutants' checks above failed"] if others_failed else []
    head = (f"verdict: FAIL (exit 1): {'; '.join(failures)}" if failures
            else f"verdict: PASS (exit 0): {', '.join(strict)}: every property PROVED (or TRIVIAL)")
    tail = (f"; {', '.join(others)}: other variants, whose VIOLATED and FAILS cells are findings about them, not "
            "failures of this run (reports/protocol-findings.md says what each is)") if others else ""
    return textwrap.fill(head + tail, WIDTH)


def wrap(text: str, width: int = WIDTH) -> str:
    """Each line of `text` wrapped to `width`, continuations indented two more spaces."""
    out = []
    for line in text.splitlines():
        indent = " " * (len(line) - len(line.lstrip()) + 2)
        out.append(textwrap.fill(line, width, subsequent_indent=indent, break_on_hyphens=False))
    return "\n".join(out)


def legend(width: int = WIDTH) -> str:
    """The verdict legend, wrapped."""
    return textwrap.fill("Legend: " + LEGEND, width)


def state_legend(traces: str) -> str:
    """What each state field printed in `traces` means ("" if none is): the field's comment in
    llumverify/protocol/state.py's State (so the legend follows the model), and for an enum its
    docstring and values."""
    comments = _field_comments()
    lines = [STATE_TITLE]
    for f in FIELDS:
        if not re.search(rf"\b{f}=", traces):
            continue
        enum = ENUM_FIELDS.get(f)
        text = comments.get(f, "")
        if text in ("", "bool"):
            text = _UNCOMMENTED.get(f, text)
        if enum is not None:
            doc = (enum.__doc__ or "").strip().splitlines()[0]
            text = f"{doc} ({', '.join(e.name for e in enum)})"
        lines.append(textwrap.fill(f"{f:<13} {text}".rstrip(), WIDTH, initial_indent="  ", subsequent_indent=" " * 16))
    return "\n".join(lines) if len(lines) > 1 else ""


# Fields State declares without a comment of their own (named like a commented sibling).
_UNCOMMENTED = {"d_cap": "D's KV capacity in blocks", "s_free": "S's free blocks", "d_free": "D's free blocks",
                "d_other": "D's blocks used by other requests", "p_tok": "tok when the request was paused",
                "s_alive": "bool: S is alive", "d_alive": "bool: D is alive",
                "m_alloc": "bool: a pre-allocation request S -> D is in flight",
                "m_copy": "bool: a copy request S -> D is in flight", "m_commit": "bool: a commit S -> D is in flight"}


def _field_comments() -> dict[str, str]:
    """field -> its comment in class State's body (continuation lines, indented after the '#',
    joined; a comment on its own line heads a group and belongs to no field)."""
    text = (Path(protocol.__file__).parent / "state.py").read_text()
    out: dict[str, str] = {}
    last = None
    for line in text[text.index("class State"):].splitlines()[1:]:
        if line.startswith("    def "):
            break
        field = re.match(r"    (\w+): Val(?:\s+#\s*(.*))?$", line)
        more = re.match(r"    #\s{2,}(.*)$", line)
        if field:
            last = field.group(1)
            out[last] = field.group(2) or ""
        elif more and last is not None:
            out[last] = f"{out[last]} {more.group(1).strip()}"
        else:
            last = None
    return out
