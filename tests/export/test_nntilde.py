"""nn~ export: the nn~ Python contract, the checks run at export, streaming state, bad inputs."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
from export_models import Blowing
from torch import nn

import torchbend as tb
from torchbend.errors import ExportError
from torchbend.export import check_nntilde, nntilde, torchscript


class Encoder(nn.Module):
    """Compresses time by ``ratio``: [B, 1, T] -> [B, 2, T / ratio]."""

    def __init__(self, ratio: int = 2048) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 4, ratio, stride=ratio)
        self.proj = nn.Conv1d(4, 2, 1)

    def forward(self, x):
        return self.proj(torch.tanh(self.conv(x)))


class Causal(nn.Module):
    """A streaming causal convolution: keeps the last ``context`` input samples of each batch
    row in a buffer and prepends them to the next block."""

    def __init__(self, context: int = 2, max_batch: int = 4) -> None:
        super().__init__()
        self.context = context
        self.conv = nn.Conv1d(1, 2, context + 1)
        self.register_buffer("cache", torch.zeros(max_batch, 1, context))

    def forward(self, x):
        x = torch.cat([self.cache[: x.shape[0]], x], -1)
        self.cache[: x.shape[0]] = x[..., x.shape[-1] - self.context :]
        return self.conv(x)


def bended_encoder(ratio: int = 2048) -> tb.BendedModule:
    torch.manual_seed(0)
    bended = tb.BendedModule(Encoder(ratio))
    bended.trace(x=torch.randn(1, 1, 2 * ratio))
    gain = tb.BendingParameter("gain", 1.0, range=(0.0, 2.0))
    bended.bend(tb.Scale(gain), "tanh$")
    bended.bend(tb.Bias(0.5 * gain), r"proj\.bias")
    return bended


def test_ratio_and_channels_are_inferred_and_checked(tmp_path):
    report = nntilde(bended_encoder(), tmp_path / "enc.ts")
    (method,) = report.methods
    assert (method.in_channels, method.in_ratio, method.out_channels, method.out_ratio) == (
        1,
        1,
        2,
        2048,
    )
    assert method.buffer_sizes == (2048, 4096, 8192)
    assert report.attributes == ("gain",)
    assert "forward" in str(report)


def test_file_follows_the_nn_tilde_contract(tmp_path):
    bended = bended_encoder()
    path = tmp_path / "enc.ts"
    nntilde(bended, path, sample_rate=48000)
    m = torch.jit.load(str(path))
    assert m.get_methods() == ["forward"]
    assert m.get_attributes() == ["gain"]
    assert m.forward_params.tolist() == [1, 1, 2, 2048]
    assert m.forward_input_labels == ["(signal) model input 0"]
    assert len(m.forward_output_labels) == 2
    assert m.gain_params.tolist() == [2]  # nn~'s code for float
    assert m.get_gain() == (1.0,)
    assert m.set_gain(3.0) == -1 and m.get_gain() == (1.0,)
    assert m.set_gain(1.5) == 0 and m.get_gain() == (1.5,)
    assert m.get_sample_rate() == 48000
    bended.update("gain", 1.5)
    x = torch.randn(1, 1, 4096)
    with torch.no_grad():
        assert torch.equal(m(x), bended(x))


@pytest.mark.slow
def test_file_runs_without_torchbend(tmp_path):
    bended = bended_encoder(16)
    path = tmp_path / "enc.ts"
    nntilde(bended, path)
    x = torch.randn(4, 1, 64)
    with torch.no_grad():
        torch.save({"x": x, "y": bended(x)}, tmp_path / "expected.pt")
    code = "import sys; sys.modules['torchbend'] = None\n" + textwrap.dedent(
        f"""
        import torch
        m = torch.jit.load({str(path)!r})
        d = torch.load({str(tmp_path / "expected.pt")!r})
        assert m.get_methods() == ["forward"] and m.get_attributes() == ["gain"]
        with torch.no_grad():
            assert torch.equal(m.forward(d["x"]), d["y"])
        assert m.set_gain(1.5) == 0 and m.get_gain() == (1.5,)
        """
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_params_and_labels_can_be_given(tmp_path):
    path = tmp_path / "enc.ts"
    nntilde(
        bended_encoder(16),
        path,
        params={"forward": [1, 1, 2, 16]},
        input_labels={"forward": ["audio"]},
        output_labels={"forward": ["latent 0", "latent 1"]},
    )
    m = torch.jit.load(str(path))
    assert m.forward_output_labels == ["latent 0", "latent 1"]


def test_a_wrong_override_fails_the_self_test_and_leaves_no_file(tmp_path):
    path = tmp_path / "enc.ts"
    with pytest.raises(
        ExportError, match=r"'forward'.*expected output shape \[1, 3, 1\].*got \[1, 2, 1\]"
    ):
        nntilde(bended_encoder(16), path, params={"forward": [1, 1, 3, 16]})
    assert not path.exists()


def test_streaming_state_carries_across_calls(tmp_path):
    torch.manual_seed(0)
    model = Causal()
    bended = tb.BendedModule(model)
    bended.trace(x=torch.randn(1, 1, 64))
    model.cache.zero_()  # tracing ran the model once
    bended.bend(tb.Scale(0.5), r"conv\.weight")
    path = tmp_path / "causal.ts"
    nntilde(bended, path)
    exported = torch.jit.load(str(path))
    x = torch.randn(4, 1, 256)
    with torch.no_grad():
        blocks = torch.cat([exported(b) for b in x.split(64, -1)], -1)
        model.cache.zero_()
        whole = bended(x)
    assert torch.equal(blocks, whole)


def test_check_nntilde_rejects_a_plain_torchscript_file(tmp_path):
    path = tmp_path / "plain.pt"
    torchscript(bended_encoder(16), path)
    with pytest.raises(ExportError, match="not an nn~ file"):
        check_nntilde(path)


def test_unscriptable_callback(tmp_path):
    bended = bended_encoder(16)
    bended.bend(tb.Lambda(torch.sin), "tanh$")
    with pytest.raises(ExportError, match=r"Lambda.*scriptable = False"):
        nntilde(bended, tmp_path / "x.ts")


def test_method_not_traced(tmp_path):
    with pytest.raises(ExportError, match=r"'decode'.*traced: \['forward'\]"):
        nntilde(bended_encoder(16), tmp_path / "x.ts", methods=["decode"])


def test_wrong_rank_output(tmp_path):
    class Pool(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = nn.Conv1d(1, 3, 1)

        def forward(self, x):
            return self.conv(x).mean(-1)

    bended = tb.BendedModule(Pool())
    bended.trace(x=torch.randn(1, 1, 64))
    with pytest.raises(ExportError, match=r"'forward'.*3-D output.*2-D \[1, 3\]"):
        nntilde(bended, tmp_path / "x.ts")


def test_ratio_that_is_not_a_power_of_two(tmp_path):
    bended = tb.BendedModule(nn.Sequential(nn.Conv1d(1, 2, 3, stride=3)))
    bended.trace(input=torch.randn(1, 1, 48))
    with pytest.raises(ExportError, match=r"out_ratio 3 is not a power of two"):
        nntilde(bended, tmp_path / "x.ts")


class Chunks(nn.Module):
    """Runs its convolution on chunks of 16 samples: its graph depends on the input's length."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 1, 1)

    def forward(self, x):
        return torch.cat([self.conv(x[..., i : i + 16]) for i in range(0, x.shape[-1], 16)], -1)


