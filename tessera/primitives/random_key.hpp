// The key of a draw of the random family (random_uniform, random_normal,
// random_integers), shared with the distributed constructor random_d, whose
// tiles are the parts of the same draw: element i of the whole array takes
// counter i under this key on every locality.
#pragma once

#include <cstddef>

#include "tessera/kernels/random.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

// The key of a draw of `distribution` ("uniform", "normal" or "integers")
// with the seed in argument `seed_index` of `a`: a given seed gives the key
// the local primitive uses with that seed; nil takes the next stream of the
// global seed (set_seed), as the local primitives do.
kernels::RandomKey random_draw_key(const Args& a, size_t seed_index, const char* distribution);

}  // namespace tessera
