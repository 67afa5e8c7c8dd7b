"""Tutorial: the studio started from Python and driven through its HTTP API, as the page does.

Run: python examples/14_studio.py [--out DIR] [--smoke] [--serve]

``torchbend studio`` opens a model in the browser (docs/studio.md). Everything the page does
is a request to the studio's server, so a script can do it too. This one starts a studio on
the shipped character model (TinyDDSP, what ``torchbend studio`` opens by default) in a
thread of its own, on 127.0.0.1 and a free port, then:

- reads the model's description (its latent's named channels) and the traced graph, and
  finds the decoder's hidden activation by name;
- attaches ``Mask`` to it with its probability on a knob (a control named ``holes``);
- turns the knob to 0.6 and renders the sung line (the bent render and the unbent one);
- saves the bending as the page's Save button does, into ``DIR/session/configs``;
- loads that file in plain Python, bends a fresh model with it and renders the voice again:
  the same samples as the studio's file.

``--serve`` then keeps the server running and opens the page in your browser, with the
bending in place, until Ctrl+C. ``--smoke`` renders a second of the voice.

Everything goes to DIR (default ``out/examples/14``): the studio's folder ``session/``
(renders, configs), ``python.wav`` (the Python render) and ``studio.txt`` (what was printed).
"""

from __future__ import annotations

import argparse
import json
import threading
import urllib.request
import webbrowser
from pathlib import Path
from typing import Any

import torch

import torchbend as tb
from torchbend.audio.render import render
from torchbend.audio.safety import FILE_CEILING
from torchbend.models.reference import load_model
from torchbend.studio import Studio, StudioServer


def call(server: StudioServer, method: str, path: str, body: Any = None) -> Any:
    """One request to the studio, as the page sends it; the JSON it answers."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.url.rstrip("/") + path, data=data, method=method)
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="out/examples/14")
    parser.add_argument("--smoke", action="store_true", help="render a second of the loop")
    parser.add_argument("--serve", action="store_true", help="keep serving, open the page")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines: list[str] = []

    def say(line: str) -> None:
        print(line)
        lines.append(line)

    studio = Studio(load_model("tiny_ddsp"), "tiny_ddsp", output=out / "session")
    server = StudioServer(studio, port=0).start()
    try:
        described = call(server, "GET", "/api/model")
        say(f"{described['model']} ({described['class']}): latent {described['latent_names']}")
        nodes = call(server, "GET", "/api/graph")["nodes"]
        hidden = next(n for n in nodes if n["module"] == "decoder.1")
        say(f"the studio serves {server.url}; {len(nodes)} nodes in forward")
        say(f"decoder's hidden activation: {hidden['name']} {hidden['shape']}")
        state = call(
            server,
            "POST",
            "/api/bendings",
            {
                "callback": {"class": "Mask", "args": {"prob": {"control": "holes"}, "seed": 0}},
                "patterns": [hidden["name"] + "$"],
                "controls": [{"name": "holes", "value": 0.2, "range": [0.0, 1.0]}],
            },
        )
        say(f"attached Mask: keys {state['keys']}, knob {state['controls'][0]['widget']['kind']}")
        call(server, "POST", "/api/controls/holes", {"value": 0.6})
        seconds = 1.0 if args.smoke else None
        rendered = call(server, "POST", "/api/render", {"sound": "voice", "seconds": seconds})
        say(
            f"rendered {rendered['seconds']} s of the voice {rendered['how']}, "
            f"{rendered['realtime_factor']:.0f}x realtime; distance to unbent "
            f"{rendered['distance']:.3f}"
        )
        saved = call(server, "POST", "/api/configs", {"name": "holes"})
        say(f"saved the bending to {saved['path']}")

        bended = tb.BendedModule(tb.models.load("tiny_ddsp").set_streaming(True))
        bended.trace(x=torch.zeros(1, 1, 8192))
        bended.bend(tb.BendingConfig.load(saved["path"]))
        audio = studio.library.get("voice").audio
        if seconds is not None:
            audio = audio[:, : int(seconds * 44100)]
        stage = tb.audio.Safety(44100, ceiling=FILE_CEILING)  # the studio's files' stage
        python, _ = render(bended, audio, 44100, "forward", 8192, safety=stage)
        tb.audio.save(out / "python.wav", python, 44100)
        studio_file = studio.audio_file(rendered["id"], "bended")
        heard, _ = tb.audio.load(studio_file)
        written, _ = tb.audio.load(out / "python.wav")
        if not torch.equal(heard, written):
            raise SystemExit("Python's render of the saved bending differs from the studio's")
        say("Python's render of the saved bending equals the studio's, sample for sample")
        (out / "studio.txt").write_text("\n".join(lines) + "\n")
        if args.serve:
            webbrowser.open(server.url)
            print("serving; Ctrl+C stops")
            try:
                threading.Event().wait()
            except KeyboardInterrupt:
                pass
    finally:
        server.stop()


if __name__ == "__main__":
    main()
