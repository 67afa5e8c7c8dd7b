"""Tiny, randomly initialised models from public libraries, for the third-party zoo.

Each entry builds a small model (random weights, nothing downloaded) and example inputs.
``MODELS`` lists what torchbend traces; ``KNOWN_FAILING`` lists what fails on both tracing
backends, with the first line each backend gave (``scripts/zoo_third_party.py`` rewrites the
table of both in ``docs/tracing.md``).
"""

from __future__ import annotations

import importlib.util
import io
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

Inputs = dict[str, Any]


@dataclass(frozen=True)
class ZooModel:
    """One model of the zoo."""

    name: str
    """The class name (and variant) shown in tables and test ids."""
    library: str
    """The distribution that provides it (what ``pip install`` takes)."""
    family: str
    """What kind of model it is."""
    build: Callable[[], tuple[nn.Module, Inputs]]
    """Builds the model (in eval mode, seeded) and its example inputs."""
    method: str = "forward"
    """The method traced."""
    bend: str = ""
    """The activation the test zeroes; by default the one nearest the middle of the graph
    whose zeroing changes the output (near a quantizer, the output may not change)."""
    module: str = ""
    """The name it is imported by, where it is not the library's with ``_`` for ``-``."""

    @property
    def available(self) -> bool:
        module = self.module or self.library.replace("-", "_")
        return importlib.util.find_spec(module) is not None


def _ids(*shape: int, vocab: int = 100) -> torch.Tensor:
    return torch.randint(0, vocab, shape, generator=torch.Generator().manual_seed(1))


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(2))


def _eval(module: nn.Module) -> nn.Module:
    return module.eval()


def _on_noise(make: Callable[[], nn.Module], argument: str, *shape: int):
    """Builds ``make()`` (seeded) with Gaussian noise of ``shape`` as its input ``argument``."""

    def build() -> tuple[nn.Module, Inputs]:
        torch.manual_seed(0)
        return _eval(make()), {argument: _randn(*shape)}

    return build


# -- transformers --------------------------------------------------------------------------------

_TINY_DECODER = dict(
    vocab_size=100,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=64,
    pad_token_id=0,
    bos_token_id=0,
    eos_token_id=0,
    use_cache=False,
    attn_implementation="eager",
)


def _hf(model: str, config: str, inputs: Callable[[], Inputs], **kwargs: Any):
    def build() -> tuple[nn.Module, Inputs]:
        import transformers

        torch.manual_seed(0)
        cfg = getattr(transformers, config)(**kwargs)
        return _eval(getattr(transformers, model)(cfg)), inputs()

    return build


def _tokens() -> Inputs:
    return {"input_ids": _ids(2, 9)}


def _seq2seq() -> Inputs:
    return {"input_ids": _ids(2, 9), "decoder_input_ids": _ids(2, 5)}


def _audio() -> Inputs:
    return {"input_values": _randn(2, 800)}


def _pixels() -> Inputs:
    return {"pixel_values": _randn(1, 3, 32, 32)}


def _decoder(name: str, family: str, prefix: str, **overrides: Any) -> ZooModel:
    kwargs = {**_TINY_DECODER, **overrides}
    return ZooModel(
        name,
        "transformers",
        family,
        _hf(name, f"{prefix}Config", _tokens, **kwargs),
    )


_TINY_ENCODER = dict(
    vocab_size=100,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    max_position_embeddings=64,
    attn_implementation="eager",
)

_TINY_SEQ2SEQ = dict(
    vocab_size=100,
    d_model=32,
    encoder_layers=2,
    decoder_layers=2,
    encoder_attention_heads=4,
    decoder_attention_heads=4,
    encoder_ffn_dim=64,
    decoder_ffn_dim=64,
    max_position_embeddings=64,
    use_cache=False,
    attn_implementation="eager",
)

_TINY_SPEECH = dict(
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=2,
    intermediate_size=37,
    conv_dim=(8, 8),
    conv_stride=(5, 2),
    conv_kernel=(10, 3),
    num_conv_pos_embeddings=16,
    num_conv_pos_embedding_groups=2,
    attn_implementation="eager",
)

