// Localities: the processes of an SPMD run (MPI ranks). A process started by
// mpirun (or `tessera run`) initializes MPI lazily, on first use, on the
// communication engine's progress thread; any other process is the single
// locality 0 and makes no MPI call at all. MPI_Finalize runs at exit.
#pragma once

namespace tessera::distributed {

// This process's locality (MPI rank), 0 without mpirun.
int locality();

// Number of localities (MPI world size), 1 without mpirun.
int num_localities();

// True when this process runs with more than one locality.
bool distributed();

// Called by a front end (the CLI) when the process is about to exit with an
// error: MPI_Finalize is then skipped (it would wait for ranks that may be
// waiting for this one), so mpirun ends the job instead of hanging.
void mark_failed();

// Drops the gradient buckets (grad_bucket, buckets.cpp) still waiting for
// members, failing the futures of those that arrived; returns how many.
// For a front end after a training step failed part way through its
// backward pass (the step's next run would otherwise meet its own members
// there). No backward pass with buckets may be running meanwhile.
int drop_gradient_buckets();

// For a rank about to end that knows of another's failure: waits until a
// second after it learned of it (Engine::linger_after_peer_failure). At once
// otherwise.
void linger_after_peer_failure();

}  // namespace tessera::distributed
