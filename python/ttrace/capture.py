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

import itertools
import os
import sys
import threading
import time
from contextlib import contextmanager

import numpy as np
import torch

from .compiled import EagerStance
from .dtensor import dtensor_layout, is_dtensor, local_values
from .experts import RoutedRows, mixtures
from .layouts import ACTIVATION_KINDS, Layouts
from .mesh import Mesh
from .names import count_layers, default_expert_of, default_layer_of, default_modules
from .parallel import parallel_settings, sequence_sharded
from .placement import Layout
from .operands import (BACKWARD_OPERANDS, GemmOperands, OperandSource, flattened,
                       flattened_argument, gemm_functions, gradient_operand_format,
                       quantizes_inside, transposed)
from .quantized import FP8_FORMATS, Fp8Storage, torchao_quantized, unpack_fp4_tensor
from .recompute import Recomputations, in_recomputation
from .rewrite import ReferenceInputs
from .routing import Routing, RoutingChoice
from .staging import Staged, stage
from .wrappers import clean_name, unwrapped
from .write_queue import WriteQueue
from .writer import TraceWriter, check_scale_format, encode, scale_blocks

_TRACE_DTYPE = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}


def _on_device(scales):
    return isinstance(scales, torch.Tensor) and scales.device.type != "cpu"


def _host_scales(scales):
    """Scales as the writer takes them: None, a float, or a float64 array (from a tensor, or
    from a staged copy of one, waiting for it)."""
    if isinstance(scales, Staged):
        scales = scales.ready()
    if isinstance(scales, torch.Tensor):
        scales = scales.to(torch.float64).numpy()
        return float(scales) if scales.ndim == 0 else scales
    return scales


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


def _rank_and_world(rank, world_size, mesh):
    """This process's rank and the job's size: as given, else from torch.distributed when it
    is initialized (or the size of the DeviceMesh given), else 0 and 1."""
    dist = torch.distributed
    initialized = dist.is_available() and dist.is_initialized()
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


def _storage(tensor):
    """(numpy storage array, trace dtype) of a CPU tensor; half types as bit patterns."""
    dtype = _TRACE_DTYPE.get(tensor.dtype)
    if dtype is None:  # float64 and friends are written as fp32
        return tensor.float().numpy(), "fp32"
    if dtype == "fp32":
        return tensor.numpy(), dtype
    return tensor.view(torch.int16).numpy().view(np.uint16), dtype


def _parameter_viewed(module, t):
    """(local name, parameter) of `module`'s own parameter that GEMM operand `t` is, as it is
    or transposed (by shape: a DTensor's global one), or None."""
    for local, p in module.named_parameters(recurse=False):
        if tuple(p.shape) in (tuple(t.shape), tuple(reversed(t.shape))):
            return local, p
    return None