TRANSFORMERS: list[ZooModel] = [
    _decoder("LlamaModel", "decoder LLM (RoPE, RMSNorm, GQA)", "Llama"),
    _decoder("LlamaForCausalLM", "decoder LLM with its LM head", "Llama"),
    _decoder("MistralModel", "decoder LLM (sliding window)", "Mistral", sliding_window=4),
    _decoder("Qwen2Model", "decoder LLM", "Qwen2"),
    _decoder("GemmaModel", "decoder LLM (GeGLU, scaled embeddings)", "Gemma", head_dim=8),
    _decoder("Gemma2Model", "decoder LLM (soft-capping, local/global)", "Gemma2", head_dim=8),
    _decoder("PhiModel", "decoder LLM (partial rotary, parallel block)", "Phi"),
    _decoder("Phi3Model", "decoder LLM (fused qkv)", "Phi3"),
    _decoder("OlmoModel", "decoder LLM (non-parametric norm)", "Olmo"),
    _decoder("StableLmModel", "decoder LLM", "StableLm"),
    ZooModel(
        "GPTNeoXModel",
        "transformers",
        "decoder LLM (parallel attention)",
        _hf(
            "GPTNeoXModel",
            "GPTNeoXConfig",
            _tokens,
            **{k: v for k, v in _TINY_DECODER.items() if k != "num_key_value_heads"},
        ),
    ),
    ZooModel(
        "OPTModel",
        "transformers",
        "decoder LLM (learned positions)",
        _hf(
            "OPTModel",
            "OPTConfig",
            _tokens,
            vocab_size=100,
            hidden_size=32,
            ffn_dim=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            max_position_embeddings=64,
            word_embed_proj_dim=32,
            use_cache=False,
            attn_implementation="eager",
        ),
    ),
    ZooModel(
        "BloomModel",
        "transformers",
        "decoder LLM (ALiBi)",
        _hf(
            "BloomModel",
            "BloomConfig",
            _tokens,
            vocab_size=100,
            hidden_size=32,
            n_layer=2,
            n_head=4,
            use_cache=False,
            attn_implementation="eager",
        ),
    ),
    ZooModel(
        "FalconModel",
        "transformers",
        "decoder LLM (multi-query)",
        _hf(
            "FalconModel",
            "FalconConfig",
            _tokens,
            vocab_size=100,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            use_cache=False,
            attn_implementation="eager",
        ),
    ),
    ZooModel(
        "BertModel",
        "transformers",
        "encoder (BERT)",
        _hf("BertModel", "BertConfig", _tokens, **_TINY_ENCODER),
    ),
    ZooModel(
        "RobertaModel",
        "transformers",
        "encoder (positions from padding)",
        _hf("RobertaModel", "RobertaConfig", _tokens, **_TINY_ENCODER),
    ),
    ZooModel(
        "AlbertModel",
        "transformers",
        "encoder (shared layers, factorised embeddings)",
        _hf("AlbertModel", "AlbertConfig", _tokens, embedding_size=16, **_TINY_ENCODER),
    ),
    ZooModel(
        "T5Model",
        "transformers",
        "encoder-decoder (relative position buckets)",
        _hf(
            "T5Model",
            "T5Config",
            _seq2seq,
            vocab_size=100,
            d_model=32,
            d_kv=8,
            d_ff=64,
            num_layers=2,
            num_heads=4,
            decoder_start_token_id=0,
            use_cache=False,
            attn_implementation="eager",
        ),
    ),
    ZooModel(
        "BartModel",
        "transformers",
        "encoder-decoder",
        _hf("BartModel", "BartConfig", _seq2seq, **_TINY_SEQ2SEQ),
    ),
    ZooModel(
        "MarianMTModel",
        "transformers",
        "encoder-decoder (translation, sinusoidal positions)",
        _hf(
            "MarianMTModel",
            "MarianConfig",
            _seq2seq,
            decoder_start_token_id=0,
            pad_token_id=1,
            **_TINY_SEQ2SEQ,
        ),
    ),
    ZooModel(
        "WhisperModel",
        "transformers",
        "speech encoder-decoder",
        _hf(
            "WhisperModel",
            "WhisperConfig",
            lambda: {"input_features": _randn(1, 8, 64), "decoder_input_ids": _ids(1, 4)},
            vocab_size=100,
            num_mel_bins=8,
            d_model=32,
            encoder_layers=2,
            decoder_layers=2,
            encoder_attention_heads=4,
            decoder_attention_heads=4,
            encoder_ffn_dim=64,
            decoder_ffn_dim=64,
            max_source_positions=32,
            max_target_positions=16,
            decoder_start_token_id=0,
            pad_token_id=0,
            bos_token_id=0,
            eos_token_id=0,
            use_cache=False,
            attn_implementation="eager",
        ),
    ),
    ZooModel(
        "Wav2Vec2Model",
        "transformers",
        "speech encoder (conv features, weight-normed positions)",
        _hf("Wav2Vec2Model", "Wav2Vec2Config", _audio, **_TINY_SPEECH),
    ),
    ZooModel(
        "HubertModel",
        "transformers",
        "speech encoder",
        _hf("HubertModel", "HubertConfig", _audio, **_TINY_SPEECH),
    ),
    ZooModel(
        "WavLMModel",
        "transformers",
        "speech encoder (gated relative positions)",
        _hf("WavLMModel", "WavLMConfig", _audio, num_buckets=16, **_TINY_SPEECH),
    ),
    ZooModel(
        "MambaModel",
        "transformers",
        "state-space model (selective scan, slow path)",
        _hf(
            "MambaModel",
            "MambaConfig",
            _tokens,
            vocab_size=100,
            hidden_size=32,
            state_size=8,
            num_hidden_layers=2,
            expand=2,
            conv_kernel=4,
            use_cache=False,
        ),
    ),
    ZooModel(
        "RwkvModel",
        "transformers",
        "recurrent LLM (RWKV)",
        _hf(
            "RwkvModel",
            "RwkvConfig",
            _tokens,
            vocab_size=100,
            hidden_size=32,
            num_hidden_layers=2,
            attention_hidden_size=32,
            intermediate_size=64,
            context_length=64,
            rescale_every=0,
            use_cache=False,
        ),
    ),
    ZooModel(
        "EncodecModel",
        "transformers",
        "audio codec (LSTM, residual vector quantizer)",
        _hf(
            "EncodecModel",
            "EncodecConfig",
            lambda: {"input_values": _randn(1, 1, 400)},
            num_filters=4,
            upsampling_ratios=[2, 2],
            hidden_size=8,
            codebook_size=16,
            codebook_dim=8,
            num_lstm_layers=1,
            target_bandwidths=[16.0],
            sampling_rate=8000,
            kernel_size=3,
            last_kernel_size=3,
            residual_kernel_size=3,
        ),
        bend="decoder_layers_4_block_1_conv",
    ),
    ZooModel(
        "DacModel",
        "transformers",
        "audio codec (snake activations, residual VQ)",
        _hf(
            "DacModel",
            "DacConfig",
            lambda: {"input_values": _randn(1, 1, 256)},
            encoder_hidden_size=4,
            downsampling_ratios=[2, 2],
            decoder_hidden_size=16,
            n_codebooks=2,
            codebook_size=16,
            codebook_dim=4,
            hidden_size=16,
            upsampling_ratios=[2, 2],
        ),
    ),
    ZooModel(
        "SpeechT5HifiGan",
        "transformers",
        "vocoder (HiFi-GAN)",
        _hf(
            "SpeechT5HifiGan",
            "SpeechT5HifiGanConfig",
            lambda: {"spectrogram": _randn(1, 10, 8)},
            model_in_dim=8,
            upsample_initial_channel=16,
            upsample_rates=[2, 2],
            upsample_kernel_sizes=[4, 4],
            resblock_kernel_sizes=[3],
            resblock_dilation_sizes=[[1, 3]],
            normalize_before=False,
        ),
    ),
    ZooModel(
        "VitsModel",
        "transformers",
        "text-to-speech (VITS: flows, stochastic durations, HiFi-GAN)",
        _hf(
            "VitsModel",
            "VitsConfig",
            lambda: {"input_ids": _ids(1, 8, vocab=40)},
            vocab_size=40,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            ffn_dim=32,
            flow_size=8,
            spectrogram_bins=17,
            upsample_initial_channel=16,
            upsample_rates=[2, 2],
            upsample_kernel_sizes=[4, 4],
            resblock_kernel_sizes=[3],
            resblock_dilation_sizes=[[1, 3]],
            prior_encoder_num_flows=1,
            prior_encoder_num_wavenet_layers=1,
            posterior_encoder_num_wavenet_layers=1,
            duration_predictor_num_flows=1,
            duration_predictor_filter_channels=16,
            depth_separable_num_layers=1,
            window_size=2,
        ),
    ),
    ZooModel(
        "ViTModel",
        "transformers",
        "vision transformer",
        _hf(
            "ViTModel",
            "ViTConfig",
            _pixels,
            image_size=32,
            patch_size=8,
            hidden_size=32,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=64,
            attn_implementation="eager",
        ),
    ),
    ZooModel(
        "ConvNextModel",
        "transformers",
        "convolutional image model",
        _hf(
            "ConvNextModel",
            "ConvNextConfig",
            _pixels,
            num_channels=3,
            hidden_sizes=[8, 16],
            depths=[1, 1],
            num_stages=2,
        ),
    ),
]


