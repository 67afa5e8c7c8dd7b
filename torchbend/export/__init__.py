"""Export bended modules: TorchScript, nn~ (Max/MSP, Pure Data), torch.export and ONNX."""

from .contract import NNTildeReport, check_nntilde
from .formats import FORMATS, ExportFormat
from .nntilde import nntilde
from .program import exportable, onnx, pt2
from .torchscript import torchscript

__all__ = [
    "FORMATS",
    "ExportFormat",
    "NNTildeReport",
    "check_nntilde",
    "exportable",
    "nntilde",
    "onnx",
    "pt2",
    "torchscript",
]
