"""The studio's discovery panel: the channels of the model ranked by what they do to a
descriptor of the current sound (a job run in a thread of its own, its progress polled), and a
knob for that descriptor attached in one click (:mod:`torchbend.discover`).

Rankings and knobs run on a copy of the model of their own, offline (a model that streams is
switched out of streaming on the copy), bent as the studio's is when they start: renders and
live mode go on meanwhile, and the ranking is the one :func:`torchbend.discover.rank` gives in
Python on the model as loaded.
"""

from __future__ import annotations

import copy
import itertools
import logging
import re
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from ..audio.perceptual import NAMES, shortest_sound
from ..bended import BendedModule
from ..config import BendingConfig
from ..discover import Ranking
from ..discover.knob import knob
from ..discover.rank import candidate_nodes, input_name, rank, restore
from ..errors import StudioError, TorchbendError
from .bending import BendingEditor
from .describe import pattern
from .replies import seconds_value
from .sounds import SoundLibrary

__all__ = ["JOBS", "PROBE_RENDERS", "RANDOMS", "ROWS", "SECONDS", "Discoveries", "RankJob"]

log = logging.getLogger(__name__)

SECONDS = 1.0
"""The most of the current sound a ranking probes (its first seconds): every probe renders it."""

PROBE_RENDERS = 1024
"""The most probe renders one ranking makes (two per channel and per random direction of each
node probed): the nodes past it, in the graph's order, are left out and named in the answer.
Rank them by naming them in ``targets``, or from Python (:func:`torchbend.discover.rank`)."""

RANDOMS = 8
"""Random directions per node, the ranking's control."""

ROWS = 50
"""Rows of a ranking the answer holds (the best channel of every node is in ``by_node``)."""

JOBS = 8
"""Rankings whose state the studio keeps for the page to poll."""

_IDS = itertools.count(1)


class Discovering(Protocol):
    """What the discovery panel reads of the studio (:class:`~torchbend.studio.session.Studio`)."""

    bended: BendedModule
    lock: threading.RLock
    library: SoundLibrary
    editor: BendingEditor
    current: str
    fn: str
    sample_rate: int
    ratio: int


@dataclass
class Ranked:
    """A ranking the studio keeps (the last of its descriptor) and what it was made on."""

    ranking: Ranking
    sound: str
    audio: torch.Tensor


@dataclass
class RankJob:
    """A ranking running or done: what the page polls."""

    id: str
    descriptor: str
    total: int
    state: str = "running"
    done: int = 0
    node: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None
    status: int | None = None
    """The HTTP status of the error that ended the job (None if none did)."""
    info: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.id,
            "descriptor": self.descriptor,
            "state": self.state,
            "done": self.done,
            "total": self.total,
            "node": self.node,
            "result": self.result,
            "error": self.error,
            "status": self.status,
            **self.info,
        }


