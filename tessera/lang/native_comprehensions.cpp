// Lists built by comprehensions and concatenation in native loops
// (native_comprehensions.hpp).
#include "tessera/lang/native_comprehensions.hpp"

#include "tessera/lang/fastloop_impl.hpp"

namespace tessera {

namespace {

// The list at object index `obj` (not a tuple), or nullptr.
const List* plain_list(const FastLoop::Impl::State& st, int64_t obj) {
  if (obj < 0 || static_cast<size_t>(obj) >= st.objects.size()) return nullptr;
  const Value& v = st.objects[static_cast<size_t>(obj)];
  if (!v.is_list() || v.is_tuple()) return nullptr;
  return &v.as_list();
}

}  // namespace

extern "C" int64_t native_list_concat(NativeCtx* c, int64_t a, int64_t b) {
  if (c->state == nullptr) return -1;
  FastLoop::Impl::State& st = *c->state;
  const List* x = plain_list(st, a);
  const List* y = plain_list(st, b);
  if (x == nullptr || y == nullptr) return -1;
  try {
    List out;
    out.reserve(x->size() + y->size());
    out.insert(out.end(), x->begin(), x->end());
    out.insert(out.end(), y->begin(), y->end());
    const int32_t at = FastLoop::Impl::place_object(Value(std::move(out)), st);
    ++st.made;  // a sweep between turns releases the lists let go of
    return at;
  } catch (...) {
    return -1;
  }
}

}  // namespace tessera
