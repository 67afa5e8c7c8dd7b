"""Pitfalls: module state forward replaces (a cache grown, a buffer made again).

Eager code leaves the module changed after a call; a graph's call must leave it changed the
same way, and the next call must compute what eager code computes from the new state.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

import torchbend as tb


class GrowingTable(nn.Module):
    """A positional table made again when a longer input comes (ESPnet's ``extend_pe``)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("pe", torch.zeros(1, 4, 8))
        self.proj = nn.Linear(4, 4)

    def forward(self, x):
        if x.shape[-1] > self.pe.shape[-1]:
            table = torch.arange(x.shape[-1], device=x.device).float()
            self.pe = table.expand(1, 4, -1).clone() / 10
        return self.proj((x + self.pe[..., : x.shape[-1]]).transpose(1, 2))


def _lengths(*sizes: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1, 4, n, generator=g) for n in sizes]


def _state(module: nn.Module) -> dict[str, object]:
    state: dict[str, object] = {k: v.clone() for k, v in module.named_buffers()}
    for path, m in module.named_modules():
        for k, v in vars(m).items():
            if not k.startswith("_") and isinstance(v, (int, torch.Tensor)):
                state[f"{path}.{k}"] = v
    return state


def _same_state(a: dict[str, object], b: dict[str, object]) -> bool:
    if a.keys() != b.keys():
        return False
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, torch.Tensor) or isinstance(y, torch.Tensor):
            if not torch.equal(torch.as_tensor(x), torch.as_tensor(y)):
                return False
        elif x != y:
            return False
    return True


def _calls_match_eager(module: nn.Module, calls: list[dict[str, torch.Tensor]], backend: str):
    eager = copy.deepcopy(module)
    bended = tb.BendedModule(module, backend=backend)
    before = _state(module)
    bended.trace(**calls[0])
    assert _same_state(_state(module), before), "tracing changed the module"
    for i, inputs in enumerate(calls):
        got, expected = bended(**inputs), eager(**inputs)
        got, expected = (
            getattr(got, "last_hidden_state", got),
            getattr(expected, "last_hidden_state", expected),
        )
        assert torch.allclose(got, expected, atol=1e-6), f"call {i} differs from eager"
        assert _same_state(_state(module), _state(eager)), f"call {i} left another state"
    return bended


@pytest.mark.parametrize("backend", ["concrete", "auto"])
def test_a_buffer_replaced_in_forward_is_replaced_by_every_call(backend):
    torch.manual_seed(0)
    x8, x16, x12, x20 = _lengths(8, 16, 12, 20)
    calls = [{"x": x} for x in (x16, x16, x8, x12, x20, x8)]
    _calls_match_eager(GrowingTable(), calls, backend)


def test_the_torch_export_backend_does_not_drop_the_replacement_silently():
    """torch.export records the new table as a copy into the old buffer: the check sees that
    the graph leaves another buffer than the module and refuses the graph."""
    (x16,) = _lengths(16)
    with pytest.raises(tb.TracingError, match=r"buffer 'pe' after the call: shape \[1, 4, 8\]"):
        tb.BendedModule(GrowingTable(), backend="export").trace(x=x16)


def test_bending_a_model_that_replaces_a_buffer_leaves_the_replacement_to_eager_state():
    torch.manual_seed(0)
    module = GrowingTable()
    (x16,) = _lengths(16)
    bended = tb.BendedModule(module)
    bended.trace(x=x16)
    plain = bended(x16)
    bended.bend(tb.Scale(0.0), "proj$")
    assert not torch.equal(bended(x16), plain)
    assert module.pe.shape == (1, 4, 16)
    bended.reset()
    assert torch.equal(bended(x16), plain)


def test_transformers_dynamic_rope_grows_and_resets_its_frequencies_as_eager():
    """A real library: transformers' dynamic RoPE replaces ``inv_freq`` (register_buffer) and
    sets ``max_seq_len_cached`` to a tensor when the sequence is longer than the positions it
    was made for, and puts the original back for a short one."""
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=8,
        use_cache=False,
        attn_implementation="eager",
        rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0},
    )
    model = transformers.LlamaModel(config).eval()
    g = torch.Generator().manual_seed(1)
    long, short = (
        torch.randint(0, 100, (2, 12), generator=g),
        torch.randint(0, 100, (2, 5), generator=g),
    )
    calls = [{"input_ids": ids} for ids in (long, long, short, long)]
    _calls_match_eager(model, calls, "auto")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_buffer_replaced_in_forward_on_cuda():
    torch.manual_seed(0)
    calls = [{"x": x.cuda()} for x in _lengths(16, 16, 8, 20)]
    _calls_match_eager(GrowingTable().cuda(), calls, "auto")


def test_an_export_says_the_file_does_not_replace_the_buffer(tmp_path):
    (x16,) = _lengths(16)
    bended = tb.BendedModule(GrowingTable())
    bended.trace(x=x16)
    with pytest.warns(UserWarning, match=r"forward replaces \['pe'\]"):
        tb.export.torchscript(bended, tmp_path / "table.ts")
    file = torch.jit.load(str(tmp_path / "table.ts"))
    assert torch.allclose(file(x16), bended(x16), atol=1e-6)
