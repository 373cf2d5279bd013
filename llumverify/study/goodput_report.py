"""reports/NAME/index.md from a goodput search's goodput.json (`llumverify report` on its folder).

Opens with the finding in one sentence, computed from the numbers: per workload, the best
colocated and the best disaggregated (P/D) deployment by goodput per GPU and their ratio. Then
one table per workload (every deployment x policy: goodput, per GPU, the 95 % interval of the
per-seed goodputs, status) and the attainment-vs-rate plot the search drew.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from llumverify.errors import UserError
from llumverify.files.outdir import OutputDir, safe_name
from llumverify.files.paths import write_atomic
from llumverify.study.results import SchemaMismatch, check_schema

# DistServe (OSDI'24) abstract: vs vLLM (no chunked prefill) on OPT models, within SLO for > 90 %
# of requests: 7.4x more requests, or 12.6x tighter SLOs. Context only: other engine, models, SLOs.
DISTSERVE = ("DistServe (OSDI'24) reports 7.4x more requests (or 12.6x tighter SLOs) than vLLM at "
             "90 % attainment, against a vLLM without chunked prefill on OPT models")


def deployment(settings: dict[str, object]) -> str:
    """A readable name of a deployment's grid settings ("colocated", "P/D 2:6", ...)."""
    pd = settings.get("cluster.pd", "")
    rest = {k: v for k, v in settings.items() if k != "cluster.pd"}
    name = f"P/D {pd}" if pd else "colocated"
    return name + "".join(f", {k}={v}" for k, v in sorted(rest.items()))


# What this report reads from goodput.json (results.py's check_schema): the keys and types `llumverify goodput` writes
_NUM = (int, float)
GOODPUT_SCHEMA: dict[str, object] = {"name": str, "target": _NUM, "tol": _NUM, "results": [{
    "workload": str, "policy": str, "settings": dict, "gpus": int, "goodput_rps": _NUM, "goodput_per_gpu": _NUM,
    "status": str}]}
STATUSES = ("ok", "unbounded", "never-met")  # goodput.py's searches end so


def _load(folder: Path) -> dict:
    path = folder / "goodput.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        check_schema(doc, GOODPUT_SCHEMA)
    except FileNotFoundError:
        raise UserError(f"{path}: not found") from None
    except (UnicodeDecodeError, json.JSONDecodeError, SchemaMismatch) as exc:
        raise UserError(f"{path}: not a goodput.json ({type(exc).__name__}: {exc})") from None
    if not 0 < doc["target"] < 1 or not 0 < doc["tol"] <= 1:
        raise UserError(f"{path}: target {doc['target']!r} must be a share strictly between 0 and 1 and tol "
                        f"{doc['tol']!r} in (0, 1], as `llumverify goodput` takes them")
    if not doc["results"]:
        raise UserError(f"{path}: results is empty: no search to report")
    for i, r in enumerate(doc["results"]):
        bad = next((k for k in ("goodput_rps", "goodput_per_gpu") if not 0 <= r[k] < math.inf), None)
        if bad or r["gpus"] < 1 or r["status"] not in STATUSES:
            what = (f"{bad} must be a finite number >= 0, got {r[bad]!r}" if bad else f"gpus must be >= 1, got "
                    f"{r['gpus']!r}" if r["gpus"] < 1 else f"status must be one of {', '.join(STATUSES)}, got "
                    f"{r['status']!r}")
            raise UserError(f"{path}: results[{i}].{what}")
        ci = r.get("ci95")
        ends = [ci.get(k) for k in ("low_per_gpu", "high_per_gpu")] if isinstance(ci, dict) else None
        if ci and not (ends == [None, None] or ends is not None and all(  # null, null: one seed, no interval
                isinstance(v, _NUM) and not isinstance(v, bool) and math.isfinite(v) for v in ends)):
            raise UserError(f"{path}: results[{i}].ci95 must hold finite low_per_gpu and high_per_gpu (both null for "
                            f"a single seed), got {ci!r:.80}")
    return doc


