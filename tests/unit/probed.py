"""A probe of the local cluster, shared by the tests that need one (not a test module)."""

from __future__ import annotations

from elastic_slurm.adapter.capabilities import Capabilities

#: what doctor found on the local cluster (Slurm 22.05.8, Open MPI 4.1.4), all yes where it can
GOOD = Capabilities(
    slurm_version="22.05.8",
    permit_job_expansion=True,
    disable_job_shrink=False,
    prolog_flags=(),
    accounting="accounting_storage/slurmdbd",
    select_type="select/linear",
    json_output=True,
    resizes_per_job="any number (accounting through slurmdbd)",
    mpi="Open MPI 4.1.4",
    mpi_can_spawn=True,
    mpi_detail="MPI_Comm_spawn works",
    pyslurm="22.5.3",
    pyslurm_detail="matches",
    grow_path="merge",
    grow_path_reason="permit_job_expansion is set and nothing blocks a merge",
    pmix_version="OpenPMIx 4.2.2",
    pmix_spawn={"srun": False, "mpirun": True},
    pmix_allocation={"srun": False, "mpirun": False},
    pmix_detail={"srun": {"extend_status": -47}, "mpirun": {"extend_status": -47}},
)
