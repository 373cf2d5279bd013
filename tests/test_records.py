"""Records reduced as requests end (sim/records.py) and streamed to the per-request file
(sim/request_output.py): the same rows and summaries as from the Request objects, and memory
that follows the requests in flight."""

from __future__ import annotations

import csv
import gc
import importlib.util
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import streamed_csv

import llumverify.cli as cli
from llumverify.settings.config import ClusterConfig, FailureConfig, SimConfig
from llumverify.errors import UserError
from llumverify.requests import RequestSpec, SpecTable
from llumverify.scheduler.policies import get_policy
from llumverify.sim.cluster import Cluster
from llumverify.sim.instance import Request
from llumverify.sim.records import row_of
from llumverify.sim.request_output import COLUMNS, RequestsFile, csv_fields
from llumverify.sim.run import simulate
from llumverify.sim.workload import arrival_times, generate, sample_lengths

# Overloaded 4 instances with a crash and a prompt too long to run: requests finish out of
# arrival order, are rejected, fail and are re-dispatched.
CFG = SimConfig(cluster=ClusterConfig(num_instances=4), failures=FailureConfig(at=((1, 30.0),)))
SPECS = [*generate(600, 9.0, seed=3)[:300], RequestSpec(300, 38.7, 20_000, 5),
         *(replace(s, id=s.id + 1) for s in generate(600, 9.0, seed=3)[300:])]


@pytest.mark.parametrize("policy", ["least-loaded", "llumnix"])
def test_the_streamed_file_has_every_request_once_with_the_records_values(policy: str, tmp_path: Path) -> None:
    res, data = streamed_csv(SPECS, policy, CFG, tmp_path, keep_records=True)
    assert res.records is not None
    lines = data.decode().splitlines()
    assert lines[0] == ",".join(COLUMNS)
    assert lines[1:] == [",".join(csv_fields(policy, row_of(r))) for r in res.records]
    statuses = {r.status.split(":")[0] for r in res.records}
    assert statuses == {"finished", "rejected", "failed"}  # every kind of row was streamed
    by_finish = sorted(res.records, key=lambda r: r.finish_ns)
    assert [r.id for r in by_finish] != [r.id for r in res.records]  # the reorder buffer had work
    # a request that did not finish has no first-token or finish time in the file (Row: -1 = not finished),
    # even one that crashed mid-decode with a first token already out
    unfinished = [dict(zip(COLUMNS, line.split(","))) for line, r in zip(lines[1:], res.records) if r.status != "finished"]
    assert any(r.status.startswith("failed") and r.first_token_ns >= 0 for r in res.records)
    assert unfinished and all(f["first_token_s"] == f["finish_s"] == "" for f in unfinished)


def test_summaries_equal_those_computed_from_the_request_objects() -> None:
    kept = simulate(SPECS, "llumnix", CFG, keep_records=True)
    lean = simulate(SPECS, "llumnix", CFG)
    assert lean.records is None and lean.summary == kept.summary
    done = [r for r in kept.records if r.status == "finished"]
    ttft = np.array([(r.first_token_ns - r.arrival_ns) / 1e9 for r in done])
    e2e = np.array([(r.finish_ns - r.arrival_ns) / 1e9 for r in done])
    s = kept.summary
    assert s["ttft_mean_s"] == float(ttft.mean()) and s["ttft_p99_s"] == float(np.percentile(ttft, 99))
    assert s["e2e_mean_s"] == float(e2e.mean()) and s["e2e_p50_s"] == float(np.percentile(e2e, 50))
    assert s["preemptions"] == sum(r.preemptions for r in kept.records)
    assert (s["finished"], s["rejected"], s["requests"]) == (len(done), 1, len(SPECS))


