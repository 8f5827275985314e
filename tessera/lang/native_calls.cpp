// Native functions for calls of jit functions (native_calls.hpp).
//
// A call of a jit function on Python numbers and arrays compiles the
// function, for the kinds of its arguments (an array's kind: its dtype and
// rank), into an LLVM function over i64/double/float/i1 values and array
// descriptors; the calls it makes of jit functions (itself, or others the
// frames around it hold) become LLVM functions of the same module, called
// directly, so recursion is a plain call. Anything the code cannot compute as
// Python and NumPy would (an overflow of Python's int, a division by zero,
// an index out of bounds, a depth beyond kMaxCallDepth) sets the status and
// every frame returns: the writes the code made to arrays are undone from
// its log and the call runs again on the general path, which meets the same
// thing and reports it at its line. The code has no other effects (no
// prints), so running the call again is the same as running it once.
#include "tessera/lang/native_calls.hpp"

#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "tessera/lang/fastloop.hpp"
#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native.hpp"
#include "tessera/lang/native_calls_impl.hpp"
#include "tessera/lang/native_calls_undo.hpp"
#include "tessera/lang/nodes.hpp"

namespace tessera {
namespace {

using namespace detail;  // native_calls_impl.hpp

// The process's JIT for calls (its own: native.cpp's is the loops').
struct NcJit {
  std::unique_ptr<llvm::orc::LLJIT> lljit;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::string error;
  uint64_t next = 0;
};

NcJit& nc_jit() {
  static NcJit* j = [] {
    auto* j = new NcJit;
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) {
      j->error = llvm::toString(jtmb.takeError());
      return j;
    }
    jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    auto tm = jtmb->createTargetMachine();
    if (!tm) {
      j->error = llvm::toString(tm.takeError());
      return j;
    }
    j->tm = std::move(*tm);
    auto built = llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(*jtmb).create();
    if (!built) {
      j->error = llvm::toString(built.takeError());
      return j;
    }
    j->lljit = std::move(*built);
    // Symbols of the process: memcpy, which copies of lists are lowered to.
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        j->lljit->getDataLayout().getGlobalPrefix());
    if (!gen) {
      j->error = llvm::toString(gen.takeError());
      j->lljit.reset();
      return j;
    }
    j->lljit->getMainJITDylib().addGenerator(std::move(*gen));
    return j;
  }();
  return *j;
}
NcCompiled nc_compile(const Closure& closure, const std::vector<NcKind>& kinds) {
  NcCompiled out;
  NcJit& j = nc_jit();
  const FunctionCode& code = closure.code();
  auto note = [&](const std::string& what) {
    if (nc_debug())
      std::fprintf(stderr, "[native calls] %s: %s\n", code.loc.str().c_str(), what.c_str());
  };
  if (!j.lljit) {
    note("no native code: " + j.error);
    return out;
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::map<NcKey, NcKind> ret_guess;
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto ctx = std::make_unique<llvm::LLVMContext>();
    auto mod = std::make_unique<llvm::Module>("tessera_calls", *ctx);
    mod->setDataLayout(j.lljit->getDataLayout());
    const std::string name = "tessera_call_" + std::to_string(j.next);
    NcGenerated c;
    if (!nc_generate(*ctx, *mod, ret_guess, closure, kinds, name, c)) {
      if (c.retry) continue;
      note("'" + code.name + "' stays on the general path: " + c.why + " (at " +
           c.where.str() + ")");
      return out;
    }
    if (!c.recursive) {
      // Its loops are native loops already (with node counters, checkpoints
      // and the vectorisers); only recursion is this code's to take.
      note("'" + code.name + "' stays on the general path: it calls nothing recursive");
      return out;
    }
    ++j.next;
    std::string verify;
    llvm::raw_string_ostream os(verify);
    if (llvm::verifyModule(*mod, &os)) {
      note("internal error: invalid code generated: " + os.str());
      return out;
    }
    llvm::LoopAnalysisManager lam;
    llvm::FunctionAnalysisManager fam;
    llvm::CGSCCAnalysisManager cgam;
    llvm::ModuleAnalysisManager mam;
    llvm::PassBuilder pb(j.tm.get());
    pb.registerModuleAnalyses(mam);
    pb.registerCGSCCAnalyses(cgam);
    pb.registerFunctionAnalyses(fam);
    pb.registerLoopAnalyses(lam);
    pb.crossRegisterProxies(lam, fam, cgam, mam);
    llvm::ModulePassManager mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2);
    mpm.run(*mod, mam);
    if (const char* s = std::getenv("TESSERA_NATIVE"); s && std::string(s) == "ir") {
      llvm::errs() << "; tessera native call " << code.name << "\n";
      mod->print(llvm::errs(), nullptr);
    }
    if (auto err = j.lljit->addIRModule(llvm::orc::ThreadSafeModule(std::move(mod), std::move(ctx)))) {
      note("the JIT refused the code: " + llvm::toString(std::move(err)));
      return out;
    }
    auto sym = j.lljit->lookup(name);
    if (!sym) {
      note("the JIT did not find the code: " + llvm::toString(sym.takeError()));
      return out;
    }
    out.entry = reinterpret_cast<NcEntry>(sym->getAddress());
    out.ret = c.ret;
    out.ret_lists = c.ret_lists;
    out.steps = c.steps;
    out.functions = c.functions;
    out.makes_lists = c.makes_lists;
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f",
                  std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                      .count());
    note("native code for the call of '" + code.name + "' (" + std::to_string(c.functions) +
         " function(s), compiled in " + ms + " ms)");
    return out;
  }
  note("'" + code.name + "' stays on the general path: its return kinds do not settle (a function "
       "returning both ints and floats or bools?)");
  return out;
}

