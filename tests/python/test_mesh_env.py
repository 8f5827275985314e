"""tessera.distributed.mesh() in one process: the job's mesh from TESSERA_MESH
(what `tessera run --mesh` sets), made once, and the errors of a bad value.
The multi-rank cases are tests/distributed/mesh_env.py and
mesh_env_mismatch.py."""

import pytest

import tessera.distributed as dist


@pytest.fixture
def fresh(monkeypatch):
    """No job mesh made yet, and TESSERA_MESH unset."""
    monkeypatch.setattr(dist, "_job_mesh", None)
    monkeypatch.delenv("TESSERA_MESH", raising=False)
    return monkeypatch


def test_unset_means_every_locality_on_the_data_axis(fresh):
    mesh = dist.mesh()
    assert isinstance(mesh, dist.Mesh)
    assert mesh.shape == {"data": 1, "pipeline": 1, "tensor": 1}
    assert dist.mesh() is mesh


def test_the_environment_gives_the_mesh_missing_axes_are_one(fresh):
    fresh.setenv("TESSERA_MESH", "tensor=1,data=1")
    mesh = dist.mesh()
    assert mesh.shape == {"data": 1, "pipeline": 1, "tensor": 1}
    assert mesh.coords == {"data": 0, "pipeline": 0, "tensor": 0}
    # Made once: a later change of the variable does not make another mesh.
    fresh.setenv("TESSERA_MESH", "data=2")
    assert dist.mesh() is mesh


@pytest.mark.parametrize(
    "value, message",
    [
        (
            "data=2,tensor=2",
            "[mesh] TESSERA_MESH=data=2,tensor=2 makes 4 localities, but this program runs on 1 "
            "(the product of the sizes must equal the number of localities; missing axes are 1) "
            "(TESSERA_MESH in the environment, set by tessera run --mesh)",
        ),
        (
            "model=1",
            "[mesh] unknown axis 'model' in 'model=1' (the axes are data, tensor, pipeline) "
            "(TESSERA_MESH in the environment, set by tessera run --mesh)",
        ),
        (
            "data=0",
            "[mesh] the size of axis 'data' must be a positive integer, got '0' in 'data=0' "
            "(TESSERA_MESH in the environment, set by tessera run --mesh)",
        ),
        (
            "data=1,data=1",
            "[mesh] axis 'data' is given twice, in 'data=1,data=1' "
            "(TESSERA_MESH in the environment, set by tessera run --mesh)",
        ),
        (
            "data",
            "[mesh] 'data' is not axis=size (the axes are data, tensor, pipeline), in 'data' "
            "(TESSERA_MESH in the environment, set by tessera run --mesh)",
        ),
    ],
)
def test_bad_values_name_the_variable(fresh, value, message):
    fresh.setenv("TESSERA_MESH", value)
    with pytest.raises(ValueError) as e:
        dist.mesh()
    assert str(e.value) == message
    # Nothing was cached: a corrected value works.
    fresh.setenv("TESSERA_MESH", "data=1")
    assert dist.mesh().shape["data"] == 1
