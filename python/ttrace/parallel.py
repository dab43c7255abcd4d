"""The manifest's `parallel` settings, from what the run shows: the job's mesh, the meshes of
the model's DTensor parameters, the parallelization plan, and the layouts of the recorded
activations."""

import numpy as np

from .layouts import is_data_parallel

_MODEL_PARALLEL = ("tp", "pp", "cp", "ep")


def parallel_settings(mesh, model):
    """tp, pp, cp, ep by mesh axis name, from the job's mesh (axis -> size) and, for an axis it
    does not name, from the meshes of the model's DTensor parameters (torchtitan's experts
    live on an (efsdp, ep) mesh of their own); dp the product of the job mesh's data-parallel
    axes (dp, dp_*, fsdp); sp whether the model's plan holds a SequenceParallel style."""
    sizes = {a: n for a, n in mesh.items() if a in _MODEL_PARALLEL}
    for axis, n in _parameter_mesh_axes(model).items():
        if axis in _MODEL_PARALLEL and n > 1:
            sizes.setdefault(axis, n)
    dp = [n for a, n in mesh.items() if is_data_parallel(a)]
    if dp:
        sizes["dp"] = int(np.prod(dp, dtype=np.int64))
    if _sequence_parallel_plan(model):
        sizes["sp"] = True
    return sizes


def sequence_sharded(kind, layout, tp_axis):
    """Whether a recorded tensor shows sequence parallelism: a [batch, sequence, hidden]
    activation (the residual stream's shape; attention's 4-D heads tensors are left out, their
    second dimension may be the heads) split along the sequence over the tensor-parallel axis.
    A plan that is not parallelize_module's, e.g. torchtitan's sharding declarations, says it
    only this way."""
    return (kind in ("forward_input", "forward_output") and layout is not None
            and len(layout.global_shape) == 3
            and (layout.placements or {}).get(tp_axis) == "Shard(1)")


def _parameter_mesh_axes(model):
    """Axis name -> size over the meshes of the model's DTensor parameters."""
    axes = {}
    for p in model.parameters():
        mesh = getattr(p, "device_mesh", None)
        names = getattr(mesh, "mesh_dim_names", None) or ()
        for name, size in zip(names, getattr(mesh, "shape", ())):
            axes.setdefault(name, int(size))
    return axes


def _sequence_parallel_plan(model):
    """Whether parallelize_module applied a SequenceParallel style to a module of `model`: the
    style's input conversion, a partial of SequenceParallel._prepare_input_fn, is a hook of
    the module."""
    try:
        from torch.distributed.tensor.parallel import SequenceParallel
    except ImportError:
        return False
    for module in model.modules():
        for hook in module._forward_pre_hooks.values():
            for cell in getattr(hook, "__closure__", None) or ():
                try:
                    target = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                func = getattr(target, "func", None)
                if getattr(func, "__func__", func) is SequenceParallel._prepare_input_fn:
                    return True
    return False