class Discoveries:
    """Rankings of the current sound by a descriptor, and knobs made of them.

    Args:
        studio: the studio whose model, current sound, lock and editor they use.
    """

    def __init__(self, studio: Discovering) -> None:
        self.studio = studio
        self.jobs: OrderedDict[str, RankJob] = OrderedDict()
        self.rankings: dict[str, Ranked] = {}
        """The last ranking of each descriptor: what a knob of it is made from."""
        self._starting = threading.Lock()
        self._work = threading.Lock()
        """Held by every use of the copy (:meth:`_model`)."""
        self._offline: BendedModule | None = None

    def start(self, descriptor: Any, targets: Any = None, seconds: Any = None) -> dict[str, Any]:
        """Start ranking the channels by ``descriptor`` on the current sound's first
        ``seconds`` (at most :data:`SECONDS`); returns the job, which the page polls
        (:meth:`job`). ``targets``: a regular expression of the activations to probe (default:
        every hidden one with a channel axis, up to :data:`PROBE_RENDERS` probe renders)."""
        _check_descriptor(descriptor)
        if targets is not None and not isinstance(targets, str):
            raise StudioError(f"'targets' is a regular expression, got {targets!r}")
        targets = pattern(targets.strip() if targets else None, "targets")
        studio = self.studio
        with self._starting:
            if any(job.state == "running" for job in self.jobs.values()):
                raise StudioError("a ranking is running: wait for it (poll its job)", 409)
            sound = studio.library.get(studio.current)
            audio = self._excerpt(sound.audio, _seconds(seconds))
            with self._work:
                model = self._model(audio)
                try:
                    nodes = candidate_nodes(model, studio.fn, targets, 1)
                except TorchbendError as e:
                    raise StudioError(str(e), 422) from None
                kept, left_out, renders = self._capped(model, nodes)
            job = RankJob(f"k{next(_IDS)}", descriptor, len(kept))
            job.info = {
                "sound": sound.id,
                "seconds": round(audio.shape[-1] / studio.sample_rate, 3),
                "targets": targets,
                "nodes": kept,
                "left_out": left_out,
                "probe_renders": renders,
            }
            self.jobs[job.id] = job
            while len(self.jobs) > JOBS:
                self.jobs.popitem(last=False)
        thread = threading.Thread(
            target=self._run, args=(job, kept, sound.id, audio), name=f"rank-{job.id}", daemon=True
        )
        thread.start()
        return job.to_json()

    def job(self, job_id: str) -> dict[str, Any]:
        """A ranking's state: ``running`` (``done`` of ``total`` nodes), ``done`` (with its
        ``result``) or ``failed`` (with its ``error`` and ``status``)."""
        job = self.jobs.get(job_id)
        if job is None:
            raise StudioError(
                f"no ranking job {job_id!r} (the studio keeps the last {JOBS}; rank again)", 404
            )
        return job.to_json()

    def make_knob(self, descriptor: Any, name: Any = None) -> dict[str, Any]:
        """Find a knob for ``descriptor`` on the current sound from its last ranking
        (:func:`torchbend.discover.knob`) and attach it as the page attaches a bending (an
        undo step, saved with the configuration): a :class:`~torchbend.Steer` at one node,
        its strength a control ``name`` (default: the descriptor's, numbered if taken) from
        -1 to 1. Returns the knob's description and the bending's new state."""
        _check_descriptor(descriptor)
        studio = self.studio
        if any(job.state == "running" for job in self.jobs.values()):
            raise StudioError("a ranking is running: make the knob when it is done", 409)
        ranked = self.rankings.get(descriptor)
        if ranked is None:
            raise StudioError(
                f"rank the channels by {descriptor!r} first: a knob is made of them", 409
            )
        if ranked.sound != studio.current:
            raise StudioError(
                f"the {descriptor!r} ranking was made on sound {ranked.sound!r}, not the current "
                f"{studio.current!r}: rank again",
                409,
            )
        with studio.lock:
            taken = set(studio.bended.controllables)
        name = name if name is not None else _free_name(descriptor, taken)
        if not isinstance(name, str) or not name.isidentifier() or name in taken:
            raise StudioError(
                f"a knob's control is named by a new identifier (taken: {sorted(taken)}), got "
                f"{name!r}"
            )
        with self._work:
            model = self._model(ranked.audio)
            try:
                found = knob(
                    model,
                    ranked.audio,
                    descriptor,
                    ranking=ranked.ranking,
                    name=name,
                    fn=studio.fn,
                    rate=studio.sample_rate,
                )
            except TorchbendError as e:
                raise StudioError(str(e), 422) from None
            bending = _as_bending(model, found)
        state = studio.editor.add(bending)
        return {
            "knob": {
                "descriptor": descriptor,
                "node": found.node,
                "fn": found.fn,
                "span": found.span,
                "steps": found.steps,
                "collateral": found.collateral,
                "description": repr(found),
                "control": {"name": name, "range": [-1.0, 1.0], "value": 0.0},
                "response": found.response,
            },
            "state": state,
        }

    def _run(self, job: RankJob, nodes: list[str], sound: str, audio: torch.Tensor) -> None:
        studio = self.studio

        def progress(done: int, total: int, node: str) -> None:
            job.done, job.node = done, node

        try:
            with self._work:
                ranking = rank(
                    self._model(audio),
                    audio,
                    job.descriptor,
                    targets=[f"^{re.escape(n)}$" for n in nodes],
                    randoms=RANDOMS,
                    fn=studio.fn,
                    rate=studio.sample_rate,
                    progress=progress,
                )
            self.rankings[job.descriptor] = Ranked(ranking, sound, audio)
            job.result = ranking_json(ranking)
            job.state = "done"
        except TorchbendError as e:
            job.error, job.status, job.state = str(e), 422, "failed"
        except Exception as e:  # the model's own code may raise anything: say it, stay up
            log.exception("ranking failed")
            job.error = f"the ranking failed: {type(e).__name__}: {e}"
            job.status, job.state = 500, "failed"

    def _excerpt(self, audio: torch.Tensor, seconds: float) -> torch.Tensor:
        """The first ``seconds`` of the mono ``audio`` ``[1, time]``, as ``[time]``, cut to a
        multiple of the model's ratio; refused when too short to describe."""
        studio = self.studio
        rate, ratio = studio.sample_rate, max(1, studio.ratio)
        length = min(audio.shape[-1], int(seconds * rate)) // ratio * ratio
        least = shortest_sound(rate)
        if length < least:
            raise StudioError(
                f"{studio.current!r} gives {length} samples to rank on, too short to describe: "
                f"at least {least} samples ({least / rate:.2f} s at {rate} Hz); choose a longer "
                "sound or more seconds",
                422,
            )
        return audio.float().mean(0)[:length]

    def _capped(self, model: BendedModule, nodes: list[str]) -> tuple[list[str], list[str], int]:
        """The nodes probed, in order, each while the renders stay within
        :data:`PROBE_RENDERS` (a node that would pass them is left out, the next ones tried),
        those left out, and the renders the kept ones make."""
        studio = self.studio
        names = set(studio.bended.activation_names(studio.fn))
        nodes = [n for n in nodes if n in names]  # a knob is attached to the studio's model
        kept: list[str] = []
        left_out: list[str] = []
        renders = 0
        for node in nodes:
            cost = 2 * (int(model.activation_shape(node, studio.fn)[1]) + RANDOMS)
            if renders + cost > PROBE_RENDERS:
                left_out.append(node)
                continue
            kept.append(node)
            renders += cost
        if not kept:
            raise StudioError(
                f"{left_out[0]!r} alone needs more probe renders than the studio's "
                f"{PROBE_RENDERS}: name smaller nodes in targets, or rank from Python "
                "(torchbend.discover.rank)",
                422,
            )
        return kept, left_out, renders

    def _model(self, audio: torch.Tensor) -> BendedModule:
        """The copy of the model discovery runs on, offline, bent as the studio's model is now
        (made and traced on ``audio`` ``[time]`` the first time)."""
        studio = self.studio
        if self._offline is None:
            module = copy.deepcopy(studio.bended.module)
            set_streaming = getattr(module, "set_streaming", None)
            if callable(set_streaming):
                set_streaming(False)
            model = BendedModule(module)
            inputs: dict[str, Any] = {input_name(model, studio.fn): audio[None, None]}
            model.trace(studio.fn, **inputs)
            self._offline = model
        with studio.lock, warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unseeded callbacks: as the editor reads them
            data = studio.bended.bending_config().to_dict(keys=False)
        try:
            config = BendingConfig.from_dict(data, source="the studio's bending")
            restore(self._offline, config)
        except TorchbendError as e:
            raise StudioError(f"discovery cannot bend its copy of the model as set: {e}") from e
        return self._offline