# -- diffusers -----------------------------------------------------------------------------------


def _unet2d() -> tuple[nn.Module, Inputs]:
    from diffusers import UNet2DModel

    torch.manual_seed(0)
    model = UNet2DModel(
        sample_size=16,
        in_channels=3,
        out_channels=3,
        block_out_channels=(8, 16),
        layers_per_block=1,
        down_block_types=("DownBlock2D", "AttnDownBlock2D"),
        up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=4,
        attention_head_dim=4,
    )
    return _eval(model), {"sample": _randn(1, 3, 16, 16), "timestep": torch.tensor([10])}


def _unet1d() -> tuple[nn.Module, Inputs]:
    from diffusers import UNet1DModel

    torch.manual_seed(0)
    model = UNet1DModel(
        sample_size=64,
        in_channels=2,
        out_channels=2,
        extra_in_channels=64,
        block_out_channels=(32, 32, 64),
        down_block_types=("DownBlock1DNoSkip", "DownBlock1D", "AttnDownBlock1D"),
        up_block_types=("AttnUpBlock1D", "UpBlock1D", "UpBlock1DNoSkip"),
        mid_block_type="UNetMidBlock1D",
        norm_num_groups=4,
    )
    return _eval(model), {"sample": _randn(1, 2, 64), "timestep": torch.tensor([10])}


def _vae() -> tuple[nn.Module, Inputs]:
    from diffusers import AutoencoderKL

    torch.manual_seed(0)
    model = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        down_block_types=("DownEncoderBlock2D", "DownEncoderBlock2D"),
        up_block_types=("UpDecoderBlock2D", "UpDecoderBlock2D"),
        block_out_channels=(8, 16),
        latent_channels=4,
        norm_num_groups=4,
        sample_size=16,
    )
    return _eval(model), {"sample": _randn(1, 3, 16, 16), "sample_posterior": False}


def _cond_unet() -> tuple[nn.Module, Inputs]:
    from diffusers import UNet2DConditionModel

    torch.manual_seed(0)
    model = UNet2DConditionModel(
        sample_size=16,
        in_channels=4,
        out_channels=4,
        block_out_channels=(8, 16),
        layers_per_block=1,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=16,
        attention_head_dim=4,
        norm_num_groups=4,
    )
    inputs = {
        "sample": _randn(1, 4, 16, 16),
        "timestep": torch.tensor([10]),
        "encoder_hidden_states": _randn(1, 3, 16),
    }
    return _eval(model), inputs


DIFFUSERS: list[ZooModel] = [
    ZooModel("UNet2DModel", "diffusers", "2-D diffusion UNet (attention blocks)", _unet2d),
    ZooModel("UNet1DModel", "diffusers", "1-D diffusion UNet", _unet1d),
    ZooModel("AutoencoderKL", "diffusers", "VAE (latent diffusion)", _vae),
    ZooModel(
        "UNet2DConditionModel", "diffusers", "text-conditioned UNet (cross-attention)", _cond_unet
    ),
]


# -- x-transformers (einops-heavy) ---------------------------------------------------------------


def _xtransformer(
    kind: str, warm: bool = False, **layers: Any
) -> Callable[[], tuple[nn.Module, Inputs]]:
    def build() -> tuple[nn.Module, Inputs]:
        import x_transformers

        torch.manual_seed(0)
        attn = getattr(x_transformers, kind)(dim=32, depth=2, heads=4, **layers)
        model = x_transformers.TransformerWrapper(num_tokens=100, max_seq_len=64, attn_layers=attn)
        inputs = {"x": _ids(2, 9)}
        if warm:
            # The ALiBi bias is a cache filled on the first call: a model never called fails
            # on both backends (concrete: 'Tensor' object has no attribute '__call__'; export:
            # DataDependentOutputException: aten.equal.default). Reported to the tracer.
            with torch.no_grad():
                model(**inputs)
        return _eval(model), inputs

    return build


