"""Localities of an SPMD run: ``tessera.distributed.rank()`` and ``size()``.

Start a script on N localities (MPI ranks) with ``tessera run -n N script.py``;
run without the launcher it is the single locality 0 and makes no MPI call.
The collectives (``all_reduce``, ``broadcast``, ``all_gather``, ...) and the
tiled-array primitives (``annotate_d``, ``constant_d``, ``random_d``,
``dot_d``, ``transpose_d``, ``retile_d``, ``all_gather_d``) are primitives of
the language: the functions below call them directly, eagerly, and inside a
``@tessera.jit`` function a call of one of them becomes the primitive itself.
Tiled arrays come back as ``tessera._core.TiledArray`` handles (``.tile``,
``.shape``, ``.spans``, ``.locality``, ``.tiling``), which jit functions take
as arguments and combine with the ordinary operations (see
docs/distributed.md, "Tiled arrays").

``Mesh(data=, tensor=, pipeline=)`` arranges the localities in a grid with
named axes and makes this locality's group along each axis; every collective
takes ``group=mesh.group(axis)`` to run among that group's members only
(docs/parallelism.md). ``mesh()`` is the job's mesh, the one ``tessera run
--mesh`` asked for.
"""

import hashlib
import os
import sys

import numpy as np

from . import _core
from ._core import call_primitive


def _primitive(name):
    """Marks a function as the eager form of primitive ``name``, so that the
    jit translates calls of it into calls of the primitive (same arguments)."""

    def mark(fn):
        fn._tessera_primitive = name
        return fn

    return mark


def _dtype_name(dtype):
    return None if dtype is None else np.dtype(dtype).name


def _group_id(group, op):
    """The language's group argument: None (every locality) or a group id."""
    if group is None:
        return None
    if isinstance(group, (bool, np.bool_)) or not isinstance(group, (int, np.integer)):
        raise TypeError(
            f"[{op}] argument 'group' must be a group (mesh.group(axis)) or None, "
            f"got {type(group).__name__}"
        )
    return int(group)


@_primitive("locality")
def rank(group=None):
    """This process's locality (MPI rank): 0 without ``tessera run``; with a
    ``group``, its rank in that group."""
    return int(call_primitive("locality", [], {"group": _group_id(group, "locality")}))


@_primitive("num_localities")
def size(group=None):
    """Number of localities (MPI ranks): 1 without ``tessera run``; with a
    ``group``, its number of members."""
    return int(call_primitive("num_localities", [], {"group": _group_id(group, "num_localities")}))


@_primitive("all_reduce")
def all_reduce(x, op="sum", group=None):
    """``x`` reduced elementwise over every locality of ``group`` (op: sum,
    mean, max, min)."""
    return call_primitive("all_reduce", [x], {"op": op, "group": _group_id(group, "all_reduce")})


@_primitive("broadcast")
def broadcast(x, root=0, group=None):
    """The ``x`` of locality ``root`` (a rank in ``group``) on every locality
    of ``group``."""
    return call_primitive("broadcast", [x], {"root": root, "group": _group_id(group, "broadcast")})


@_primitive("all_gather")
def all_gather(x, axis=0, group=None):
    """Every ``group`` member's ``x`` joined along ``axis`` in group rank
    order (extents may differ there)."""
    return call_primitive(
        "all_gather", [x], {"axis": axis, "group": _group_id(group, "all_gather")}
    )


@_primitive("reduce_scatter")
def reduce_scatter(x, op="sum", group=None):
    """``x`` reduced over ``group`` (op: sum, mean, max, min); each member
    gets its part of axis 0 (the first ``len(x) % n`` parts one row longer)."""
    return call_primitive(
        "reduce_scatter", [x], {"op": op, "group": _group_id(group, "reduce_scatter")}
    )


@_primitive("gather")
def gather(x, root=0, group=None):
    """On ``root`` (a rank in ``group``): every member's ``x`` joined along
    axis 0; elsewhere ``x`` itself."""
    return call_primitive("gather", [x], {"root": root, "group": _group_id(group, "gather")})


