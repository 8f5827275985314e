// Matrix primitives: products (matmul, dot, vdot, inner, outer, tensordot,
// kron), trace, norm, and the LU-based det, inv, solve and matrix_power.
//
// Products promote their operands to one dtype, reduce every case to batched
// 2-d products, and cut the output rows (over the whole batch) into tiles with
// parallel_for, so each BLAS call is single-threaded on its tile.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/linalg.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

namespace {

namespace kn = kernels;

// A numeric argument: Python-like scalars stay scalars (they promote weakly),
// nested lists become arrays, anything else is a TypeError naming the parameter.
Value numeric_arg(const Args& args, size_t i) {
  const Value& v = args[i];
  if (v.is_scalar() || v.is_array()) return v;
  return Value(args.array(i));
}

// Estimated nanoseconds to compute one output row of an (m, k) x (k, n) product.
double row_cost_ns(DType dt, int64_t k, int64_t n) {
  double per_fma = dt == DType::float32 ? 0.04 : dt == DType::float64 ? 0.08 : 0.6;
  return std::max(1.0, per_fma * static_cast<double>(k) * static_cast<double>(n));
}

// NumPy's broadcast of two batch shapes; false when they are incompatible.
bool broadcast_shapes(const Shape& x, const Shape& y, Shape& out) {
  size_t nd = std::max(x.size(), y.size());
  out.assign(nd, 1);
  for (size_t i = 0; i < nd; ++i) {
    int64_t dx = i < nd - x.size() ? 1 : x[i - (nd - x.size())];
    int64_t dy = i < nd - y.size() ? 1 : y[i - (nd - y.size())];
    if (dx != dy && dx != 1 && dy != 1) return false;
    out[i] = dx == 1 ? dy : dx;
  }
  return true;
}

// The offset of each index of `batch` (row-major order) when axis k advances
// the offset by stride[k] (0 along broadcast axes).
std::vector<int64_t> walk_offsets(const Shape& batch, const std::vector<int64_t>& stride) {
  const size_t nd = batch.size();
  std::vector<int64_t> offsets(static_cast<size_t>(shape_size(batch)));
  std::vector<int64_t> idx(nd, 0);
  int64_t off = 0;
  for (size_t b = 0; b < offsets.size(); ++b) {
    offsets[b] = off;
    for (size_t ax = nd; ax-- > 0;) {
      if (++idx[ax] < batch[ax]) {
        off += stride[ax];
        break;
      }
      off -= stride[ax] * (batch[ax] - 1);
      idx[ax] = 0;
    }
  }
  return offsets;
}

// Element offsets, for each index of the broadcast `batch` shape, of the matrix
// of an array whose batch dims are `own` (right-aligned) and matrices hold
// `matrix_size` elements.
std::vector<int64_t> batch_offsets(const Shape& own, const Shape& batch, int64_t matrix_size) {
  const size_t nd = batch.size();
  std::vector<int64_t> stride(nd, 0);
  int64_t s = matrix_size;
  for (size_t i = own.size(); i-- > 0;) {
    size_t bi = i + (nd - own.size());
    stride[bi] = own[i] == 1 ? 0 : s;
    s *= own[i];
  }
  return walk_offsets(batch, stride);
}

Shape leading(const Shape& s, size_t drop) { return Shape(s.begin(), s.end() - drop); }

Shape concat(Shape a, const Shape& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// A large operand not aligned to 64 bytes (a NumPy buffer is aligned to 16) as
// an aligned copy, when it is reused `reuse` times by the product (the other
// operand's free dimension): BLAS tiles running concurrently on unaligned
// operands of a matrix-matrix product ran at half speed, and there the copy
// is cheap next to the product. A matrix-vector product reads each element
// once, so it never copies.
Array aligned_operand(const Array& a, int64_t reuse) {
  constexpr size_t kLarge = size_t{1} << 20;
  constexpr int64_t kMinReuse = 32;
  if (reuse >= kMinReuse && a.nbytes() >= kLarge &&
      reinterpret_cast<uintptr_t>(a.raw()) % 64 != 0) {
    return a.copy();
  }
  return a;
}

// An operand's last two axes as BLAS can read them in place, strides in
// elements: one stride 1 and the other at least the extent it steps over (an
// axis of length 1 may have any stride). Null for any other view (broadcast,
// reversed or doubly strided axes), which is packed instead.
std::optional<kn::BlasMatrix> blas_matrix(const Array& a) {
  const int nd = a.ndim();
  const int64_t rows = a.shape()[nd - 2], cols = a.shape()[nd - 1];
  std::vector<int64_t> st = a.strides();
  int64_t rs = st[nd - 2], cs = st[nd - 1];
  if (cols <= 1) cs = 1;
  if (rows <= 1) rs = std::max<int64_t>(cols, 1);
  const bool row_major = cs == 1 && rs >= std::max<int64_t>(cols, 1);
  const bool transposed = rs == 1 && cs >= std::max<int64_t>(rows, 1);
  if (!row_major && !transposed) return std::nullopt;
  return kn::BlasMatrix{a.origin_raw(), rs, cs};
}

// The element offset of each matrix of a (strided) array in the broadcast
// batch `batch`, from its own leading axes' strides (0 along broadcast axes).
std::vector<int64_t> view_batch_offsets(const Array& a, const Shape& batch) {
  const size_t own = static_cast<size_t>(a.ndim() - 2), nd = batch.size();
  const std::vector<int64_t> st = a.strides();
  std::vector<int64_t> stride(nd, 0);
  for (size_t i = 0; i < own; ++i) {
    if (a.shape()[i] != 1) stride[i + (nd - own)] = st[i];
  }
  return walk_offsets(batch, stride);
}

// As few tiles as there are threads (or fewer, by the work): each BLAS call
// packs all of B, so 8 tiles on 2 threads packed it 8 times and ran slower
// than one thread. Rows are split evenly, the same for any thread count in
// deterministic mode (each element's sum runs in the same order anyway).
int64_t row_chunks(DType dt, int64_t total_rows, int64_t k, int64_t n) {
  const int64_t by_work =
      static_cast<int64_t>(static_cast<double>(total_rows) * row_cost_ns(dt, k, n) / kMinTaskNs);
  const int64_t threads = deterministic_tiling() ? kDeterministicThreads : num_threads();
  return std::clamp<int64_t>(std::min(by_work, threads), 1, total_rows);
}

// Tiles of a product with a vector on tessera's own kernels (whose bits do not
// depend on the tiles): up to four per thread, each at least kMinTaskNs of
// work. A tile re-reads only the vector, and a helper that wakes late still
// finds tiles to take (with one tile per thread, the caller computed the late
// helper's tile too, at one thread's speed).
int64_t vector_chunks(DType dt, int64_t units, int64_t k) {
  const int64_t by_work = static_cast<int64_t>(static_cast<double>(units) *
                                               row_cost_ns(dt, k, 1) / kMinTaskNs);
  const int64_t threads = deterministic_tiling() ? kDeterministicThreads : num_threads();
  return std::clamp<int64_t>(std::min(by_work, 4 * threads), 1, units);
}

// C = A B for float32/float64 operands read in place through their strides
// (transposed and sliced views are not copied: BLAS's transpose flags). When
// every matrix of the batch meets the same B and A's matrices follow each
// other row after row (a dense layer on (batch, steps, features)), the batch
// is one tall product: B is packed once instead of once per matrix.
Array batched_product_float(const Array& a0, const Array& b0, const Shape& batch,
                            Array out) {
  const DType dt = a0.dtype();
  std::optional<kn::BlasMatrix> ma = blas_matrix(a0), mb = blas_matrix(b0);
  const Array a = ma ? a0 : a0.contiguous(), b = mb ? b0 : b0.contiguous();
  if (!ma) ma = blas_matrix(a);
  if (!mb) mb = blas_matrix(b);
  const int64_t m = a.shape()[a.ndim() - 2], k = a.shape()[a.ndim() - 1];
  const int64_t n = b.shape()[b.ndim() - 1];
  std::vector<int64_t> a_off = view_batch_offsets(a, batch);
  std::vector<int64_t> b_off = view_batch_offsets(b, batch);
  int64_t rows_per = m;
  const bool shared_b = std::all_of(b_off.begin(), b_off.end(), [](int64_t o) { return o == 0; });
  bool stacked = shared_b && a_off.size() > 1 && ma->col_stride == 1;
  for (size_t i = 0; stacked && i < a_off.size(); ++i) {
    stacked = a_off[i] == static_cast<int64_t>(i) * m * ma->row_stride;
  }
  if (stacked) {
    rows_per = m * static_cast<int64_t>(a_off.size());
    a_off.assign(1, 0);
    b_off.assign(1, 0);
  }
  const size_t es = dtype_size(dt);
  const char* pa = static_cast<const char*>(ma->data);
  const char* pb = static_cast<const char*>(mb->data);
  char* pc = static_cast<char*>(out.raw());
  const int64_t total_rows = static_cast<int64_t>(a_off.size()) * rows_per;
  if (total_rows == 1 && n > 1 && kn::vector_matrix_splits(dt, ma->col_stride, *mb)) {
    // x @ B: one row, cut into column tiles instead (each column's sum runs
    // in the same order in any tile).
    const int64_t chunks = vector_chunks(dt, n, k);
    parallel_for(chunks, kMinTaskNs * 4, [&](int64_t c0, int64_t c1) {
      kn::vector_matrix_cols(dt, pa, ma->col_stride, *mb, pc, k, n * c0 / chunks,
                             n * c1 / chunks);
    });
    return out;
  }
  const bool own_kernel = n == 1 && kn::vector_matrix_splits(dt, mb->row_stride, *ma);
  const int64_t chunks =
      own_kernel ? vector_chunks(dt, total_rows, k) : row_chunks(dt, total_rows, k, n);
  parallel_for(chunks, kMinTaskNs * 4, [&](int64_t c0, int64_t c1) {
    const int64_t begin = total_rows * c0 / chunks, end = total_rows * c1 / chunks;
    for (int64_t r = begin; r < end;) {
      int64_t bi = r / rows_per, row = r % rows_per;
      int64_t row_end = std::min(rows_per, row + (end - r));
      kn::matmul_rows_strided(dt, {pa + a_off[bi] * es, ma->row_stride, ma->col_stride},
                              {pb + b_off[bi] * es, mb->row_stride, mb->col_stride},
                              pc + bi * rows_per * n * es, k, n, row, row_end);
      r += row_end - row;
    }
  });
  return out;
}

// C = A B for a (batch_a..., m, k) and b (batch_b..., k, n) of one dtype whose
// batch dims broadcast to `batch`; the result is (batch..., m, n). Float
// operands may be strided views; other dtypes are packed.
Array batched_product(const Array& a_in, const Array& b_in, const Shape& batch, const char* op) {
  const DType dt = a_in.dtype();
  const bool blas = dt == DType::float32 || dt == DType::float64;
  const Array a0 = blas ? a_in : a_in.contiguous(), b0 = blas ? b_in : b_in.contiguous();
  const Array a = a0.is_contiguous() ? aligned_operand(a0, b0.shape()[b0.ndim() - 1]) : a0;
  const Array b = b0.is_contiguous() ? aligned_operand(b0, a0.shape()[a0.ndim() - 2]) : b0;
  const int64_t m = a.shape()[a.ndim() - 2], k = a.shape()[a.ndim() - 1];
  const int64_t n = b.shape()[b.ndim() - 1];
  Shape out_shape = concat(batch, {m, n});
  shape_size(out_shape, op);  // a MemoryError naming the op, before allocating
  Array out(dt, out_shape);
  if (out.size() == 0) return out;
  if (blas) return batched_product_float(a, b, batch, std::move(out));
  std::vector<int64_t> a_off = batch_offsets(leading(a.shape(), 2), batch, m * k);
  std::vector<int64_t> b_off = batch_offsets(leading(b.shape(), 2), batch, k * n);
  const size_t es = dtype_size(dt);
  const char* pa = static_cast<const char*>(a.raw());
  const char* pb = static_cast<const char*>(b.raw());
  char* pc = static_cast<char*>(out.raw());
  const int64_t total_rows = static_cast<int64_t>(a_off.size()) * m;
  const int64_t chunks = row_chunks(dt, total_rows, k, n);
  parallel_for(chunks, kMinTaskNs * 4, [&](int64_t c0, int64_t c1) {
    const int64_t begin = total_rows * c0 / chunks, end = total_rows * c1 / chunks;
    // A tile may span several matrices of the batch: one kernel call per matrix.
    for (int64_t r = begin; r < end;) {
      int64_t bi = r / m, row = r % m;
      int64_t row_end = std::min(m, row + (end - r));
      kn::matmul_rows(dt, pa + a_off[bi] * es, pb + b_off[bi] * es, pc + bi * m * n * es, k, n, row,
                      row_end);
      r += row_end - row;
    }
  });
  return out;
}

// A 2-d product (p, k) x (k, q) of one dtype.
Array product_2d(const Array& a, const Array& b, const char* op) {
  return batched_product(a, b, {}, op);
}

[[noreturn]] void not_aligned(const char* op, const Shape& sa, const Shape& sb, int64_t ka, int da,
                              int64_t kb, int db) {
  throw std::invalid_argument(error_message("[", op, "] shapes ", shape_str(sa), " and ",
                                            shape_str(sb), " are not aligned: ", ka, " (dim ", da,
                                            ") != ", kb, " (dim ", db, ")"));
}

// The product of two Python-like scalars, itself a scalar (bool * bool is AND).
Value scalar_product(const Value& a, const Value& b) {
  if (a.is_float() || b.is_float()) {
    auto as_double = [](const Value& v) {
      return v.is_float() ? v.as_float() : v.is_int() ? double(v.as_int()) : double(v.as_bool());
    };
    return Value(as_double(a) * as_double(b));
  }
  if (a.is_bool() && b.is_bool()) return Value(a.as_bool() && b.as_bool());
  auto as_u = [](const Value& v) {
    return v.is_int() ? static_cast<uint64_t>(v.as_int()) : uint64_t(v.as_bool());
  };
  return Value(static_cast<int64_t>(as_u(a) * as_u(b)));
}

// Product of an array with a 0-d operand (dot, inner and kron of scalars).
Value scalar_case(const Value& va, const Value& vb, const char* op) {
  if (va.is_scalar() && vb.is_scalar()) return scalar_product(va, vb);
  DType dt = result_type(va, vb);
  Array a = to_array(va, op), b = to_array(vb, op);
  return a.ndim() == 0 ? kn::scale_by(b, a, dt) : kn::scale_by(a, b, dt);
}

// An operand as given: a strided view stays a view (batched_product reads
// float views in place and packs the others).
Array operand_view(const Value& v, const char* op) {
  return v.is_array() ? v.as_array() : to_array(v, op);
}

Value matmul(const Value& va, const Value& vb, const char* op) {
  Array a0 = operand_view(va, op), b0 = operand_view(vb, op);
  for (int i = 0; i < 2; ++i) {
    const Array& x = i == 0 ? a0 : b0;
    if (x.ndim() == 0) {
      throw std::invalid_argument(error_message(
          "[", op, "] operand ", i,
          " is 0-d (a scalar) but matmul needs arrays of at least 1 dimension: use multiply"));
    }
  }
  DType dt = result_type(va, vb);
  Array a = a0.astype(dt), b = b0.astype(dt);
  const bool a1 = a.ndim() == 1, b1 = b.ndim() == 1;
  if (a1) a = a.reshaped({1, a.shape()[0]});
  if (b1) b = b.reshaped({b.shape()[0], 1});
  int64_t ka = a.shape()[a.ndim() - 1], kb = b.shape()[b.ndim() - 2];
  if (ka != kb) {
    not_aligned(op, a0.shape(), b0.shape(), ka, a0.ndim() - 1, kb, b1 ? 0 : b0.ndim() - 2);
  }
  Shape batch;
  if (!broadcast_shapes(leading(a.shape(), 2), leading(b.shape(), 2), batch)) {
    throw std::invalid_argument(
        error_message("[", op, "] batch dimensions could not be broadcast together: shapes ",
                      shape_str(a0.shape()), " and ", shape_str(b0.shape())));
  }
  Array c = batched_product(a, b, batch, op);
  Shape out = batch;
  if (!a1) out.push_back(a.shape()[a.ndim() - 2]);
  if (!b1) out.push_back(b.shape()[b.ndim() - 1]);
  return c.reshaped(out);
}

// A tall a.T @ b (the weight gradient of a dense layer: x.T @ dy over every
// sample, k rows against a small p x n result) is cut along k as well as
// along the output's rows: each task computes a partial product over one
// chunk of k, and the partials are added in chunk order. Tiling only the
// small output would make every tile read and pack all of `b` (one thread's
// work spread over two gained nothing). The chunks depend on the shape alone,
// never on the thread count, so the bits do not either.
constexpr int64_t kSplitRows = 2048;  // rows of k per chunk, at least
constexpr int64_t kMaxSplits = 8;

// How many chunks of k a p x n product over k rows is cut into: 1 unless k
// is long next to p (then row tiles would each read all of b), and never so
// many that the partial products outweigh half the operands.
int64_t reduction_chunks(int64_t k, int64_t p, int64_t n) {
  if (k < p) return 1;
  int64_t chunks = std::min(k / kSplitRows, kMaxSplits);
  while (chunks > 1 && (chunks - 1) * p * n > k * (p + n) / 2) --chunks;
  return std::max<int64_t>(chunks, 1);
}

template <class T>
void add_partials(T* out, const std::vector<Array>& partial, int64_t begin, int64_t end) {
  for (const Array& part : partial) {
    const T* src = part.data<T>();
    for (int64_t i = begin; i < end; ++i) out[i] += src[i];
  }
}

// out = a.T @ b with a (k, p), b (k, n) contiguous, float32 or float64.
void product_tn(const Array& a, const Array& b, Array& out, int64_t k, int64_t p, int64_t n) {
  const DType dt = a.dtype();
  const size_t es = dtype_size(dt);
  const int64_t chunks = reduction_chunks(k, p, n);
  // Row tiles within each chunk, as many as it takes to give every thread a
  // task (see batched_product: each BLAS call packs all of its b).
  const int64_t threads = deterministic_tiling() ? kDeterministicThreads : num_threads();
  const double chunk_ns = row_cost_ns(dt, (k + chunks - 1) / chunks, n) * static_cast<double>(p);
  const int64_t by_work = static_cast<int64_t>(chunk_ns / kMinTaskNs);
  const int64_t row_tiles =
      std::clamp<int64_t>(std::min(by_work, (threads + chunks - 1) / chunks), 1, p);
  // Chunk 0 writes into out, the others into partial products.
  std::vector<Array> partial(static_cast<size_t>(chunks - 1));
  for (auto& part : partial) part = Array(dt, {p, n});
  const char* pa = static_cast<const char*>(a.raw());
  const char* pb = static_cast<const char*>(b.raw());
  parallel_for(chunks * row_tiles, kMinTaskNs * 4, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t c = t / row_tiles, tile = t % row_tiles;
      const int64_t r0 = k * c / chunks, r1 = k * (c + 1) / chunks;
      void* dst = c == 0 ? out.raw() : partial[c - 1].raw();
      kn::matmul_tn_rows(dt, pa + r0 * p * es, pb + r0 * n * es, dst, r1 - r0, p, n,
                         p * tile / row_tiles, p * (tile + 1) / row_tiles);
    }
  });
  if (chunks == 1) return;
  parallel_for(p * n, 0.5 * static_cast<double>(chunks), [&](int64_t begin, int64_t end) {
    if (dt == DType::float64) {
      add_partials(out.data<double>(), partial, begin, end);
    } else {
      add_partials(out.data<float>(), partial, begin, end);
    }
  });
}

