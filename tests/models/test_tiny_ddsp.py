"""TinyDDSP and its stages: shapes, errors, streaming, scripting, what the analysis measures."""

from __future__ import annotations

import copy
import math

import pytest
import torch

import torchbend as tb
from torchbend.audio.descriptors import hnr_db, spectral_centroid
from torchbend.audio.quality import loudness_lufs
from torchbend.errors import ModelError
from torchbend.models import FrameAnalysis, HarmonicNoiseSynth, TinyDDSP
from torchbend.models.synth import MODULATION_HZ, NOISE_PERIOD, noise_tables, soft_knee

RATE = 44100


def tone(freq: float, samples: int, amplitude: float = 0.3) -> torch.Tensor:
    t = torch.arange(samples, dtype=torch.float64) / RATE
    return (amplitude * torch.sin(2 * math.pi * freq * t)).float()[None, None]


@pytest.fixture(scope="module")
def model() -> TinyDDSP:
    torch.manual_seed(0)
    return TinyDDSP().eval()


def test_shapes_names_and_ratio(model: TinyDDSP) -> None:
    x = torch.randn(2, 1, 4096) * 0.1
    z = model.encode(x)
    assert z.shape == (2, model.latent_size, 4096 // model.ratio)
    assert model.decode(z).shape == x.shape
    assert model.latent_names == [
        "pitch",
        "loudness",
        "brightness",
        "noisiness",
        "timbre 1",
        "timbre 2",
        "timbre 3",
        "timbre 4",
    ]


@pytest.mark.parametrize(
    ("shape", "needle"), [((1, 2, 512), "mono audio"), ((1, 1, 500), "multiple of its hop 256")]
)
def test_bad_input_is_named(model: TinyDDSP, shape: tuple[int, ...], needle: str) -> None:
    with pytest.raises(ModelError, match=needle):
        model.encode(torch.zeros(shape))


@pytest.mark.parametrize("freq", [55.0, 110.0, 220.0, 440.0, 880.0, 1500.0])
def test_the_analysis_reads_the_pitch_of_a_tone_within_a_few_cents(freq: float) -> None:
    frames = FrameAnalysis()(tone(freq, 8192))
    cents = 1200 * (frames[0, 0, 8:] - math.log2(freq / 440.0))
    assert cents.abs().max() < 15, cents


def test_the_analysis_reads_level_brightness_and_noisiness() -> None:
    analysis = FrameAnalysis()
    low, high = analysis(tone(200.0, 8192)), analysis(tone(3200.0, 8192))
    # A sine of amplitude 0.3 has an RMS of 0.212: log10 is -0.67.
    assert low[0, 1, 8:].sub(math.log10(0.3 / math.sqrt(2))).abs().max() < 0.02
    # The centroid follows the tone: four octaves apart.
    assert (high[0, 2, 8:] - low[0, 2, 8:]).mean().item() == pytest.approx(4.0, abs=0.3)
    noise = analysis(torch.randn(1, 1, 8192, generator=torch.Generator().manual_seed(0)) * 0.1)
    assert low[0, 3, 8:].max() < 0.05 < 0.5 < noise[0, 3, 8:].min()


def test_silence_reads_the_resting_values_and_decodes_to_silence(model: TinyDDSP) -> None:
    z = model.encode(torch.zeros(1, 1, 2048))
    assert torch.equal(z[0, 0], torch.full((8,), -1.0))  # 220 Hz, at rest
    assert torch.equal(z[0, 3], torch.ones(8))
    assert model(torch.zeros(1, 1, 2048)).abs().max() < 10 ** (-70 / 20)


@pytest.mark.parametrize("block", [256, 512, 2048])
def test_streamed_blocks_equal_one_offline_call(block: int) -> None:
    torch.manual_seed(0)
    model = TinyDDSP().eval()
    x = torch.randn(1, 1, 8192, generator=torch.Generator().manual_seed(1)) * 0.2
    x[..., 3000:] += tone(330.0, 8192 - 3000)[0]
    with torch.no_grad():
        offline = model(x)
        model.set_streaming(True)
        streamed = torch.cat([model(x[..., i : i + block]) for i in range(0, 8192, block)], -1)
        model.reset_cache()
        again = torch.cat([model(x[..., i : i + block]) for i in range(0, 8192, block)], -1)
    # The analysis of one frame and of many round differently (1e-7); the oscillators' phase
    # sums the pitch's rounding over every sample, so the outputs differ by 1e-4 of full scale.
    assert (streamed - offline).abs().max() < 1e-3
    assert torch.equal(streamed, again)


def test_the_stream_follows_a_change_of_batch_size(model: TinyDDSP) -> None:
    model = TinyDDSP().eval().set_streaming(True)
    with torch.no_grad():
        assert model(torch.zeros(1, 1, 256)).shape == (1, 1, 256)
        assert model(torch.zeros(3, 1, 512)).shape == (3, 1, 512)


@pytest.mark.parametrize("streaming", [False, True])
def test_scripts_and_matches_eager(streaming: bool) -> None:
    torch.manual_seed(0)
    model = TinyDDSP().eval().set_streaming(streaming)
    scripted = torch.jit.script(copy.deepcopy(model))
    x = torch.randn(1, 1, 2048) * 0.2
    with torch.no_grad():
        for _ in range(2):
            assert torch.allclose(scripted(x), model(x), atol=1e-5)
        assert torch.allclose(scripted.encode(x), model.encode(x), atol=1e-5)


def test_bending_a_decoder_layer_changes_the_sound_but_not_the_model(model: TinyDDSP) -> None:
    before = {k: v.clone() for k, v in model.state_dict().items()}
    bended = tb.BendedModule(model)
    x = torch.randn(1, 1, 4096, generator=torch.Generator().manual_seed(2)) * 0.2
    bended.trace("forward", x=x)
    assert {"analysis", "decoder_0", "synth"} <= set(bended.activation_names())
    unbent = bended.forward(x)
    bended.bend(tb.Scale(2.0), "decoder_1$")
    assert (bended.forward(x) - unbent).abs().max() > 1e-3
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name


def test_the_noise_tables_loop_without_offset_at_unit_level() -> None:
    tables = noise_tables(4, 4099, RATE)
    assert tables.shape == (5, 4099)  # 4 bands and the modulator
    assert tables.mean(-1).abs().max() < 1e-6
    assert torch.allclose(tables.pow(2).mean(-1), torch.ones(5), atol=1e-4)
    power = torch.fft.rfft(tables.double()).abs().square()
    freqs = torch.fft.rfftfreq(4099, 1 / RATE)
    slow = float(power[-1, freqs >= MODULATION_HZ].sum())  # float32 rounding only:
    assert slow < 1e-9 * float(power[-1].sum())  # the modulator is slow
    assert NOISE_PERIOD % 2 and all(NOISE_PERIOD % p for p in range(3, 363, 2))  # a prime


@pytest.mark.parametrize("f0", [110.0, 220.0, 440.0])
def test_the_noisiness_lowers_the_hnr_and_keeps_the_centroid(f0: float) -> None:
    """The noisiness s of a steady harmonic tone with no noise bands: the HNR falls with s,
    near 10 log10((1 - s) / s) where the modulator's band is wide against the pitch, while the
    centroid stays within the 15 % a listener hears and the loudness within 1 LU (YIN reads
    noise at about -5 dB, so the fall flattens there)."""
    frames = 96
    shapes = torch.zeros(1, 49, frames)
    shapes[0, -1] = -30.0  # no noise bands: all the power in the harmonics
    measured = []
    for s in (0.0, 0.2, 0.5, 0.8):
        pitch = math.log2(f0 / 440)
        controls = torch.tensor([pitch, -1.0, 0.0, s])[None, :, None].repeat(1, 1, frames)
        y = HarmonicNoiseSynth()(controls, shapes)[0, 0, 4096:]
        measured.append((hnr_db(y, RATE), spectral_centroid(y, RATE), loudness_lufs(y, RATE)))
    hnr, centroid, loudness = (torch.tensor(v) for v in zip(*measured, strict=True))
    assert bool((hnr[1:] < hnr[:-1]).all()), hnr
    assert float(hnr[1]) == pytest.approx(6.0, abs=3.0), hnr  # 10 log10(0.8 / 0.2)
    assert float(hnr[-1]) < 3.0 and float(hnr[0] - hnr[-1]) > 15.0, hnr
    assert float((centroid / centroid[0] - 1).abs().max()) < 0.15, centroid
    assert float((loudness - loudness[0]).abs().max()) < 1.0, loudness


def test_the_synth_plays_the_pitch_and_level_it_is_given() -> None:
    synth = HarmonicNoiseSynth()
    frames = 64
    controls = torch.tensor([0.0, -1.0, 0.0, 0.0])[None, :, None].repeat(1, 1, frames)
    shapes = torch.full((1, 49, frames), -20.0)
    shapes[0, 0] = 0.0  # all the harmonic power on the fundamental
    shapes[0, -1] = -20.0  # no noise
    y = synth(controls, shapes)[0, 0, 4096:]
    spectrum = torch.fft.rfft(y.double() * torch.hann_window(y.numel(), dtype=torch.float64))
    peak = float(spectrum.abs().argmax()) * RATE / y.numel()
    assert peak == pytest.approx(440.0, abs=RATE / y.numel())
    assert y.pow(2).mean().sqrt().log10().item() == pytest.approx(-1.0, abs=0.01)


def test_the_soft_knee_passes_what_is_below_it_and_never_reaches_one() -> None:
    y = torch.linspace(-5, 5, 1001)
    bent = soft_knee(y, 0.9)
    assert torch.equal(bent[y.abs() <= 0.9], y[y.abs() <= 0.9])
    assert bent.abs().max() < 1.0
    assert torch.all(bent[1:] >= bent[:-1])


def test_bad_sizes_are_named() -> None:
    with pytest.raises(ModelError, match="timbres and hidden must be positive"):
        TinyDDSP(timbres=0)
    with pytest.raises(ModelError, match="window must be even"):
        FrameAnalysis(window=1001)
    with pytest.raises(ModelError, match="bands at least 2"):
        HarmonicNoiseSynth(bands=1)


def test_exports_to_a_program_that_plays_what_the_model_plays(tmp_path, model: TinyDDSP) -> None:
    bended = tb.BendedModule(model)
    x = torch.randn(1, 1, 2048, generator=torch.Generator().manual_seed(3)) * 0.2
    bended.trace("forward", x=x)
    bended.bend(tb.Scale(1.5), "decoder_1$")
    tb.export.pt2(bended, tmp_path / "m.pt2", x=x)
    program = torch.export.load(tmp_path / "m.pt2").module()
    with torch.no_grad():
        assert torch.allclose(program(x=x), bended.forward(x), atol=1e-5)
