"""The studio's HTTP endpoints: each a thin call of :class:`~torchbend.studio.session.Studio`
(reached as ``request.app.state.studio``), run in a worker thread so that a render never
blocks the others' replies."""

from __future__ import annotations

from starlette.concurrency import run_in_threadpool
from starlette.endpoints import HTTPEndpoint
from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

from ..errors import StudioError
from .exports import export_nntilde, exported_file
from .replies import body, error, field, has_body, read_body, reply
from .session import Studio

__all__ = ["API_ROUTES", "SWEEP_SUFFIXES", "sweep_file"]

SWEEP_SUFFIXES = frozenset(
    {".html", ".js", ".css", ".png", ".svg", ".json", ".jsonl", ".wav", ".flac", ".ogg"}
)
"""The kinds of file the sweep's folder serves (its atlas and what the atlas shows)."""


def _studio(request: Request) -> Studio:
    studio: Studio = request.app.state.studio
    return studio


def _index(request: Request) -> int:
    text = request.path_params["index"]
    if not text.isdigit():
        raise StudioError(f"a bending is named by its position, a whole number, got {text!r}")
    return int(text)


def _name(request: Request) -> str:
    name = request.query_params.get("name")
    if not name:
        raise StudioError("give the name: ?name=...")
    return name


async def sweep_file(request: Request) -> Response:
    """A file of the sweep's folder (its atlas, its renders), nothing outside it."""
    folder = _studio(request).sweep
    if folder is None:
        return error("no sweep: start the studio with --sweep FOLDER", 404)
    asked = request.path_params["path"]
    path = (folder / asked).resolve()
    if not path.is_relative_to(folder) or not path.is_file() or path.suffix not in SWEEP_SUFFIXES:
        return error(f"no file {asked!r} in the sweep", 404)
    return FileResponse(path)


async def model(request: Request) -> Response:
    return reply(_studio(request).model_json())


async def graph(request: Request) -> Response:
    return reply(await run_in_threadpool(_studio(request).graph, request.query_params.get("fn")))


async def weights(request: Request) -> Response:
    pattern = request.query_params.get("pattern")
    return reply({"rows": await run_in_threadpool(_studio(request).weights, pattern)})


async def activations(request: Request) -> Response:
    q = request.query_params
    rows = await run_in_threadpool(_studio(request).activations, q.get("fn"), q.get("pattern"))
    return reply({"rows": rows})


async def activation_stats(request: Request) -> Response:
    fn = request.query_params.get("fn")
    studio = _studio(request)
    return reply(await run_in_threadpool(studio.activation_stats, _name(request), fn))


async def weight_stats(request: Request) -> Response:
    return reply(await run_in_threadpool(_studio(request).weight_stats, _name(request)))


def _query_int(request: Request, key: str) -> int | None:
    text = request.query_params.get(key)
    if text is None or text == "":
        return None
    try:
        return int(text)
    except ValueError:
        raise StudioError(f"{key} is a whole number, got {text!r}") from None


def _query_seconds(request: Request) -> float | None:
    text = request.query_params.get("seconds")
    if not text:
        return None
    try:
        return float(text)
    except ValueError:
        raise StudioError(f"seconds is a number of seconds above 0, got {text!r}") from None


def _wav(data: bytes) -> Response:
    return Response(data, media_type="audio/wav")


async def audition(request: Request) -> Response:
    """The current sound with a channel of a node soloed or bypassed, as WAV:
    ``?name=NODE&channel=C&mode=solo|bypass&seconds=S``."""
    q = request.query_params
    auditions = _studio(request).auditions
    mode = q.get("mode", "solo")
    channel, seconds = _query_int(request, "channel"), _query_seconds(request)
    return _wav(await run_in_threadpool(auditions.render, _name(request), channel, mode, seconds))


async def activation_audio(request: Request) -> Response:
    """A node's activation over time as a sound, as WAV: ``?name=NODE&channel=C&fn=FN``."""
    fn, channel = request.query_params.get("fn"), _query_int(request, "channel")
    auditions = _studio(request).auditions
    return _wav(await run_in_threadpool(auditions.activation, _name(request), fn, channel))


async def callbacks(request: Request) -> Response:
    from .describe import callback_forms

    return reply({"callbacks": callback_forms()})


class Config(HTTPEndpoint):
    """The bending configuration: read it, or replace it whole."""

    async def get(self, request: Request) -> Response:
        return reply(await run_in_threadpool(_studio(request).editor.state))

    async def put(self, request: Request) -> Response:
        editor = _studio(request).editor
        return reply(await run_in_threadpool(editor.set_config, await body(request)))


async def add(request: Request) -> Response:
    editor = _studio(request).editor
    return reply(await run_in_threadpool(editor.add, await body(request)))


async def remove(request: Request) -> Response:
    return reply(await run_in_threadpool(_studio(request).editor.remove, _index(request)))


async def move(request: Request) -> Response:
    to = field(await body(request), "to")
    return reply(await run_in_threadpool(_studio(request).editor.move, _index(request), to))


async def reset(request: Request) -> Response:
    return reply(await run_in_threadpool(_studio(request).editor.reset))


async def undo(request: Request) -> Response:
    return reply(await run_in_threadpool(_studio(request).editor.undo))


