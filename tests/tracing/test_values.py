"""Nested values: the one walker over containers, and what counts as a TensorDict."""

from __future__ import annotations

import collections

import torch
from tensordict import TensorDict, tensorclass
from torch.fx.immutable_collections import immutable_dict, immutable_list

from torchbend.tracing.tensordict import is_tensordict
from torchbend.tracing.values import holds_tensor, is_proxied_input, leaves, map_values

Pair = collections.namedtuple("Pair", "a b")


def test_map_values_rebuilds_plain_containers_around_leaves():
    value = {"p": Pair(1, [2, slice(3, None)]), "t": (4,)}
    assert map_values(value, lambda v: v if v is None else v * 10) == {
        "p": Pair(10, [20, slice(30, None)]),
        "t": (40,),
    }
    assert type(map_values(immutable_list([1]), lambda v: v)) is list
    assert map_values(immutable_dict({"a": 1}), lambda v: v + 1) == {"a": 2}
    ordered = collections.OrderedDict(a=1)
    assert map_values([ordered], lambda v: v) == [ordered]  # dict subclasses are leaves
    assert list(leaves(value)) == [1, 2, 3, None, None, 4]


@tensorclass
class Sample:
    x: torch.Tensor


def test_tensordicts_and_tensorclasses_are_told_apart_from_mappings():
    td = TensorDict({"a": torch.ones(2)}, [2])
    assert is_tensordict(td) and is_tensordict(Sample(x=torch.ones(2), batch_size=[2]))
    assert not is_tensordict({"a": torch.ones(2)}) and not is_tensordict(torch.ones(2))
    assert is_proxied_input(td) and is_proxied_input([torch.ones(1)])
    assert not is_proxied_input(None) and not is_proxied_input(True)
    assert holds_tensor((1, [torch.ones(1)])) and not holds_tensor((1, "a"))