@_primitive("scatter")
def scatter(x, root=0, group=None):
    """This member's part of ``root``'s ``x`` split along axis 0 over
    ``group`` (``x`` is ignored elsewhere)."""
    return call_primitive("scatter", [x], {"root": root, "group": _group_id(group, "scatter")})


@_primitive("all_to_all")
def all_to_all(x, group=None):
    """Part j of ``x`` (axis 0 split over ``group``) to member j; the parts
    received, joined in group rank order."""
    return call_primitive("all_to_all", [x], {"group": _group_id(group, "all_to_all")})


@_primitive("barrier")
def barrier(group=None):
    """Returns once every locality of ``group`` has reached it."""
    call_primitive("barrier", [], {"group": _group_id(group, "barrier")})


@_primitive("send")
def send(x, dest, tag=0, group=None):
    """Sends ``x`` to ``dest`` (a rank in ``group``) with ``tag`` (0..32767)."""
    call_primitive("send", [x, dest], {"tag": tag, "group": _group_id(group, "send")})


@_primitive("recv")
def recv(source, tag=0, group=None):
    """The array ``source`` (a rank in ``group``) sent with ``tag``."""
    return call_primitive("recv", [source], {"tag": tag, "group": _group_id(group, "recv")})


@_primitive("pipe_send")
def pipe_send(x, dest, tag, group=None):
    """Sends ``x`` to pipeline stage ``dest`` (a rank in ``group``) with pipe tag ``tag``
    (0..1048575, a tag space of its own per direction). Returns once the message is posted,
    never waiting for the receiver (docs/distributed.md, "Pipeline point to point")."""
    call_primitive("pipe_send", [x, dest, tag], {"group": _group_id(group, "pipe_send")})


@_primitive("pipe_recv")
def pipe_recv(source, tag, group=None, like=None):
    """The array stage ``source`` sent with ``pipe_send`` and pipe tag ``tag``; with ``like``
    (an array), a message of another shape or dtype raises ValueError naming both stages."""
    return call_primitive(
        "pipe_recv", [source, tag], {"group": _group_id(group, "pipe_recv"), "like": like}
    )


@_primitive("tp_copy")
def tp_copy(x, group=None):
    """Tensor parallelism's input operation (Megatron's "f"): ``x`` itself;
    its gradient is the cotangent summed over ``group`` (one all-reduce)."""
    return call_primitive("tp_copy", [x], {"group": _group_id(group, "tp_copy")})


@_primitive("tp_reduce")
def tp_reduce(x, group=None):
    """Tensor parallelism's output operation (Megatron's "g"): ``x`` summed
    over ``group`` (one all-reduce); its gradient is the cotangent itself."""
    return call_primitive("tp_reduce", [x], {"group": _group_id(group, "tp_reduce")})


class Group(int):
    """This locality's group along one axis of a :class:`Mesh`.

    It is the group's id (an ``int``), which is what the collectives' ``group``
    argument takes, so a ``@tessera.jit`` function that uses a group captured
    from outside passes it on as a constant. ``members`` are world ranks in
    group rank order; ``rank`` is this locality's place among them.
    """

    def __new__(cls, gid, axis, members, rank):
        self = super().__new__(cls, gid)
        self.axis = axis
        self.members = tuple(members)
        self.rank = rank
        self.size = len(self.members)
        return self

    __str__ = int.__repr__

    def __repr__(self):
        return f"Group(axis={self.axis!r}, members={list(self.members)}, rank={self.rank})"


