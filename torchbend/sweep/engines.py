"""Where a sweep's renders run: in this process, in a pool of local processes, or on a Ray
cluster. Each engine loads the model once per worker, keeps a bounded number of jobs in flight
(so a sweep of a million renders holds a few in memory, not all), and yields results as they
finish, in any order, to the one writer of the manifest. A worker that dies is replaced and
the jobs it held are given to another: a finished render is never lost, an unfinished one is
rendered again (renders depend on their job alone, so that changes no bit).
"""

from __future__ import annotations

import collections
import os
import select
from collections.abc import Iterable, Iterator
from typing import Any, Generic, TypeVar

from ..errors import SweepError
from .jobs import Task, Work
from .process import WorkerProcess
from .wire import read_message

__all__ = [
    "ENGINES",
    "Engine",
    "InProcess",
    "LocalPool",
    "RayEngine",
    "make_engine",
]

ENGINES = ("local", "ray")
MAX_DEATHS = 3
"""A job whose worker died this many times is recorded as failed instead of tried again (it is
the job that kills them: out of memory, a crash in native code)."""

J = TypeVar("J", bound=Task)
Result = tuple[J, dict[str, Any], bytes | None]


class Engine:
    """Runs jobs on workers that each hold what :meth:`Work.renderer` builds (for a sweep, a
    :class:`~torchbend.sweep.jobs.Renderer`)."""

    name = "engine"
    workers = 1

    def start(self, setup: Work) -> None:
        raise NotImplementedError

    def results(self, jobs: Iterable[J]) -> Iterator[Result[J]]:
        raise NotImplementedError

    def pids(self) -> list[int]:
        """The process ids of the workers (to watch them, or kill one in a test)."""
        return []

    def close(self, now: bool = False) -> None:
        """Stop the workers: once they are idle, or ``now``, whatever they are doing (the
        sweep was interrupted or failed: what they were rendering is rendered again on
        resume)."""

    def describe(self) -> str:
        return f"{self.name}, {self.workers} worker(s)"


class _Queue(Generic[J]):
    """The jobs still to hand out to workers: those a dead worker held first, then new ones."""

    def __init__(self, jobs: Iterable[J]) -> None:
        self.pending = iter(jobs)
        self.retry: collections.deque[J] = collections.deque()
        self.deaths: collections.Counter[str] = collections.Counter()

    def next(self) -> J | None:
        """The next job, or ``None`` while there is none."""
        return self.retry.popleft() if self.retry else next(self.pending, None)

    def give_back(self, job: J) -> None:
        self.retry.append(job)

    def died(self, job: J, worker: str) -> Result[J] | None:
        """``job``'s worker died rendering it: the job goes back in the queue, or, the
        :data:`MAX_DEATHS`-th time, comes out as a failed render."""
        self.deaths[job.id] += 1
        if self.deaths[job.id] < MAX_DEATHS:
            self.give_back(job)
            return None
        why = f"its {worker} died {MAX_DEATHS} times rendering it"
        fields: dict[str, Any] = {
            "audio": None,
            "measures": {},
            "effects": {},
            "flags": {},
            "broken": True,
            "error": why,
        }
        return job, job.row(**fields, timing={}), None


class InProcess(Engine):
    """Renders in this process, one after the other (``workers=0``): no start-up, and what a
    debugger or a profiler sees."""

    name = "in-process"

    def start(self, setup: Work) -> None:
        self.renderer = setup.renderer()

    def results(self, jobs: Iterable[J]) -> Iterator[Result[J]]:
        for job in jobs:
            row, data = self.renderer.render(job)
            yield job, row, data

    def pids(self) -> list[int]:
        return [os.getpid()]


class LocalPool(Engine):
    """Renders in ``workers`` processes of this machine, each loading the model once and
    holding at most ``in_flight`` jobs. The workers are plain ``python -m
    torchbend.sweep.worker`` processes, not ``multiprocessing`` ones, so the script that runs
    the sweep is never imported again in them. A worker that dies is replaced, and the jobs it
    held go to the others."""

    name = "local"

    def __init__(self, workers: int | None = None, in_flight: int = 2) -> None:
        self.workers = workers or os.cpu_count() or 1
        self.in_flight = in_flight
        self.processes: list[WorkerProcess] = []
        self.restarts = 0

    def start(self, setup: Work) -> None:
        self.setup = setup
        self.processes = [WorkerProcess(setup) for _ in range(self.workers)]
        for process in self.processes:
            process.ready()

    def pids(self) -> list[int]:
        return sorted(p.process.pid for p in self.processes)

    def results(self, jobs: Iterable[J]) -> Iterator[Result[J]]:
        queue = _Queue(jobs)
        while True:
            for process in self.processes:
                while len(process.jobs) < self.in_flight:
                    job = queue.next()
                    if job is None:
                        break
                    process.jobs[job.id] = job
                    if not process.send(job):
                        break  # it died: seen below
            busy = [p for p in self.processes if p.jobs]
            if not busy:
                return
            readable, _, _ = select.select([p.stdout for p in busy], [], [])
            for process in busy:
                if process.stdout not in readable:
                    continue
                message = read_message(process.stdout)
                if message is None:  # the worker died: its jobs go to the others
                    for job in process.jobs.values():
                        if (failed := queue.died(job, "worker")) is not None:
                            yield failed
                    self._replace(process)
                    continue
                _, key, (row, data) = message
                yield process.jobs.pop(key), row, data

    def _replace(self, process: WorkerProcess) -> None:
        process.stop(kill=True)
        process.finish(timeout=30)
        index = self.processes.index(process)
        self.processes[index] = WorkerProcess(self.setup)
        self.processes[index].ready()
        self.restarts += 1

    def close(self, now: bool = False) -> None:
        for process in self.processes:  # all told first, so that they end together
            process.stop(kill=now)
        for process in self.processes:
            process.finish(timeout=30)
        self.processes = []


