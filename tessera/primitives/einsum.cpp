// einsum and cross: products written in terms of the other primitives.
//
// einsum takes each operand's diagonals (repeated labels), sums labels no one
// else needs, then contracts the operands left to right, each pair as one
// batched matmul (transpose + reshape around it), and finally permutes the
// result into the output's order; the dtypes are those of matmul and sum.
#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

List int_list(const std::vector<int64_t>& v) {
  List l;
  for (int64_t x : v) l.push_back(Value(x));
  return l;
}

// An operand with one label per axis. Letters are their char code; the
// axes an ellipsis stands for are labels 1000 + k (k counted from the
// right, so operands with fewer such axes broadcast as in NumPy).
struct Term {
  Array x;
  std::vector<int> labels;
};

constexpr int kEllipsisBase = 1000;

[[noreturn]] void einsum_error(const std::string& what, const std::string& subscripts) {
  throw std::invalid_argument(error_message("[einsum] ", what, ": subscripts '", subscripts, "'"));
}

// Parses one operand's subscripts ("ij", "...j", "i...") for an array of
// `ndim` axes; `max_ell` tracks the most axes an ellipsis stands for.
std::vector<int> parse_term(const std::string& s, int ndim, const std::string& all, int* max_ell,
                            bool is_output) {
  std::vector<int> letters_before, letters_after;
  bool ellipsis = false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '.') {
      if (ellipsis || s.compare(i, 3, "...") != 0) {
        einsum_error("invalid '.' (an ellipsis is '...', once per operand)", all);
      }
      ellipsis = true;
      i += 2;
      continue;
    }
    if (c == ' ') continue;
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) {
      einsum_error(std::string("invalid subscript '") + c + "' (letters only)", all);
    }
    (ellipsis ? letters_after : letters_before).push_back(c);
  }
  int n_letters = static_cast<int>(letters_before.size() + letters_after.size());
  int n_ell = 0;
  if (is_output) {
    n_ell = ellipsis ? *max_ell : 0;
  } else if (ellipsis) {
    n_ell = ndim - n_letters;
    if (n_ell < 0) {
      einsum_error(error_message("an operand has ", ndim, " dimensions but more subscripts"), all);
    }
    *max_ell = std::max(*max_ell, n_ell);
  } else if (n_letters != ndim) {
    einsum_error(error_message("an operand has ", ndim, " dimensions but ", n_letters,
                               " subscripts"),
                 all);
  }
  std::vector<int> labels(letters_before.begin(), letters_before.end());
  for (int k = n_ell - 1; k >= 0; --k) labels.push_back(kEllipsisBase + k);
  labels.insert(labels.end(), letters_after.begin(), letters_after.end());
  return labels;
}

// The diagonal over repeated labels: x[..., i, ..., i, ...] -> one axis i.
Term take_diagonals(Term t, const std::string& all) {
  std::vector<int> uniq;
  for (int l : t.labels) {
    if (std::find(uniq.begin(), uniq.end(), l) == uniq.end()) uniq.push_back(l);
  }
  if (uniq.size() == t.labels.size()) return t;
  const int nd = t.x.ndim();
  std::vector<int64_t> stride(nd, 1);
  for (int d = nd - 2; d >= 0; --d) stride[d] = stride[d + 1] * t.x.dim(d + 1);
  Shape shape;
  std::vector<int64_t> ustride;
  for (int l : uniq) {
    int64_t extent = -1, s = 0;
    for (int d = 0; d < nd; ++d) {
      if (t.labels[d] != l) continue;
      if (extent >= 0 && extent != t.x.dim(d)) {
        einsum_error(error_message("dimensions in operand for collapsing index '",
                                   static_cast<char>(l), "' don't match (", extent, " != ",
                                   t.x.dim(d), ")"),
                     all);
      }
      extent = t.x.dim(d);
      s += stride[d];
    }
    shape.push_back(extent);
    ustride.push_back(s);
  }
  Array out(t.x.dtype(), shape);
  dispatch(t.x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* src = t.x.data<T>();
    T* dst = out.data<T>();
    std::vector<int64_t> idx(shape.size(), 0);
    int64_t off = 0;
    for (int64_t i = 0; i < out.size(); ++i) {
      dst[i] = src[off];
      for (int k = static_cast<int>(shape.size()) - 1; k >= 0; --k) {
        off += ustride[k];
        if (++idx[k] < shape[k]) break;
        off -= ustride[k] * shape[k];
        idx[k] = 0;
      }
    }
  });
  return {out, uniq};
}

