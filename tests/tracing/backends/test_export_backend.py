"""The torch.export backend, alone and as the fallback of backend="auto"."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch
from torch import nn

import torchbend as tb


class Encoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.norm = nn.LayerNorm(4)

    def forward(self, x, scale: float = 2.0):
        for layer in self.layers:
            x = torch.relu(layer(x)) + x
        return self.norm(x) * scale


class Options:
    """A plain object handed to a leaf module: a graph of the concrete tracer cannot hold it."""

    def __init__(self, gain: float) -> None:
        self.gain = gain


class Leaf(nn.Module):
    torchbend_leaf = True

    def forward(self, x, options):
        return x * options.gain


class WithOptions(nn.Module):
    """The concrete tracer fails on it, torch.export does not."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.leaf = Leaf()

    def forward(self, x):
        return self.leaf(self.lin(x), Options(2.0))


@dataclass
class Output:
    """An output class registered with torch.export (as transformers' ModelOutputs are)."""

    hidden: torch.Tensor
    pooled: torch.Tensor


torch.export.register_dataclass(Output)


class ReturnsObject(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        return Output(hidden=h, pooled=h.mean(dim=1))


def test_export_backend_returns_the_objects_the_module_returns():
    module, x = ReturnsObject(), torch.randn(2, 3, 4)
    bended = tb.BendedModule(module, backend="export")
    bended.trace(x=x)
    out = bended(x)
    assert type(out) is Output
    expected = module(x)
    assert torch.equal(out.hidden, expected.hidden) and torch.equal(out.pooled, expected.pooled)
    bended.bend(tb.Scale(0.0), "lin$")
    assert torch.equal(bended(x).pooled, torch.zeros(2, 4))


def test_export_backend_names_bends_resets_and_round_trips_a_config(tmp_path):
    torch.manual_seed(0)
    model, x = Encoder(), torch.randn(2, 4)
    bended = tb.BendedModule(model, backend="export")
    bended.trace(x=x)
    assert bended.traced_by("forward") == "export"
    names = bended.activation_names()
    assert {"x", "layers_0", "layers_1", "norm"} <= set(names)
    assert not any(n.endswith("_weight") for n in names)  # weights are not activations
    assert torch.equal(bended(x), model(x))
    bended.bend(tb.Mask(0.5, dim=-1, seed=0), "layers_1$")
    bended.bend(tb.Scale(2.0), r"norm\.weight")
    bent = bended(x)
    assert not torch.allclose(bent, model(x))
    bended.bending_config().save(tmp_path / "bend.json")
    bended.reset()
    assert torch.equal(bended(x), model(x))
    other = tb.BendedModule(model, backend="export")
    other.trace(x=x)
    other.bend(tb.BendingConfig.load(tmp_path / "bend.json"))
    assert torch.equal(other(x), bent)
    assert torch.equal(model.norm.weight, torch.ones(4))  # the model's own weights untouched


def test_auto_falls_back_to_export_and_says_so():
    model, x = WithOptions(), torch.randn(2, 4)
    with pytest.raises(tb.TracingError):
        tb.BendedModule(model, backend="concrete").trace(x=x)
    bended = tb.BendedModule(model)  # backend="auto" is the default
    bended.trace(x=x)
    assert bended.traced_by("forward") == "export"
    assert torch.equal(bended(x), model(x))
    assert "lin" in bended.activation_names()


def test_auto_keeps_the_concrete_tracer_where_it_works():
    model, x = Encoder(), torch.randn(2, 4)
    bended = tb.BendedModule(model, backend="auto")
    bended.trace(x=x)
    assert bended.traced_by("forward") == "concrete"


def test_auto_says_what_each_backend_tripped_on():
    class Both(WithOptions):
        def forward(self, x):  # a plain object for the concrete tracer, data for torch.export
            return self.leaf(x, Options(2.0))[: int(x.sum().item())]

    with pytest.raises(tb.TracingError) as e:
        tb.BendedModule(Both(), backend="auto").trace(x=torch.ones(3, 4))
    message = str(e.value)
    assert "no tracing backend could trace it" in message
    assert "- concrete backend:" in message and "- export backend:" in message


def test_unknown_backend_is_a_clear_error():
    with pytest.raises(tb.TracingError, match=r"backend must be one of \['auto', 'concrete', "):
        tb.BendedModule(Encoder(), backend="dynamo")


def test_export_backend_graphs_export_to_torchscript_and_pt2_and_guard_scalars():
    torch.manual_seed(0)
    model, x = Encoder(), torch.randn(2, 4)
    bended = tb.BendedModule(model, backend="export")
    bended.trace(x=x)
    assert torch.equal(bended(x, 3.0), model(x, 3.0))  # another scale: another graph
    assert len(bended.graphs()) == 2
    gain = tb.BendingParameter("gain", 1.0, range=(0.0, 2.0))
    bended.trace(x=x)
    bended.bend(tb.Scale(gain), "layers_1$")
    scripted = tb.export.torchscript(bended)
    assert torch.allclose(scripted(x), bended(x))
    scripted.set_gain(0.5)
    bended.update("gain", 0.5)
    assert torch.allclose(scripted(x), bended(x))
    program = tb.export.pt2(bended, x=x)
    assert torch.allclose(program.module()(x=x), bended(x))


def test_one_trace_picks_its_backend_and_says_which_traced():
    model, x = Encoder(), torch.randn(2, 4)
    bended = tb.BendedModule(model)
    bended.trace(x=x)
    assert bended.traced_by() == "concrete"
    bended.trace(x=x, backend="export")
    assert bended.traced_by() == "export"
    assert bended.print_graph().startswith("# forward: traced by the export backend")
    assert torch.equal(bended(x), model(x))


class NamedBackend(nn.Module):
    """A model whose own argument is called ``backend``."""

    def forward(self, x, backend: str = "fast"):
        return x * 2 if backend == "fast" else x


def test_an_argument_named_backend_is_an_input():
    bended = tb.BendedModule(NamedBackend())
    x = torch.ones(2)
    bended.trace(x=x, backend="slow", _backend="export")
    assert bended.traced_by() == "export"
    assert torch.equal(bended(x, backend="slow"), x)
    with pytest.raises(tb.TracingError, match="backend must be one of"):
        bended.trace(x=x, _backend="fx")


def test_both_backends_name_and_bend_the_same_module_outputs_streaming_and_to_onnx(tmp_path):
    """``encoder_2`` is the output of module ``encoder.2`` on either backend (not the first
    operation it runs): the same bending streams the same audio; the export graph goes to
    ONNX."""
    torch.manual_seed(0)
    model, x = tb.models.load("tiny_rave"), torch.randn(1, 1, 2048)
    audio = torch.randn(1, 9000, generator=torch.Generator().manual_seed(1)) * 0.1
    outputs = []
    for backend in ("concrete", "export"):
        bended = tb.BendedModule(model, backend=backend)
        bended.trace(x=x)
        assert bended.bend(tb.Scale(0.0), "encoder_2$") == ["forward:encoder_2"]
        outputs.append(tb.audio.Stream(bended, block_size=2048).process(audio))
    assert torch.equal(outputs[0], outputs[1])
    assert not torch.equal(outputs[1], tb.audio.Stream(model, block_size=2048).process(audio))
    pytest.importorskip("onnxscript")
    onnxruntime = pytest.importorskip("onnxruntime")
    path = tb.export.onnx(bended, tmp_path / "bent.onnx", x=x)
    session = onnxruntime.InferenceSession(str(path))
    (got,) = session.run(None, {"x": x.numpy()})
    assert torch.allclose(torch.from_numpy(got), bended(x), atol=1e-5)


def test_export_graphs_hold_for_any_length_and_go_to_nntilde(tmp_path):
    """torch.export leaves sizes symbolic where the code allows: one graph for any length; it
    fixes sizes of 1 (a batch of one), which nn~ export explains."""
    model = tb.models.load("tiny_rave")
    bended = tb.BendedModule(model, backend="export")
    bended.trace(x=torch.randn(1, 1, 2048))
    for length in (4096, 512, 8192):
        x = torch.randn(1, 1, length)
        assert torch.allclose(bended(x), model(x), atol=1e-5)
    assert len(bended.graphs()) == 1
    with pytest.raises(tb.ExportError, match=r"traced by the export backend.*batch of 2 or more"):
        tb.export.nntilde(bended, tmp_path / "model.ts")
    assert not (tmp_path / "model.ts").exists()
    bended = tb.BendedModule(model, backend="export")
    bended.trace(x=torch.randn(2, 1, 2048))
    bended.bend(tb.Scale(0.0), "encoder_2$")
    assert "forward" in str(tb.export.nntilde(bended, tmp_path / "model.ts"))
    exported = torch.jit.load(str(tmp_path / "model.ts"))
    x = torch.randn(4, 1, 1024)
    assert torch.allclose(exported(x), bended(x), atol=1e-5)


class LongOrShort(nn.Module):
    def forward(self, x):
        y = x.reshape(x.shape[0], -1, 8)
        return y * 2 if x.shape[-1] > 100 else y


def test_a_size_outside_what_torch_export_guarded_traces_again():
    model = LongOrShort()
    bended = tb.BendedModule(model, backend="export")
    bended.trace(x=torch.randn(2, 3, 256))
    for length in (512, 64):
        x = torch.randn(2, 3, length)
        assert torch.equal(bended(x), model(x))
    assert len(bended.graphs()) == 2  # 256 and 512 share one; 64 takes the other branch


def test_what_torch_export_tripped_on_names_the_users_line(capfd):
    class Data(nn.Module):
        def forward(self, x):
            return x[: int(x.sum().item())]  # a length read from data

    with pytest.raises(tb.TracingError, match=r"test_export_backend\.py:\d+ \(return x\[: int"):
        tb.BendedModule(Data(), backend="export").trace(x=torch.ones(3, 4))
    assert "def forward" not in capfd.readouterr().err  # no partial graph printed
