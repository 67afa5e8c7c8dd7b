"""Tests for torchbend.models.load: shipped weights, and clear errors for bad files."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from torchbend.errors import TorchbendError
from torchbend.models import TinyDDSP, TinyRave, WeightsError, default_weights, load


def save_model(model: TinyRave, path: Path) -> Path:
    metadata = {"config": json.dumps(model.config)}
    save_file(dict(model.state_dict()), str(path), metadata=metadata)
    return path


def test_shipped_weights_load_in_eval_mode() -> None:
    assert default_weights("tiny_rave").is_file(), "run scripts/train_model.py"
    model = load("tiny_rave")
    assert isinstance(model, TinyRave) and not model.training
    assert model.ratio == 16
    x = torch.randn(1, 1, 1024)
    with torch.no_grad():
        assert model(x).shape == x.shape


def test_the_default_is_the_character_model_with_its_shipped_weights() -> None:
    model = load()
    assert isinstance(model, TinyDDSP) and not model.training
    shipped = load("tiny_ddsp")
    assert model.config == shipped.config and model.latent_names == shipped.latent_names
    for name, tensor in shipped.state_dict().items():
        assert torch.equal(model.state_dict()[name], tensor), name


def test_round_trip_with_other_config(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = TinyRave(latent_size=4, hidden=(8, 16), bands=4, taps_per_band=8)
    loaded = load("tiny_rave", save_model(model, tmp_path / "small.safetensors"))
    assert loaded.config == model.config
    x = torch.randn(1, 1, 64)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x), model(x), atol=0, rtol=0)


def test_unknown_name() -> None:
    with pytest.raises(TorchbendError, match=r"no shipped model named 'tiny_rav'.*'tiny_rave'"):
        load("tiny_rav")


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.safetensors"
    with pytest.raises(WeightsError, match=r"nope.safetensors' for model 'tiny_rave' not found"):
        load("tiny_rave", weights=path)
    with pytest.raises(WeightsError, match=r"nope.safetensors' for model 'tiny_ddsp' not found"):
        load(weights=path)  # the default model's name


def test_corrupt_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(b"\x00\x01 this is not safetensors" * 10)
    with pytest.raises(WeightsError, match=r"bad.safetensors' .* not a readable safetensors"):
        load("tiny_rave", weights=path)


def test_truncated_file(tmp_path: Path) -> None:
    path = save_model(TinyRave(), tmp_path / "cut.safetensors")
    path.write_bytes(path.read_bytes()[:1000])
    with pytest.raises(WeightsError, match=r"cut.safetensors"):
        load("tiny_rave", weights=path)


def test_weights_that_do_not_fit(tmp_path: Path) -> None:
    path = tmp_path / "other.safetensors"
    save_file({"weight": torch.zeros(3)}, str(path))
    with pytest.raises(WeightsError, match=r"other.safetensors' does not fit model 'tiny_rave'"):
        load("tiny_rave", weights=path)


def test_bad_config(tmp_path: Path) -> None:
    path = tmp_path / "config.safetensors"
    save_file({"weight": torch.zeros(3)}, str(path), metadata={"config": '{"colour": 1}'})
    with pytest.raises(WeightsError, match=r"has a config the 'tiny_rave' model does not take"):
        load("tiny_rave", weights=path)


def write_header(path: Path, header: dict[str, object], data: bytes = b"\0" * 16) -> Path:
    """A safetensors file written by hand: its header claims what the test wants."""
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + data)
    return path


@pytest.mark.parametrize("end", [16, 4 * 2**40])
def test_a_header_claiming_a_huge_tensor_is_refused_before_reading(
    tmp_path: Path, end: int
) -> None:
    path = write_header(
        tmp_path / "huge.safetensors",
        {"encoder.0.weight": {"dtype": "F32", "shape": [2**20, 2**20], "data_offsets": [0, end]}},
    )
    with pytest.raises(
        WeightsError,
        match=r"huge.safetensors' does not fit model 'tiny_rave': tensor 'encoder.0.weight' is "
        r"F32 of shape \[1048576, 1048576\] in the file, the model expects F32 of shape "
        r"\[64, 16, 3\]",
    ):
        load("tiny_rave", weights=path)


def test_a_config_building_a_huge_model_is_refused_before_building(tmp_path: Path) -> None:
    config = {"latent_size": 2**20, "hidden": [2**20, 2**20]}
    path = write_header(
        tmp_path / "config.safetensors", {"__metadata__": {"config": json.dumps(config)}}
    )
    with pytest.raises(WeightsError, match=r"builds a model larger than the file can fill"):
        load("tiny_rave", weights=path)


def test_a_tensor_of_another_dtype_is_named(tmp_path: Path) -> None:
    model = TinyRave()
    state = {k: v.half() if k == "decoder.0.weight" else v for k, v in model.state_dict().items()}
    path = tmp_path / "half.safetensors"
    save_file(state, str(path), metadata={"config": json.dumps(model.config)})
    with pytest.raises(WeightsError, match=r"'decoder.0.weight' is F16 of shape \[64, 16, 3\]"):
        load("tiny_rave", weights=path)


def test_a_tensor_past_the_end_of_the_file_is_refused(tmp_path: Path) -> None:
    path = save_model(TinyRave(), tmp_path / "short.safetensors")
    path.write_bytes(path.read_bytes()[:-4])
    with pytest.raises(WeightsError, match=r"short.safetensors' .* truncated .* ends at byte"):
        load("tiny_rave", weights=path)


@pytest.mark.parametrize(
    ("prefix", "message"),
    [
        (b"\x01\x02", "too short"),
        (struct.pack("<Q", 2**62), "its header claims 4611686018427387904 bytes"),
        (struct.pack("<Q", 4) + b"[1] ", "not an object"),
    ],
)
def test_malformed_headers(tmp_path: Path, prefix: bytes, message: str) -> None:
    path = tmp_path / "bad.safetensors"
    path.write_bytes(prefix)
    with pytest.raises(WeightsError, match=rf"not a readable safetensors file \(.*{message}"):
        load("tiny_rave", weights=path)