def ranking_json(ranking: Ranking) -> dict[str, Any]:
    """What the page shows of a ranking: its first :data:`ROWS` rows and each node's best."""

    def row(r: Any) -> dict[str, Any]:
        return {
            "node": r.node,
            "channel": r.channel,
            "effect": r.effect,
            "specificity": r.specificity,
            "random_ratio": r.random_ratio,
            "changes": dict(r.changes),
        }

    return {
        "descriptor": ranking.descriptor,
        "probe": ranking.probe,
        "amount": ranking.amount,
        "rows": [row(r) for r in ranking.rows[:ROWS]],
        "count": len(ranking.rows),
        "by_node": [row(r) for r in ranking.by_node()],
    }


def _as_bending(model: BendedModule, found: Any) -> dict[str, Any]:
    """The knob ``found`` as a bending of the page's (what ``POST /api/bendings`` takes):
    attached to ``model``, read from its configuration, and detached again."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unseeded callbacks: as the editor reads them
        before = model.bending_config()
        found.attach(model)
        try:
            data = model.bending_config().to_dict(keys=False)
        finally:
            restore(model, before)
    name = found.control.name
    controls = [c for c in data["controls"] if c["name"] == name]
    return {**data["bendings"][-1], "controls": controls}


def _check_descriptor(descriptor: Any) -> None:
    if not isinstance(descriptor, str) or descriptor not in NAMES:
        raise StudioError(f"unknown descriptor {descriptor!r}: choose one of {', '.join(NAMES)}")


def _seconds(seconds: Any) -> float:
    given = seconds_value(seconds)
    return SECONDS if given is None else min(given, SECONDS)


def _free_name(base: str, taken: set[str]) -> str:
    if base not in taken:
        return base
    return next(f"{base}_{i}" for i in itertools.count(2) if f"{base}_{i}" not in taken)
