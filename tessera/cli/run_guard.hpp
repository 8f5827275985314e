// The guard of one rank of `tessera run` (`tessera run --rank-guard`).
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

// `tessera run --rank-guard [--threads-per-host] PROGRAM ARGS...`, started by
// mpirun (or Open MPI's daemon on another host) for each rank: says which host
// it runs on, sizes the rank's threads from this host's cores when asked,
// starts the program as its child, passes on the signals it gets, stops the
// program when its own parent disappears, and reports how the program ended.
int guard_rank(std::vector<std::string> args);

}  // namespace tessera::cli
