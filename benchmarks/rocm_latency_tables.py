"""AMD's published MI300X static-batch latencies, one table per ROCm vLLM release, from first principles.

    python benchmarks/rocm_latency_tables.py ROCM_VLLM [--out DIR]

ROCM_VLLM: a clone of ROCm/vllm (Apache-2.0; the `fetch` tool's mirror works, read with `git show`).
Its docs/dev-docker/README.md carries, in each release of AMD's vLLM image, a "Latency Measurements"
table: vLLM's benchmark_latency.py on 8 x MI300X (TP8), Llama-3.1-70B and 405B with AMD's fp8 (Quark
FP8-KV) checkpoints, batch 1-128, 128 or 2,048 prompt tokens, 2,048 output tokens, seconds per batch.
COMMITS lists the commits whose table changed (their dates and the image's vLLM as the file states
it); a commit whose rows equal an earlier one's is the same measurement and is skipped, said in the
table. Each table is replayed by `llumverify validate --static-batch` with `--engine-terms none`: the
vLLM V1 model's first principles, whose efficiencies were fitted on NVIDIA RTX PRO 6000 kernel
profiles and nothing of AMD's; fp8 weights as the checkpoints' names say, and the KV cache the
latency command sets (`--kv-cache-dtype`, the CSV's KV Cache Dtype column). Nothing here is fitted on
these tables. The engine each ran: V1 from the image whose notes say "V1 on by default" (vLLM 0.9.1;
ROCm fell back to V0 before), unless the command sets VLLM_USE_V1=0. Prints, per table, median APE
and median signed error, and the signed error at batch 1 and 128 (128-token prompts) per model;
--out writes results.json and table.md.
"""
from __future__ import annotations

import contextlib
import csv
import json
import re
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from report_main import git, report_main
from tabulate import tabulate

from llumverify.cli import main as cli
from llumverify.errors import UserError

DOC = "docs/dev-docker/README.md"
COMMITS = ("307a930f9", "245c94c48", "624b2ea92", "5ee305772", "3a05eb62d", "d78bf49f8", "07ee15e8b", "402118091",
           "260cc1ab6", "b4b7ba934", "4c4de4cdf", "327211ebd", "270179a7c", "7802e2b72")
HEADER = """# AMD's MI300X latency tables (ROCm vLLM releases) against first principles

ROCm/vllm (Apache-2.0), `{doc}` at each commit below: benchmark_latency.py on 8 x MI300X (TP8), Llama-3.1-70B / 405B
(AMD's fp8 Quark FP8-KV checkpoints), batch 1-128, prompt 128 or 2,048, output 2,048 tokens. Simulated by `llumverify
validate --static-batch CSV --engine-terms none` (vLLM V1 first principles; efficiencies fitted on NVIDIA kernel
profiles only): nothing fitted on AMD. Signed error: simulated / measured - 1. Regenerate: `python
benchmarks/rocm_latency_tables.py ROCM_VLLM --out reports/validation/rocm-mi300x`.

"""


