#include "tessera/core/tiled.hpp"

#include <algorithm>
#include <stdexcept>

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
                       n, " localit", n == 1 ? "y" : "ies", group ? " of group '" + group_name + "'" : "");
}

std::string TiledArray::str() const {
  return error_message(describe(), "; locality ", locality, " holds ", span().str(), ":\n", tile.str());
}

Span full_span(const Shape& shape) {
  Span s;
  s.start.assign(shape.size(), 0);
  s.stop.assign(shape.begin(), shape.end());
  return s;
}

std::vector<Span> split_spans(const Shape& shape, int axis, int parts) {
  if (axis < 0 || axis >= static_cast<int>(shape.size()) || parts < 1) {
    throw std::invalid_argument(error_message("[split_spans] cannot split shape ", shape_str(shape), " along axis ",
                                              axis, " in ", parts, " parts"));
  }
  std::vector<Span> out;
  int64_t n = shape[axis], at = 0;
  for (int r = 0; r < parts; ++r) {
    int64_t len = n / parts + (r < n % parts ? 1 : 0);
    Span s = full_span(shape);
    s.start[axis] = at;
    s.stop[axis] = at + len;
    at += len;
    out.push_back(std::move(s));
  }
  return out;
}

void check_spans(const Shape& shape, const std::vector<Span>& spans, bool must_cover, const char* op) {
  const int nd = static_cast<int>(shape.size());
  for (size_t r = 0; r < spans.size(); ++r) {
    const Span& s = spans[r];
    bool ok = s.ndim() == nd && static_cast<int>(s.stop.size()) == nd;
    for (int d = 0; ok && d < nd; ++d) ok = 0 <= s.start[d] && s.start[d] <= s.stop[d] && s.stop[d] <= shape[d];
    if (!ok) {
      throw std::invalid_argument(error_message("[", op, "] the span of locality ", r, ", ", s.str(),
                                                ", does not lie inside the array of shape ", shape_str(shape)));
    }
  }
  if (!must_cover) return;
  // Count covered elements per box overlap: the union covers the array iff
  // every element is in some span. Sweep the elements of the array in
  // blocks given by the span boundaries (few localities, so few blocks).
  std::vector<std::vector<int64_t>> cuts(nd);
  for (int d = 0; d < nd; ++d) {
    cuts[d] = {0, shape[d]};
    for (const Span& s : spans) {
      cuts[d].push_back(s.start[d]);
      cuts[d].push_back(s.stop[d]);
    }
    std::sort(cuts[d].begin(), cuts[d].end());
    cuts[d].erase(std::unique(cuts[d].begin(), cuts[d].end()), cuts[d].end());
  }
  std::vector<size_t> idx(nd, 0);
  for (;;) {
    bool any_dim_done = false;
    for (int d = 0; d < nd; ++d) any_dim_done = any_dim_done || idx[d] + 1 >= cuts[d].size();
    if (any_dim_done) break;
    bool covered = false;
    for (const Span& s : spans) {
      bool in = true;
      for (int d = 0; in && d < nd; ++d) in = s.start[d] <= cuts[d][idx[d]] && cuts[d][idx[d] + 1] <= s.stop[d];
      covered = covered || in;
    }
    if (!covered) {
      std::string at = "(";
      for (int d = 0; d < nd; ++d) at += (d ? ", " : "") + std::to_string(cuts[d][idx[d]]);
      throw std::invalid_argument(error_message("[", op, "] the tiling does not cover the array of shape ",
                                                shape_str(shape), ": element ", at + (nd == 1 ? ",)" : ")"),
                                                " is in no locality's span"));
    }
    int d = nd - 1;
    while (d >= 0 && ++idx[d] + 1 >= cuts[d].size()) {
      if (d == 0) break;
      idx[d] = 0;
      --d;
    }
    if (d == 0 && idx[0] + 1 >= cuts[0].size()) break;
    if (d < 0) break;
  }
}

}  // namespace tessera
