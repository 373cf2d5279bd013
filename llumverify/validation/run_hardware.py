"""What a real run says about its hardware, and the step-cost source that must match it.

A vLLM run's meta.json names its model (`model`), its tensor- and data-parallel degrees
(`engine_kwargs.tensor_parallel_size`, `data_parallel_size`, `enable_expert_parallel`), usually its GPU (`hardware.device_name`, as
torch.cuda.get_device_name prints it) and its memory share (`gpu_memory_utilization`), and,
when the harness recorded it, the KV cache vLLM allocated (`kv_cache.num_gpu_blocks`). validate
and calibrate use these to (1) refuse step costs measured on another GPU, model or TP degree than
the run's, (2) simulate with the run's TP, and (3) size the KV cache from the catalogs
(memory × gpu_memory_utilization − weights − reserve, sim/roofline.py `kv_capacity_blocks`) when
the run did not record it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from llumverify.sim import engine_profile
from llumverify.settings.config import HardwareConfig
from llumverify.errors import UserError
from llumverify.files.inputs import exact_int
from llumverify.validation.attention_backend import AttentionRecord, attention_record, replayed_backend
from llumverify.validation.cudagraphs import replayed_mode
from llumverify.validation.run_engine import (block_size, check_sections, data_parallel, dig, lookup,
                                              refuse_unmodelled, served_formats)

VLLM_DEFAULT_UTILIZATION = 0.9  # vLLM's EngineArgs.gpu_memory_utilization default


@dataclass(frozen=True)
class RunHardware:
    """The run's model, GPU label (may be empty or not in the catalog), TP and memory share."""

    model: str
    gpu: str
    tp: int
    gpu_memory_utilization: float
    recorded_blocks: int | None
    quantization: str = ""  # "" or the weights' format: "fp8", "int4", "nvfp4" (run_engine.served_formats)
    kv_cache_dtype: str = "auto"
    dp: int = 1  # data-parallel ranks (engines), each with its own scheduler and KV cache
    expert_parallel: bool = False
    block_size: int = 16  # vLLM's default block on CUDA
    kv_tokens: int | None = None  # the KV cache in tokens, as vLLM logs it ("GPU KV cache size: N tokens")
    kv_memory: int | None = None  # kv_cache_memory_bytes: vLLM's KV budget per GPU, instead of memory x utilization
    memory: int = 0  # device_total_memory_bytes as the run recorded it (0: not recorded)
    where: str = ""  # the file it was read from, for the messages
    cudagraph_mode: str = "full_and_piecewise"  # HardwareConfig.cudagraph_mode: which steps replayed a CUDA graph
    attention: AttentionRecord = AttentionRecord()  # what it records of its attention kernels