class Capture:
    """Records module inputs/outputs, their gradients, parameters, parameter gradients and
    updated parameters of `model` for the chosen iterations into trace folder `folder`.

    role: "distributed", "reference" or "perturbed-reference": which run is under test and
      which is trusted, not how it is laid out. A reference or perturbed reference may run on
      one device or on several ranks in any layout (docs/capture.md, "A reference on several
      ranks"); a run on several ranks records its layout whatever its role.
    rank, world_size: default to torch.distributed's when it is initialized, else 0 and 1 (a
      single-device reference run by one process of a larger job passes rank=0, world_size=1).
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
      mesh axis names (tp, pp, cp, ep; dp the product of dp, dp_* and fsdp axes) and, for sp,
      from the model's plan (a SequenceParallel style).
    dtype_recipe: "fp32", "bf16", "fp16", "fp8", "fp4", or a full manifest `dtype` dict.
    placements: None (the default, or "auto"): every layout is derived (ttrace.layouts):
      DTensors say theirs, plain tensors that parallel styles make local get the layout DTensor
      gives them, modules without a style keep their input's, the rest are whole but for the
      batch over the data-parallel axes. For hand-written parallelism, a callable (global name,
      kind, index, tensor) -> Layout, a placement spec dict for even_layout (axis -> "Shard(d)"
      | "Replicate" | "Partial(sum)" | None), or None where the derivation is right; it is
      asked for plain tensors only (parameters: Megatron attributes tensor_model_parallel,
      partition_dim, partition_stride on `tp_axis` are read without it).
    modules: names of the modules to hook (as in model.named_modules()), or a predicate
      (name, module) -> bool; default leaf modules plus named blocks, routers and mixtures of
      experts (ttrace.default_modules). Tensors are named without the path components
      torch.compile (`_orig_mod`) and checkpoint_wrapper add. Whatever is hooked, a module that
      computes on a mixture of experts' routed rows is left out (ttrace.experts).
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
    replay_routing_from: a reference trace folder (written by the same script as reference):
      each router (a module with an integer `top_k` or `topk`) takes the experts the reference
      chose for the same call, iteration and micro-batch instead of its own, with its own
      scores of them (ttrace.routing). For mixtures of experts, in the distributed run and
      the perturbed reference alike (docs/capture.md, "Routing replay"). Every run records its
      routers' choices; the manifest's `capture.routing_replay` says how many were replayed
      and how many tokens the run would have routed otherwise.
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
        replay_routing_from=None,
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
            self._orders = {}  # device -> _to_reference_order there
            self._sample_order = order
            perturbation = {**perturbation, "sample_order": order.tolist()}
        else:
            self._to_reference_order = None
            self._sample_order = None
        self.model = model
        self.role = role
        rank, world_size = _rank_and_world(rank, world_size, mesh)
        # The role says which run is trusted, not how it is laid out: any run on several ranks
        # records where its pieces sit, a reference's too.
        self._laid_out = role == "distributed" or world_size > 1
        if sample_order is not None and world_size > 1:
            raise ValueError("sample_order is for a perturbed reference on one device: "
                             f"this one runs on {world_size} ranks")
        self.rank = rank
        self._mesh = Mesh.of(mesh, world_size, rank_coords)
        self.mesh = dict(zip(self._mesh.axes, self._mesh.shape))
        self.coords = self._mesh.coords(rank)
        self._parallel_given = parallel or {}
        parallel = {**parallel_settings(self.mesh, model), **self._parallel_given}
        if isinstance(dtype_recipe, str):
            compute = "bf16" if dtype_recipe in ("fp8", "fp4") else dtype_recipe
            dtype_recipe = {"recipe": dtype_recipe, "compute": compute}
        gradients = gradient_operand_format(model)
        if gradients and dtype_recipe.get("recipe") == "fp8" and \
                "grad_operands" not in dtype_recipe:
            dtype_recipe = {**dtype_recipe, "grad_operands": gradients}
        self.iterations = set(iterations)
        if not (placements is None or placements == "auto" or callable(placements)):
            raise ValueError("placements must be a callable, 'auto' or None")
        self._layouts = Layouts(self._mesh, rank, placements if callable(placements) else None,
                                tp_axis, zigzag_axes)
        self._tp_axis = tp_axis
        self._sequence_sharded = False  # an activation recorded split along the sequence
        given_map = name_map or (lambda n: n)
        self._name_map = lambda n: given_map(clean_name(n))
        self._layer_of = layer_of
        self._expert_of = expert_of
        names = modules if modules is not None else default_modules(model)
        if callable(names):
            names = [n for n, m in model.named_modules() if n and names(n, m)]
        # each module hooked once, however often it is named: a second hook would record
        # every tensor twice
        self._modules = [(n, model.get_submodule(n)) for n in dict.fromkeys(names)]
        if model_info is None or "num_layers" not in model_info:
            counted = count_layers([self._name_map(n) for n, _ in model.named_parameters()],
                                   layer_of)
            model_info = {"name": type(unwrapped(model)).__name__, **(model_info or {}),
                          "num_layers": counted}
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
            model=model_info,
            capture={"iterations": sorted(self.iterations), "micro_batches": micro_batches or 1},
            perturbation=perturbation if role == "perturbed-reference" else None,
            write_manifest=rank == 0,
        )
        self._writer.open_rank(rank)
        self._recomputations = Recomputations(rank)  # on the writer thread
        # this iteration's forward tensors' layouts: a recomputation's, and the gradients'
        # that flow through its graph (reentrant checkpointing), are the first forward's
        self._forward_layouts = {}
        self.iteration = None
        self.current_micro_batch = 0
        self._handles = []
        # (module, GemmOperands or None where it is not captured) of the quantizing forwards
        # running
        self._operand_modes = []
        self._backward_error = None  # raised by the next hook or close(), not in a backward
        self._seq = 0
        self._lock = threading.Lock()
        self._seconds_copying = 0.0
        self._seconds_waiting_for_copies = 0.0  # on the writer thread
        # Device-to-host copies happen in the hooks; encoding and HDF5 writes on its thread.
        self._queue = WriteQueue(self._write, max_queued_bytes)
        found = mixtures(model)  # router -> its mixture, by local names
        # the modules inside the routers' wrappers: a recomputation runs those
        self._routers = [(self._name_map(n), unwrapped(model.get_submodule(n))) for n in found]
        self._routed_rows = RoutedRows(model, found, self._name_map)
        if replay_routing_from and not self._routers:
            raise ValueError("replay_routing_from: the model has no router (a module with an "
                             "integer top_k or topk attribute)")
        self._routing = Routing(
            lambda: (self.iteration, self.current_micro_batch),
            lambda name, experts, module: self._layout(name, "forward_output", 1, experts,
                                                       module=module),
            self._queue_routing,
            replay_routing_from, self._sample_order,
            lambda name, x: self._layouts.sample_dim(name, "forward_input", 0, x,
                                                     len(self._sample_order)))
        self._optimizer_handles = []
        self._forward_handles = [
            model.register_forward_pre_hook(self._on_model_forward, with_kwargs=True),
            model.register_forward_hook(self._after_model_forward, always_call=True)]
        self._propagating = False  # whether the forward runs in the layouts' dispatch mode
        self._eager = EagerStance()
        if optimizer is not None:
            self._follow(optimizer, count_micro_batches=micro_batches is None)
            self._eager.hold(self.active)

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
        self._eager.hold(self.active)
        if self.active:
            self._install()
        try:
            yield self
        finally:
            self._remove()
            self._eager.hold(False)
            self._forward_layouts.clear()
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
                   block=None, scale_format=None):
        """Records a tensor the training quantized to fp8, as its fp8 bytes and `scale_inv`
        (trace-format.md), for tensors no hook sees, e.g. the operands of an fp8 GEMM inside
        a module (docs/capture.md); ignored outside captured iterations. `values` is a
        torch.float8_e4m3fn or float8_e5m2 tensor, stored bit for bit in its own format, or
        (for recipes that simulate fp8) any float tensor already multiplied by its scale,
        rounded here to the nearest `fp8_format` value. `scale_inv` decodes it (1 / scale):
        one number with per-tensor scaling, or a tensor of one per row or block, in as many
        dimensions as `values` (row-wise scales of a [rows, cols] operand are [rows, 1]);
        `block` gives the block's extent per dimension where it is not the smallest that
        tiles `values` in scale_inv's grid (e.g. 128 x 128 blocks of a 200 x 256 weight).
        `scale_format` "e8m0" says the scales are MX's powers of two (the writer and the
        checker hold them to it)."""
        return self._record_scaled(name, kind, index, values,
                                   FP8_FORMATS.get(values.dtype, fp8_format), scale_inv, block,
                                   scale_format)

    def record_fp4(self, name, kind, index, values, scale_inv, block=None, scale_format=None,
                   tensor_scale_inv=None):
        """Records a tensor the training quantized to fp4 e2m1 (NVFP4, MXFP4), as record_fp8
        does fp8: `values` is a torch.float4_e2m1fn_x2 tensor (two elements a byte along the
        last dimension), stored bit for bit, or any float tensor already divided by its
        scales, rounded here to the nearest e2m1 value. `scale_inv` holds one scale per block
        (NVFP4: 16 elements along the inner dimension; MXFP4: 32); `scale_format` "e4m3" for
        NVFP4's block scales, "e8m0" for MXFP4's; `tensor_scale_inv`, NVFP4's second level:
        the one fp32 number per tensor that multiplies every block's scale."""
        if values.dtype == torch.float4_e2m1fn_x2:  # unpacked: the layout is in elements
            values = unpack_fp4_tensor(values)
        return self._record_scaled(name, kind, index, values, "fp4_e2m1", scale_inv, block,
                                   scale_format, tensor_scale_inv)

    def record_quantized(self, name, kind, index, tensor):
        """Records a torchao microscaling tensor (an MXTensor: MXFP8 or MXFP4; an NVFP4Tensor)
        as its own elements and scales, for operands no hook sees: its words as the GEMM reads
        them, its E8M0 or E4M3 block scales (`block_size` along the dimension they run over)
        and NVFP4's per-tensor scale. Hooks and record_params store such tensors the same way
        where they meet them (a weight quantized in place by torchao's quantize_)."""
        found = torchao_quantized(tensor)
        if found is None:
            raise TypeError(f"{name} {kind}[{index}]: record_quantized takes a torchao MXTensor "
                            f"or NVFP4Tensor, not a {type(tensor).__name__}")
        values, storage = found
        return self._record_tensor(name, kind, index, values, fp8=storage)

    def _record_scaled(self, name, kind, index, values, fmt, scale_inv, block, scale_format,
                       tensor_scale_inv=None):
        """record_fp8's and record_fp4's common part: the scales checked now, in the
        training's thread, and the tensor queued. Scales in device memory stay there, to be
        copied with the tensor (ttrace.staging): their values are checked on the writer's
        thread, which raises at the next record or at close()."""
        if isinstance(scale_inv, torch.Tensor) and scale_inv.dim() > 0:
            scales = scale_inv.detach()
            # a wrong shape fails here, now (only the shape is needed)
            scale_blocks(np.broadcast_to(1.0, tuple(scales.shape)), tuple(values.shape), block)
        elif isinstance(scale_inv, torch.Tensor):
            scales = scale_inv.detach()
        else:
            scales = float(scale_inv)
        if fmt == "fp4_e2m1" and (values.dim() == 0 or values.shape[-1] % 2):
            raise ValueError(f"{name} {kind}[{index}]: fp4 packs two elements a byte along the "
                             f"last dimension, and shape {tuple(values.shape)} has no even one")
        if scale_format is not None and not _on_device(scales):
            check_scale_format(scale_format, fmt, _host_scales(scales))  # refused here, now
        if isinstance(tensor_scale_inv, torch.Tensor):
            tensor_scale_inv = tensor_scale_inv.detach()
        elif tensor_scale_inv is not None:
            tensor_scale_inv = float(tensor_scale_inv)
        return self._record_tensor(
            name, kind, index, values,
            fp8=Fp8Storage(fmt, scales, block, scale_format, tensor_scale_inv))

    def close(self):
        """Flushes the queue and writes the rank file and the manifest. With input rewriting
        or routing replay in a distributed run every rank must call it (the counts are
        gathered to rank 0)."""
        for h in self._optimizer_handles:
            h.remove()
        for h in self._forward_handles:
            h.remove()
        self._remove()
        self._eager.hold(False)
        self._queue.close()
        if self._reference is not None:
            self._reference.close()
            self._writer.manifest["capture"]["input_rewriting"] = self._counts_of_ranks(
                self._reference.folder, self._rewrite_counts)
        if self._routing.replaying:
            self._routing.close()
            self._writer.manifest["capture"]["routing_replay"] = self._counts_of_ranks(
                self._routing.reference_folder, self._routing.counts)
        if self._routed_rows.left_out:
            self._writer.manifest["capture"]["routed_rows_left_out"] = self._routed_rows.left_out
        if self._sequence_sharded and "sp" not in self._parallel_given:
            self._writer.manifest["parallel"]["sp"] = True
        recomputations = self._recomputations.attribute()
        if recomputations is not None:
            self._writer.set_rank_attribute(self.rank, "recomputations", recomputations)
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

    def _on_model_forward(self, module, args, kwargs):
        if in_recomputation():
            return
        self._layouts.note_forward(args, kwargs)
        if self._laid_out and self.active and not self._propagating:
            self._layouts.propagating().__enter__()
            self._propagating = True

    def _after_model_forward(self, module, args, output):
        if self._propagating:
            self._propagating = False
            self._layouts.propagating().__exit__(None, None, None)

    def _on_forward(self, module, args):
        if not module.training or _pipeline_shape_inference() or in_recomputation():
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
        self._forward_layouts.clear()
        self.iteration += 1
        self._forwards = 0
        self.current_micro_batch = 0
        self._eager.hold(self.active)

    # -- hooks -------------------------------------------------------------------------------

    def _install(self):
        if self._handles:
            return
        if self._laid_out:
            # first, so that they see the styles' conversions before the capture records
            self._handles += self._layouts.watch(self.model)
        for local, module in self._modules:
            name = self._name_map(local)
            # After a parallel style's input conversion, before its output conversion: the
            # hooks see the DTensors the module computes on (docs/capture.md, DTensors).
            self._handles.append(module.register_forward_pre_hook(self._pre_hook(name)))
            self._handles.append(module.register_forward_hook(self._post_hook(name),
                                                              prepend=True))
            if quantizes_inside(module):
                self._handles += self._operand_hooks(name, module)
        captured = {id(module) for _, module in self._modules}
        for local, module in self.model.named_modules():
            if id(module) not in captured and quantizes_inside(module):
                self._handles += self._operand_hooks(self._name_map(local), module, False)
        self._handles += self._routing.hooks(self._routers)
        self._handles += self._routed_rows.hooks()

    def _remove(self):
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def _pre_hook(self, name):
        def hook(module, args):
            if self._routed_rows.computes_on_routed_rows(name, args):
                return None
            if self._reference is not None and self.active:
                args = tuple(self._rewritten(name, i, t, module) for i, t in enumerate(args))
            layouts = [self._record_tensor(name, "forward_input", i, t, module=module)
                       for i, t in enumerate(args)]
            # the hook's return value replaces the module's inputs
            tapped = tuple(self._tapped(name, i, t, layout)
                           for i, (t, layout) in enumerate(zip(args, layouts)))
            for t, tap in zip(args, tapped):
                if tap is not t:
                    self._layouts.same_as(tap, t)
            return tapped

        return hook

    def _operand_hooks(self, name, module, captured=True):
        """Hooks that record the quantized operands of the GEMMs `module` runs in its forward
        (ttrace.operands), as its forward_inputs numbered after its own arguments, and of the
        GEMMs its backward runs, as its output_grads numbered after its outputs. A module not
        `captured` is only marked running, so that a backward's watch passes over its GEMMs
        when activation checkpointing recomputes it there."""
        def enter(module, args):
            if not self.active:
                return
            if not captured or self._routed_rows.is_left_out(name):
                self._operand_modes.append((module, None))
                return
            indices = itertools.count(len(args))

            def record(t, gemm, position):
                found = flattened_argument(args, t)  # (argument, its leading dims) or None
                source = None if found is None else OperandSource(
                    "forward_input", found[0], tuple(args[found[0]].shape[:found[1]]))
                self._record_operand(name, module, "forward_input", next(indices), t, source,
                                     self.current_micro_batch)

            mode = GemmOperands(record)
            mode.__enter__()
            self._operand_modes.append((module, mode))

        def leave(module, args, output):
            if self._operand_modes and self._operand_modes[-1][0] is module:
                mode = self._operand_modes.pop()[1]
                if mode is not None:
                    mode.__exit__(None, None, None)
                    self._watch_backward(
                        name, module, args,
                        output if isinstance(output, (tuple, list)) else (output,))

        # entered after the arguments are recorded; left whether or not the forward raised
        return [module.register_forward_pre_hook(enter),
                module.register_forward_hook(leave, prepend=True, always_call=True)]

    def _watch_backward(self, name, module, args, outputs):
        """Runs the backward of each of torchao's GEMM functions `module`'s forward made in a
        GemmOperands mode (entered before that node, left after it, on the thread that runs
        it), recording the quantized operands of its two GEMMs as the module's output_grads
        after its outputs: 4k + 1, 2 the grad_input GEMM's (the output gradient, the weight),
        4k + 3, 4 the grad_weight GEMM's (the output gradient transposed, the input) of the
        k-th node (ttrace.operands.BACKWARD_OPERANDS)."""
        mb = self.current_micro_batch
        sources = {"weight": None}
        for role, kind, tensors in (("output", "forward_output", outputs),
                                    ("input", "forward_input", args)):
            if tensors and isinstance(tensors[0], torch.Tensor) and tensors[0].dim() > 1:
                sources[role] = OperandSource(kind, 0, tuple(tensors[0].shape[:-1]))
        for k, node in enumerate(gemm_functions(outputs, args)):
            def record(t, gemm, position, k=k):
                role, flipped = BACKWARD_OPERANDS.get((gemm, position), (None, False))
                source = sources.get(role)
                if source is not None:
                    source = source._replace(transposed=flipped)
                try:
                    self._record_operand(name, module, "output_grad",
                                         len(outputs) + 4 * k + 2 * gemm + position, t, source,
                                         mb)
                except Exception as error:  # raised after the backward, not inside it
                    self._backward_error = self._backward_error or error

            entered = []

            def before(grad_outputs, record=record, entered=entered):
                if self.active:  # passing over the forwards recomputed inside the backward
                    entered.append(GemmOperands(record, lambda: bool(self._operand_modes)))
                    entered[-1].__enter__()

            def after(grad_inputs, grad_outputs, entered=entered):
                if entered:
                    entered.pop().__exit__(None, None, None)

            node.register_prehook(before)
            node.register_hook(after)

    def _record_operand(self, name, module, kind, index, t, source, micro_batch):
        """Records GEMM operand `t` of module `name` as its `kind` `index`, laid out as
        `source` says it is a view of (an OperandSource), else as the parameter of the module
        it is, which holds no samples to put back in a reordered reference's order."""
        parameter = None if source is not None else _parameter_viewed(module, t)
        if source is None:
            unflattened = () if parameter is not None else None
        else:
            unflattened = source.leading
        self._record_tensor(
            name, kind, index, t, micro_batch=micro_batch, module=module,
            layout=self._operand_layout(name, source, parameter, t, micro_batch),
            unflattened=unflattened, transposed=source is not None and source.transposed)

    def _operand_layout(self, name, source, parameter, t, micro_batch):
        """Where GEMM operand `t` of module `name` sits (ttrace.operands): as the module tensor
        it flattens (`source`, an OperandSource; a DTensor's own mesh axes as it says, the
        others as that tensor), or as the module's parameter it is (`parameter`: its local
        name and itself, as _parameter_viewed finds it; transposed or not); None to derive it
        as any other tensor (a single-device run, no match)."""
        if not self._laid_out:
            return None
        known = None if source is None else self._forward_layouts.get(
            (name, source.kind, source.index, micro_batch))
        if known is not None:
            flat = flattened(known, len(source.leading))
            if flat is not None and source.transposed:
                flat = transposed(flat)
            if flat is None or not is_dtensor(t):
                return flat
            try:
                return dtensor_layout(t, self._mesh, self.rank, flat.placements,
                                      f"{name} {source.kind}")
            except ValueError:  # not the argument's view after all: derived as any other
                return None
        if parameter is None:
            return None
        local, p = parameter
        if is_dtensor(t):  # its own placements, a copy on the other axes (data parallel)
            return self._layout(f"{name}.{local}", "param", 0, t)
        if is_dtensor(p):
            return None
        layout = self._layout(f"{name}.{local}", "param", 0, p, param=p)
        return layout if tuple(p.shape) == tuple(t.shape) else transposed(layout)

    def _tapped(self, name, index, t, layout):
        """Input `t` of module `name` behind a tap whose backward records the gradient that
        leaves the module through it (`input_grad`, laid out as `t`), with the micro-batch of
        this forward: schedules such as 1F1B run a micro-batch's backward after the next one's
        forward."""
        if not (self.active and isinstance(t, torch.Tensor) and t.is_floating_point()
                and t.requires_grad):
            return t
        mb = self.current_micro_batch

        def record(grad):
            self._record_tensor(name, "input_grad", index, grad, micro_batch=mb, forward=layout)

        return _GradTap.apply(t, record)

    def _rewritten(self, name, index, t, module):
        """The reference's value of input `index` of module `name`, sliced to this rank's
        shard; `t` itself when the reference has none or the shard is a partial sum."""
        if not (isinstance(t, torch.Tensor) and t.is_floating_point()):
            return t
        layout = self._layout(name, "forward_input", index, t, module=module)
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

    def _counts_of_ranks(self, folder, counts):
        """A manifest entry: reference `folder` and every rank's `counts` (gathered when the
        run is distributed: every rank must call close())."""
        mine = dict(counts, rank=self.rank)
        gathered = [mine]
        world = self._writer.world_size
        if world > 1 and torch.distributed.is_available() and torch.distributed.is_initialized():
            gathered = [None] * world
            torch.distributed.all_gather_object(gathered, mine)
        return {"reference": os.path.abspath(folder), "ranks": gathered}

    def _post_hook(self, name):
        def hook(module, args, output):
            if self._routed_rows.is_left_out(name):
                return
            outputs = output if isinstance(output, (tuple, list)) else (output,)
            if self._laid_out:
                self._layouts.note_output(args, outputs)
            for i, t in enumerate(outputs):
                layout = self._record_tensor(name, "forward_output", i, t, module=module)
                if layout is not None and t.requires_grad:
                    # fires when the gradient reaching this output is computed: execution order
                    t.register_hook(self._output_grad_hook(name, i, self.current_micro_batch,
                                                           layout))

        return hook

    def _output_grad_hook(self, name, index, micro_batch, layout):
        def hook(grad):
            self._record_tensor(name, "output_grad", index, grad, micro_batch=micro_batch,
                                forward=layout)

        return hook

    def _record_params(self, kind, get):
        if not self.active:
            return
        for local, p in self.model.named_parameters():
            t = get(p)
            if t is not None:
                self._record_tensor(self._name_map(local), kind, 0, t, -1, param=p)

    # -- recording ---------------------------------------------------------------------------

    def _record_tensor(self, name, kind, index, t, micro_batch=None, param=None, fp8=None,
                       module=None, forward=None, layout=None, unflattened=None,
                       transposed=False):
        """Queues one tensor for writing; returns its layout, or None when it was not recorded.
        fp8: an Fp8Storage to store `t` (already scaled) as fp8 bytes; module: the
        module it belongs to; forward: the layout of the tensor whose gradient `t` is; layout:
        where it sits, when the caller knows (else derived here); unflattened: the leading
        dimensions `t`'s first one flattens (a GEMM operand's tokens: batch, sequence; its
        last with `transposed`), () where it holds no samples (a weight)."""
        if not (self.active and isinstance(t, torch.Tensor) and t.is_floating_point()):
            return None
        if fp8 is None:  # a torchao quantized tensor: its own words and scales
            t, fp8 = torchao_quantized(t) or (t, None)
        if fp8 is None and t.dtype in FP8_FORMATS:  # an fp8 tensor a hook sees: no scale
            fp8 = Fp8Storage(FP8_FORMATS[t.dtype], 1.0)
        elif fp8 is None and t.dtype == torch.float4_e2m1fn_x2:  # an fp4 one, the same
            t, fp8 = unpack_fp4_tensor(t), Fp8Storage("fp4_e2m1", 1.0)
        self._raise_pending()
        if self._to_reference_order is not None and kind in ACTIVATION_KINDS and \
                unflattened != ():
            t, fp8 = self._in_reference_order(name, kind, index, t, fp8, unflattened,
                                              transposed)
        mb = self.current_micro_batch if micro_batch is None else micro_batch
        recomputed = kind in ("forward_input", "forward_output") and in_recomputation()
        key = (name, kind, index, mb)
        if recomputed:
            layout = self._forward_layouts.get(key, layout)
        if layout is None:
            layout = self._layout(name, kind, index, t, param, module, forward)
            if kind in ("forward_input", "forward_output"):
                self._forward_layouts.setdefault(key, layout)
            if not self._sequence_sharded and sequence_sharded(kind, layout, self._tp_axis):
                self._sequence_sharded = True
        local = local_values(t, f"{name} {kind}[{index}]") if is_dtensor(t) else t
        nbytes = local.numel() * local.element_size()
        self._queue.reserve(nbytes)  # waits while the queue is full
        start = time.perf_counter()
        staged = stage(local)  # on a GPU, started: the writer waits for it (ttrace.staging)
        if fp8 is not None:  # scales in device memory travel the same way
            fp8 = fp8._replace(**{field: stage(value) for field, value in (
                ("scale_inv", fp8.scale_inv), ("tensor_scale_inv", fp8.tensor_scale_inv))
                if isinstance(value, torch.Tensor)})
        self._seconds_copying += time.perf_counter() - start
        with self._lock:
            seq = self._seq
            self._seq += 1
        self._queue.put((seq, name, kind, index, staged, self.iteration, mb, layout, fp8,
                         recomputed), nbytes)
        return layout

    def _queue_routing(self, choice):
        nbytes = choice.experts.host.numel() * choice.experts.host.element_size()
        self._queue.reserve(nbytes)
        self._queue.put(choice, nbytes)

    def _in_reference_order(self, name, kind, index, t, fp8, unflattened=None,
                            transposed=False):
        """Activation `t` (and its fp8 scales) with its samples back in the reference's order;
        `unflattened`: the leading dimensions its first one flattens, the samples among them
        (its last one, of a 2-D `t`, where `transposed`)."""
        if transposed:
            scales = None if fp8 is None else fp8.scale_inv
            if isinstance(scales, torch.Tensor) and scales.dim() == 2:
                fp8 = fp8._replace(scale_inv=scales.t())
            t, fp8 = self._in_reference_order(name, kind, index, t.t(), fp8, unflattened)
            scales = None if fp8 is None else fp8.scale_inv
            if isinstance(scales, torch.Tensor) and scales.dim() == 2:
                fp8 = fp8._replace(scale_inv=scales.t())
            return t.t(), fp8
        if unflattened is not None and len(unflattened) > 1:
            rows = t.shape[0]
            view = t.reshape(unflattened + tuple(t.shape[1:]))
            scales = None if fp8 is None else fp8.scale_inv
            if isinstance(scales, torch.Tensor) and scales.dim() == t.dim() and \
                    scales.shape[0] >= 1 and rows % scales.shape[0] == 0:
                # a scale per row moves with its row, one for every row stays, a block of
                # rows within one sample moves with it
                per = rows // scales.shape[0]  # rows a scale covers
                if per != rows and unflattened[-1] % per:
                    raise ValueError(f"{name} {kind}[{index}]: scale blocks of {per} rows "
                                     "span several samples; sample_order cannot restore the "
                                     "reference's order")
                lead = (1,) * len(unflattened) if per == rows else \
                    unflattened[:-1] + (unflattened[-1] // per,)
                fp8 = fp8._replace(scale_inv=scales.reshape(lead + tuple(scales.shape[1:])))
            view, fp8 = self._in_reference_order(name, kind, index, view, fp8)
            if fp8 is not None and isinstance(fp8.scale_inv, torch.Tensor) and \
                    fp8.scale_inv.dim() == view.dim():
                scales = fp8.scale_inv
                fp8 = fp8._replace(scale_inv=scales.reshape((-1,) + tuple(scales.shape[
                    len(unflattened):])))
            return view.reshape(t.shape), fp8
        order = self._to_reference_order
        dim = self._layouts.sample_dim(name, kind, index, t, len(order))
        if dim is None:
            return t, fp8
        if fp8 is not None and isinstance(fp8.scale_inv, torch.Tensor) and fp8.scale_inv.dim():
            scales = fp8.scale_inv
            if scales.shape[dim] == t.shape[dim]:  # a scale per sample: they move with it
                scales = scales.index_select(dim, self._order_on(scales.device))
            elif scales.shape[dim] != 1:
                raise ValueError(f"{name} {kind}[{index}]: scale blocks span several "
                                 "samples; sample_order cannot restore the reference's order")
            fp8 = fp8._replace(scale_inv=scales)
        return t.index_select(dim, self._order_on(t.device)), fp8

    def _order_on(self, device):
        """_to_reference_order on `device`, copied there once: a copy from ordinary host
        memory to a GPU waits for the device."""
        found = self._orders.get(device)
        if found is None:
            found = self._orders.setdefault(device, self._to_reference_order.to(device))
        return found

    @property
    def stats(self):
        """What the capture cost so far: tensors and bytes written, the time the training
        thread spent starting device-to-host copies (on a GPU; the whole copies on the CPU)
        and waiting for room in the write queue, the writer thread's time, of it the time it
        waited for copies still in flight, and the queue's peak in bytes."""
        return dict(self._queue.stats, seconds_copying=self._seconds_copying,
                    seconds_waiting_for_copies=self._seconds_waiting_for_copies)

    def _layout(self, name, kind, index, t, param=None, module=None, forward=None):
        """Where tensor `t` sits in the global tensor (ttrace.layouts); a single-device run
        holds every tensor whole."""
        if not self._laid_out:
            return Layout(tuple(t.shape))  # a DTensor's shape is the global one
        return self._layouts.of(name, kind, index, t, param, module, forward)

    def _write(self, item):
        """Encodes and writes one queued tensor (on the writer thread), or a router's choice
        to `/routing`; a recomputed forward tensor is compared with the first forward's instead
        (ttrace.recompute)."""
        if isinstance(item, RoutingChoice):
            self._writer.add_routing(self.rank, item.name, item.experts.ready().numpy(),
                                     item.iteration, item.micro_batch, item.call,
                                     item.layout.global_shape, item.layout.ranges)
            return
        seq, name, kind, index, staged, iteration, mb, layout, fp8, recomputed = item
        start = time.perf_counter()
        cpu = staged.ready()
        dtype, scale_inv, block, scale_format, tensor_scale_inv = \
            fp8 if fp8 is not None else (None,) * 5
        scale_inv, tensor_scale_inv = (_host_scales(s) for s in (scale_inv, tensor_scale_inv))
        self._seconds_waiting_for_copies += time.perf_counter() - start
        if fp8 is None:
            values, dtype = _storage(cpu)
        elif cpu.dtype in FP8_FORMATS:  # torch's own fp8 bits, kept as they are
            values = cpu.view(torch.uint8).numpy()
        else:
            values = encode(cpu.float().numpy(), dtype)
        key = (name, kind, index, iteration, mb)
        first = self._recomputations.dataset(key) if recomputed else None
        if first is not None:
            scales = scale_inv if tensor_scale_inv is None else scale_inv * tensor_scale_inv
            self._recomputations.compare(key, self._writer.stored(self.rank, first),
                                         (values, scales), dtype)
            return
        dataset = self._writer.add(
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
            scale_format=scale_format,
            tensor_scale_inv=tensor_scale_inv,
            seq=seq,
        )
        if kind in ("forward_input", "forward_output"):
            self._recomputations.first(key, dataset)

    def _raise_pending(self):
        if self._backward_error is not None:  # a backward operand that could not be recorded
            error, self._backward_error = self._backward_error, None
            raise error
        if self._queue.error is not None:
            raise RuntimeError(f"ttrace capture failed writing rank {self.rank}") \
                from self._queue.error