async def redo(request: Request) -> Response:
    return reply(await run_in_threadpool(_studio(request).editor.redo))


async def control(request: Request) -> Response:
    value = field(await body(request), "value")
    editor = _studio(request).editor
    return reply(await run_in_threadpool(editor.set_control, request.path_params["name"], value))


class Configs(HTTPEndpoint):
    """The saved configurations: list them, or save the current one under a name."""

    async def get(self, request: Request) -> Response:
        return reply({"configs": _studio(request).editor.saved()})

    async def post(self, request: Request) -> Response:
        name = field(await body(request), "name")
        return reply(await run_in_threadpool(_studio(request).editor.save, name))


async def saved(request: Request) -> Response:
    editor = _studio(request).editor
    return reply(await run_in_threadpool(editor.load_saved, request.path_params["name"]))


class Sounds(HTTPEndpoint):
    """The sounds to play through the model: list them, or upload one (``?name=loop.wav``)."""

    async def get(self, request: Request) -> Response:
        return reply(_studio(request).sounds())

    async def post(self, request: Request) -> Response:
        studio = _studio(request)
        name = request.query_params.get("name")
        if not name:
            raise StudioError("give the file's name: POST /api/sounds?name=loop.wav")
        data = await read_body(request, studio.library.limits.bytes)
        return reply(await run_in_threadpool(studio.upload, name, data))


async def current(request: Request) -> Response:
    return reply(_studio(request).set_current(field(await body(request), "id")))


class Render(HTTPEndpoint):
    """Renders: the last one (which a reloaded page shows again), or a new one."""

    async def get(self, request: Request) -> Response:
        return reply({"render": _studio(request).last_render})

    async def post(self, request: Request) -> Response:
        data = await body(request) if has_body(request) else {}
        sound, seconds = field(data, "sound", None), field(data, "seconds", None)
        return reply(await run_in_threadpool(_studio(request).render, sound, seconds))


async def export(request: Request) -> Response:
    studio = _studio(request)
    name = field(await body(request), "name")
    return reply(await run_in_threadpool(export_nntilde, studio, name))


async def exported(request: Request) -> Response:
    path = exported_file(_studio(request), request.path_params["file"])
    return FileResponse(path, media_type="application/octet-stream", filename=path.name)


async def audio(request: Request) -> Response:
    kind = request.path_params["file"].removesuffix(".wav")
    path = _studio(request).audio_file(request.path_params["render"], kind)
    return FileResponse(path, media_type="audio/wav")  # answers Range: the page seeks


async def discover(request: Request) -> Response:
    """What the discovery panel offers: the descriptors, and the limits of a ranking."""
    from ..audio.perceptual import NAMES
    from .discovery import PROBE_RENDERS, SECONDS

    return reply({"descriptors": list(NAMES), "seconds": SECONDS, "probe_renders": PROBE_RENDERS})


async def rank(request: Request) -> Response:
    """Start ranking the channels by a descriptor of the current sound: ``{"descriptor",
    "targets"?, "seconds"?}``; answers the job to poll."""
    data = await body(request)
    descriptor, targets = field(data, "descriptor"), field(data, "targets", None)
    seconds = field(data, "seconds", None)
    discoveries = _studio(request).discoveries
    return reply(await run_in_threadpool(discoveries.start, descriptor, targets, seconds))


async def rank_job(request: Request) -> Response:
    return reply(_studio(request).discoveries.job(request.path_params["job"]))


async def make_knob(request: Request) -> Response:
    """Attach a knob for a descriptor, made of its last ranking: ``{"descriptor", "name"?}``."""
    data = await body(request)
    descriptor, name = field(data, "descriptor"), field(data, "name", None)
    discoveries = _studio(request).discoveries
    return reply(await run_in_threadpool(discoveries.make_knob, descriptor, name))


API_ROUTES = [
    Route("/api/model", model),
    Route("/api/graph", graph),
    Route("/api/weights", weights),
    Route("/api/activations", activations),
    Route("/api/stats/activation", activation_stats),
    Route("/api/stats/weight", weight_stats),
    Route("/api/audition", audition),
    Route("/api/audition/activation", activation_audio),
    Route("/api/callbacks", callbacks),
    Route("/api/discover", discover),
    Route("/api/discover/rank", rank, methods=["POST"]),
    Route("/api/discover/rank/{job}", rank_job),
    Route("/api/discover/knob", make_knob, methods=["POST"]),
    Route("/api/config", Config),
    Route("/api/bendings", add, methods=["POST"]),
    Route("/api/bendings/{index}", remove, methods=["DELETE"]),
    Route("/api/bendings/{index}/move", move, methods=["POST"]),
    Route("/api/reset", reset, methods=["POST"]),
    Route("/api/undo", undo, methods=["POST"]),
    Route("/api/redo", redo, methods=["POST"]),
    Route("/api/controls/{name}", control, methods=["POST"]),
    Route("/api/configs", Configs),
    Route("/api/configs/{name}", saved),
    Route("/api/sounds", Sounds),
    Route("/api/sounds/current", current, methods=["POST"]),
    Route("/api/render", Render),
    Route("/api/audio/{render}/{file}", audio),
    Route("/api/export", export, methods=["POST"]),
    Route("/api/exports/{file}", exported),
]
"""The JSON API, under ``/api/``."""
