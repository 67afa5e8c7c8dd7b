"""Unit tests of the facts calls are guarded by: argument kinds."""

from __future__ import annotations

import torch

from torchbend.tracing import kind_of


def test_kinds_tell_none_tensors_and_numbers_apart():
    kinds = [kind_of(v) for v in (None, torch.ones(2), 1, 1.0, True, "a")]
    assert len(set(kinds)) == len(kinds)
    assert kind_of(torch.nn.Parameter(torch.ones(2))) is torch.Tensor


def test_kinds_of_containers_hold_their_items_and_keys():
    t = torch.ones(2)
    assert kind_of([t, None]) != kind_of([t, t])
    assert kind_of([t]) != kind_of([t, t])
    assert kind_of({"x": t}) != kind_of({"x": t, "mask": t})
    assert kind_of({"x": t, "n": 1}) != kind_of({"x": t, "n": 1.5})
    assert kind_of((t, 2)) == kind_of((torch.zeros(3), 5))  # values are no kind
