"""A RAVE-like nn~ file, made the way RAVE exports its models: streaming convolutions from
``cached_conv`` (RAVE's own library: every call updates padding caches held in buffers, and
code branches on attributes and optional biases) in an ``nn_tilde.Module`` (nn~'s Python
contract: methods registered with their ratios, an attribute with a getter and a setter),
scripted and saved. Both libraries are installed for the tests only (scripts/setup.sh).

torchbend traces its methods through torch's TorchScript converter, bends them, follows the
file's streaming state and attributes, and writes an activation-bent nn~ file back."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path

import cached_conv as cc
import nn_tilde
import pytest
import torch
from torch import nn

import torchbend as tb


def _conv(cin: int, cout: int, kernel: int, stride: int = 1) -> nn.Module:
    padding = cc.get_padding(kernel, stride, mode="causal")
    return cc.Conv1d(cin, cout, kernel, stride=stride, padding=padding)


class RaveLike(nn_tilde.Module):
    """Encoder (strided causal convolutions, ratio 4) and decoder (a cached transposed
    convolution) with nn~ methods ``encode``, ``decode``, ``forward`` and a ``gain``."""

    def __init__(self) -> None:
        super().__init__(sr=44100)
        self.encoder = cc.CachedSequential(
            _conv(1, 8, 7),
            nn.LeakyReLU(0.2),
            _conv(8, 16, 8, 4),
            nn.LeakyReLU(0.2),
            _conv(16, 8, 3),
        )
        self.pre = _conv(8, 16, 3)
        self.up = cc.ConvTranspose1d(16, 8, 8, 4, padding=2)
        self.post = _conv(8, 1, 7)
        self.register_attribute("gain", 1.0)
        self.register_method("encode", 1, 1, 8, 4, test_buffer_size=2048)
        self.register_method("decode", 8, 4, 1, 1, test_buffer_size=2048)
        self.register_method("forward", 1, 1, 1, 1, test_buffer_size=2048)

    @torch.jit.export
    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)

    @torch.jit.export
    def decode(self, z: torch.Tensor) -> torch.Tensor:
        y = self.post(torch.relu(self.up(torch.relu(self.pre(z)))))
        return torch.tanh(y) * self.gain[0]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))


@pytest.fixture(scope="module")
def rave_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    cc.use_cached_conv(True)  # as RAVE's export script does
    try:
        torch.manual_seed(0)
        path = tmp_path_factory.mktemp("rave") / "rave_like.ts"
        with torch.no_grad():
            RaveLike().eval().export_to_ts(str(path))
    finally:
        cc.use_cached_conv(False)
    return path


@pytest.fixture(autouse=True)
def no_grad() -> object:
    # nn~ runs files without gradients; with them, the caches' in-place updates fail in the
    # file itself.
    with torch.no_grad():
        yield


def _blocks(
    x: torch.Tensor, call: Callable[[torch.Tensor], torch.Tensor], size: int
) -> torch.Tensor:
    return torch.cat([call(block) for block in x.split(size, -1)], -1)


def _noise(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_the_file_streams_through_the_bended_module_as_through_itself(rave_file: Path) -> None:
    file, twin = torch.jit.load(str(rave_file)), torch.jit.load(str(rave_file))
    bended = tb.BendedModule(twin)
    x = _noise(2, 1, 2048)
    bended.trace(x=x)
    bended.trace("encode", x=x)
    bended.trace("decode", z=file.encode(x))
    assert {bended.traced_by(m) for m in ("forward", "encode", "decode")} == {"torchscript"}
    signal = _noise(1, 1, 4096, seed=1)
    file = torch.jit.load(str(rave_file))  # fresh caches, as the bended copy's
    expected = _blocks(signal, file, 512)
    got = _blocks(signal, bended, 512)
    assert torch.allclose(got, expected, atol=1e-5)
    # The caches carry state from block to block: each block on fresh caches differs.
    stateless = _blocks(signal, lambda block: torch.jit.load(str(rave_file))(block), 512)
    assert not torch.allclose(stateless, expected, atol=1e-3)


def _traced_decode(path: Path, z: torch.Tensor) -> tb.BendedModule:
    bended = tb.BendedModule(torch.jit.load(str(path)))  # fresh caches
    bended.trace("decode", z=z)
    return bended


def test_an_activation_bent_file_changes_and_resets(rave_file: Path) -> None:
    # Each call moves the caches on: every comparison is of first calls on fresh copies.
    z = _noise(2, 8, 64)
    clean = _traced_decode(rave_file, z)
    names = clean.activation_names("decode")
    assert "pre" in names and "up" in names
    expected = clean.decode(z)
    assert torch.allclose(expected, torch.jit.load(str(rave_file)).decode(z), atol=1e-5)
    bent = _traced_decode(rave_file, z)
    bent.bend(tb.Mask(0.5, dim=-2, seed=0), "decode:pre$")
    assert not torch.allclose(bent.decode(z), expected, atol=1e-3)
    reset = _traced_decode(rave_file, z)
    reset.bend(tb.Mask(0.5, dim=-2, seed=0), "decode:pre$")
    reset.reset()
    assert torch.equal(reset.decode(z), expected)


def test_a_setter_of_the_file_is_followed_not_baked_in(rave_file: Path) -> None:
    file, twin = torch.jit.load(str(rave_file)), torch.jit.load(str(rave_file))
    bended = tb.BendedModule(twin)
    z = _noise(2, 8, 64)
    bended.trace("decode", z=z)
    twin.set_gain(0.25)  # nn~ sets attributes between calls
    file.set_gain(0.25)
    assert torch.allclose(bended.decode(z), file.decode(z), atol=1e-5)
    assert bended.graphs("decode")  # traced again for the new value
    assert float(bended.decode(z).abs().max()) <= 0.25


def test_an_activation_bent_file_is_written_for_nntilde(rave_file: Path, tmp_path: Path) -> None:
    bended = tb.BendedModule(torch.jit.load(str(rave_file)))
    x = _noise(2, 1, 2048)
    bended.trace(x=x)
    bended.trace("encode", x=x)
    bended.trace("decode", z=torch.jit.load(str(rave_file)).encode(x))
    bended.bend(tb.Scale(0.5), "decode:pre$")
    bended.bend(tb.Scale(0.5), "forward:pre$")
    with pytest.warns(UserWarning, match=r"nn~ attributes \['gain'\] are not in the bent file"):
        report = tb.export.nntilde(bended, tmp_path / "bent.ts")
    assert [m.name for m in report.methods] == ["encode", "decode", "forward"]
    bent = torch.jit.load(str(tmp_path / "bent.ts"))
    original = torch.jit.load(str(rave_file))
    for method in ("encode", "decode", "forward"):
        assert torch.equal(getattr(bent, f"{method}_params"), getattr(original, f"{method}_params"))
    assert report.sample_rate == 44100
    # Streamed block by block, the written file computes what the bended module computes.
    z = _noise(1, 8, 64, seed=3)
    check = _traced_decode(rave_file, torch.cat([z, z]))
    check.bend(tb.Scale(0.5), "decode:pre$")
    expected = _blocks(z, check.decode, 16)
    got = _blocks(z, torch.jit.load(str(tmp_path / "bent.ts")).decode, 16)
    assert torch.allclose(got, expected, atol=1e-5)
    assert not torch.allclose(got, _blocks(z, torch.jit.load(str(rave_file)).decode, 16))


def test_a_file_traced_on_one_item_says_how_to_export_it(rave_file: Path, tmp_path: Path) -> None:
    bended = tb.BendedModule(torch.jit.load(str(rave_file)))
    bended.trace("decode", z=_noise(1, 8, 64))
    bended.bend(tb.Scale(0.5), "decode:pre$")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(tb.ExportError, match="Trace it on a batch of 2 or more"):
            tb.export.nntilde(bended, tmp_path / "bent.ts", methods=["decode"])
    assert not (tmp_path / "bent.ts").exists()
