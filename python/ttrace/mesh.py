"""The device mesh a trace set is laid out on: axis names, sizes and each rank's coordinates.

A capture describes its run with one mesh (the manifest's `mesh` and `ranks[].coords`). It is
given as a dict of axis sizes (ranks laid out row-major, or by a `rank_coords` callable) or as
torch's own `DeviceMesh`, whose dimension names become the axis names. DTensors live on that
mesh or on a submesh of it (`mesh["tp"]`, a flattened `mesh["dp", "cp"]._flatten()`):
`axes_along` says which axes of the capture's mesh each dimension of such a submesh runs over."""

import numpy as np


class Mesh:
    """axes: axis names in mesh order; shape: their sizes; coords_of(rank): the rank's
    coordinates, one per axis (row-major: the last axis varies fastest, unless given)."""

    def __init__(self, axes, shape, coords_of=None):
        self.axes = list(axes)
        self.shape = [int(s) for s in shape]
        if len(self.axes) != len(self.shape) or len(set(self.axes)) != len(self.axes):
            raise ValueError(f"mesh axes {self.axes} and shape {self.shape} do not match")
        self.size = int(np.prod(self.shape, dtype=np.int64))
        if coords_of is None:
            def coords_of(rank):
                return [int(c) for c in np.unravel_index(rank, self.shape)] if self.shape else []
        self._coords_of = coords_of
        self._coords = {}
        self._along = {}  # line of ranks -> axes: every captured DTensor asks again

    @classmethod
    def of(cls, mesh, world_size, rank_coords=None):
        """A Mesh from what a Capture is given: a DeviceMesh, a dict axis -> size, or None (a
        single axis "dp" over every rank when world_size > 1, as plain data parallelism)."""
        if _is_device_mesh(mesh):
            built = cls.from_device_mesh(mesh)
            if built.size != world_size:
                raise ValueError(f"the device mesh holds {built.size} ranks, the job "
                                 f"{world_size}: give the capture the mesh of every rank")
            return built
        sizes = dict(mesh) if mesh is not None else ({"dp": world_size} if world_size > 1 else {})
        built = cls(sizes.keys(), sizes.values(), rank_coords)
        if built.size != world_size:
            raise ValueError(f"mesh {sizes} does not hold world_size {world_size} ranks")
        return built

    @classmethod
    def from_device_mesh(cls, device_mesh):
        """Axis names from the DeviceMesh's dimension names (`dim0`, `dim1`, ... where it has
        none), coordinates from where each rank sits in its rank tensor."""
        ranks = device_mesh.mesh.cpu().numpy()
        names = device_mesh.mesh_dim_names or [f"dim{d}" for d in range(ranks.ndim)]
        where = {int(r): [int(c) for c in np.unravel_index(i, ranks.shape)]
                 for i, r in enumerate(ranks.reshape(-1))}
        if sorted(where) != list(range(ranks.size)):
            raise ValueError(f"the device mesh holds ranks {sorted(where)}, not 0..{ranks.size - 1}:"
                             " give the capture the mesh of every rank of the job")
        return cls(names, ranks.shape, lambda rank: where[rank])

    def coords(self, rank):
        if rank not in self._coords:
            self._coords[rank] = list(self._coords_of(rank))
        return self._coords[rank]

    def axes_along(self, ranks):
        """The axes of this mesh that a line of ranks (one dimension of a submesh, in its
        order) runs over, outermost first; ValueError when the line is not the row-major
        enumeration of whole axes with every other coordinate fixed."""
        key = tuple(int(r) for r in ranks)
        if key not in self._along:
            self._along[key] = self._axes_along(key)
        return self._along[key]

    def _axes_along(self, ranks):
        coords = np.array([self.coords(int(r)) for r in ranks], dtype=np.int64).reshape(
            len(ranks), len(self.axes))
        varying = [a for a in range(len(self.axes)) if len(set(coords[:, a])) > 1]
        if not varying and len(ranks) == 1:  # a dimension of size 1 runs over no axis
            return []
        sizes = [self.shape[a] for a in varying]
        expected = np.array(list(np.ndindex(*sizes)), dtype=np.int64).reshape(-1, len(varying))
        if len(ranks) != int(np.prod(sizes, dtype=np.int64)) or not np.array_equal(
                coords[:, varying], expected):
            raise ValueError(f"ranks {list(map(int, ranks))} are not whole axes of the mesh "
                             f"{dict(zip(self.axes, self.shape))}")
        return [self.axes[a] for a in varying]


def _is_device_mesh(mesh):
    try:
        from torch.distributed.device_mesh import DeviceMesh
    except ImportError:
        return False
    return isinstance(mesh, DeviceMesh)