class Mesh:
    """The localities arranged in a grid with named axes ``data``,
    ``pipeline`` and ``tensor``, and this locality's group along each.

    World rank ``r`` has coordinates ``(data, pipeline, tensor)`` with tensor
    innermost: ``r = (data * pipeline_size + pipeline) * tensor_size + tensor``.
    mpirun places consecutive ranks on the same host, so the members of a
    tensor group (the heaviest traffic: an all-reduce per layer) share a host
    whenever a host holds at least ``tensor_size`` ranks; the data axis (one
    gradient reduction per step) spans hosts. The product of the sizes must be
    the number of localities. Every locality must create the same meshes in the
    same order (each creation is collective).
    """

    AXES = ("data", "pipeline", "tensor")  # outermost first

    def __init__(self, data=1, tensor=1, pipeline=1):
        sizes = {"data": data, "pipeline": pipeline, "tensor": tensor}
        for axis, v in sizes.items():
            if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"[mesh] size of axis '{axis}' must be a positive int, got {v!r}")
        sizes = {axis: int(v) for axis, v in sizes.items()}
        n = size()
        product = sizes["data"] * sizes["pipeline"] * sizes["tensor"]
        if product != n:
            raise ValueError(
                f"[mesh] data={sizes['data']} x tensor={sizes['tensor']} x "
                f"pipeline={sizes['pipeline']} makes {product} localities, but this program "
                f"runs on {n} (the product of the sizes must equal the number of localities)"
            )
        if n > 1:
            # Every locality must ask for the same mesh (one small all_gather
            # over the world, once per mesh): else each gets this error
            # instead of groups that do not fit together.
            mine = np.array([[sizes[a] for a in self.AXES]], dtype=np.int64)
            every = np.asarray(all_gather(mine))
            if not (every == every[0]).all():
                shown = "; ".join(
                    f"rank {r}: " + ", ".join(f"{a}={int(v)}" for a, v in zip(self.AXES, row))
                    for r, row in enumerate(every)
                )
                raise ValueError(f"[mesh] the localities ask for different meshes: {shown}")
        self._sizes = sizes
        self._world_rank = rank()
        self._coords = self._coords_of(self._world_rank)
        self._groups = {}
        for axis in self.AXES:
            members = [
                r
                for r in range(n)
                if all(c == self._coords[a] for a, c in self._coords_of(r).items() if a != axis)
            ]
            gid = int(call_primitive("make_group", [axis, members]))
            self._groups[axis] = Group(gid, axis, members, members.index(self._world_rank))
            self._groups[axis].mesh = self  # the mesh a layer's group belongs to (fit)

    def _coords_of(self, r):
        t = self._sizes["tensor"]
        p = self._sizes["pipeline"]
        return {"data": r // (t * p), "pipeline": (r // t) % p, "tensor": r % t}

    def _axis(self, axis):
        if axis not in self._sizes:
            raise ValueError(f"[mesh] no axis {axis!r}: the axes are 'data', 'pipeline', 'tensor'")
        return axis

    @property
    def shape(self):
        """The sizes of the axes, as a dict ``{"data": d, "pipeline": p, "tensor": t}``."""
        return dict(self._sizes)

    @property
    def coords(self):
        """This locality's coordinate along each axis, as a dict."""
        return dict(self._coords)

    def size(self, axis):
        """The number of localities along ``axis``."""
        return self._sizes[self._axis(axis)]

    def rank(self, axis):
        """This locality's coordinate along ``axis`` (its rank in ``group(axis)``)."""
        return self._coords[self._axis(axis)]

    def group(self, axis):
        """This locality's group along ``axis``: the localities whose other
        coordinates equal its own, in order of their coordinate on ``axis``."""
        return self._groups[self._axis(axis)]

    def __repr__(self):
        return (
            f"Mesh(data={self._sizes['data']}, tensor={self._sizes['tensor']}, "
            f"pipeline={self._sizes['pipeline']})"
        )


_MESH_VARIABLE = "TESSERA_MESH"
_MESH_SHOWN = 120  # bytes of each rank's TESSERA_MESH compared and shown
_MESH_SOURCE = "TESSERA_MESH in the environment, set by tessera run --mesh"
_job_mesh = None


def _mesh_sizes(text):
    """The axis sizes of a ``TESSERA_MESH`` value such as ``data=2,tensor=2``."""
    source = _MESH_SOURCE
    sizes = {}
    for part in text.split(","):
        axis, eq, value = part.partition("=")
        if not eq:
            raise ValueError(
                f"[mesh] {part!r} is not axis=size (the axes are data, tensor, pipeline), "
                f"in {text!r} ({source})"
            )
        if axis not in Mesh.AXES:
            raise ValueError(
                f"[mesh] unknown axis {axis!r} in {text!r} (the axes are data, tensor, "
                f"pipeline) ({source})"
            )
        if axis in sizes:
            raise ValueError(f"[mesh] axis {axis!r} is given twice, in {text!r} ({source})")
        if not value.isdigit() or not value.isascii() or int(value) < 1:
            raise ValueError(
                f"[mesh] the size of axis {axis!r} must be a positive integer, got {value!r} "
                f"in {text!r} ({source})"
            )
        sizes[axis] = int(value)
    return sizes


def _same_setting_everywhere(value):
    """Checks, with one small all_gather, that every locality got the same
    ``value`` of TESSERA_MESH (None: unset); raises on every locality,
    naming the localities and their values, if not."""
    raw = b"" if value is None else value.encode("utf-8", "surrogateescape")
    row = np.full(1 + 32 + _MESH_SHOWN, -1, dtype=np.int64)
    row[0] = 0 if value is None else 1
    row[1:33] = np.frombuffer(hashlib.sha256(raw).digest(), dtype=np.uint8)
    shown = raw[:_MESH_SHOWN]
    row[33 : 33 + len(shown)] = np.frombuffer(shown, dtype=np.uint8)
    every = np.asarray(all_gather(row[None, :]))
    if (every == every[0]).all():
        return
    by_value = {}
    for r, other in enumerate(every):
        if other[0] == 0:
            text = "unset"
        else:
            kept = bytes(int(b) for b in other[33:] if b >= 0)
            text = repr(kept.decode("utf-8", "replace"))
            if len(kept) == _MESH_SHOWN:
                text += "..."
        by_value.setdefault(other.tobytes(), (text, []))[1].append(r)
    shown = "; ".join(
        f"{'rank' if len(ranks) == 1 else 'ranks'} {', '.join(map(str, ranks))}: {text}"
        for text, ranks in by_value.values()
    )
    raise ValueError(
        f"[mesh] the localities were given different {_MESH_VARIABLE} values: {shown} "
        f"(TESSERA_MESH in the environment; `tessera run --mesh` gives every rank the same)"
    )


def mesh():
    """The job's mesh: the :class:`Mesh` that ``tessera run --mesh
    data=D,tensor=T,pipeline=P`` asked for (environment variable
    ``TESSERA_MESH``; missing axes are 1), or every locality on the data axis
    when it is unset. Made on the first call (collectively: every locality
    must call it) and the same object afterwards. The first call checks, with
    one small all_gather, that every locality got the same TESSERA_MESH, and
    raises ValueError on every locality naming them and their values if not.
    """
    global _job_mesh
    if _job_mesh is None:
        value = os.environ.get(_MESH_VARIABLE) or None
        if size() > 1:
            _same_setting_everywhere(value)
        sizes = {"data": size()} if value is None else _mesh_sizes(value)
        product = int(np.prod(list(sizes.values()), dtype=object))
        if product != size():
            raise ValueError(
                f"[mesh] {_MESH_VARIABLE}={value} makes {product} localities, but this "
                f"program runs on {size()} (the product of the sizes must equal the number of "
                f"localities; missing axes are 1) ({_MESH_SOURCE})"
            )
        _job_mesh = Mesh(**sizes)
    return _job_mesh


@_primitive("annotate_d")
def annotate_d(x, tiling="rows", spans=None, shape=None, group=None):
    """This locality's tile ``x`` as part of a tiled array.

    ``tiling``: ``"rows"`` (axis 0), ``"columns"`` (axis 1), ``"pages"`` (axis 0
    of a 3-d or higher batch) or ``"replicated"``: the tiles are joined in
    locality order, their other extents must agree. Or ``spans``: this
    locality's ``[start, stop]`` per dimension (``tiling="overlapped"`` lets
    spans share elements). ``shape``, when given, is checked against the
    whole. Every locality must call it; they check the tiles together.
    ``group`` (``mesh.group(axis)``): tile over that group's members only
    (one tile each, in group rank order); operations on the array then run
    among them.
    """
    return call_primitive("annotate_d", [x], {"tiling": tiling, "spans": spans, "shape": shape,
                                              "group": group})


@_primitive("constant_d")
def constant_d(value, shape, tiling="rows", dtype=None, group=None):
    """A tiled array of global ``shape`` filled with ``value``; ``tiling`` is a
    name (``"rows"``, ``"columns"``, ``"pages"``, ``"replicated"``) or this
    locality's spans; over every locality or ``group``'s members."""
    return call_primitive(
        "constant_d", [value, shape], {"tiling": tiling, "dtype": _dtype_name(dtype),
                                       "group": group}
    )


@_primitive("random_d")
def random_d(
    shape,
    tiling="rows",
    distribution="uniform",
    seed=None,
    low=0.0,
    high=1.0,
    mean=0.0,
    std=1.0,
    dtype="float64",
    group=None,
):
    """A tiled random array equal, tile by tile, to the local draw of the same
    seed: ``random_uniform(shape, low, high, seed, dtype)``,
    ``random_normal(shape, mean, std, seed, dtype)`` or
    ``random_integers(low, high, shape, seed)`` for ``distribution``
    ``"uniform"``, ``"normal"``, ``"integers"``; over every locality or
    ``group``'s members."""
    return call_primitive(
        "random_d",
        [shape],
        {
            "tiling": tiling,
            "distribution": distribution,
            "seed": seed,
            "low": low,
            "high": high,
            "mean": mean,
            "std": std,
            "dtype": _dtype_name(dtype),
            "group": group,
        },
    )


@_primitive("dot_d")
def dot_d(a, b):
    """``numpy.dot`` of tiled (1-d or 2-d) arrays: rows x replicated stays tiled
    by rows, replicated x columns by columns, and a contraction over an axis
    tiled alike on both sides is summed over the localities (replicated)."""
    return call_primitive("dot_d", [a, b])


@_primitive("transpose_d")
def transpose_d(x):
    """The tiled array with its axes reversed (rows become columns), without
    communication."""
    return call_primitive("transpose_d", [x])


@_primitive("retile_d")
def retile_d(x, tiling):
    """``x`` tiled anew: by a tiling name, by this locality's spans, or like
    another tiled array of the same shape; only overlapping parts travel."""
    return call_primitive("retile_d", [x, tiling])


@_primitive("all_gather_d")
def all_gather_d(x):
    """The whole of tiled ``x`` as a NumPy array, on every locality."""
    return call_primitive("all_gather_d", [x])


def _exit_at_once_on_error(kind, value, traceback, previous=sys.excepthook):
    # A rank that dies of an uncaught exception leaves without MPI_Finalize,
    # which would wait for ranks that may be waiting for this one: mpirun then
    # ends the whole job at once instead of after the collective timeout.
    # Its trace (`tessera run --trace`) is written first: os._exit skips atexit.
    previous(kind, value, traceback)
    try:
        recording = sys.modules.get("tessera.trace")
        if recording is not None:
            recording._stop_at_exit()
    except BaseException:  # noqa: BLE001 - the exit must happen whatever the trace does
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        # Ending makes mpirun stop the other ranks: those told of the same
        # peer's failure get a moment to say so first.
        _core._linger_after_peer_failure()
    except BaseException:  # noqa: BLE001 - the exit must happen whatever
        pass
    os._exit(1)


if os.environ.get("OMPI_COMM_WORLD_SIZE") or os.environ.get("PMIX_RANK"):
    sys.excepthook = _exit_at_once_on_error


__all__ = [
    "rank",
    "size",
    "all_reduce",
    "broadcast",
    "all_gather",
    "reduce_scatter",
    "gather",
    "scatter",
    "all_to_all",
    "barrier",
    "send",
    "recv",
    "tp_copy",
    "tp_reduce",
    "Mesh",
    "Group",
    "mesh",
    "annotate_d",
    "constant_d",
    "random_d",
    "dot_d",
    "transpose_d",
    "retile_d",
    "all_gather_d",
]