def _xvit() -> tuple[nn.Module, Inputs]:
    import x_transformers

    torch.manual_seed(0)
    model = x_transformers.ViTransformerWrapper(
        image_size=32,
        patch_size=8,
        attn_layers=x_transformers.Encoder(dim=32, depth=2, heads=4),
    )
    return _eval(model), {"img": _randn(1, 3, 32, 32)}


X_TRANSFORMERS: list[ZooModel] = [
    ZooModel(
        "TransformerWrapper(Decoder)",
        "x-transformers",
        "decoder LLM (einops)",
        _xtransformer("Decoder"),
    ),
    ZooModel(
        "TransformerWrapper(Decoder, rotary)",
        "x-transformers",
        "decoder LLM (rotary, GLU feed-forward)",
        _xtransformer("Decoder", rotary_pos_emb=True, ff_glu=True),
    ),
    ZooModel(
        "TransformerWrapper(Encoder, alibi)",
        "x-transformers",
        "encoder (ALiBi, pre-norm)",
        _xtransformer("Encoder", warm=True, alibi_pos_bias=True),
    ),
    ZooModel("ViTransformerWrapper", "x-transformers", "vision transformer (einops)", _xvit),
]


# -- vector-quantize-pytorch (codec quantizers, einops) and perceiver-pytorch ---------------------


def _quantizer(
    kind: str, argument: str = "x", **kwargs: Any
) -> Callable[[], tuple[nn.Module, Inputs]]:
    def build() -> tuple[nn.Module, Inputs]:
        import vector_quantize_pytorch

        torch.manual_seed(0)
        model = getattr(vector_quantize_pytorch, kind)(**kwargs)
        return _eval(model), {argument: _randn(2, 12, kwargs.get("dim", 8))}

    return build


def _perceiver() -> tuple[nn.Module, Inputs]:
    from perceiver_pytorch import Perceiver

    torch.manual_seed(0)
    model = Perceiver(
        input_channels=3,
        input_axis=1,
        num_freq_bands=4,
        max_freq=10.0,
        depth=2,
        num_latents=8,
        latent_dim=16,
        cross_heads=1,
        latent_heads=2,
        cross_dim_head=8,
        latent_dim_head=8,
        num_classes=5,
        self_per_cross_attn=1,
    )
    return _eval(model), {"data": _randn(2, 20, 3)}


QUANTIZERS: list[ZooModel] = [
    ZooModel(
        "VectorQuantize",
        "vector-quantize-pytorch",
        "vector quantizer (codebook, straight-through)",
        _quantizer("VectorQuantize", dim=8, codebook_size=16),
    ),
    ZooModel(
        "ResidualVQ",
        "vector-quantize-pytorch",
        "residual vector quantizer (audio codecs)",
        _quantizer("ResidualVQ", dim=8, num_quantizers=3, codebook_size=16),
    ),
    ZooModel(
        "FSQ",
        "vector-quantize-pytorch",
        "finite scalar quantizer",
        _quantizer("FSQ", "z", levels=[5, 5, 4], dim=8),
    ),
    ZooModel(
        "LFQ",
        "vector-quantize-pytorch",
        "lookup-free quantizer",
        _quantizer("LFQ", dim=8, codebook_size=16),
    ),
    ZooModel("Perceiver", "perceiver-pytorch", "Perceiver (latent cross-attention)", _perceiver),
]


# -- julius (resampling, FIR filters, band splitting) ---------------------------------------------


class _ResampleConv(nn.Module):
    """A waveform resampled from 24 kHz to 16 kHz (a 3:2 sinc resampler), then a convolution."""

    def __init__(self) -> None:
        import julius

        super().__init__()
        self.resample = julius.ResampleFrac(24_000, 16_000, zeros=8)
        self.conv = nn.Conv1d(1, 8, 5, padding=2)

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        return self.conv(self.resample(wav))


class _BandMixer(nn.Module):
    """A waveform split into mel-spaced bands (cascaded low-passes, FFT convolutions), each
    band weighted by a 1x1 convolution and the bands mixed back to one channel."""

    def __init__(self) -> None:
        import julius

        super().__init__()
        self.bands = julius.SplitBands(sample_rate=8_000, n_bands=4, zeros=4)
        self.gains = nn.Conv1d(4, 8, 1)
        self.mix = nn.Conv1d(8, 1, 3, padding=1)

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        bands = self.bands(wav).transpose(0, 1)  # [bands, batch, time] -> [batch, bands, time]
        return self.mix(torch.tanh(self.gains(bands)))


def _fir_chain() -> nn.Module:
    import julius

    return nn.Sequential(
        julius.FFTConv1d(1, 4, 64, stride=2),
        nn.GELU(),
        julius.HighPassFilter(0.05, zeros=4),
    )


JULIUS: list[ZooModel] = [
    ZooModel(
        "ResampleFrac",
        "julius",
        "sinc resampler (24 to 16 kHz) and a convolution",
        _on_noise(_ResampleConv, "wav", 2, 1, 300),
    ),
    ZooModel(
        "SplitBands",
        "julius",
        "band split (mel-spaced low-pass cascade) and a band mixer",
        _on_noise(_BandMixer, "wav", 2, 256),
    ),
    ZooModel(
        "FFTConv1d",
        "julius",
        "FFT convolution (long kernel) and a high-pass FIR",
        _on_noise(_fir_chain, "input", 2, 1, 256),
    ),
]


# -- asteroid-filterbanks (source-separation front ends) -----------------------------------------


