"""Capture of intermediate tensors from a PyTorch training run into a ttrace trace set.

Usage (one Capture per process; see docs/capture.md). Following the optimizer:

    cap = ttrace.Capture(model, "trace/dist", role="distributed", mesh=world_mesh,
                         optimizer=optimizer, iterations=[0, 1])
    ...the training loop, unchanged...
    cap.close()

or, for loops that need it, marking iterations and micro-batches by hand:

    cap = ttrace.Capture(model, "trace/dist", role="distributed", rank=rank, world_size=4,
                         mesh={"dp": 2, "tp": 2}, iterations=[0, 1], micro_batches=2)
    for it in range(steps):
        with cap.step(it):
            cap.record_params()
            for m, batch in enumerate(micro_batches):
                with cap.micro_batch(m):
                    loss(model(batch)).backward()
            reduce_gradients()
            cap.record_param_grads()
            optimizer.step()
            cap.record_updated_params()
    cap.close()
"""

import os
import re
import sys
import threading
import time
from contextlib import contextmanager

import numpy as np
import torch

from .dtensor import dtensor_layout, is_dtensor, local_values, mesh_axes_of
from .mesh import Mesh
from .placement import Layout, even_layout
from .rewrite import ReferenceInputs
from .write_queue import WriteQueue
from .writer import TraceWriter, encode, scale_blocks

_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)(?:\.|$)")
_EXPERT = re.compile(r"(?:^|\.)experts\.(\d+)(?:\.|$)")
_TRACE_DTYPE = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
_FP8_FORMAT = {torch.float8_e4m3fn: "fp8_e4m3", torch.float8_e5m2: "fp8_e5m2"}
_ACTIVATION_KINDS = ("forward_input", "forward_output", "output_grad", "input_grad")


def default_layer_of(name):
    """Global layer number from a `layers.N` path component, -1 outside the layers."""
    m = _LAYER.search(name)
    return int(m.group(1)) if m else -1


def default_expert_of(name):
    m = _EXPERT.search(name)
    return int(m.group(1)) if m else -1


def layer_offset(offset, prefix="layers"):
    """A name_map that renumbers local `prefix.N` to `prefix.(N+offset)`, as a pipeline stage
    whose first local layer is global layer `offset` needs."""
    pattern = re.compile(rf"(^|\.){re.escape(prefix)}\.(\d+)(?=\.|$)")

    def name_map(name):
        return pattern.sub(lambda m: f"{m.group(1)}{prefix}.{int(m.group(2)) + offset}", name, 1)

    return name_map


def default_modules(model, mesh=None):
    """Leaf modules plus the named blocks (children of a ModuleList / ModuleDict), except
    blocks holding model-parallel DTensor parameters: between parallelized modules a block
    passes plain local tensors (sharded by sequence or heads) that no DTensor describes.
    mesh: the capture's Mesh, whose axis names say which DTensor mesh dimensions are data
    parallel (default: the DTensors' own mesh dimension names)."""
    chosen = []
    containers = (torch.nn.ModuleList, torch.nn.ModuleDict)
    for name, module in model.named_modules():
        if not name:
            continue
        parent = model.get_submodule(name.rsplit(".", 1)[0]) if "." in name else model
        leaf = not any(True for _ in module.children())
        if leaf or (isinstance(parent, containers) and not _model_parallel(module, mesh)):
            chosen.append(name)
    return chosen


def _model_parallel(module, mesh):
    """Whether a parameter of `module` is a DTensor on a mesh axis other than data parallel
    ones (FSDP2 alone leaves activations whole but for the batch)."""
    for p in module.parameters():
        if not is_dtensor(p):
            continue
        if mesh is not None:
            axes = mesh_axes_of(p.device_mesh, mesh)
        else:
            axes = list(p.device_mesh.mesh_dim_names or [f"dim{d}" for d in
                                                          range(p.device_mesh.ndim)])
        if not all(map(_is_data_parallel, axes)):
            return True
    return False