// a.T @ b for a 2-d float `a` without copying the transpose; any other case
// is transpose + matmul, so results and errors are exactly matmul's.
Value matmul_tn(const Value& va, const Value& vb, const char* op) {
  if (va.is_array() && va.as_array().ndim() == 2 && vb.is_array() &&
      (vb.as_array().ndim() == 1 || vb.as_array().ndim() == 2)) {
    DType dt = result_type(va, vb);
    const Array& a0 = va.as_array();
    const Array& b0 = vb.as_array();
    const int64_t k = a0.shape()[0], p = a0.shape()[1];
    if (is_floating(dt) && b0.shape()[0] == k) {
      const int64_t cols = b0.ndim() == 1 ? 1 : b0.shape()[1];
      Array a = aligned_operand(a0.astype(dt), cols), b = aligned_operand(b0.astype(dt), p);
      const bool b1 = b.ndim() == 1;
      const int64_t n = b1 ? 1 : b.shape()[1];
      Array out(dt, b1 ? Shape{p} : Shape{p, n});
      if (out.size() == 0) return out;
      product_tn(a, b, out, k, p, n);
      return out;
    }
  }
  return matmul(call_primitive("transpose", std::vector<Value>{va}), vb, "matmul");
}

Value dot(const Value& va, const Value& vb, const char* op) {
  Array a = to_array(va, op), b = to_array(vb, op);
  if (a.ndim() == 0 || b.ndim() == 0) return scalar_case(va, vb, op);
  DType dt = result_type(va, vb);
  a = a.astype(dt);
  b = b.astype(dt);
  const int64_t ka = a.shape()[a.ndim() - 1];
  const int bk_axis = b.ndim() == 1 ? 0 : b.ndim() - 2;
  const int64_t kb = b.shape()[bk_axis];
  if (ka != kb) not_aligned(op, a.shape(), b.shape(), ka, a.ndim() - 1, kb, bk_axis);
  const Shape a_lead = leading(a.shape(), 1);
  const int64_t p = shape_size(a_lead, op);
  Array a2 = a.reshaped({p, ka});
  if (b.ndim() == 1) return product_2d(a2, b.reshaped({kb, 1}), op).reshaped(a_lead);
  // dot(a, b)[i..., j..., n] = sum_k a[i..., k] b[j..., k, n]: bring b's k axis first.
  std::vector<int> perm{bk_axis};
  for (int i = 0; i < b.ndim(); ++i) {
    if (i != bk_axis) perm.push_back(i);
  }
  Array b2 = kn::permute_axes(b, perm);
  const int64_t q = b.size() / std::max<int64_t>(kb, 1);
  Shape out = concat(a_lead, leading(b.shape(), 2));
  out.push_back(b.shape()[b.ndim() - 1]);
  if (kb == 0) return Array::zeros(dt, out);
  return product_2d(a2, b2.reshaped({kb, q}), op).reshaped(out);
}