class _RayWorker:
    """A Ray actor's state: a loaded model (wrapped with ``ray.remote`` at start)."""

    def __init__(self, setup: Work) -> None:
        self.renderer = setup.renderer()

    def render(self, job: Task) -> tuple[dict[str, Any], bytes | None]:
        return self.renderer.render(job)

    def pid(self) -> int:
        return os.getpid()


def import_ray() -> Any:
    try:
        import ray
    except ImportError as e:
        raise ImportError("the ray engine needs Ray: pip install 'torchbend[ray]'") from e
    return ray


class RayEngine(Engine):
    """Renders on a Ray cluster: one actor per worker holds a loaded model; each actor has at
    most ``in_flight`` jobs queued; results are taken with ``ray.wait`` as they finish and
    streamed to the manifest. An actor that dies is replaced by a new one and its jobs are
    given out again.

    ``address`` is a running cluster's (``ray://host:10001`` or ``auto``); without it, a Ray
    runtime already started in this process is used, or a local one is started with
    ``workers`` CPUs (and stopped at :meth:`close`). The workers must be able to import
    torchbend and the model's code, and read the model's files (the inputs travel with the
    jobs).
    """

    name = "ray"

    def __init__(
        self, address: str | None = None, workers: int | None = None, in_flight: int = 2
    ) -> None:
        self.address = address
        self.requested = workers
        self.in_flight = in_flight
        self.started_ray = False
        self.actors: list[Any] = []
        self.restarts = 0

    def start(self, setup: Work) -> None:
        ray = import_ray()
        if not ray.is_initialized():
            options: dict[str, Any] = {
                "include_dashboard": False,
                "log_to_driver": False,
                "configure_logging": False,
            }
            if self.address is not None:
                options["address"] = self.address
            else:
                options["num_cpus"] = self.requested or os.cpu_count() or 1
            try:
                ray.init(**options)
            except Exception as e:  # Ray raises ConnectionError, RuntimeError... by cause
                where = self.address or "a local Ray runtime"
                raise SweepError(f"could not start or reach {where}: {e}") from e
            self.started_ray = True
        cpus = int(ray.cluster_resources().get("CPU", 1))
        self.workers = self.requested or max(1, cpus)
        self.actor_class = ray.remote(num_cpus=1, max_restarts=0)(_RayWorker)
        self.setup_ref = ray.put(setup)
        self.actors = [self.actor_class.remote(self.setup_ref) for _ in range(self.workers)]
        ray.get([a.pid.remote() for a in self.actors])  # each loaded its model

    def pids(self) -> list[int]:
        ray = import_ray()
        return sorted(ray.get([a.pid.remote() for a in self.actors]))

    def results(self, jobs: Iterable[J]) -> Iterator[Result[J]]:
        ray = import_ray()
        from ray.exceptions import RayActorError

        queue = _Queue(jobs)
        running: dict[Any, tuple[J, int]] = {}  # object ref -> (job, actor slot)
        load = [0] * len(self.actors)
        while True:
            for slot in range(len(self.actors)):
                while load[slot] < self.in_flight:
                    job = queue.next()
                    if job is None:
                        break
                    running[self.actors[slot].render.remote(job)] = (job, slot)
                    load[slot] += 1
            if not running:
                return
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                job, slot = running.pop(ref)
                load[slot] -= 1
                try:
                    row, data = ray.get(ref)
                except RayActorError:
                    if (failed := queue.died(job, "Ray actor")) is not None:
                        yield failed
                    self._replace(slot, running, queue, load)
                    continue
                yield job, row, data

    def _replace(
        self,
        slot: int,
        running: dict[Any, tuple[J, int]],
        queue: _Queue[J],
        load: list[int],
    ) -> None:
        """A new actor in ``slot``; the jobs the dead one still held go back in the queue."""
        ray = import_ray()
        for ref, (job, s) in list(running.items()):
            if s == slot:
                del running[ref]
                queue.give_back(job)
        load[slot] = 0
        ray.kill(self.actors[slot], no_restart=True)
        self.actors[slot] = self.actor_class.remote(self.setup_ref)
        self.restarts += 1

    def close(self, now: bool = False) -> None:
        ray = import_ray()
        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []
        if self.started_ray:
            ray.shutdown()
            self.started_ray = False


def make_engine(
    engine: str | Engine, workers: int | None = None, address: str | None = None
) -> Engine:
    """The engine ``engine`` names (``local``, ``ray``), or ``engine`` itself."""
    if isinstance(engine, Engine):
        return engine
    if engine == "local":
        return InProcess() if workers == 0 else LocalPool(workers)
    if engine == "ray":
        return RayEngine(address, workers)
    raise SweepError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