class _Separator(nn.Module):
    """Asteroid's encoder, masker, decoder: a filterbank encodes the mixture, a masker
    estimates one mask per source, and the decoder returns each masked source as a waveform."""

    def __init__(self, filterbank: str, n_src: int = 2, magnitude: bool = False, **fb: Any):
        from asteroid_filterbanks import make_enc_dec

        super().__init__()
        self.encoder, self.decoder = make_enc_dec(filterbank, **fb)
        self.magnitude = magnitude
        self.n_src = n_src
        features = self.encoder.n_feats_out // 2 if magnitude else self.encoder.n_feats_out
        self.masker = nn.Sequential(
            nn.Conv1d(features, 32, 1),
            nn.PReLU(),
            nn.Conv1d(32, n_src * features, 1),
            nn.Sigmoid(),
        )

    def forward(self, mixture: torch.Tensor) -> torch.Tensor:
        from asteroid_filterbanks import transforms

        tf = self.encoder(mixture)  # [batch, features, frames]
        if self.magnitude:
            masks = self.masker(transforms.mag(tf))
            masks = masks.view(tf.shape[0], self.n_src, -1, tf.shape[-1])
            masked = transforms.apply_mag_mask(tf.unsqueeze(1), masks)
        else:
            masks = self.masker(tf).view(tf.shape[0], self.n_src, *tf.shape[1:])
            masked = masks * tf.unsqueeze(1)
        return self.decoder(masked, length=mixture.shape[-1])


class _SincClassifier(nn.Module):
    """A SincNet front end (band-pass filters with learned cut-offs), log-compressed and pooled
    into a small classifier."""

    def __init__(self) -> None:
        from asteroid_filterbanks import Encoder, ParamSincFB

        super().__init__()
        self.encoder = Encoder(ParamSincFB(16, 33, stride=8, sample_rate=8000.0))
        self.conv = nn.Conv1d(16, 16, 3, padding=1)
        self.head = nn.Linear(16, 5)

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        features = torch.log1p(self.encoder(wav).abs())
        return self.head(torch.relu(self.conv(features)).mean(-1))


ASTEROID: list[ZooModel] = [
    ZooModel(
        "Encoder/Decoder(FreeFB)",
        "asteroid-filterbanks",
        "separator: learned filterbank, two masks, decoder",
        _on_noise(
            lambda: _Separator("free", n_filters=16, kernel_size=16, stride=8),
            "mixture",
            2,
            1,
            240,
        ),
    ),
    ZooModel(
        "Encoder/Decoder(STFTFB)",
        "asteroid-filterbanks",
        "separator: STFT, magnitude masks, pseudo-inverse decoder",
        _on_noise(
            lambda: _Separator(
                "stft", magnitude=True, n_filters=32, kernel_size=32, stride=8, who_is_pinv="dec"
            ),
            "mixture",
            2,
            1,
            240,
        ),
    ),
    ZooModel(
        "Encoder(ParamSincFB)",
        "asteroid-filterbanks",
        "SincNet front end (learned band-pass cut-offs) and a classifier",
        _on_noise(_SincClassifier, "wav", 2, 1, 240),
    ),
]


# -- mambapy (pure-PyTorch Mamba) ----------------------------------------------------------------


def _mamba(pscan: bool = True, **kwargs: Any):
    def build() -> tuple[nn.Module, Inputs]:
        from mambapy.mamba import Mamba, MambaConfig

        torch.manual_seed(0)
        config = MambaConfig(d_model=16, n_layers=2, d_state=8, pscan=pscan, **kwargs)
        return _eval(Mamba(config)), {"x": _randn(2, 12, 16)}

    return build


def _jamba() -> tuple[nn.Module, Inputs]:
    # Its mixture of experts skips an expert that no token chose (`if top_x.shape[0] == 0`,
    # a size selected by `torch.where`): the concrete graph checks that decision at every call
    # (tests/tracing/test_pitfalls_modules.py::test_branch_on_the_size_of_a_selection);
    # export fails on that data-dependent branch.
    from mambapy.jamba import JambaLM, JambaLMConfig

    torch.manual_seed(0)
    config = JambaLMConfig(
        d_model=16,
        n_layers=2,
        mlp_size=32,
        d_state=8,
        num_attention_heads=4,
        num_key_value_heads=2,
        num_experts=4,
        num_experts_per_tok=2,
        attn_layer_offset=1,
        attn_layer_period=2,
        expert_layer_offset=0,
        expert_layer_period=2,
        vocab_size=100,
    )
    return _eval(JambaLM(config)), {"tokens": _ids(2, 9)}


MAMBAPY: list[ZooModel] = [
    ZooModel("Mamba", "mambapy", "state-space model (parallel scan)", _mamba()),
    ZooModel(
        "Mamba(sequential, inner norms)",
        "mambapy",
        "state-space model (sequential scan, Jamba-style inner RMSNorms)",
        _mamba(pscan=False, inner_layernorms=True),
    ),
    ZooModel("JambaLM", "mambapy", "hybrid Mamba / attention LM (mixture of experts)", _jamba),
]


# -- nnAudio (spectrogram layers) ----------------------------------------------------------------


class _Spectrogram(nn.Module):
    """A spectrogram layer (log-compressed) and a small convolutional tagger over it."""

    def __init__(self, kind: str, bins: int, **kwargs: Any):
        from nnAudio import features

        super().__init__()
        self.spectrogram = getattr(features, kind)(verbose=False, **kwargs)
        self.conv = nn.Conv1d(bins, 16, 3, padding=1)
        self.head = nn.Linear(16, 5)

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        spec = torch.log(self.spectrogram(wav) + 1e-5)  # [batch, bins, frames]
        return self.head(torch.relu(self.conv(spec)).mean(-1))