def test_graph_that_depends_on_the_length(tmp_path):
    bended = tb.BendedModule(Chunks())
    bended.trace(x=torch.randn(1, 1, 64))
    with pytest.raises(ExportError, match=r"takes other decisions .* read x\.shape\[-1\]"):
        nntilde(bended, tmp_path / "x.ts")


def test_a_failed_export_leaves_the_module_as_it_was(tmp_path):
    bended = tb.BendedModule(Chunks())
    graph = bended.trace(x=torch.randn(1, 1, 64))
    bended.bend(tb.Scale(2.0), "conv$")
    x = torch.randn(1, 1, 64)
    before = (bended(x), bended.graphs(), bended.traced_methods, bended.bended_keys())
    state = {k: v.clone() for k, v in bended.state_dict().items()}
    with pytest.raises(ExportError):
        nntilde(bended, tmp_path / "x.ts")
    assert bended.graphs() == before[1] and bended.graph() is graph
    assert bended.traced_methods == before[2] and bended.bended_keys() == before[3]
    assert torch.equal(bended(x), before[0])
    assert {k: v for k, v in bended.state_dict().items()}.keys() == state.keys()
    assert all(torch.equal(v, state[k]) for k, v in bended.state_dict().items())
    assert not (tmp_path / "x.ts").exists()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"sample_rate": 0}, r"sample_rate must be 1000 to 768000 Hz, got 0"),
        ({"sample_rate": -44100}, r"sample_rate must be 1000 to 768000 Hz, got -44100"),
        ({"sample_rate": 10**9}, r"sample_rate must be 1000 to 768000 Hz"),
        ({"sample_rate": 44100.5}, r"sample_rate must be a whole number of Hz, got 44100.5"),
        ({"sample_rate": "44100"}, r"sample_rate must be a whole number of Hz, got '44100'"),
        ({"sample_rate": True}, r"sample_rate must be a whole number of Hz, got True"),
        ({"min_buffer_size": 0}, r"min_buffer_size must be 1 to 8192 samples, got 0"),
        ({"min_buffer_size": 100}, r"min_buffer_size must be a power of two .* got 100"),
        ({"params": {"forward": [1, 1.5, 2, 16]}}, r"params\['forward'\] must be a whole"),
        ({"params": {"forward": "1 1 2 16"}}, r"params\['forward'\] must be \[in_channels"),
        ({"params": {"decode": [1, 1, 2, 16]}}, r"params given for \['decode'\], which are not"),
        ({"input_labels": {"forward": "audio"}}, r"input_labels\['forward'\] must be a list"),
        ({"methods": [1]}, r"methods must be names of methods, got \[1\]"),
    ],
)
def test_arguments_out_of_their_bounds_are_refused(tmp_path, options, message):
    with pytest.raises(ExportError, match=message):
        nntilde(bended_encoder(16), tmp_path / "x.ts", **options)
    assert not (tmp_path / "x.ts").exists()