// dot of two 1-d float64 arrays, views read through their strides (a
// column Q[:, i] is not packed first: Gram-Schmidt's inner loop); nullopt for
// anything else.
std::optional<Value> strided_vector_dot(const Value& va, const Value& vb) {
  if (!va.is_array() || !vb.is_array()) return std::nullopt;
  const Array& a = va.as_array();
  const Array& b = vb.as_array();
  if (a.ndim() != 1 || b.ndim() != 1 || a.dtype() != DType::float64 ||
      b.dtype() != DType::float64 || a.size() != b.size()) {
    return std::nullopt;
  }
  const int64_t n = a.size(), sa = a.strides()[0], sb = b.strides()[0];
  const double* x = a.origin<double>();
  const double* y = b.origin<double>();
  // Four partial sums, as BLAS's ddot keeps several: independent additions.
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  int64_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += x[i * sa] * y[i * sb];
    s1 += x[(i + 1) * sa] * y[(i + 1) * sb];
    s2 += x[(i + 2) * sa] * y[(i + 2) * sb];
    s3 += x[(i + 3) * sa] * y[(i + 3) * sb];
  }
  for (; i < n; ++i) s0 += x[i * sa] * y[i * sb];
  return Value(Array::scalar((s0 + s1) + (s2 + s3)));
}

