"""Effect maps: which channels of which activations move a descriptor, how much, how
specifically, and against a random direction of the same size at the same node."""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..audio.perceptual import (
    NAMES,
    check_descriptor,
    descriptor_changes,
    perceive,
    shortest_sound,
)
from ..audio.stream import reset_cache
from ..errors import DiscoveryError
from .probes import PROBES, Probe, probe_batch
from .ranking import Ranking, effect_row, ranked

if TYPE_CHECKING:
    from ..bended import BendedModule
    from ..sweep.engines import Engine

__all__ = [
    "candidate_nodes",
    "input_name",
    "rank",
    "restore",
    "run_clean",
    "stack_sounds",
]

Progress = Callable[[int, int, str], None]


def stack_sounds(
    sounds: torch.Tensor | Sequence[torch.Tensor] | Mapping[str, torch.Tensor],
) -> tuple[list[str], torch.Tensor]:
    """Names and a batch ``[sounds, 1, time]`` of mono sounds given as one tensor, a list or
    a dict of them (each ``[time]`` or ``[1, time]``); they must share one length."""
    if isinstance(sounds, torch.Tensor):
        sounds = [sounds]
    items = list(sounds.items()) if isinstance(sounds, Mapping) else list(enumerate(sounds))
    if not items:
        raise DiscoveryError("no sound given: give one or more mono tensors [time]")
    flat = []
    for name, x in items:
        if not isinstance(x, torch.Tensor) or x.dim() > 2 or (x.dim() == 2 and x.shape[0] != 1):
            shape = list(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise DiscoveryError(f"sound {name!r} must be a mono tensor [time], got {shape}")
        flat.append(x.reshape(-1).float())
    lengths = sorted({x.numel() for x in flat})
    if len(lengths) > 1:
        raise DiscoveryError(f"the sounds must share one length (cut them), got {lengths}")
    return [str(name) for name, _ in items], torch.stack(flat)[:, None]


def candidate_nodes(
    bended: BendedModule, fn: str, targets: str | Sequence[str] | None, dim: int
) -> list[str]:
    """The activations of ``fn`` to probe: those matched by ``targets`` (regular
    expressions), or every hidden one (not an input, not returned) with a channel axis
    ``dim`` when ``targets`` is None. A matched node without that axis is an error."""
    from ..sweep.richness import hidden_activations

    if targets is None:
        nodes = hidden_activations(bended, fn)
        return [n for n in nodes if len(bended.activation_shape(n, fn)) > max(dim, 1)]
    patterns = [targets] if isinstance(targets, str) else list(targets)
    names = bended.activation_names(fn)
    nodes = [n for n in names if any(re.match(p, n) for p in patterns)]
    if not nodes:
        raise DiscoveryError(
            f"no activation of {fn!r} matches {patterns}; its activations are: "
            f"{', '.join(names[:30])}{' ...' if len(names) > 30 else ''}"
        )
    for n in nodes:
        shape = list(bended.activation_shape(n, fn))
        if len(shape) <= max(dim, 1):
            raise DiscoveryError(
                f"activation {n!r} has shape {shape}: no channel axis {dim} to probe (probes "
                f"need [batch, channels, ...]; give dim= for another layout)"
            )
    return nodes


def input_name(bended: BendedModule, fn: str) -> str:
    """The name of ``fn``'s first argument, which discovery feeds sounds to."""
    method = getattr(bended.module, fn, None)
    if method is None:
        raise DiscoveryError(f"the model has no method {fn!r}")
    params = list(inspect.signature(method).parameters)
    if not params:
        raise DiscoveryError(f"{fn!r} takes no input: discovery feeds it sounds [batch, 1, time]")
    return params[0]


def run_clean(bended: BendedModule, fn: str, x: torch.Tensor) -> torch.Tensor:
    """``fn`` of ``bended`` on ``x`` without autograd, from a clean state: a model that keeps
    state between calls (``reset_cache``: a streaming one) starts from silence, so that no
    render depends on the one before."""
    reset_cache(bended.module)
    with torch.inference_mode():
        return bended.call(fn, x)  # type: ignore[no-any-return]


def restore(bended: BendedModule, config: Any) -> None:
    """Set ``bended``'s bendings back to ``config`` (what ``bending_config()`` gave)."""
    bended.reset()
    if len(config):
        bended.bend(config)


def rank(
    bended: BendedModule,
    sounds: torch.Tensor | Sequence[torch.Tensor] | Mapping[str, torch.Tensor],
    descriptor: str = "brightness",
    targets: str | Sequence[str] | None = None,
    probe: str = "push",
    amount: float = 0.5,
    randoms: int = 8,
    fn: str = "forward",
    rate: int | None = None,
    dim: int = 1,
    seed: int = 0,
    batch: int = 32,
    progress: Progress | None = None,
    engine: str | Engine | None = None,
    model: str | None = None,
) -> Ranking:
    """Rank the channels of ``bended``'s activations by how much they move ``descriptor``.

    Each channel of each candidate node is probed (``probe``, :data:`PROBES`) by ``+amount``
    and by ``-amount``, on every sound, on top of the bendings already set; each render is
    described (:func:`~torchbend.audio.perceptual.perceive`) and compared with the render
    without the probe, in perceptible steps (:data:`~torchbend.audio.perceptual.PERCEPTIBLE`).
    A channel's change of a descriptor is the slope between its two probes, averaged over
    the sounds. At each node, ``randoms`` random directions over the channels (seeded) with
    the norm of a probe (a push of ``amount`` times the node's RMS, or gains of ``amount``)
    are probed the same way: a channel that matters moves the descriptor far more than such
    a direction does.

    Renders run in batches of about ``batch`` items (probes times sounds); the cost grows
    with nodes x channels x sounds. Each render runs ``fn`` once on the whole sounds, from a
    clean state (a streaming model's ``reset_cache``: from silence).

    Args:
        bended: the model, traced for ``fn`` or tracable on the sounds (its first argument).
        sounds: mono sounds of one length (a tensor ``[time]``, a list or a dict by name).
        descriptor: what to rank by (:data:`~torchbend.audio.perceptual.NAMES`).
        targets: regular expressions of the activations to probe (default: every hidden
            activation with a channel axis).
        probe: ``"push"`` (add ``amount`` x the node's RMS to a channel) or ``"scale"``
            (multiply a channel by ``1 + amount``).
        amount: the probe's size.
        randoms: random directions per node (the control).
        fn: the method probed.
        rate: the sounds' sample rate (default: ``bended.sample_rate``).
        dim: the channel axis of the activations.
        seed: seeds the random directions.
        batch: items per call.
        progress: called with ``(nodes done, nodes, node)`` after each node.
        engine: ``None`` (probe in this process), or a sweep engine (``"local"``, ``"ray"``,
            an :class:`~torchbend.sweep.Engine`) with a node per job: the same ranking.
        model: with an engine, what its workers load (a sweep's model reference: a shipped
            name, ``module:factory``...): the very model ``bended`` wraps (docs/discover.md).

    Raises:
        DiscoveryError: an unknown descriptor or probe, sounds of several lengths or too
            short, a target without a channel axis, no target matched; an engine without a
            ``model`` the workers can load, or with one that is not this model.
    """
    check_descriptor(descriptor)
    if probe not in PROBES:
        raise DiscoveryError(f"unknown probe {probe!r}: choose one of {', '.join(PROBES)}")
    if not amount > 0 or randoms < 1 or batch < 2:
        raise DiscoveryError(
            f"amount must be positive, randoms and batch at least 1 and 2: got amount={amount}, "
            f"randoms={randoms}, batch={batch}"
        )
    names, x = stack_sounds(sounds)
    rate = int(rate or bended.sample_rate or 0)
    if rate <= 0:
        raise DiscoveryError("the sounds' sample rate is unknown: give rate= (in Hz)")
    if x.shape[-1] < shortest_sound(rate):
        raise DiscoveryError(
            f"sounds of {x.shape[-1]} samples are too short to describe: give at least "
            f"{shortest_sound(rate)} samples at {rate} Hz"
        )
    inputs: dict[str, Any] = {input_name(bended, fn): x}
    if fn not in bended.traced_methods:
        bended.trace(fn, **inputs)
    nodes = candidate_nodes(bended, fn, targets, dim)
    if not nodes:
        raise DiscoveryError(f"{fn!r} has no hidden activation with a channel axis {dim}")
    reference = run_clean(bended, fn, x)
    reset_cache(bended.module)
    with torch.inference_mode():
        values = bended.get_activations(*[f"^{re.escape(n)}$" for n in nodes], fn=fn, **inputs)
    before = [perceive(reference[i], rate) for i in range(len(names))]
    config = bended.bending_config()
    generator = torch.Generator().manual_seed(seed)
    ranking = Ranking(descriptor, probe, amount, names, [])

    def node_probes(node: str) -> tuple[str, torch.Tensor, torch.Tensor, int]:
        activation = values[node].float()
        width = activation.shape[dim]
        rms = float(activation.square().mean().sqrt())
        gains, offsets = probe_batch(probe, list(range(width)), width, amount, rms)
        directions = torch.randn(randoms, width, generator=generator)
        directions = directions / directions.norm(dim=1, keepdim=True)
        pushes = torch.stack([directions, -directions], 1).reshape(-1, width)
        if probe == "push":  # the norm of a push: amount x the node's RMS
            gains = torch.cat([gains, torch.zeros_like(pushes)])
            offsets = torch.cat([offsets, amount * rms * pushes])
        else:  # the norm of a scale: gains of amount
            gains = torch.cat([gains, amount * pushes])
            offsets = torch.cat([offsets, torch.zeros_like(pushes)])
        return node, gains, offsets, dim

    found: dict[str, torch.Tensor] = {}
    done: Iterator[tuple[str, torch.Tensor]]
    probes = (node_probes(node) for node in nodes)  # drawn in node order, as they are sent
    try:
        if engine is None:
            done = ((p[0], _slopes(bended, fn, p, x, before, rate, batch, config)) for p in probes)
        else:
            from .remote import remote_slopes

            args = (inputs, probes, before, rate, batch, config, _slopes)
            done = remote_slopes(engine, model, bended, fn, *args)
        for node, slopes in done:
            found[node] = slopes
            if progress is not None:
                progress(len(found), len(nodes), node)
    finally:
        restore(bended, config)
    for node in nodes:  # in node order, whatever order the engine gave them back in
        slopes = found[node]
        width = slopes.shape[0] - randoms
        ranking.random[node] = {
            name: float(slopes[width:, i].abs().nanmean()) for i, name in enumerate(NAMES)
        }
        for channel in range(width):
            changes = {name: float(slopes[channel, i]) for i, name in enumerate(NAMES)}
            ranking.rows.append(
                effect_row(node, channel, changes, descriptor, ranking.random[node])
            )
    ranking.rows = ranked(ranking.rows)
    return ranking


def _slopes(
    bended: BendedModule,
    fn: str,
    probes: tuple[str, torch.Tensor, torch.Tensor, int],
    x: torch.Tensor,
    before: list[dict[str, float]],
    rate: int,
    batch: int,
    config: Any,
) -> torch.Tensor:
    """``[probes / 2, descriptors]``: each pair of ``probes`` (node, gains, offsets, channel
    axis) slope, averaged over the sounds; the bendings of ``config`` stay set."""
    node, gains, offsets, dim = probes
    count = len(before)
    pairs = max(1, batch // (2 * count))
    changes = torch.full((gains.shape[0], count, len(NAMES)), math.nan, dtype=torch.float64)
    for start in range(0, gains.shape[0], 2 * pairs):
        part = slice(start, start + 2 * pairs)
        g = gains[part].repeat_interleave(count, 0)
        o = offsets[part].repeat_interleave(count, 0)
        bended.bend(Probe(g, o, dim), f"^{re.escape(node)}$", fn=fn)
        try:
            y = run_clean(bended, fn, x.repeat(g.shape[0] // count, 1, 1))
        finally:
            restore(bended, config)
        for item in range(y.shape[0]):
            after = perceive(y[item], rate)
            moved = descriptor_changes(before[item % count], after)
            changes[start + item // count, item % count] = torch.tensor([moved[n] for n in NAMES])
    slopes = (changes[0::2] - changes[1::2]) / 2
    return slopes.nanmean(1)
