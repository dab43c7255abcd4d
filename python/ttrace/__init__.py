"""ttrace capture package: writes trace sets in ttrace trace format v1 (docs/trace-format.md)."""

from .writer import FORMAT_VERSION, TraceWriter, encode

__all__ = ["FORMAT_VERSION", "TraceWriter", "encode"]
__version__ = "0.1.0"