class _STFTMask(nn.Module):
    """A complex STFT (trainable Fourier kernels), a magnitude mask and the inverse STFT."""

    def __init__(self) -> None:
        from nnAudio import features

        super().__init__()
        self.stft = features.STFT(
            n_fft=64, hop_length=16, iSTFT=True, trainable=True, verbose=False
        )
        self.mask = nn.Sequential(nn.Conv1d(33, 33, 3, padding=1), nn.Sigmoid())

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        spec = self.stft(wav)  # [batch, bins, frames, (real, imaginary)]
        magnitude = spec.pow(2).sum(-1).sqrt()
        masked = spec * self.mask(magnitude).unsqueeze(-1)
        return self.stft.inverse(masked, length=wav.shape[-1])


NNAUDIO: list[ZooModel] = [
    ZooModel(
        "MelSpectrogram",
        "nnAudio",
        "trainable mel spectrogram and a tagger",
        _on_noise(
            lambda: _Spectrogram(
                "MelSpectrogram",
                16,
                sr=8000,
                n_fft=128,
                hop_length=32,
                n_mels=16,
                trainable_mel=True,
                trainable_STFT=True,
            ),
            "wav",
            2,
            512,
        ),
        module="nnAudio",
    ),
    ZooModel(
        "CQT1992v2",
        "nnAudio",
        "constant-Q transform and a tagger",
        _on_noise(
            lambda: _Spectrogram(
                "CQT1992v2", 12, sr=8000, hop_length=32, fmin=200, n_bins=12, bins_per_octave=6
            ),
            "wav",
            2,
            512,
        ),
        module="nnAudio",
    ),
    ZooModel(
        "STFT/iSTFT",
        "nnAudio",
        "complex STFT, magnitude mask, inverse STFT",
        _on_noise(_STFTMask, "wav", 2, 512),
        module="nnAudio",
    ),
]


# -- einops layers (Rearrange, Reduce, EinMix) ---------------------------------------------------


def _patch_tagger() -> tuple[nn.Module, Inputs]:
    from einops.layers.torch import Rearrange, Reduce

    torch.manual_seed(0)
    model = nn.Sequential(
        Rearrange("b c (f pf) (t pt) -> b (f t) (pf pt c)", pf=4, pt=4),
        nn.Linear(16, 32),
        nn.GELU(),
        nn.Linear(32, 32),
        Reduce("b n d -> b d", "mean"),
        nn.Linear(32, 5),
    )
    return _eval(model), {"input": _randn(2, 1, 16, 16)}


def _mixer() -> tuple[nn.Module, Inputs]:
    from einops.layers.torch import EinMix, Rearrange

    torch.manual_seed(0)
    model = nn.Sequential(
        Rearrange("b f t -> b t f"),
        nn.LayerNorm(16),
        EinMix("b t f -> b t h", weight_shape="f h", bias_shape="h", f=16, h=32),
        nn.GELU(),
        EinMix("b t h -> b u h", weight_shape="t u", bias_shape="u", t=12, u=12),
        EinMix("b t h -> b t f", weight_shape="h f", f=16, h=32),
        Rearrange("b t f -> b f t"),
    )
    return _eval(model), {"input": _randn(2, 16, 12)}


EINOPS: list[ZooModel] = [
    ZooModel(
        "Rearrange/Reduce",
        "einops",
        "spectrogram patches (Rearrange), mean pooling (Reduce)",
        _patch_tagger,
    ),
    ZooModel("EinMix", "einops", "MLP-Mixer over (frequency, time) with EinMix", _mixer),
]


# -- rotary-embedding-torch and local-attention (lucidrains attention utilities) ------------------


class _RotaryAttention(nn.Module):
    """A causal self-attention block whose queries and keys are rotated by
    ``rotary_embedding_torch.RotaryEmbedding`` (optionally with xPos scaling)."""

    def __init__(self, dim: int = 32, heads: int = 4, xpos: bool = False):
        from rotary_embedding_torch import RotaryEmbedding

        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.rotary = RotaryEmbedding(dim=dim // heads, use_xpos=xpos)
        self.out = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, -1).permute(2, 0, 3, 1, 4)
        if self.rotary.use_xpos:
            q, k = self.rotary.rotate_queries_and_keys(q, k)
        else:
            q, k = self.rotary.rotate_queries_or_keys(q), self.rotary.rotate_queries_or_keys(k)
        out = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(out.transpose(1, 2).reshape(b, n, d))


def _local_mha() -> tuple[nn.Module, Inputs]:
    from local_attention import LocalMHA

    torch.manual_seed(0)
    model = LocalMHA(dim=32, window_size=4, dim_head=8, heads=4, causal=True, prenorm=True)
    return _eval(model), {"x": _randn(2, 12, 32)}


def _local_transformer() -> tuple[nn.Module, Inputs]:
    from local_attention import LocalTransformer

    torch.manual_seed(0)
    model = LocalTransformer(
        num_tokens=100,
        max_seq_len=32,
        dim=32,
        depth=2,
        local_attn_window_size=4,
        dim_head=8,
        heads=4,
        ff_mult=2,
        num_residual_streams=1,
    )
    return _eval(model), {"x": _ids(2, 12)}


ATTENTION: list[ZooModel] = [
    ZooModel(
        "RotaryEmbedding",
        "rotary-embedding-torch",
        "causal self-attention with rotary queries and keys",
        _on_noise(_RotaryAttention, "x", 2, 9, 32),
    ),
    ZooModel(
        "RotaryEmbedding(xpos)",
        "rotary-embedding-torch",
        "causal self-attention with length-extrapolating xPos rotary",
        _on_noise(lambda: _RotaryAttention(xpos=True), "x", 2, 9, 32),
    ),
    ZooModel(
        "LocalMHA",
        "local-attention",
        "windowed causal multi-head attention (rotary)",
        _local_mha,
    ),
    ZooModel(
        "LocalTransformer",
        "local-attention",
        "local-attention language model",
        _local_transformer,
    ),
]