def test_methods_and_sample_rate_may_be_given_plainly(tmp_path):
    report = nntilde(bended_encoder(16), tmp_path / "x.ts", "forward", sample_rate=48000.0)
    assert [m.name for m in report.methods] == ["forward"] and report.sample_rate == 48000


def test_a_plain_module_needs_params_and_is_then_wrapped(tmp_path):
    torch.manual_seed(0)
    model = Encoder(16)
    with pytest.raises(ExportError, match=r"plain Encoder.*tb.BendedModule\(model\).*params="):
        nntilde(model, tmp_path / "x.ts")
    report = nntilde(model, tmp_path / "x.ts", params={"forward": [1, 1, 2, 16]})
    assert report.methods[0].out_ratio == 16
    x = torch.randn(1, 1, 64)
    with torch.no_grad():
        assert torch.equal(torch.jit.load(str(tmp_path / "x.ts"))(x), model(x))
    with pytest.raises(ExportError, match=r"exports a tb.BendedModule .* got function"):
        nntilde(lambda x: x, tmp_path / "y.ts")  # type: ignore[arg-type]


class WithOptions(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(1, 2, 1)

    def forward(self, x: torch.Tensor, gain: float = 1.0, mask: torch.Tensor | None = None):
        y = self.conv(x) * gain
        return y if mask is None else y * mask


def test_extra_arguments_with_defaults_keep_them(tmp_path):
    bended = tb.BendedModule(WithOptions())
    bended.trace(x=torch.randn(1, 1, 64))
    report = nntilde(bended, tmp_path / "x.ts")
    assert report.methods[0].out_channels == 2
    x = torch.randn(1, 1, 64)
    with torch.no_grad():
        assert torch.equal(torch.jit.load(str(tmp_path / "x.ts"))(x), bended(x))


def test_safety_keeps_a_blown_up_export_within_full_scale_as_python_does(tmp_path):
    torch.manual_seed(0)
    bended = tb.BendedModule(Blowing())
    bended.trace(x=torch.randn(1, 1, 2048))
    bended.bend(tb.Scale(1e6), "act$")
    nntilde(bended, tmp_path / "raw.ts")
    nntilde(bended, tmp_path / "safe.ts", safety=True)
    raw, safe = (torch.jit.load(str(tmp_path / f"{n}.ts")) for n in ("raw", "safe"))
    stage = tb.audio.Safety(44100)
    for _ in range(3):  # the stage's state goes on from call to call, as nn~ calls it
        x = torch.randn(1, 1, 2048) * 0.1
        with torch.no_grad():
            expected = bended(x)
            assert torch.equal(raw(x), expected) and expected.abs().max() > 1e3
            got = safe(x)
            assert got.abs().max() <= 1
            torch.testing.assert_close(got, stage(expected), atol=1e-6, rtol=0)
    assert safe.get_methods() == ["forward"] and safe.forward_params.tolist() == [1, 1, 1, 1]


class AutoEncoder(nn.Module):
    """Audio [B, 1, T] to latents [B, 2, T / 16] and back."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_in = nn.Conv1d(1, 2, 16, stride=16)
        self.conv_out = nn.ConvTranspose1d(2, 1, 16, stride=16)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv_in(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.conv_out(z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))


def test_safety_goes_on_audio_outputs_only(tmp_path):
    torch.manual_seed(0)
    bended = tb.BendedModule(AutoEncoder())
    bended.trace("encode", x=torch.randn(1, 1, 256))
    bended.trace("decode", z=torch.randn(1, 2, 16))
    bended.bend(tb.Scale(1e3), "conv_in$")
    methods = ["encode", "decode"]
    nntilde(bended, tmp_path / "x.ts", methods, safety=tb.audio.Safety(44100, threshold=0.5))
    exported = torch.jit.load(str(tmp_path / "x.ts"))
    x = torch.randn(1, 1, 256)
    with torch.no_grad():
        z = exported.encode(x)
        assert torch.equal(z, bended.call("encode", x)) and z.abs().max() > 10  # latents
        assert exported.decode(z * 1e3).abs().max() <= 1
    with pytest.raises(ExportError, match="no exported method gives audio"):
        nntilde(bended, tmp_path / "y.ts", "encode", safety=True)
    assert not (tmp_path / "y.ts").exists()


def test_safety_settings_are_checked(tmp_path):
    bended = tb.BendedModule(Blowing())
    bended.trace(x=torch.randn(1, 1, 64))
    with pytest.raises(ExportError, match="works at 48000 Hz and the export at 44100 Hz"):
        nntilde(bended, tmp_path / "x.ts", safety=tb.audio.Safety(48000))
    with pytest.raises(ExportError, match=r"safety must be True, False or a tb\.audio\.Safety"):
        nntilde(bended, tmp_path / "x.ts", safety="on")  # type: ignore[arg-type]
    nntilde(bended, tmp_path / "x.ts", sample_rate=48000, safety=tb.audio.Safety(48000))


class Stride4(nn.Module):
    """An autoencoder without a ``ratio`` attribute: a stride-4 encoder, a transposed decoder;
    its forward maps [B, 1, T] to [B, 1, T] and fails on fewer than 4 samples."""

    def __init__(self) -> None:
        super().__init__()
        self.conv_in = nn.Conv1d(1, 3, 4, stride=4)
        self.conv_out = nn.ConvTranspose1d(3, 1, 4, stride=4)

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv_in(x))

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return self.conv_out(z)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))


def test_the_smallest_buffer_is_the_largest_ratio_of_the_methods(tmp_path):
    torch.manual_seed(0)
    bended = tb.BendedModule(Stride4())
    bended.trace(x=torch.randn(1, 1, 256))
    bended.trace("encode", x=torch.randn(1, 1, 256))
    bended.trace("decode", z=torch.randn(1, 3, 64))
    bended.bend(tb.Scale(2.0), "tanh$")
    path = tmp_path / "ae.ts"
    report = nntilde(bended, path, ["forward", "encode", "decode"])
    assert {m.name: m.buffer_sizes[0] for m in report.methods} == {
        "forward": 4,
        "encode": 4,
        "decode": 4,
    }
    assert [m.buffer_sizes[-1] for m in report.methods] == [8192] * 3
    assert {m.name: (m.in_ratio, m.out_ratio) for m in report.methods} == {
        "forward": (1, 1),
        "encode": (1, 4),
        "decode": (4, 1),
    }
    exported = torch.jit.load(str(path))
    assert exported.min_buffer_size.tolist() == [4]
    x = torch.randn(4, 1, 4)  # the smallest buffer nn~ gives
    with torch.no_grad():
        assert torch.equal(exported(x), bended(x))
        assert torch.equal(exported.encode(x), bended.call("encode", x))
    # A smaller min_buffer_size is raised to the ratio.
    report = nntilde(bended, path, ["forward", "encode"], min_buffer_size=2)
    assert [m.buffer_sizes[0] for m in report.methods] == [4, 4]
    # A larger one is kept, and nn~'s smaller buffers go through a FIFO of that block.
    report = nntilde(bended, path, ["forward", "encode"], min_buffer_size=16)
    assert [m.buffer_sizes[0] for m in report.methods] == [4, 4] and report.fifo_block == 16
    # forward alone shows no ratio: it needs min_buffer_size, and takes every buffer with it.
    with pytest.raises(ExportError, match=r"'forward'.*shape \[1, 1, 1\] \(buffer 1\)"):
        nntilde(bended, tmp_path / "alone.ts")
    alone = nntilde(bended, tmp_path / "alone.ts", min_buffer_size=4)
    assert alone.methods[0].buffer_sizes[0] == 1 and alone.fifo_block == 4


def test_a_model_that_can_stream_exported_offline_is_refused(tmp_path):
    """nn~ runs the file buffer by buffer: a model with set_streaming traced offline would
    click at every buffer."""
    x = torch.randn(1, 1, 2048, generator=torch.Generator().manual_seed(0)) * 0.1
    offline = tb.BendedModule(tb.models.load("tiny_rave"))
    offline.trace(x=x)
    with pytest.raises(ExportError, match=r"keeps no state .*set_streaming\(True\)"):
        nntilde(offline, tmp_path / "offline.ts")
    assert not (tmp_path / "offline.ts").exists()
    model = tb.models.load("tiny_rave").set_streaming(True)
    streaming = tb.BendedModule(model)
    streaming.trace(x=x)
    with torch.no_grad():  # state left in the caches, which the file must not start from
        streaming(x=x)
    nntilde(streaming, tmp_path / "streaming.ts")
    exported = torch.jit.load(str(tmp_path / "streaming.ts"))
    signal = torch.randn(1, 1, 8192, generator=torch.Generator().manual_seed(1)) * 0.1
    with torch.no_grad():
        blocks = torch.cat([exported(b) for b in signal.split(512, -1)], -1)
        torch.testing.assert_close(blocks, tb.models.load("tiny_rave")(signal), atol=1e-6, rtol=0)


def test_an_export_is_checked_from_silence_and_leaves_the_models_caches_as_they_were(tmp_path):
    """The file starts from silence, and so does the run it is checked against; the model
    keeps the state its own calls left in its caches."""
    x = torch.randn(1, 1, 2048, generator=torch.Generator().manual_seed(0)) * 0.1
    model = tb.models.load("tiny_rave").set_streaming(True)
    bended = tb.BendedModule(model)
    bended.trace(x=x)
    with torch.no_grad():
        bended(x=x)
    caches = {name: b.clone() for name, b in model.named_buffers()}
    assert any(b.abs().sum() > 0 for b in caches.values())
    scripted = torchscript(bended)  # checked on x from silence
    nntilde(bended, tmp_path / "streaming.ts")
    for name, b in model.named_buffers():
        assert torch.equal(b, caches[name]), name
    fresh = tb.models.load("tiny_rave").set_streaming(True)
    with torch.no_grad():
        torch.testing.assert_close(scripted(x), fresh(x), atol=1e-6, rtol=0)


def test_a_streaming_model_bent_to_silence_is_not_refused(tmp_path):
    """A file whose output ignores its input has nothing to click with: the streaming check
    does not take it for a file that keeps no state."""
    model = tb.models.load("tiny_rave").set_streaming(True)
    bended = tb.BendedModule(model)
    bended.trace(x=torch.randn(1, 1, 2048, generator=torch.Generator().manual_seed(0)))
    bended.bend(tb.Scale(0.0), "encoder_2$")  # a zero latent: the decoder gives silence
    nntilde(bended, tmp_path / "silent.ts")
    exported = torch.jit.load(str(tmp_path / "silent.ts"))
    with torch.no_grad():
        assert not exported(torch.randn(1, 1, 2048)).any()