Value dot_eval(Args& a) {
  if (auto r = strided_vector_dot(a[0], a[1])) return *r;
  a.pack_views();
  return dot(numeric_arg(a, 0), numeric_arg(a, 1), a.op());
}

Value vdot(const Value& va, const Value& vb, const char* op) {
  DType dt = result_type(va, vb);
  Array a = to_array(va, op).astype(dt), b = to_array(vb, op).astype(dt);
  if (a.size() != b.size()) {
    throw std::invalid_argument(error_message(
        "[", op, "] arrays must have the same size: ", a.size(), " (shape ", shape_str(a.shape()),
        ") and ", b.size(), " (shape ", shape_str(b.shape()), ")"));
  }
  return product_2d(a.reshaped({1, a.size()}), b.reshaped({b.size(), 1}), op).reshaped({});
}

Value inner(const Value& va, const Value& vb, const char* op) {
  Array a = to_array(va, op), b = to_array(vb, op);
  if (a.ndim() == 0 || b.ndim() == 0) return scalar_case(va, vb, op);
  DType dt = result_type(va, vb);
  a = a.astype(dt);
  b = b.astype(dt);
  const int64_t ka = a.shape()[a.ndim() - 1], kb = b.shape()[b.ndim() - 1];
  if (ka != kb) not_aligned(op, a.shape(), b.shape(), ka, a.ndim() - 1, kb, b.ndim() - 1);
  const Shape a_lead = leading(a.shape(), 1), b_lead = leading(b.shape(), 1);
  const int64_t p = shape_size(a_lead, op), q = shape_size(b_lead, op);
  Array bt = kn::permute_axes(b.reshaped({q, kb}), {1, 0});
  return product_2d(a.reshaped({p, ka}), bt, op).reshaped(concat(a_lead, b_lead));
}

