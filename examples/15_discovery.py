"""Tutorial: discovery (docs/discover.md): which channels move the sound, knobs, steering,
health and audition, on the character model and on a codec from another library.

Run: python examples/15_discovery.py [--out DIR] [--smoke]

On TinyDDSP (``torchbend.models.load("tiny_ddsp")``) and the bass, the pad and the sung line
of ``assets/sounds``:

1. ``tb.discover.rank`` probes each channel of the latent (``cat``) and of the decoder's
   activations and ranks them by what they do to the brightness (the spectral centroid): the
   table, and the picture (``ranking.png``);
2. ``tb.discover.knob`` turns the ranking into a brightness knob and a loudness knob; each is
   attached, the sung line is rendered at -1, 0 and 1 and measured
   (``torchbend.audio.perceptual.perceive``): the centroid must rise with the brightness
   knob, the loudness with the loudness knob, or the script fails;
3. ``tb.discover.steer_between`` pushes the latent from the pad towards the sung line, and the
   pad is rendered steered halfway and all the way;
4. ``tb.discover.health`` finds the layer a ``Scale(0)`` silenced, among two bendings;
5. ``tb.discover.audition`` plays the ranking's best channel alone (soloed) and without it
   (bypassed);
6. the same ranking on a model nobody trained: the Descript audio codec of ``transformers``
   (``DacModel``) built by the third-party zoo (tests/zoo/models.py: tiny, random weights,
   nothing downloaded), for the loudness, with the control a ranking always makes:
   random directions of the same size at the same node.

Everything goes to DIR (default ``out/examples/15``): ``ranking.png``, the WAVs
(``<knob>_<position>.wav``, ``steer_<share of the way>.wav``, ``solo.wav``, ``bypass.wav``),
``dac_ranking.png`` and ``discovery.txt`` with what was printed. The script fails if a knob
does not move its descriptor the way it should, if steering does not bring the pad nearer
the sung line, or if the health probe blames another layer. ``--smoke``: quarter-second
excerpts, fewer nodes probed (TinyDDSP's latent, one layer of the codec's decoder).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from pathlib import Path

import torch
from torch import nn

import torchbend as tb
from torchbend.audio.perceptual import perceive
from torchbend.audio.render import padded
from torchbend.audio.safety import FILE_CEILING

REPO = Path(__file__).resolve().parents[1]
RATE = 44100
HOP = 256  # TinyDDSP: one latent frame per 256 samples
SOUNDS = ("bass", "pad", "voice")  # the drums have no pitch and one timbre: left out


def excerpt(name: str, length: int, rate: int = RATE) -> torch.Tensor:
    """``length`` samples ``[time]`` of a shipped sound at ``rate``, from its first second on
    (the sounds fade in)."""
    audio, _ = tb.audio.load(REPO / f"assets/sounds/{name}.wav", sample_rate=rate, mono=True)
    return audio[0, rate : rate + length]


def render(bended: tb.BendedModule, x: torch.Tensor) -> torch.Tensor:
    """The model's output ``[time]`` for a sound ``[time]``."""
    with torch.inference_mode():
        return bended(padded(x[None], HOP))[0, 0, : x.shape[-1]]


class Codec(nn.Module):
    """A transformers codec as a sound-in, sound-out module: ``[batch, 1, time]`` in,
    ``[batch, time]`` out (``DacModel`` returns a dataclass with its codes, its latents and its
    audio; discovery measures sounds)."""

    def __init__(self, codec: nn.Module) -> None:
        super().__init__()
        self.codec = codec

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.codec(x).audio_values


