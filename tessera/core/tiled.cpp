#include "tessera/core/tiled.hpp"

#include <algorithm>
#include <numeric>
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

const std::shared_ptr<Spans::Table>& Spans::empty_table() {
  static const auto table = std::make_shared<Table>(std::vector<Span>{});
  return table;
}

bool Spans::disjoint() const {
  int known = table_->disjoint.load(std::memory_order_acquire);
  if (known < 0) {  // two threads may both work it out: the same answer
    known = find_overlap(table_->spans) ? 0 : 1;
    table_->disjoint.store(known, std::memory_order_release);
  }
  return known == 1;
}

std::optional<std::pair<size_t, size_t>> find_overlap(const std::vector<Span>& spans) {
  std::vector<size_t> order;
  for (size_t r = 0; r < spans.size(); ++r) {
    if (!spans[r].empty()) order.push_back(r);
  }
  if (order.size() < 2) return std::nullopt;
  const int nd = spans[order[0]].ndim();
  auto pair_of = [](size_t a, size_t b) { return std::make_pair(std::min(a, b), std::max(a, b)); };
  if (nd == 0) return pair_of(order[0], order[1]);  // two 0-d spans: the one element
  // Sweep along the axis where the spans start at the most places: the
  // spans crossing a position of it are few for a partition.
  int axis = 0;
  size_t most = 0;
  for (int d = 0; d < nd; ++d) {
    std::vector<int64_t> starts;
    starts.reserve(order.size());
    for (size_t r : order) starts.push_back(spans[r].start[d]);
    std::sort(starts.begin(), starts.end());
    size_t distinct = static_cast<size_t>(std::unique(starts.begin(), starts.end()) - starts.begin());
    if (distinct > most) {
      most = distinct;
      axis = d;
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return spans[a].start[axis] < spans[b].start[axis]; });
  std::vector<size_t> active;  // spans seen whose extent along `axis` may still cross
  for (size_t r : order) {
    const Span& s = spans[r];
    // Those ending at or before s starts cross no later span either.
    active.erase(std::remove_if(active.begin(), active.end(),
                                [&](size_t q) { return spans[q].stop[axis] <= s.start[axis]; }),
                 active.end());
    for (size_t q : active) {  // q crosses s's start along the axis
      const Span& t = spans[q];
      bool shared = true;
      for (int d = 0; shared && d < nd; ++d) {
        shared = d == axis || (std::max(s.start[d], t.start[d]) < std::min(s.stop[d], t.stop[d]));
      }
      if (shared) return pair_of(q, r);
    }
    active.push_back(r);
  }
  return std::nullopt;
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
  // Disjoint spans inside the array cover it when their sizes add up to it.
  int64_t total = 1, held = 0;
  for (int d = 0; d < nd; ++d) total *= shape[d];
  for (const Span& s : spans) held += s.size();
  if (held == total && !find_overlap(spans)) return;
  // Spans whole in every dimension but one (rows, columns, pages, halos):
  // cover when their extents along it leave no gap.
  int axis = -1;
  bool slabs = !spans.empty();
  for (const Span& s : spans) {
    for (int d = 0; slabs && d < nd; ++d) {
      if (s.start[d] == 0 && s.stop[d] == shape[d]) continue;
      if (axis < 0) axis = d;
      slabs = d == axis;
    }
  }
  if (slabs && axis >= 0) {
    std::vector<std::pair<int64_t, int64_t>> runs;
    for (const Span& s : spans) {
      if (!s.empty()) runs.emplace_back(s.start[axis], s.stop[axis]);
    }
    std::sort(runs.begin(), runs.end());
    int64_t reach = 0;  // [0, reach) covered
    for (const auto& [a, b] : runs) {
      if (a > reach) break;
      reach = std::max(reach, b);
    }
    bool others_empty = false;
    for (int d = 0; d < nd; ++d) others_empty = others_empty || (d != axis && shape[d] == 0);
    if (reach >= shape[axis] || others_empty) return;
    std::string at = "(";
    for (int d = 0; d < nd; ++d) at += (d ? ", " : "") + std::to_string(d == axis ? reach : 0);
    throw std::invalid_argument(error_message("[", op, "] the tiling does not cover the array of shape ",
                                              shape_str(shape), ": element ", at + (nd == 1 ? ",)" : ")"),
                                              " is in no locality's span"));
  }
  if (slabs) return;  // every span the whole array
  // Otherwise count covered elements per box overlap: the union covers the
  // array iff every element is in some span. Sweep the elements of the
  // array in blocks given by the span boundaries.
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
