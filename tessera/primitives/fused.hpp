// Fused elementwise expressions (docs/runtime.md, "Fused expressions"): the
// compiler turns a nested expression of elementwise arithmetic, such as
// 0.2 * (a[1:-1] + a[:-2] + a[2:]), into one call of a fused primitive whose
// operands are the expression's leaves. When the leaves are arrays of one
// float dtype and Python scalars, the fused primitive computes the whole
// expression in one pass over the output (kernels/fused.hpp), reading views
// in place; otherwise it runs the expression's primitives one at a time, as
// the unfused tree would, so results, dtypes and errors are the same.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/kernels/elementwise.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

struct FusedExpr {
  struct Step {
    const PrimitiveSpec* spec = nullptr;  // the primitive the step stands for
    bool binary = true;
    BinaryOp bop = BinaryOp::add;
    UnaryOp uop = UnaryOp::negative;
    // Operands: 0 .. n_leaves-1 are leaves, n_leaves + k is step k's result
    // (kernels::FusedStep's numbering). Each is used exactly once.
    int a = 0, b = 0;
    SourceLoc loc;  // the operation's position, for its errors
  };
  std::vector<Step> steps;  // in evaluation order; the last gives the value
  size_t n_leaves = 0;
};

// The operation a primitive computes when it can take part in a fused
// expression (add, multiply, sqrt, ...: PrimitiveSpec::fuse_binary/fuse_unary).
bool fusable_spec(const PrimitiveSpec& spec);

// A primitive (not registered: owned by the call node) evaluating `expr` on
// its operands, the expression's leaves; its name lists the operations
// ("fused(multiply+add+add)"), its help says what it stands for.
std::shared_ptr<const PrimitiveSpec> make_fused_spec(std::shared_ptr<const FusedExpr> expr);

// The same for x[indices...] = expression (setitem of a fused value): its
// operands are x, the n_indices indices, then the expression's leaves. The
// selection, when it is a float view of x that no leaf overlaps, receives
// the expression directly (one pass, no temporary); otherwise the value is
// computed and assigned by setitem, as unfused.
std::shared_ptr<const PrimitiveSpec> make_fused_setitem_spec(std::shared_ptr<const FusedExpr> expr,
                                                             size_t n_indices);

// x OP= expression (iadd, isub, imul, itruediv: `in_place`, whose binary
// primitive fusable_in_place_base gives): operands x, then the leaves of
// `value`, the expression; `whole` is x OP value with x as leaf 0. A float x
// that only x itself overlaps, of the expression's dtype and shape, receives
// the whole in one pass (v -= s * Q[:, i] reads the column in place, no
// temporary); otherwise the value is computed and `in_place` applies it.
std::shared_ptr<const PrimitiveSpec> make_fused_in_place_spec(
    std::shared_ptr<const FusedExpr> whole, std::shared_ptr<const FusedExpr> value,
    const PrimitiveSpec& in_place);
// The binary primitive of an in-place operator make_fused_in_place_spec
// takes (subtract for isub); null for any other primitive.
const PrimitiveSpec* fusable_in_place_base(const PrimitiveSpec& spec);
// A reduction (sum, mean, prod, min, max: `reduce`) of a fused expression:
// its operands are the expression's leaves, then the reduction's own
// arguments after x (axis, keepdims[, dtype]). Over trailing axes (axis nil,
// the last, or the last few) of a float expression, and without a dtype, the
// values are reduced as the pass computes them, a block at a time, never
// written as a whole array -- with the same bits as the reduction of the
// materialised expression; otherwise the expression is computed and reduced.
std::shared_ptr<const PrimitiveSpec> make_fused_reduce_spec(std::shared_ptr<const FusedExpr> expr,
                                                            const PrimitiveSpec& reduce);

// Whether `reduce` is a reduction make_fused_reduce_spec takes.
bool fusable_reduction(const PrimitiveSpec& reduce);

// Turns fused expressions on or off (TESSERA_FUSION=0 at start turns them
// off; the compiler reads it when it builds a program).
bool fusion_enabled();

}  // namespace tessera
