// Arrays made inside native loops (native_arrays.hpp).
#include "tessera/lang/native_arrays.hpp"

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

Reg FastLoop::Impl::make_value(int64_t slot, std::vector<Value>& vals, State& st) const {
  const auto* call = dynamic_cast<const PrimitiveCallNode*>(counted[static_cast<size_t>(slot)]);
  if (!call) throw BAIL;
  return to_reg(call_primitive(call->spec_->name, vals), st);
}

extern "C" int64_t native_alloc(NativeCtx* c, int64_t slot, const Reg* arg, int64_t dt,
                                int64_t nd, NativeArray* out) {
  FastLoop::Impl::State& st = *c->state;
  // Everything thrown (the primitive's errors, Bail) stops here: the
  // generated code cannot unwind.
  try {
    std::vector<Value> vals{FastLoop::Impl::to_value(*arg, st)};
    const Reg reg = c->impl->make_value(slot, vals, st);
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