struct NcCache {
  std::mutex mu;
  // Holds the code alive: its address is the key.
  std::map<NcKey, std::pair<std::shared_ptr<const FunctionCode>, NcCompiled>> entries;
};

NcCache& nc_cache() {
  static NcCache* c = new NcCache;
  return *c;
}

// The functions the code calls are still those it was compiled for.
bool nc_guards_hold(const NcCompiled& c, const Closure& closure) {
  Frame* envs_small[8] = {};
  std::vector<Frame*> envs_big;
  Frame** envs = envs_small;
  if (c.functions > 8) {
    envs_big.assign(c.functions, nullptr);
    envs = envs_big.data();
  }
  envs[0] = closure.env_raw();
  for (const NcStep& s : c.steps) {
    Frame* f = envs[s.caller];
    for (int k = 0; k < s.up && f; ++k) f = f->parent();
    const FunctionCode* code = nullptr;
    Frame* e = nullptr;
    if (!f || !f->closure_now(s.slot, code, e) || code != s.code) return false;
    if (envs[s.callee] && envs[s.callee] != e) return false;
    envs[s.callee] = e;
  }
  return true;
}

// The compiled code for a key, compiled on its first use (null: none).
const NcCompiled* nc_lookup(const Closure& closure, const NcKey& key) {
  NcCache& cache = nc_cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  auto it = cache.entries.find(key);
  if (it == cache.entries.end()) {
    it = cache.entries
             .emplace(key, std::make_pair(closure.code_ptr(), nc_compile(closure, key.args)))
             .first;
  }
  return it->second.second.entry ? &it->second.second : nullptr;  // std::map: stable
}

