"""`llumverify goodput`: a monotone-consistent, deterministic rate search, per GPU, one-line errors."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

import llumverify.cli as cli
from llumverify.study import goodput as gp
from llumverify.study.experiment import load_experiment
from llumverify.study.results import mean_ci

QUICK = Path(__file__).resolve().parents[1] / "experiments" / "goodput-quick.toml"
FILES = ("goodput.json", "goodput.csv", "attainment.png")


def _main(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    out, err = capsys.readouterr()
    return int(exit_info.value.code or 0), out, err


def _exp(tmp_path: Path, body: str, name: str = "exp.toml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


SMALL = ('policies = ["least-loaded"]\nseeds = [0]\nrequests = 120\n'
         '[slo]\nttft_s = 2.0\nper_token_s = 0.1\n'
         '[[workload]]\nname = "w"\nlengths = "sharegpt"\nrate = 2.0\n')


@pytest.fixture(scope="module")
def quick(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    out, doc = gp.run_goodput(QUICK, tmp_path_factory.mktemp("gq") / "serial", jobs=1)
    return out, doc


# --- the search on the quick experiment -------------------------------------------------------

@pytest.mark.slow
def test_files_and_schema(quick: tuple[Path, dict]) -> None:
    out, doc = quick
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)  # no temp files left behind
    on_disk = json.loads((out / "goodput.json").read_text())
    assert on_disk["schema_version"] == gp.SCHEMA_VERSION and "wall_s" not in on_disk
    assert on_disk["target"] == 0.9 and on_disk["tol"] == 0.02
    assert [(e["workload"], e["policy"]) for e in on_disk["results"]] == [
        ("sharegpt", "round-robin"), ("sharegpt", "least-loaded")]
    for e in on_disk["results"]:
        assert e["status"] == "ok" and e["gpus"] == 4
        assert {"goodput_rps", "goodput_per_gpu", "ci95", "points"} <= set(e)
        assert all(set(p) >= {"rate", "seed", "attainment"} for p in e["points"])
        assert {p["seed"] for p in e["points"]} == {0, 1}
    header, *rows = (out / "goodput.csv").read_text().splitlines()
    assert header.split(",")[:3] == ["workload", "policy", "instances"] and len(rows) == 2
    assert (out / "attainment.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow  # over 1.5 s: the fast tier stays within its CPU budget
def test_search_is_monotone_consistent(quick: tuple[Path, dict]) -> None:
    """The found rate passes, the failing end of the bracket is within 1 + tol of it, and so does
    (1 + tol) x the found rate, re-simulated from scratch."""
    _, doc = quick
    exp = load_experiment(QUICK)
    dep = gp.deployments(exp)[0]
    tol, target = doc["tol"], doc["target"]
    for pi, e in enumerate(doc["results"]):
        found, hi = e["bracket_rps"]
        assert found == e["goodput_rps"] and found < hi <= found * (1 + tol)
        means = {r["rate"]: r["mean_attainment"] for r in e["rates"]}
        assert means[found] >= target > means[hi]
        # every rate the search tried lies on the right side of the bracket or is the bracket
        assert all(means[r] >= target for r in means if r <= found)

        def mean_at(rate: float) -> float:
            return math.fsum(gp.evaluate(gp.point_task(dep, 0, pi, e["policy"], s, rate))["attainment"]
                             for s in dep.seeds) / len(dep.seeds)

        assert mean_at(found) == means[found] >= target  # re-simulated: the same numbers
        assert mean_at(found * (1 + tol)) < target


def test_per_seed_goodputs_and_interval(quick: tuple[Path, dict]) -> None:
    _, doc = quick
    for e in doc["results"]:
        seeds = e["seed_goodputs"]
        assert [s["seed"] for s in seeds] == [0, 1]
        for s in seeds:
            att = {p["rate"]: p["attainment"] for p in e["points"] if p["seed"] == s["seed"]}
            lo, hi = s["bracket_rps"]
            assert att[lo] >= doc["target"] > att[hi] and hi <= lo * (1 + doc["tol"])
        stats = mean_ci([s["goodput_rps"] for s in seeds])
        ci = e["ci95"]
        assert ci["n"] == 2 and ci["mean_rps"] == stats["mean"] and ci["half_width_rps"] == stats["ci95"]
        assert ci["low_rps"] == max(0.0, stats["mean"] - stats["ci95"])
        assert ci["high_rps"] == stats["mean"] + stats["ci95"]
        assert ci["high_per_gpu"] == ci["high_rps"] / e["gpus"]


@pytest.mark.slow  # over 1.5 s: the fast tier stays within its CPU budget
def test_identical_for_any_jobs(quick: tuple[Path, dict], tmp_path: Path) -> None:
    serial, _ = quick
    parallel, _ = gp.run_goodput(QUICK, tmp_path / "parallel", jobs=2)
    for name in FILES:
        assert (serial / name).read_bytes() == (parallel / name).read_bytes(), name


# --- per GPU ----------------------------------------------------------------------------------

def test_per_gpu_divides_by_instances_times_tp(tmp_path: Path) -> None:
    path = _exp(tmp_path, SMALL + '[engine]\ngeneration = "vllm-v1"\n[hardware]\ngpu = "H100"\nmodel = "Llama-3.1-8B"\n'
                'tp = 2\n[grid.cluster]\nnum_instances = [2, 3]\n')
    _, doc = gp.run_goodput(path, tmp_path / "out", jobs=1)
    got = [(e["settings"], e["instances"], e["tp"], e["gpus"]) for e in doc["results"]]
    assert got == [({"cluster.num_instances": 2}, 2, 2, 4), ({"cluster.num_instances": 3}, 3, 2, 6)]
    for e in doc["results"]:
        assert e["goodput_rps"] > 0
        assert e["goodput_per_gpu"] == e["goodput_rps"] / e["gpus"]
    csv_rows = (tmp_path / "out" / "goodput.csv").read_text().splitlines()
    assert csv_rows[0].startswith("workload,cluster.num_instances,policy,instances,tp,gpus")


def test_autoscaling_counts_the_most_instances_it_may_run(tmp_path: Path) -> None:
    exp = load_experiment(_exp(tmp_path, SMALL + "[cluster]\nnum_instances = 4\n[autoscale]\nenabled = true\nmax_instances = 6\n"))
    assert gp.deployments(exp)[0].gpus == 6


def test_grid_rates_start_the_search_and_other_settings_are_deployments(tmp_path: Path) -> None:
    body = SMALL.replace("rate = 2.0\n", "grid.rate = [3.0, 1.0]\ngrid.requests = [60, 80]\n")
    deps = gp.deployments(load_experiment(_exp(tmp_path, body)))
    assert [(d.settings, d.start_rates, d.requests) for d in deps] == [
        ((("requests", 60),), (1.0, 3.0), 60), ((("requests", 80),), (1.0, 3.0), 80)]
    assert all(d.workload.rate is None for d in deps)


# --- the search on a known curve --------------------------------------------------------------

def _drive(search: gp.RateSearch, attainment) -> list[float]:  # type: ignore[no-untyped-def]
    tried = []
    while (rates := search.next_rates()) is not None:
        assert rates == search.next_rates()  # asking twice changes nothing
        for r in rates:
            tried.append(r)
            search.observe(r, [attainment(r)])
    return tried


@pytest.mark.parametrize("knee", [0.013, 0.7, 2.0, 3.3, 57.0, 5000.0])
@pytest.mark.parametrize("tol", [0.02, 0.1])
def test_search_finds_a_monotone_knee(knee: float, tol: float) -> None:
    search = gp.RateSearch((0,), (2.0,), 0.9, tol)
    _drive(search, lambda r: 1.0 if r <= knee else 0.5)
    out = search.outcome()
    lo, hi = out["bracket_rps"]
    assert out["status"] == "ok" and out["goodput_rps"] == lo
    assert lo <= knee < hi <= lo * (1 + tol)


def test_search_limits() -> None:
    never = gp.RateSearch((0,), (2.0,), 0.9, 0.02)
    tried = _drive(never, lambda r: 0.0)
    assert never.outcome() == {"status": "never-met", "goodput_rps": 0.0, "bracket_rps": [0.0, min(tried)]}
    assert len(tried) == 1 + gp.MAX_STEPS
    always = gp.RateSearch((0,), (2.0,), 0.9, 0.02)
    tried = _drive(always, lambda r: 1.0)
    assert always.outcome()["status"] == "unbounded" and always.outcome()["goodput_rps"] == 2.0 * 2**gp.MAX_STEPS


def test_search_takes_the_first_crossing_when_noise_breaks_monotonicity() -> None:
    search = gp.RateSearch((0,), (1.0, 2.0, 4.0), 0.9, 0.02)
    _drive(search, lambda r: 0.5 if 1.5 < r < 3.0 else 1.0)  # 4 passes, 2 fails: the knee below 2 counts
    lo, hi = search.outcome()["bracket_rps"]
    assert 1.0 <= lo <= 1.5 < hi <= 2.0


def test_mean_over_seeds_decides() -> None:
    search = gp.RateSearch((0, 1), (2.0,), 0.9, 0.02)
    search.observe(2.0, [1.0, 0.8])  # mean 0.9: passes although seed 1 alone fails
    assert search.passes(2.0)


# --- the command ------------------------------------------------------------------------------

@pytest.mark.slow  # over 1 s: the fast tier stays within its CPU budget
def test_cli_prints_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _exp(tmp_path, SMALL)
    code, out, err = _main(["goodput", str(path), "--out", str(tmp_path / "o"), "--jobs", "1", "--quiet",
                            "--target", "0.8", "--tol", "0.05"], capsys)
    assert code == 0, err
    assert "goodput req/s" in out and "least-loaded" in out and "wrote" in out
    doc = json.loads((tmp_path / "o" / "goodput.json").read_text())
    assert doc["target"] == 0.8 and doc["tol"] == 0.05
    # a non-empty folder needs --force, and then is overwritten
    code, _, err = _main(["goodput", str(path), "--out", str(tmp_path / "o"), "--quiet"], capsys)
    assert code == 2 and "not empty" in err
    code, _, err = _main(["goodput", str(path), "--out", str(tmp_path / "o"), "--quiet", "--force", "--jobs", "1"],
                         capsys)
    assert code == 0, err


@pytest.mark.parametrize("args, body, message", [
    (["--target", "1"], SMALL, "--target must be a share strictly between 0 and 1"),
    (["--target", "0"], SMALL, "--target must be a share strictly between 0 and 1"),
    (["--target", "nan"], SMALL, "--target must be a share strictly between 0 and 1"),
    (["--tol", "0"], SMALL, "--tol must be a relative tolerance"),
    (["--jobs", "0"], SMALL, "--jobs must be a positive integer"),
    (["--duration", "0"], SMALL, "--duration must be a positive number of seconds"),
    (["--duration", "nan"], SMALL, "--duration must be a positive number of seconds"),
    ([], SMALL.replace("[slo]\nttft_s = 2.0\nper_token_s = 0.1\n", ""), "goodput needs SLO targets"),
    ([], SMALL.replace("per_token_s = 0.1\n", ""), "lacks per_token_s"),
    ([], SMALL.replace("rate = 2.0\n", "grid.rate = [1.0]\n") + "[grid]\nrate = [3.0]\n",
     "also swept"),  # the experiment's own checks still apply
    (["--out", "FILE"], SMALL, "exists and is not a folder"),
    (["--out", "FILE/sub"], SMALL, "is not a folder"),
])
def test_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                      body: str, message: str) -> None:
    (tmp_path / "FILE").write_text("x")
    args = [str(tmp_path / a) if a.startswith("FILE") else a for a in args]
    argv = ["goodput", str(_exp(tmp_path, body)), "--quiet", *args]
    if "--out" not in args:
        argv += ["--out", str(tmp_path / "out")]
    code, out, err = _main(argv, capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("llumverify: error: ") and message in err, err


def test_missing_experiment_and_trace_rate_scale_grid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _main(["goodput", str(tmp_path / "none.toml")], capsys)
    assert code == 2 and "experiment file not found" in err and err.count("\n") == 1
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n0.0,10,5\n0.5,10,5\n1.0,10,5\n")
    body = ('policies = ["least-loaded"]\n[slo]\nttft_s = 2.0\nper_token_s = 0.1\n'
            '[[workload]]\nname = "t"\ntrace = "t.csv"\ngrid.rate_scale = [1.0, 2.0]\n')
    code, _, err = _main(["goodput", str(_exp(tmp_path, body)), "--out", str(tmp_path / "o")], capsys)
    assert code == 2 and "drop rate_scale from the grid" in err and err.count("\n") == 1


def test_trace_search_starts_at_its_own_rate(tmp_path: Path) -> None:
    rows = "".join(f"{i * 0.25},{100 + i},{20 + i}\n" for i in range(9))  # 4 req/s
    (tmp_path / "t.csv").write_text("arrival_s,prompt_tokens,output_tokens\n" + rows)
    body = ('policies = ["least-loaded"]\n[slo]\nttft_s = 2.0\nper_token_s = 0.1\n'
            '[[workload]]\nname = "t"\ntrace = "t.csv"\nrate_scale = 1.5\n')
    dep = gp.deployments(load_experiment(_exp(tmp_path, body)))[0]
    assert dep.start_rates == (pytest.approx(6.0),) and dep.workload.rate_scale == 1.0


def test_out_is_checked_before_any_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llumverify.errors import UserError

    def no_runs(*args: object) -> None:
        raise AssertionError("a run started")

    monkeypatch.setattr(gp, "evaluate", no_runs)
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(UserError, match="not empty"):
        gp.run_goodput(_exp(tmp_path, SMALL), tmp_path / "full", jobs=1)


def test_failed_run_names_its_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    from llumverify.study import sweep as sweep_module
    from llumverify.sim.audit import AuditError

    def broken(*args: object, **kwargs: object) -> None:
        raise AuditError("blocks", "free went negative")

    monkeypatch.setattr(sweep_module, "simulate", broken)
    code, _, err = _main(["goodput", str(_exp(tmp_path, SMALL)), "--out", str(tmp_path / "o"), "--jobs", "1",
                          "--quiet"], capsys)
    assert code == 3 and "w [rate=2.0] least-loaded seed 0" in err and err.count("\n") == 1
    # no result files; the checkpoint stays (nothing in it: the first run failed), so the same
    # command resumes once the cause is fixed
    assert not (tmp_path / "o" / "goodput.json").exists()
    assert list((tmp_path / "o" / "points").iterdir()) == []


# --- sustained load (--duration) -------------------------------------------------------------

BURST = ('policies = ["least-loaded"]\nseeds = [0]\nrequests = 16\n[cluster]\nnum_instances = 16\n'
         '[slo]\nttft_s = 2.0\nper_token_s = 0.1\n'
         '[[workload]]\nname = "w"\nlengths = "sharegpt"\nrate = 2.0\n')


@pytest.mark.slow  # over 1.5 s: the fast tier stays within its CPU budget
def test_duration_turns_an_absorbed_burst_into_a_sustained_load(tmp_path: Path) -> None:
    """16 requests on 16 instances meet the SLO at any rate (one burst, one request each): the fixed
    count finds no limit; 20 s of arrivals per rate does, and every run serves rate x 20 s requests."""
    _, fixed = gp.run_goodput(_exp(tmp_path, BURST), tmp_path / "fixed", jobs=1)
    assert fixed["results"][0]["status"] == "unbounded" and "duration_s" not in fixed
    _, sustained = gp.run_goodput(_exp(tmp_path, BURST), tmp_path / "sustained", jobs=1, duration_s=20.0)
    entry = sustained["results"][0]
    assert sustained["duration_s"] == 20.0 and entry["status"] == "ok"
    assert 2.0 < entry["goodput_rps"] < fixed["results"][0]["goodput_rps"]
    for point in entry["points"]:
        assert point["requests"] == max(16, math.ceil(point["rate"] * 20.0))


def _interrupted_after(runs: int):  # type: ignore[no-untyped-def]
    """goodput's evaluate, Ctrl-C'd (KeyboardInterrupt) when asked for run `runs` + 1."""
    real, calls = gp.evaluate, 0

    def interrupted(task):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        if calls > runs:
            raise KeyboardInterrupt
        return real(task)

    return interrupted


@pytest.mark.slow
def test_an_interrupted_search_resumes_to_the_same_files(quick: tuple[Path, dict], tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Each run is saved as it finishes; after an interrupt the same command runs only what is
    missing and writes byte-identical files (the fixture ran uninterrupted)."""
    full, doc = quick
    real = gp.evaluate
    monkeypatch.setattr(gp, "evaluate", _interrupted_after(7))
    out = tmp_path / "resumed"
    with pytest.raises(KeyboardInterrupt):
        gp.run_goodput(QUICK, out, jobs=1)
    assert len(list((out / "points").glob("*.json"))) == 7 and not (out / "goodput.json").exists()
    resumed = 0

    def counted(task):  # type: ignore[no-untyped-def]
        nonlocal resumed
        resumed += 1
        return real(task)

    monkeypatch.setattr(gp, "evaluate", counted)
    gp.run_goodput(QUICK, out, jobs=1)
    assert resumed == doc["runs"] - 7  # only the missing runs
    for name in ("goodput.json", "goodput.csv"):
        assert (out / name).read_bytes() == (full / name).read_bytes(), name
    assert not (out / "points").exists() and not (out / "manifest.json").exists()


