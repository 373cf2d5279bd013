"""Experiment files: parsing, every kind of error (named by file and key) and grid expansion."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import needs_traces

from llumverify.errors import UserError
from llumverify.study.experiment import load_experiment
from llumverify.study.sweep import expand, tasks

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"

BASE = """
policies = ["round-robin", "least-loaded"]
seeds = [0, 1]
requests = 50
[[workload]]
lengths = "S-S"
rate = 4.0
"""


def write(tmp_path: Path, text: str, name: str = "exp.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def error_of(tmp_path: Path, text: str) -> str:
    with pytest.raises(UserError) as info:
        load_experiment(write(tmp_path, text))
    return str(info.value)


def test_quick_parses() -> None:
    exp = load_experiment(EXPERIMENTS / "quick.toml")
    assert exp.name == "quick"
    assert exp.policies == ("round-robin", "least-loaded")
    assert exp.seeds == (0, 1) and exp.requests == 200
    assert exp.config.cluster.num_instances == 4
    assert dict(exp.grid) == {"rate": (2.0, 3.0)}
    assert len(tasks(exp)) == 2 * 2 * 2


@needs_traces  # comparison.toml replays the Azure trace
@pytest.mark.traces
def test_comparison_parses() -> None:
    exp = load_experiment(EXPERIMENTS / "comparison.toml")
    assert exp.policies == ("round-robin", "least-loaded", "llumnix")


def test_defaults_and_sections(tmp_path: Path) -> None:
    exp = load_experiment(write(tmp_path, BASE + '[engine]\nnum_blocks = 400\n[slo]\nttft_s = 5\n[sim]\nfast = false\n'))
    assert exp.name == "exp"
    assert exp.config.engine.num_blocks == 400
    assert exp.config.slo.ttft_s == 5.0 and isinstance(exp.config.slo.ttft_s, float)
    assert exp.config.fast is False
    assert exp.workloads[0].name == "S-S"


@pytest.mark.parametrize("extra, message", [
    ("[cluster]\nnum_instancez = 4\n", "exp.toml: cluster.num_instancez: unknown key (known: num_instances"),
    ('[cluster]\nnum_instances = "4"\n', "exp.toml: cluster.num_instances: must be a positive integer up to 100,000, got '4'"),
    ("[cluster]\nnum_instances = 0\n", "exp.toml: cluster.num_instances: must be a positive integer up to 100,000, got 0"),
    ("[cost]\ngap_ns = 1.5\n", "exp.toml: cost.gap_ns: must be a non-negative integer up to 60,000,000,000, got 1.5"),
    ('[slo]\nttft_s = "x"\n', "exp.toml: slo.ttft_s: must be a finite number"),
    ("[grid]\nrate = []\n", "exp.toml: grid.rate: empty list"),
    ("[grid]\nrate = 3\n", "exp.toml: grid.rate: a grid setting must be a list"),
    ("[grid]\nspeed = [1]\n", "exp.toml: grid.speed: unknown grid setting"),
    ("[grid]\nrate = [1, 1]\n", "exp.toml: grid.rate: duplicate values"),
    ('[grid]\nrate = ["fast"]\n', "exp.toml: grid.rate[0]: must be a finite number"),
    ("[grid]\ncv = [1, 2]\n", "exp.toml: workload[0].cv: a Poisson process has cv 1"),
    ("[grid.cluster]\nnum_instances = [2, 0]\n", "exp.toml: grid.cluster.num_instances[1]: must be a positive integer"),
    ("[grid.clusterz]\nnum_instances = [2]\n", "exp.toml: grid.clusterz: unknown section"),
    ("[grid.cluster]\nsize = [2]\n", "exp.toml: grid.cluster.size: unknown key"),
    ("[[workload]]\nlengths = \"S\"\n", "exp.toml: workload[1]: a generated workload needs a rate"),
    ("[[workload]]\nlengths = \"S-S\"\nrate = 1.0\n", "exp.toml: workload[1].name: duplicate workload name 'S-S'"),
    ("[[workload]]\nname = \"b\"\nlengths = \"Q-Q\"\nrate = 1.0\n", "exp.toml: workload[1].lengths: must be one of sharegpt, burstgpt"),
    ("[[workload]]\nname = \"b\"\nrate = 1.0\n", "exp.toml: workload[1]: give exactly one of lengths"),
    ("[[workload]]\nname = \"b\"\nlengths = \"S\"\nrate = -1.0\n", "exp.toml: workload[1].rate: must be a finite number > 0"),
    ("[[workload]]\nname = \"b\"\nlengths = \"S\"\nrate = 1.0\ncolour = 2\n", "exp.toml: workload[1].colour: unknown key"),
    ("[[workload]]\nname = \"b\"\nlengths = \"S\"\nrate = 1.0\ngrid.clusterz = {num_instances = [1]}\n",
     "exp.toml: workload[1].grid.clusterz: unknown section"),
    ("[[workload]]\nname = \"b\"\nlengths = \"S\"\nrate = 1.0\ncluster.num_instances = 0\n",
     "exp.toml: workload[1].cluster.num_instances: must be a positive integer"),
    ("[[workload]]\nname = \"b\"\nlengths = \"S\"\nrate = 1.0\ncluster.size = 2\n",
     "exp.toml: workload[1].cluster.size: unknown key"),
    ("[[workload]]\nname = \"b\"\nlengths = \"S\"\nrate = 1.0\ncluster.num_instances = 2\n"
     "[grid.cluster]\nnum_instances = [3]\n", "exp.toml: workload[1]: cluster.num_instances: also swept by the top-level"),
    # set and swept in one table: the grid would silently replace the set value
    ("[[workload]]\nname = \"b\"\nlengths = \"S\"\nrate = 1.0\nscheduler.migrate_threshold = 7.0\n"
     "grid.scheduler.migrate_threshold = [1.0, 2.0]\n", "exp.toml: workload[1].scheduler.migrate_threshold: set to 7.0 "
     "and swept by workload[1].grid.scheduler.migrate_threshold (set it or sweep it, not both)"),
    ("[[workload]]\nname = \"b\"\nlengths = \"S\"\nrate = 1.0\ngrid.rate = [2.0, 3.0]\n",
     "exp.toml: workload[1].rate: set to 1.0 and swept by workload[1].grid.rate"),
    ("[scheduler]\nmigrate_threshold = 7.0\n[grid.scheduler]\nmigrate_threshold = [1.0, 2.0]\n",
     "exp.toml: scheduler.migrate_threshold: set to 7.0 and swept by grid.scheduler.migrate_threshold"),
    ("[[workload]]\nname = \"b\"\ntrace = \"nowhere.csv\"\n", "exp.toml: workload[1].trace: trace file not found"),
    ("[[workload]]\nname = \"b\"\ntrace = \"${HOME}/x.csv\"\n", "exp.toml: workload[1].trace: unknown variable"),
])
def test_errors_name_file_and_key(tmp_path: Path, extra: str, message: str) -> None:
    # sections must come after the top-level keys in TOML, so errors are appended to BASE
    assert message in error_of(tmp_path, BASE + extra)


@pytest.mark.parametrize("text, message", [
    ('policies = ["fastest"]\n[[workload]]\nlengths = "S"\nrate = 1.0\n', "exp.toml: policies[0]: unknown policy 'fastest'"),
    ('seeds = [-1]\n[[workload]]\nlengths = "S"\nrate = 1.0\n', "exp.toml: seeds[0]: must be a non-negative integer"),
    ('seeds = []\n[[workload]]\nlengths = "S"\nrate = 1.0\n', "exp.toml: seeds: must be a non-empty list"),
    ('requests = 2.5\n[[workload]]\nlengths = "S"\nrate = 1.0\n', "exp.toml: requests: must be a positive integer"),
    ('name = 3\n[[workload]]\nlengths = "S"\nrate = 1.0\n', "exp.toml: name: must be a str"),
    ('timeseries = "some"\n[[workload]]\nlengths = "S"\nrate = 1.0\n', "exp.toml: timeseries: must be one of"),
    ('requests = 10\n', "exp.toml: workload: missing"),
    ('colour = 1\n[[workload]]\nlengths = "S"\nrate = 1.0\n', "exp.toml: colour: unknown key"),
    ('requests = [\n', "exp.toml: invalid TOML"),
])
def test_top_level_errors(tmp_path: Path, text: str, message: str) -> None:
    assert message in error_of(tmp_path, text)


def test_missing_experiment_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="nope.toml: experiment file not found"):
        load_experiment(tmp_path / "nope.toml")


def test_trace_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = "arrival_s,prompt_tokens,output_tokens\n0.0,10,5\n0.5,20,3\n"
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "t.csv").write_text(trace)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "s.csv").write_text(trace)
    monkeypatch.setenv("LLUMVERIFY_TRACES", str(shared))
    exp = load_experiment(write(tmp_path, BASE + '[[workload]]\ntrace = "sub/t.csv"\n'
                                "[[workload]]\ntrace = \"${TRACES}/s.csv\"\nname = \"shared\"\n"))
    local, shared_wl = exp.workloads[1:]
    assert local.name == "t" and local.trace_path == tmp_path / "sub" / "t.csv"
    assert shared_wl.trace == "${TRACES}/s.csv" and shared_wl.trace_path == shared / "s.csv"
    assert "lengths over it" in error_of(tmp_path, BASE + '[[workload]]\ntrace = "sub/t.csv"\ngrid.lengths = ["S"]\n')
    assert "applies only to generated" in error_of(tmp_path, BASE + '[[workload]]\ntrace = "sub/t.csv"\nhigh_priority_frac = 0.1\n')
    assert "rate_scale: applies only to traces" in error_of(tmp_path, BASE + "[grid]\nrate_scale = [2.0]\n")


def test_grid_expansion(tmp_path: Path) -> None:
    exp = load_experiment(write(tmp_path, BASE.replace('rate = 4.0', 'arrival = "gamma"\nrate = 4.0\ngrid.cv = [1, 2]')
                                + '[[workload]]\nname = "m"\nlengths = "M"\nrate = 2.0\nseeds = [7]\n'
                                + "[grid]\nrequests = [20, 30]\n[grid.cluster]\nnum_instances = [2, 3]\n"))
    points = expand(exp)
    assert len(points) == 2 * 2 * 2 + 2 * 2
    first = points[0]
    assert first.settings == (("cv", 1.0), ("requests", 20), ("cluster.num_instances", 2))
    assert first.workload.cv == 1.0 and first.workload.requests == 20
    assert first.config.cluster.num_instances == 2
    assert [p.index for p in points[:3]] == [(0, 0, 0, 0), (0, 0, 0, 1), (0, 0, 1, 0)]
    assert points[-1].workload.name == "m" and points[-1].seeds == (7,)
    assert points[-1].config.cluster.num_instances == 3
    todo = tasks(exp)
    assert len(todo) == 8 * 2 * 2 + 4 * 2 * 1
    assert [t.key for t in todo] == sorted(t.key for t in todo)
    assert "also swept by the top-level" in error_of(
        tmp_path, BASE.replace('rate = 4.0', 'grid.rate = [1.0]') + "[grid]\nrate = [2.0]\n")


def test_workload_config_overrides(tmp_path: Path) -> None:
    exp = load_experiment(write(tmp_path, BASE + '[[workload]]\nname = "big"\nlengths = "M"\nrate = 2.0\n'
                                "cluster.num_instances = 3\ngrid.engine.num_blocks = [100, 200]\n"))
    small, *big = expand(exp)
    assert small.config.cluster.num_instances == 16
    assert [(p.config.cluster.num_instances, p.config.engine.num_blocks) for p in big] == [(3, 100), (3, 200)]
    assert exp.describe()["workloads"][1]["config"] == {"cluster.num_instances": 3}


def test_list_settings_become_tuples(tmp_path: Path) -> None:
    from llumverify.settings.config import SimConfig

    if not hasattr(SimConfig(), "failures"):
        pytest.skip("no tuple-valued config setting yet (FailureConfig.at)")
    exp = load_experiment(write(tmp_path, BASE + "[failures]\nat = [[0, 30.0]]\n"))
    assert exp.config.failures.at == ((0, 30.0),)


@pytest.mark.parametrize("finding, message", [
    ("{ratio[ttft_p99][round-robin/least-loaded]}", "finding: {ratio[ttft_p99][round-robin/least-loaded]}: "
                                                     "unknown metric 'ttft_p99'"),
    ("{ratio[kv_util_mean][round-robin/least-loaded]}", "ratios compare ttft_mean_s"),
    ("{at[S-S][4.0][round-robin][fragmentation_pct]}", "unknown metric 'fragmentation_pct'"),
    ("{at[T-T][4.0][round-robin][fragmentation]}", "no workload 'T-T'"),
    ("{wratio[S-S][ttft_p99_s][round-robin/llumnix]}", "'llumnix' is not in policies"),
    ("{ratios[ttft_p99_s][round-robin/least-loaded]}", "expected one of ratio[METRIC][A/B]"),
    ("{ratio[ttft_p99_s]}", "expected one of"),
    ("{ratio[ttft_p99_s][a/b]", "not a format template"),
])
def test_finding_templates_name_registered_metrics(tmp_path: Path, finding: str, message: str) -> None:
    text = f"finding = {finding!r}\n" + BASE
    assert message in error_of(tmp_path, text)
    good = "{ratio[ttft_p99_s][round-robin/least-loaded]:.1f} {at[S-S][4.0][least-loaded][slo_violation_rate_high]}"
    assert load_experiment(write(tmp_path, f"finding = {good!r}\n" + BASE)).finding == good


def test_a_step_cost_source_implies_the_v1_engine_and_gpus_sweep_for_a_set_model(tmp_path: Path) -> None:
    """Hardware step costs need vllm-v1; without an engine chosen anywhere the file gets it, as simulate's
    options do. A model set at the top with its GPUs swept is checked point by point, not half-set."""
    exp = load_experiment(write(tmp_path, BASE + '[hardware]\nmodel = "Llama-3.1-8B"\n'
                                "[workload.grid.hardware]\ngpu = [\"H100\", \"A100-80GB\"]\n"))
    points = {(t.point.config.engine.generation, t.point.config.hardware.gpu) for t in tasks(exp)}
    assert points == {("vllm-v1", "H100"), ("vllm-v1", "A100-80GB")}
    assert load_experiment(write(tmp_path, BASE)).config.engine.generation == "vllm-0.2"
    chosen = BASE + '[engine]\ngeneration = "vllm-0.2"\n[hardware]\ngpu = "H100"\nmodel = "Llama-3.1-8B"\n'
    assert "engine.generation: must be vllm-v1 for hardware settings" in error_of(tmp_path, chosen)
    testbed = 'profile = "testbed"\n' + BASE + '[hardware]\ngpu = "H100"\nmodel = "Llama-3.1-8B"\n'
    assert "profile: 'testbed' is a vllm-0.2 setup (the paper's testbed): it does not go with hardware step costs" \
        in error_of(tmp_path, testbed)


def test_the_implied_engine_and_the_testbed_refusal_apply_where_the_hardware_does(tmp_path: Path) -> None:
    """One workload on the paper's testbed, one on an H100: each keeps its own engine."""
    two = ('requests = 20\n[[workload]]\nname = "paper"\nlengths = "S"\nrate = 2.0\nprofile = "testbed"\n'
           '[[workload]]\nname = "h100"\nlengths = "S"\nrate = 2.0\n'
           '[workload.hardware]\ngpu = "H100"\nmodel = "Llama-3.1-8B"\n')
    exp = load_experiment(write(tmp_path, two))
    assert {(t.point.workload.name, t.point.config.engine.generation) for t in tasks(exp)} == {
        ("paper", "vllm-0.2"), ("h100", "vllm-v1")}
    gridded = BASE.replace("rate = 4.0", "[workload.grid]\nrate = [1.0, 2.0]") + '[cluster]\npd = "3:3"\n'
    assert error_of(tmp_path, gridded).endswith("exp.toml: ClusterConfig.pd 3:3 needs 6 instances, num_instances is 16")
    own = BASE.replace("rate = 4.0", "rate = 4.0\n[workload.slo]\nttft_s = 2.0") + \
        '[cost]\ndecode_ns = 5\n[hardware]\ngpu = "H100"\nmodel = "Llama-3.1-8B"\n'
    assert "exp.toml: cost.decode_ns: times steps by the paper's A10 fit" in error_of(tmp_path, own)  # not workload[0]'s
    exp = load_experiment(write(tmp_path, BASE + '[hardware]\ngpu = "H100"\nmodel = "Llama-3.1-8B"\n'))
    assert exp.config.engine.generation == "vllm-v1"  # hardware for every workload: the engine is recorded at the top


