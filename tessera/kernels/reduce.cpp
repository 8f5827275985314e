#include "tessera/kernels/reduce.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace tessera::kernels {

ReducePlan make_reduce_plan(const Shape& shape, const std::vector<int>& axes, bool keepdims) {
  ReducePlan plan;
  const size_t nd = shape.size();
  std::vector<bool> reduced(nd, false);
  for (int a : axes) reduced[static_cast<size_t>(a)] = true;
  std::vector<int64_t> strides = contiguous_strides(shape);
  // -1: no dim seen yet, 0: last non-trivial dim kept, 1: last one reduced.
  int last_kind = -1;
  for (size_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      if (keepdims) plan.out_shape.push_back(1);
      plan.inner *= shape[d];
    } else {
      plan.out_shape.push_back(shape[d]);
      plan.outer *= shape[d];
    }
    if (shape[d] == 1) continue;
    auto& dims = reduced[d] ? plan.inner_dims : plan.outer_dims;
    auto& strd = reduced[d] ? plan.inner_strides : plan.outer_strides;
    int kind = reduced[d] ? 1 : 0;
    // Neighbouring dims of one kind form one dim of a contiguous array.
    if (kind == last_kind) {
      dims.back() *= shape[d];
      strd.back() = strides[d];
    } else {
      dims.push_back(shape[d]);
      strd.push_back(strides[d]);
    }
    last_kind = kind;
  }
  return plan;
}

int64_t lane_offset(const ReducePlan& plan, int64_t o) {
  int64_t off = 0;
  for (size_t d = plan.outer_dims.size(); d-- > 0;) {
    off += (o % plan.outer_dims[d]) * plan.outer_strides[d];
    o /= plan.outer_dims[d];
  }
  return off;
}

namespace {

void collect_leaves(int64_t begin, int64_t n, std::vector<std::pair<int64_t, int64_t>>& out) {
  if (n <= kLeafSize) {
    out.emplace_back(begin, begin + n);
    return;
  }
  int64_t m = tree_split(n);
  collect_leaves(begin, m, out);
  collect_leaves(begin + m, n - m, out);
}

}  // namespace

std::vector<std::pair<int64_t, int64_t>> tree_leaves(int64_t n) {
  std::vector<std::pair<int64_t, int64_t>> out;
  collect_leaves(0, n, out);
  return out;
}