def table_rows(text: str) -> list[tuple[str, int, int, int, float]]:
    """(checkpoint, batch, prompt, output, seconds) of the "Latency Measurements" table."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("|") and "Latency (" in line), None)
    if start is None:
        return []
    unit = 1e-3 if "Latency (ms)" in lines[start] else 1.0
    rows, model = [], ""
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        named = re.search(r"\(([^)]+)\)", cells[0])
        model = _checkpoint(cells[0], named.group(1)) if named else (cells[0] or model)
        if len(cells) != 7 or not cells[3].isdigit():
            continue
        rows.append((model, int(cells[3]), int(cells[4]), int(cells[5]), float(cells[6]) * unit))
    return rows


def _checkpoint(label: str, checkpoint: str) -> str:
    """The checkpoint a row names, its size as the row's label says: releases 0.6.6-0.8.3 label the 405B
    rows "Llama 3.1 405B (amd/Llama-3.1-70B-Instruct-FP8-KV)", a copy slip (their latencies are 3x the
    70B rows'); the label's size is taken."""
    size, named = re.search(r"(\d+)B\b", label.split("(")[0]), re.search(r"-(\d+)B-", checkpoint)
    if size and named and size.group(1) != named.group(1):
        return checkpoint.replace(f"-{named.group(1)}B-", f"-{size.group(1)}B-")
    return checkpoint


@dataclass(frozen=True)
class Command:
    """What the release's latency command says of the engine: V1 or V0, its KV cache, its switches."""

    engine: str
    kv_cache_dtype: str
    switches: str


def latency_command(text: str) -> Command:
    """The release's "Latency Benchmark" command block, read for its engine and KV cache."""
    part = text.split("### Latency Benchmark", 1)[-1].split("```", 2)
    block = part[1] if len(part) > 1 else ""
    switches = sorted(set(re.findall(r"VLLM_USE_V1=[01]|VLLM_V1_[A-Z_]+=[01]", block)))
    v1 = ("V1 on by default" in text and "VLLM_USE_V1=0" not in switches) or "VLLM_USE_V1=1" in switches
    kv = re.search(r"--kv-cache-dtype[ =](\S+)", block)
    return Command("V1" if v1 else "V0", kv.group(1) if kv else "auto", ", ".join(switches) or "none")


def replay(rows: list[tuple[str, int, int, int, float]], kv_cache_dtype: str) -> list[dict]:
    """validate --static-batch's rows (measured and simulated seconds) for these rows."""
    with tempfile.TemporaryDirectory() as tmp:
        path, out = Path(tmp) / "rows.csv", Path(tmp) / "v"
        with open(path, "w", newline="", encoding="utf-8") as f:
            w = csv.writer(f)
            w.writerow(["Hardware", "Num of Hardware", "Framework", "Model", "Input Length", "Output Length",
                        "Batch Size", "Latency", "KV Cache Dtype"])
            w.writerows(["AMD MI300X GPU", 8, "vLLM", m, p, o, b, s, kv_cache_dtype] for m, b, p, o, s in rows)
        with contextlib.redirect_stdout(sys.stderr):
            try:
                cli(["validate", "--static-batch", str(path), "--engine-terms", "none", "--out", str(out)])
            except SystemExit as exc:
                if exc.code:
                    raise UserError(f"validate exited {exc.code}") from None
        return json.loads((out / "validation.json").read_text())["rows"]


MODELS = ("70B", "405B")


def summary(commit: str, date: str, version: str, command: Command, rows: list[dict]) -> dict:
    signed = {f"{r['model'].split('/')[-1]} b{r['batch']} p{r['prompt']}": r["sim_s"] / r["real_s"] - 1 for r in rows}
    errors = np.array(list(signed.values()))
    pick = {f"signed_{m.lower()}_b{b}_p128": next((v for k, v in signed.items() if f"-{m}-" in k and k.endswith(
        f" b{b} p128")), None) for m in MODELS for b in (1, 128)}
    return {"commit": commit, "date": date, "vllm": version, "engine": command.engine,
            "kv_cache_dtype": command.kv_cache_dtype, "switches": command.switches, "rows": len(rows),
            "median_ape": float(np.median(np.abs(errors))), "median_signed": float(np.median(errors)), **pick,
            "signed": signed}


PICKS = [f"signed_{m.lower()}_b{b}_p128" for m in MODELS for b in (1, 128)]


def table(results: list[dict], same: dict[str, str]) -> str:
    body = [[r["commit"], r["date"], r["vllm"], r["engine"], r["kv_cache_dtype"], r["rows"],
             f"{100 * r['median_ape']:.1f} %", f"{100 * r['median_signed']:+.1f} %"]
            + [f"{100 * r[k]:+.1f} %" if r[k] is not None else "-" for k in PICKS] for r in results]
    text = tabulate(body, headers=["commit", "date", "vLLM", "engine", "KV cache", "rows", "median APE", "median signed",
                                   "70B b1", "70B b128", "405B b1", "405B b128"], tablefmt="github") + "\n"
    return text + "".join(f"\n{c}: the same table as {d} (not replayed again)." for c, d in same.items()) + (
        "\n" if same else "")


def build(repo: Path) -> tuple[list[dict], str]:
    if not repo.is_dir():
        raise UserError(f"{repo}: not a folder (a ROCm/vllm clone or its git directory)")
    results, seen, same = [], {}, {}
    for commit in COMMITS:
        text = git(repo, "show", f"{commit}:{DOC}")
        rows = table_rows(text)
        if not rows:
            raise UserError(f"{commit}:{DOC}: no latency table")
        command = latency_command(text)
        key = (tuple(rows), command)
        if key in seen:
            same[commit] = seen[key]
            continue
        seen[key] = commit
        version = re.search(r"^- vLLM v?([0-9][0-9.a-z+]*)", text, re.M)
        date = git(repo, "show", "-s", "--format=%ad", "--date=short", commit).strip()
        results.append(summary(commit, date, version.group(1) if version else "?", command,
                               replay(rows, command.kv_cache_dtype)))
    return results, table(results, same)


def main(argv: list[str]) -> int:
    return report_main("rocm_latency_tables", __doc__, argv, build, HEADER.format(doc=DOC))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
