"""A local worker process as the driver of a sweep sees it: started, fed, stopped, timed.

What runs inside it is :mod:`torchbend.sweep.worker`; :class:`~torchbend.sweep.engines.LocalPool`
keeps a pool of them.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ..errors import SweepError
from .jobs import Work
from .wire import read_message, write_message

__all__ = ["WorkerProcess", "worker_startup"]


class WorkerProcess:
    """One local worker process (``python -m torchbend.sweep.worker``) as the driver of a
    sweep sees it: its pipes and the jobs it holds."""

    def __init__(self, setup: Work) -> None:
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([package_root, *filter(None, [env.get("PYTHONPATH")])])
        # A session of its own: a Ctrl-C in the terminal (SIGINT to the whole foreground
        # process group) reaches the driver alone, which stops its workers itself, instead of
        # each worker printing a KeyboardInterrupt traceback.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "torchbend.sweep.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin, self.process.stdout
        self.jobs: dict[str, Any] = {}  # id -> the Task it holds
        self.send(setup)

    def send(self, message: Any) -> bool:
        try:
            write_message(self.stdin, message)
        except (BrokenPipeError, OSError):
            return False
        return True

    def ready(self) -> int:
        message = read_message(self.stdout)
        if message is None or message[0] != "ready":
            code = self.process.wait()
            raise SweepError(
                f"a sweep worker could not load the model (exit code {code}; its error is "
                "printed above)"
            )
        return int(message[1])

    def stop(self, kill: bool = False) -> None:
        """End the worker: killed, or its pipes closed, so that it ends at the end of its
        input, or at once if it is blocked writing a result nobody will read (then wait for
        it with :meth:`finish`)."""
        if kill:
            self.process.kill()
        with contextlib.suppress(OSError):
            self.stdin.close()
        with contextlib.suppress(OSError):
            self.stdout.close()  # a worker blocked writing a result nobody reads ends now

    def finish(self, timeout: float) -> None:
        """Wait for the worker to end after :meth:`stop`, killing it after ``timeout``."""
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def worker_startup(setup: Work) -> float:
    """Seconds a local worker takes from its start to its word that it is ready: a new
    interpreter importing torch and torchbend, then loading and tracing the model (one started
    and stopped, to time it)."""
    start = time.perf_counter()
    process = WorkerProcess(setup)
    try:
        process.ready()
        return time.perf_counter() - start
    finally:
        process.stop()
        process.finish(timeout=30)
