"""ttrace capture package: writes trace sets in ttrace trace format v1 (docs/trace-format.md)."""

from .capture import Capture
from .names import default_layer_of, default_modules, layer_offset
from .consistent import consistent_randn, perturb_, unit_roundoff
from .placement import Layout, even_layout, zigzag_ranges
from .rewrite import ReferenceInputs
from .writer import FORMAT_VERSION, TraceWriter, encode

__all__ = [
    "FORMAT_VERSION",
    "TraceWriter",
    "encode",
    "Capture",
    "Layout",
    "ReferenceInputs",
    "consistent_randn",
    "default_layer_of",
    "default_modules",
    "even_layout",
    "layer_offset",
    "perturb_",
    "unit_roundoff",
    "zigzag_ranges",
]
__version__ = "0.1.0"
