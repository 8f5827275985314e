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
  std::lock_guard lock(spin_);
  if (!slots_[slot].defined) return std::nullopt;
  return stored(slot);
}

Value Frame::stored(size_t slot) const {
  const Value& v = slots_[slot].value;
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
  } else if (depth > 0 && v.is_list() && v.number_items() == nullptr) {
    // (A list held unboxed holds numbers only, as a compact dict.)
    const List& l = v.as_list();
    for (size_t i = l.size() > kScanElements ? l.size() - kScanElements : 0; i < l.size(); ++i) {
      // Numbers and strings (a table's rows) hold no closure: no call for them.
      if (l[i].is_function() || l[i].is_list() || l[i].is_dict())
        for_each_closure(l[i], depth - 1, fn);
    }
  } else if (depth > 0 && v.is_dict() && !v.as_dict().items.compact()) {
    // (A compact dict holds numbers only: no closure, and nothing written out to look.)
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

Future<Value> Frame::read(size_t slot) const {
  std::lock_guard lock(spin_);
  if (!slots_[slot].defined) return Future<Value>();
  for (const auto& p : pending_) {
    if (p.slot == slot) return p.future;
  }
  return Future<Value>::ready(stored(slot));
}

bool Frame::take_now(size_t slot, Value& out) {
  std::lock_guard lock(spin_);
  if (!slots_[slot].defined) return false;
  for (const auto& p : pending_) {
    if (p.slot == slot) return false;
  }
  if (!slots_[slot].value.is_list()) return false;
  out = std::move(slots_[slot].value);
  slots_[slot].value = Value();
  return true;
}

bool Frame::read_now(size_t slot, Value& out) const {
  std::lock_guard lock(spin_);
  if (!slots_[slot].defined) return false;
  for (const auto& p : pending_) {
    if (p.slot == slot) return false;
  }
  const Value& v = slots_[slot].value;
  if (v.is_function()) {
    out = stored(slot);
  } else {
    out = v;
  }
  return true;
}

bool Frame::closure_now(size_t slot, const FunctionCode*& code, Frame*& env) const {
  std::lock_guard lock(spin_);
  if (!slots_[slot].defined) return false;
  for (const auto& p : pending_) {
    if (p.slot == slot) return false;
  }
  const Value& v = slots_[slot].value;
  if (!v.is_function()) return false;
  auto* c = dynamic_cast<const Closure*>(v.as_function().get());
  if (!c) return false;
  code = &c->code();
  env = c->env_raw();
  return true;
}

Value Frame::prepare(Value v) {
  // A closure stored here keeps every frame of its chain alive; those that
  // do not contain this frame have escaped their function.
  for_each_closure(v, kScanDepth, [&](const Closure& c) {
    for (Frame* g = c.env_raw(); g; g = g->parent()) {
      if (!within(g)) g->escaped_.store(true, std::memory_order_relaxed);
    }
  });
  // A program's top-level frame (no parent) is cleared when its run ends
  // (Program::run, Program::start), which breaks such a cycle: its closures
  // are kept as they are, with no weak copy to make now and a strong one
  // on every read.
  if (v.is_function() && parent_) {
    if (auto* c = dynamic_cast<const Closure*>(v.as_function().get()); c && c->closes_over(this)) {
      v = Value(std::static_pointer_cast<const Callable>(c->weakened()));
    }
  }
  return v;
}

Future<Value> Frame::take_pending(size_t slot) {
  auto it = std::find_if(pending_.begin(), pending_.end(), [&](const Pending& p) { return p.slot == slot; });
  if (it == pending_.end()) return Future<Value>();
  Future<Value> f = std::move(it->future);
  pending_.erase(it);
  return f;
}

void Frame::set_appended(size_t slot, Value list, const Value& item) {
  prepare(item);  // the list's other items were looked at when they were stored
  store(slot, std::move(list));
}

void Frame::set_numbers_written(size_t slot, Value list) { store(slot, std::move(list)); }

void Frame::set(size_t slot, Value v) { store(slot, prepare(std::move(v))); }

void Frame::store(size_t slot, Value v) {
  Future<Value> dropped;
  Value old;
  {
    std::lock_guard lock(spin_);
    if (!pending_.empty()) dropped = take_pending(slot);
    old = std::move(slots_[slot].value);
    slots_[slot].value = std::move(v);
    slots_[slot].defined = true;
  }
  // The old value and the dropped future are freed here, unlocked.
}

void Frame::set_pending(size_t slot, const Future<Value>& pending, std::shared_ptr<Frame> keep) {
  uint64_t serial;
  Future<Value> dropped;
  Value old;
  {
    std::lock_guard lock(spin_);
    serial = ++serial_;
    dropped = take_pending(slot);
    pending_.push_back(Pending{slot, serial, pending});
    std::swap(slots_[slot].value, old);
    slots_[slot].defined = true;
  }
  pending.on_ready([this, slot, serial, pending, keep = std::move(keep)] {
    // A failed define stays pending, so its readers get the error.
    if (pending.error()) return;
    Value v = prepare(pending.get());
    Future<Value> done;
    std::lock_guard lock(spin_);
    auto it = std::find_if(pending_.begin(), pending_.end(),
                           [&](const Pending& p) { return p.slot == slot && p.serial == serial; });
    if (it == pending_.end()) return;  // assigned again meanwhile: the newer value stays
    done = std::move(it->future);
    pending_.erase(it);
    std::swap(slots_[slot].value, v);
  });
}

std::vector<Frame::LateRead> Frame::take_finished_late_reads() {
  auto mid = std::stable_partition(late_reads_.begin(), late_reads_.end(),
                                   [](const LateRead& r) { return !r.done.is_ready(); });
  std::vector<LateRead> out(std::make_move_iterator(mid), std::make_move_iterator(late_reads_.end()));
  late_reads_.erase(mid, late_reads_.end());
  return out;
}

void Frame::note_late_reads(const std::vector<size_t>* slots, const Future<Value>& done) {
  std::vector<LateRead> finished;
  std::lock_guard lock(spin_);
  finished = take_finished_late_reads();
  late_reads_.push_back({slots, done});
  has_late_reads_.store(true, std::memory_order_release);
}

std::optional<Future<Value>> Frame::late_read_of(const std::vector<size_t>* slots) {
  std::vector<LateRead> finished;
  std::lock_guard lock(spin_);
  finished = take_finished_late_reads();
  if (late_reads_.empty()) {
    has_late_reads_.store(false, std::memory_order_release);
    return std::nullopt;
  }
  for (const LateRead& r : late_reads_) {
    if (!slots) return r.done;
    // Both lists are sorted and short.
    auto a = r.slots->begin(), b = slots->begin();
    while (a != r.slots->end() && b != slots->end()) {
      if (*a == *b) return r.done;
      if (*a < *b) {
        ++a;
      } else {
        ++b;
      }
    }
  }
  return std::nullopt;
}

}  // namespace tessera
