"""A local sweep worker: ``python -m torchbend.sweep.worker``, started by
:class:`~torchbend.sweep.engines.LocalPool` through a
:class:`~torchbend.sweep.process.WorkerProcess`.

It reads a :class:`~torchbend.sweep.jobs.Work` (a sweep's :class:`~torchbend.sweep.jobs.Setup`, or
a discovery's probes) then jobs from its standard input and writes ``("ready", pid)`` then one
``("done", id, (row, audio))`` per job on its standard output (:mod:`torchbend.sweep.wire`). What
the model prints goes to the standard error: the output carries messages only. It ends quietly at
the end of its input or when the driver stops reading its output. A plain process started this way,
unlike a ``multiprocessing`` one, never imports the script that started the sweep (a script without
``if __name__ == "__main__":`` would run again in every worker).
"""

from __future__ import annotations

import os
import sys

from .wire import read_message, write_message

__all__ = ["main"]


def main() -> None:
    output = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # prints go to stderr
    source = sys.stdin.buffer
    setup = read_message(source)
    if setup is None:
        return
    renderer = setup.renderer()
    try:
        write_message(output, ("ready", os.getpid()))
        while (job := read_message(source)) is not None:
            write_message(output, ("done", job.id, renderer.render(job)))
    except BrokenPipeError:  # the driver stopped reading: it was interrupted, or died
        # what is left in the buffer goes nowhere, instead of failing again at exit
        nowhere = os.open(os.devnull, os.O_WRONLY)
        os.dup2(nowhere, output.fileno())
        os.close(nowhere)


if __name__ == "__main__":
    main()