Value outer(const Value& va, const Value& vb, const char* op) {
  DType dt = result_type(va, vb);
  Array a = to_array(va, op).astype(dt), b = to_array(vb, op).astype(dt);
  return product_2d(a.reshaped({a.size(), 1}), b.reshaped({1, b.size()}), op);
}

// Reads tensordot's axes: an int N (last N of a with first N of b) or a pair
// [axes_a, axes_b] of ints or lists of ints.
void tensordot_axes(const Args& args, const Array& a, const Array& b, std::vector<int>& ax_a,
                    std::vector<int>& ax_b) {
  const char* op = args.op();
  const Value& v = args[2];
  if (v.is_int() || v.is_bool()) {
    int64_t n = args.integer(2);
    if (n < 0) args.value_error(2, error_message("must be non-negative, got ", n));
    if (n > a.ndim() || n > b.ndim()) {
      throw std::invalid_argument(
          error_message("[", op, "] axes=", n, " exceeds the dimensions of the operands: shapes ",
                        shape_str(a.shape()), " and ", shape_str(b.shape())));
    }
    for (int64_t i = 0; i < n; ++i) {
      ax_a.push_back(static_cast<int>(a.ndim() - n + i));
      ax_b.push_back(static_cast<int>(i));
    }
    return;
  }
  if (!v.is_list() || v.as_list().size() != 2) {
    args.type_error(2, "an int or a pair of axis lists [axes_a, axes_b]");
  }
  auto read = [&](const Value& e, const Array& x, std::vector<int>& out) {
    std::vector<int64_t> raw;
    if (e.is_int()) {
      raw.push_back(e.as_int());
    } else if (e.is_list()) {
      for (const Value& i : e.as_list()) {
        if (!i.is_int()) args.type_error(2, "an int or a pair of axis lists [axes_a, axes_b]");
        raw.push_back(i.as_int());
      }
    } else {
      args.type_error(2, "an int or a pair of axis lists [axes_a, axes_b]");
    }
    for (int64_t r : raw) {
      int ax = normalize_axis(r, x.ndim(), op);
      for (int seen : out) {
        if (seen == ax) {
          throw std::invalid_argument(error_message("[", op, "] repeated axis ", r,
                                                    " in axes for an array of shape ",
                                                    shape_str(x.shape())));
        }
      }
      out.push_back(ax);
    }
  };
  read(v.as_list()[0], a, ax_a);
  read(v.as_list()[1], b, ax_b);
  if (ax_a.size() != ax_b.size()) {
    throw std::invalid_argument(error_message(
        "[", op, "] axes lists have different lengths: ", ax_a.size(), " and ", ax_b.size()));
  }
}

Value tensordot(Args& args) {
  const char* op = args.op();
  Value va = numeric_arg(args, 0), vb = numeric_arg(args, 1);
  DType dt = result_type(va, vb);
  Array a = to_array(va, op).astype(dt), b = to_array(vb, op).astype(dt);
  std::vector<int> ax_a, ax_b;
  tensordot_axes(args, a, b, ax_a, ax_b);
  int64_t k = 1;
  for (size_t i = 0; i < ax_a.size(); ++i) {
    int64_t la = a.shape()[ax_a[i]], lb = b.shape()[ax_b[i]];
    if (la != lb) {
      throw std::invalid_argument(error_message("[", op, "] shape mismatch for sum: axis ", ax_a[i],
                                                " of a has length ", la, " but axis ", ax_b[i],
                                                " of b has length ", lb));
    }
    k *= la;
  }
  std::vector<int> perm_a, perm_b = ax_b;
  Shape out;
  for (int i = 0; i < a.ndim(); ++i) {
    if (std::find(ax_a.begin(), ax_a.end(), i) == ax_a.end()) {
      perm_a.push_back(i);
      out.push_back(a.shape()[i]);
    }
  }
  perm_a.insert(perm_a.end(), ax_a.begin(), ax_a.end());
  for (int i = 0; i < b.ndim(); ++i) {
    if (std::find(ax_b.begin(), ax_b.end(), i) == ax_b.end()) {
      perm_b.push_back(i);
      out.push_back(b.shape()[i]);
    }
  }
  if (k == 0) return Array::zeros(dt, out);
  const int64_t p = a.size() / k, q = b.size() / k;
  Array a2 = kn::permute_axes(a, perm_a).reshaped({p, k});
  Array b2 = kn::permute_axes(b, perm_b).reshaped({k, q});
  return product_2d(a2, b2, op).reshaped(out);
}

Value kron(const Value& va, const Value& vb, const char* op) {
  if (va.is_scalar() && vb.is_scalar()) return scalar_product(va, vb);
  DType dt = result_type(va, vb);
  Array a = to_array(va, op).astype(dt), b = to_array(vb, op).astype(dt);
  const int nd = std::max(a.ndim(), b.ndim());
  Shape sa(nd - a.ndim(), 1), sb(nd - b.ndim(), 1);
  sa.insert(sa.end(), a.shape().begin(), a.shape().end());
  sb.insert(sb.end(), b.shape().begin(), b.shape().end());
  // outer(a, b) has axes (a0.., b0..); interleaving them to (a0, b0, a1, b1, ...)
  // and merging each pair gives the Kronecker product.
  Array o = product_2d(a.reshaped({a.size(), 1}), b.reshaped({1, b.size()}), op);
  std::vector<int> perm;
  Shape out;
  for (int i = 0; i < nd; ++i) {
    perm.push_back(i);
    perm.push_back(nd + i);
    out.push_back(sa[i] * sb[i]);
  }
  return kn::permute_axes(o.reshaped(concat(sa, sb)), perm).reshaped(out);
}

Value trace(Args& args) {
  const char* op = args.op();
  Array a = args.array(0);
  if (a.ndim() < 2) {
    throw std::invalid_argument(error_message(
        "[", op, "] array must have at least 2 dimensions: got shape ", shape_str(a.shape())));
  }
  int64_t offset = args.integer(1);
  int ax1 = normalize_axis(args.integer(2), a.ndim(), op);
  int ax2 = normalize_axis(args.integer(3), a.ndim(), op);
  if (ax1 == ax2) {
    throw std::invalid_argument(error_message("[", op, "] axis1 and axis2 cannot be the same: ",
                                              args.integer(2), " and ", args.integer(3)));
  }
  return kn::trace(a, offset, ax1, ax2);
}