namespace {

// Pairwise sum of map(x) accumulated in Acc.
template <class T, class AccT, class Map>
struct SumReducer {
  using Acc = AccT;
  Map map;
  Acc leaf(const T* p, int64_t b, int64_t e) const { return pairwise_sum<Acc>(p + b, e - b, map); }
  Acc combine(const Acc& a, const Acc& b) const { return a + b; }
};

template <class T, class Acc, class Map>
SumReducer<T, Acc, Map> sum_reducer(Map map) {
  return SumReducer<T, Acc, Map>{map};
}

template <class T, class AccT, class Map>
struct ProdReducer {
  using Acc = AccT;
  Map map;
  Acc leaf(const T* p, int64_t b, int64_t e) const {
    Acc s = Acc(1);
    for (int64_t i = b; i < e; ++i) s *= map(p[i]);
    return s;
  }
  Acc combine(const Acc& a, const Acc& b) const { return a * b; }
};

// Minimum (or maximum) where the first NaN wins, as in NumPy.
template <class T, bool kMax>
struct ExtremeReducer {
  using Acc = T;
  static bool better(T a, T b) { return kMax ? a > b : a < b; }
  Acc leaf(const T* p, int64_t b, int64_t e) const {
    // A branch-free scan (which compilers vectorize); NaNs are looked for after.
    T best = p[b];
    bool nan = false;
    for (int64_t i = b; i < e; ++i) {
      nan |= is_nan(p[i]);
      best = better(p[i], best) ? p[i] : best;
    }
    if (nan) {
      for (int64_t i = b; i < e; ++i) {
        if (is_nan(p[i])) return p[i];
      }
    }
    return best;
  }
  Acc combine(const Acc& a, const Acc& b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    return better(b, a) ? b : a;
  }
};

template <class T>
struct ValueIndex {
  T value{};
  int64_t index = 0;
};

// Position of the first minimum (maximum); the first NaN wins.
template <class T, bool kMax>
struct ArgReducer {
  using Acc = ValueIndex<T>;
  static bool better(T a, T b) { return kMax ? a > b : a < b; }
  Acc leaf(const T* p, int64_t b, int64_t e) const {
    Acc best{p[b], b};
    for (int64_t i = b; i < e; ++i) {
      if (is_nan(p[i])) return {p[i], i};
      if (better(p[i], best.value)) best = {p[i], i};
    }
    return best;
  }
  Acc combine(const Acc& a, const Acc& b) const {
    if (is_nan(a.value)) return a;
    if (is_nan(b.value)) return b;
    return better(b.value, a.value) ? b : a;
  }
};

template <class T, bool kAll>
struct LogicalReducer {
  using Acc = bool;
  Acc leaf(const T* p, int64_t b, int64_t e) const {
    for (int64_t i = b; i < e; ++i) {
      bool nz = p[i] != T(0);
      if (kAll && !nz) return false;
      if (!kAll && nz) return true;
    }
    return kAll;
  }
  Acc combine(const Acc& a, const Acc& b) const { return kAll ? (a && b) : (a || b); }
};

// Counts elements that are nonzero (kNotNan false) or that are not NaN (true).
template <class T, bool kNotNan>
struct CountReducer {
  using Acc = int64_t;
  Acc leaf(const T* p, int64_t b, int64_t e) const {
    int64_t c = 0;
    for (int64_t i = b; i < e; ++i) c += kNotNan ? !is_nan(p[i]) : (p[i] != T(0));
    return c;
  }
  Acc combine(const Acc& a, const Acc& b) const { return a + b; }
};

// The floating type a statistic of T is computed in (float32 stays float32).
template <class T>
using FloatOf = std::conditional_t<std::is_same_v<T, float>, float, double>;

template <class T, class Out>
Out median_of(const T* p, int64_t n, LaneBuffer<T>& scratch) {
  using C = std::conditional_t<std::is_floating_point_v<Out>, Out, double>;
  if (n == 0) return element_cast<Out>(std::numeric_limits<C>::quiet_NaN());
  T* v = scratch.get(n);
  for (int64_t i = 0; i < n; ++i) {
    if (is_nan(p[i])) return element_cast<Out>(static_cast<C>(p[i]));
    v[i] = p[i];
  }
  T* mid = v + n / 2;
  std::nth_element(v, mid, v + n);
  C hi = static_cast<C>(*mid);
  if (n % 2 == 1) return element_cast<Out>(hi);
  C lo = static_cast<C>(*std::max_element(v, mid));
  return element_cast<Out>((lo + hi) / C(2));
}

// Columns summed at once by pairwise_columns: a few cache lines of each row.
constexpr int64_t kColumns = 64;

// pairwise_sum of map(x) down each of cols <= kColumns columns at once, into
// out: element i of column c is p[i * stride + c]. Every column takes exactly
// pairwise_sum's additions in its order (each scalar operation becomes one
// across the columns, which vectorises), so its sum has the bits of its lane's.
template <class Acc, class T, class Map>
void pairwise_columns(const T* p, int64_t n, int64_t stride, int64_t cols, const Map& map,
                      Acc* out) {
  if (n < 8) {
    std::fill(out, out + cols, Acc(0));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t c = 0; c < cols; ++c) out[c] += map(p[i * stride + c]);
    }
    return;
  }
  if (n <= 128) {
    Acc r[8][kColumns];
    for (int j = 0; j < 8; ++j) {
      for (int64_t c = 0; c < cols; ++c) r[j][c] = map(p[j * stride + c]);
    }
    int64_t i = 8;
    for (; i + 8 <= n; i += 8) {
      for (int j = 0; j < 8; ++j) {
        const T* row = p + (i + j) * stride;
        for (int64_t c = 0; c < cols; ++c) r[j][c] += map(row[c]);
      }
    }
    for (int64_t c = 0; c < cols; ++c) {
      out[c] = ((r[0][c] + r[1][c]) + (r[2][c] + r[3][c])) +
               ((r[4][c] + r[5][c]) + (r[6][c] + r[7][c]));
    }
    for (; i < n; ++i) {
      for (int64_t c = 0; c < cols; ++c) out[c] += map(p[i * stride + c]);
    }
    return;
  }
  int64_t m = n / 2;
  m -= m % 8;
  Acc right[kColumns];
  pairwise_columns(p, m, stride, cols, map, out);
  pairwise_columns(p + m * stride, n - m, stride, cols, map, right);
  for (int64_t c = 0; c < cols; ++c) out[c] += right[c];
}

