// sort_order: the order of Python's sorted(items, key=...) over the keys
// already computed (python/tessera/_numpy_apply_lib.py's _sorted_by_key).
// It merges exactly as that library's merge sort did in the language: the
// same bottom-up runs and the same comparisons, `keys[j] < keys[i]` (with
// reverse, `keys[j] > keys[i]`) only, so equal keys keep their order (stable,
// reverse too) and keys that cannot be ordered raise the same TypeError at the
// same first pair. (NaN keys, which no order holds, may end elsewhere than
// under Python's timsort, as they did in the library's merge sort.)
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/primitives/elementwise_ops.hpp"
#include "tessera/primitives/python_values.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

// keys[j] before keys[i]: Python's `<` (`>` when reverse) of the two keys, as
// the language's less/greater primitives compute it.
class KeyOrder {
 public:
  KeyOrder(const Value& keys, bool reverse) : reverse_(reverse) {
    if (const NumberList* n = keys.number_items()) {
      numbers_ = n;
    } else {
      values_.reserve(keys.list_size());
      for (size_t i = 0; i < keys.list_size(); ++i) values_.push_back(keys.list_item(i));
    }
  }

  bool before(int64_t j, int64_t i) const {
    if (numbers_) {
      // Unboxed Python numbers of one kind: the comparison in place.
      const uint64_t a = numbers_->bits[static_cast<size_t>(j)];
      const uint64_t b = numbers_->bits[static_cast<size_t>(i)];
      const NumberKind k = numbers_->kind;
      if (k == NumberKind::py_float || k == NumberKind::np_float64 || k == NumberKind::np_float32) {
        double x, y;
        std::memcpy(&x, &a, 8);
        std::memcpy(&y, &b, 8);
        return reverse_ ? x > y : x < y;
      }
      const auto x = static_cast<int64_t>(a), y = static_cast<int64_t>(b);
      return reverse_ ? x > y : x < y;
    }
    const Value& x = values_[static_cast<size_t>(j)];
    const Value& y = values_[static_cast<size_t>(i)];
    const BinaryOp op = reverse_ ? BinaryOp::greater : BinaryOp::less;
    const char* name = reverse_ ? "greater" : "less";
    const Value r = python_operands(x, y) ? python_compare(op, x, y, name)
                                          : binary_op(op, x, y, name);
    return r.truthy();
  }

 private:
  bool reverse_;
  const NumberList* numbers_ = nullptr;
  std::vector<Value> values_;
};

Value eval_sort_order(Args& a) {
  const Value& keys = a[0];
  if (!keys.is_list()) a.type_error(0, "a list or tuple of keys");
  const bool reverse = a.boolean(1);
  const auto n = static_cast<int64_t>(keys.list_size());
  const KeyOrder order_of(keys, reverse);
  std::vector<int64_t> order(static_cast<size_t>(n)), merged;
  for (int64_t i = 0; i < n; ++i) order[static_cast<size_t>(i)] = i;
  merged.reserve(static_cast<size_t>(n));
  for (int64_t width = 1; width < n; width *= 2) {
    merged.clear();
    for (int64_t lo = 0; lo < n; lo += 2 * width) {
      const int64_t mid = std::min(lo + width, n), hi = std::min(lo + 2 * width, n);
      int64_t i = lo, j = mid;
      while (i < mid && j < hi) {
        if (order_of.before(order[static_cast<size_t>(j)], order[static_cast<size_t>(i)]))
          merged.push_back(order[static_cast<size_t>(j++)]);
        else
          merged.push_back(order[static_cast<size_t>(i++)]);
      }
      while (i < mid) merged.push_back(order[static_cast<size_t>(i++)]);
      while (j < hi) merged.push_back(order[static_cast<size_t>(j++)]);
    }
    order.swap(merged);
  }
  std::vector<uint64_t> bits(order.begin(), order.end());
  return Value::number_list(NumberKind::py_int, std::move(bits));
}

const bool registered_sort_order = register_primitives(without_gradient({
    {.name = "sort_order",
     .family = "sorting",
     .params = {{"keys"}, opt("reverse", false)},
     .help = "The indices that sort a list or tuple of keys as Python's sorted() does: "
             "stable (equal keys keep their order, with reverse=true too), keys compared "
             "with Python's < only (> with reverse), TypeError for keys that cannot be "
             "ordered. sorted(xs, key=f) is [xs[i] for i in sort_order([f(x) for x in xs])].",
     .eval = eval_sort_order,
     .ns_per_element = 50.0},
}));

}  // namespace

}  // namespace tessera