// The `ord` of norm: nil, a number (inf allowed) or one of 'fro', 'nuc', 'inf', '-inf'.
struct NormOrder {
  bool given = false;
  bool is_string = false;
  std::string name;
  double value = 2.0;
  std::string str() const {
    if (is_string) return "'" + name + "'";
    if (std::isfinite(value) && value == std::trunc(value) && std::fabs(value) < 1e15) {
      return std::to_string(static_cast<int64_t>(value));
    }
    return Value(value).str();
  }
};

NormOrder norm_order(const Args& args) {
  NormOrder o;
  const Value& v = args[1];
  if (v.is_nil()) return o;
  o.given = true;
  if (v.is_string()) {
    const std::string& s = v.as_string();
    if (s == "inf" || s == "-inf") {
      o.value = s == "inf" ? std::numeric_limits<double>::infinity()
                           : -std::numeric_limits<double>::infinity();
    } else if (s == "fro" || s == "nuc") {
      o.is_string = true;
      o.name = s;
    } else {
      args.value_error(
          1, error_message("must be a number, 'fro', 'nuc', 'inf' or '-inf', got '", s, "'"));
    }
    return o;
  }
  if (!v.is_scalar()) args.type_error(1, "a number or a string such as 'fro'");
  o.value = args.number(1);
  return o;
}

Value norm(Args& args) {
  const char* op = args.op();
  Array x = args.array(0);
  NormOrder ord = norm_order(args);
  bool keepdims = args.boolean(3);
  const DType out_dt = x.dtype() == DType::float32 ? DType::float32 : DType::float64;
  Array xd = x.astype(DType::float64);
  const int nd = x.ndim();
  std::vector<int> axes;
  if (auto ax = args.axes(2)) {
    for (int64_t a : *ax) {
      int n = normalize_axis(a, nd, op);
      if (std::find(axes.begin(), axes.end(), n) != axes.end()) {
        throw std::invalid_argument(
            error_message("[", op, "] duplicate axes given: ", Value(args[2]).str()));
      }
      axes.push_back(n);
    }
    if (axes.empty() || axes.size() > 2) {
      throw std::invalid_argument(error_message(
          "[", op, "] improper number of dimensions to norm: axis must name 1 or 2 axes, got ",
          axes.size()));
    }
  } else if (!ord.given) {
    // The 2-norm of the flattened array (Frobenius norm for matrices).
    Array r(DType::float64, {});
    r.data<double>()[0] = kn::vector_norm(xd.data<double>(), xd.size(), 2.0);
    Shape out(keepdims ? nd : 0, 1);
    return r.astype(out_dt).reshaped(out);
  } else if (nd == 1) {
    axes = {0};
  } else if (nd == 2) {
    axes = {0, 1};
  } else {
    throw std::invalid_argument(error_message(
        "[", op,
        "] improper number of dimensions to norm: with ord given and axis=nil the array "
        "must be 1-d or 2-d, got shape ",
        shape_str(x.shape())));
  }
  std::vector<int> perm;
  Shape kept, kept_keepdims;
  for (int i = 0; i < nd; ++i) {
    bool reduced = std::find(axes.begin(), axes.end(), i) != axes.end();
    if (!reduced) {
      perm.push_back(i);
      kept.push_back(x.shape()[i]);
    }
    kept_keepdims.push_back(reduced ? 1 : x.shape()[i]);
  }
  perm.insert(perm.end(), axes.begin(), axes.end());
  Array moved = kn::permute_axes(xd, perm);
  Array out(DType::float64, kept);
  const int64_t outer = out.size();
  const int64_t inner = outer ? moved.size() / std::max<int64_t>(outer, 1) : 0;
  const double* src = moved.data<double>();
  double* dst = out.data<double>();
  if (axes.size() == 1) {
    if (ord.is_string) {
      throw std::invalid_argument(
          error_message("[", op, "] invalid norm order ", ord.str(), " for vectors"));
    }
    if (std::isinf(ord.value) && inner == 0 && outer > 0) {
      throw std::invalid_argument(
          error_message("[", op, "] zero-size array has no maximum or minimum: ord=", ord.str()));
    }
    parallel_for(outer, 2.0 * static_cast<double>(inner), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) dst[o] = kn::vector_norm(src + o * inner, inner, ord.value);
    });
  } else {
    kn::MatrixNorm kind;
    bool max_min = true;
    if (!ord.given || (ord.is_string && ord.name == "fro")) {
      kind = kn::MatrixNorm::frobenius;
      max_min = false;
    } else if (!ord.is_string && ord.value == 1.0) {
      kind = kn::MatrixNorm::max_col_sum;
    } else if (!ord.is_string && ord.value == -1.0) {
      kind = kn::MatrixNorm::min_col_sum;
    } else if (!ord.is_string && std::isinf(ord.value)) {
      kind = ord.value > 0 ? kn::MatrixNorm::max_row_sum : kn::MatrixNorm::min_row_sum;
    } else if (ord.is_string || ord.value == 2.0 || ord.value == -2.0) {
      throw std::invalid_argument(error_message(
          "[", op, "] matrix norm ord=", ord.str(),
          " needs singular values, which are not supported; use 'fro', 1, -1, inf or -inf"));
    } else {
      throw std::invalid_argument(
          error_message("[", op, "] invalid norm order ", ord.str(), " for matrices"));
    }
    const int64_t rows = x.shape()[axes[0]], cols = x.shape()[axes[1]];
    if (max_min && (rows == 0 || cols == 0) && outer > 0) {
      throw std::invalid_argument(
          error_message("[", op, "] zero-size array has no maximum or minimum: ord=", ord.str()));
    }
    for (int64_t o = 0; o < outer; ++o) {
      dst[o] = kn::matrix_norm(src + o * inner, rows, cols, kind);
    }
  }
  Array r = out.astype(out_dt);
  return keepdims ? r.reshaped(kept_keepdims) : r;
}

// Checks that `a` is a stack of square matrices; returns the matrix order.
int64_t square_order(const Array& a, const char* op) {
  if (a.ndim() < 2) {
    throw std::invalid_argument(error_message(
        "[", op, "] array must have at least 2 dimensions: got shape ", shape_str(a.shape())));
  }
  int64_t n = a.shape()[a.ndim() - 1];
  if (a.shape()[a.ndim() - 2] != n) {
    throw std::invalid_argument(
        error_message("[", op, "] last 2 dimensions of the array must be square: got shape ",
                      shape_str(a.shape())));
  }
  return n;
}