def test_rates_counts_and_decode_latencies_recompute_from_the_request_objects() -> None:
    """Each summary metric from its definition over the per-request records (docs/simulator.md), on a
    run that rejects, fails, preempts and aborts migrations."""
    res = simulate(SPECS, "llumnix", CFG, keep_records=True)
    recs, s = res.records, res.summary
    done = [r for r in recs if r.status == "finished"]
    assert 0 < len(done) < len(recs) and s["preemptions"] != len(recs)  # the checks below are not vacuous
    makespan = max(r.finish_ns for r in recs) / 1e9
    assert s["makespan_s"] == makespan
    assert s["throughput_rps"] == pytest.approx(len(done) / makespan)
    assert s["output_throughput_tps"] == pytest.approx(sum(r.output for r in done) / makespan)
    assert s["preemption_loss_s"] == pytest.approx(sum(r.preempt_loss_ns for r in recs) / 1e9 / len(recs))
    tpot = np.array([(r.finish_ns - r.first_token_ns) / (r.output - 1) / 1e9 for r in done if r.output >= 2])
    assert s["tpot_mean_s"] == pytest.approx(tpot.mean()) and s["tpot_p99_s"] == pytest.approx(np.percentile(tpot, 99))
    queue = np.array([(r.admitted_ns - r.arrival_ns) / 1e9 for r in done])
    assert s["queue_mean_s"] == pytest.approx(queue.mean())
    assert s["queue_p99_s"] == pytest.approx(np.percentile(queue, 99))
    # a request's migrations count its committed ones: some begun here were aborted
    assert s["migrations"] == sum(r.migrations for r in recs) < s["migrations_started"]
    # a committed migration's downtime is part of its request's paused time (an aborted one's is too)
    paused = [r.downtime_ns / 1e9 for r in recs if r.downtime_ns]
    assert s["migrations"] > 0 and s["downtime_max_s"] <= max(paused)
    assert s["downtime_mean_s"] * s["migrations"] <= sum(paused) * (1 + 1e-9)


@pytest.mark.slow  # over 1.5 s: the fast tier stays within its CPU budget
def test_live_requests_are_bounded_by_those_in_flight() -> None:
    """No Request outlives its end: memory per finished request does not grow with the run."""
    seen: list[tuple[int, int]] = []

    def live() -> int:
        gc.collect()
        return sum(isinstance(o, Request) for o in gc.get_objects())

    def count(n: int) -> None:
        if n % 60 == 0:
            seen.append((live() - before, cluster.ledger.arrived - cluster.ledger.ended))

    before = live()  # other tests' kept records
    cluster = Cluster(SPECS, get_policy("llumnix"), CFG, on_progress=count)
    cluster.run()
    assert len(seen) >= 5 and max(inflight for _, inflight in seen) > 100
    # the slack: requests just ended whose stale decode-heap entries an instance pops later
    assert all(n <= inflight + 64 for n, inflight in seen), seen
    assert live() == before
    with pytest.raises(RuntimeError, match="keep_records=True"):
        cluster.records  # noqa: B018


@pytest.mark.parametrize("name", ["llumnix", "pd", "autoscale", "polled"])
def test_a_finished_run_keeps_nothing_alive(name: str) -> None:
    """Regression (compiled build): a finished run's cluster, requests and migrations are freed,
    though its periodic processes still wait and a compiled generator is invisible to the garbage
    collector (sim/waits.py, Task.gen)."""
    from llumverify.settings.config import AutoscaleConfig, EngineConfig
    from llumverify.sim.migration import Migration
    four = ClusterConfig(num_instances=4)
    cfg = {"llumnix": SimConfig(cluster=four), "autoscale": SimConfig(autoscale=AutoscaleConfig(enabled=True)),
           "pd": SimConfig(engine=EngineConfig(generation="vllm-v1"), cluster=ClusterConfig(num_instances=8, pd="2:6")),
           "polled": SimConfig(cluster=replace(four, report_interval_s=0.05))}[name]
    kinds = (Cluster, Request, Migration)

    def alive() -> list[int]:
        gc.collect()
        objects = gc.get_objects()
        return [sum(isinstance(o, kind) for o in objects) for kind in kinds]

    before = alive()
    result = simulate(generate(300, 8.0, lengths="L-L", seed=1), "llumnix", cfg, keep_records=True)
    assert result.summary["migrations"] > 0 and alive() > before  # the records are held by the result
    del result
    assert alive() == before


def test_a_failed_run_leaves_no_file_that_looks_whole(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError), RequestsFile(tmp_path) as rows:
        rows.write("p", row_of(_ended()))
        1 / 0  # noqa: B018
    assert list(tmp_path.iterdir()) == []


def _ended() -> Request:
    r = Request(RequestSpec(0, 0.0, 5, 4), 0)
    r.end("failed:instance_crash", 10)
    return r


def test_parquet_without_pyarrow_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pyarrow" else real(name, *a))
    with pytest.raises(UserError, match="needs pyarrow"):
        RequestsFile(tmp_path, "parquet")
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["simulate", "--requests", "20", "--policy", "least-loaded", "--out", str(tmp_path / "o"),
                  "--requests-format", "parquet"])
    err = capsys.readouterr().err
    assert exit_info.value.code != 0 and "needs pyarrow" in err and err.strip().count("\n") == 0
    assert not (tmp_path / "o").exists()  # refused before any work


