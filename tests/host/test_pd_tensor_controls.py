"""A tensor control set live from a Pd array, in the real nn~ inside Pure Data: the patch
writes an array, sends ``[reload(`` (nn~ 1.6 finds buffer attributes only after one), then
``[set gains ARRAY(``; Pd plays what the file gives called as nn~ calls it, and what Python
gives with the array resampled to the control's length; naming an array the patch lacks
changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import torchbend as tb
from tests.export.test_tensor_controls import CHANNELS, gains_net
from tests.pdhost import Message, compare, lag, needs_pd, nn_emulation, play
from torchbend.controls import rules

pytestmark = [needs_pd, pytest.mark.audio]

ARRAY = [1.0, 0.5, 0.0, -0.5, -1.0, -1.5, 2.0]
"""What the patch writes into its array ``gains``: 7 values for a control of 4."""

SET_AT = 8192
"""The sample before whose tick the patch sends ``[set gains gains(``."""


def test_a_pd_array_sets_a_tensor_control_live(tmp_path):
    file = tmp_path / "gains.ts"
    bended = gains_net()
    tb.export.nntilde(bended, file, params={"forward": [1, 1, 1, 1]})
    audio = (0.5 * np.sin(np.arange(16384) * 0.01)).astype(np.float32)[None]
    values = torch.tensor([ARRAY])
    messages = [
        Message(0, "reload"),  # what the emulation's fresh load is
        Message(
            SET_AT,
            "set gains gains",
            apply=lambda f: f.set_buffer_attribute("gains#0", values, 44100),
        ),
        Message(12288, "set gains nosuch"),  # no such array: nn~ complains, nothing changes
    ]
    buffers = (256, 2048)
    run = play(
        file, audio, tmp_path / "pd", buffers=buffers, messages=messages, arrays={"gains": ARRAY}
    )
    assert set(run.errors) == {
        "error: table nosuch not found",
        "error: nn~: buffer for argument gains#0 not found. Did you initialise it?",
    }, run.errors
    compare(file, audio, run, messages=messages)
    bended.update("gains", rules.resampled(torch.tensor(ARRAY), CHANNELS))
    with torch.no_grad():
        python = bended(torch.from_numpy(audio)[None])[0].numpy()
    for n in buffers:
        played = run.outputs[n]
        unset = nn_emulation(file, audio, n)
        changed = np.abs(played - unset[:, : played.shape[-1]]).max(axis=0) > 1e-3
        # The array reached the file: the output changes from the buffer the set lands in
        # (the one nn~ was computing, or the next), not before.
        assert changed.any() and not changed[: SET_AT - n + lag(n)].any(), n
        late = played[:, lag(n) :]
        start = SET_AT + 2 * n  # the first whole buffer computed after the set
        error = np.abs(late[:, start:] - python[:, start : late.shape[-1]]).max()
        assert error < 1e-5, f"buffer {n}: Pd differs from Python by {error}"
