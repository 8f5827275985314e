#include "tessera/distributed/locality.hpp"

#include "tessera/core/error.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera::distributed {

int locality() { return detail::started_by_mpirun() ? detail::world().first : 0; }

int num_localities() { return detail::started_by_mpirun() ? detail::world().second : 1; }

bool distributed() { return num_localities() > 1; }

void mark_failed() { detail::mark_failed(); }

void linger_after_peer_failure() { detail::linger_after_peer_failure(); }

namespace {

const bool registered_locality = register_primitives(without_gradient({
    {.name = "locality",
     .family = "distributed",
     .params = {opt("group", Value())},
     .help = "This process's locality (MPI rank): 0 when not started by `tessera run` or mpirun. "
             "With a "
             "group (mesh.group(axis)): its rank in that group.",
     .eval = [](Args& a) -> Value {
       return Value(static_cast<int64_t>(group_of_value(a[0], a.op()).rank));
     }},
    {.name = "num_localities",
     .family = "distributed",
     .params = {opt("group", Value())},
     .help = "Number of localities (MPI ranks) running this program: 1 when not started by "
             "`tessera run` or mpirun. With a group (mesh.group(axis)): its number of members.",
     .eval = [](Args& a) -> Value {
       return Value(static_cast<int64_t>(group_of_value(a[0], a.op()).size));
     }},
    {.name = "make_group",
     .family = "distributed",
     .params = {{"name"}, {"members"}},
     .help = "Makes this locality's group `name` of the world ranks `members` (ascending, this "
             "locality among them) and returns its id, for the group argument of the collectives. "
             "Every locality must call it, in the same order, each with its own group of one "
             "partition of the ranks (collective: a split of the world). tessera.distributed.Mesh "
             "calls it for each axis.",
     .eval = [](Args& a) -> Value {
       std::vector<int> members;
       Array m = a.array(1);
       if (m.ndim() != 1 || m.dtype() != DType::int64) {
         throw TypeError(
             error_message("[make_group] argument 'members' must be a list of ints, got ",
                           dtype_name(m.dtype()), " ", shape_str(m.shape())));
       }
       for (int64_t i = 0; i < m.size(); ++i) members.push_back(static_cast<int>(m.get_int(i)));
       return Value(static_cast<int64_t>(make_group(a.string(0), members)));
     }},
}));

}  // namespace
}  // namespace tessera::distributed
