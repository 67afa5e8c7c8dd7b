"""Train a shipped model (TinyRave or TinyDDSP) on varied synthetic sounds and the shipped
ones, and write its weights to assets/.

Run: python scripts/train_model.py [--model tiny_rave|tiny_ddsp] [--time-limit 900]
     [--device cpu|cuda] [--out assets/<model>.safetensors]

The training set: ``--seconds`` of each sound maker of scripts/make_assets.py (drums, bass, pad,
tones, chords, sweeps, plucks, noises, voices; seed 1, not the shipped sounds' seed) and the
shipped sounds but their last ``--holdout`` seconds. Random crops at random levels (-40 to +3
dB), Adam with a cosine learning-rate decay over the time limit. The loss compares the output
with the input delayed by the model's latency: the error's power relative to the input's (in
bels, so that quiet and loud crops count alike) plus a multi-resolution log-magnitude distance
whose floor is 80 dB below each crop's loudest bin (so that near-silent bins do not dominate).

At the end the latent channels are rotated to the principal axes of the latent on the training
sounds, the first channel carrying the most variance (encoder and decoder are changed together,
the output stays the same), and the script prints the held-out error before and after training
(same seed).

TinyDDSP: its analysis and synthesizer do not learn; its encoder and decoder learn to give the
synthesizer what makes the output sound like the input delayed by the model's latency, by a
multi-resolution STFT loss (FFT sizes 2048 to 64: the log-magnitude distance above, plus the
spectral convergence, the L2 norm of the magnitudes' error over the input's, which weighs the
loud bins; an L1 norm there would pay the model to pile its power, which it cannot lower, into
a few bins), gradients clipped to a norm of 1. It reports the held-out loss before and after
training.

The weights are written with the model's config in the safetensors metadata.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file

from torchbend.audio import load
from torchbend.models import TinyDDSP, TinyRave

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import make_assets  # noqa: E402  (a sibling script: the sound makers)

RATE = 44100
FFT_SIZES = (2048, 512, 128)
DDSP_FFT_SIZES = (2048, 1024, 512, 256, 128, 64)


def aligned(model: TinyRave | TinyDDSP, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The model's output on ``x`` ``[batch, 1, time]`` and ``x``, cut to line up."""
    y = model(x)
    delay = model.latency
    return y[..., delay:], x[..., : x.shape[-1] - delay]


