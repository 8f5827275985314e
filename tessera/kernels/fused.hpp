// Fused elementwise expressions: a tree of float arithmetic over arrays of
// one float dtype (float32 or float64) and scalars, computed in one pass over
// the output. Each tile of the output is cut into chunks of a few hundred
// elements; per chunk every step of the expression runs over the chunk with
// its intermediate results in small scratch buffers that stay in the L1/L2
// cache, instead of one pass over memory (and one new array) per operation.
// The operands are read where they are, through their strides (a slice or a
// transposed or broadcast view is not packed first).
//
// The per-element functions are the array kernels' own (float_binary,
// float_fn, pow_shortcut in elementwise.hpp), so a fused expression gives
// the same bits as the same operations one at a time. The primitives layer
// (primitives/fused.cpp) decides when an expression qualifies and otherwise
// runs it one operation at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/kernels/elementwise.hpp"

namespace tessera::kernels {

// One operation of a fused expression. Operands are numbered: 0 .. n_leaves-1
// are the leaves (arrays and scalars), n_leaves + k is the result of step k.
// Every step's result is used exactly once, by a later step, except the last
// step's, which is the expression's value.
struct FusedStep {
  bool binary = true;
  BinaryOp bop = BinaryOp::add;
  UnaryOp uop = UnaryOp::negative;
  int a = 0, b = 0;  // b unused for unary steps
  // power with an exponent that is the same scalar everywhere (a scalar or
  // size-1 operand): the kernels' shortcut for it.
  PowShortcut pow = PowShortcut::none;
};

// True for the operations a fused expression can compute: the float binary
// functions (float_binary) and the float unary functions with negative and
// positive; not comparisons, logical operations or predicates (bool results).
bool fusable(BinaryOp op);
bool fusable(UnaryOp op);

// A leaf: an array of the expression's dtype (any strides; broadcast against
// the output shape) or a scalar already converted to that dtype.
struct FusedLeaf {
  const Array* array = nullptr;  // null: the scalar
  double scalar = 0.0;
};

// The expression with its leaves laid out over the output: built once per
// call, then run over disjoint ranges of output elements (in parallel).
class FusedPlan {
 public:
  // `out` (float32 or float64; it must outlive the plan) receives the
  // expression, written through its strides (a view: x[1:-1, 1:-1] += ...);
  // the array leaves have its dtype and broadcast to its shape.
  FusedPlan(std::vector<FusedStep> steps, std::vector<FusedLeaf> leaves, Array& out);
  // A plan of values only, over `shape` in `dtype` (float32 or float64):
  // run_values gives them to the caller (a reduction of the expression
  // reads them a block at a time; no array of the whole expression exists).
  FusedPlan(std::vector<FusedStep> steps, std::vector<FusedLeaf> leaves, const Shape& shape,
            DType dtype);
  // out[begin:end) (in C order over out's shape) = the expression.
  void run(int64_t begin, int64_t end) const;
  // The expression's elements [begin, end) (C order) into dst[0, end - begin),
  // dst of the plan's dtype.
  void run_values(int64_t begin, int64_t end, void* dst) const;
  int64_t size() const { return size_; }

 private:
  FusedPlan(std::vector<FusedStep> steps, std::vector<FusedLeaf> leaves, const Shape& shape,
            DType dtype, Array* out);
  template <class T>
  void run_typed(int64_t begin, int64_t end, T* values) const;

  std::vector<FusedStep> steps_;
  size_t n_in_;                 // leaves; slot n_in_ is the output (null: run_values only)
  std::vector<void*> origin_;   // per slot: element (0, ..., 0), or null for a scalar leaf
  std::vector<double> scalar_;  // per leaf: the scalar's value
  DType dtype_;
  int64_t size_;
  // The output's dimensions with adjacent ones merged where every array
  // allows it, and per slot its element stride along each (0: broadcast):
  // slot k's strides start at k * stride_row_.
  std::vector<int64_t> dims_;
  std::vector<int64_t> strides_;
  size_t stride_row_ = 0;
};

// One operation on float arrays of one dtype (`out`'s, of the broadcast
// shape, any strides), reading strided views in place: x OP y, or OP x with
// `y` null. False (nothing done) when the operation is not fusable or a
// dtype differs. Runs in tiles with parallel_for.
bool strided_binary(BinaryOp op, const Array& x, const Array& y, Array& out);
bool strided_unary(UnaryOp op, const Array& x, Array& out);

// x = x OUTER (a INNER b) in one pass over a small 1-D float x (one tile:
// no parallel_for), each leaf a scalar already converted to x's dtype, a
// size-1 array or a 1-D array of x's length and dtype (any stride) that
// does not overlap x unless it is x itself. The bits of `inner` then
// `outer` as strided_binary computes them. False (nothing done) otherwise,
// or when both a and b are single values.
bool update_in_place_1d(BinaryOp outer, BinaryOp inner, Array& x, const FusedLeaf& a,
                        const FusedLeaf& b);

}  // namespace tessera::kernels