def test_parquet_rows_equal_the_csv_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    args = ["simulate", "--requests", "300", "--rate", "20", "--instances", "2"]
    for fmt in ("csv", "parquet"):
        with pytest.raises(SystemExit) as exit_info:
            cli.main([*args, "--out", str(tmp_path / fmt), "--requests-format", fmt])
        assert exit_info.value.code == 0, capsys.readouterr().err
    table = pq.read_table(tmp_path / "parquet" / "requests.parquet")
    assert table.column_names == list(COLUMNS)
    with open(tmp_path / "csv" / "requests.csv") as f:
        rows = list(csv.reader(f))[1:]
    assert table.num_rows == len(rows) == 3 * 300
    as_text = [["" if v is None else repr(v) if isinstance(v, float) else str(v) for v in rec.values()]
               for rec in table.to_pylist()]
    assert as_text == rows


def test_generated_specs_equal_the_list_they_replace() -> None:
    """SpecTable reads back exactly the RequestSpecs `generate` used to build one by one."""
    rng = np.random.default_rng(5)
    times = arrival_times(500, 4.0, rng)
    prompt, output = sample_lengths(500, "sharegpt", rng)
    priority = np.zeros(500, dtype=np.int64)
    priority[rng.choice(500, size=50, replace=False)] = 1
    old = [RequestSpec(i, t, p, o, q) for i, (t, p, o, q) in
           enumerate(zip(times.tolist(), prompt.tolist(), output.tolist(), priority.tolist()))]
    new = generate(500, 4.0, seed=5, high_priority_frac=0.1)
    assert isinstance(new, SpecTable) and new == old and list(new) == old
    assert new[-1] == old[-1] and new[10:20] == old[10:20] and new + old[:1] == old + old[:1]
    with pytest.raises(IndexError):
        new[500]  # noqa: B018


def test_a_row_puts_each_count_under_its_own_column() -> None:
    """Slip: sim/records.py row_of passing `r.migrations, r.preemptions` in swapped order (Row's fields are positional):
    every other test compares the file with row_of itself, so only a row built by hand tells the columns apart."""
    r = Request(RequestSpec(7, 0.25, 5, 4, priority=1), 100)
    r.instance, r.preemptions, r.migrations = 3, 2, 1
    r.first_token_ns, r.finish_ns = 400, 900
    r.end("finished", 900)
    row = row_of(r)
    assert (row.preemptions, row.migrations, row.instance, row.priority) == (2, 1, 3, 1)
    fields = dict(zip(COLUMNS, csv_fields("p", row)))
    assert (fields["preemptions"], fields["migrations"], fields["instance"]) == ("2", "1", "3")
    assert (fields["first_token_s"], fields["finish_s"], fields["status"]) == ("4e-07", "9e-07", "finished")
    # prompt and output lengths, id and arrival under their own headers (the header is COLUMNS, the values csv_fields)
    assert (fields["request_id"], fields["arrival_s"], fields["prompt_tokens"], fields["output_tokens"]) == \
        ("7", "0.25", "5", "4")
    # instance 0 is an instance: only a never-dispatched request (-1) has an empty instance field
    assert dict(zip(COLUMNS, csv_fields("p", row._replace(instance=0))))["instance"] == "0"
    assert dict(zip(COLUMNS, csv_fields("p", row._replace(instance=-1))))["instance"] == ""


def test_migration_downtime_percentiles_and_busy_share_follow_the_committed_migrations() -> None:
    """downtime_p50_s / p99 / mean / max are those of the committed migrations' pauses, and migrating_frac
    averages each instance's busy time over its own life (instance 1 crashes at 30 s: its life ends there)."""
    from llumverify.sim.metrics import summarize

    cluster = Cluster(SPECS, get_policy("llumnix"), CFG)
    cluster.run()
    s, st = summarize(cluster, CFG.slo), cluster.migrations.stats
    down = np.array(st.downtimes_ns) / 1e9
    assert len(down) == s["migrations"] > 2 and np.percentile(down, 50) != np.percentile(down, 99)
    assert s["downtime_p50_s"] == pytest.approx(np.percentile(down, 50))
    assert s["downtime_p99_s"] == pytest.approx(np.percentile(down, 99))
    assert (s["downtime_mean_s"], s["downtime_max_s"]) == (pytest.approx(down.mean()), down.max())
    crash_ns = int(CFG.failures.at[0][1] * 1e9)
    lives = {i: (crash_ns if i == CFG.failures.at[0][0] else cluster.end_ns) for i in range(4)}
    assert st.busy_ns.get(1, 0) > 0  # the crashed instance did take part in migrations
    assert s["migrating_frac"] == pytest.approx(np.mean([st.busy_ns.get(i, 0) / t for i, t in lives.items()]))
