#include "tessera/distributed/locality.hpp"

#include "tessera/distributed/comm.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::distributed {

int locality() { return detail::started_by_mpirun() ? detail::world().first : 0; }

int num_localities() { return detail::started_by_mpirun() ? detail::world().second : 1; }

bool distributed() { return num_localities() > 1; }

void mark_failed() { detail::mark_failed(); }

namespace {

const bool registered = register_primitives(without_gradient({
    {.name = "locality",
     .family = "distributed",
     .params = {},
     .help = "This process's locality (MPI rank): 0 when not started by `tessera run` or mpirun.",
     .eval = [](Args&) -> Value { return Value(static_cast<int64_t>(locality())); }},
    {.name = "num_localities",
     .family = "distributed",
     .params = {},
     .help = "Number of localities (MPI ranks) running this program: 1 when not started by "
             "`tessera run` or mpirun.",
     .eval = [](Args&) -> Value { return Value(static_cast<int64_t>(num_localities())); }},
}));

}  // namespace
}  // namespace tessera::distributed
