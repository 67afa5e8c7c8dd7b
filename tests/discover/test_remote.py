"""Effect maps on the sweep engines: a ranking made by local worker processes, or by Ray
actors, is the one made in process, float for float; a model the workers cannot load is
refused before any starts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

import torchbend as tb
from torchbend.discover import Ranking, rank
from torchbend.errors import DiscoveryError
from torchbend.sweep import LocalPool, RayEngine

from .planted import RATE, Planted

SOUND = torch.zeros(RATE * 3 // 20)
MODEL = "tests.discover.planted:Planted"
"""The planted synthesizer as a sweep names a model: the workers import it from the source
tree (the local pool puts its root on their path)."""
ROOT = str(Path(__file__).resolve().parents[2])
ASKED: dict[str, Any] = {
    "descriptor": "brightness",
    "targets": "^(tone|idle)$",
    "rate": RATE,
    "randoms": 1,
    "batch": 24,  # several batches a node: the workers must batch as the driver does
}


@pytest.fixture(scope="module")
def bended() -> tb.BendedModule:
    bended = tb.BendedModule(Planted())
    bended.trace(x=SOUND[None, None])
    bended.bend(tb.Scale(0.5), "^tone$")  # a bending set: the workers must set it too
    return bended


def same(ranking: Ranking) -> list[str]:
    """Every float of the ranking (NaN equal to NaN), in rank order."""
    return [repr(row) for row in ranking.rows] + [repr(ranking.random)]


@pytest.fixture(scope="module")
def in_process(bended: tb.BendedModule) -> Ranking:
    return rank(bended, SOUND, **ASKED)


def test_local_worker_processes_rank_as_this_process_does(
    bended: tb.BendedModule, in_process: Ranking
) -> None:
    seen: list[str] = []
    ranking = rank(
        bended,
        SOUND,
        **ASKED,
        engine=LocalPool(workers=2),
        model=MODEL,
        progress=lambda done, total, node: seen.append(node),
    )
    assert same(ranking) == same(in_process)
    assert sorted(seen) == ["idle", "tone"]
    assert [type(b.callback) for b in bended.bendings] == [tb.Scale]  # left as it was


@pytest.fixture(scope="module")
def ray_cluster() -> Any:
    """A real local Ray cluster with two CPUs (the sweep tests' rule: skipped without ray);
    its workers find the planted model in the source tree."""
    ray = pytest.importorskip("ray", reason="the Ray engine's tests need ray: pip install ray")
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        runtime_env={"env_vars": {"PYTHONPATH": ROOT}},
    )
    yield ray
    ray.shutdown()


def test_ray_actors_rank_as_this_process_does(
    ray_cluster: Any, bended: tb.BendedModule, in_process: Ranking
) -> None:
    ranking = rank(bended, SOUND, **ASKED, engine=RayEngine(workers=1), model=MODEL)
    assert same(ranking) == same(in_process)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"engine": "local"}, r"give model=, a shipped model name"),
        ({"engine": "local", "model": "tiny_rave"}, "loads another model than the one ranked"),
        ({"engine": "cloud", "model": MODEL}, "engine: expected None"),
    ],
)
def test_an_engine_needs_a_model_its_workers_load_as_this_one(
    bended: tb.BendedModule, changes: dict[str, Any], message: str
) -> None:
    with pytest.raises(DiscoveryError, match=message):
        rank(bended, SOUND, **ASKED, **changes)