// True when the lanes of a reduction are columns: one strided reduced dim,
// neighbouring output elements neighbours in memory (the sum over the rows of
// a matrix, a bias's gradient over (batch, steps, features)). Long lanes are
// left to reduce_lane, which computes their leaves in parallel.
bool column_lanes(const ReducePlan& plan, const LeafRunner* run) {
  return plan.inner_dims.size() == 1 && plan.inner_strides[0] != 1 &&
         !plan.outer_dims.empty() && plan.outer_strides.back() == 1 &&
         (run == nullptr || plan.inner <= 4 * kLeafSize);
}

// sum, nansum and mean of output elements [begin, end) of a column_lanes
// plan, kColumns lanes at a time.
template <class T, class Out>
void reduce_columns(ReduceKind kind, const T* data, const ReducePlan& plan, Out* dst,
                    int64_t begin, int64_t end) {
  using Acc = AccOf<Out>;
  using C = std::conditional_t<std::is_floating_point_v<Out>, Out, double>;
  const int64_t n = plan.inner, stride = plan.inner_strides[0];
  const int64_t row = plan.outer_dims.back();
  Acc acc[kColumns];
  C mean[kColumns];
  for (int64_t o = begin; o < end;) {
    const int64_t cols = std::min({end - o, row - o % row, kColumns});
    const T* base = data + lane_offset(plan, o);
    if (kind == ReduceKind::mean) {
      pairwise_columns<C>(base, n, stride, cols, [](T x) { return static_cast<C>(x); }, mean);
      for (int64_t c = 0; c < cols; ++c) {
        dst[o + c] = element_cast<Out>(mean[c] / static_cast<C>(n));
      }
    } else {
      if (kind == ReduceKind::sum) {
        pairwise_columns<Acc>(
            base, n, stride, cols, [](T x) { return static_cast<Acc>(element_cast<Out>(x)); }, acc);
      } else {
        pairwise_columns<Acc>(
            base, n, stride, cols,
            [](T x) { return is_nan(x) ? Acc(0) : static_cast<Acc>(element_cast<Out>(x)); }, acc);
      }
      for (int64_t c = 0; c < cols; ++c) dst[o + c] = static_cast<Out>(acc[c]);
    }
    o += cols;
  }
}