# -- idioms of issue 31 --------------------------------------------------------------------------


class _OmniVisionPositions(nn.Module):
    """Qwen2.5-Omni's 3-D vision positions (transformers' own function: ``torch.Tensor`` of
    a traced index, sizes read from the grid's values), embedded and projected."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Linear(3, 16)
        self.out = nn.Linear(16, 8)

    def forward(self, grid_thw: torch.Tensor) -> torch.Tensor:
        from transformers.models.qwen2_5_omni import modeling_qwen2_5_omni as omni

        t_index = (torch.arange(grid_thw[0, 0]) * 2).long()
        positions = (
            omni.Qwen2_5OmniPreTrainedModelForConditionalGeneration.get_llm_pos_ids_for_vision(
                self, 1, 0, 2, t_index, grid_thw[:, 1], grid_thw[:, 2]
            )
        )
        return self.out(torch.tanh(self.embed(positions.T.float() / 8)))


class _DitheredFrontEnd(nn.Module):
    """Cohere ASR's dither (transformers' own method: a generator seeded in forward with
    ``min(length, x.shape[1])``, which is a traced size when the length is longer), then two
    convolutions."""

    def __init__(self) -> None:
        super().__init__()
        self.dither = 1e-2
        self.conv = nn.Conv1d(1, 4, 9, padding=4)
        self.out = nn.Conv1d(4, 1, 1)

    def forward(self, waveform: torch.Tensor, audio_lengths: torch.Tensor) -> torch.Tensor:
        from transformers.models.cohere_asr import feature_extraction_cohere_asr as cohere

        dithered = cohere.CohereAsrFeatureExtractor._apply_dither(
            self, waveform.clone(), audio_lengths
        )
        return self.out(torch.tanh(self.conv(dithered.unsqueeze(1))))


def _dithered() -> tuple[nn.Module, Inputs]:
    torch.manual_seed(0)
    return _eval(_DitheredFrontEnd()), {
        "waveform": _randn(2, 400),
        "audio_lengths": torch.tensor([500, 300]),
    }


def _omni_positions() -> tuple[nn.Module, Inputs]:
    torch.manual_seed(0)
    return _eval(_OmniVisionPositions()), {"grid_thw": torch.tensor([[2, 4, 6]])}


IDIOMS: list[ZooModel] = [
    ZooModel(
        "Cohere ASR dither",
        "transformers",
        "seeded dither (a generator seeded with a traced size) and a front end",
        _dithered,
        module="transformers.models.cohere_asr",
    ),
    ZooModel(
        "Qwen2.5-Omni vision positions",
        "transformers",
        "multimodal RoPE positions (legacy torch.Tensor, sizes from values)",
        _omni_positions,
        module="transformers.models.qwen2_5_omni",
    ),
    ZooModel(
        "LlamaModel(dynamic RoPE)",
        "transformers",
        "decoder LLM whose RoPE buffer forward replaces past 8 positions",
        _hf(
            "LlamaModel",
            "LlamaConfig",
            _tokens,
            **{
                **_TINY_DECODER,
                "max_position_embeddings": 8,
                "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4},
            },
        ),
    ),
]


# -- TorchScript files with control flow (torch, julius) ------------------------------------------


def _scripted(make: Callable[[], nn.Module], inputs: Callable[[], Inputs], file: bool = False):
    """Builds ``torch.jit.script(make())`` (seeded, in eval mode) and its inputs; with
    ``file``, saved and loaded back as users load ``.ts`` files."""

    def build() -> tuple[nn.Module, Inputs]:
        torch.manual_seed(0)
        scripted = torch.jit.script(_eval(make()))
        if file:
            buffer = io.BytesIO()
            torch.jit.save(scripted, buffer)
            buffer.seek(0)
            scripted = torch.jit.load(buffer)
        return scripted, inputs()

    return build


def _encoder() -> nn.Module:
    layer = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)


def _lowpass() -> nn.Module:
    from julius import LowPassFilters

    return LowPassFilters([0.05, 0.2])


SCRIPTED: list[ZooModel] = [
    ZooModel(
        "LSTMCell (scripted)",
        "torch",
        "scripted LSTM cell: branches on its state's None-ness and rank",
        _scripted(
            lambda: nn.LSTMCell(8, 8),
            lambda: {"input": _randn(2, 8), "hx": (_randn(2, 8), _randn(2, 8) * 0.5)},
        ),
    ),
    ZooModel(
        "TransformerEncoder (scripted)",
        "torch",
        "scripted transformer encoder: some 200 branches on flags, sizes and devices",
        _scripted(_encoder, lambda: {"src": _randn(2, 5, 16)}),
    ),
    ZooModel(
        "LowPassFilters (.ts file)",
        "julius",
        "scripted low-pass filter bank, saved and loaded back: a loop over its frames'"
        " strides, list arithmetic",
        _scripted(_lowpass, lambda: {"input": _randn(2, 1, 128)}, file=True),
    ),
]


# -- signatures with *args and **kwargs, and annotations that are not types -----------------------


def _bart_decoder_wrapper() -> tuple[nn.Module, Inputs]:
    from transformers import BartConfig
    from transformers.models.bart.modeling_bart import BartDecoderWrapper

    torch.manual_seed(0)
    config = BartConfig(
        vocab_size=100,
        d_model=32,
        decoder_layers=1,
        decoder_attention_heads=4,
        decoder_ffn_dim=64,
        max_position_embeddings=64,
        use_cache=False,
        attn_implementation="eager",
    )
    return _eval(BartDecoderWrapper(config)), _tokens()


class _FeedForward(nn.Module):
    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)

    def forward(self, x: torch.Tensor, scale: float = 1.0) -> torch.Tensor:
        return self.down(torch.relu(self.up(x))) * scale


def _einops_residual() -> tuple[nn.Module, Inputs]:
    from torch_einops_utils.nn import Residual

    torch.manual_seed(0)
    return _eval(Residual(_FeedForward())), {"x": _randn(2, 5, 16), "scale": 0.5}


def _superglue_self_output() -> tuple[nn.Module, Inputs]:
    from transformers import SuperGlueConfig
    from transformers.models.superglue.modeling_superglue import SuperGlueSelfOutput

    torch.manual_seed(0)
    model = SuperGlueSelfOutput(SuperGlueConfig(hidden_size=32))
    return _eval(model), {"hidden_states": _randn(2, 7, 32)}


def _data_parallel() -> tuple[nn.Module, Inputs]:
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv1d(2, 8, 3), nn.ReLU(), nn.Conv1d(8, 2, 3))
    return _eval(nn.DataParallel(net)), {"input": _randn(1, 2, 32)}


class _PitchTracker(nn.Module):
    """A pitch tracker called as torchfcpe's (``forward(wav, sr: [int, float], decoder_mode,
    threshold)``, whose annotation is a list), built on julius and local-attention: torchfcpe
    itself needs torchaudio, which does not load with this torch."""

    def __init__(self, sample_rate: int = 16_000, bins: int = 24) -> None:
        from local_attention import LocalMHA

        super().__init__()
        self.sample_rate = sample_rate
        self.register_buffer("window", torch.hann_window(256))
        self.mel = nn.Linear(129, 32, bias=False)
        self.attention = LocalMHA(dim=32, window_size=4, dim_head=8, heads=4)
        self.head = nn.Linear(32, bins)
        self.register_buffer("cents", torch.linspace(2000.0, 6000.0, bins))

    def forward(
        self,
        wav: torch.Tensor,
        sr: [int, float],  # type: ignore[valid-type]  # as torchfcpe writes it
        decoder_mode: str = "local_argmax",
        threshold: float = 0.05,
    ) -> torch.Tensor:
        import julius

        if sr != self.sample_rate:
            wav = julius.resample_frac(wav, int(sr), self.sample_rate)
        spectrum = torch.stft(wav, 256, 64, window=self.window, return_complex=True).abs()
        x = torch.log(self.mel(spectrum.transpose(1, 2)).abs() + 1e-5)
        latent = torch.sigmoid(self.head(x + self.attention(x)))
        if decoder_mode == "local_argmax":
            latent = latent * (latent >= latent.amax(-1, keepdim=True))
        cents = (latent * self.cents).sum(-1) / latent.sum(-1).clamp_min(1e-5)
        return 10.0 * 2 ** (cents / 1200) * (latent.amax(-1) > threshold)


def _pitch_tracker() -> tuple[nn.Module, Inputs]:
    torch.manual_seed(0)
    return _eval(_PitchTracker()), {"wav": _randn(1, 2000), "sr": 32_000}


SIGNATURES: list[ZooModel] = [
    ZooModel(
        "BartDecoderWrapper",
        "transformers",
        "decoder behind forward(*args, **kwargs)",
        _bart_decoder_wrapper,
    ),
    ZooModel(
        "SuperGlueSelfOutput",
        "transformers",
        "attention output projection, forward(hidden_states, *args)",
        _superglue_self_output,
    ),
    ZooModel(
        "Residual",
        "torch-einops-utils",
        "residual wrapper, forward(x, *args, **kwargs) passing keywords on",
        _einops_residual,
    ),
    ZooModel(
        "DataParallel",
        "torch",
        "torch.nn.DataParallel on CPU, forward(*inputs, **kwargs)",
        _data_parallel,
    ),
    ZooModel(
        "PitchTracker(sr: [int, float])",
        "julius",
        "pitch tracker whose sr argument is annotated with a list, as torchfcpe's",
        _pitch_tracker,
    ),
]


# -- issue 31: transformers called with their defaults; chunking arithmetic ---------------------

_DEFAULT_CALL = {k: v for k, v in _TINY_DECODER.items() if k != "use_cache"}


def _default_call(model: str, prefix: str) -> ZooModel:
    """A decoder called as transformers' defaults have it: ``use_cache=True``, a cache out."""
    family = "decoder LLM called with its defaults: returns a DynamicCache"
    build = _hf(model, f"{prefix}Config", _tokens, **_DEFAULT_CALL)
    return ZooModel(f"{model}(use_cache)", "transformers", family, build)