def finding(doc: dict) -> str:
    """One sentence: per workload, best P/D vs best colocated goodput per GPU."""
    parts = []
    for wl in dict.fromkeys(r["workload"] for r in doc["results"]):
        rows = [r for r in doc["results"] if r["workload"] == wl]
        colo = [r for r in rows if not r["settings"].get("cluster.pd")]
        pd = [r for r in rows if r["settings"].get("cluster.pd")]
        if not colo or not pd:
            continue
        bc = max(colo, key=lambda r: r["goodput_per_gpu"])
        bp = max(pd, key=lambda r: r["goodput_per_gpu"])
        unbounded = [r for r in (bc, bp) if r["status"] == "unbounded"]
        if unbounded:  # a lower bound only: the run's requests never loaded that deployment
            parts.append(f"on {wl} no comparison: {', '.join(deployment(r['settings']) for r in unbounded)} met the "
                         f"target at every rate tried (goodput >= {unbounded[0]['goodput_rps']:.4g} req/s; "
                         f"{unbounded[0].get('requests', '?')} requests per run never load it)")
            continue
        ratio = bp["goodput_per_gpu"] / bc["goodput_per_gpu"] if bc["goodput_per_gpu"] else float("inf")
        verdict = "beats" if ratio > 1 else "trails"
        parts.append(f"on {wl} the best disaggregated deployment ({deployment(bp['settings'])}, {bp['policy']}, "
                     f"{bp['goodput_per_gpu']:.3g} req/s per GPU) {verdict} the best colocated one "
                     f"({bc['policy']}, {bc['goodput_per_gpu']:.3g}) by {ratio:.2f}x")
    if not parts:
        return "No workload has both a colocated and a disaggregated deployment to compare."
    return "At " + f"{doc['target']:.0%} SLO attainment, " + "; ".join(parts) + "."


def write_goodput_report(folder: Path, reports_dir: Path, name: str | None = None) -> Path:
    """Write reports_dir/NAME/index.md (and attainment.png) from folder/goodput.json."""
    doc = _load(folder)
    final = reports_dir / safe_name(name or doc["name"], "report name (--name, or the search's name)")
    with OutputDir(final, "--reports-dir", fresh=False) as claim:
        out = claim.path
        lines = [f"# {doc['name']}: goodput", "", finding(doc), "",
                 f"Goodput: the highest arrival rate whose mean SLO attainment over the seeds stays >= "
                 f"{doc['target']:.0%} (bisection to {doc['tol']:.0%}; `llumverify goodput`, docs/experiments.md). "
                 f"Per GPU: divided by instances x TP. 95 % interval: Student-t over the per-seed goodputs. "
                 f"For context: {DISTSERVE}.", ""]
        exp = doc.get("experiment", {})
        if exp.get("description"):
            lines += [f"Experiment: {exp['description']}", ""]
        for wl in dict.fromkeys(r["workload"] for r in doc["results"]):
            lines += [f"## {wl}", "", "| deployment | policy | GPUs | goodput req/s | per GPU | per-GPU 95 % CI | status |",
                      "|---|---|---|---|---|---|---|"]
            for r in (r for r in doc["results"] if r["workload"] == wl):
                ci = r.get("ci95") or {}
                ci_txt = (f"{ci['low_per_gpu']:.3g} - {ci['high_per_gpu']:.3g}"
                          if ci.get("low_per_gpu") is not None else "")  # null: one seed, no interval
                lines.append(f"| {deployment(r['settings'])} | {r['policy']} | {r['gpus']} | {r['goodput_rps']:.4g} | "
                             f"{r['goodput_per_gpu']:.4g} | {ci_txt} | {r['status']} |")
            lines.append("")
        plot = folder / "attainment.png"
        if plot.is_file():
            shutil.copyfile(plot, out / "attainment.png")
            lines += ["![attainment vs rate](attainment.png)", ""]
        write_atomic(out / "index.md", "\n".join(lines))
        claim.commit()
    return final / "index.md"
