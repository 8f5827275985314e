#include "tessera/lang/native_trace.hpp"

#include <string>

#include "tessera/core/dtype.hpp"
#include "tessera/lang/native.hpp"

namespace tessera {

namespace {

// The loop's name, interned at its first traced run (intern takes a lock).
const std::string* loop_name(const FastLoop::Impl& im) {
  const std::string* name = im.trace_name.load(std::memory_order_acquire);
  if (!name) {
    name = trace::intern(im.where);
    im.trace_name.store(name, std::memory_order_release);
  }
  return name;
}

const char* kind_name(Reg::Kind k) {
  switch (k) {
    case Reg::Undef: return "unassigned";
    case Reg::Nil: return "None";
    case Reg::PyBool: return "bool";
    case Reg::PyInt: return "int";
    case Reg::PyFloat: return "float";
    case Reg::NpBool: return "np.bool_";
    case Reg::NpInt: return "np.int64";
    case Reg::NpFloat: return "np.float64";
    case Reg::NpF32: return "np.float32";
    case Reg::NpI32: return "np.int32";
    case Reg::NpI8: return "np.int8";
    case Reg::NpU8: return "np.uint8";
    case Reg::NpI16: return "np.int16";
    case Reg::NpU16: return "np.uint16";
    case Reg::NpU32: return "np.uint32";
    case Reg::Arr: return "array";
    case Reg::Obj: return "object";
  }
  return "?";
}

// What the code is typed for, as a reader names it: `x: float64[2d], n: int`.
std::string describe(const FastLoop::Impl& im, const std::vector<Reg>& regs,
                     const std::vector<ArrEntry>& arrays) {
  std::string out;
  for (size_t r = 0; r < regs.size(); ++r) {
    const std::string& name = r < im.names.size() ? im.names[r] : std::string();
    // `__k1`: the translator's temporaries (a range's bounds), not the user's.
    if (name.empty() || name.rfind("__", 0) == 0 || regs[r].k == Reg::Undef) continue;
    if (!out.empty()) out += ", ";
    out += name + ": ";
    if (regs[r].k == Reg::Arr && regs[r].a >= 0 && static_cast<size_t>(regs[r].a) < arrays.size()) {
      const ArrEntry& e = arrays[regs[r].a];
      out += std::string(dtype_name(e.dt)) + "[" + std::to_string(e.nd) + "d]";
    } else {
      out += kind_name(regs[r].k);
    }
  }
  return out;
}

int64_t ns(double ms) { return ms < 0 ? -1 : static_cast<int64_t>(ms * 1e6); }

}  // namespace

const std::string* native_trace_name(const FastLoop::Impl& im) { return loop_name(im); }

const std::string* native_trace_signature(const FastLoop::Impl& im, const std::vector<Reg>& regs,
                                          const std::vector<ArrEntry>& arrays) {
  return trace::intern(describe(im, regs, arrays));
}

void LoopRunTrace::record() {
  trace::Event e;
  e.kind = trace::EventKind::loop;
  e.t0 = t0_;
  e.t1 = trace::now_ns();
  e.what = im_.node;
  e.where = loop_name(im_);
  e.amount = turns_ ? static_cast<uint64_t>(*turns_) : 0;
  e.peer = calls_;
  e.flags = static_cast<uint8_t>(flags_ | (finished_ ? 0 : trace::kLoopGeneral));
  trace::record(e);
}

void NativeCompileTrace::done(const NativeCode* code) {
  if (!t0_ || !trace::on()) return;
  const int64_t t1 = trace::now_ns();
  trace::CompileRecord c;
  c.name = loop_name(im_);
  c.signature = trace::intern(describe(im_, regs_, arrays_));
  using Mode = trace::CompileRecord::Mode;
  using Source = trace::CompileRecord::Source;
  if (!code) {
    c.mode = Mode::refused;
  } else {
    c.mode = completing_ ? Mode::completed : code->partial.load() ? Mode::partial : Mode::whole;
    c.source = code->from_process ? Source::process
               : code->from_cache ? Source::disk_cache
                                  : Source::compiled;
    c.ir_bytes = code->ir_bytes;
    c.generate_ns = ns(code->generate_ms);
    c.optimise_ns = ns(code->optimise_ms);
    c.codegen_ns = ns(code->codegen_ms);
  }
  trace::record_compile(c, t0_, t1);
}

}  // namespace tessera
