"""Export bended modules: TorchScript, nn~ (Max/MSP, Pure Data), torch.export and ONNX."""

from .contract import NNTildeReport, check_nntilde
from .delays import LatencyTable, latency
from .formats import FORMATS, ExportFormat
from .nntilde import nntilde
from .program import exportable, onnx, pt2
from .torchscript import torchscript

__all__ = [
    "FORMATS",
    "ExportFormat",
    "LatencyTable",
    "NNTildeReport",
    "check_nntilde",
    "exportable",
    "latency",
    "nntilde",
    "onnx",
    "pt2",
    "torchscript",
]