def zoo_model(name: str) -> nn.Module:
    """The model ``name`` of the third-party zoo (tests/zoo/models.py), built as the zoo's
    tests build it: a tiny configuration, seeded random weights, nothing downloaded."""
    spec = importlib.util.spec_from_file_location("zoo_models", REPO / "tests/zoo/models.py")
    assert spec is not None and spec.loader is not None
    zoo = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = zoo  # its dataclasses look their module up
    spec.loader.exec_module(zoo)
    entry = next(m for m in zoo.ALL if m.name == name)
    if not entry.available:
        raise ImportError(f"{name} needs {entry.library}: pip install {entry.library}")
    model, _ = entry.build()
    return model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/examples/15"))
    parser.add_argument("--smoke", action="store_true", help="short sounds, few nodes")
    args = parser.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []
    start = time.perf_counter()

    def say(text: str = "") -> None:
        print(text)
        lines.append(text)

    safety = tb.audio.Safety(RATE, ceiling=FILE_CEILING)

    def write(name: str, y: torch.Tensor) -> None:
        # For listening: the safety stage (a soft limiter within -0.3 dBFS), not a hard clip.
        # The figures printed are measured before it, on what the model played.
        safety.reset()
        path = tb.audio.save(out / name, safety(y[None].clone()), RATE)
        say(f"  wrote {path.name} ({safety.stats})")

    length = (44 if args.smoke else 172) * HOP  # a quarter of a second, or one second
    sounds = {name: excerpt(name, length) for name in SOUNDS}
    voice = excerpt("voice", length if args.smoke else 2 * RATE)
    bended = tb.BendedModule(tb.models.load("tiny_ddsp"))

    # 1. Which channels move the brightness. Each channel of each node is pushed both ways by
    # half the node's RMS, on every sound; the effect is the centroid's change in perceptible
    # steps (15 % each), "specificity" its size over the largest change of the loudness, the
    # pitch or the noisiness, "vs random" its size over a random direction's at that node.
    targets = r"^cat$" if args.smoke else r"^(cat|decoder_\d)$"
    say(f"1. ranking the channels of {targets} for brightness on {', '.join(SOUNDS)}")
    ranking = tb.discover.rank(bended, sounds, "brightness", targets=targets, rate=RATE)
    say(f"{ranking.table(8)}\n  ({time.perf_counter() - start:.1f} s so far)")
    ranking.picture(str(out / "ranking.png"))
    say(f"  wrote ranking.png; the latent's channels are {bended.module.latent_names}")

    # 2. Knobs. The same probes re-ranked by loudness (nothing rendered again) give the
    # loudness knob's candidates. Each knob is calibrated on the three excerpts; here it
    # plays the sung line, which it was not calibrated on in full.
    say("\n2. knobs, on the sung line at -1, 0 and 1 (measured before the safety stage)")
    for descriptor, unit in (("brightness", "Hz"), ("loudness", "LUFS")):
        knob = tb.discover.knob(bended, sounds, descriptor, ranking=ranking, nodes=2, rate=RATE)
        say(f"  {knob}")
        knob.attach(bended)
        measured = []
        for position in (-1.0, 0.0, 1.0):
            bended.update(knob.control.name, position, ramp=False)
            y = render(bended, voice)
            measured.append(perceive(y, RATE)[descriptor])
            say(f"  {descriptor} knob at {position:+.0f}: {descriptor} {measured[-1]:.1f} {unit}")
            write(f"{descriptor}_{position:+.0f}.wav", y)
        bended.reset()
        # A knob that does not move what it is named after is a defect, not a curiosity.
        if not measured[0] < measured[1] < measured[2]:
            raise SystemExit(f"the {descriptor} knob does not raise the {descriptor}: {measured}")

    # 3. Steering from examples: the latent's mean on the sung line minus its mean on the pad,
    # added to the pad's latent. Strength is in multiples of the latent's RMS; the strength
    # that adds the whole difference of the means is the vector's RMS over the latent's.
    say("\n3. the pad steered towards the sung line at the latent")
    target = perceive(render(bended, sounds["voice"]), RATE)
    towards = tb.BendingParameter("towards", 0.0, range=(0.0, 10.0))
    steer = tb.discover.steer_between(bended, "^cat$", sounds["pad"], sounds["voice"], towards)
    whole = float(steer.vector.square().mean().sqrt()) / steer.rms
    bended.bend(steer, "^cat$")
    steered = []
    for share in (0.0, 0.5, 1.0):
        bended.update("towards", share * whole, ramp=False)
        y = render(bended, sounds["pad"])
        heard = perceive(y, RATE)
        say(
            f"  strength {share * whole:.2f} ({share:.0%} of the way): pitch {heard['pitch']:.0f}"
            f" Hz, centroid {heard['brightness']:.0f} Hz, loudness {heard['loudness']:.1f} LUFS"
        )
        write(f"steer_{share:.1f}.wav", y)
        steered.append(heard)
    say(
        f"  the sung line itself: pitch {target['pitch']:.0f} Hz, centroid "
        f"{target['brightness']:.0f} Hz, loudness {target['loudness']:.1f} LUFS"
    )
    bended.reset()
    for quality in ("brightness", "loudness"):  # the steered pad is nearer the sung line
        if not abs(steered[-1][quality] - target[quality]) < abs(
            steered[0][quality] - target[quality]
        ):
            raise SystemExit(f"steering did not bring the pad's {quality} nearer the voice's")

    # 4. Health: two bendings, one of which silences the decoder from decoder_2 on.
    say("\n4. health of a bending that silences a layer")
    x = padded(voice[None], HOP)
    bended.bend(tb.Mask(0.5, dim=-2, seed=0), "decoder_1$")  # half its channels dead
    bended.bend(tb.Scale(0.0), "decoder_2$")  # the culprit
    report = tb.discover.health(bended, x, nodes="decoder")
    say(str(report.table()))
    first = report.first_problem()
    say(f"  first problem: {first.node} ({first.problem})")
    if first.node != "decoder_2":
        raise SystemExit(f"health blamed {first.node}, not decoder_2")
    bended.reset()

    # 5. Audition: the best brightness channel alone, and everything but it.
    best = ranking.top(1)[0]
    say(f"\n5. audition of {best.node} channel {best.channel}, the best for brightness")
    for mode in ("solo", "bypass"):
        y = tb.discover.audition(bended, x, best.node, best.channel, mode=mode)[0, 0]
        heard = perceive(y[: voice.shape[-1]], RATE)
        say(f"  {mode}: centroid {heard['brightness']:.0f} Hz, {heard['loudness']:.1f} LUFS")
        write(f"{mode}.wav", y)

    # 6. A third-party model with random weights. Its ranking says which channels move the
    # loudness of what this untrained network plays, near these activations: a fact about its
    # random weights, not a concept it learned. The random control tells the two apart. A
    # channel probe puts the whole push on one channel; a random direction of the same norm
    # spreads it over all of them, and where every channel moves the sound some unrelated way
    # the direction moves it about as much as a typical channel. The best of a node's channels
    # then beats it by the margin of the largest of a handful of random numbers alone: two to
    # four times, more for wider nodes. A channel that carries a quality beats it by more (5
    # times and more on the planted models of tests/discover; compare TinyDDSP's best
    # brightness channel, printed below). So a ratio of a few on a random network means the
    # node as a whole moves the sound, no channel in particular. Nodes whose every probe barely
    # registers (the encoder's and the decoder's first, here) lie where the random weights
    # shrink the signal (follow the RMS printed, from the encoder's first layer to the
    # decoder's) until the biases of the decoder's next layers drown it: a push there, of half
    # the node's own RMS, is lost on the way.
    say("\n6. the same ranking on a random-weight DacModel (transformers)")
    try:
        dac_model = zoo_model("DacModel")
    except ImportError as e:
        say(f"  skipped: {e}")
    else:
        rate = dac_model.config.sampling_rate  # 16 kHz
        dac = tb.BendedModule(Codec(dac_model))
        short = excerpt("voice", 4096, rate)  # a quarter of a second at 16 kHz
        dac_targets = (
            r"^codec_decoder_block_0_conv_t1$"
            if args.smoke
            else r"^codec_(encoder|decoder)_(conv\d|block_\d_conv\w*)$"
        )
        # More random directions than the default 8: the control is their mean, and with a
        # few dozen a ratio hangs less on the draw.
        found = tb.discover.rank(dac, short, "loudness", targets=dac_targets, rate=rate, randoms=32)
        say(str(found.table(6)))
        nodes = [row.node for row in found.by_node()]
        with torch.inference_mode():
            values = dac.get_activations(*[f"^{n}$" for n in nodes], x=short[None, None])
        for row in found.by_node():  # each node's best channel against its random control
            control = found.random[row.node]["loudness"]
            rms = float(values[row.node].square().mean().sqrt())
            say(
                f"  {row.node} (RMS {rms:.2g}): its best channel ({row.channel}) moves the "
                f"loudness {abs(row.effect):.3f} steps, a random direction {control:.3f}: "
                f"{row.random_ratio:.1f} times"
            )
        best_ddsp = ranking.top(1)[0]
        say(
            f"  against TinyDDSP's best brightness channel ({best_ddsp.node} channel "
            f"{best_ddsp.channel}): {best_ddsp.random_ratio:.1f} times its random control"
        )
        found.picture(str(out / "dac_ranking.png"))
        say("  wrote dac_ranking.png")

    say(f"\ndone in {time.perf_counter() - start:.1f} s")
    (out / "discovery.txt").write_text("\n".join(lines) + "\n")
    print(f"wrote {out / 'discovery.txt'}")


if __name__ == "__main__":
    main()
