#include "tessera/core/tiled.hpp"

#include "tessera/core/error.hpp"

namespace tessera {

Shape Span::shape() const {
  Shape s(start.size());
  for (size_t d = 0; d < start.size(); ++d) s[d] = std::max<int64_t>(stop[d] - start[d], 0);
  return s;
}

int64_t Span::size() const {
  int64_t n = 1;
  for (size_t d = 0; d < start.size(); ++d) n *= std::max<int64_t>(stop[d] - start[d], 0);
  return n;
}

std::string Span::str() const {
  std::string s = "[";
  for (size_t d = 0; d < start.size(); ++d) {
    if (d) s += ", ";
    s += std::to_string(start[d]) + ":" + std::to_string(stop[d]);
  }
  return s + "]";
}

bool TiledArray::replicated() const {
  for (const Span& sp : spans) {
    for (int d = 0; d < sp.ndim(); ++d) {
      if (sp.start[d] != 0 || sp.stop[d] != shape[d]) return false;
    }
  }
  return true;
}

std::string TiledArray::describe() const {
  int n = num_localities();
  return error_message("tiled ", dtype_name(dtype()), " array of shape ", shape_str(shape), ", ", tiling, " over ",
                       n, " localit", n == 1 ? "y" : "ies");
}

std::string TiledArray::str() const {
  return error_message(describe(), "; locality ", locality, " holds ", span().str(), ":\n", tile.str());
}

}  // namespace tessera
