// ndindex: the index tuples of a shape in C order, for
// `for idx in np.ndindex(shape)` loops.
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

Value ndindex(Args& a) {
  std::vector<int64_t> shape = a.int_list(0);
  int64_t total = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      a.value_error(0, error_message("must not contain negative dimensions: got ", a[0].str()));
    }
    total *= d;
  }
  if (total > (int64_t{1} << 31)) {
    a.value_error(0, error_message("has ", total, " indices, too many to list"));
  }
  List out;
  out.reserve(static_cast<size_t>(total));
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0; i < total; ++i) {
    List t;
    for (int64_t v : idx) t.push_back(Value(v));
    out.push_back(Value(std::move(t)));
    for (int k = static_cast<int>(shape.size()) - 1; k >= 0; --k) {
      if (++idx[k] < shape[k]) break;
      idx[k] = 0;
    }
  }
  return out;
}

const bool registered_iteration = register_primitives({
    {.name = "ndindex",
     .family = "indexing",
     .params = {{"shape"}},
     .help = "The indices of an array of the given shape (an int or a list of ints), in C "
             "order, as a list of lists of ints, like list(numpy.ndindex(shape)) (whose items "
             "are tuples). A 0-d shape () gives one empty index.",
     .eval = ndindex,
     .ns_per_element = 5.0,
     .grads = {""}},
});

}  // namespace

}  // namespace tessera
