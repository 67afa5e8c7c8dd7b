"""The FIFO of nn~ files: any buffer nn~ gives, the output delayed by one block, the latency."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from torch import nn

import torchbend as tb
from torchbend.errors import ExportError
from torchbend.export import latency, nntilde, torchscript
from torchbend.export.fifo import BlockFifo
from torchbend.export.reader import read_latency, read_metadata


class Pooled(nn.Module):
    """Needs blocks of 8 samples: [B, 1, T] -> [B, 3, T / 4], each frame the mean of 4."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[2] % 8 != 0:
            raise Exception("blocks of 8 samples only")
        y = nn.functional.avg_pool1d(x, 4)
        return torch.cat([y, 2 * y, 3 * y], 1)


class Blocked(nn.Module):
    """Maps T to T, through a stride-16 code: runs on multiples of ``ratio`` samples only."""

    def __init__(self) -> None:
        super().__init__()
        self.ratio = 16
        self.latency = 3
        self.down = nn.Conv1d(1, 4, 16, stride=16)
        self.up = nn.ConvTranspose1d(4, 1, 16, stride=16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.up(torch.tanh(self.down(x)))


def calls(fn, x: torch.Tensor, sizes: list[int], ratio: int = 1) -> torch.Tensor:
    """``fn`` called on consecutive pieces of ``x`` of ``sizes`` samples (frames of ``ratio``)."""
    out, at = [], 0
    for n in sizes:
        out.append(fn(x[..., at : at + n // ratio]))
        at += n // ratio
    return torch.cat(out, -1)


def test_any_call_size_gives_the_graph_delayed_by_one_block():
    torch.manual_seed(0)
    fifo = torch.jit.script(BlockFifo(torch.jit.script(Pooled()), 8, 1, 4, 3))
    x = torch.randn(2, 1, 96)
    sizes = [4, 12, 8, 20, 4, 16, 32]  # out_ratio 4 divides each; not 8
    y = calls(fifo, x, sizes)
    expected = Pooled()(x)
    assert y.shape == (2, 3, 24)
    assert torch.equal(y[..., :2], torch.zeros(2, 3, 2))  # 8 samples of silence, 2 frames
    assert torch.equal(y[..., 2:], expected[..., :-2])
    with pytest.raises(Exception, match="multiple of 4 samples, got 6"):
        fifo(torch.zeros(2, 1, 6))


def test_whole_blocks_pass_straight_until_one_call_does_not():
    torch.manual_seed(0)
    graph = torch.jit.script(Pooled())
    fifo = torch.jit.script(BlockFifo(graph, 8, 1, 4, 3))
    x = torch.randn(1, 1, 64)
    y = calls(fifo, x, [16, 8, 4, 4, 16, 16])  # the 3rd call brings half a block
    full = graph(x)
    assert torch.equal(y[..., :6], full[..., :6])  # no latency while the blocks are whole
    assert torch.equal(y[..., 6:8], torch.zeros(1, 3, 2))  # then one block of silence...
    assert torch.equal(y[..., 8:], full[..., 6:-2])  # ...and the stream goes on, delayed
    # A new batch size starts over: whole blocks pass straight again.
    z = torch.randn(3, 1, 16)
    assert torch.equal(fifo(z), graph(z))


def test_ratio_one_graphs_take_calls_of_one_sample():
    torch.manual_seed(0)
    graph = torch.jit.script(nn.Sequential(nn.Conv1d(2, 2, 1)))
    fifo = torch.jit.script(BlockFifo(graph, 8, 1, 1, 2))
    x = torch.randn(1, 2, 40)
    y = calls(fifo, x, [1, 3, 5, 7, 1, 23])
    with torch.no_grad():
        assert torch.allclose(y[..., 8:], graph(x)[..., :-8], atol=1e-6, rtol=0)
    assert torch.equal(y[..., :8], torch.zeros(1, 2, 8))


# -- exported models ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Streaming exports: TinyDDSP's forward alone (blocks of 256: its hop), and TinyRave's
    forward, encode and decode asked for blocks of 64 (its ratio is 16)."""
    folder = tmp_path_factory.mktemp("fifo")
    paths = {"tiny_ddsp": folder / "ddsp.ts", "tiny_rave": folder / "rave.ts"}
    reports = {}
    reports["tiny_ddsp"] = nntilde(
        tb.models.load("tiny_ddsp"), paths["tiny_ddsp"], params={"forward": [1, 1, 1, 1]}
    )
    rave = {"forward": [1, 1, 1, 1], "encode": [1, 1, 16, 16], "decode": [16, 16, 1, 1]}
    reports["tiny_rave"] = nntilde(
        tb.models.load("tiny_rave"), paths["tiny_rave"], list(rave), params=rave, min_buffer_size=64
    )
    return paths, reports


def signal(n: int) -> torch.Tensor:
    torch.manual_seed(0)
    t = torch.arange(n) / 44100
    return (0.3 * torch.sin(2 * torch.pi * 220 * t) + 0.05 * torch.randn(n)).view(1, 1, n)


@pytest.mark.parametrize("name", ["tiny_rave", "tiny_ddsp"])
def test_an_export_plays_at_every_buffer_as_the_plain_file_delayed(exported, name):
    path = exported[0][name]
    block = int(torch.jit.load(str(path)).fifo_block)
    assert block == {"tiny_rave": 64, "tiny_ddsp": 256}[name]
    x = signal(1024)
    with torch.no_grad():
        plain = calls(torch.jit.load(str(path)).forward, x, [block] * (1024 // block))
        for buffer in (1, 64, 256):
            y = calls(torch.jit.load(str(path)).forward, x, [buffer] * (1024 // buffer))
            delay = block if buffer < block else 0
            assert torch.equal(y[..., :delay], torch.zeros(1, 1, delay))
            # Same float operations, grouped in other calls: equal up to rounding.
            torch.testing.assert_close(
                y[..., delay:], plain[..., : 1024 - delay], atol=1e-5, rtol=0
            )
        # From 256-sample buffers to 8 mid-stream: one block of silence, then delayed.
        y = calls(torch.jit.load(str(path)).forward, x, [256, 256] + [8] * 64)
    assert torch.allclose(y[..., :512], plain[..., :512], atol=1e-5, rtol=0)
    assert torch.equal(y[..., 512 : 512 + block], torch.zeros(1, 1, block))
    assert torch.allclose(y[..., 512 + block :], plain[..., 512 : 1024 - block], atol=1e-5, rtol=0)


def test_methods_with_ratios_take_every_buffer_from_the_largest_ratio(exported):
    path, report = exported[0]["tiny_rave"], exported[1]["tiny_rave"]
    assert report.fifo_block == 64 and [m.buffer_sizes[0] for m in report.methods] == [16] * 3
    # encode (1 -> 16 channels at ratio 16) and decode called with 16 samples: one frame.
    x = signal(512)
    with torch.no_grad():
        plain = torch.jit.load(str(path))
        z_plain = calls(plain.encode, x, [64] * 8)
        small = torch.jit.load(str(path))
        z = calls(small.encode, x, [16] * 32)
        assert torch.equal(z[..., :4], torch.zeros(1, 16, 4))
        torch.testing.assert_close(z[..., 4:], z_plain[..., :-4], atol=1e-5, rtol=0)
        y = calls(small.decode, z_plain, [16] * 32, ratio=16)
        y_plain = calls(plain.decode, z_plain, [64] * 8, ratio=16)
    assert torch.equal(y[..., :64], torch.zeros(1, 1, 64))
    torch.testing.assert_close(y[..., 64:], y_plain[..., :-64], atol=1e-5, rtol=0)


def test_an_old_file_fails_the_check_at_small_buffers(tmp_path, monkeypatch):
    path = tmp_path / "old.ts"
    bended = tb.BendedModule(Blocked())
    bended.trace(x=torch.randn(2, 1, 64))
    assert nntilde(bended, path).fifo_block == 16
    # Without the FIFO (as exports before it were), nn~'s 8-sample buffers fail.
    monkeypatch.setattr(sys.modules["torchbend.export.nntilde"], "fifo_block", lambda *a: 0)
    with pytest.raises(ExportError, match=r"buffer 1\).*min_buffer_size \(16\): re-export"):
        nntilde(bended, path)
    assert not path.exists()


def test_the_file_carries_its_delays_and_the_table_adds_nn_tilde_buffering(exported, tmp_path):
    path, report = exported[0]["tiny_ddsp"], exported[1]["tiny_ddsp"]
    file = torch.jit.load(str(path))
    assert (file.latency, file.fifo_block) == (256, 256)
    declared = {"model": 256, "fifo_block": 256, "smallest_buffer": 1}
    assert read_latency(path) == declared and read_metadata(path)["latency"] == declared
    assert json.loads(file.get_controls_json())["latency"] == declared
    assert [report.latency(n) for n in (1, 128, 256, 8192)] == [512, 512, 256, 256]
    assert "512 at buffers 1..128; 256 at buffers 256..8192" in str(report)
    table = latency(path, sample_rates=[48000])
    rows = {r.buffer: r for r in table.rows}
    assert list(rows) == [2**k for k in range(14)]
    assert (rows[64].host, rows[64].fifo, rows[64].model, rows[64].total) == (64, 256, 256, 576)
    assert rows[256].total == 448 + 256 and rows[32].total is None
    record = next(r for r in table.records() if r["buffer"] == 64)
    assert record["total_ms"] == 12.0 and record["fifo_ms"] == 256 / 48
    # A file without the metadata: read from its attributes (here, none: no delay).
    bended = tb.BendedModule(nn.Conv1d(1, 1, 1))
    bended.trace(input=torch.randn(1, 1, 8))
    torchscript(bended, tmp_path / "plain.ts")
    assert [r.total for r in latency(tmp_path / "plain.ts", [64, 128]).rows] == [64, 192]
    with pytest.raises(ExportError, match="powers of two from 1"):
        latency(path, [48])