def run_hardware(meta: dict, where: str) -> RunHardware:
    """The hardware fields of a run's meta.json (missing ones empty or vLLM's defaults), read where
    run_engine.lookup reads them, so validate's KV line and its engine agree."""
    check_sections(meta, where)
    refuse_unmodelled(meta, where)
    graphs = replayed_mode(meta, where)
    model = dig(meta, ("model",)) or dig(meta, ("engine_kwargs", "model")) or ""
    gpu = dig(meta, ("hardware", "device_name")) or ""
    tp = lookup(meta, "tensor_parallel_size")[0]
    tp = 1 if tp is None else tp
    util = lookup(meta, "gpu_memory_utilization")[0]
    util = VLLM_DEFAULT_UTILIZATION if util is None else util
    blocks, blocks_place = lookup(meta, "num_gpu_blocks")
    if not isinstance(model, str) or not isinstance(gpu, str):
        raise UserError(f"{where}: model and hardware.device_name must be strings")
    argument = dig(meta, ("engine_kwargs", "model"))
    if isinstance(argument, str) and argument and model != argument and _known(model) and _known(argument):
        from llumverify.sim.catalog import same_model  # a served name and a path may differ, their model may not

        if not same_model(model, argument):
            raise UserError(f"{where}: model {model} but engine_kwargs.model {argument}: two different models; the "
                            "run's own records disagree")
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise UserError(f"{where}: tensor_parallel_size must be an integer >= 1, got {tp!r}")
    if isinstance(util, bool) or not isinstance(util, (int, float)) or not 0 < util <= 1:
        raise UserError(f"{where}: gpu_memory_utilization must be in (0, 1], got {util!r}")
    if blocks is not None:  # as run_engine.engine_settings reads it: exactly, so both say the same
        blocks = exact_int(blocks, f"{where}: {blocks_place}", lo=1, hi=1 << 31)
    weights, kv = served_formats(meta, where)
    block = block_size(meta, where)
    tokens = dig(meta, ("kv_cache", "num_kv_tokens"))
    tokens = None if tokens is None else exact_int(tokens, f"{where}: kv_cache.num_kv_tokens", lo=block,
                                                    hi=block << 31)  # as many blocks as num_gpu_blocks may say
    if tokens is not None and blocks is not None and tokens // block != blocks:
        raise UserError(f"{where}: kv_cache.num_kv_tokens {tokens} is not {blocks_place} {blocks} x block size {block}")
    kv_memory, place = lookup(meta, "kv_cache_memory_bytes")
    kv_memory = None if kv_memory is None else exact_int(kv_memory, f"{where}: {place}", lo=1, hi=1 << 50)
    memory = dig(meta, ("hardware", "device_total_memory_bytes"))
    if isinstance(memory, float) and memory.is_integer():  # a count written as 85899345920.0 is still a count
        memory = int(memory)
    memory = 0 if memory is None else exact_int(memory, f"{where}: hardware.device_total_memory_bytes", lo=0,
                                                 hi=(1 << 50) - 1)  # 0: vLLM's own "unknown"; "24GB" is no count
    if 0 < memory < 1 << 30:
        raise UserError(f"{where}: hardware.device_total_memory_bytes {memory}: under 1 GiB, not a GPU's memory in bytes")
    if " MIG " in f" {gpu} ":
        raise UserError(f"{where}: hardware.device_name {gpu!r}: a MIG slice; its share of the GPU's compute and "
                        "bandwidth is not modelled (the catalog's step costs are the whole GPU's)")
    return RunHardware(model, gpu, tp, float(util), blocks, weights, kv, *data_parallel(meta, where), block_size=block,
                       kv_tokens=tokens, kv_memory=kv_memory, memory=memory, where=where, cudagraph_mode=graphs,
                       attention=attention_record(meta, where))


def _cache_format(model: str, kv: str) -> str:
    """The KV cache's format: `kv` ("auto" or "fp8"), an "auto" one as the checkpoint says (the catalog's entry or
    its config.json; "auto" where neither knows the model)."""
    from llumverify.sim.catalog import get_model

    if kv != "auto":
        return kv
    try:
        return "fp8" if get_model(model).kv_format == "fp8" else "auto"
    except UserError:
        return "auto"


def _catalog_gpu(label: str) -> str:
    """The catalog name of a GPU label, or "" when the catalog does not know it."""
    from llumverify.sim.catalog import get_gpu

    try:
        return get_gpu(label).name if label else ""
    except UserError:
        return ""


def _same_model(given: str, ran: str, where: str) -> None:
    """Refuse --model naming another architecture than the run's model. A run whose model the
    catalog does not know cannot be compared: the config.json given for it is taken at its word."""
    from llumverify.sim.catalog import get_model, same_model

    get_model(given)
    if not _known(ran):
        return
    if not same_model(given, ran):
        raise UserError(f"--model {given}, but {where} ran {ran}")


def _known(name: str) -> bool:
    """Whether the catalogs (or the config.json it names) know the model `name`."""
    from llumverify.sim.catalog import get_model

    try:
        get_model(name)
    except UserError:
        return False
    return True