// Sums the axes whose labels are not in `keep`.
Term sum_unneeded(Term t, const std::vector<int>& keep) {
  List axes;
  std::vector<int> rest;
  for (size_t d = 0; d < t.labels.size(); ++d) {
    if (std::find(keep.begin(), keep.end(), t.labels[d]) == keep.end()) {
      axes.push_back(Value(static_cast<int64_t>(d)));
    } else {
      rest.push_back(t.labels[d]);
    }
  }
  if (axes.empty()) return t;
  Value s = prim("sum", {t.x, Value(axes)});
  return {to_array(s, "einsum"), rest};
}

int64_t extent_of(const Term& t, int label) {
  for (size_t d = 0; d < t.labels.size(); ++d) {
    if (t.labels[d] == label) return t.x.dim(static_cast<int>(d));
  }
  return 1;
}

// Permutes t's axes into `order` (a permutation of its labels).
Array permute(const Term& t, const std::vector<int>& order) {
  std::vector<int64_t> perm;
  bool identity = true;
  for (size_t k = 0; k < order.size(); ++k) {
    auto it = std::find(t.labels.begin(), t.labels.end(), order[k]);
    perm.push_back(it - t.labels.begin());
    identity = identity && perm.back() == static_cast<int64_t>(k);
  }
  if (identity) return t.x;
  return to_array(prim("transpose", {t.x, Value(int_list(perm))}), "einsum");
}

// Contracts a and b over the labels both have that are not in `keep`; the
// labels both have and keep are batch axes.
Term contract(Term a, Term b, const std::vector<int>& keep, const std::string& all) {
  auto has = [](const Term& t, int l) {
    return std::find(t.labels.begin(), t.labels.end(), l) != t.labels.end();
  };
  auto kept = [&](int l) { return std::find(keep.begin(), keep.end(), l) != keep.end(); };
  std::vector<int> batch, left, right, inner;
  for (int l : a.labels) {
    if (has(b, l)) {
      (kept(l) ? batch : inner).push_back(l);
    } else {
      left.push_back(l);
    }
  }
  for (int l : b.labels) {
    if (!has(a, l)) right.push_back(l);
  }
  // Shared axes must agree, or one be 1 (broadcast, as NumPy does).
  std::vector<int64_t> bshape, ishape;
  for (auto* group : {&batch, &inner}) {
    for (int l : *group) {
      int64_t ea = extent_of(a, l), eb = extent_of(b, l);
      if (ea != eb && ea != 1 && eb != 1) {
        std::string name = l >= kEllipsisBase ? "..." : std::string(1, static_cast<char>(l));
        einsum_error(error_message("operands could not be broadcast together: '", name,
                                   "' has extents ", ea, " and ", eb),
                     all);
      }
      (group == &batch ? bshape : ishape).push_back(std::max(ea, eb));
    }
  }
  auto prepare = [&](const Term& t, const std::vector<int>& first, const std::vector<int>& mid,
                     const std::vector<int>& last) {
    std::vector<int> order = first;
    order.insert(order.end(), mid.begin(), mid.end());
    order.insert(order.end(), last.begin(), last.end());
    Array x = permute(t, order);
    std::vector<int64_t> full;
    for (int l : order) {
      auto it = std::find(batch.begin(), batch.end(), l);
      if (it != batch.end()) {
        full.push_back(bshape[it - batch.begin()]);
        continue;
      }
      auto jt = std::find(inner.begin(), inner.end(), l);
      full.push_back(jt != inner.end() ? ishape[jt - inner.begin()] : extent_of(t, l));
    }
    if (Shape(full.begin(), full.end()) != x.shape()) {
      x = to_array(prim("broadcast_to", {x, Value(int_list(full))}), "einsum");
    }
    return x;
  };
  Array pa = prepare(a, batch, left, inner);
  Array pb = prepare(b, batch, inner, right);
  int64_t nb = 1, nl = 1, nk = 1, nr = 1;
  for (int64_t e : bshape) nb *= e;
  for (int l : left) nl *= extent_of(a, l);
  for (int64_t e : ishape) nk *= e;
  for (int l : right) nr *= extent_of(b, l);
  Value ra = prim("reshape", {pa, Value(int_list({nb, nl, nk}))});
  Value rb = prim("reshape", {pb, Value(int_list({nb, nk, nr}))});
  Value prod = prim("matmul", {ra, rb});
  std::vector<int64_t> shape = bshape;
  for (int l : left) shape.push_back(extent_of(a, l));
  for (int l : right) shape.push_back(extent_of(b, l));
  Term out;
  out.x = to_array(prim("reshape", {prod, Value(int_list(shape))}), "einsum");
  out.labels = batch;
  out.labels.insert(out.labels.end(), left.begin(), left.end());
  out.labels.insert(out.labels.end(), right.begin(), right.end());
  return out;
}