def _pipeline_shape_inference():
    """Whether torch.distributed.pipelining is running its stage once, before the first
    micro-batch, to learn the shapes it sends: not a micro-batch of the training."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name.endswith("_metadata_inference") and "pipelining" in code.co_filename:
            return True
        frame = frame.f_back
    return False


class _GradTap(torch.autograd.Function):
    """Identity whose backward hands the gradient to `record` on its way through."""

    @staticmethod
    def forward(ctx, tensor, record):
        ctx.record = record
        return tensor.view_as(tensor)

    @staticmethod
    def backward(ctx, grad):
        ctx.record(grad)
        return grad, None


def _rank_and_world(role, rank, world_size, mesh):
    """This process's rank and the job's size: as given, else from torch.distributed in a
    distributed run (or the size of the DeviceMesh given), else 0 and 1."""
    dist = torch.distributed
    initialized = role == "distributed" and dist.is_available() and dist.is_initialized()
    if rank is None:
        rank = dist.get_rank() if initialized else 0
    if world_size is None:
        if initialized:
            world_size = dist.get_world_size()
        elif mesh is not None and not isinstance(mesh, dict):
            world_size = mesh.mesh.numel()
        else:
            world_size = int(np.prod(list((mesh or {}).values()), dtype=np.int64))
    return rank, world_size


def _parallel_sizes(mesh):
    """The manifest's `parallel` sizes from mesh axis names: tp, pp, cp, ep by name; dp the
    product of the data-parallel axes (dp, and torchtitan's dp_replicate and dp_shard)."""
    sizes = {a: n for a, n in mesh.items() if a in ("tp", "pp", "cp", "ep")}
    dp = [n for a, n in mesh.items() if _is_data_parallel(a)]
    if dp:
        sizes["dp"] = int(np.prod(dp, dtype=np.int64))
    return sizes


def _is_data_parallel(axis):
    return axis == "dp" or axis.startswith("dp_")


def _storage(tensor):
    """(numpy storage array, trace dtype) of a CPU tensor; half types as bit patterns."""
    dtype = _TRACE_DTYPE.get(tensor.dtype)
    if dtype is None:  # float64 and friends are written as fp32
        return tensor.float().numpy(), "fp32"
    if dtype == "fp32":
        return tensor.numpy(), dtype
    return tensor.view(torch.int16).numpy().view(np.uint16), dtype


class Capture:
    """Records module inputs/outputs, their gradients, parameters, parameter gradients and
    updated parameters of `model` for the chosen iterations into trace folder `folder`.

    role: "distributed", "reference" or "perturbed-reference".
    rank, world_size: default to torch.distributed's in a distributed run, else 0 and 1.
    mesh: the job's DeviceMesh (axis names from its dimension names), or a dict mesh axis ->
      size in mesh order (row-major: the last axis varies fastest over ranks; rank_coords:
      callable rank -> coordinates when ranks are not laid out otherwise); default one "dp"
      axis over every rank. DTensors record their placements on it (ttrace.dtensor).
    optimizer: the training's optimizer. The capture then follows it: iteration i is the one
      that ends with its i-th step (from 0), micro-batches are the model's forward calls in
      training mode between two steps, parameters are recorded at an iteration's first
      forward, parameter gradients just before the step (after the data-parallel reduction,
      FSDP2's reduced shards included) and updated parameters just after it. Without it, mark
      iterations with step() and micro-batches with micro_batch(), and call the record_*
      methods.
    parallel: the manifest's `parallel` sizes and `sp` flag; what it leaves out is taken from the
      mesh axis names (tp, pp, cp, ep; dp the product of dp and dp_* axes).
    dtype_recipe: "fp32", "bf16", "fp16", "fp8", or a full manifest `dtype` dict.
    placements: callable (global name, kind, index, tensor) -> Layout, a placement spec dict
      for even_layout (axis -> "Shard(d)" | "Replicate" | "Partial(sum)" | None), or None for
      the default: parameters from Megatron attributes (tensor_model_parallel, partition_dim,
      partition_stride) on `tp_axis`, else Replicate; activations Shard(0) on a "dp" axis
      (batch first), Replicate elsewhere. "auto" is the same as None.
    modules: names of the modules to hook, or a predicate (name, module) -> bool; default
      leaf modules plus named blocks.
    zigzag_axes: mesh axes whose Shard placements are zig-zag chunks (context parallelism
      with a causal mask, e.g. ("cp",)): see ttrace.zigzag_ranges.
    name_map: local name -> global name (pipeline stages: ttrace.layer_offset(k)).
    layer_of / expert_of: global name -> global layer / expert id (-1 when none).
    perturbation: {"relative": ..., "seed": ...}, required for a perturbed reference.
    rewrite_inputs_from: a reference trace folder (written by the same script as reference):
      each hooked module's floating-point forward inputs are replaced by the reference's
      `forward_input` of the same global name, index, iteration and micro-batch, sliced to this
      rank's shard, so every module is checked in isolation (forward only; see
      docs/capture.md). The manifest's `capture.input_rewriting` says so, with counts.
    max_queued_bytes: the bound on the host memory held by tensors copied but not yet written
      (default 1 GiB): at the bound the training thread waits for the writer (see
      ttrace.write_queue); `stats` says how long.
    sample_order: perturbed reference only: the order in which this run processed each
      micro-batch's samples, as the reference's sample indices (e.g. reversed(range(n))), so
      that its reductions over samples (parameter gradients, the loss) round in another order
      than the reference's and the perturbed reference's error shows their round-off too
      (docs/thresholds.md, "Reductions over samples"). Activations are recorded in the
      reference's order: along their sample dimension (the one the placements shard over a
      data-parallel axis; by default the first), where it has as many entries. The manifest's
      `perturbation.sample_order` says it."""

    def __init__(
        self,
        model,
        folder,
        role="reference",
        rank=None,
        world_size=None,
        mesh=None,
        rank_coords=None,
        parallel=None,
        dtype_recipe="fp32",
        iterations=(0,),
        micro_batches=None,
        placements=None,
        modules=None,
        name_map=None,
        layer_of=default_layer_of,
        expert_of=default_expert_of,
        tp_axis="tp",
        zigzag_axes=(),
        model_info=None,
        perturbation=None,
        rewrite_inputs_from=None,
        max_queued_bytes=1 << 30,
        optimizer=None,
        sample_order=None,
    ):
        if role == "perturbed-reference" and perturbation is None:
            raise ValueError("a perturbed reference needs perturbation={'relative':..,'seed':..}")
        if sample_order is not None:
            if role != "perturbed-reference":
                raise ValueError("sample_order is for a perturbed reference only")
            order = torch.as_tensor(list(sample_order), dtype=torch.long)
            if sorted(order.tolist()) != list(range(len(order))):
                raise ValueError(f"sample_order {order.tolist()} is not a permutation of "
                                 f"0..{len(order) - 1}")
            # this run's sample i is the reference's order[i]: record t[argsort(order)]
            self._to_reference_order = order.argsort()
            perturbation = {**perturbation, "sample_order": order.tolist()}
        else:
            self._to_reference_order = None
        self.model = model
        self.role = role
        rank, world_size = _rank_and_world(role, rank, world_size, mesh)
        if role != "distributed" and world_size != 1:
            raise ValueError(f"a {role} is a single-device run: world_size 1 and no mesh, not "
                             f"{world_size} ranks")
        self.rank = rank
        self._mesh = Mesh.of(mesh, world_size, rank_coords)
        self.mesh = dict(zip(self._mesh.axes, self._mesh.shape))
        self.coords = self._mesh.coords(rank)
        parallel = {**_parallel_sizes(self.mesh), **(parallel or {})}
        if isinstance(dtype_recipe, str):
            compute = "bf16" if dtype_recipe == "fp8" else dtype_recipe
            dtype_recipe = {"recipe": dtype_recipe, "compute": compute}
        self.iterations = set(iterations)
        if not (placements is None or placements == "auto" or callable(placements)):
            raise ValueError("placements must be a callable, 'auto' or None")
        self._placements = placements if callable(placements) else None
        self._name_map = name_map or (lambda n: n)
        self._layer_of = layer_of
        self._expert_of = expert_of
        self._tp_axis = tp_axis
        self._zigzag_axes = tuple(zigzag_axes)
        names = modules if modules is not None else default_modules(model, self._mesh)
        if callable(names):
            names = [n for n, m in model.named_modules() if n and names(n, m)]
        # each module hooked once, however often it is named: a second hook would record
        # every tensor twice
        self._modules = [(n, model.get_submodule(n)) for n in dict.fromkeys(names)]
        self._reference = ReferenceInputs(rewrite_inputs_from) if rewrite_inputs_from else None
        # per rank: inputs replaced, not in the reference, partial sums (no slice to take)
        self._rewrite_counts = {"rewritten": 0, "not_found": 0, "partial": 0}
        self._writer = TraceWriter(
            folder,
            role=role,
            world_size=world_size,
            parallel=parallel,
            mesh_axes=self._mesh.axes,
            mesh_shape=self._mesh.shape,
            rank_coords={r: self._mesh.coords(r) for r in range(world_size)},
            dtype=dtype_recipe,
            model=model_info or {"name": type(model).__name__, "num_layers": 1},
            capture={"iterations": sorted(self.iterations), "micro_batches": micro_batches or 1},
            perturbation=perturbation if role == "perturbed-reference" else None,
            write_manifest=rank == 0,
        )
        self._writer.open_rank(rank)
        self.iteration = None
        self.current_micro_batch = 0
        self._handles = []
        self._seq = 0
        self._lock = threading.Lock()
        self._seconds_copying = 0.0
        # Device-to-host copies happen in the hooks; encoding and HDF5 writes on its thread.
        self._queue = WriteQueue(self._write, max_queued_bytes)
        self._optimizer_handles = []
        if optimizer is not None:
            self._follow(optimizer, count_micro_batches=micro_batches is None)

    # -- training-loop API -------------------------------------------------------------------

    @property
    def active(self):
        return self.iteration is not None and self.iteration in self.iterations

    @contextmanager
    def step(self, iteration):
        """Marks one training iteration; hooks are installed only for captured iterations."""
        if self._optimizer_handles:
            raise RuntimeError("this capture follows the optimizer's steps (optimizer=...): "
                               "it needs no step() or micro_batch()")
        self.iteration = iteration
        self.current_micro_batch = 0
        if self.active:
            self._install()
        try:
            yield self
        finally:
            self._remove()
            self.iteration = None

    @contextmanager
    def micro_batch(self, m):
        """Marks the forward and backward of micro-batch m of the current iteration."""
        self.current_micro_batch = m
        try:
            yield self
        finally:
            self.current_micro_batch = 0

    def record_params(self):
        """Parameters as the iteration starts (call before the first forward)."""
        self._record_params("param", lambda p: p)

    def record_param_grads(self):
        """Parameter gradients after the data-parallel reduction, before the optimizer step;
        also the fp32 `main_grad` where the framework keeps one."""
        self._record_params("param_grad", lambda p: p.grad)
        self._record_params("main_grad", lambda p: getattr(p, "main_grad", None))

    def record_updated_params(self):
        """Parameters after the optimizer step."""
        self._record_params("updated_param", lambda p: p)

    def record_fp8(self, name, kind, index, values, scale_inv, fp8_format="fp8_e4m3",
                   block=None):
        """Records a tensor the training quantized to fp8, as its fp8 bytes and `scale_inv`
        (trace-format.md), for tensors no hook sees, e.g. the operands of an fp8 GEMM inside
        a module (docs/capture.md); ignored outside captured iterations. `values` is a
        torch.float8_e4m3fn or float8_e5m2 tensor, stored bit for bit in its own format, or
        (for recipes that simulate fp8) any float tensor already multiplied by its scale,
        rounded here to the nearest `fp8_format` value. `scale_inv` decodes it (1 / scale):
        one number with per-tensor scaling, or a tensor of one per row or block, in as many
        dimensions as `values` (row-wise scales of a [rows, cols] operand are [rows, 1]);
        `block` gives the block's extent per dimension where it is not the smallest that
        tiles `values` in scale_inv's grid (e.g. 128 x 128 blocks of a 200 x 256 weight)."""
        fmt = _FP8_FORMAT.get(values.dtype, fp8_format)
        if isinstance(scale_inv, torch.Tensor) and scale_inv.dim() > 0:
            scales = scale_inv.detach().to("cpu", torch.float64).numpy()
            scale_blocks(scales, tuple(values.shape), block)  # a wrong shape fails here, now
        else:
            scales = float(scale_inv)
        return self._record_tensor(name, kind, index, values, fp8=(fmt, scales, block))

    def close(self):
        """Flushes the queue and writes the rank file and the manifest. With input rewriting
        in a distributed run every rank must call it (the counts are gathered to rank 0)."""
        for h in self._optimizer_handles:
            h.remove()
        self._remove()
        self._queue.close()
        if self._reference is not None:
            self._reference.close()
            self._writer.manifest["capture"]["input_rewriting"] = self._rewriting_info()
        self._writer.close()
        self._raise_pending()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    # -- following the optimizer -------------------------------------------------------------

    def _follow(self, optimizer, count_micro_batches):
        """Iterations from the optimizer's steps (the first is 0), micro-batches from the
        model's forward calls in training mode between two steps; parameters at the first
        forward of an iteration, gradients just before the step, updates just after it."""
        self.iteration = 0
        self._forwards = 0
        self._count_micro_batches = count_micro_batches
        self._optimizer_handles = [
            # first: before FSDP2 gathers the parameters it shards
            self.model.register_forward_pre_hook(self._on_forward, prepend=True),
            optimizer.register_step_pre_hook(self._before_step),
            optimizer.register_step_post_hook(self._after_step),
        ]

    def _on_forward(self, module, args):
        if not module.training or _pipeline_shape_inference():
            return
        if self._forwards == 0 and self.active:
            self._install()
            self.record_params()
        self.current_micro_batch = self._forwards
        self._forwards += 1
        if self._count_micro_batches and self.active:  # the manifest's count: as many as seen
            capture = self._writer.manifest["capture"]
            capture["micro_batches"] = max(capture["micro_batches"], self._forwards)

    def _before_step(self, optimizer, args, kwargs):
        self.record_param_grads()

    def _after_step(self, optimizer, args, kwargs):
        self.record_updated_params()
        self._remove()
        self.iteration += 1
        self._forwards = 0
        self.current_micro_batch = 0

    # -- hooks -------------------------------------------------------------------------------

    def _install(self):
        if self._handles:
            return
        for local, module in self._modules:
            name = self._name_map(local)
            # After a parallel style's input conversion, before its output conversion: the
            # hooks see the DTensors the module computes on (docs/capture.md, DTensors).
            self._handles.append(module.register_forward_pre_hook(self._pre_hook(name)))
            self._handles.append(module.register_forward_hook(self._post_hook(name),
                                                              prepend=True))

    def _remove(self):
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _pre_hook(self, name):
        def hook(module, args):
            if self._reference is not None and self.active:
                args = tuple(self._rewritten(name, i, t) for i, t in enumerate(args))
            for i, t in enumerate(args):
                self._record_tensor(name, "forward_input", i, t)
            # the hook's return value replaces the module's inputs
            return tuple(self._tapped(name, i, t) for i, t in enumerate(args))

        return hook

    def _tapped(self, name, index, t):
        """Input `t` of module `name` behind a tap whose backward records the gradient that
        leaves the module through it (`input_grad`), with the micro-batch of this forward:
        schedules such as 1F1B run a micro-batch's backward after the next one's forward."""
        if not (self.active and isinstance(t, torch.Tensor) and t.is_floating_point()
                and t.requires_grad):
            return t
        mb = self.current_micro_batch

        def record(grad):
            self._record_tensor(name, "input_grad", index, grad, micro_batch=mb)

        return _GradTap.apply(t, record)

    def _rewritten(self, name, index, t):
        """The reference's value of input `index` of module `name`, sliced to this rank's
        shard; `t` itself when the reference has none or the shard is a partial sum."""
        if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
            return t
        layout = self._layout(name, "forward_input", index, t, None)
        if any(p.startswith("Partial") for p in (layout.placements or {}).values()):
            self._rewrite_counts["partial"] += 1
            return t
        local = t.to_local() if is_dtensor(t) else t
        ref = self._reference.shard(name, index, self.iteration, self.current_micro_batch,
                                    layout, local)
        self._rewrite_counts["not_found" if ref is None else "rewritten"] += 1
        if ref is None:
            return t
        if is_dtensor(t):
            return type(t).from_local(ref, t.device_mesh, t.placements, run_check=False,
                                      shape=t.shape, stride=t.stride())
        return ref

    def _rewriting_info(self):
        """The manifest's `capture.input_rewriting`: the reference and each rank's counts."""
        counts = [dict(self._rewrite_counts, rank=self.rank)]
        world = self._writer.world_size
        if world > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
            counts = [None] * world
            torch.distributed.all_gather_object(counts, dict(self._rewrite_counts, rank=self.rank))
        return {"reference": os.path.abspath(self._reference.folder), "ranks": counts}

    def _post_hook(self, name):
        def hook(module, args, output):
            outputs = output if isinstance(output, (tuple, list)) else (output,)
            for i, t in enumerate(outputs):
                if self._record_tensor(name, "forward_output", i, t) and t.requires_grad:
                    # fires when the gradient reaching this output is computed: execution order
                    t.register_hook(self._output_grad_hook(name, i, self.current_micro_batch))

        return hook

    def _output_grad_hook(self, name, index, micro_batch):
        def hook(grad):
            self._record_tensor(name, "output_grad", index, grad, micro_batch=micro_batch)

        return hook

    def _record_params(self, kind, get):
        if not self.active:
            return
        for local, p in self.model.named_parameters():
            t = get(p)
            if t is not None:
                self._record_tensor(self._name_map(local), kind, 0, t, -1, param=p)

    # -- recording ---------------------------------------------------------------------------

    def _record_tensor(self, name, kind, index, t, micro_batch=None, param=None, fp8=None):
        """Queues one tensor for writing; returns whether it was recorded. fp8: (format,
        scale_inv, block) to store `t` (already scaled) as fp8 bytes."""
        if not (self.active and isinstance(t, torch.Tensor) and t.is_floating_point()):
            return False
        if fp8 is None and t.dtype in _FP8_FORMAT:  # an fp8 tensor a hook sees: no scale
            fp8 = (_FP8_FORMAT[t.dtype], 1.0, None)
        self._raise_pending()
        if self._to_reference_order is not None and kind in _ACTIVATION_KINDS:
            t, fp8 = self._in_reference_order(name, kind, index, t, fp8)
        layout = self._layout(name, kind, index, t, param)
        local = local_values(t, f"{name} {kind}[{index}]") if is_dtensor(t) else t
        nbytes = local.numel() * local.element_size()
        self._queue.reserve(nbytes)  # waits while the queue is full
        start = time.perf_counter()
        # a copy: parameters and accumulated gradients change in place after this point
        cpu = local.detach().to("cpu", copy=True)
        self._seconds_copying += time.perf_counter() - start
        mb = self.current_micro_batch if micro_batch is None else micro_batch
        with self._lock:
            seq = self._seq
            self._seq += 1
        self._queue.put((seq, name, kind, index, cpu, self.iteration, mb, layout, fp8), nbytes)
        return True

    def _in_reference_order(self, name, kind, index, t, fp8):
        """Activation `t` (and its fp8 scales) with its samples back in the reference's order."""
        dim = self._sample_dim(name, kind, index, t)
        order = self._to_reference_order
        if dim is None or dim >= t.dim() or t.shape[dim] != len(order):
            return t, fp8
        if fp8 is not None and not isinstance(fp8[1], float):
            fmt, scales, block = fp8
            if scales.shape[dim] == t.shape[dim]:  # a scale per sample: they move with it
                scales = np.take(scales, order.numpy(), axis=dim)
            elif scales.shape[dim] != 1:
                raise ValueError(f"{name} {kind}[{index}]: fp8 scale blocks span several "
                                 "samples; sample_order cannot restore the reference's order")
            fp8 = (fmt, scales, block)
        return t.index_select(dim, order.to(t.device)), fp8

    def _sample_dim(self, name, kind, index, t):
        """The dimension of activation `t` that holds the samples: the one its placements shard
        over a data-parallel axis (by default the first), or None."""
        spec = self._placements(name, kind, index, t) if self._placements else None
        if spec is None:
            return 0
        placements = spec.placements if isinstance(spec, Layout) else spec
        for axis, placement in (placements or {}).items():
            if _is_data_parallel(axis) and placement and placement.startswith("Shard("):
                return int(placement[len("Shard("):-1])
        return None

    @property
    def stats(self):
        """What the capture cost so far: tensors and bytes written, the time the training
        thread spent on device-to-host copies and waiting for room in the write queue, the
        writer thread's time, and the queue's peak in bytes."""
        return dict(self._queue.stats, seconds_copying=self._seconds_copying)

    def _layout(self, name, kind, index, t, param):
        """Where tensor `t` sits in the global tensor: a DTensor says so itself; other tensors
        by the `placements` callback, else by default (see the class's docstring)."""
        if self.role != "distributed":
            return Layout(tuple(t.shape))  # a DTensor's shape is the global one
        if is_dtensor(t):
            return dtensor_layout(t, self._mesh, self.rank, self._outer_spec(kind),
                                  f"{name} {kind}[{index}]")
        spec = self._placements(name, kind, index, t) if self._placements else None
        if isinstance(spec, Layout):
            return spec
        strides = None
        if spec is None:
            spec, strides = self._default_spec(kind, param)
        return even_layout(tuple(t.shape), spec, self.mesh, self.coords, strides,
                           self._zigzag_axes)

    def _outer_spec(self, kind):
        """How the mesh axes outside a DTensor's own mesh split it: activations are split by
        batch over the data-parallel axes, everything else is a copy; a pipeline stage owns
        its tensors."""
        activation = kind in _ACTIVATION_KINDS
        return {a: "Shard(0)" if activation and _is_data_parallel(a) else "Replicate"
                for a in self.mesh if a != "pp"}

    def _default_spec(self, kind, param):
        if kind in _ACTIVATION_KINDS:
            return {a: "Shard(0)" for a in self.mesh if _is_data_parallel(a)}, None
        if param is not None and getattr(param, "tensor_model_parallel", False):
            dim = getattr(param, "partition_dim", 0)
            stride = getattr(param, "partition_stride", 1)
            return {self._tp_axis: f"Shard({dim})"}, {self._tp_axis: stride}
        return {}, None

    def _write(self, item):
        """Encodes and writes one queued tensor (on the writer thread)."""
        seq, name, kind, index, cpu, iteration, mb, layout, fp8 = item
        dtype, scale_inv, block = fp8 if fp8 is not None else (None, None, None)
        if fp8 is None:
            values, dtype = _storage(cpu)
        elif cpu.dtype in _FP8_FORMAT:  # torch's own fp8 bits, kept as they are
            values = cpu.view(torch.uint8).numpy()
        else:
            values = encode(cpu.float().numpy(), dtype)
        self._writer.add(
            self.rank,
            name,
            kind,
            values,
            dtype=dtype,
            iteration=iteration,
            micro_batch=mb,
            index=index,
            layer=self._layer_of(name),
            expert=self._expert_of(name),
            global_shape=layout.global_shape,
            ranges=layout.ranges,
            placements=layout.placements,
            scale_inv=scale_inv,
            scale_block=block,
            seq=seq,
        )

    def _raise_pending(self):
        if self._queue.error is not None:
            raise RuntimeError(f"ttrace capture failed writing rank {self.rank}") \
                from self._queue.error