def source_for_run(source: HardwareConfig, run: RunHardware, tp_given: bool, where: str) -> HardwareConfig:
    """`source` for this run: its TP (an explicit different --tp is an error), its model and GPU
    filled in where the source leaves them open, and any step costs for another model, GPU or
    TP refused (engine_profile.check_same)."""
    if tp_given and source.tp != run.tp:
        raise UserError(f"--tp {source.tp}, but {where} ran with tensor_parallel_size {run.tp}")
    # the run's quantised formats: engine_profile.check refuses them with a profile or step-cost file
    # an fp8 cache the run's checkpoint implies is one (engine_profile.check refuses it with measured kernels)
    kv = "fp8" if "fp8" in (_cache_format(run.model, run.kv_cache_dtype),
                            _cache_format(source.model, run.kv_cache_dtype)) else run.kv_cache_dtype
    hw = dataclasses.replace(source, tp=run.tp, quantization=run.quantization, kv_cache_dtype=kv,
                             dp=run.dp, expert_parallel=run.expert_parallel, cudagraph_mode=run.cudagraph_mode)
    if hw.model and run.model:
        _same_model(hw.model, run.model, where)
    gpu = _catalog_gpu(run.gpu)
    if hw.gpu and gpu and _catalog_gpu(hw.gpu) != gpu:
        raise UserError(f"--gpu {hw.gpu}, but {where} ran on {run.gpu}")
    if hw.profile or hw.cost_file:  # the source's own names must agree with the run's
        probe = HardwareConfig(gpu=gpu, model=hw.model or run.model, tp=run.tp)  # --model: matched to the run above
        if hw.profile:
            from llumverify.sim.profile import profile_meta

            meta = profile_meta(hw.profile)
            engine_profile.check_same(f"profile {hw.profile}", meta.get("hardware", ""), meta.get("model", ""), 1,
                                      probe, scalable=True)
        else:
            from llumverify.sim.stepcost import load_step_cost

            step = load_step_cost(hw.cost_file)
            engine_profile.check_same(f"step-cost file {hw.cost_file}", step.gpu, step.model, step.tp, probe,
                                      scalable=True)
    elif not (hw.gpu and hw.model):  # first principles: what --gpu / --model leave open, from the run
        hw = dataclasses.replace(hw, gpu=hw.gpu or gpu, model=hw.model or run.model)
        if not hw.gpu:
            from llumverify.sim.catalog import gpus

            seen = (f"its GPU {run.gpu!r} is not in the catalog (known: {', '.join(g.name for g in gpus())})" if run.gpu
                    else "it records no hardware.device_name")
            raise UserError(f"{where}: {seen}: give --gpu (catalog), --profile DIR or --step-cost FILE")
        if not hw.model:
            raise UserError(f"{where}: the run names no model: give --model (catalog, or the path of its HF config.json)")
    return dataclasses.replace(hw, gpu_memory_utilization=run.gpu_memory_utilization,
                               attention_backend=_attention_backend(hw, run, gpu, where))


def _attention_backend(hw: HardwareConfig, run: RunHardware, gpu: str, where: str) -> str:
    """The run's attention backend on the GPU it is replayed on (--gpu, a GPU file, or the run's own); "auto" for
    measured kernels, which price no fp8 cache."""
    from llumverify.sim.catalog import get_gpu

    if hw.profile or hw.cost_file:
        return "auto"
    label = hw.gpu or gpu
    return replayed_backend(run.attention, get_gpu(label).arch if label else "", hw.kv_cache_dtype, where)


