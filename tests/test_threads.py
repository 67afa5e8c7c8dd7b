"""Calls and updates from different threads: every call sees one whole setting."""

from __future__ import annotations

import copy
import sys
import threading

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torchbend as tb


def test_updates_from_another_thread_land_between_calls_and_the_last_one_wins():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 8)).double()
    x = torch.randn(4, 8, dtype=torch.double)
    gain = tb.BendingParameter("gain", 1.0)
    bended = tb.BendedModule(net)
    bended.trace(input=x)
    # One knob drives two weights and an activation: a call seeing part of an update would
    # mix two settings, and match none of them.
    bended.bend(tb.Scale(gain), r"0\.weight$", r"1\.weight$", "_0$")
    values = [1.0 + i / 50 for i in range(200)]

    def expected(v: float) -> torch.Tensor:
        hidden = F.linear(x, net[0].weight * v, net[0].bias) * v
        return F.linear(hidden, net[1].weight * v, net[1].bias)

    with torch.no_grad():
        references = torch.stack([expected(1.0)] + [expected(v) for v in values])
    outputs: list[torch.Tensor] = []
    done = threading.Event()

    def play() -> None:
        while not done.is_set() or len(outputs) < 50:
            with torch.no_grad():
                outputs.append(bended(x))

    def turn() -> None:
        for v in values:
            bended.update("gain", v, ramp=False)
        done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads as often as possible
    try:
        threads = [threading.Thread(target=play), threading.Thread(target=turn)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads)
    for out in outputs:
        error = (references - out).abs().flatten(1).amax(1)
        assert float(error.min()) < 1e-12, "a call saw part of an update"
    with torch.no_grad():
        assert torch.allclose(bended(x), expected(values[-1]), rtol=0, atol=1e-12)
    with pytest.raises(tb.BendingError, match="cannot be copied or pickled"):
        copy.deepcopy(bended)  # a copy would mix the two modules' weights