Value einsum(Args& a) {
  if (!a[0].is_string()) a.type_error(0, "a subscripts string such as 'ij,jk->ik'");
  const std::string& all = a.string(0);
  const List& ops = a.list(1);
  std::string lhs = all, rhs;
  bool explicit_out = false;
  if (auto p = all.find("->"); p != std::string::npos) {
    lhs = all.substr(0, p);
    rhs = all.substr(p + 2);
    explicit_out = true;
    if (rhs.find("->") != std::string::npos) einsum_error("more than one '->'", all);
  }
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t i = 0; i <= lhs.size(); ++i) {
    if (i == lhs.size() || lhs[i] == ',') {
      parts.push_back(lhs.substr(start, i - start));
      start = i + 1;
    }
  }
  if (parts.size() != ops.size()) {
    einsum_error(error_message(parts.size(), " operand", parts.size() == 1 ? "" : "s",
                               " in the subscripts but ", ops.size(), " given"),
                 all);
  }
  int max_ell = 0;
  std::vector<Term> terms;
  // All-bool operands give a bool result in NumPy (products are and, sums
  // or): computed on 0/1 ints, then compared with 0.
  bool all_bool = true;
  for (const Value& op : ops) all_bool = all_bool && to_array(op, "einsum").dtype() == DType::bool_;
  for (size_t i = 0; i < ops.size(); ++i) {
    // Operands arrive in a list, which may hold strided views: kernels below
    // read contiguous elements.
    Array x = to_array(ops[i], "einsum", "operand").contiguous();
    if (all_bool) x = x.astype(DType::int64);
    terms.push_back({x, parse_term(parts[i], x.ndim(), all, &max_ell, false)});
  }
  std::vector<int> out_labels;
  if (explicit_out) {
    out_labels = parse_term(rhs, 0, all, &max_ell, true);
    std::vector<int> seen;
    for (int l : out_labels) {
      if (std::find(seen.begin(), seen.end(), l) != seen.end()) {
        einsum_error(error_message("output subscript '", static_cast<char>(l),
                                   "' appears more than once"),
                     all);
      }
      seen.push_back(l);
      bool found = false;
      for (auto& t : terms) {
        found = found || std::find(t.labels.begin(), t.labels.end(), l) != t.labels.end();
      }
      if (!found && l < kEllipsisBase) {
        einsum_error(error_message("output subscript '", static_cast<char>(l),
                                   "' does not appear in the inputs"),
                     all);
      }
    }
    // An output '...' with no input ellipsis stands for nothing; input
    // ellipsis axes need one in the output (NumPy does not sum them away).
    if (max_ell > 0 && rhs.find("...") == std::string::npos) {
      einsum_error("output has more dimensions than subscripts given, but no '...' in the "
                   "output to broadcast the extra dimensions",
                   all);
    }
  } else {
    // Implicit output: the ellipsis axes, then the letters used once, sorted.
    std::map<int, int> count;
    for (auto& t : terms) {
      for (int l : t.labels) ++count[l];
    }
    for (int k = max_ell - 1; k >= 0; --k) out_labels.push_back(kEllipsisBase + k);
    std::vector<int> letters;
    for (auto& [l, c] : count) {
      if (l < kEllipsisBase && c == 1) letters.push_back(l);
    }
    std::sort(letters.begin(), letters.end());
    out_labels.insert(out_labels.end(), letters.begin(), letters.end());
  }
  // Labels needed by operands after position i or by the output.
  auto needed_after = [&](size_t i) {
    std::vector<int> keep = out_labels;
    for (size_t j = i + 1; j < terms.size(); ++j) {
      keep.insert(keep.end(), terms[j].labels.begin(), terms[j].labels.end());
    }
    return keep;
  };
  for (size_t i = 0; i < terms.size(); ++i) {
    terms[i] = take_diagonals(std::move(terms[i]), all);
    // Labels of this operand alone (not in the output or another operand).
    std::vector<int> keep = out_labels;
    for (size_t j = 0; j < terms.size(); ++j) {
      if (j != i) keep.insert(keep.end(), terms[j].labels.begin(), terms[j].labels.end());
    }
    terms[i] = sum_unneeded(std::move(terms[i]), keep);
  }
  Term acc = terms[0];
  for (size_t i = 1; i < terms.size(); ++i) {
    acc = contract(std::move(acc), terms[i], needed_after(i), all);
  }
  acc = sum_unneeded(std::move(acc), out_labels);
  // Output axes an operand lacks (a broadcast ellipsis) are extent 1.
  std::vector<int> present;
  for (int l : out_labels) {
    if (std::find(acc.labels.begin(), acc.labels.end(), l) != acc.labels.end()) {
      present.push_back(l);
    }
  }
  Array out = permute(acc, present);
  if (present.size() != out_labels.size()) {
    std::vector<int64_t> shape;
    for (int l : out_labels) shape.push_back(extent_of(acc, l));
    out = to_array(prim("reshape", {out, Value(int_list(shape))}), "einsum");
  }
  if (all_bool) return prim("not_equal", {out, Value(int64_t{0})});
  return out.shares_storage(terms[0].x) ? out.copy() : out;
}