def test_a_changed_duration_is_not_resumed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from llumverify.errors import UserError

    def stop(task):  # type: ignore[no-untyped-def]
        raise KeyboardInterrupt

    monkeypatch.setattr(gp, "evaluate", stop)
    out = tmp_path / "out"
    with pytest.raises(KeyboardInterrupt):
        gp.run_goodput(QUICK, out, jobs=1, duration_s=10.0)
    with pytest.raises(UserError, match="goodput_duration_s"):
        gp.run_goodput(QUICK, out, jobs=1, duration_s=20.0)


def test_runs_that_replay_a_short_trace_whole_are_said_not_silent(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """With --duration, a rate the search reaches past the trace's rows replays the trace whole (its first rates'
    runs are checked up front): the command says how many runs did, instead of judging them in silence."""
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,10\n1,20,5\n2,30,8\n")
    exp = _exp(tmp_path, 'policies = ["round-robin"]\nseeds = [0]\nrequests = 2\n[cluster]\nnum_instances = 2\n'
               '[slo]\nttft_s = 2.0\nper_token_s = 0.1\n[[workload]]\nname = "w"\ntrace = "t.csv"\nrate = 2.0\n')
    code, out, _ = _main(["goodput", str(exp), "--duration", "1", "--out", str(tmp_path / "out"), "--jobs", "1",
                          "--quiet"], capsys)
    doc = json.loads((tmp_path / "out" / "goodput.json").read_text())
    assert code == 0 and gp.short_runs(doc) == 12 and "note: 12 of 13 runs replayed their trace whole" in out


def test_a_duration_that_changes_one_deployment_of_two_is_not_refused(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """--duration 0.01 s: the search's highest rate (2 x 2**12 req/s) sends 82 requests in it, more than workload a's
    20 (changed) and fewer than b's 120 (unchanged). Only a duration that changes no deployment is refused; this one
    reaches the search (stopped here before any run)."""
    from llumverify.errors import UserError

    class Reached(Exception):
        pass

    def stop(*_args: object, **_kwargs: object) -> None:
        raise Reached

    monkeypatch.setattr(gp, "search_all", stop)
    body = ('policies = ["least-loaded"]\nseeds = [0]\nrequests = 120\n[slo]\nttft_s = 2.0\nper_token_s = 0.1\n'
            '[[workload]]\nname = "a"\nlengths = "sharegpt"\nrate = 2.0\nrequests = 20\n'
            '[[workload]]\nname = "b"\nlengths = "sharegpt"\nrate = 2.0\n')
    with pytest.raises(Reached):
        gp.run_goodput(_exp(tmp_path, body), tmp_path / "out", jobs=1, duration_s=0.01)
    with pytest.raises(UserError, match="changes no run"):
        gp.run_goodput(_exp(tmp_path, body.replace("requests = 20", "requests = 100")), tmp_path / "out2", jobs=1,
                       duration_s=0.01)


def test_the_progress_bar_counts_each_round_s_runs_and_the_searches_still_open(tmp_path: Path,
                                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """The searches are adaptive, so the bar's total grows by each round's runs: every round starts where the last
    ended, and the last total is the runs the search made."""
    import re

    body = SMALL.replace("seeds = [0]", "seeds = [0, 1]")
    _, doc = gp.run_goodput(_exp(tmp_path, body), tmp_path / "o", jobs=1, progress=True)
    shown = re.findall(r"round (\d+), (\d+) of 3 searches open: +\d+%\|[^|]*\| (\d+)/(\d+)", capsys.readouterr().err)
    starts = {}  # round -> (runs done, total) when it was first shown
    for rnd, _, done, total in shown:
        starts.setdefault(int(rnd), (int(done), int(total)))
    assert sorted(starts) == list(range(1, len(starts) + 1)) and len(starts) > 2
    assert all(starts[r][0] == starts[r - 1][1] for r in range(2, len(starts) + 1))
    assert int(shown[-1][3]) == doc["runs"] and int(shown[0][1]) == 3


def test_a_resumed_search_s_bar_counts_only_the_runs_it_makes(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs read back from an interrupted search are not run again, so they are not in the bar's total: each
    round starts where the last one's total ended, and the last total is the runs this command made."""
    import re

    exp = _exp(tmp_path, SMALL.replace("requests = 120", "requests = 30"))
    real = gp.evaluate
    monkeypatch.setattr(gp, "evaluate", _interrupted_after(3))
    with pytest.raises(KeyboardInterrupt):
        gp.run_goodput(exp, tmp_path / "o", jobs=1)
    monkeypatch.setattr(gp, "evaluate", real)
    monkeypatch.setattr(gp, "write_outputs", lambda out, doc: None)  # the bar is what is read here, not the files
    capsys.readouterr()
    _, doc = gp.run_goodput(exp, tmp_path / "o", jobs=1, progress=True)
    shown = [(int(rnd), int(n or done), int(n or total)) for rnd, n, done, total in re.findall(
        r"round (\d+), \d+ of 2 searches open: (?:: (\d+)run | +\d+%\|[^|]*\| (\d+)/(\d+))", capsys.readouterr().err)]
    starts = {}  # round -> (runs done, total) when it was first shown ("0run": nothing to run, no total)
    for rnd, done, total in shown:
        starts.setdefault(rnd, (done, total))
    assert sorted(starts) == list(range(1, len(starts) + 1)) and starts[1] == (0, 0), starts  # round 1: read back
    assert all(starts[r][0] == starts[r - 1][1] for r in range(2, len(starts) + 1)), starts
    assert shown[-1][2] == doc["runs"] - 3  # the runs this command made
