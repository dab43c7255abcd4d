"""Writer for ttrace trace format v1: one manifest.json plus one HDF5 file per rank."""

import json
import os

import h5py
import numpy as np

FORMAT_VERSION = "1.0"
KINDS = (
    "forward_input",
    "forward_output",
    "output_grad",
    "input_grad",
    "param",
    "param_grad",
    "main_grad",
    "updated_param",
)
PARAM_KINDS = ("param", "param_grad", "main_grad", "updated_param")
DTYPES = ("fp32", "fp16", "bf16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1")
SCALED = ("fp8_e4m3", "fp8_e5m2", "fp4_e2m1")  # stored values decode through scale_inv
# fp4 e2m1's non-negative values, indexed by their 3 low bits (OCP MX: no inf, no NaN)
FP4_VALUES = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def _bf16_bits(values):
    """Round-to-nearest-even fp32 -> bf16 bit patterns (what torch's .to(bfloat16) does)."""
    bits = np.ascontiguousarray(values, dtype=np.float32).view(np.uint32)
    rounding = ((bits >> 16) & 1) + 0x7FFF
    out = ((bits + rounding) >> 16).astype(np.uint16)
    nan = np.isnan(values)
    out[nan] = 0x7FC0
    return out


def _fp8_table(fmt):
    """All 256 values of an OCP FP8 format, indexed by bit pattern."""
    exp_bits, man_bits, bias = (4, 3, 7) if fmt == "fp8_e4m3" else (5, 2, 15)
    table = np.zeros(256, dtype=np.float64)
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        e = (b >> man_bits) & ((1 << exp_bits) - 1)
        m = b & ((1 << man_bits) - 1)
        if fmt == "fp8_e4m3" and e == 15 and m == 7:
            table[b] = np.nan
        elif fmt == "fp8_e5m2" and e == 31:
            table[b] = np.nan if m else sign * np.inf
        elif e == 0:
            table[b] = sign * m * 2.0 ** (1 - bias - man_bits)
        else:
            table[b] = sign * (1 + m / (1 << man_bits)) * 2.0 ** (e - bias)
    return table


def _fp8_bits(scaled, fmt):
    """Round-to-nearest-even OCP FP8 bit patterns of `scaled`. Finite values beyond the
    largest finite one saturate to it; NaN stays NaN; inf stays inf in e5m2 and becomes NaN
    in e4m3, which has no inf."""
    table = _fp8_table(fmt)
    # the non-negative finite codes are in ascending order of value
    codes = np.flatnonzero(np.isfinite(table[:128]))
    grid = table[codes]
    mag = np.abs(scaled)
    hi = np.clip(np.searchsorted(grid, mag), 1, len(grid) - 1)
    lo = hi - 1
    below, above = mag - grid[lo], grid[hi] - mag
    up = (below > above) | ((below == above) & (codes[hi] % 2 == 0))
    out = np.where(up, codes[hi], codes[lo])
    out = np.where(mag >= grid[-1], codes[-1], out)
    out = np.where(np.isnan(scaled), 0x7F, out)
    out = np.where(np.isinf(scaled), 0x7C if fmt == "fp8_e5m2" else 0x7F, out)
    return (out | (np.signbit(scaled).astype(np.int64) << 7)).astype(np.uint8)


def _fp4_codes(scaled):
    """Round-to-nearest-even fp4 e2m1 codes (4 bits, sign in bit 3) of `scaled`. Values beyond
    6 saturate to 6, as the recipes' casts do; e2m1 has no NaN, so a NaN is refused."""
    scaled = np.asarray(scaled, dtype=np.float64)
    if np.isnan(scaled).any():
        raise ValueError("a NaN cannot be stored as fp4 e2m1, which has no NaN")
    mag = np.abs(scaled)
    hi = np.clip(np.searchsorted(FP4_VALUES, mag), 1, len(FP4_VALUES) - 1)
    lo = hi - 1
    below, above = mag - FP4_VALUES[lo], FP4_VALUES[hi] - mag
    up = (below > above) | ((below == above) & (hi % 2 == 0))  # even codes have mantissa 0
    codes = np.where(mag >= FP4_VALUES[-1], len(FP4_VALUES) - 1, np.where(up, hi, lo))
    return (codes | (np.signbit(scaled).astype(np.int64) << 3)).astype(np.uint8)