def kv_blocks_for_run(run: RunHardware, hw: HardwareConfig, override: int | None) -> tuple[int | None, str]:
    """(KV blocks to simulate, how they were obtained): --num-gpu-blocks, else the run's record (in
    blocks, or in tokens as vLLM logs it), else derived from the catalogs for the source's (or the
    run's) GPU and model: from the run's kv_cache_memory_bytes when it set one, else from the GPU's
    memory (the run's recorded memory when it differs from the catalog's: a MIG slice)."""
    if override is not None:
        return override, f"{override} KV blocks (--num-gpu-blocks)"
    if run.recorded_blocks is not None:
        return None, f"{run.recorded_blocks} KV blocks (recorded in meta.json)"
    if run.kv_tokens is not None:
        blocks = run.kv_tokens // run.block_size
        return blocks, (f"{blocks} KV blocks (recorded in meta.json as kv_cache.num_kv_tokens {run.kv_tokens} / block "
                        f"size {run.block_size})")
    probe = hw
    if not (hw.gpu and hw.model):
        gpu, model = engine_profile.gpu_and_model(hw) if hw.given else ("", "")
        probe = dataclasses.replace(hw, gpu=gpu or _catalog_gpu(run.gpu), model=model or run.model)
    if not probe.model:
        raise UserError("the run names no model: give --model (catalog, or the path of its HF config.json)")
    if not probe.gpu:
        raise UserError("the run records no KV cache size and its GPU is unknown: give --gpu (catalog) "
                        "or --num-gpu-blocks N")
    from llumverify.sim.catalog import get_gpu
    from llumverify.sim.engine_profile import served_model
    from llumverify.sim.roofline import MoEGroup, kv_capacity_blocks

    model, gpu = served_model(probe.model, probe), get_gpu(probe.gpu)
    ranks = f" per data-parallel rank (× {probe.dp})" if probe.dp > 1 else ""
    if run.kv_memory is not None:
        blocks = run.kv_memory // (run.block_size * model.kv_bytes_per_token(probe.tp))
        if blocks < 1:
            raise UserError(f"{run.where}: kv_cache_memory_bytes {run.kv_memory} holds no KV block of {probe.model} at tp "
                            f"{probe.tp}")
        return blocks, (f"{blocks} KV blocks{ranks} derived from the run's kv_cache_memory_bytes {run.kv_memory} per GPU "
                        f"/ the bytes of a {run.block_size}-token block of {probe.model} at tp {probe.tp}")
    memory = ""
    if run.memory and abs(run.memory - gpu.usable_memory_bytes) > 0.05 * gpu.usable_memory_bytes:
        memory = (f" (meta.json's device_total_memory_bytes, {run.memory / 2**30:.1f} GiB, not the catalog's "
                  f"{gpu.usable_memory_bytes / 2**30:.1f} GiB: another board of that name)")
        gpu = dataclasses.replace(gpu, visible_memory_bytes=run.memory)
    blocks = kv_capacity_blocks(model, gpu, tp=probe.tp, gpu_memory_utilization=probe.gpu_memory_utilization,
                                block_size=run.block_size, group=MoEGroup(probe.dp, probe.expert_parallel))
    # a GPU file is known by the name it gives, not by its path
    return blocks, (f"{blocks} KV blocks{ranks} derived (not recorded in meta.json): {probe.tp} × {gpu.name} memory"
                    f"{memory} × {probe.gpu_memory_utilization} − {probe.model} weights − reserve (sim/roofline.py)")


CLUSTER_CONFIGS = ("cluster-config.json", "../config.json")  # beside meta.json (the shared layout); LLMServingSim's bench/examples


def cluster_config_gpu(run_dir) -> tuple[str, str] | None:
    """(GPU label, file) of a run whose meta.json records none, from the LLMServingSim cluster config
    of its run (`nodes[0].instances[0].hardware`, e.g. "RTXPRO6000"), else None; a config that is
    there but malformed is a one-line UserError naming it."""
    from llumverify.files.paths import read_json_object

    for name in CLUSTER_CONFIGS:
        path = run_dir / name
        ours = name == CLUSTER_CONFIGS[0]  # ../config.json may be any program's: read only if it is a cluster config
        if not path.is_file():
            continue
        try:
            cfg = read_json_object(path, "cluster config")
        except UserError:
            if not ours:
                continue
            raise
        nodes = cfg.get("nodes")
        if not nodes or not isinstance(nodes, list):
            if ours:
                raise UserError(f"{path}: a cluster config without a list of nodes")
            continue
        try:
            label = nodes[0]["instances"][0]["hardware"]
        except (KeyError, IndexError, TypeError):
            label = None
        if not isinstance(label, str) or not label.strip():
            if not ours:
                continue
            raise UserError(f"{path}: nodes[0].instances[0].hardware must be a GPU name, got {label!r}")
        return label.strip(), name
    return None


def prepare(run_dir, source: HardwareConfig, tp_given: bool,
            override_blocks: int | None) -> tuple[HardwareConfig, int | None, str]:
    """For validate/calibrate --run: the source matched to the run (source_for_run), the KV blocks
    to simulate (None: the run's record) and a line saying where they come from."""
    from pathlib import Path

    from llumverify.validation.replay import read_meta

    where = str(Path(run_dir) / "meta.json")
    run = run_hardware(read_meta(run_dir), where)
    found = None if run.gpu or source.gpu else cluster_config_gpu(Path(run_dir))
    if found:
        run = dataclasses.replace(run, gpu=found[0])
    hw = source_for_run(source, run, tp_given, str(run_dir))
    blocks, how = kv_blocks_for_run(run, hw, override_blocks)
    return hw, blocks, how + (f"; GPU {found[0]!r} from {found[1]} (meta.json names none)" if found else "")
