#include "tessera/primitives/fused.hpp"

#include <cstdlib>
#include <cstring>
#include <optional>

#include "tessera/kernels/fused.hpp"
#include "tessera/kernels/reduce.hpp"
#include "tessera/runtime/parallel.hpp"

namespace tessera {

bool fusable_spec(const PrimitiveSpec& spec) {
  return spec.fuse_binary >= 0 || spec.fuse_unary >= 0;
}

bool fusion_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("TESSERA_FUSION");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

namespace {

// Runs step `s` as its own primitive on operand values (moved in: each is
// used once, so a buffer held nowhere else is reused as the unfused call
// would); errors name the step's position.
Value run_step(const FusedExpr::Step& s, Value x, std::optional<Value> y) {
  try {
    std::vector<Value> vals;
    vals.push_back(std::move(x));
    if (y) vals.push_back(std::move(*y));
    Args args(*s.spec, std::move(vals));
    return run_primitive(*s.spec, args);
  } catch (...) {
    rethrow_with_location(std::current_exception(), s.loc);
  }
}

// The steps one at a time from step `from` on, with `vals` holding the
// leaves and the results of the steps before `from`.
// A value read by several steps (a leaf used twice, x * x) is shared with each
// reader; its last read moves it, so that a buffer held nowhere else may hold
// that step's result.
Value run_unfused(const FusedExpr& fx, std::vector<Value>& vals, size_t from) {
  std::vector<int> reads(vals.size(), 0);
  for (size_t k = from; k < fx.steps.size(); ++k) {
    ++reads[fx.steps[k].a];
    if (fx.steps[k].binary) ++reads[fx.steps[k].b];
  }
  auto take = [&](size_t id) { return --reads[id] == 0 ? std::move(vals[id]) : vals[id]; };
  for (size_t k = from; k < fx.steps.size(); ++k) {
    const FusedExpr::Step& s = fx.steps[k];
    Value x = take(s.a);
    std::optional<Value> y;
    if (s.binary) y = take(s.b);
    vals[fx.n_leaves + k] = run_step(s, std::move(x), std::move(y));
  }
  return std::move(vals.back());
}

bool python_number(const Value& v) { return v.is_bool() || v.is_int() || v.is_float(); }

// A Python number converted to `dtype` as NumPy 2 converts a weak scalar
// combined with a float array, kept as a double (exact for float32 too).
double weak_scalar(const Value& v, DType dtype) {
  if (dtype == DType::float32) {
    if (v.is_float()) return static_cast<float>(v.as_float());
    if (v.is_int()) return static_cast<float>(v.as_int());
    return v.as_bool() ? 1.0 : 0.0;
  }
  if (v.is_float()) return v.as_float();
  if (v.is_int()) return static_cast<double>(v.as_int());
  return v.as_bool() ? 1.0 : 0.0;
}

// The expression on the leaves' values (moved from `leaves`). With `dest`
// (a float view being assigned, x[1:-1, 1:-1] = expr): written straight into
// it when the fused pass applies, its dtype is the expression's, the value
// broadcasts to its shape and no leaf overlaps it; *wrote tells, and the
// value is nil then. Otherwise the value, for the caller to assign.
// A reduction of the expression asked of eval_fused: its kind, and the call's
// arguments from `first` on (axis, keepdims[, dtype]).
struct FusedReduction {
  kernels::ReduceKind kind;
  const Args* args;
  size_t first;
  bool has_dtype;
};

// Rough cost of one element of a reduction, in nanoseconds (statistics.cpp's).
constexpr double kFusedReduceNs = 0.5;

// Evaluates the leaves of a long lane in parallel (as statistics.cpp's reductions do).
const kernels::LeafRunner kFusedReduceLeaves =
    [](int64_t count, const std::function<void(int64_t, int64_t)>& body) {
      parallel_for(count, kFusedReduceNs * static_cast<double>(kernels::kLeafSize), body);
    };

// The reduction `red` of the expression computed by the fused pass, when its
// axes are trailing ones of `shape` and it asks for no dtype; nullopt
// otherwise (the caller computes the expression and reduces it).
std::optional<Value> reduce_in_pass(const FusedReduction& red,
                                    const std::vector<kernels::FusedStep>& steps,
                                    const std::vector<kernels::FusedLeaf>& leaves,
                                    const Shape& shape, DType dtype, double cost) {
  const Args& a = *red.args;
  const size_t i = red.first;
  if (red.has_dtype && !a.is_nil(i + 2)) return std::nullopt;
  if (!a[i + 1].is_bool()) return std::nullopt;
  std::vector<int> axes;
  try {
    axes = reduction_axes(a, i, static_cast<int>(shape.size()));
  } catch (...) {
    return std::nullopt;  // the reduction itself reports a bad axis
  }
  const kernels::ReducePlan plan = kernels::make_reduce_plan(shape, axes, a[i + 1].as_bool());
  if (plan.outer == 0 || plan.inner == 0) return std::nullopt;
  if (!plan.inner_dims.empty() && (plan.inner_dims.size() != 1 || plan.inner_strides[0] != 1)) {
    return std::nullopt;  // not trailing axes: lanes are not runs of the C order
  }
  Array out(dtype, plan.out_shape);
  const kernels::FusedPlan pass(steps, leaves, shape, dtype);
  const kernels::ValueProducer produce = [&pass](int64_t b, int64_t e, void* dst) {
    pass.run_values(b, e, dst);
  };
  const int64_t n = plan.inner;
  parallel_for(plan.outer, (cost + kFusedReduceNs) * static_cast<double>(n),
               [&](int64_t b, int64_t e) {
                 kernels::reduce_produced(red.kind, produce, n, out, b, e, &kFusedReduceLeaves);
               });
  return Value(std::move(out));
}

// Two views of the same elements in the same order: a leaf that is the
// destination itself is read at each element before that element is written
// (x -= s * y, x[1:-1] = x[1:-1] * 2), as the temporary NumPy makes would hold it.
bool same_view(const Array& a, const Array& b) {
  return a.shares_storage(b) && a.offset() == b.offset() && a.dtype() == b.dtype() &&
         a.shape() == b.shape() && a.strides() == b.strides();
}

// With `give_back` (and `dest`), the expression is computed only when it can
// be written straight into dest; otherwise nothing is computed (small steps
// aside, which have no effects), the leaves are moved back into *give_back
// and the value is nil with *wrote false.
Value eval_fused(const FusedExpr& fx, std::vector<Value> leaf_values, const Array* dest,
                 bool* wrote, const FusedReduction* red = nullptr, bool* reduced = nullptr,
                 std::vector<Value>* give_back = nullptr) {
  const size_t nl = fx.n_leaves, ns = fx.steps.size();
  std::vector<Value> vals(nl + ns);
  for (size_t i = 0; i < nl; ++i) vals[i] = std::move(leaf_values[i]);
  if (wrote) *wrote = false;
  auto unfused_or_decline = [&](size_t from) -> Value {
    if (!give_back) return run_unfused(fx, vals, from);
    give_back->clear();
    for (size_t i = 0; i < nl; ++i) give_back->push_back(std::move(vals[i]));
    return Value();
  };

  // Which operands are "large": an array of more than one element, or a
  // step with a large operand. A step of small operands only (Python
  // numbers, size-1 arrays) is computed first, on its own, exactly as the
  // unfused call (Python's rules for two numbers, NumPy's power shortcuts
  // for a size-1 exponent); its result becomes a leaf of the rest.
  std::vector<bool> large(nl + ns, false);
  std::optional<DType> dtype;
  bool plain = true;  // every leaf a Python number or a float32/float64 array
  for (size_t i = 0; i < nl; ++i) {
    const Value& v = vals[i];
    if (v.is_array()) {
      large[i] = v.as_array().size() > 1;
    } else if (!python_number(v)) {
      plain = false;
    }
  }
  size_t n_large = 0;
  for (size_t k = 0; k < ns; ++k) {
    const FusedExpr::Step& s = fx.steps[k];
    large[nl + k] = large[s.a] || (s.binary && large[s.b]);
    n_large += large[nl + k];
  }
  if (!plain || n_large == 0) return unfused_or_decline(0);
  for (size_t k = 0; k < ns; ++k) {
    const FusedExpr::Step& s = fx.steps[k];
    if (large[nl + k]) continue;
    // the operands stay: a large step may read them too, and a fall-back to the
    // unfused steps below runs this one again (small values: copies are cheap)
    std::optional<Value> y;
    if (s.binary) y = vals[s.b];
    vals[nl + k] = run_step(s, vals[s.a], std::move(y));
  }
  // The array operands of the large steps share one float dtype; the
  // other operands are Python numbers (weak: they take that dtype).
  std::vector<Shape> shapes;
  auto leaf_ok = [&](size_t id) {
    const Value& v = vals[id];
    if (python_number(v)) return true;
    if (!v.is_array()) return false;
    const Array& a = v.as_array();
    if (a.dtype() != DType::float64 && a.dtype() != DType::float32) return false;
    if (a.weak()) return false;
    if (!dtype) dtype = a.dtype();
    if (*dtype != a.dtype()) return false;
    shapes.push_back(a.shape());
    return true;
  };
  bool ok = true;
  std::vector<kernels::FusedStep> steps;
  std::vector<int> renumber(nl + ns, -1);
  std::vector<size_t> leaf_ids;
  auto operand = [&](size_t id) -> int {
    if (id >= nl && large[id]) return renumber[id];
    ok = ok && leaf_ok(id);
    leaf_ids.push_back(id);
    return -1 - static_cast<int>(leaf_ids.size() - 1);  // fixed up below
  };
  for (size_t k = 0; k < ns && ok; ++k) {
    const FusedExpr::Step& s = fx.steps[k];
    if (!large[nl + k]) continue;
    kernels::FusedStep st;
    st.binary = s.binary;
    st.bop = s.bop;
    st.uop = s.uop;
    st.a = operand(s.a);
    if (s.binary) st.b = operand(s.b);
    renumber[nl + k] = static_cast<int>(steps.size());
    steps.push_back(st);
  }
  // The small steps are done: the unfused way goes on from the first large one.
  size_t first_large = 0;
  while (first_large < ns && !large[nl + first_large]) ++first_large;
  if (!ok || !dtype) return unfused_or_decline(first_large);
  Shape out_shape;
  try {
    out_shape = kernels::broadcast_shapes(shapes, "fused");
  } catch (const std::invalid_argument&) {
    // Shapes that do not broadcast: the unfused steps report it where it fails.
    return unfused_or_decline(first_large);
  }
  // Leaves in order, then step results: renumber operands to the kernel's
  // numbering (leaves first).
  const int n_kleaves = static_cast<int>(leaf_ids.size());
  std::vector<kernels::FusedLeaf> leaves(leaf_ids.size());
  for (size_t j = 0; j < leaf_ids.size(); ++j) {
    const Value& v = vals[leaf_ids[j]];
    if (v.is_array()) {
      leaves[j].array = &v.as_array();
    } else {
      leaves[j].scalar = weak_scalar(v, *dtype);
    }
  }
  auto fix = [&](int id) { return id < 0 ? -1 - id : n_kleaves + id; };
  for (size_t k = 0; k < steps.size(); ++k) {
    kernels::FusedStep& st = steps[k];
    st.a = fix(st.a);
    if (!st.binary) continue;
    st.b = fix(st.b);
    if (st.bop == BinaryOp::power && st.b < n_kleaves) {
      // A scalar or size-1 exponent: the kernels' shortcuts (x ** 2 is x * x).
      const kernels::FusedLeaf& e = leaves[st.b];
      if (!e.array) {
        st.pow = *dtype == DType::float32 ? kernels::pow_shortcut(static_cast<float>(e.scalar))
                                          : kernels::pow_shortcut(e.scalar);
      } else if (e.array->size() == 1) {
        st.pow = *dtype == DType::float32 ? kernels::pow_shortcut(*e.array->origin<float>())
                                          : kernels::pow_shortcut(*e.array->origin<double>());
      }
    }
  }
  double cost = 0.0;
  for (const kernels::FusedStep& st : steps) {
    cost += st.binary ? kernels::cost_ns(st.bop) : kernels::cost_ns(st.uop);
  }
  if (red) {
    if (std::optional<Value> r = reduce_in_pass(*red, steps, leaves, out_shape, *dtype, cost)) {
      *reduced = true;
      return std::move(*r);
    }
  }
  if (dest && dest->dtype() == *dtype && dest->writable() && dest->ndim() > 0) {
    bool fits = true;
    for (const kernels::FusedLeaf& l : leaves) {
      if (l.array && (l.array->ndim() > dest->ndim() ||
                      (l.array->may_overlap(*dest) && !same_view(*l.array, *dest)))) {
        fits = false;
      }
    }
    if (fits) {
      shapes.push_back(dest->shape());
      try {
        fits = kernels::broadcast_shapes(shapes, "fused") == dest->shape();
      } catch (const std::invalid_argument&) {
        fits = false;
      }
    }
    if (fits) {
      Array target = *dest;
      kernels::FusedPlan plan(std::move(steps), std::move(leaves), target);
      parallel_for(plan.size(), cost, [&](int64_t b, int64_t e) { plan.run(b, e); });
      *wrote = true;
      return Value();
    }
  }
  if (give_back) return unfused_or_decline(0);
  Array out(*dtype, out_shape);
  kernels::FusedPlan plan(std::move(steps), std::move(leaves), out);
  parallel_for(plan.size(), cost, [&](int64_t b, int64_t e) { plan.run(b, e); });
  return Value(std::move(out));
}

// An index of basic indexing (a view of x): an int, a slice, nil (newaxis)
// or "..." (a bool is a mask, as in NumPy).
bool basic_index(const Value& v) {
  return v.is_int() || v.is_slice() || v.is_nil() || (v.is_string() && v.as_string() == "...");
}

// The indices a[1 .. n], as the list getitem's and setitem's variadic
// parameter takes them.
Value indices_of(const Args& a, size_t n) {
  List l;
  for (size_t i = 0; i < n; ++i) l.push_back(a[1 + i]);
  return Value(std::move(l));
}

// x[indices...] = expr: leaves after x and the indices. The selection as a
// view of x is the fused pass's destination when it qualifies
// (eval_fused); otherwise the value is computed and setitem assigns it.
Value eval_fused_setitem(const FusedExpr& fx, const PrimitiveSpec& value_spec, size_t n_indices,
                         Args& a) {
  static const PrimitiveSpec& getitem = *find_primitive("getitem");
  static const PrimitiveSpec& setitem = *find_primitive("setitem");
  std::vector<Value> leaves;
  for (size_t i = 0; i < fx.n_leaves; ++i) leaves.push_back(a.take(1 + n_indices + i));
  const Value& x = a[0];
  if (const TiledOverload* tiled = find_tiled_overload(value_spec, leaves)) {
    // Tiled leaves: the value by the elementwise tiled overload, as unfused.
    Args va(value_spec, std::move(leaves));
    va.pack_views();
    Value v = (*tiled)(value_spec, va).wait();
    Args sa(setitem, {x, std::move(v), indices_of(a, n_indices)});
    return run_primitive(setitem, sa);
  }
  std::optional<Array> dest;
  bool basic = x.is_array() && is_floating(x.as_array().dtype()) && x.as_array().writable();
  for (size_t i = 0; i < n_indices && basic; ++i) basic = basic_index(a[1 + i]);
  if (basic) {
    Args ga(getitem, {x, indices_of(a, n_indices)});
    Value d = run_primitive(getitem, ga);
    if (d.is_array() && d.as_array().shares_storage(x.as_array())) dest = d.as_array();
  }
  bool wrote = false;
  Value v = eval_fused(fx, std::move(leaves), dest ? &*dest : nullptr, &wrote);
  if (wrote) return x;
  Args sa(setitem, {x, std::move(v), indices_of(a, n_indices)});
  return run_primitive(setitem, sa);
}

// x OP= expression: x, then the expression's leaves. When x is a float array
// the whole x OP expression is one pass written into x (no temporary for the
// expression, nor a second pass to apply it) if eval_fused can write it there:
// the leaves of one dtype, which is x's (so NumPy's same_kind cast is the
// identity), the result of x's shape and no leaf overlapping x other than x
// itself. Otherwise the expression's value, then the in-place primitive on x
// and it, exactly as unfused (its casts, errors and rebinding of numbers).
Value eval_fused_in_place(const FusedExpr& whole, const FusedExpr& value_fx,
                          const PrimitiveSpec& value_spec, const PrimitiveSpec& in_place,
                          Args& a) {
  std::vector<Value> leaves;
  leaves.reserve(whole.n_leaves);
  bool tiled = false;
  for (size_t i = 0; i < whole.n_leaves; ++i) {
    leaves.push_back(a.take(i));
    tiled = tiled || leaves.back().is_tiled();
  }
  if (!tiled && leaves[0].is_array()) {
    const Array x = leaves[0].as_array();
    if (x.ndim() > 0 && x.writable() &&
        (x.dtype() == DType::float64 || x.dtype() == DType::float32)) {
      if (whole.steps.size() == 2 && whole.steps[0].binary && whole.steps[0].a == 1 &&
          whole.steps[0].b == 2) {
        // x OP= a OP2 b, the usual case: one loop over a small 1-D x.
        kernels::FusedLeaf ab[2];
        bool ok = true;
        for (int k = 0; k < 2 && ok; ++k) {
          const Value& v = leaves[1 + k];
          if (python_number(v)) {
            ab[k].scalar = weak_scalar(v, x.dtype());
          } else {
            ok = v.is_array() && !v.as_array().weak();
            if (ok) ab[k].array = &v.as_array();
          }
        }
        Array target = x;
        if (ok && kernels::update_in_place_1d(whole.steps[1].bop, whole.steps[0].bop, target,
                                              ab[0], ab[1])) {
          return Value(x);
        }
      }
      std::vector<Value> back;
      bool wrote = false;
      eval_fused(whole, std::move(leaves), &x, &wrote, nullptr, nullptr, &back);
      if (wrote) return Value(x);
      leaves = std::move(back);
    }
  }
  std::vector<Value> value_leaves(std::make_move_iterator(leaves.begin() + 1),
                                  std::make_move_iterator(leaves.end()));
  Value value;
  if (const TiledOverload* t = tiled ? find_tiled_overload(value_spec, value_leaves) : nullptr) {
    Args va(value_spec, std::move(value_leaves));
    va.pack_views();
    value = (*t)(value_spec, va).wait();
  } else {
    value = eval_fused(value_fx, std::move(value_leaves), nullptr, nullptr);
  }
  if (in_place.scalar_binary && leaves[0].is_scalar() && value.is_scalar()) {
    // Two Python numbers: the unfused call's scalar arithmetic, whose
    // errors name the in-place operator (`[iadd] integer overflow`).
    return in_place.scalar_binary(in_place, leaves[0], value);
  }
  Args ia(in_place, {std::move(leaves[0]), std::move(value)});
  return run_primitive(in_place, ia);
}

// The reductions a fused expression's value may go straight into.
std::optional<kernels::ReduceKind> fused_reduction_kind(const std::string& name) {
  if (name == "sum") return kernels::ReduceKind::sum;
  if (name == "mean") return kernels::ReduceKind::mean;
  if (name == "prod") return kernels::ReduceKind::prod;
  if (name == "max" || name == "amax") return kernels::ReduceKind::max;
  if (name == "min" || name == "amin") return kernels::ReduceKind::min;
  return std::nullopt;
}

// reduce(expression, args...): the leaves, then the reduction's arguments.
Value eval_fused_reduce(const FusedExpr& fx, const PrimitiveSpec& value_spec,
                        const PrimitiveSpec& reduce, kernels::ReduceKind kind, Args& a) {
  const size_t nl = fx.n_leaves;
  std::vector<Value> leaves;
  for (size_t i = 0; i < nl; ++i) leaves.push_back(a.take(i));
  auto reduce_value = [&](Value v) {
    std::vector<Value> vals{std::move(v)};
    for (size_t i = nl; i < a.size(); ++i) vals.push_back(a[i]);
    return call_primitive(reduce.name, std::move(vals));
  };
  if (const TiledOverload* tiled = find_tiled_overload(value_spec, leaves)) {
    // Tiled leaves: the value by the elementwise tiled overload, as unfused.
    Args va(value_spec, std::move(leaves));
    va.pack_views();
    return reduce_value((*tiled)(value_spec, va).wait());
  }
  const FusedReduction red{kind, &a, nl, reduce.params.size() > 3};
  bool reduced = false;
  Value v = eval_fused(fx, std::move(leaves), nullptr, nullptr, &red, &reduced);
  if (reduced) return v;
  return reduce_value(std::move(v));
}

}  // namespace

bool fusable_reduction(const PrimitiveSpec& reduce) {
  return fused_reduction_kind(reduce.name).has_value();
}

std::shared_ptr<const PrimitiveSpec> make_fused_reduce_spec(std::shared_ptr<const FusedExpr> expr,
                                                            const PrimitiveSpec& reduce) {
  const kernels::ReduceKind kind = *fused_reduction_kind(reduce.name);
  std::shared_ptr<const PrimitiveSpec> value_spec = make_fused_spec(expr);
  auto spec = std::make_shared<PrimitiveSpec>(*value_spec);
  spec->name = reduce.name + "_" + value_spec->name;
  // No tiled overload under this name or family: tiled leaves are handled
  // in eval by the elementwise overload and the reduction's own.
  spec->family = "fused_reduction";
  spec->params.insert(spec->params.end(), reduce.params.begin() + 1, reduce.params.end());
  spec->help = reduce.name +
               " of an expression of elementwise primitives, reduced as the expression is "
               "computed when it can be (docs/runtime.md).";
  spec->ns_per_element = value_spec->ns_per_element + reduce.ns_per_element;
  const PrimitiveSpec* r = &reduce;  // registered primitives live as long as the program
  spec->eval = [expr, value_spec, r, kind](Args& a) -> Value {
    return eval_fused_reduce(*expr, *value_spec, *r, kind, a);
  };
  return spec;
}

std::shared_ptr<const PrimitiveSpec> make_fused_spec(std::shared_ptr<const FusedExpr> expr) {
  auto spec = std::make_shared<PrimitiveSpec>();
  std::string name = "fused(";
  double cost = 0.0;
  for (size_t k = 0; k < expr->steps.size(); ++k) {
    name += (k ? "+" : "") + expr->steps[k].spec->name;
    cost += expr->steps[k].spec->ns_per_element;
  }
  spec->name = name + ")";
  // The elementwise family: tiled arrays among the leaves go through the
  // elementwise tiled overload (each locality computes its tile).
  spec->family = "arithmetic";
  for (size_t i = 0; i < expr->n_leaves; ++i) spec->params.push_back({"x" + std::to_string(i)});
  spec->help = "An expression of elementwise primitives computed in one pass (docs/runtime.md).";
  spec->ns_per_element = cost;
  // Leaves reach eval as they are: views unpacked (the kernel reads them
  // through their strides), dtypes unconverted (the steps convert their own).
  spec->views = true;
  spec->dtype_rule = DTypeRule::raw;
  spec->complex = true;
  spec->eval = [expr](Args& a) -> Value {
    std::vector<Value> leaves;
    for (size_t i = 0; i < expr->n_leaves; ++i) leaves.push_back(a.take(i));
    return eval_fused(*expr, std::move(leaves), nullptr, nullptr);
  };
  return spec;
}

const PrimitiveSpec* fusable_in_place_base(const PrimitiveSpec& spec) {
  // The operators whose float result the fused pass computes as the base
  // primitive does (one rounding per step).
  static const std::pair<const char*, const char*> kBases[] = {
      {"iadd", "add"}, {"isub", "subtract"}, {"imul", "multiply"}, {"itruediv", "divide"}};
  if (spec.family != "inplace") return nullptr;
  for (const auto& [op, base] : kBases) {
    if (spec.name == op) {
      const PrimitiveSpec* b = find_primitive(base);
      return b && b->fuse_binary >= 0 ? b : nullptr;
    }
  }
  return nullptr;
}

std::shared_ptr<const PrimitiveSpec> make_fused_in_place_spec(
    std::shared_ptr<const FusedExpr> whole, std::shared_ptr<const FusedExpr> value,
    const PrimitiveSpec& in_place) {
  std::shared_ptr<const PrimitiveSpec> value_spec = make_fused_spec(value);
  auto spec = std::make_shared<PrimitiveSpec>(*value_spec);
  spec->name = in_place.name + "_" + value_spec->name;
  spec->family = "inplace";  // no tiled overload: tiled leaves take the fallback
  spec->params.clear();
  spec->params.push_back({"x"});
  for (size_t i = 0; i < value->n_leaves; ++i) spec->params.push_back({"x" + std::to_string(i)});
  spec->help = "x " + in_place.name +
               " an expression of elementwise primitives, computed in one pass into x when "
               "it can be (docs/runtime.md).";
  spec->writes = true;
  const PrimitiveSpec* ip = &in_place;  // registered: lives as long as the program
  spec->eval = [whole, value, value_spec, ip](Args& a) -> Value {
    return eval_fused_in_place(*whole, *value, *value_spec, *ip, a);
  };
  return spec;
}

std::shared_ptr<const PrimitiveSpec> make_fused_setitem_spec(std::shared_ptr<const FusedExpr> expr,
                                                             size_t n_indices) {
  std::shared_ptr<const PrimitiveSpec> value_spec = make_fused_spec(expr);
  auto spec = std::make_shared<PrimitiveSpec>(*value_spec);
  spec->name = "setitem_" + spec->name;
  spec->family = "indexing";  // no tiled overload: a tiled x is handled by the fallback's setitem
  spec->params.clear();
  spec->params.push_back({"x"});
  for (size_t i = 0; i < n_indices; ++i) spec->params.push_back({"index" + std::to_string(i)});
  for (size_t i = 0; i < expr->n_leaves; ++i) spec->params.push_back({"x" + std::to_string(i)});
  spec->help =
      "x[indices] = an expression of elementwise primitives, computed in one pass into "
      "x's selection when it can be (docs/runtime.md).";
  spec->writes = true;
  spec->eval = [expr, value_spec, n_indices](Args& a) -> Value {
    return eval_fused_setitem(*expr, *value_spec, n_indices, a);
  };
  return spec;
}

}  // namespace tessera
