"""Tutorial: freeze bent weights as versions, switch between them, and interpolate.

Run: python examples/06_versions_and_interpolation.py [--out DIR] [--smoke]

With TinyDDSP (``torchbend.models.load("tiny_ddsp")``) on the sung line: two weight bendings
of its decoder are frozen with ``write`` as versions ``noisy`` and ``permuted``, and the weights
of an untrained TinyDDSP are imported as version ``untrained`` (``create_version``). It renders
each version with ``set_version`` (``version_<name>.wav``: the same pitch and level, another
timbre), a walk from the original weights to ``noisy`` with ``interpolate``
(``original_to_noisy_<k>.wav``), a three-way mix (``three_way.wav``), and checks that leaving
the ``with`` block restores the original. Files go to DIR (default ``out/examples/06``).
``--smoke`` crops the voice to one second and walks in fewer steps.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch

import torchbend as tb
from torchbend.audio import load as load_audio
from torchbend.audio import save
from torchbend.audio.safety import FILE_CEILING
from torchbend.models import TinyDDSP, load

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path("out/examples/06"))
    parser.add_argument("--smoke", action="store_true", help="one second of audio, 3 steps")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    model = load("tiny_ddsp")
    sr = model.sample_rate
    audio, _ = load_audio(REPO / "assets/sounds/voice.wav", sample_rate=sr, mono=True)
    x = audio[None, :, : int((1.0 if args.smoke else 4.0) * sr) // model.ratio * model.ratio]

    bended = tb.BendedModule(model)
    bended.trace(x=x)

    # write() freezes the current weights, bendings included, under a name.
    bended.bend(tb.Noise(std=0.3, op="mul", seed=0), r"decoder\.[06]\.weight")
    bended.write("noisy")
    bended.reset()
    # decoder.6 is the head: its rows spread the power over harmonics and noise bands.
    bended.bend(tb.Permute(dim=0, seed=0, amount=0.3), r"decoder\.6\.weight")
    bended.write("permuted")
    bended.reset()
    # Any checkpoint with the same weight names can be a version: here, untrained weights.
    torch.manual_seed(0)
    bended.create_version("untrained", TinyDDSP())
    print("versions:", bended.versions)

    def render(name: str) -> torch.Tensor:
        with torch.no_grad():
            y = bended(x)
        # For listening: the safety stage (a soft limiter within -0.3 dBFS), not a hard clip.
        safety = tb.audio.Safety(sr, ceiling=FILE_CEILING)
        print(f"wrote {save(args.out / f'{name}.wav', safety(y[0]), sr)} ({safety.stats})")
        return y

    original = render("version_original")
    for version in bended.versions[1:]:
        with bended.set_version(version):  # as a context manager: switch back on exit
            render(f"version_{version}")

    # interpolate(original_weight, version=weight): a normalized mix of the versions' weights.
    steps = 3 if args.smoke else 6
    for k in range(steps):
        t = k / (steps - 1)
        with bended.interpolate(1.0 - t, noisy=t):
            render(f"original_to_noisy_{k}")
    with bended.interpolate(1.0, permuted=1.0, untrained=0.5):
        render("three_way")

    # Bendings apply on top of the active version; outside the with, the original is back.
    back = render("original_again")
    print("original restored bit for bit:", torch.equal(original, back))


if __name__ == "__main__":
    main()