def pack_fp4(codes):
    """Two fp4 codes a byte along the last dimension, the first in the low nibble (torch's
    float4_e2m1fn_x2, trace-format.md); the last dimension must be even."""
    codes = np.asarray(codes, dtype=np.uint8)
    if codes.ndim == 0 or codes.shape[-1] % 2:
        raise ValueError(f"fp4 packs two elements a byte along the last dimension: shape "
                         f"{codes.shape} has no even last dimension")
    return (codes[..., 0::2] & 0xF) | ((codes[..., 1::2] & 0xF) << 4)


def unpack_fp4(packed):
    """The values of packed fp4 bytes (pack_fp4's inverse), unscaled, as float64."""
    packed = np.asarray(packed, dtype=np.uint8)
    codes = np.stack([packed & 0xF, packed >> 4], axis=-1).reshape(*packed.shape[:-1], -1)
    values = FP4_VALUES[codes & 0x7]
    return np.where(codes & 0x8, -values, values)


def _holds_e4m3(scales):
    """Whether each scale is a positive fp8 e4m3 number (3 mantissa bits, at most 448)."""
    mantissa, exponent = np.frexp(scales)
    normal = (mantissa * 16 == np.floor(mantissa * 16)) & (scales >= 2.0**-6)
    subnormal = (scales < 2.0**-6) & (scales * 2**9 == np.floor(scales * 2**9))
    return (scales > 0) & (scales <= 448) & (normal | subnormal)


SCALE_FORMATS = {
    "e8m0": ("a power of two from 2^-127 to 2^127",
             lambda s: (np.frexp(s)[0] == 0.5) & (np.abs(np.frexp(s)[1] - 1) <= 127)),
    "e4m3": ("a positive fp8 e4m3 number (at most 448, 3 mantissa bits)", _holds_e4m3),
}


def check_scale_format(scale_format, dtype, scales):
    """Refuses scales that `scale_format` cannot hold (trace-format.md)."""
    if scale_format not in SCALE_FORMATS:
        raise ValueError(f"unknown scale_format {scale_format!r}: e8m0 or e4m3")
    if dtype not in SCALED:
        raise ValueError(f"scale_format given for a {dtype} tensor: fp8 and fp4 only")
    scales = np.asarray(scales, dtype=np.float64)
    what, holds = SCALE_FORMATS[scale_format]
    bad = ~holds(scales)
    if np.any(bad):
        value = float(scales.flat[int(np.flatnonzero(bad)[0])])
        raise ValueError(f"scale_inv {value!r} is not an {scale_format} scale: {what}")