def error_bels(y: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Mean over items of log10(error power / input power)."""
    error = (y - x).pow(2).mean((1, 2))
    return torch.log10(error / x.pow(2).mean((1, 2)).clamp_min(1e-10) + 1e-9).mean()


def spectral_distance(
    y: torch.Tensor, x: torch.Tensor, sizes: tuple[int, ...] = FFT_SIZES, linear: bool = False
) -> torch.Tensor:
    """Mean L1 distance of log magnitudes over FFT sizes, floored 80 dB below each item's
    loudest bin; with ``linear``, plus the spectral convergence (the L2 norm of the magnitudes'
    difference over the input's)."""
    total = y.new_zeros(())
    for n_fft in sizes:
        window = torch.hann_window(n_fft, device=x.device)
        sy, sx = (
            torch.stft(s[:, 0], n_fft, n_fft // 4, window=window, return_complex=True).abs()
            for s in (y, x)
        )
        floor = sx.amax((1, 2), keepdim=True) * 1e-4 + 1e-7
        total = total + (torch.log(sy + floor) - torch.log(sx + floor)).abs().mean()
        if linear:
            error = (sy - sx).pow(2).sum((1, 2)).sqrt()
            total = total + (error / (sx.pow(2).sum((1, 2)).sqrt() + 1e-7)).mean()
    return total / len(sizes)


def ddsp_loss(model: TinyDDSP, x: torch.Tensor, frames: torch.Tensor | None = None) -> torch.Tensor:
    """TinyDDSP's loss on ``x`` ``[batch, 1, time]`` (see the module's docstring), from the
    analysis ``frames`` of ``x`` if given (they do not learn: computed once, before training)."""
    if frames is None:
        frames = model.analysis(x)
    y = model.decode(torch.cat([frames[:, :4], model.encoder(frames[:, 4:])], 1))
    delay = model.latency
    return spectral_distance(y[..., delay:], x[..., : x.shape[-1] - delay], DDSP_FFT_SIZES, True)


@torch.no_grad()
def analyse(model: TinyDDSP, sounds: list[torch.Tensor]) -> list[torch.Tensor]:
    """TinyDDSP's analysis frames of each sound ``[1, time]``, ``[4 + bands, time // hop]``."""
    model.analysis.eval()
    return [model.analysis(s[None, :, : s.shape[-1] // model.hop * model.hop])[0] for s in sounds]


def evaluate(model: TinyRave | TinyDDSP, sounds: list[torch.Tensor]) -> tuple[float, float]:
    """Error (dB re the input) and spectral distance of the offline renders of ``sounds``
    (for TinyDDSP, whose output is not a copy of the input: its loss, and the distance)."""
    model.eval()
    errors, distances = [], []
    with torch.no_grad():
        for x in sounds:
            x = x[None, :, : x.shape[-1] // model.ratio * model.ratio]
            if isinstance(model, TinyDDSP):
                errors.append(float(ddsp_loss(model, x)))
            y, x = aligned(model, x)
            if not isinstance(model, TinyDDSP):
                errors.append(10 * float(error_bels(y, x)))
            distances.append(float(spectral_distance(y, x)))
    return sum(errors) / len(errors), sum(distances) / len(distances)


@torch.no_grad()
def order_latent(model: TinyRave, sounds: list[torch.Tensor]) -> None:
    """Rotate the latent to its principal axes on ``sounds``, largest variance first."""
    model.eval()
    ratio = model.ratio
    z = torch.cat([model.encode(x[None, :, : x.shape[-1] // ratio * ratio])[0] for x in sounds], -1)
    covariance = z @ z.T / z.shape[-1]
    _, vectors = torch.linalg.eigh(covariance.double())
    rotation = vectors.flip(1).float()  # columns: principal axes, largest first
    last, first = model.encoder[-1], model.decoder[0]
    last.weight.copy_(torch.einsum("lc,lh->ch", rotation, last.weight[:, :, 0])[:, :, None])
    first.weight.copy_(torch.einsum("hlt,lc->hct", first.weight, rotation))


def write(
    model: TinyRave | TinyDDSP,
    out: Path,
    paths: list[Path],
    made: dict[str, object],
    step: int,
    heldout: tuple[float, float],
    device: str,
) -> None:
    """Write ``model``'s weights to ``out`` with its config and how it was trained."""
    metadata = {
        "config": json.dumps(model.config),
        "steps": str(step),
        (
            "heldout_loss" if isinstance(model, TinyDDSP) else "heldout_error_db"
        ): f"{heldout[0]:.3f}",
        "trained_on": ", ".join([p.name for p in paths] + list(made)),
        "torch": torch.__version__,
        "platform": platform.platform(),
        "device": device,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().cpu().contiguous() for k, v in model.state_dict().items()}
    save_file(state, str(out), metadata=metadata)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sounds", type=Path, default=ROOT / "assets/sounds")
    parser.add_argument("--model", choices=["tiny_rave", "tiny_ddsp"], default="tiny_rave")
    parser.add_argument("--out", type=Path, default=None, help="assets/<model>.safetensors")
    parser.add_argument("--time-limit", type=float, default=900.0, help="seconds of training")
    parser.add_argument("--steps", type=int, default=None, help="stop after this many steps")
    parser.add_argument("--seconds", type=float, default=40.0, help="per synthetic sound maker")
    parser.add_argument("--holdout", type=float, default=1.0, help="seconds held out per sound")
    parser.add_argument("--crop", type=int, default=8192, help="training crop, in samples")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu, or cuda when there is a GPU")
    parser.add_argument("--save-every", type=int, default=0, help="also write every N steps")
    args = parser.parse_args()
    if args.time_limit <= 0:
        parser.error(f"--time-limit must be positive, got {args.time_limit}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error("--device cuda asked for, but torch sees no CUDA device")
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)  # tiny amplitudes otherwise slow every step down tenfold
    device = torch.device(args.device)
    out = args.out or ROOT / "assets" / f"{args.model}.safetensors"

    paths = sorted(args.sounds.glob("*.wav"))
    if not paths:
        parser.error(f"no .wav files in {args.sounds}; run scripts/make_assets.py first")
    train, held = [], []
    for path in paths:
        audio, sr = load(path, sample_rate=RATE, mono=True)
        cut = audio.shape[-1] - round(args.holdout * sr)
        if cut < args.crop:
            parser.error(f"{path.name} is too short for --holdout {args.holdout} and --crop")
        train.append(audio[:, :cut])
        held.append(audio[:, cut:])
    made = make_assets.training_sounds(args.seconds, seed=1)
    train += [torch.from_numpy(a).float()[None] for a in made.values()]
    print(f"training on {sum(t.shape[-1] for t in train) / RATE:.0f} s of audio", flush=True)

    torch.manual_seed(args.seed)
    model = TinyRave() if args.model == "tiny_rave" else TinyDDSP()
    crop = args.crop // model.ratio * model.ratio
    before = evaluate(model, held)
    unit = "" if isinstance(model, TinyDDSP) else " dB"
    print(f"untrained: held-out error {before[0]:.3f}{unit}, spectral distance {before[1]:.3f}")
    frames = analyse(model, train) if isinstance(model, TinyDDSP) else None
    model.to(device)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(trainable, lr=args.lr)
    generator = torch.Generator().manual_seed(args.seed)
    weights = torch.tensor([float(t.shape[-1]) for t in train])

    start = time.monotonic()
    step = 0
    while True:
        elapsed = time.monotonic() - start
        if elapsed >= args.time_limit or (args.steps is not None and step >= args.steps):
            break
        frac = elapsed / args.time_limit
        for group in optimizer.param_groups:
            group["lr"] = args.lr * (0.02 + 0.98 * 0.5 * (1 + math.cos(math.pi * frac)))
        picks = torch.multinomial(weights, args.batch, replacement=True, generator=generator)
        batch, analysed = [], []
        for pick in picks.tolist():
            sound = train[pick]
            # Crops start on a frame of the model (its ratio), so that precomputed analysis
            # frames line up with them.
            i = int(
                torch.randint(
                    (sound.shape[-1] - crop) // model.ratio + 1, (1,), generator=generator
                )
            )
            i *= model.ratio
            piece = sound[:, i : i + crop]
            gain = 10 ** (float(torch.empty(()).uniform_(-40, 3, generator=generator)) / 20)
            gain = min(gain, 0.99 / max(float(piece.abs().max()), 1e-6))
            batch.append(piece * gain)
            if frames is not None:  # the analysis reads the level as log10 of an RMS
                piece_frames = frames[pick][:, i // model.ratio : (i + crop) // model.ratio].clone()
                piece_frames[1] += math.log10(gain)
                analysed.append(piece_frames)
        x = torch.stack(batch).to(device)
        model.train()
        if isinstance(model, TinyDDSP):
            loss = error = ddsp_loss(model, x, torch.stack(analysed).to(device))
        else:
            y, x = aligned(model, x)
            error = error_bels(y, x)
            loss = error + spectral_distance(y, x)
        optimizer.zero_grad()
        loss.backward()
        if isinstance(model, TinyDDSP):
            torch.nn.utils.clip_grad_norm_(trainable, 1.0)
        optimizer.step()
        step += 1
        if step % 100 == 0:
            print(f"step {step:5d}  {elapsed:6.0f} s  loss {loss.item():.4f}", flush=True)
        if args.save_every and step % args.save_every == 0:  # to listen while it trains
            write(model, out, paths, made, step, (math.nan, math.nan), args.device)

    model.cpu()
    if isinstance(model, TinyRave):
        order_latent(model, train)
    after = evaluate(model, held)
    print(
        f"trained ({step} steps, {time.monotonic() - start:.0f} s): held-out error "
        f"{after[0]:.3f}{unit}, spectral distance {after[1]:.3f} (untrained "
        f"{before[0]:.3f}{unit}, {before[1]:.3f})"
    )
    write(model, out, paths, made, step, after, args.device)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