// cross(a, b, axisa, axisb, axisc, axis): 2- or 3-vectors along the axes.
Value cross(Args& a) {
  Value va = a[0], vb = a[1];
  Value axa = a[2], axb = a[3], axc = a[4];
  if (!a.is_nil(5)) axa = axb = axc = a[5];
  Array xa = a.array(0), xb = a.array(1);
  if (xa.ndim() == 0 || xb.ndim() == 0) {
    throw std::invalid_argument(error_message("[cross] both operands need at least one "
                                              "dimension: got ",
                                              va.describe(), " and ", vb.describe()));
  }
  va = prim("moveaxis", {xa, axa, Value(int64_t{-1})});
  vb = prim("moveaxis", {xb, axb, Value(int64_t{-1})});
  int64_t na = to_array(va, "cross").shape().back();
  int64_t nb = to_array(vb, "cross").shape().back();
  if ((na != 2 && na != 3) || (nb != 2 && nb != 3)) {
    throw std::invalid_argument(error_message(
        "[cross] incompatible dimensions for cross product (dimension must be 2 or 3): got ",
        na, " and ", nb));
  }
  Value ell = Value("...");
  auto comp = [&](const Value& v, int64_t n, int64_t k) -> Value {
    if (k >= n) return Value(int64_t{0});
    return prim("getitem", {v, ell, Value(k)});
  };
  auto mul = [](const Value& x, const Value& y) { return prim("multiply", {x, y}); };
  auto sub = [](const Value& x, const Value& y) { return prim("subtract", {x, y}); };
  Value a0 = comp(va, na, 0), a1 = comp(va, na, 1), b0 = comp(vb, nb, 0), b1 = comp(vb, nb, 1);
  Value z = sub(mul(a0, b1), mul(a1, b0));
  if (na == 2 && nb == 2) {
    // Also broadcasts z to the leading shapes of both operands.
    return z;
  }
  Value a2 = comp(va, na, 2), b2 = comp(vb, nb, 2);
  Value x = sub(mul(a1, b2), mul(a2, b1));
  Value y = sub(mul(a2, b0), mul(a0, b2));
  Value stacked = prim("stack", {Value(List{x, y, z}), Value(int64_t{-1})});
  return prim("moveaxis", {stacked, Value(int64_t{-1}), axc});
}

