// Arrays made inside native loops (native_arrays.hpp).
#include "tessera/lang/native_arrays.hpp"

#include <algorithm>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

Reg FastLoop::Impl::make_value(int64_t slot, std::vector<Value>& vals, State& st) const {
  const auto* call = dynamic_cast<const PrimitiveCallNode*>(counted[static_cast<size_t>(slot)]);
  if (!call) throw BAIL;
  return to_reg(call_primitive(call->spec_->name, vals), st);
}

namespace {

// The primitive's result made here (what its eval gives, without the call's
// argument binding and tiled fills: a few hundred ns a turn), or an empty
// value where the primitive must run (and report what is wrong).
Value make_directly(NativeAlloc op, const Reg& arg, const FastLoop::Impl::State& st) {
  if (op <= NativeAlloc::empty) {  // float64, of n elements
    const int64_t n = arg.i;
    if (n < 0 || n > kMaxNewBytes / 8) return Value();
    Array out(DType::float64, Shape{n});
    std::fill(out.data<double>(), out.data<double>() + n, op == NativeAlloc::ones ? 1.0 : 0.0);
    return Value(std::move(out));
  }
  const Array& x = st.arrays[static_cast<size_t>(arg.a)].array;
  if (op == NativeAlloc::copy) return Value(x.copy());
  if (x.size() * static_cast<int64_t>(dtype_size(x.dtype())) > kMaxNewBytes) return Value();
  Array out(x.dtype(), x.shape());
  dispatch(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    std::fill(p, p + out.size(), element_cast<T>(op == NativeAlloc::ones_like ? 1.0 : 0.0));
  });
  return Value(std::move(out));
}

}  // namespace

extern "C" int64_t native_alloc(NativeCtx* c, int64_t slot, int64_t op, const Reg* arg,
                                int64_t dt, int64_t nd, NativeArray* out) {
  FastLoop::Impl::State& st = *c->state;
  // Everything thrown (the primitive's errors, Bail) stops here: the
  // generated code cannot unwind.
  try {
    Value made = make_directly(static_cast<NativeAlloc>(op), *arg, st);
    Reg reg;
    if (made.is_array()) {
      reg = FastLoop::Impl::to_reg(made, st);
    } else {
      std::vector<Value> vals{FastLoop::Impl::to_value(*arg, st)};
      reg = c->impl->make_value(slot, vals, st);
    }
    c->entries = st.arrays.data();
    if (reg.k != Reg::Arr) return -1;
    const ArrEntry& e = st.arrays[static_cast<size_t>(reg.a)];
    if (static_cast<int64_t>(e.dt) != dt || e.nd != nd || !e.indexable || !e.writable) return -1;
    out->base = e.base;
    for (int d = 0; d < e.nd; ++d) {
      out->shape[d] = e.shape[d];
      out->strides[d] = e.strides[d];
    }
    return reg.a;
  } catch (...) {
    c->entries = st.arrays.data();
    return -1;
  }
}

extern "C" void native_sweep(NativeCtx* c) {
  FastLoop::Impl::State& st = *c->state;
  st.roots.push_back(&c->last);
  FastLoop::Impl::sweep(st);
  st.roots.pop_back();
}

}  // namespace tessera
