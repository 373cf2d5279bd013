"""`llumverify simulate`'s printed metrics: vLLM's conventions, the same numbers in every format,
every line within 100 columns, hand-offs shown for P/D runs."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace

import pytest

import llumverify.cli as cli
from llumverify.cli.simulate import DEFAULT_RATE
from llumverify.cli.simulate_output import FIELDS, metrics
from llumverify.cli.tables import WIDTH
from llumverify.settings.config import SLOConfig
from llumverify.sim.run import simulate
from conftest import TOY_COST, specs_of, toy_config


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    out, err = capsys.readouterr()
    assert exit_info.value.code == 0, err
    return out


def _table_rows(out: str) -> dict[str, list[str]]:
    """label -> the cells after it, from every block of the table (a label's cells concatenated)."""
    rows: dict[str, list[str]] = {}
    for line in out.splitlines():
        for f in FIELDS:
            if line.startswith(f.label + "  "):
                rows.setdefault(f.label, []).extend(line[len(f.label):].split())
    return rows


def test_token_metrics_follow_their_definitions() -> None:
    """ITL pools every token gap (a long request weighs more than in TPOT); output throughput is
    output tokens over the makespan."""
    cost = replace(TOY_COST, decode_ns_per_seq=10)  # a gap grows with the batch: the two requests' TPOTs differ
    res = simulate(specs_of((0.0, 4, 9), (0.0, 4, 2), (1e-6, 4, 1)), "least-loaded", toy_config(cost=cost),
                   keep_records=True)
    recs = [r for r in res.records if r.output >= 2]
    s = res.summary
    assert s["itl_mean_s"] == sum(r.finish_ns - r.first_token_ns for r in recs) / sum(r.output - 1 for r in recs) / 1e9
    assert s["itl_mean_s"] != s["tpot_mean_s"]
    assert s["output_throughput_tps"] == 12 / s["makespan_s"]


def test_every_format_carries_the_same_numbers_in_display_units(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["simulate", "--requests", "60", "--rate", "5", "--instances", "2"]
    table = _main(args, capsys)
    doc = json.loads(_main([*args, "--format", "json"], capsys))
    rows = list(csv.DictReader(io.StringIO(_main([*args, "--format", "csv"], capsys))))
    assert list(doc["policies"]) == [r["policy"] for r in rows] == ["round-robin", "least-loaded", "llumnix"]
    assert doc["run"]["engine"] == "vllm-0.2" and doc["run"]["pd"] == "none" and doc["run"]["requests"] == 60
    cells = _table_rows(table)
    for i, row in enumerate(rows):
        fields = doc["policies"][row["policy"]]
        assert set(fields) == set(row) - {"policy"}
        for f in FIELDS:
            if f.key in fields:
                assert float(row[f.key]) == pytest.approx(fields[f.key], rel=1e-12)
                assert cells[f.label][i] == format(fields[f.key], f.fmt)
    ll = doc["policies"]["least-loaded"]
    assert ll["ttft_p99_ms"] >= ll["ttft_median_ms"] > 0 and ll["e2e_mean_ms"] > ll["ttft_mean_ms"]
    assert "pd_handoffs" not in ll  # no P/D: no hand-off row


def test_table_fits_100_columns_with_every_policy_and_the_header_says_where_it_ran(
        capsys: pytest.CaptureFixture[str]) -> None:
    policies = [a for p in ("round-robin", "least-loaded", "llumnix", "predicted", "cache-aware") for a in ("--policy", p)]
    out = _main(["simulate", "--requests", "40", "--engine", "vllm-v1", "--gpu", "H100", "--model", "llama-7b",
                 "--tp", "2", "--arrival", "gamma", "--cv", "3", *policies], capsys)
    lines = out.splitlines()
    assert max(map(len, lines)) <= WIDTH
    assert lines[0] == f"40 requests, gamma at {DEFAULT_RATE:g} req/s, CV 3, sharegpt lengths, seed 0; SLO TTFT <= 10 s and TPOT <= 200 ms"
    assert "engine vllm-v1" in lines[1] and "H100 / llama-7b, TP 2" in lines[1] and "P/D none" in lines[1]
    assert all(len(cells) == 5 for cells in _table_rows(out).values())  # every policy in some block


def test_pd_run_shows_its_hand_offs(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    out = _main(["simulate", "--requests", "60", "--engine", "vllm-v1", "--instances", "4", "--pd", "1:3",
                 "--policy", "least-loaded", "--out", str(tmp_path / "o")], capsys)
    summary = json.loads((tmp_path / "o" / "summary.json").read_text())["policies"]["least-loaded"]
    assert summary["pd_handoffs"] > 0 and "P/D 1:3" in out
    assert _table_rows(out)["P/D hand-offs"] == [format(summary["pd_handoffs"], ",d")]
    assert metrics(summary)["migrations"] == summary["migrations"]


@pytest.mark.parametrize("blocks", ["1000", "851"])  # 851 is the setting's default: typed, it still applies
def test_num_blocks_given_wins_over_the_catalogs_kv_size(tmp_path, capsys: pytest.CaptureFixture[str], blocks) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["simulate", "--requests", "20", "--engine", "vllm-v1", "--gpu", "H100", "--model", "Llama-3.1-8B",
                  "--num-blocks", blocks, "--policy", "least-loaded", "--out", str(tmp_path / "o")])
    assert exit_info.value.code == 0
    err = capsys.readouterr().err
    assert f"KV cache: {blocks} blocks x 16 tokens per instance (as given, not from the catalogs)" in err
    config = json.loads((tmp_path / "o" / "summary.json").read_text())["config"]
    assert json.dumps(config).count(f'"num_blocks": {blocks}') == 1


@pytest.mark.parametrize(("args", "expected"), [
    (["--gpu", "H100", "--model", "Llama-3.1-8B"], "batch 1,024 seqs, 8,192 tokens"),  # vllm serve's on an H100
    (["--gpu", "H100", "--model", "Llama-3.1-8B", "--max-num-seqs", "256"],  # the other limit stays vLLM's
     "batch 256 seqs, 8,192 tokens (vllm serve on H100: 1,024 seqs, 8,192 tokens)"),
    (["--gpu", "L40S", "--model", "Llama-3.1-8B"], "batch 256 seqs, 2,048 tokens"),  # 48 GB: vLLM's smaller limits
    (["--gpu", "A100-80GB", "--model", "Llama-3.1-8B", "--max-num-seqs", "256", "--max-num-batched-tokens", "2048"],
     "batch 256 seqs, 2,048 tokens"),  # vLLM keeps A100s at 2,048 / 256: nothing to add
    ([], "batch 256 seqs, 12,800 tokens"),  # no GPU named: no vLLM default to compare with
])
def test_a_v1_header_says_its_batch_limits_and_vllm_serves_where_they_differ(
        args: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    out = _main(["simulate", "--requests", "20", "--engine", "vllm-v1", "--policy", "least-loaded", *args], capsys)
    header = " ".join(line.strip() for line in out.splitlines()[1:3])
    assert expected in header and max(map(len, out.splitlines())) <= WIDTH


def test_slo_attainment_is_the_share_of_requests_that_finished_within_both_targets() -> None:
    # request 2's prompt exceeds the toy engine's 64-token KV: rejected; the others alone on the engine
    # have TPOT 10 ns (request 1, one token, has none), over the 5 ns per-token target
    specs = specs_of((0.0, 5, 4), (1e-6, 5, 1), (2e-6, 100, 4), (3e-6, 5, 2))
    slo = SLOConfig(ttft_s=1.0, per_token_s=5e-9)
    res = simulate(specs, "least-loaded", replace(toy_config(), slo=slo), keep_records=True)

    def within(r) -> bool:
        tpot = (r.finish_ns - r.first_token_ns) / (r.output - 1) / 1e9 if r.output >= 2 else 0.0
        ttft = (r.first_token_ns - r.arrival_ns) / 1e9
        return r.status == "finished" and ttft <= slo.ttft_s and tpot <= slo.per_token_s

    met = sum(within(r) for r in res.records)
    assert 0 < met < len(specs) and any(r.status.startswith("rejected") for r in res.records)
    assert metrics(res.summary)["slo_attainment_pct"] == pytest.approx(100.0 * met / len(specs))


def test_the_header_names_the_slo_targets_and_a_high_class_s_own(capsys) -> None:
    """What "SLO attainment" counts against, in the units the table prints latencies in (ms for TPOT)."""
    out = _main(["simulate", "--requests", "40", "--high-priority-frac", "0.2", "--slo-ttft-high", "1.5",
                 "--slo-tpot", "0.05"], capsys)
    header = " ".join(line.strip() for line in out.splitlines()[:2])
    assert "; SLO TTFT <= 10 s and TPOT <= 50 ms (high priority: TTFT <= 1.5 s and TPOT <= 50 ms)" in header



def test_the_header_says_which_named_profile_set_the_run(capsys) -> None:
    """--profile testbed changes every number (the paper's testbed setup), so its header says so; the default does not."""
    testbed = _main(["simulate", "--requests", "40", "--profile", "testbed"], capsys)
    plain = _main(["simulate", "--requests", "40"], capsys)
    assert testbed.splitlines()[1].startswith("profile testbed | engine vllm-0.2 | ")
    assert plain.splitlines()[1].startswith("engine vllm-0.2 | ") and "profile" not in plain.splitlines()[1]


def test_a_share_under_100_is_never_shown_as_100_and_a_migration_free_llumnix_is_explained() -> None:
    """99.97 % of requests within the SLO is not all of them; a llumnix column that migrated nothing repeats
    least-loaded's, and a newcomer is told why rather than left to suspect a bug."""
    from llumverify.cli.simulate_output import _notes, _table

    base = {"finished": 10_000, "migrations": 0}
    shown = _table({"least-loaded": {**base, "slo_attainment_pct": 99.97},
                    "llumnix": {**base, "slo_attainment_pct": 100.0}}, ["least-loaded", "llumnix"])
    assert _table_rows(shown)["SLO attainment (%)"] == ["99.9", "100.0"]
    assert "migrated nothing" in " ".join(_notes({"least-loaded": base, "llumnix": base}))
    assert _notes({"least-loaded": base, "llumnix": {**base, "migrations": 3}}) == []
    assert _notes({"llumnix": base}) == []  # nothing to repeat


def test_the_header_names_the_catalog_entry_a_short_name_picked(capsys) -> None:
    out = _main(["simulate", "--requests", "20", "--gpu", "A100", "--model", "Llama-3.1-8B", "--policy",
                 "least-loaded"], capsys)
    assert "A100 (= A100-80GB) / Llama-3.1-8B, TP 1" in " ".join(line.strip() for line in out.splitlines()[1:3])


def test_each_printed_field_is_its_label_s_statistic_of_the_requests() -> None:
    """Every latency field is the statistic its label names, in ms, over the finished requests; the counts
    are those of the requests' outcomes (a run that rejects one request and fails others in a crash)."""
    import numpy as np

    from llumverify.requests import RequestSpec
    from llumverify.settings.config import ClusterConfig, FailureConfig, SimConfig
    from llumverify.sim.workload import generate

    specs = generate(120, 8.0, seed=4)
    specs = [*specs, RequestSpec(120, specs[-1].arrival_s, 20_000, 5)]  # too long for any instance
    cfg = SimConfig(cluster=ClusterConfig(num_instances=2), failures=FailureConfig(at=((1, 6.0),)))
    res = simulate(specs, "least-loaded", cfg, keep_records=True)
    done = [r for r in res.records if r.status == "finished"]
    ms = {"ttft": np.array([r.first_token_ns - r.arrival_ns for r in done]) / 1e6,
          "tpot": np.array([(r.finish_ns - r.first_token_ns) / (r.output - 1) for r in done if r.output >= 2]) / 1e6,
          "e2e": np.array([r.finish_ns - r.arrival_ns for r in done]) / 1e6}
    printed = metrics(res.summary)
    for base, values in ms.items():
        assert np.mean(values) != np.median(values) != np.percentile(values, 99)  # the three tell the fields apart
        assert printed[f"{base}_mean_ms"] == pytest.approx(np.mean(values), rel=1e-9)
        assert printed[f"{base}_median_ms"] == pytest.approx(np.median(values), rel=1e-9)
        assert printed[f"{base}_p99_ms"] == pytest.approx(np.percentile(values, 99), rel=1e-9)
    outcomes = [r.status.split(":")[0] for r in res.records]
    assert (printed["finished"], printed["rejected"], printed["failed"]) == \
        (outcomes.count("finished"), outcomes.count("rejected"), outcomes.count("failed"))
    assert 0 < printed["rejected"] != printed["failed"] > 0


def test_a_table_exactly_as_wide_as_the_terminal_stays_one_block() -> None:
    """fit: each block as large as fits within the width, a line of exactly `width` characters included."""
    from llumverify.cli.tables import fit

    def render(cols: list[str]) -> str:
        return " ".join(c * 49 for c in cols)  # two columns: 49 + 1 + 49 = 99, three: 149

    assert fit(["a", "b", "c"], render, width=99) == [render(["a", "b"]), render(["c"])]
    assert fit(["a", "b"], render, width=98) == [render(["a"]), render(["b"])]


def test_only_the_slo_share_is_held_below_100_and_the_note_names_the_twin_with_the_same_dispatch() -> None:
    """A latency of 99.97 ms rounds as any number does; beside round-robin, a migration-free llumnix column
    repeats least-loaded's (its dispatch), not round-robin's (the default three policies)."""
    from llumverify.cli.simulate_output import _notes, _table

    base = {"finished": 10, "migrations": 0}
    shown = _table({"least-loaded": {**base, "ttft_mean_ms": 99.97}}, ["least-loaded"])
    assert _table_rows(shown)["TTFT mean (ms)"] == ["100.0"]
    notes = _notes({"round-robin": base, "least-loaded": base, "llumnix": base})
    assert len(notes) == 1 and "round-robin" not in notes[0] and "least-loaded" in notes[0]


def _series(waiting: list[float], instances: float = 4.0) -> "RunResult":
    """A run whose only content is a waiting-requests series sampled once a second from t = 1 s."""
    from llumverify.sim.run import RunResult

    return RunResult("least-loaded", None, {"instances_mean": instances}, 0.0,
                     {"t_s": [float(i + 1) for i in range(len(waiting))], "waiting": waiting})


def _eighths(*levels: float, per: int = 5) -> "RunResult":
    """A run whose waiting queue holds `levels[k]` through the k-th eighth of 8 * per seconds of arrivals."""
    return _series([float(x) for x in levels for _ in range(per)])


def test_the_overload_rule_needs_a_queue_still_rising_at_the_end_above_one_request_per_instance() -> None:
    """Eighths of 40 s of arrivals on 4 instances: a queue rising through the last three eighths to 20, from 4 in the
    second quarter, was still growing; one that peaked in the seventh eighth and fell (a burst that drained) was not,
    nor a loaded steady state (20 -> 25), nor a small queue however it grows (1 -> 3.9: under one per instance); too
    short a window says nothing."""
    from llumverify.cli.simulate_output import overload_warnings, queue_trend

    rising = _eighths(0, 0, 4, 4, 8, 12, 16, 20)
    assert list(queue_trend(rising, 40.0)) == [0, 0, 4, 4, 8, 12, 16, 20]
    assert "least-loaded 4.0 -> 20.0" in overload_warnings([rising], 40.0)[0]
    assert overload_warnings([rising], 40.0, closed_loop=True) == []  # users bound a closed loop's queue
    assert overload_warnings([_eighths(0, 0, 4, 4, 8, 12, 30, 20)], 40.0) == []  # fell in the last eighth
    assert overload_warnings([_eighths(0, 0, 4, 4, 8, 30, 16, 20)], 40.0) == []  # fell in the seventh
    assert overload_warnings([_eighths(0, 0, 20, 20, 21, 23, 24, 25)], 40.0) == []
    assert overload_warnings([_eighths(0, 0, 1, 1, 2, 3, 3.5, 3.9)], 40.0) == []
    assert overload_warnings([_eighths(0, 0, 1, 1, 2, 3, 3.5, 4.0)], 40.0) != []  # the floor itself counts
    assert queue_trend(_eighths(0, 0, 4, 4, 8, 12, 16, 20, per=1), 8.0) is None


def test_a_run_past_capacity_warns_that_its_queue_grew_and_one_below_it_does_not(capsys) -> None:
    """Two instances of the default engine serve about 1 req/s: at 3 req/s every policy's queue grows through the
    arrivals and the table says so below it (json: on stderr, stdout still JSON); at 0.3 req/s nothing is said."""
    over = _main(["simulate", "--requests", "300", "--rate", "3", "--instances", "2"], capsys)
    warning = " ".join(over.split("warning: ", 1)[1].split())
    assert all(f"{p} " in warning for p in ("round-robin", "least-loaded", "llumnix")), warning
    assert "depend on --requests" in warning
    assert "warning" not in _main(["simulate", "--requests", "300", "--rate", "0.3", "--instances", "2"], capsys)
    # a closed loop of 150 users at that rate: its queue fills to what its users hold, then stays
    assert "warning" not in _main(["simulate", "--requests", "300", "--rate", "3", "--instances", "2", "--users",
                                   "150"], capsys)
    with pytest.raises(SystemExit):
        cli.main(["simulate", "--requests", "300", "--rate", "3", "--instances", "2", "--format", "json",
                  "--policy", "llumnix"])
    out, err = capsys.readouterr()
    assert set(json.loads(out)) == {"run", "policies"} and "warning: queues were still growing" in err


def test_the_overload_rule_reads_the_arrival_window_not_the_drain_after_it() -> None:
    """A queue flat at 8 through 40 s of arrivals, then 40 waiting while the run drains, did not grow while
    requests arrived; an eighth read past the last arrival would say it did."""
    from llumverify.cli.simulate_output import overload_warnings, queue_trend

    run = _series([8.0] * 40 + [40.0] * 20)
    assert list(queue_trend(run, 40.0)) == [8.0] * 8 and overload_warnings([run], 40.0) == []


def test_a_wrapped_line_keeps_a_path_longer_than_the_width_whole() -> None:
    from llumverify.cli.tables import wrap

    path = "/runs/" + "x" * 120 + "/meta.json"
    assert any(path in line for line in wrap(f"KV cache: from {path} at the run's own setting").splitlines())
