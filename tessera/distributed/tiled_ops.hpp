// What the tiled-array primitives (tiled_ops.cpp) share with the tiled
// overloads of the ordinary primitives (tiled_overloads.cpp): boxes of the
// global index space, making tiled values, and reading their tilings. Every
// function here is local (no communication) and gives the same answer on
// every locality for the same metadata.
#pragma once

#include <string>
#include <vector>

#include "tessera/core/tiled.hpp"
#include "tessera/core/value.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/future.hpp"

namespace tessera::distributed::detail {

// The elements two spans share (an empty span when none).
Span intersect(const Span& a, const Span& b);
// True when every element of `inner` lies in `outer` (an empty inner always does).
bool contains(const Span& outer, const Span& inner);
// "locality 0 [0:4, 0:3], locality 1 [4:7, 0:3]", for messages.
std::string spans_str(const std::vector<Span>& spans);
// True when no element lies in two spans.
bool is_partition(const Spans& spans);
// The first two spans that share elements, described, or "" when none do.
std::string first_overlap(const Spans& spans);

// Copies the elements of `box` (global coordinates) from `src`, whose first
// element sits at global position `src_origin`, into `dst`, whose first
// element sits at `dst_origin` (one dtype; runs along the last axis at once).
void copy_box(const Array& src, const std::vector<int64_t>& src_origin, Array& dst,
              const std::vector<int64_t>& dst_origin, const Span& box);
// The part `box` of `tile` (which holds `tile_span`), as an array of its own.
Array extract(const Array& tile, const Span& tile_span, const Span& box);

// This locality's tiled array over group `group` (0: every locality; the
// spans are one per member); checks that the tile fits its span.
TiledArray make_tiled(Array tile, Shape shape, Spans spans, std::string tiling, int group);
// The group a tiled array (or a tiled operation's group argument) runs among.
GroupInfo group_of(const TiledArray& t);
// Throws ValueError naming `op` when tiled arguments i and j of `a` are tiled
// over different groups (a collective among the members of one cannot
// include the other's).
void check_same_group(Args& a, size_t i, size_t j);
// Argument i, which must be a tiled array (TypeError otherwise).
const TiledArray& tiled_arg(Args& a, size_t i);

// The axes `t` is tiled along: the axis of a named tiling ('rows': 0,
// 'columns': 1, 'pages': 0), even when one locality holds it all, so that
// results have the same kind for any number of localities; for spans, the
// axes along which some span is not whole.
std::vector<int> tiled_axes(const TiledArray& t);
// True when every locality holds the whole array by intent: tiling
// 'replicated', or spans that are all whole.
bool acts_replicated(const TiledArray& t);
// True when the two are tiled alike: the same spans, and the same tiling
// name unless one is given by spans.
bool same_layout(const TiledArray& a, const TiledArray& b);
// The name of a tiling by one axis once that axis is axis `axis` of an array
// of `ndim` dimensions (rows become columns in a transpose); other names stay.
std::string moved_name(const std::string& name, int axis, int ndim);

// x with its axes permuted by `perm`, each tile transposed and the spans
// with it; no communication.
Value permuted(const TiledArray& x, const std::vector<int>& perm);
// nd-1, ..., 0.
std::vector<int> reversed_axes(int nd);

// numpy.dot of the 1-d or 2-d arguments 0 and 1 of `a`, one or both tiled
// (dot_d, and matmul/dot given tiled arrays); errors name `op`.
Future<Value> dot_tiled(Args& a, const char* op);

}  // namespace tessera::distributed::detail
