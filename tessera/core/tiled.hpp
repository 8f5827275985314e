// TiledArray: one locality's view of an array whose whole lives across all
// localities (Phylanx's "tiled" arrays with metadata).
//
// Every locality holds a TiledArray with the same metadata — the dtype, the
// global shape and every locality's span — and its own tile, the elements of
// the whole inside its span (SPMD). An array may be tiled over a group (a
// mesh axis, tessera/distributed/comm.hpp) instead of every locality: then
// "locality r" below means member r of the group, and the array's
// collectives run among the group's members only. Spans are boxes [start, stop) per
// dimension. A tiling usually partitions the array (each element in exactly
// one span); a replicated tiling gives every locality the whole array, and an
// overlapped tiling lets neighbouring spans share elements (the halo of a
// spatially tiled convolution). Spans may be empty (a locality with no part).
//
// This header is data only: no MPI. The distributed primitives that make and
// combine tiled arrays live in tessera/distributed.
#pragma once

#include <atomic>
#include <initializer_list>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/core/array.hpp"

namespace tessera {

// A box of the global index space: [start[d], stop[d]) in every dimension d.
struct Span {
  std::vector<int64_t> start, stop;

  int ndim() const { return static_cast<int>(start.size()); }
  int64_t extent(int d) const { return stop[d] - start[d]; }
  Shape shape() const;
  int64_t size() const;
  bool empty() const { return size() == 0; }
  bool operator==(const Span&) const = default;
  // "[0:5, 0:4]"
  std::string str() const;
};

// The spans of every member of a tiled array, one per locality (of the
// group), shared: copying a TiledArray, or making an array of the same
// tiling from it, copies a reference, not N spans (a job of N localities
// would otherwise copy O(N) metadata with every tiled value). Immutable once
// made; whether the spans are disjoint is worked out once per table and kept
// with it. Reads as a const std::vector<Span>.
class Spans {
 public:
  Spans() : table_(empty_table()) {}
  Spans(std::vector<Span> spans)  // NOLINT: implicit, as the vector it replaces
      : table_(std::make_shared<Table>(std::move(spans))) {}
  Spans(std::initializer_list<Span> spans) : Spans(std::vector<Span>(spans)) {}

  operator const std::vector<Span>&() const { return table_->spans; }  // NOLINT
  const std::vector<Span>& vec() const { return table_->spans; }
  size_t size() const { return table_->spans.size(); }
  bool empty() const { return table_->spans.empty(); }
  const Span& operator[](size_t r) const { return table_->spans[r]; }
  std::vector<Span>::const_iterator begin() const { return table_->spans.begin(); }
  std::vector<Span>::const_iterator end() const { return table_->spans.end(); }

  // True when no element lies in two spans (computed once per table).
  bool disjoint() const;

  friend bool operator==(const Spans& a, const Spans& b) {
    return a.table_ == b.table_ || a.table_->spans == b.table_->spans;
  }
  friend bool operator==(const Spans& a, const std::vector<Span>& b) { return a.table_->spans == b; }
  friend bool operator==(const std::vector<Span>& a, const Spans& b) { return a == b.table_->spans; }

 private:
  struct Table {
    explicit Table(std::vector<Span> s) : spans(std::move(s)) {}
    std::vector<Span> spans;
    mutable std::atomic<int> disjoint{-1};  // -1 not known yet, 0 no, 1 yes
  };
  static const std::shared_ptr<Table>& empty_table();
  std::shared_ptr<Table> table_;
};

struct TiledArray {
  // This locality's part: shape == spans[locality].shape().
  Array tile;
  // Shape of the whole.
  Shape shape;
  // spans[r]: the part of locality r, for every locality r (of the group).
  Spans spans;
  // Which locality this is (the tile is spans[locality]): its rank in the group.
  int locality = 0;
  // The group the array is tiled over: 0 (every locality) or a group id
  // (distributed::make_group), and the group's name for messages.
  int group = 0;
  std::string group_name = "world";
  // How the array was tiled, for messages and printing: "rows", "columns",
  // "pages", "replicated", "overlapped" or "user".
  std::string tiling = "user";

  DType dtype() const { return tile.dtype(); }
  int ndim() const { return static_cast<int>(shape.size()); }
  int num_localities() const { return static_cast<int>(spans.size()); }
  const Span& span() const { return spans[locality]; }

  // True when the two have the same global shape, group and spans.
  bool same_tiling(const TiledArray& other) const {
    return shape == other.shape && group == other.group && spans == other.spans;
  }
  // True when every locality's span is the whole array.
  bool replicated() const;

  // "tiled float64 array of shape (10, 4), rows over 2 localities" (and
  // " of group 'tensor'" when tiled over a group)
  std::string describe() const;
  // describe() plus this locality's span and its tile as NumPy prints it.
  std::string str() const;
};

// The span of the whole array.
Span full_span(const Shape& shape);
// `shape` split along `axis` in `parts` spans as numpy.array_split does (the
// first shape[axis] % parts get one more index; some may be empty).
std::vector<Span> split_spans(const Shape& shape, int axis, int parts);
// Two spans that share elements (their indices, the lower first), or none
// when no element lies in two spans. Sweeps the spans along the axis with the
// most distinct starts, comparing each only with those that cross it: about
// N log N for the tilings made by rows, columns, pages or a grid of blocks
// (N spans), at worst N^2 when many spans share elements.
std::optional<std::pair<size_t, size_t>> find_overlap(const std::vector<Span>& spans);
// Checks the spans against the global shape: one per locality, each inside
// the array; with `must_cover`, every element of the array lies in some span.
// Throws ValueError naming `op` and the offending span or element.
void check_spans(const Shape& shape, const std::vector<Span>& spans, bool must_cover, const char* op);

}  // namespace tessera