// float32 stays float32; every other dtype is computed and returned as float64.
DType lu_dtype(DType a) { return a == DType::float32 ? DType::float32 : DType::float64; }

[[noreturn]] void singular(const char* op) {
  throw std::invalid_argument(error_message("[", op, "] singular matrix"));
}

Value det(Args& args) {
  const char* op = args.op();
  Array a = args.array(0);
  const int64_t n = square_order(a, op);
  Array ad = a.astype(DType::float64);
  Array out(DType::float64, leading(a.shape(), 2));
  const double* src = ad.data<double>();
  double* dst = out.data<double>();
  const double cost = std::max(1.0, 0.5 * double(n) * double(n) * double(n));
  parallel_for(out.size(), cost, [&](int64_t begin, int64_t end) {
    std::vector<double> m(static_cast<size_t>(n * n));
    std::vector<int64_t> piv(static_cast<size_t>(n));
    for (int64_t i = begin; i < end; ++i) {
      std::copy(src + i * n * n, src + (i + 1) * n * n, m.begin());
      int sign = 1;
      if (!kn::lu_factor(m.data(), n, piv.data(), &sign)) {
        dst[i] = 0.0;
        continue;
      }
      double d = sign;
      for (int64_t j = 0; j < n; ++j) d *= m[j * n + j];
      dst[i] = d;
    }
  });
  return out.astype(lu_dtype(a.dtype()));
}

// Solves a[i] x = b[i] for every matrix of the broadcast batch; b holds (n, nrhs)
// matrices. Returns (batch..., n, nrhs) in float64.
Array lu_solve_batch(const Array& a, const Array& b, const Shape& batch, int64_t n, int64_t nrhs,
                     const char* op) {
  Array ad = a.astype(DType::float64), bd = b.astype(DType::float64);
  std::vector<int64_t> a_off = batch_offsets(leading(a.shape(), 2), batch, n * n);
  std::vector<int64_t> b_off = batch_offsets(leading(b.shape(), 2), batch, n * nrhs);
  Array out(DType::float64, concat(batch, {n, nrhs}));
  const double* pa = ad.data<double>();
  const double* pb = bd.data<double>();
  double* px = out.data<double>();
  std::atomic<bool> any_singular{false};
  const double cost = std::max(1.0, double(n) * double(n) * (0.5 * double(n) + double(nrhs)));
  parallel_for(static_cast<int64_t>(a_off.size()), cost, [&](int64_t begin, int64_t end) {
    std::vector<double> m(static_cast<size_t>(n * n));
    std::vector<int64_t> piv(static_cast<size_t>(n));
    for (int64_t i = begin; i < end; ++i) {
      std::copy(pa + a_off[i], pa + a_off[i] + n * n, m.begin());
      int sign = 1;
      // Errors are not thrown inside tiles; the caller reports them after the join.
      if (!kn::lu_factor(m.data(), n, piv.data(), &sign)) {
        any_singular = true;
        continue;
      }
      double* x = px + i * n * nrhs;
      std::copy(pb + b_off[i], pb + b_off[i] + n * nrhs, x);
      kn::lu_solve(m.data(), piv.data(), n, x, nrhs);
    }
  });
  if (any_singular) singular(op);
  return out;
}

// Identity matrices of order n, stacked to (batch..., n, n).
Array identity_stack(DType dt, const Shape& batch, int64_t n) {
  Array eye = Array::zeros(dt, concat(batch, {n, n}));
  dispatch(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = eye.template data<T>();
    for (int64_t m = 0; m < eye.size() / std::max<int64_t>(n * n, 1); ++m) {
      for (int64_t i = 0; i < n; ++i) p[m * n * n + i * n + i] = T(1);
    }
  });
  return eye;
}

Array inv_array(const Array& a, const char* op) {
  const int64_t n = square_order(a, op);
  Shape batch = leading(a.shape(), 2);
  Array eye = identity_stack(DType::float64, {}, n);
  return lu_solve_batch(a, eye, batch, n, n, op).astype(lu_dtype(a.dtype()));
}

Value solve(Args& args) {
  const char* op = args.op();
  Array a = args.array(0), b = args.array(1);
  const int64_t n = square_order(a, op);
  if (b.ndim() == 0) {
    throw std::invalid_argument(
        error_message("[", op, "] b must have at least 1 dimension: got a 0-d array"));
  }
  const bool vec = b.ndim() == 1;
  const int bk_axis = vec ? 0 : b.ndim() - 2;
  if (b.shape()[bk_axis] != n) {
    not_aligned(op, a.shape(), b.shape(), n, a.ndim() - 1, b.shape()[bk_axis], bk_axis);
  }
  Array b2 = vec ? b.reshaped({n, 1}) : b;
  const int64_t nrhs = b2.shape()[b2.ndim() - 1];
  Shape batch;
  if (!broadcast_shapes(leading(a.shape(), 2), leading(b2.shape(), 2), batch)) {
    throw std::invalid_argument(
        error_message("[", op, "] batch dimensions could not be broadcast together: shapes ",
                      shape_str(a.shape()), " and ", shape_str(b.shape())));
  }
  Array x = lu_solve_batch(a, b2, batch, n, nrhs, op);
  DType dt = lu_dtype(promote(a.dtype(), b.dtype()));
  if (vec) x = x.reshaped(concat(batch, {n}));
  return x.astype(dt);
}

Value matrix_power(Args& args) {
  const char* op = args.op();
  Array a = args.array(0);
  const int64_t n = square_order(a, op);
  int64_t p = args.integer(1);
  Shape batch = leading(a.shape(), 2);
  if (p == 0) return identity_stack(a.dtype(), batch, n);
  if (p < 0) a = inv_array(a, op);
  // -p overflows for INT64_MIN; its magnitude as unsigned is still exact.
  uint64_t e = p < 0 ? uint64_t(0) - static_cast<uint64_t>(p) : static_cast<uint64_t>(p);
  Array result, base = a;
  bool have = false;
  while (e) {
    if (e & 1) {
      result = have ? batched_product(result, base, batch, op) : base;
      have = true;
    }
    e >>= 1;
    if (e) base = batched_product(base, base, batch, op);
  }
  return result;
}

