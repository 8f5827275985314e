#include "tessera/lang/tree.hpp"

namespace tessera {

std::shared_ptr<const Closure> Closure::weakened() const {
  auto c = std::make_shared<Closure>(code_, nullptr, defaults_);
  c->weak_env_ = env_;
  return c;
}

std::shared_ptr<const Closure> Closure::strengthened() const {
  return std::make_shared<Closure>(code_, weak_env_.lock(), defaults_);
}

std::optional<Value> Frame::get(size_t slot) const {
  std::lock_guard lock(mutex_);
  if (!defined_[slot]) return std::nullopt;
  const Value& v = slots_[slot];
  if (v.is_function()) {
    if (auto* c = dynamic_cast<const Closure*>(v.as_function().get()); c && c->is_weak()) {
      return Value(std::static_pointer_cast<const Callable>(c->strengthened()));
    }
  }
  return v;
}

namespace {

// Lists grow by append, and each grown list is stored again: looking at the
// last elements finds a closure at the store that adds it.
constexpr size_t kScanElements = 256;
constexpr int kScanDepth = 4;

template <class F>
void for_each_closure(const Value& v, int depth, F&& fn) {
  if (v.is_function()) {
    if (auto* c = dynamic_cast<const Closure*>(v.as_function().get())) fn(*c);
  } else if (depth > 0 && v.is_list()) {
    const List& l = v.as_list();
    for (size_t i = l.size() > kScanElements ? l.size() - kScanElements : 0; i < l.size(); ++i) {
      for_each_closure(l[i], depth - 1, fn);
    }
  } else if (depth > 0 && v.is_dict()) {
    const auto& items = v.as_dict().items;
    size_t from = items.size() > kScanElements ? items.size() - kScanElements : 0;
    for (size_t i = from; i < items.size(); ++i) for_each_closure(items[i].second, depth - 1, fn);
  }
}

}  // namespace

bool refers_to_frame(const Value& v, const Frame* frame) {
  bool found = false;
  for_each_closure(v, kScanDepth, [&](const Closure& c) {
    if (Frame* env = c.env_raw(); env && env->within(frame)) found = true;
  });
  return found;
}

void Frame::set(size_t slot, Value v) {
  // A closure stored here keeps every frame of its chain alive; those that
  // do not contain this frame have escaped their function.
  for_each_closure(v, kScanDepth, [&](const Closure& c) {
    for (Frame* g = c.env_raw(); g; g = g->parent()) {
      if (!within(g)) g->escaped_.store(true, std::memory_order_relaxed);
    }
  });
  if (v.is_function()) {
    if (auto* c = dynamic_cast<const Closure*>(v.as_function().get()); c && c->closes_over(this)) {
      v = Value(std::static_pointer_cast<const Callable>(c->weakened()));
    }
  }
  std::lock_guard lock(mutex_);
  slots_[slot] = std::move(v);
  defined_[slot] = 1;
}

}  // namespace tessera