// A register kind (fastloop_impl.hpp's Reg::Kind) as an argument's or a
// result's kind, and back.
bool nc_of_reg(uint8_t k, NcKind& out) {
  switch (static_cast<Reg::Kind>(k)) {
    case Reg::PyInt: out = NcKind::Int; return true;
    case Reg::PyFloat: out = NcKind::Float; return true;
    case Reg::PyBool: out = NcKind::Bool; return true;
    case Reg::NpInt: out = NcKind::NpInt64; return true;
    case Reg::NpFloat: out = NcKind::NpFloat64; return true;
    case Reg::NpI32: out = NcKind::NpInt32; return true;
    case Reg::NpF32: out = NcKind::NpFloat32; return true;
    case Reg::NpBool: out = NcKind::NpBool; return true;
    default: return false;
  }
}

uint8_t reg_of_nc(NcKind k) {
  switch (k) {
    case NcKind::Int: return Reg::PyInt;
    case NcKind::Float: return Reg::PyFloat;
    case NcKind::Bool: return Reg::PyBool;
    case NcKind::NpInt64: return Reg::NpInt;
    case NcKind::NpFloat64: return Reg::NpFloat;
    case NcKind::NpInt32: return Reg::NpI32;
    case NcKind::NpFloat32: return Reg::NpF32;
    case NcKind::NpBool: return Reg::NpBool;
    default: return Reg::Undef;
  }
}

bool nc_key_of_regs(const Closure& closure, const uint8_t* kinds, size_t n, NcKey& key) {
  key.code = &closure.code();
  key.args.resize(n);
  if (n != closure.code().params.size() || n > 7) return false;
  for (size_t i = 0; i < n; ++i)
    if (!nc_of_reg(kinds[i], key.args[i])) return false;
  return true;
}

}  // namespace

bool native_call_prepare(const Closure& closure, const std::vector<uint8_t>& kinds, uint8_t& ret) {
  static const bool enabled = native_enabled() && fast_loops_enabled();
  NcKey key;
  if (!enabled || !nc_key_of_regs(closure, kinds.data(), kinds.size(), key)) return false;
  const NcCompiled* c = nc_lookup(closure, key);
  if (!c) return false;
  ret = reg_of_nc(c->ret);
  return ret != Reg::Undef && c->ret_lists.empty() && !c->makes_lists;
}

namespace {

// The code for a call from a loop's turns on registers of these kinds, with
// the kind of its result; null when there is none. One function called from
// a loop's turns: its code found without the cache's lock after the first
// call on this thread.
const NcCompiled* nc_for_words(const Closure& closure, const uint8_t* kinds, size_t n,
                               uint8_t& kind) {
  static const bool enabled = native_enabled() && fast_loops_enabled();
  if (!enabled) return nullptr;  // TESSERA_NATIVE=0: the general path's
  thread_local const FunctionCode* last_code = nullptr;
  thread_local uint64_t last_kinds = 0;
  thread_local const NcCompiled* last = nullptr;
  uint64_t packed = n;
  for (size_t i = 0; i < n && i < 8; ++i) packed |= static_cast<uint64_t>(kinds[i]) << (8 * i + 8);
  const NcCompiled* c;
  if (last && last_code == &closure.code() && last_kinds == packed) {
    c = last;
  } else {
    NcKey key;
    if (!nc_key_of_regs(closure, kinds, n, key)) return nullptr;
    c = nc_lookup(closure, key);
    if (!c) return nullptr;
    last = c, last_code = &closure.code(), last_kinds = packed;
  }
  kind = reg_of_nc(c->ret);
  // A loop's calls have no arena for the lists the code would make.
  return kind == Reg::Undef || !c->ret_lists.empty() || c->makes_lists ? nullptr : c;
}

}  // namespace

bool native_call_words(const Closure& closure, const uint8_t* kinds, size_t n,
                       const int64_t* words, int64_t& result, uint8_t& ret) {
  uint8_t kind = Reg::Undef;
  const NcCompiled* c = nc_for_words(closure, kinds, n, kind);
  if (!c || (ret != Reg::Undef && kind != ret) || !nc_guards_hold(*c, closure)) return false;
  ret = kind;
  NcContext context;
  nc_undo_begin(context);
  if (c->entry(words, &result, &context.status) != 0) {
    nc_undo(context);  // nothing to undo: numbers only
    return false;
  }
  return true;
}