Value matmul_eval(Args& a) { return matmul(numeric_arg(a, 0), numeric_arg(a, 1), a.op()); }
Value matmul_tn_eval(Args& a) { return matmul_tn(numeric_arg(a, 0), numeric_arg(a, 1), a.op()); }

const bool registered_matrix = register_primitives({
    {.name = "matmul",
     .family = "matrix",
     .params = {{"x"}, {"y"}},
     .help = "Matrix product with NumPy's matmul rules (numpy.matmul, the @ operator): 1-d "
             "operands are promoted to matrices and the added dimension removed, leading "
             "dimensions are broadcast as a batch. Scalars are rejected; bool @ bool is bool.",
     .eval = matmul_eval,
     .ns_per_element = 50.0,
     .grads = {"matmul_grad_x(g, x, y)", "matmul_grad_y(g, x, y)"},
     .strided = true},  // float operands are read through their strides (batched_product)
    {.name = "matmul_tn",
     .family = "matrix",
     .params = {{"x"}, {"y"}},
     .help = "transpose(x) @ y without copying the transpose (BLAS reads x transposed) for a 2-d "
             "float x; otherwise exactly transpose then matmul. The compiler rewrites "
             "matmul(transpose(x), y) and transpose(x) @ y into it.",
     .eval = matmul_tn_eval,
     .ns_per_element = 50.0,
     .grads = {"matmul_tn_grad_x(g, x, y)", "matmul(x, g)"}},
    {.name = "dot",
     .family = "matrix",
     .params = {{"x"}, {"y"}},
     .help = "numpy.dot: multiply for scalars, inner product of 1-d arrays, matrix product of "
             "2-d arrays, and for N-d arrays a sum product over the last axis of x and the "
             "second-to-last of y.",
     .eval = dot_eval,
     .ns_per_element = 50.0,
     .grads = {"dot_grad_x(g, x, y)", "dot_grad_y(g, x, y)"},
     .strided = true},
    {.name = "vdot",
     .family = "matrix",
     .params = {{"x"}, {"y"}},
     .help = "Dot product of the flattened arrays (numpy.vdot); both must have the same size. "
             "Returns a 0-d array.",
     .eval = [](Args& a) -> Value { return vdot(numeric_arg(a, 0), numeric_arg(a, 1), a.op()); },
     .ns_per_element = 1.0,
     .grads = {"reshape(g * ravel(y), shape(x))", "reshape(g * ravel(x), shape(y))"}},
    {.name = "inner",
     .family = "matrix",
     .params = {{"x"}, {"y"}},
     .help = "Inner product over the last axes of x and y (numpy.inner); the result has shape "
             "x.shape[:-1] + y.shape[:-1].",
     .eval = [](Args& a) -> Value { return inner(numeric_arg(a, 0), numeric_arg(a, 1), a.op()); },
     .ns_per_element = 50.0},
    {.name = "outer",
     .family = "matrix",
     .params = {{"x"}, {"y"}},
     .help = "Outer product of the flattened x and y (numpy.outer): a (x.size, y.size) matrix.",
     .eval = [](Args& a) -> Value { return outer(numeric_arg(a, 0), numeric_arg(a, 1), a.op()); },
     .ns_per_element = 1.0,
     .grads = {"matmul(g, ravel(y))", "matmul_tn(g, ravel(x))"}},
    {.name = "tensordot",
     .family = "matrix",
     .params = {{"x"}, {"y"}, opt("axes", Value(int64_t{2}))},
     .help = "Sum product over the given axes (numpy.tensordot): axes=N pairs the last N axes of "
             "x with the first N of y; axes=[ax, ay] names them explicitly.",
     .eval = tensordot,
     .ns_per_element = 50.0},
    {.name = "kron",
     .family = "matrix",
     .params = {{"x"}, {"y"}},
     .help = "Kronecker product (numpy.kron): blocks x[i] * y, with the shorter shape padded by "
             "leading 1s.",
     .eval = [](Args& a) -> Value { return kron(numeric_arg(a, 0), numeric_arg(a, 1), a.op()); },
     .ns_per_element = 2.0},
    {.name = "trace",
     .family = "matrix",
     .params = {{"x"},
                opt("offset", Value(int64_t{0})),
                opt("axis1", Value(int64_t{0})),
                opt("axis2", Value(int64_t{1}))},
     .help = "Sum along a diagonal (numpy.trace); offset selects the diagonal, axis1 and axis2 "
             "the plane. bool and int sum to int64.",
     .eval = trace,
     .ns_per_element = 2.0},
    {.name = "norm",
     .family = "matrix",
     .params = {{"x"}, opt("ord", Value()), opt("axis", Value()), opt("keepdims", Value(false))},
     .help = "Vector or matrix norm (numpy.linalg.norm): by default the 2-norm of the flattened "
             "array; vector ord 0, 1, 2, inf, -inf or any p; matrix ord 'fro', 1, -1, inf, -inf. "
             "Integer input gives float64.",
     .eval = norm,
     .ns_per_element = 2.0,
     .grads = {"norm_grad(g, x, out, ord, axis, keepdims)", "", "", ""}},
    {.name = "det",
     .family = "matrix",
     .params = {{"x"}},
     .help = "Determinant of a square matrix or a stack of them (numpy.linalg.det), by LU "
             "factorization with partial pivoting. Integer input gives float64.",
     .eval = det,
     .ns_per_element = 100.0},
    {.name = "inv",
     .family = "matrix",
     .params = {{"x"}},
     .help = "Inverse of a square matrix or a stack of them (numpy.linalg.inv); a singular "
             "matrix is a ValueError.",
     .eval = [](Args& a) -> Value { return inv_array(a.array(0), a.op()); },
     .ns_per_element = 100.0},
    {.name = "solve",
     .family = "matrix",
     .params = {{"a"}, {"b"}},
     .help = "Solves a x = b (numpy.linalg.solve); b is a vector if 1-d, else a stack of "
             "matrices whose batch dimensions broadcast with a's. A singular a is a ValueError.",
     .eval = solve,
     .ns_per_element = 100.0},
    {.name = "matrix_power",
     .family = "matrix",
     .params = {{"x"}, {"n"}},
     .help = "x raised to the integer power n by repeated squaring (numpy.linalg.matrix_power); "
             "n = 0 gives the identity, negative n inverts first.",
     .eval = matrix_power,
     .ns_per_element = 100.0},
});

}  // namespace

}  // namespace tessera