template <class T, class Out>
void reduce_typed(ReduceKind kind, const Array& in, const ReducePlan& plan, Array& out,
                  int64_t begin, int64_t end, const ReduceOptions& opts, const LeafRunner* run) {
  const T* data = in.data<T>();
  Out* dst = out.data<Out>();
  const int64_t n = plan.inner;
  if ((kind == ReduceKind::sum || kind == ReduceKind::nansum || kind == ReduceKind::mean) &&
      column_lanes(plan, run)) {
    reduce_columns(kind, data, plan, dst, begin, end);
    return;
  }
  LaneBuffer<T> buf, scratch;
  using Acc = AccOf<Out>;
  // Statistics are computed in a floating type even when a dtype asks for ints.
  using C = std::conditional_t<std::is_floating_point_v<Out>, Out, double>;
  const T* block = nullptr;
  int64_t block_begin = 0, block_end = 0;
  for (int64_t o = begin; o < end; ++o) {
    if (o >= block_end) {
      block_begin = o;
      block_end = o + lane_block_size(plan, o, end);
      block = lane_block(plan, data, o, block_end - block_begin, buf);
    }
    const T* p = block + (o - block_begin) * n;
    switch (kind) {
      case ReduceKind::sum:
        dst[o] = static_cast<Out>(reduce_lane(
            sum_reducer<T, Acc>([](T x) { return static_cast<Acc>(element_cast<Out>(x)); }), p, n,
            run));
        break;
      case ReduceKind::nansum:
        dst[o] = static_cast<Out>(reduce_lane(sum_reducer<T, Acc>([](T x) {
                                                return is_nan(x)
                                                           ? Acc(0)
                                                           : static_cast<Acc>(element_cast<Out>(x));
                                              }),
                                              p, n, run));
        break;
      case ReduceKind::prod: {
        auto map = [](T x) { return static_cast<Acc>(element_cast<Out>(x)); };
        dst[o] = static_cast<Out>(reduce_lane(ProdReducer<T, Acc, decltype(map)>{map}, p, n, run));
        break;
      }
      case ReduceKind::mean:
      case ReduceKind::var: {
        C s = reduce_lane(sum_reducer<T, C>([](T x) { return static_cast<C>(x); }), p, n, run);
        C mean = s / static_cast<C>(n);
        if (kind == ReduceKind::mean) {
          dst[o] = element_cast<Out>(mean);
          break;
        }
        C sq = reduce_lane(sum_reducer<T, C>([mean](T x) {
                             C d = static_cast<C>(x) - mean;
                             return d * d;
                           }),
                           p, n, run);
        C v = sq / static_cast<C>(std::max(static_cast<double>(n) - opts.ddof, 0.0));
        dst[o] = element_cast<Out>(opts.sqrt ? std::sqrt(v) : v);
        break;
      }
      case ReduceKind::nanmean: {
        C s = reduce_lane(
            sum_reducer<T, C>([](T x) { return is_nan(x) ? C(0) : static_cast<C>(x); }), p, n, run);
        int64_t cnt = reduce_lane(CountReducer<T, true>{}, p, n, run);
        dst[o] = element_cast<Out>(s / static_cast<C>(cnt));
        break;
      }
      case ReduceKind::logsumexp: {
        C m = n == 0 ? C(0) : static_cast<C>(reduce_lane(ExtremeReducer<T, true>{}, p, n, run));
        // Shift by the maximum so exp cannot overflow; infinities need no shift.
        C shift = std::isfinite(m) ? m : C(0);
        C s = reduce_lane(
            sum_reducer<T, C>([shift](T x) { return std::exp(static_cast<C>(x) - shift); }), p, n,
            run);
        dst[o] = element_cast<Out>(std::log(s) + shift);
        break;
      }
      case ReduceKind::median:
        dst[o] = median_of<T, Out>(p, n, scratch);
        break;
      case ReduceKind::min:
        dst[o] = static_cast<Out>(reduce_lane(ExtremeReducer<T, false>{}, p, n, run));
        break;
      case ReduceKind::max:
        dst[o] = static_cast<Out>(reduce_lane(ExtremeReducer<T, true>{}, p, n, run));
        break;
      case ReduceKind::ptp: {
        T lo = reduce_lane(ExtremeReducer<T, false>{}, p, n, run);
        T hi = reduce_lane(ExtremeReducer<T, true>{}, p, n, run);
        if constexpr (std::is_floating_point_v<T>) {
          dst[o] = static_cast<Out>(hi - lo);
        } else {
          // Wraps like NumPy's int64 subtraction.
          dst[o] = static_cast<Out>(static_cast<uint64_t>(hi) - static_cast<uint64_t>(lo));
        }
        break;
      }
      case ReduceKind::argmin:
        dst[o] = static_cast<Out>(reduce_lane(ArgReducer<T, false>{}, p, n, run).index);
        break;
      case ReduceKind::argmax:
        dst[o] = static_cast<Out>(reduce_lane(ArgReducer<T, true>{}, p, n, run).index);
        break;
      case ReduceKind::all:
        dst[o] = static_cast<Out>(reduce_lane(LogicalReducer<T, true>{}, p, n, run));
        break;
      case ReduceKind::any:
        dst[o] = static_cast<Out>(reduce_lane(LogicalReducer<T, false>{}, p, n, run));
        break;
      case ReduceKind::count_nonzero:
        dst[o] = static_cast<Out>(reduce_lane(CountReducer<T, false>{}, p, n, run));
        break;
    }
  }
}

}  // namespace