void* native_call_entry(const Closure& closure, const uint8_t* kinds, size_t n, uint8_t ret) {
  uint8_t kind = Reg::Undef;
  const NcCompiled* c = nc_for_words(closure, kinds, n, kind);
  if (!c || kind != ret || !nc_guards_hold(*c, closure)) return nullptr;
  return reinterpret_cast<void*>(c->entry);
}

bool native_call(const Closure& closure, const std::vector<Value>& args, Value& out) {
  static const bool enabled = native_enabled() && fast_loops_enabled();
  if (!enabled) return false;
  const FunctionCode& code = closure.code();
  if (args.size() != code.params.size() || args.size() > 16) return false;
  NcKey key{&code, {}};
  key.args.reserve(args.size());
  int64_t words[16];
  // The arrays' descriptors (see desc_word), one after another.
  int64_t descs_small[64];
  std::vector<int64_t> descs_big;
  int64_t* descs = descs_small;
  size_t words_needed = 0;
  for (const Value& a : args)
    if (a.is_array() && a.as_array().ndim() > 0)
      words_needed += 2 + 2 * static_cast<size_t>(a.as_array().ndim());
  if (words_needed > 64) {
    descs_big.resize(words_needed);
    descs = descs_big.data();
  }
  size_t used = 0;
  // Lists: copies the code changes in place, given back by the result.
  NcListArg lists[16];
  for (size_t i = 0; i < args.size(); ++i) {
    const Value& a = args[i];
    if (a.is_list()) {
      if (!nc_list_in(a, lists[i])) return false;
      key.args.push_back(lists[i].kind);
      words[i] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(lists[i].desc));
    } else if (a.is_array()) {
      const Array& x = a.as_array();
      const int nd = x.ndim();
      int dt = -1;
      for (int d = 0; d < 5; ++d)
        if (kNcDtypes[d] == x.dtype()) dt = d;
      if (dt < 0 || nd > kNcMaxDims || x.weak()) return false;
      if (nd == 0) {  // NumPy's scalar (np.int32(3), np.float32(x), a 0-d array): its value
        const NcKind k = kNcElements[dt];
        key.args.push_back(k);
        const void* at = x.origin_raw();
        if (k == NcKind::NpFloat64 || k == NcKind::NpFloat32) {
          const double d = k == NcKind::NpFloat64 ? *static_cast<const double*>(at)
                                                  : *static_cast<const float*>(at);
          std::memcpy(&words[i], &d, sizeof d);
        } else if (k == NcKind::NpInt64) {
          words[i] = *static_cast<const int64_t*>(at);
        } else if (k == NcKind::NpInt32) {
          words[i] = *static_cast<const int32_t*>(at);
        } else {
          words[i] = *static_cast<const bool*>(at) ? 1 : 0;
        }
        continue;
      }
      int64_t* desc = descs + used;
      used += 2 + 2 * static_cast<size_t>(nd);
      desc[0] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(x.origin_raw()));
      desc[1] = x.writable() ? 1 : 0;
      const std::vector<int64_t> strides = x.strides();
      const auto item = static_cast<int64_t>(dtype_size(x.dtype()));
      for (int d = 0; d < nd; ++d) {
        desc[2 + d] = x.shape()[static_cast<size_t>(d)];
        desc[2 + nd + d] = strides[static_cast<size_t>(d)] * item;
      }
      key.args.push_back(nc_array_kind(dt, nd));
      words[i] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(desc));
    } else if (a.is_int()) {
      key.args.push_back(NcKind::Int);
      words[i] = a.as_int();
    } else if (a.is_float()) {
      key.args.push_back(NcKind::Float);
      const double d = a.as_float();
      std::memcpy(&words[i], &d, sizeof d);
    } else if (a.is_bool()) {
      key.args.push_back(NcKind::Bool);
      words[i] = a.as_bool() ? 1 : 0;
    } else {
      return false;
    }
  }
  // A function called again and again from Python (the jit entry) with the
  // same kinds finds its code without the cache's lock and map: the cache
  // keeps every code it was asked for alive, so the address in the key
  // names the same function for the whole process.
  thread_local const FunctionCode* last_code = nullptr;
  thread_local std::vector<NcKind> last_args;
  thread_local const NcCompiled* last_compiled = nullptr;
  const NcCompiled* compiled;
  if (last_compiled && last_code == &code && last_args == key.args) {
    compiled = last_compiled;
  } else {
    {
      NcCache& cache = nc_cache();
      std::lock_guard<std::mutex> lock(cache.mu);
      auto it = cache.entries.find(key);
      if (it == cache.entries.end()) {
        it = cache.entries.emplace(key, std::make_pair(closure.code_ptr(), nc_compile(closure, key.args)))
                 .first;
      }
      compiled = &it->second.second;  // std::map: stable
    }
    last_code = &code, last_args = key.args, last_compiled = compiled;
  }
  if (!compiled->entry || !nc_guards_hold(*compiled, closure)) return false;
  int64_t result = 0;
  std::optional<NcFreshLists> fresh;  // the lists the code makes, freed on return
  if (compiled->makes_lists) fresh.emplace();
  NcContext context;
  nc_undo_begin(context);
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].is_array() || args[i].as_array().ndim() == 0) continue;
    const Array& x = args[i].as_array();
    nc_undo_cover(reinterpret_cast<const int64_t*>(static_cast<uintptr_t>(words[i])), x.ndim(),
                  dtype_size(x.dtype()));
  }
  if (compiled->entry(words, &result, &context.status) != 0) {
    if (context.lost) {
      throw MemoryError(error_message("[", code.name,
                                      "] out of memory for the undo log of a native call that "
                                      "must run again on the general path (at ",
                                      code.loc.str(), ")"));
    }
    nc_undo(context);  // the general path runs the call on the arrays as they were
    return false;
  }
  double d;
  std::memcpy(&d, &result, sizeof d);
  if (nc_is_list(compiled->ret)) {
    // A list the code made (never an argument's: a parameter returned is
    // copied, as the general path's value), copied out before the arena goes.
    const NcKind item = nc_list_item(compiled->ret);
    out = nc_list_value(reinterpret_cast<const int64_t*>(static_cast<uintptr_t>(result)),
                        item == NcKind::Float  ? NumberKind::py_float
                        : item == NcKind::Bool ? NumberKind::py_bool
                                               : NumberKind::py_int);
  }
  switch (nc_is_list(compiled->ret) ? NcKind::None : compiled->ret) {
    case NcKind::None:
      break;
    case NcKind::Int:
      out = Value(result);
      break;
    case NcKind::Float:
      out = Value(d);
      break;
    case NcKind::Bool:
      out = Value(result != 0);
      break;
    case NcKind::NpInt64:
      out = Value(Array::scalar_int(result));
      break;
    case NcKind::NpInt32:
      out = Value(Array::scalar(static_cast<double>(result), DType::int32));
      break;
    case NcKind::NpFloat64:
      out = Value(Array::scalar(d, DType::float64));
      break;
    case NcKind::NpFloat32:
      out = Value(Array::scalar(d, DType::float32));
      break;
    default:
      out = Value(Array::scalar_bool(result != 0));
  }
  if (!compiled->ret_lists.empty()) {
    // list(result, p, ...): the lists the function changed, as they are now
    List back;
    back.reserve(1 + compiled->ret_lists.size());
    back.push_back(std::move(out));
    for (int p : compiled->ret_lists) back.push_back(nc_list_out(lists[p]));
    out = Value(std::move(back));
  }
  return true;
}

}  // namespace tessera
