#include "tessera/dist/locality.hpp"

#include "tessera/dist/comm.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::dist {

int locality() { return detail::started_by_mpirun() ? detail::world().first : 0; }

int num_localities() { return detail::started_by_mpirun() ? detail::world().second : 1; }

bool distributed() { return num_localities() > 1; }

void mark_failed() { detail::mark_failed(); }

namespace {

const bool registered = register_primitives(without_gradient({
    {.name = "locality",
     .family = "dist",
     .params = {},
     .help = "This process's locality (MPI rank): 0 when not started by `tessera run` or mpirun.",
     .eval = [](Args&) -> Value { return Value(static_cast<int64_t>(locality())); }},
    {.name = "num_localities",
     .family = "dist",
     .params = {},
     .help = "Number of localities (MPI ranks) running this program: 1 when not started by "
             "`tessera run` or mpirun.",
     .eval = [](Args&) -> Value { return Value(static_cast<int64_t>(num_localities())); }},
}));

}  // namespace
}  // namespace tessera::dist