DType reduce_result_dtype(ReduceKind kind, DType in) {
  switch (kind) {
    case ReduceKind::sum:
    case ReduceKind::prod:
    case ReduceKind::nansum:
      return is_floating(in) ? in : DType::int64;
    case ReduceKind::mean:
    case ReduceKind::nanmean:
    case ReduceKind::var:
    case ReduceKind::logsumexp:
    case ReduceKind::median:
      return is_floating(in) ? in : DType::float64;
    case ReduceKind::min:
    case ReduceKind::max:
    case ReduceKind::ptp:
      return in;
    case ReduceKind::all:
    case ReduceKind::any:
      return DType::bool_;
    case ReduceKind::argmin:
    case ReduceKind::argmax:
    case ReduceKind::count_nonzero:
      return DType::int64;
  }
  return in;
}

void reduce_range(ReduceKind kind, const Array& in, const ReducePlan& plan, Array& out,
                  int64_t begin, int64_t end, const ReduceOptions& opts, const LeafRunner* run) {
  dispatch(in.dtype(), [&](auto in_tag) {
    using T = typename decltype(in_tag)::type;
    dispatch(out.dtype(), [&](auto out_tag) {
      using Out = typename decltype(out_tag)::type;
      reduce_typed<T, Out>(kind, in, plan, out, begin, end, opts, run);
    });
  });
}

namespace {

// lane(reducer) with the reducer of `kind` (reduce_typed's for these kinds),
// the mean's division after it.
template <class T, class Lane>
T with_produced_reducer(ReduceKind kind, int64_t n, const Lane& lane) {
  auto same = [](T x) { return x; };
  switch (kind) {
    case ReduceKind::sum:
      return lane(sum_reducer<T, T>(same));
    case ReduceKind::mean:
      return lane(sum_reducer<T, T>(same)) / static_cast<T>(n);
    case ReduceKind::prod:
      return lane(ProdReducer<T, T, decltype(same)>{same});
    case ReduceKind::min:
      return lane(ExtremeReducer<T, false>{});
    case ReduceKind::max:
      return lane(ExtremeReducer<T, true>{});
    default:
      throw std::logic_error("[reduce] internal error: not a produced reduction");
  }
}

// One lane's reduction with leaf_of(reducer, b, e) giving the reducer's value
// of the lane's elements [b, e).
template <class T, class Leaf>
T produced_lane(ReduceKind kind, int64_t n, const Leaf& leaf_of) {
  return with_produced_reducer<T>(kind, n, [&](auto reducer) {
    using R = decltype(reducer);
    struct Wrapped {
      const R& r;
      const Leaf& leaf_of;
      using Acc = typename R::Acc;
      Acc leaf(const T*, int64_t b, int64_t e) const { return leaf_of(r, b, e); }
      Acc combine(const Acc& a, const Acc& b) const { return r.combine(a, b); }
    } w{reducer, leaf_of};
    return reduce_tree(w, static_cast<const T*>(nullptr), 0, n);
  });
}

template <class T>
void reduce_produced_typed(ReduceKind kind, const ValueProducer& produce, int64_t n, T* dst,
                           int64_t begin, int64_t end, const LeafRunner* run) {
  // The thread's buffer: at most one leaf of the tree (kLeafSize values), or
  // a block of whole lanes that short.
  static thread_local std::vector<T> buf;
  if (n <= kLeafSize) {
    // Each lane is one leaf: lanes in blocks of about kLeafSize values.
    const int64_t per = std::max<int64_t>(1, kLeafSize / n);
    for (int64_t o = begin; o < end; o += per) {
      const int64_t count = std::min(per, end - o);
      buf.resize(static_cast<size_t>(count * n));
      produce(o * n, (o + count) * n, buf.data());
      for (int64_t j = 0; j < count; ++j) {
        const T* lane = buf.data() + j * n;
        dst[o + j] = produced_lane<T>(kind, n, [lane](const auto& r, int64_t b, int64_t e) {
          return r.leaf(lane, b, e);
        });
      }
    }
    return;
  }
  // Long lanes: each leaf produced on its own (in parallel with a runner,
  // as reduce_lane computes a long lane's leaves), then the tree combined.
  for (int64_t o = begin; o < end; ++o) {
    const int64_t base = o * n;
    auto leaf_value = [&](const auto& r, int64_t b, int64_t e) {
      std::vector<T>& mine = buf;  // this thread's
      mine.resize(static_cast<size_t>(e - b));
      produce(base + b, base + e, mine.data());
      return r.leaf(mine.data(), 0, e - b);
    };
    if (run == nullptr || n <= 4 * kLeafSize) {
      dst[o] = produced_lane<T>(kind, n, leaf_value);
      continue;
    }
    const auto leaves = tree_leaves(n);
    std::vector<T> parts(leaves.size());
    // The leaves' values (a leaf's reduction is all that depends on its
    // elements), then the same tree over them.
    auto one = [&](auto reducer) {
      (*run)(static_cast<int64_t>(leaves.size()), [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          parts[i] = leaf_value(reducer, leaves[i].first, leaves[i].second);
        }
      });
      size_t next = 0;
      return combine_tree(reducer, parts, n, next);
    };
    dst[o] = with_produced_reducer<T>(kind, n, one);
  }
}

}  // namespace