def scale_blocks(scale_inv, shape, block=None):
    """(scales, block) of an fp8 tensor of `shape` scaled per row or block: `scale_inv` holds
    one scale_inv per block, with as many dimensions as the tensor (torch's row-wise scales of
    a [rows, cols] operand are [rows, 1]); `block` is the block's extent per dimension, by
    default the smallest that tiles `shape` in scale_inv's grid (trace-format.md)."""
    scales = np.asarray(scale_inv, dtype=np.float64)
    if scales.ndim != len(shape):
        raise ValueError(f"scale_inv of shape {scales.shape} for a tensor of shape "
                         f"{tuple(shape)}: give one scale per block, in as many dimensions")
    if block is None:
        block = tuple(max(1, -(-n // g)) if g else 1 for n, g in zip(shape, scales.shape))
    block = tuple(int(b) for b in block)
    grid = tuple(-(-n // b) for n, b in zip(shape, block)) if all(b >= 1 for b in block) else None
    if len(block) != len(shape) or grid != scales.shape:
        raise ValueError(f"blocks of {block} tile shape {tuple(shape)} in a grid of {grid}, "
                         f"but scale_inv has shape {scales.shape}")
    return scales, block


def expand_scales(scales, block, shape):
    """Every element's scale_inv: each block's repeated over the block, cut to `shape`."""
    full = scales
    for axis, b in enumerate(block):
        full = np.repeat(full, b, axis=axis)
    return full[tuple(slice(0, n) for n in shape)]


def encode(values, dtype, scale_inv=1.0):
    """Returns the storage array for `values` (any float array) in trace dtype `dtype`.

    fp8 and fp4 values are quantized to the nearest representable value of values / scale_inv,
    one scale or one per element (expand_scales); fp4 comes packed two a byte."""
    values = np.asarray(values)
    if dtype == "fp32":
        return values.astype("<f4")
    if dtype == "fp16":
        return values.astype("<f2").view("<u2")
    if dtype == "bf16":
        return _bf16_bits(values.astype(np.float32))
    if dtype in ("fp8_e4m3", "fp8_e5m2"):
        return _fp8_bits(values.astype(np.float64) / scale_inv, dtype)
    if dtype == "fp4_e2m1":
        return pack_fp4(_fp4_codes(values.astype(np.float64) / scale_inv))
    raise ValueError(f"unknown trace dtype {dtype!r}")


class TraceWriter:
    """Writes one trace set. Use as a context manager or call close().

    mesh_axes / mesh_shape describe the device mesh; rank_coords maps rank -> coordinates.
    A reference run uses the defaults (world_size 1, empty mesh). In a distributed run each
    process writes its own rank file; only one of them (rank 0) should pass
    write_manifest=True."""

    def __init__(
        self,
        folder,
        role="reference",
        world_size=1,
        parallel=None,
        mesh_axes=(),
        mesh_shape=(),
        rank_coords=None,
        dtype=None,
        model=None,
        capture=None,
        perturbation=None,
        capture_tool=("ttrace-python", "0.1.0"),
        write_manifest=True,
    ):
        if role not in ("distributed", "reference", "perturbed-reference"):
            raise ValueError(f"unknown role {role!r}")
        os.makedirs(folder, exist_ok=True)
        self.folder = folder
        self.world_size = world_size
        rank_coords = rank_coords or {r: [] for r in range(world_size)}
        par = {"tp": 1, "pp": 1, "vpp": 1, "dp": 1, "cp": 1, "ep": 1, "sp": False}
        par.update(parallel or {})
        self.manifest = {
            "format": "ttrace",
            "format_version": FORMAT_VERSION,
            "role": role,
            "capture_tool": {"name": capture_tool[0], "version": capture_tool[1]},
            "world_size": world_size,
            "parallel": par,
            "mesh": {"axes": list(mesh_axes), "shape": list(mesh_shape)},
            "ranks": [
                {"rank": r, "file": self.rank_file(r), "coords": list(rank_coords[r])}
                for r in range(world_size)
            ],
            "dtype": dtype or {"recipe": "fp32", "compute": "fp32"},
            "model": model or {"name": "model", "num_layers": 1},
            "capture": capture or {"iterations": [0], "micro_batches": 1},
        }
        if perturbation is not None:
            self.manifest["perturbation"] = perturbation
        self._files = {}
        self._finished = set()
        self._seq = {}
        self._write_manifest = write_manifest

    @staticmethod
    def rank_file(rank):
        return f"rank{rank:05d}.h5"

    def open_rank(self, rank):
        """Creates `rank`'s file now, so that it exists even if the rank records nothing."""
        self._file(rank)

    def finish_rank(self, rank):
        """Closes `rank`'s file: every tensor of that rank is written. A writer that stands for
        many ranks (a generator of synthetic traces) would otherwise hold every file open, and
        HDF5's caches of each, until close()."""
        f = self._files.pop(rank, None)
        if f is not None:
            f.close()
        self._finished.add(rank)

    def _file(self, rank):
        if rank in self._finished:
            raise ValueError(f"rank {rank} is finished: its file is closed")
        if rank not in self._files:
            f = h5py.File(os.path.join(self.folder, self.rank_file(rank)), "w")
            f.attrs["format_version"] = FORMAT_VERSION
            f.attrs["rank"] = rank
            f.create_group("tensors")
            self._files[rank] = f
            self._seq[rank] = 0
        return self._files[rank]

    def add(
        self,
        rank,
        name,
        kind,
        values,
        dtype="fp32",
        iteration=0,
        micro_batch=0,
        index=0,
        layer=-1,
        expert=-1,
        global_shape=None,
        ranges=None,
        placements=None,
        scale_inv=None,
        seq=None,
        scale_block=None,
        scale_format=None,
        tensor_scale_inv=None,
    ):
        """Adds one captured tensor (the local shard `values`) to `rank`'s file.

        ranges: per dimension a list of (start, stop) global index ranges; None = whole tensor.
        placements: dict mesh axis -> "Shard(d)" | "Replicate" | "Partial(sum)".
        scale_inv (fp8, fp4): one number (per-tensor scaling, by default the shard's amax /
        the format's max), or an array of one per block (per row or block, see scale_blocks),
        with `scale_block` the block's extent per dimension when it is not the smallest that
        fits.
        scale_format (fp8, fp4): "e8m0" when the given scale_inv are MX's, powers of two from
        2^-127 to 2^127, "e4m3" when they are NVFP4's E4M3 block scales (any other scale is
        refused, before anything is written); None for scales of any positive value.
        tensor_scale_inv (with per-block scales): NVFP4's second level, one fp32 number per
        tensor that multiplies every block's scale_inv.
        values are encoded to `dtype` unless they already are a uint8/uint16 storage array
        (fp4: packed two a byte along the last dimension, see pack_fp4).
        Returns the dataset name."""
        if kind not in KINDS:
            raise ValueError(f"unknown tensor kind {kind!r}")
        if dtype not in DTYPES:
            raise ValueError(f"unknown trace dtype {dtype!r}")
        values = np.asarray(values)
        f = self._file(rank)
        if seq is None:
            seq = self._seq[rank]
        self._seq[rank] = max(self._seq[rank], seq + 1)
        if scale_format is not None:  # before anything is written
            if scale_inv is None:
                raise ValueError("scale_format needs the recipe's own scale_inv")
            check_scale_format(scale_format, dtype, scale_inv)
        encoded = values.dtype in (np.uint8, np.uint16)
        # the tensor's shape in elements: an encoded fp4 array holds two a byte
        shape = values.shape
        if encoded and dtype == "fp4_e2m1":
            if values.ndim == 0:
                raise ValueError("fp4 packs two elements a byte along the last dimension: "
                                 "a storage array without dimensions cannot hold it")
            shape = values.shape[:-1] + (2 * values.shape[-1],)
        if tensor_scale_inv is not None:
            if dtype != "fp4_e2m1" or (scale_block is None and np.ndim(scale_inv) == 0):
                raise ValueError("tensor_scale_inv scales per-block scales of fp4 (NVFP4): "
                                 "give scale_inv one per block, of an fp4_e2m1 tensor")
            tensor_scale_inv = float(tensor_scale_inv)
            if not (np.isfinite(tensor_scale_inv) and tensor_scale_inv > 0):
                raise ValueError(f"tensor_scale_inv {tensor_scale_inv!r} is not a positive "
                                 "finite number")
        blocks = None
        if dtype in SCALED and (scale_block is not None or np.ndim(scale_inv) > 0):
            blocks = scale_blocks(scale_inv, shape, scale_block)
            scale_inv = expand_scales(*blocks, shape) * (tensor_scale_inv or 1.0)
        if dtype in SCALED and scale_inv is None:
            finite = np.abs(values[np.isfinite(values)])  # a NaN or inf must not set the scale
            amax = float(finite.max()) if finite.size else 0.0
            fmax = {"fp8_e4m3": 448.0, "fp8_e5m2": 57344.0, "fp4_e2m1": 6.0}[dtype]
            scale_inv = amax / fmax if amax > 0 else 1.0
        if encoded:
            # already encoded: its width must be the dtype's storage width
            want = np.uint8 if dtype in SCALED else np.uint16 if dtype in ("bf16", "fp16") else None
            if values.dtype != want:
                raise ValueError(f"{values.dtype} storage array given for dtype {dtype!r}")
            stored = values
        else:
            stored = encode(values, dtype, scale_inv if scale_inv is not None else 1.0)
        ds_name = f"{seq:06d}"
        ds = f["tensors"].create_dataset(ds_name, data=stored)
        ds.attrs["name"] = name
        ds.attrs["kind"] = kind
        ds.attrs["index"] = np.int64(index)
        ds.attrs["iteration"] = np.int64(iteration)
        ds.attrs["micro_batch"] = np.int64(-1 if kind in PARAM_KINDS else micro_batch)
        ds.attrs["seq"] = np.int64(seq)
        ds.attrs["layer"] = np.int64(layer)
        ds.attrs["expert"] = np.int64(expert)
        ds.attrs["dtype"] = dtype
        if scale_format is not None:
            ds.attrs["scale_format"] = scale_format
        if blocks is not None:
            ds.attrs["scale_block"] = np.asarray(blocks[1], dtype=np.int64)
            f.require_group("scale_inv").create_dataset(ds_name, data=blocks[0])
            if tensor_scale_inv is not None:
                ds.attrs["tensor_scale_inv"] = np.float64(tensor_scale_inv)
        elif scale_inv is not None and dtype in SCALED:
            ds.attrs["scale_inv"] = np.float64(scale_inv)
        shape = tuple(global_shape) if global_shape is not None else tuple(shape)
        ds.attrs["global_shape"] = np.asarray(shape, dtype=np.int64)
        if ranges is not None:
            ds.attrs["ranges"] = json.dumps([[list(map(int, r)) for r in dim] for dim in ranges])
        if placements:
            ds.attrs["placements"] = json.dumps(placements)
        return ds_name

    def add_routing(self, rank, name, experts, iteration, micro_batch, call, global_shape,
                    ranges=None):
        """Adds the experts a router chose (the int64 indices of its `call`-th top-k in one
        forward, this rank's shard) to `rank`'s `/routing` group (trace-format.md): what a
        run that replays this one's routing reads back. Returns the dataset name."""
        group = self._file(rank).require_group("routing")
        ds = group.create_dataset(f"{len(group):06d}", data=np.asarray(experts, dtype=np.int64))
        ds.attrs["name"] = name
        ds.attrs["iteration"] = np.int64(iteration)
        ds.attrs["micro_batch"] = np.int64(micro_batch)
        ds.attrs["call"] = np.int64(call)
        ds.attrs["global_shape"] = np.asarray(tuple(global_shape), dtype=np.int64)
        if ranges is not None:
            ds.attrs["ranges"] = json.dumps([[list(map(int, r)) for r in dim] for dim in ranges])
        return ds.name

    def stored(self, rank, dataset):
        """What `add` stored as `dataset` of `rank`'s open file: its words and its fp8 or fp4
        scales (one number, an array of one per block times the tensor_scale_inv above them,
        or None)."""
        f = self._file(rank)
        ds = f["tensors"][dataset]
        if "scale_block" in ds.attrs:
            scales = f["scale_inv"][dataset][()] * ds.attrs.get("tensor_scale_inv", 1.0)
        else:
            scales = ds.attrs.get("scale_inv")
        return ds[()], scales

    def set_rank_attribute(self, rank, name, value):
        """A file attribute of `rank`'s file (e.g. `recomputations`)."""
        self._file(rank).attrs[name] = value

    def close(self):
        for f in self._files.values():
            f.close()
        self._files.clear()
        if self._write_manifest:
            # write-then-rename: a reader never sees a half-written manifest
            path = os.path.join(self.folder, "manifest.json")
            with open(path + ".tmp", "w") as out:
                json.dump(self.manifest, out, indent=2)
            os.replace(path + ".tmp", path)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            # No manifest for a capture that failed: a partial trace must not look complete.
            self._write_manifest = False
        self.close()