// The cotangent of cross's a or b (part): with 2-vectors taken as 3-vectors
// whose z is 0, g . (a x b) = a . (b x g) = b . (g x a).
Value cross_grad(Args& a) {
  Value axa = a[3], axb = a[4], axc = a[5];
  if (!a.is_nil(6)) axa = axb = axc = a[6];
  Array xa = a.array(1), xb = a.array(2);
  const std::string& part = a.string(7);
  // Axes counted from the end stay valid on broadcast results.
  auto from_end = [](const Value& ax, int ndim) {
    int64_t v = ax.is_int() ? ax.as_int() : -1;
    return Value(v < 0 ? v : v - ndim);
  };
  Value va = prim("moveaxis", {xa, axa, Value(int64_t{-1})});
  Value vb = prim("moveaxis", {xb, axb, Value(int64_t{-1})});
  int64_t na = to_array(va, "cross").shape().back();
  int64_t nb = to_array(vb, "cross").shape().back();
  auto as3 = [](const Value& v, int64_t n) {
    if (n == 3) return v;
    Array x = to_array(v, "cross");
    List widths;
    for (int d = 0; d < x.ndim(); ++d) {
      bool last = d + 1 == x.ndim();
      widths.push_back(Value(List{Value(int64_t{0}), Value(int64_t{last ? 1 : 0})}));
    }
    return prim("pad", {v, Value(widths)});
  };
  Value g3;
  if (na == 2 && nb == 2) {
    Value zero = prim("zeros_like", {a[0]});
    g3 = prim("stack", {Value(List{zero, zero, a[0]}), Value(int64_t{-1})});
  } else {
    g3 = prim("moveaxis", {a[0], axc, Value(int64_t{-1})});
  }
  bool want_a = part == "a";
  Value r = want_a ? prim("cross", {as3(vb, nb), g3}) : prim("cross", {g3, as3(va, na)});
  int64_t keep = want_a ? na : nb;
  if (keep == 2) {
    r = prim("getitem", {r, Value("..."), Value(Slice{0, 2, std::nullopt})});
  }
  return prim("moveaxis", {r, Value(int64_t{-1}),
                           want_a ? from_end(axa, xa.ndim()) : from_end(axb, xb.ndim())});
}

const bool registered_einsum = register_primitives({
    {.name = "einsum",
     .family = "matrix",
     .params = {{"subscripts"}, {"operands"}},
     .variadic = true,
     .help = "Einstein summation, like numpy.einsum: 'ij,jk->ik' (explicit output), 'ij,jk' "
             "(implicit: the labels used once, sorted), repeated labels for diagonals and "
             "traces ('ii', 'ii->i'), '...' for broadcast axes. Each pair of operands is one "
             "batched matmul (transpose and reshape around it), single labels are summed; "
             "dtypes follow matmul and sum, and all-bool operands give a bool result (and "
             "and or), as in NumPy.",
     .eval = einsum,
     .ns_per_element = 2.0,
     .grads = {"", "einsum_grad(g, subscripts, operands)"}},
    {.name = "cross",
     .family = "matrix",
     .params = {{"a"}, {"b"}, opt("axisa", int64_t{-1}), opt("axisb", int64_t{-1}),
                opt("axisc", int64_t{-1}), opt("axis", Value())},
     .help = "Cross product of 2- or 3-vectors along the given axes (last by default, "
             "broadcasting the others), like numpy.cross; two 2-vectors give the scalar z "
             "component. axis sets axisa, axisb and axisc at once.",
     .eval = cross,
     .ns_per_element = 5.0,
     .grads = {"cross_grad(g, a, b, axisa, axisb, axisc, axis, \"a\")",
               "cross_grad(g, a, b, axisa, axisb, axisc, axis, \"b\")", "", "", "", ""}},
    {.name = "cross_grad",
     .family = "matrix",
     .params = {{"g"}, {"a"}, {"b"}, {"axisa"}, {"axisb"}, {"axisc"}, {"axis"}, opt("part", "a")},
     .help = "The gradient of cross(a, b, axisa, axisb, axisc, axis) with respect to a or b "
             "(part), given the cotangent g of its result (used by autodiff).",
     .eval = cross_grad,
     .ns_per_element = 10.0},
});

}  // namespace

}  // namespace tessera
