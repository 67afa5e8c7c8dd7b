"""Weight views: bent parameters without touching the wrapped module."""

from __future__ import annotations

import re

import torch
from torch import nn

import torchbend as tb
from torchbend.engine.weights import WeightBank, module_with


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(3, 3), nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2)))


def test_view_copies_only_the_path_to_replaced_parameters():
    m = model()
    zero = torch.zeros(2, 3)
    view = module_with(m, {"1.0.weight": zero})
    assert view is not m and view[1] is not m[1] and view[1][0] is not m[1][0]
    assert view[0] is m[0] and view[1][1] is m[1][1]
    assert view[1][0].weight is zero
    assert m[1][0].weight is not zero
    assert view[1][0].bias is m[1][0].bias
    assert module_with(m, {}) is m


def test_view_shares_buffers_so_running_stats_update_like_eager():
    m = model().train()
    bank = WeightBank(m)
    bank.set({"0.weight": torch.ones(3, 3)})
    bank.bent_module(torch.randn(4, 3))
    assert m[1][1].num_batches_tracked.item() == 1


def test_bank_refresh_follows_train_eval():
    m = model()
    bank = WeightBank(m)
    bank.set({"0.weight": torch.ones(3, 3)})
    m.eval()
    bank.refresh()
    assert not bank.bent_module.training and not bank.bent_module[0].training
    assert isinstance(bank.bent["0.weight"], nn.Parameter)
    # as the weight it replaces: modules pick their kernels by it
    assert bank.bent["0.weight"].requires_grad
    m[0].weight.requires_grad_(False)
    bank.set({"0.weight": torch.ones(3, 3)})
    assert not bank.bent["0.weight"].requires_grad


def test_bent_attention_runs_the_kernels_of_the_original():
    # nn.MultiheadAttention takes a fused path when no weight needs a gradient: bent copies
    # that did not would run it where the original does not (1e-7 apart, nothing bent).
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True, dropout=0.0).eval()
    x = torch.randn(1, 5, 8)
    names = [n for n, _ in layer.named_parameters()]
    bended = tb.BendedModule(layer)
    bended.trace(src=x)
    bended.bend(tb.Scale(1.0), *[re.escape(n) + "$" for n in names])
    for grad in (True, False):
        with torch.set_grad_enabled(grad):
            assert torch.equal(bended(x), layer(x))


def test_parametrized_layers_can_be_bent():
    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(1, 2, 3))
    m = nn.Sequential(conv)
    bank = WeightBank(m)
    names = bank.names()
    assert "0.parametrizations.weight.original0" in names
    x = torch.randn(1, 1, 8)
    g = m[0].parametrizations.weight.original0
    bank.set({"0.parametrizations.weight.original0": torch.zeros_like(g)})
    assert torch.equal(bank.bent_module(x), m[0].bias[None, :, None].expand(1, 2, 6).detach())
    assert not torch.equal(m(x), bank.bent_module(x))


def test_synced_view_copies_follow_flags_tensors_and_new_attributes_of_their_originals():
    m = model()
    bank = WeightBank(m)
    bank.set({"0.weight": torch.ones(3, 3)})
    copy = bank.synced_module()[0]
    assert copy is not m[0] and copy.weight is not m[0].weight
    for value in (torch.zeros(4), torch.ones(4), torch.ones(1), torch.zeros(1)):
        m[0].table = value  # a tensor attribute replaced, compared by value: still given
        assert bank.synced_module()[0].table is value
    m[0].eval()
    m[0].flag = "new"  # an attribute the copy never had
    bank.synced_module()
    assert not copy.training and copy.flag == "new"
    m[0].flag = "other"
    bank.synced_module()
    assert copy.flag == "other" and copy.weight is not m[0].weight  # its own weight kept
