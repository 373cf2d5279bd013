"""What the sampler adds to a vllm-v1 step when requests sample with top-p: a sort of every sequence's logits.

vLLM V1 samples on the GPU every step. A batch of greedy requests (temperature 0) takes an argmax
over the logits, and one whose requests give a temperature alone an exponential-race argmax: the
profiled sampler (sim/roofline.py `sampler_ns`), `sampling = "greedy"`. A batch in which any request
has top_p < 1 (with or without top_k) runs, on CUDA from vLLM 0.11.1 (PR #26859 turned the FlashInfer
sampler off by default) through 0.16, the PyTorch path of vllm/v1/sample/ops/topk_topp_sampler.py
(`apply_top_k_top_p` at v0.15.1, commit 1892993bc): every row of the logits sorted over the whole
vocabulary, then softmax, cumulative sum, mask and scatter back: `sampling = "top-p"`, a cost per
sequence and step that grows with the vocabulary. Not modelled: top_k alone (vLLM takes `topk`, no
sort; priced as greedy), repetition/frequency/presence penalties (more passes over the vocabulary),
vLLM 0.17's Triton top-k/top-p kernel (PR #33538) and the FlashInfer sampler, default again from
PR #40376 (2026-04), both several times faster than the sort.

Which requests sample so: from vLLM 0.8 (`--generation-config auto`, PR #12622) a request that sets no
temperature or top_p takes the model's generation_config.json defaults, e.g. Llama-3.1-8B-Instruct's
temperature 0.6 and top_p 0.9, Qwen3's 0.6 / 0.95 / top_k 20; `vllm bench serve` sent temperature 0
(greedy) until 0.15 (PR #32723).

The cost: Efficiency.topp_sort_ns per sequence and step on an H100 SXM for a 131,072-token
vocabulary, times vocab / 131,072, times the H100's SMs x boost clock over the GPU's. Fitted on the
calibration file of the public vLLM 0.15.1 serving runs (llumverify/validation/public_serving.py
`fit_sort_ns`; sim/efficiency.toml says the fit and how uncertain it is). The transfer to other GPUs
is an assumption, not a measurement: the sort's working set (fp32 values and int64 indices, 12 bytes a
logit, plus softmax and cumsum buffers) is tens to hundreds of MB at serving batches (PR #32558: 1.25 GB
at 256 x 131,072), beyond any L2, so HBM bandwidth may bound it as much as the SMs. Scaled by HBM
bandwidth instead (as sim/roofline.py prices the argmax sampler), the held-out L40S serving runs came
out +61 % E2E, and that rule was dropped: the SM rule was chosen after it, so the L40S and A100 runs are
held out from the fit but not blind to the rule. No GPU but the H100 has a fitted sort time here; AMD's
compute units are taken as SMs, unchecked (ROCm's vLLM samples through the same PyTorch path). The time
per sequence is taken as constant in the batch (PR #40376's PyTorch column, on a GPU it does not name:
about 18 us a sequence at 128 x 131,072, 12 at 512).
"""

from __future__ import annotations

import dataclasses

from llumverify.errors import UserError
from llumverify.sim.catalog import GPU, get_gpu
from llumverify.sim.stepcost import StepCost

SAMPLING = ("greedy", "top-p")
REF_GPU = "H100"  # the GPU topp_sort_ns is stated for (sim/catalog/gpus.toml: 132 SMs at 1.98 GHz)
REF_VOCAB = 131_072


def sm_throughput(gpu: GPU) -> float:
    """SMs (AMD: compute units) x maximum boost clock in GHz; a GPU whose entry lacks them is refused."""
    if not (gpu.sms and gpu.clock_ghz):
        raise UserError(f"top-p sampling is priced by the GPU's SM count and boost clock, which {gpu.name} does not "
                        "give: use a GPU file with sms and clock_ghz (sim/catalog/gpus.toml's keys, under a name the "
                        "catalog does not use)")
    return gpu.sms * gpu.clock_ghz


def sort_ns_per_seq(topp_sort_ns: int, gpu: GPU, vocab: int) -> float:
    """The sort's time per sequence and step on `gpu` for a `vocab`-token vocabulary (module docstring)."""
    return topp_sort_ns * vocab / REF_VOCAB * sm_throughput(get_gpu(REF_GPU)) / sm_throughput(gpu)


def with_sampling(cost: StepCost, sampling: str, topp_sort_ns: int, gpu: GPU, vocab: int) -> StepCost:
    """`cost` with the sampler's sort added to every sequence of a step where requests sample with top-p;
    greedy sampling is `cost` itself (its per_seq holds the profiled argmax sampler)."""
    if sampling not in SAMPLING:
        raise UserError(f"sampling must be one of {', '.join(SAMPLING)}, got {sampling!r}")
    if sampling == "greedy":
        return cost
    ns = sort_ns_per_seq(topp_sort_ns, gpu, vocab)
    return dataclasses.replace(cost, per_seq=tuple((s, v + round(ns * s)) for s, v in cost.per_seq), source=(
        f"{cost.source}; top-p sampling: a {vocab:,}-token sort of every sequence's logits, {ns / 1e3:.1f} us a "
        f"sequence and step on {gpu.name} (sim/sampling.py)"))
