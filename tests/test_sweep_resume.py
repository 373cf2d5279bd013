"""A sweep interrupted mid-way (Ctrl-C or kill -9) resumes: only the missing runs run, and the
results are byte-identical to an uninterrupted sweep's. A changed experiment is refused, saying why.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from llumverify.study import sweep as sweep_module
from llumverify.errors import UserError
from llumverify.study.sweep import run_experiment

RESUME = Path(__file__).resolve().parent / "resume.toml"  # 8 runs of a few tenths of a second each
RUNS = 8


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_experiment(RESUME, tmp_path_factory.mktemp("uninterrupted") / "out", jobs=1, progress=False)


def _sweep(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "llumverify.cli", "sweep", str(RESUME), "--out", str(out), *extra]


def _saved(out: Path) -> dict[str, float]:
    """label -> wall time of every run saved in the checkpoint."""
    return {doc["label"]: doc["wall_s"]
            for doc in (json.loads(p.read_text()) for p in sorted((out / "points").glob("*.json")))}


def _interrupt(out: Path, sig: signal.Signals, err_file: Path) -> int:
    """Start the sweep in its own process group, send `sig` once 2 runs are saved; wait until every
    process of the group (the workers too) is gone. Returns the sweep's exit status."""
    with open(err_file, "w") as err:
        proc = subprocess.Popen(_sweep(out, "--jobs", "2", "--quiet"), stdout=subprocess.DEVNULL, stderr=err,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while len(list((out / "points").glob("*.json"))) < 2:  # (an empty glob until the folder exists)
            assert proc.poll() is None, "the sweep ended before it could be interrupted"
            assert time.monotonic() < deadline, "no run was saved in 300 s"
            time.sleep(0.01)
        assert proc.poll() is None, "the sweep ended before it could be interrupted"
        proc.send_signal(sig)
        code = proc.wait(timeout=120)
        deadline = time.monotonic() + 60  # orphaned workers of a killed sweep must exit by themselves
        while time.monotonic() < deadline:
            try:
                os.killpg(proc.pid, 0)
            except ProcessLookupError:
                return code
            time.sleep(0.1)
        raise AssertionError("the sweep's workers outlived it by 60 s")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # only if the test failed with our processes still up
        except ProcessLookupError:
            pass


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["SIGINT", "SIGKILL"])
def test_an_interrupted_sweep_resumes_with_only_the_missing_runs(sig: signal.Signals, uninterrupted: Path,
                                                                 tmp_path: Path) -> None:
    out = tmp_path / "out"
    code = _interrupt(out, sig, tmp_path / "stderr")
    err = (tmp_path / "stderr").read_text()
    if sig == signal.SIGINT:
        assert code == 130 and err.count("\n") == 1 and "run the same command to resume" in err, err
        assert not list((out / "points").glob(".*.tmp"))  # Ctrl-C leaves no half-written point
    else:
        assert code == -signal.SIGKILL
    saved = _saved(out)
    assert 2 <= len(saved) < RUNS and not (out / "results.csv").exists()

    resumed = subprocess.run(_sweep(out, "--jobs", "2"), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming {out}: {len(saved)} of {RUNS} runs already done" in resumed.stderr
    runs = {r["label"]: r["wall_s"] for r in json.loads((out / "timing.json").read_text())["runs"]}
    assert len(runs) == RUNS
    assert {label: runs[label] for label in saved} == saved  # the saved runs were not run again
    for name in ("results.csv", "results.json"):
        assert (out / name).read_bytes() == (uninterrupted / name).read_bytes(), name
    assert sorted(p.name for p in out.iterdir()) == ["results.csv", "results.json", "timing.json"]


def _interrupt_after(monkeypatch: pytest.MonkeyPatch, runs: int) -> None:
    """In-process: the (runs + 1)-th run raises KeyboardInterrupt, as Ctrl-C would."""
    real, count = sweep_module.run_task, [0]

    def run_task(task: sweep_module.Task) -> sweep_module.TaskResult:
        count[0] += 1
        if count[0] > runs:
            raise KeyboardInterrupt
        return real(task)

    monkeypatch.setattr(sweep_module, "run_task", run_task)


@pytest.mark.slow
def test_resume_in_process_runs_exactly_the_missing_tasks(monkeypatch: pytest.MonkeyPatch, uninterrupted: Path,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        _interrupt_after(m, 3)
        with pytest.raises(KeyboardInterrupt):
            run_experiment(RESUME, out, jobs=1, progress=False)
    first = set(_saved(out))
    assert len(first) == 3
    ran: list[str] = []
    real = sweep_module.run_task
    monkeypatch.setattr(sweep_module, "run_task", lambda task: (ran.append(task.label), real(task))[1])
    run_experiment(RESUME, out, jobs=1, progress=False)
    assert len(ran) == RUNS - 3 and not first & set(ran)
    for name in ("results.csv", "results.json"):
        assert (out / name).read_bytes() == (uninterrupted / name).read_bytes(), name


def test_a_changed_experiment_is_refused_and_force_starts_over(monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "out"
    changed = tmp_path / "resume.toml"
    changed.write_text(RESUME.read_text().replace("seeds = [0, 1]", "seeds = [0, 2]"))
    with monkeypatch.context() as m:
        _interrupt_after(m, 1)
        with pytest.raises(KeyboardInterrupt):
            run_experiment(RESUME, out, jobs=1, progress=False)
    with pytest.raises(UserError, match=r"holds a partial sweep of a different experiment \(seeds changed since "
                                         r"it started\); use --force to discard its 1 finished runs"):
        run_experiment(changed, out, jobs=1, progress=False)
    with monkeypatch.context() as m:
        _interrupt_after(m, 0)  # --force wipes the other experiment's point before running anything
        with pytest.raises(KeyboardInterrupt):
            run_experiment(changed, out, jobs=1, progress=False, force=True)
    assert _saved(out) == {}


@pytest.mark.slow  # over 1.5 s: the fast tier stays within its CPU budget
def test_a_finished_folder_needs_force_and_a_damaged_point_is_named(uninterrupted: Path, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    done = tmp_path / "done"
    shutil.copytree(uninterrupted, done)
    with pytest.raises(UserError, match="folder is not empty"):
        run_experiment(RESUME, done, jobs=1, progress=False)
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        _interrupt_after(m, 2)
        with pytest.raises(KeyboardInterrupt):
            run_experiment(RESUME, out, jobs=1, progress=False)
    point = sorted((out / "points").glob("*.json"))[0]
    point.write_text("{")
    with pytest.raises(UserError, match=f"{point}: damaged point file .*delete it"):
        run_experiment(RESUME, out, jobs=1, progress=False)


@pytest.mark.slow
def test_a_second_sweep_on_a_folder_in_use_is_refused_and_a_stale_lock_is_taken_over(
        monkeypatch: pytest.MonkeyPatch, uninterrupted: Path, tmp_path: Path) -> None:
    """Two sweeps into one folder would tidy away each other's files (seen: a resumed sweep's point
    written into the folder the first had just closed): the second is refused before any work,
    naming the first's pid; the lock of a sweep that was killed does not block the resume."""
    out = tmp_path / "out"
    with monkeypatch.context() as m:
        _interrupt_after(m, 2)
        with pytest.raises(KeyboardInterrupt):
            run_experiment(RESUME, out, jobs=1, progress=False)
    (out / "lock").write_text("999999999\n")  # the lock file of a sweep that was killed
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from pathlib import Path; "
                               "from llumverify.files.outdir import take_lock; take_lock(Path(sys.argv[1]), '--out'); "
                               "print(flush=True); time.sleep(60)", str(out)], stdout=subprocess.PIPE)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == b"\n"  # it holds the lock now
        before = sorted(p.name for p in (out / "points").iterdir())
        with pytest.raises(UserError, match=rf"another llumverify \(pid {holder.pid}\) is writing there"):
            run_experiment(RESUME, out, jobs=1, progress=False)
        with pytest.raises(UserError, match="another llumverify"):  # --force does not break a live lock either
            run_experiment(RESUME, out, jobs=1, progress=False, force=True)
        assert sorted(p.name for p in (out / "points").iterdir()) == before
    finally:
        holder.kill()
        holder.wait()
    run_experiment(RESUME, out, jobs=1, progress=False)  # its holder is gone: a stale lock
    for name in ("results.csv", "results.json"):
        assert (out / name).read_bytes() == (uninterrupted / name).read_bytes(), name
    assert not (out / "lock").exists()


TINY = """name = "tiny"
policies = ["round-robin"]
seeds = [0, 1]
requests = 20
timeseries = "all"
[cluster]
num_instances = 2
[[workload]]
name = "t"
lengths = "S"
rate = 5.0
"""


@pytest.fixture(scope="module")
def tiny_partial(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A tiny experiment (2 runs of 20 requests) and a folder holding its first run only."""
    folder = tmp_path_factory.mktemp("tiny")
    exp, out = folder / "tiny.toml", folder / "out"
    exp.write_text(TINY)
    with pytest.MonkeyPatch.context() as m:
        _interrupt_after(m, 1)
        with pytest.raises(KeyboardInterrupt):
            run_experiment(exp, out, jobs=1, progress=False)
    assert len(list((out / "points").glob("*.json"))) == 1
    return exp, out


@pytest.mark.parametrize("damage, problem", [
    ({"summary": None}, "summary must be an object, got NoneType"),
    ({"summary": {}}, "summary: summary lacks the metric 'requests'"),
    ({"summary": {"bogus_metric": 1.0}}, "summary: unknown metric 'bogus_metric'"),
    ({"summary": {"finished": "many"}}, "summary.finished has the wrong type (str 'many')"),
    ({"wall_s": "fast"}, "wall_s has the wrong type (str 'fast')"),
    ({"timeseries": 5}, "timeseries has the wrong type (int 5)"),
    ({"timeseries": {"t_s": "x"}}, "timeseries.t_s must be a list, got str"),
    ({"label": None}, "label has the wrong type"),
    ({"key": [9, 9, 9]}, "key [9, 9, 9] is not this run's [0, 0, 0]"),
    ({"wall_s": -1.0}, "wall_s must be a finite number of seconds >= 0, got -1.0"),
], ids=["summary_null", "summary_empty", "unknown_metric", "metric_str", "wall_str", "timeseries_int",
        "series_str", "label_null", "key_mismatch", "wall_negative"])
def test_a_damaged_saved_run_is_refused_naming_its_file_and_field(tiny_partial: tuple[Path, Path], tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  damage: dict, problem: str) -> None:
    """A saved run that is not what `save` writes is refused before any run and before the folder is
    touched, naming the file and the field (it was a crash, or silently tabulated garbage)."""
    exp, partial = tiny_partial
    out = tmp_path / "out"
    shutil.copytree(partial, out)
    point = next((out / "points").glob("*.json"))
    doc = json.loads(point.read_text())
    for key, value in damage.items():
        doc[key] = {**doc[key], **value} if isinstance(value, dict) and value else value
    point.write_text(json.dumps(doc))
    before = {p: p.read_bytes() for p in out.rglob("*") if p.is_file()}
    monkeypatch.setattr(sweep_module, "run_task", lambda task: pytest.fail(f"ran {task.label}"))
    with pytest.raises(UserError) as info:
        run_experiment(exp, out, jobs=1, progress=False)
    message = str(info.value)
    assert message.startswith(f"{point}: damaged point file ({problem}"), message
    assert message.endswith("); delete it and run the same command to redo that run") and "\n" not in message
    assert {p: p.read_bytes() for p in out.rglob("*") if p.is_file()} == before  # refused before touching it


def test_a_saved_run_with_crashed_requests_is_resumed(tiny_partial: tuple[Path, Path], tmp_path: Path) -> None:
    """A run whose crashes failed some requests is a run: finished + rejected + failed is its requests."""
    exp, partial = tiny_partial
    out = tmp_path / "out"
    shutil.copytree(partial, out)
    point = next((out / "points").glob("*.json"))
    doc = json.loads(point.read_text())
    doc["summary"].update(finished=doc["summary"]["requests"] - 3, rejected=1, failed=2)
    point.write_text(json.dumps(doc))
    run_experiment(exp, out, jobs=1, progress=False)
    assert json.loads((out / "results.json").read_text())


GPU_FILE = """name = "My-H100"
flops = 989.4e12
arch = "sm_90"
mem_bw = 3.35e12
memory_bytes = 85899345920
memory_type = "HBM3"
interconnect = "NVLink4"
"""


def test_a_gpu_file_changed_since_the_sweep_started_is_refused(monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    """A hardware setting that names a file (a GPU file here; a model's config.json, a profile or a step-cost
    file alike) is in the fingerprint by its contents, as a trace is: a sweep resumed after the file changed
    mixed runs priced from both versions (TPOT 8 ms in the saved runs, 480 ms in the new ones), silently."""
    monkeypatch.chdir(tmp_path)  # hardware paths are relative to the working directory
    gpu, exp, out = Path("gpu.toml"), Path("exp.toml"), Path("out")
    gpu.write_text(GPU_FILE)
    exp.write_text(TINY + '[hardware]\ngpu = "gpu.toml"\nmodel = "Llama-3.1-8B"\n')
    with monkeypatch.context() as m:
        _interrupt_after(m, 1)
        with pytest.raises(KeyboardInterrupt):
            run_experiment(exp, out, jobs=1, progress=False)
    gpu.write_text(GPU_FILE.replace("989.4e12", "100e12"))
    with pytest.raises(UserError, match=r"holds a partial sweep of a different experiment \(the files of "
                                         r"hardware\.gpu=gpu\.toml changed since it started\)"):
        run_experiment(exp, out, jobs=1, progress=False)
    gpu.write_text(GPU_FILE)  # the same file again: the saved run is used, only the missing one runs
    ran: list[str] = []
    real = sweep_module.run_task
    monkeypatch.setattr(sweep_module, "run_task", lambda task: (ran.append(task.label), real(task))[1])
    run_experiment(exp, out, jobs=1, progress=False)
    assert len(ran) == 1


@pytest.mark.parametrize("where, changed", [
    ('[workload.hardware]\ngpu = "gpu.toml"\nmodel = "Llama-3.1-8B"\n', "gpu.toml"),  # a workload's own setting
    ('[grid.hardware]\ngpu = ["gpu.toml", "H100"]\n[hardware]\nmodel = "Llama-3.1-8B"\n', "gpu.toml"),  # a swept one
    ('[hardware]\ngpu = "H100"\nmodel = "./m"\n', "m/quantize_config.json"),  # a checkpoint's quantisation file
    ('[hardware]\nprofile = "p"\n', "p/tp1/dense.csv"),  # a profile's kernel table
    ('[hardware]\ncost_file = "c.toml"\n', "gpu.toml"),  # the GPU file a step-cost file names
], ids=["workload", "grid", "model-side-file", "profile-csv", "cost-file-s-gpu"])
def test_the_fingerprint_holds_every_file_a_hardware_setting_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                   where: str, changed: str) -> None:
    """Review of session 45: wherever the setting is given, and whichever of its files changes, the fingerprint
    (so a resumed sweep) sees it."""
    from llumverify.study.checkpoint import fingerprint
    from llumverify.study.experiment import load_experiment

    monkeypatch.chdir(tmp_path)
    Path("gpu.toml").write_text(GPU_FILE)
    Path("m").mkdir()
    Path("m/config.json").write_text((Path(__file__).parent / "hf_configs" / "llama-3.1-8b-instruct" / "config.json")
                                     .read_text())
    Path("m/quantize_config.json").write_text('{"bits": 4}')
    Path("p/tp1").mkdir(parents=True)
    Path("p/meta.yaml").write_text("model: Llama-3.1-8B\n")
    Path("p/tp1/dense.csv").write_text("tokens,ns\n1,100\n")
    Path("c.toml").write_text('fixed_ns = 1\nlinear = [[1, 1]]\nper_seq = [[1, 1]]\ngpu = "gpu.toml"\n')
    Path("exp.toml").write_text(TINY + where)
    before = fingerprint(load_experiment("exp.toml"))
    assert fingerprint(load_experiment("exp.toml")) == before
    Path(changed).write_text(Path(changed).read_text() + "\n")
    assert fingerprint(load_experiment("exp.toml")) != before


@pytest.mark.timeout(60)  # a FIFO read whole blocked for ever
@pytest.mark.parametrize("setting", ['gpu = "fifo.toml"\nmodel = "Llama-3.1-8B"', 'cost_file = "missing.toml"'],
                         ids=["gpu-fifo", "cost-file-missing"])
def test_a_hardware_file_the_runs_refuse_is_refused_by_them_not_by_the_fingerprint(monkeypatch: pytest.MonkeyPatch,
                                                                                  tmp_path: Path, setting: str) -> None:
    """Review of session 45: the fingerprint read a GPU file that is a FIFO until a writer came (a sweep that hung
    before any check; a device such as /dev/zero filled the memory), and a step-cost file that does not load was
    refused by the fingerprint, without the experiment file and workload the runs' checks name."""
    monkeypatch.chdir(tmp_path)
    os.mkfifo("fifo.toml")
    Path("exp.toml").write_text(TINY + f"[hardware]\n{setting}\n")
    with pytest.raises(UserError, match=r"^exp\.toml: workload 't' \[\]: .*(is a FIFO|step-cost file not found)"):
        run_experiment(Path("exp.toml"), Path("out"), jobs=1, progress=False)


def test_a_sweep_started_before_hardware_files_were_recorded_is_not_said_to_have_changed(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Review of session 45: a manifest written before session 45 holds no `files`; resuming its sweep was refused
    saying the GPU file "changed since it started", which nothing knew. It is still refused, saying why."""
    from llumverify.study import checkpoint

    monkeypatch.chdir(tmp_path)
    Path("gpu.toml").write_text(GPU_FILE)
    Path("exp.toml").write_text(TINY + '[hardware]\ngpu = "gpu.toml"\nmodel = "Llama-3.1-8B"\n')
    with monkeypatch.context() as m:
        m.setattr(checkpoint, "hardware_files", lambda exp: {})  # the fingerprint as session 44 computed it
        _interrupt_after(m, 1)
        with pytest.raises(KeyboardInterrupt):
            run_experiment(Path("exp.toml"), Path("out"), jobs=1, progress=False)
    with pytest.raises(UserError, match=r"started by an older llumverify, which did not record the files its hardware "
                                         r"settings name \(hardware\.gpu=gpu\.toml\): whether they changed since is "
                                         r"unknown"):
        run_experiment(Path("exp.toml"), Path("out"), jobs=1, progress=False)
