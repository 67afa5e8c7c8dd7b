"""Tutorial: a sweep of bendings over the shipped sounds, measured, ranked and mapped.

Run: python examples/13_sweep.py [--out DIR] [--smoke]

One bending is rarely the interesting one: a sweep tries many (see docs/sweeps.md). This
script describes a space around ``Noise`` on one activation of the character model
(TinyDDSP, ``torchbend.models.load()``):

- which activation: the latent (``cat``, its 8 named channels) and the first five
  activations of the decoder (``decoder_0`` to ``decoder_4``), a ``targets`` axis resolved
  against the model's own activation table;
- how strong: a standard deviation from 0.02 to 0.5, spaced geometrically (``log``);
- which noise: two seeds;

and renders each point over every sound of ``assets/sounds`` (6 x 3 x 2 = 36 points, one
render per point and sound; ``--smoke``: 2 activations x 2 strengths x 1 seed over the sounds
cropped to half a second). It prints the plan (renders, disk, time), runs it with one
worker per core, then lists the five renders furthest from the unbent model among those
that did not break (clipping, silence, DC, NaN) and the five that broke the most, writes
``atlas.png`` and ``atlas.html`` (open it in a browser: hover a point to see its bending,
click it to hear it), and opens the furthest row's configuration as a ``BendingConfig``.

Everything goes to DIR (default ``out/examples/13``): ``spec.json``, the sweep folder
``sweep/`` (manifest, renders, atlas), and ``sweep.txt`` with what was printed. Run it again
and it renders nothing: the sweep resumes from its manifest.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torchbend as tb
from torchbend.audio import load as load_audio
from torchbend.audio import save

REPO = Path(__file__).resolve().parents[1]


def spec(inputs: list[str], smoke: bool) -> dict:
    return {
        "model": "tiny_ddsp",
        "inputs": inputs,
        "base": {
            "bendings": [
                {
                    "callback": {"class": "Noise", "args": {"std": 0.1, "seed": 0}},
                    "patterns": ["decoder_1"],
                }
            ]
        },
        "axes": {
            "bendings.0.patterns": {
                "targets": "activations",
                "pattern": "^(cat|decoder_1)$" if smoke else "^(cat|decoder_[0-4])$",
            },
            "bendings.0.callback.args.std": {
                "range": [0.02, 0.5],
                "steps": 2 if smoke else 3,
                "log": True,
            },
            "bendings.0.callback.args.seed": {"seeds": 1 if smoke else 2},
        },
        "sample": "grid",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="out/examples/13", help="the folder to write to")
    parser.add_argument("--smoke", action="store_true", help="a tiny sweep over short sounds")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def say(text: str) -> None:
        print(text)
        lines.append(text)

    sounds = sorted((REPO / "assets" / "sounds").glob("*.wav"))
    if args.smoke:  # half a second of each sound
        cropped = out / "sounds"
        cropped.mkdir(exist_ok=True)
        for sound in sounds:
            audio, rate = load_audio(sound)
            save(cropped / sound.name, audio[:, : rate // 2], rate)
        sounds = sorted(cropped.glob("*.wav"))
    described = spec([str(s) for s in sounds], args.smoke)
    (out / "spec.json").write_text(json.dumps(described, indent=1))

    say(str(tb.sweep.plan(out / "spec.json")))
    result = tb.sweep.run(out / "spec.json", out / "sweep", progress=True)
    say(str(result))

    say("\nfurthest from the unbent model, not broken:")
    for row in tb.sweep.best(out / "sweep", by="distance", top=5):
        say(
            f"  {row['measures']['distance']:6.2f}  {row['id']}  "
            f"{tb.sweep.describe_config(row['config'])}"
        )
    say("broke the most (best ranks broken renders after every clean one, so read the rows):")
    broke = [r for r in tb.sweep.read_rows(out / "sweep") if r["broken"] and r["measures"]]
    for row in sorted(broke, key=lambda r: -r["measures"]["peak_dbfs"])[:5]:
        flags = [name for name, on in row["flags"].items() if on]
        say(f"  {row['measures']['peak_dbfs']:6.1f} dBFS  {row['id']}  {', '.join(flags)}")

    atlas = tb.sweep.draw_map(str(out / "sweep"))
    say(f"\natlas: {atlas.png} and {atlas.html}\n  {atlas.axis_label(0)}\n  {atlas.axis_label(1)}")
    furthest = tb.sweep.best(out / "sweep", by="distance", top=1)[0]
    say(f"the furthest render's bending, ready to apply or save:\n{tb.sweep.row_config(furthest)}")
    (out / "sweep.txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'sweep.txt'}")


if __name__ == "__main__":
    main()
