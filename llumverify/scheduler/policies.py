"""Dispatch policies by name: what `--policy` and an experiment's `policies` pick.

A policy is a `Policy` (scheduler/dispatch.py): a name, a dispatch rule (a pure function of the
instance snapshots and the request) and whether it migrates. Adding one takes its rule and one
`register` call; the built-in policies are registered here.
"""

from __future__ import annotations

from llumverify.errors import UserError
from llumverify.registry import Registry
from llumverify.scheduler.cache_aware import cache_aware
from llumverify.scheduler.dispatch import Policy, least_loaded, round_robin, vllm_dp
from llumverify.scheduler.prediction import predicted

POLICIES: Registry[Policy] = Registry("policy")
# What `simulate` and an experiment without `policies` run: the paper's three. Extensions such as
# `predicted` (an oracle by default) are opt-in, so the default comparison stays the paper's.
DEFAULT_POLICIES = ("round-robin", "least-loaded", "llumnix")


def register(policy: Policy) -> Policy:
    """Make `policy` available under its name (simulate's --policy, experiment files, the cluster)."""
    return POLICIES.register(policy.name, policy)


def get_policy(name: str) -> Policy:
    """The registered policy called `name`; UserError naming the choices otherwise."""
    if name not in POLICIES:
        raise UserError(f"--policy: {POLICIES.unknown(name)}")
    return POLICIES[name]


for _policy in (Policy("round-robin", round_robin), Policy("least-loaded", least_loaded),
                Policy("llumnix", least_loaded, migrates=True), Policy("predicted", predicted, predicts=True),
                Policy("cache-aware", cache_aware, prefix_aware=True), Policy("vllm-dp", vllm_dp)):
    register(_policy)
