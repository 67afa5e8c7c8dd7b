"""Tutorial: export a bent model for Max/MSP and Pure Data (nn~), TorchScript and torch.export.

Run: python examples/07_export_for_nntilde.py [--out DIR] [--smoke]

Bends TinyDDSP (``torchbend.models.load("tiny_ddsp")``) with two knobs (``gain``, ``drive``)
and exports it three ways, into DIR (default ``out/examples/07``):

- ``tiny_ddsp_bent.ts`` with ``tb.export.nntilde``: ``forward``, ``encode`` and
  ``decode`` methods, the knobs as nn~ attributes (``set gain 0.5`` in Max), checked with
  ``tb.export.check_nntilde`` the way nn~ will call it (report in ``nntilde_report.txt``);
- ``tiny_ddsp_bent.pt`` with ``tb.export.torchscript``, reloaded with ``torch.jit.load``
  and compared with the bended model, before and after turning a knob;
- ``tiny_ddsp_bent.pt2`` with ``tb.export.pt2`` (knobs frozen), reloaded with
  ``torch.export.load`` and compared.

``--smoke`` exports only ``forward`` to nn~. ``examples/07_play_in_pd.pd`` plays the nn~ file
in Pure Data, with the knobs on message boxes (docs/hosts.md: playing in Max and Pd).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import torchbend as tb
from torchbend.models import load


def bend(bended: tb.BendedModule) -> None:
    """The same two knobs on any traced TinyDDSP (on its decoder: the timbre)."""
    gain = tb.BendingParameter("gain", 1.0, range=(0.0, 2.0))
    drive = tb.BendingParameter("drive", 2.0, range=(0.0, 10.0))
    bended.bend(tb.Scale(gain), "decoder_1$")  # an activation: read at each call
    bended.bend(tb.SoftClip(drive), "decoder_0$")
    bended.bend(tb.Scale(1.5), r"decoder\.0\.weight")  # a weight: bent once, frozen in


def export_for_nntilde(out: Path, smoke: bool = False) -> Path:
    """1. nn~, traced per method, in streaming mode: TinyDDSP's caches, oscillator phases and
    noise position carry from one buffer nn~ gives to the next, so buffers join without
    clicks. Returns the file (examples/07_play_in_pd.pd plays it in Pure Data)."""
    x = torch.randn(1, 1, 8192) * 0.1
    model = load("tiny_ddsp")
    model.set_streaming(True)
    bended = tb.BendedModule(model)
    bended.trace(x=x)
    methods = ("forward",) if smoke else ("forward", "encode", "decode")
    if not smoke:
        bended.trace("encode", x=x)
        bended.trace("decode", z=model.encode(x).detach())
    bend(bended)
    path = out / "tiny_ddsp_bent.ts"
    report = tb.export.nntilde(bended, path, methods=methods, sample_rate=model.sample_rate)
    print(report)
    # check_nntilde works on any .ts file, ours or downloaded.
    checked = tb.export.check_nntilde(path)
    (out / "nntilde_report.txt").write_text(str(checked) + "\n")
    print(f"wrote {path} and {out / 'nntilde_report.txt'}")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/07"))
    parser.add_argument("--smoke", action="store_true", help="export forward only to nn~")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    export_for_nntilde(args.out, args.smoke)
    x = torch.randn(1, 1, 8192) * 0.1

    # 2. TorchScript and .pt2 of an offline model, each reloaded and compared.
    offline = tb.BendedModule(load("tiny_ddsp"))
    offline.trace(x=x)
    bend(offline)
    with torch.no_grad():
        expected = offline(x)
    path = args.out / "tiny_ddsp_bent.pt"
    tb.export.torchscript(offline, path)
    scripted = torch.jit.load(str(path))  # needs torch only, not torchbend
    print(f"wrote {path}; TorchScript max error: {(scripted(x) - expected).abs().max():.2e}")
    scripted.set_drive(8.0)  # the knob, in the exported file...
    offline.update("drive", 8.0)  # ...and in Python
    with torch.no_grad():
        error = (scripted(x) - offline(x)).abs().max()
    print(f"  after set_drive(8.0): max error {error:.2e}")

    path = args.out / "tiny_ddsp_bent.pt2"
    tb.export.pt2(offline, path, x=x)  # knobs frozen at their current values
    program = torch.export.load(str(path)).module()
    with torch.no_grad():
        error = (program(x=x) - offline(x)).abs().max()
    print(f"wrote {path}; torch.export max error: {error:.2e}")


if __name__ == "__main__":
    main()