def test_the_workload_name_and_hardware_rules_refuse_only_what_they_say(tmp_path: Path) -> None:
    """Review of session 45: a repeating timer of exactly 0.1 ms, a seed of 2^64 - 1 are taken; names differing in
    case alone (one plot file on a case-insensitive file system), a name past 200 bytes in UTF-8 (under 200
    characters) and a swept model given by its name and its HF id are refused."""
    one = BASE.replace("lengths", 'name = "w"\nlengths')
    exp = load_experiment(write(tmp_path, "seeds = [18446744073709551615]\n" + one.replace("seeds = [0, 1]\n", "")
                                + "[cluster]\nreport_interval_s = 0.0001\n[sim]\nsample_interval_s = 1e-4\n"))
    assert exp.seeds == (2**64 - 1,) and exp.config.cluster.report_interval_s == 1e-4
    assert exp.config.sample_interval_s == 1e-4
    two = BASE.replace("lengths", 'name = "Chat"\nlengths') + '[[workload]]\nname = "chat"\nlengths = "S"\nrate = 1.0\n'
    assert "workload[1].name: 'chat' and 'Chat' would share the report's plot files" in error_of(tmp_path, two)
    wide = BASE.replace("lengths", f'name = "{"é" * 101}"\nlengths')  # 101 characters, 202 bytes
    assert "workload[0].name: must be a name on one line without surrounding spaces, at most 200 bytes" \
        in error_of(tmp_path, wide)
    models = (BASE + '[hardware]\ngpu = "H100"\n'
              '[grid.hardware]\nmodel = ["Llama-3.1-8B", "meta-llama/Llama-3.1-8B-Instruct"]\n')
    assert "grid.hardware.model: 'Llama-3.1-8B' and 'meta-llama/Llama-3.1-8B-Instruct' are one model" \
        in error_of(tmp_path, models)
