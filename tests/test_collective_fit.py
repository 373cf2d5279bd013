"""Which kernel prices an all-reduce, and the NCCL terms fitted on measured timings (issue #28)."""

from __future__ import annotations

import dataclasses

import pytest

from llumverify.errors import UserError
from llumverify.sim import collectives
from llumverify.sim.catalog import get_gpu, get_interconnect
from llumverify.validation import collective_fit as cf

MiB = 2**20


def test_vllm_custom_all_reduce_prices_small_buffers_on_nvlink_only() -> None:
    """Below 8 MiB at TP 2/4/6/8 over NVLink the custom kernel's fixed time, NCCL's otherwise
    (larger buffers, TP 3, links without the custom kernel); the bytes cost the same either way."""
    link = get_interconnect("NVLink4")
    assert link.custom_alpha_ns < link.alpha_ns and link.custom_max_bytes == 8 * MiB
    wire = collectives.allreduce_wire_bytes(8 * MiB, 4) / (link.bw * link.bw_eff) * 1e9
    assert collectives.allreduce_ns(8 * MiB - 16, 4, link) == pytest.approx(link.custom_alpha_ns + wire, abs=1)
    assert collectives.allreduce_ns(8 * MiB, 4, link) == pytest.approx(link.alpha_ns + wire)
    assert collectives.allreduce_alpha_ns(1024, 3, link) == link.alpha_ns
    for tp in (2, 4, 6, 8):
        assert collectives.allreduce_alpha_ns(1024, tp, link) == link.custom_alpha_ns
    pcie = get_gpu("L40S").link
    assert pcie.custom_max_bytes == 0 and collectives.allreduce_alpha_ns(1024, 2, pcie) == pcie.alpha_ns


def _vidur_csv(rows: list[tuple]) -> str:
    head = ",time_stats.all_reduce.median,rank,num_workers,size,collective,devices_per_node,max_devices_per_node"
    return "\n".join([head, *(",".join(str(x) for x in (i, *r)) for i, r in enumerate(rows))]) + "\n"


def test_the_reader_takes_size_as_bytes_rank_0_and_one_node() -> None:
    text = _vidur_csv([(0.245, 0, 2, 67108864, "all_reduce", 2, 8),   # kept: 64 MiB in 245 us
                       (0.300, 1, 2, 67108864, "all_reduce", 2, 8),   # rank 1
                       (11.4, 0, 2, 67108864, "all_reduce", 1, 8),    # two nodes, one GPU each
                       (0.5, 0, 2, 67108864, "send_recv", 2, 8)])
    assert cf.read_vidur(text) == [cf.Timing(tp=2, nbytes=67108864, ns=pytest.approx(245_000))]


@pytest.mark.parametrize("text, problem", [
    ("a,b\n1,2\n", "not a Vidur all-reduce profile"),
    ("", "not a Vidur all-reduce profile"),
    (_vidur_csv([("fast", 0, 2, 2048, "all_reduce", 2, 8)]), "malformed number"),
    (_vidur_csv([(0.1, 0, 2, 2048, "all_reduce", 1, 8)]), "no one-node all-reduce rows"),
])
def test_a_bad_profile_is_one_line_naming_it(text: str, problem: str) -> None:
    with pytest.raises(UserError, match=problem):
        cf.read_vidur(text, "x.csv")


def test_the_fit_recovers_the_terms_behind_the_timings_and_ignores_custom_sized_buffers() -> None:
    """Timings made by the model itself (alpha 31.5 us, bw_eff 0.67) at TP 2/4/8 come back exactly;
    buffers under 8 MiB (vLLM's custom all-reduce range) carry wrong times and must not move it."""
    truth = dataclasses.replace(get_interconnect("NVLink4"), alpha_ns=31_500.0, bw_eff=0.67, custom_max_bytes=0)
    timings = [cf.Timing(tp, size, collectives.allreduce_ns(size, tp, truth))
               for tp in (2, 4, 8) for size in range(8 * MiB, 64 * MiB + 1, 4 * MiB)]
    timings += [cf.Timing(tp, MiB, 1e6) for tp in (2, 4, 8) for _ in range(200)]
    fitted, loss = cf.fit_nccl(timings, get_interconnect("NVLink4"))
    assert (fitted.alpha_ns, fitted.bw_eff, fitted.bw) == (31_500.0, 0.67, truth.bw) and loss < 1e-9
    assert cf.by_tp(cf.nccl_rows(timings), fitted) == {2: pytest.approx(0, abs=1e-12), 4: pytest.approx(0, abs=1e-12),
                                                       8: pytest.approx(0, abs=1e-12)}


def test_a_fit_without_nccl_sized_buffers_fails_in_one_line() -> None:
    with pytest.raises(UserError, match="fit failed: no all-reduce of at least 8,388,608 bytes"):
        cf.fit_nccl([cf.Timing(2, MiB, 20_000.0)], get_interconnect("NVLink4"))


def test_step_cost_tables_hold_the_jump_between_the_two_kernels() -> None:
    """Llama-3-70B on four H100s: 511 tokens' all-reduces (8 MiB − 16 KiB) take the custom kernel, 512's
    NCCL; both tables (first principles, a one-GPU table scaled to TP) have knots there, so the step
    cost jumps by (2·80 + 1)·(alpha_ns − custom_alpha_ns) plus one token's work, not smeared over 384-512."""
    from llumverify.sim import roofline as rl
    from llumverify.sim.catalog import get_model
    from llumverify.sim.stepcost import interpolate
    from llumverify.sim.tensor_parallel import scale_to_tp

    model, gpu = get_model("Llama-3-70B"), get_gpu("H100")
    link = gpu.link
    assert collectives.kernel_switch_tokens(model, 4, link) == (511, 512)
    assert collectives.kernel_switch_tokens(model, 3, link) == () == collectives.kernel_switch_tokens(
        model, 2, get_gpu("L40S").link)
    jump = 161 * (link.alpha_ns - link.custom_alpha_ns)
    for cost in (rl.step_cost_first_principles(model, gpu, tp=4),
                 scale_to_tp(rl.step_cost_first_principles(model, gpu, tp=1), 4)):
        assert interpolate(cost.linear, 512) - interpolate(cost.linear, 511) == pytest.approx(jump, rel=0.1)
