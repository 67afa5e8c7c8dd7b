"""Effect maps on the sweep engines: each node's probes sent to workers that load the model
from its reference and run the very code :func:`~torchbend.discover.rank` runs in process."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from ..bended import BendedModule
from ..config import BendingConfig
from ..errors import DiscoveryError, SweepError
from ..models.reference import MODEL_FORMS, load_model
from ..sweep.engines import ENGINES, Engine, make_engine
from ..sweep.jobs import with_threads

__all__ = ["NodeProbes", "ProbeRenderer", "ProbeSetup", "remote_slopes"]

Slopes = Callable[..., torch.Tensor]
"""``(bended, fn, (node, gains, offsets, dim), sounds, before, rate, batch, config)`` ->
``[probes / 2, descriptors]``: rank's probing of one node."""


@dataclass(frozen=True)
class NodeProbes:
    """One job: every probe of one node (``gains`` and ``offsets`` ``[probes, channels]``
    along the channel axis ``dim``), in the order and batches rank renders them."""

    node: str
    gains: torch.Tensor
    offsets: torch.Tensor
    dim: int

    @property
    def id(self) -> str:
        return self.node

    def row(self, **fields: Any) -> dict[str, Any]:
        return {"id": self.node, **fields}


@dataclass(frozen=True)
class ProbeSetup:
    """What every worker needs to probe nodes as rank does in process: the model's reference,
    the method and its input, the sounds and their unprobed descriptors, the bendings set
    (a configuration's dict), and torch's thread count (some kernels sum in an order that
    depends on it: the same count gives the same bits)."""

    model: str
    fn: str
    argument: str
    sounds: torch.Tensor
    before: tuple[dict[str, float], ...]
    rate: int
    batch: int
    config: dict[str, Any]
    threads: int
    slopes: Slopes
    """rank's function that probes a node, pickled by reference: a worker imports it from the
    torchbend it runs, and runs the code the driver would have run."""

    def renderer(self) -> ProbeRenderer:
        return ProbeRenderer(self)


class ProbeRenderer:
    """A worker's model, loaded from its reference, traced on the sounds and bent as the
    driver's was; it probes node after node, each from the same bendings."""

    def __init__(self, setup: ProbeSetup) -> None:
        self.setup = setup
        with with_threads(setup.threads):
            self.bended = BendedModule(load_model(setup.model))
            inputs: dict[str, Any] = {setup.argument: setup.sounds}
            self.bended.trace(setup.fn, **inputs)
            self.config = BendingConfig.from_dict(setup.config, source="the bendings set")
            if len(self.config):
                self.bended.bend(self.config)

    def render(self, job: NodeProbes) -> tuple[dict[str, Any], None]:
        """The job's row: its ``slopes``, or the ``error`` that stopped them."""
        s = self.setup
        probes = (job.node, job.gains, job.offsets, job.dim)
        with with_threads(s.threads):
            try:
                slopes = s.slopes(
                    self.bended,
                    s.fn,
                    probes,
                    s.sounds,
                    list(s.before),
                    s.rate,
                    s.batch,
                    self.config,
                )
            except Exception as e:  # the model failed under a probe: the driver says where
                return job.row(slopes=None, error=f"{type(e).__name__}: {e}"), None
        return job.row(slopes=slopes, error=None), None


def _same_model(bended: BendedModule, model: str | None, engine: str | Engine) -> None:
    """Refuse a reference the workers cannot load, or that loads another model than the one
    ``bended`` wraps (its weights, unbent, must be equal bit for bit)."""
    if model is None:
        raise DiscoveryError(
            f"rank(engine={engine!r}) renders on workers that load the model themselves: give "
            f"model=, {MODEL_FORMS} (e.g. model='tiny_ddsp' or model='mypackage.models:build'); "
            "a model built in this process only can be ranked in it (engine=None)"
        )
    theirs = load_model(model).state_dict()
    ours = bended.module.state_dict()
    differ = sorted(set(theirs) ^ set(ours)) or [
        k for k in ours if not torch.equal(ours[k], theirs[k])
    ]
    if differ:
        raise DiscoveryError(
            f"model={model!r} loads another model than the one ranked (tensor {differ[0]!r} "
            "differs): the workers would probe that one; give the reference this model is "
            "loaded from"
        )


def remote_slopes(
    engine: str | Engine,
    model: str | None,
    bended: BendedModule,
    fn: str,
    inputs: dict[str, torch.Tensor],
    probes: Iterable[tuple[str, torch.Tensor, torch.Tensor, int]],
    before: list[dict[str, float]],
    rate: int,
    batch: int,
    config: BendingConfig,
    slopes: Slopes,
) -> Iterator[tuple[str, torch.Tensor]]:
    """``(node, slopes)`` for each of ``probes`` (drawn lazily, in order), as the workers of
    ``engine`` (``"local"``, ``"ray"`` or an :class:`~torchbend.sweep.Engine`) finish them, in
    any order; ``inputs`` is ``fn``'s argument (the sounds) by name. The engine is stopped at
    the end, or at once on an error."""
    ((argument, sounds),) = inputs.items()
    _same_model(bended, model, engine)
    try:
        data = config.to_dict()
    except Exception as e:  # a callback with no configuration form cannot travel
        raise DiscoveryError(
            f"the bendings set cannot be sent to workers ({e}): rank in this process "
            "(engine=None), or set only bendings that save in a configuration"
        ) from e
    try:
        runner = make_engine(engine)
    except SweepError:
        raise DiscoveryError(
            f"engine: expected None (this process), one of {', '.join(ENGINES)} or an Engine, "
            f"got {engine!r}"
        ) from None
    assert model is not None  # checked by _same_model
    setup = ProbeSetup(
        model=model,
        fn=fn,
        argument=argument,
        sounds=sounds,
        before=tuple(before),
        rate=rate,
        batch=batch,
        config=data,
        threads=torch.get_num_threads(),
        slopes=slopes,
    )
    try:
        try:
            runner.start(setup)
        except SweepError as e:  # a worker could not load the model: its error is above
            raise DiscoveryError(f"the workers could not start: {e}") from e
        for job, row, _ in runner.results(NodeProbes(*p) for p in probes):
            if row.get("error"):
                raise DiscoveryError(f"probing {job.node!r} failed on a worker: {row['error']}")
            yield job.node, row["slopes"]
    except BaseException:
        runner.close(now=True)
        raise
    runner.close()