DEFAULTS: list[ZooModel] = [
    _default_call("LlamaForCausalLM", "Llama"),
    _default_call("Qwen2ForCausalLM", "Qwen2"),
]

CHUNKED: list[ZooModel] = [
    ZooModel(
        "BertModel(chunked feed-forward)",
        "transformers",
        "encoder whose feed-forward runs in chunks of the sequence (apply_chunking_to_forward)",
        _hf(
            "BertModel",
            "BertConfig",
            _tokens,
            **_TINY_ENCODER,
            chunk_size_feed_forward=3,
        ),
    ),
]


ALL: list[ZooModel] = [
    *TRANSFORMERS,
    *DIFFUSERS,
    *X_TRANSFORMERS,
    *QUANTIZERS,
    *JULIUS,
    *ASTEROID,
    *MAMBAPY,
    *NNAUDIO,
    *EINOPS,
    *ATTENTION,
    *IDIOMS,
    *SCRIPTED,
    *SIGNATURES,
    *DEFAULTS,
    *CHUNKED,
]

KNOWN_FAILING: dict[str, str] = {}
"""Names of ``ALL`` that fail on both backends, with the first line of each backend's error."""

MODELS: list[ZooModel] = [m for m in ALL if m.name not in KNOWN_FAILING]
FAILING: list[ZooModel] = [m for m in ALL if m.name in KNOWN_FAILING]