void reduce_produced(ReduceKind kind, const ValueProducer& produce, int64_t n, Array& out,
                     int64_t begin, int64_t end, const LeafRunner* run) {
  if (out.dtype() == DType::float64) {
    reduce_produced_typed<double>(kind, produce, n, out.data<double>(), begin, end, run);
  } else if (out.dtype() == DType::float32) {
    reduce_produced_typed<float>(kind, produce, n, out.data<float>(), begin, end, run);
  } else {
    throw std::logic_error("[reduce] internal error: a produced reduction of a non-float dtype");
  }
}

void scan_columns(bool product, const Array& in, Array& out, int64_t n, int64_t inner, int64_t ob,
                  int64_t j0, int64_t j1) {
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = AccOf<T>;
    const T* s = in.data<T>() + ob * n * inner;
    T* d = out.data<T>() + ob * n * inner;
    if (n == 0) return;
    for (int64_t j = j0; j < j1; ++j) d[j] = s[j];
    for (int64_t i = 1; i < n; ++i) {
      const T* prev = d + (i - 1) * inner;
      const T* cur = s + i * inner;
      T* o = d + i * inner;
      for (int64_t j = j0; j < j1; ++j) {
        Acc a = static_cast<Acc>(prev[j]), b = static_cast<Acc>(cur[j]);
        o[j] = static_cast<T>(product ? a * b : a + b);
      }
    }
  });
}

void scan_range(bool product, const Array& in, Array& out, int64_t n, int64_t inner, int64_t begin,
                int64_t end) {
  dispatch(out.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using Acc = AccOf<T>;
    const T* src = in.data<T>();
    T* dst = out.data<T>();
    for (int64_t ob = begin; ob < end; ++ob) {
      const T* s = src + ob * n * inner;
      T* d = dst + ob * n * inner;
      if (n == 0) continue;
      if (inner == 1) {
        Acc acc = static_cast<Acc>(s[0]);
        d[0] = s[0];
        for (int64_t i = 1; i < n; ++i) {
          Acc b = static_cast<Acc>(s[i]);
          acc = static_cast<Acc>(static_cast<T>(product ? acc * b : acc + b));
          d[i] = static_cast<T>(acc);
        }
        continue;
      }
      for (int64_t j = 0; j < inner; ++j) d[j] = s[j];
      for (int64_t i = 1; i < n; ++i) {
        const T* prev = d + (i - 1) * inner;
        const T* cur = s + i * inner;
        T* o = d + i * inner;
        for (int64_t j = 0; j < inner; ++j) {
          Acc a = static_cast<Acc>(prev[j]), b = static_cast<Acc>(cur[j]);
          o[j] = static_cast<T>(product ? a * b : a + b);
        }
      }
    }
  });
}

}  // namespace tessera::kernels
