"""The NIC facts: a NUMA node the kernel does not know (-1, or no file) is recorded as unknown,
never as a negative node the run's schema refuses."""

import pytest

from tunepath.live.facts import _nic

pytestmark = pytest.mark.fast


@pytest.mark.parametrize("node, expected", [("1", 1), ("0", 0), ("-1", None), ("", None)])
def test_nic_numa_node(node, expected):
    entry, why = _nic(f"name=eth0\nnuma_node={node}\n")
    assert entry["numa_node"] == expected
    assert ("NUMA node unknown" in why) == (expected is None)
