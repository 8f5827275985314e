// The native code generator of the scalar loop fast path (native.hpp): the
// loop's tree of operations (FastLoop::Impl, fastloop_impl.hpp), typed by
// the kinds its registers hold after its first turns, becomes one LLVM
// function, optimised at -O2 and compiled by ORC's LLJIT. Every operation
// does what the register interpreter's handler for it does (fastloop.cpp):
// the same kinds of results, NumPy's casts, Python's floor division and
// modulo, the same counters. What the interpreter leaves to the general
// evaluation (an overflow, a division by zero, an index out of range, a
// register changing kind, Ctrl-C inside a turn) makes the function return
// kNativeBail; its element writes are then undone from its log and the
// interpreter redoes the turns since the call, so errors keep their
// messages and positions. The generator itself, Gen, is declared in
// native_gen.hpp and defined by family in native_gen*.cpp; this file holds
// the entry points (native.hpp), the JIT and the rewrites before generation.
#include "tessera/lang/native.hpp"

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <set>

#include <llvm/Config/llvm-config.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/CommandLine.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>

#include "tessera/lang/native_cache.hpp"
#include "tessera/lang/native_gen.hpp"
#include "tessera/lang/native_tiers.hpp"
#include "tessera/lang/native_trace.hpp"

#ifndef TESSERA_VERSION_STRING
#define TESSERA_VERSION_STRING "0.1.0"
#endif

namespace tessera {

using native_gen::Gen;
using native_gen::Jit;
using native_gen::jit;
using native_gen::kHelpers;
using native_gen::NoLazy;
using native_gen::Refuse;
using native_gen::Retry;
using native_gen::RowOf;

static_assert(sizeof(Reg) == 16 && offsetof(Reg, i) == 8, "native code reads Reg as {kind, payload}");

// TESSERA_NATIVE, read once: "0" runs the interpreter; "ir" prints each
// loop's optimised LLVM IR to stderr (to see what blocks vectorisation).
namespace {
const std::string& native_setting() {
  static const std::string& v = *new std::string([] {
    const char* e = std::getenv("TESSERA_NATIVE");
    return std::string(e ? e : "");
  }());
  return v;
}
}  // namespace

bool native_enabled() { return native_setting() != "0"; }
bool native_debug() { return native_setting() == "debug"; }

bool native_lazy_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("TESSERA_NATIVE_LAZY");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

// The array's last dimension has unit stride (or one element at most, whose
// stride no index multiplies): its accesses are compiled with the constant
// stride 1, as a C-contiguous array's in Numba, which is what lets LLVM drop
// the multiplications of an inner loop's index and vectorise without
// versioning on the stride.
bool native_unit_last(const ArrEntry& e) {
  if (!e.indexable || e.nd == 0) return false;
  return e.strides[e.nd - 1] == 1 || e.shape[e.nd - 1] <= 1;
}

std::vector<uint8_t> native_signature(const std::vector<Reg>& regs,
                                      const std::vector<ArrEntry>& arrays) {
  std::vector<uint8_t> sig;
  native_signature(regs, arrays, sig);
  return sig;
}

void native_signature(const std::vector<Reg>& regs, const std::vector<ArrEntry>& arrays,
                      std::vector<uint8_t>& sig) {
  sig.clear();
  sig.reserve(regs.size() * 4);
  for (const Reg& r : regs) {
    sig.push_back(r.k);
    if (r.k == Reg::Arr) {
      const ArrEntry& e = arrays[r.a];
      sig.push_back(static_cast<uint8_t>(e.dt));
      sig.push_back(static_cast<uint8_t>(e.nd));
      sig.push_back(static_cast<uint8_t>(native_unit_last(e) * 4 + e.writable * 2 + e.indexable));
    }
  }
}

void native_array_table(const std::vector<Reg>& regs, const std::vector<ArrEntry>& arrays,
                        std::vector<NativeArray>& out) {
  out.resize(regs.size());
  for (size_t r = 0; r < regs.size(); ++r) {
    if (regs[r].k != Reg::Arr) continue;
    const ArrEntry& e = arrays[regs[r].a];
    out[r].base = e.base;
    for (int d = 0; d < e.nd && d < kMaxDims; ++d) {
      out[r].shape[d] = e.shape[d];
      out[r].strides[d] = e.strides[d];
    }
  }
}

namespace {
// The entries' buffer a finished NativeLog left on this thread (see NativeLog).
thread_local std::vector<NativeUndo> t_spare_undo_entries;
thread_local std::vector<std::vector<int64_t>> t_spare_comp_items;
}  // namespace

NativeLog::NativeLog() {
  entries.swap(t_spare_undo_entries);
  comp_items.swap(t_spare_comp_items);
}

NativeLog::~NativeLog() {
  // Kept unless another log of this thread (a loop run inside this one)
  // already gave one back, or it grew past 1 MB (a run of many writes).
  if (t_spare_undo_entries.empty() && entries.size() * sizeof(NativeUndo) <= (size_t{1} << 20))
    entries.swap(t_spare_undo_entries);
  // The comprehensions' buffers too (a function returning a comprehension
  // made them at each call), unless one grew past 1 MB.
  bool small = true;
  for (const auto& c : comp_items) small = small && c.size() * sizeof(int64_t) <= (size_t{1} << 20);
  if (t_spare_comp_items.empty() && small) comp_items.swap(t_spare_comp_items);
}

void native_undo(const NativeLog& log, int64_t n) {
  for (int64_t k = n - 1; k >= 0; --k) {
    const NativeUndo& u = log.entries[static_cast<size_t>(k)];
    if ((u.where >> 60) == (kNativeCopyTag >> 60)) {
      Array target = log.copies[u.old].first;  // a handle on the same elements
      target.assign(log.copies[u.old].second);
      continue;
    }
    if ((u.where >> 60) == (kNativeRangeTag >> 60)) {
      const NativeRange& r = log.ranges[u.old];
      const char* from = log.bytes.data() + r.bytes_at;
      for (int64_t j = 0; j < r.count; ++j)
        std::memcpy(r.first + j * r.step_bytes, from + j * r.size, static_cast<size_t>(r.size));
      continue;
    }
    char* p = reinterpret_cast<char*>(u.where & ((uint64_t{1} << 60) - 1));
    const size_t size = size_t{1} << (u.where >> 60);
    std::memcpy(p, &u.old, size);
  }
}

// ---- the JIT (one per process, made on first use)

namespace native_gen {

Jit& jit() {
  static Jit* j = [] {
    auto* j = new Jit;
    // TESSERA_NATIVE_LLVM_ARGS: options of LLVM's own (`-disable-lsr`: loop
    // strength reduction is half the code generator's time on a nest), to
    // measure what a pass costs and gives; part of the cache's key.
    // Default: -slp-threshold=1, the SLP vectoriser packing only what saves
    // at least two instructions. At 0 it packed a loop's node counters into
    // a vector register, unpacked and packed again at every turn:
    // collatz_lengths 2.14 ms, 1.30 ms at 1 (Numba 0.76), the other kernels
    // measured the same (docs/runtime.md, "Code generation").
    {
      const char* e = std::getenv("TESSERA_NATIVE_LLVM_ARGS");
      const std::string given = e ? e : "";
      j->llvm_args = given;
      std::vector<std::string> words{"tessera"};
      if (given.find("-slp-threshold") == std::string::npos) words.emplace_back("-slp-threshold=1");
      for (const char* p = given.c_str(); *p;) {
        while (*p == ' ') ++p;
        const char* q = p;
        while (*q && *q != ' ') ++q;
        if (q > p) words.emplace_back(p, q);
        p = q;
      }
      std::vector<const char*> argv;
      for (const std::string& w : words) argv.push_back(w.c_str());
      std::string bad;
      llvm::raw_string_ostream errs(bad);
      if (!llvm::cl::ParseCommandLineOptions(static_cast<int>(argv.size()), argv.data(), "", &errs)) {
        j->error = "TESSERA_NATIVE_LLVM_ARGS: " + errs.str();
        return j;
      }
    }
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
    if (!jtmb) {
      j->error = llvm::toString(jtmb.takeError());
      return j;
    }
    // The host's CPU name and features (detectHost): AVX2/AVX-512 where the
    // machine has them, for the vectoriser's cost model and the code.
    jtmb->setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
    j->cpu = jtmb->getCPU();
    j->features = jtmb->getFeatures().getString();
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
    // Symbols of the process (libm's floor where the CPU has no instruction).
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

}  // namespace native_gen

void* const* native_helpers() { return kHelpers; }

namespace {

// `A[i][j]` and `A[i][j] = v` (`A = setitem(A, setitem(getitem(A, i), v, j),
// i)` as translated) of a variable A holding an array of two or more dims
// when the loop starts, rewritten as `A[i, j]` and `A = setitem(A, v, i,
// j)`: one element access instead of a row made and indexed. The same for
// an integer index as NumPy's: A[i] of a 2-D array is a view of row i, whose
// element j is A[i, j] and whose writes are A's. The compiled code keeps A's
// dims (another array in A is a bail), and its element accesses take only
// int indices (any other kind: no native code), so the rewrite holds
// wherever the code runs. The interpreter keeps the loop as written.
class ChainFlattener {
 public:
  using FNode = FastLoop::Impl::FNode;
  ChainFlattener(const std::vector<Reg>& regs, const std::vector<ArrEntry>& arrays)
      : regs_(regs), arrays_(arrays) {}

  // True when `n` has a chain to flatten (then rewrite a copy of it).
  bool has_chain(const FNode& n) const {
    if (n.op == Op::GetItem && n.kids.size() >= 2 && n.kids[0].op == Op::GetItem) return true;
    if (n.op == Op::SetItem && n.kids.size() >= 3 && n.kids[1].op == Op::SetItem) return true;
    for (const FNode& k : n.kids)
      if (has_chain(k)) return true;
    return false;
  }

  // The row variables of a loop (after rewrite): `r = x[i...]`, a
  // statement (not the body's last: its value would be the loop's) and r's
  // only assignment, of an array variable x of more dims than indices that
  // the loop assigns only by element writes, with r read only as the array
  // of element reads (or of np.searchsorted). r's element reads are then x's elements, with no
  // array made per turn.
  std::map<int, RowOf> rows(const FNode& cond, const FNode& body) const {
    Tally t;
    tally(cond, false, t);
    if (body.op == Op::Block) {
      for (size_t k = 0; k < body.kids.size(); ++k)
        tally(body.kids[k], k + 1 < body.kids.size(), t);
    } else {
      tally(body, false, t);
    }
    std::map<int, RowOf> out;
    for (const auto& [r, a] : t.candidate) {
      const FNode& g = a->kids[0];
      const int x = g.kids[0].reg;
      const size_t nidx = g.kids.size() - 1;
      // x is fixed for the loop, or only ever the same fixed array (`for
      // row in t` nested in another loop: its hidden `it = iterate(t)`).
      int fixed = x;
      if (t.rebound.count(x)) {
        auto al = t.alias_of.find(x);
        if (al == t.alias_of.end() || al->second < 0 || t.rebound.count(al->second)) continue;
        fixed = al->second;
      }
      const Reg::Kind k0 = regs_[static_cast<size_t>(r)].k;
      if (x == r || fixed == r || t.assigns[r] != 1 || t.reads[r] != t.array_reads[r] ||
          dims_of_reg(fixed) <= static_cast<int>(nidx) || (k0 != Reg::Undef && k0 != Reg::Arr))
        continue;
      out[r] = RowOf{x, nidx, fixed};
    }
    return out;
  }

  void rewrite(FNode& n) const {
    for (FNode& k : n.kids) rewrite(k);
    if (n.op == Op::GetItem && n.kids.size() >= 2 && n.kids[0].op == Op::GetItem) {
      // (A[p...])[q...] with A[p...] a view: A[p..., q...]
      const FNode& inner = n.kids[0];
      const int nd = dims_of(inner);
      if (nd < 0 || static_cast<int>(inner.kids.size() - 1) >= nd) return;
      std::vector<FNode> kids(inner.kids.begin(), inner.kids.end());
      kids.insert(kids.end(), n.kids.begin() + 1, n.kids.end());
      merge_counts(n, inner);
      n.kids = std::move(kids);
      return;
    }
    if (n.op == Op::SetItem && n.kids.size() >= 3 && n.kids[1].op == Op::SetItem &&
        n.kids[1].kids.size() >= 3) {
      // T = setitem(T, setitem(T[p...], v, q...), p...): T[p..., q...] = v,
      // T being A or a view A[r...] of it.
      const FNode& target = n.kids[0];
      const FNode& write = n.kids[1];
      const FNode& view = write.kids[0];
      const int nd = target.op == Op::Var ? dims_of_var(target) : dims_of(target);
      if (nd < 0 || view.op != Op::GetItem) return;
      const size_t pre = target.op == Op::Var ? 0 : target.kids.size() - 1;
      const size_t np = n.kids.size() - 2;
      if (view.kids.size() != 1 + pre + np || static_cast<int>(pre + np) >= nd) return;
      const FNode& root = target.op == Op::Var ? target : target.kids[0];
      if (!same(view.kids[0], root)) return;
      for (size_t k = 0; k < pre; ++k)
        if (!same(view.kids[1 + k], target.kids[1 + k])) return;
      for (size_t k = 0; k < np; ++k)
        if (!same(view.kids[1 + pre + k], n.kids[2 + k])) return;
      merge_counts(n, write);
      merge_counts(n, view);
      std::vector<FNode> kids;
      kids.push_back(target);
      kids.push_back(write.kids[1]);
      kids.insert(kids.end(), n.kids.begin() + 2, n.kids.end());
      kids.insert(kids.end(), write.kids.begin() + 2, write.kids.end());
      n.kids = std::move(kids);
    }
  }

 private:
  static void merge_counts(FNode& into, const FNode& from) {
    if (from.counter >= 0) into.also_count.push_back(from.counter);
    into.also_count.insert(into.also_count.end(), from.also_count.begin(), from.also_count.end());
  }

  struct Tally {
    std::map<int, int> assigns, reads, array_reads;
    std::map<int, const FNode*> candidate;
    std::set<int> rebound;  // assigned other than by x = setitem(x, ...)
    // A variable whose every assignment is `x = t` or `x = iterate(t)` of
    // one variable t: t (-1: assigned anything else or from several).
    std::map<int, int> alias_of;
  };
  // `statement`: n is a statement of a block whose value is not the loop's.
  void tally(const FNode& n, bool statement, Tally& t) const {
    if (n.op == Op::Assign) {
      ++t.assigns[n.reg];
      const FNode& v = n.kids[0];
      if (!(v.op == Op::SetItem && v.kids[0].op == Op::Var && v.kids[0].reg == n.reg)) {
        t.rebound.insert(n.reg);
        const bool iter = v.op == Op::Call && v.spec && v.spec->name == "iterate" &&
                          v.kids.size() == 1;
        const FNode& src = iter ? v.kids[0] : v;
        const int from = src.op == Op::Var ? src.reg : -1;
        auto [it, fresh] = t.alias_of.emplace(n.reg, from);
        if (!fresh && it->second != from) it->second = -1;
      }
      if (statement && v.op == Op::GetItem && v.kids.size() >= 2 && v.kids[0].op == Op::Var)
        t.candidate[n.reg] = &n;
    }
    if (n.op == Op::Var) ++t.reads[n.reg];
    if (n.op == Op::GetItem && !n.kids.empty() && n.kids[0].op == Op::Var)
      ++t.array_reads[n.kids[0].reg];
    // np.searchsorted(row, v): a search over the row's elements, read where
    // they are (native_gen_search.cpp).
    if (n.op == Op::Call && n.spec && n.spec->name == "searchsorted" && !n.kids.empty() &&
        n.kids[0].op == Op::Var)
      ++t.array_reads[n.kids[0].reg];
    const bool block = n.op == Op::Block;
    for (const FNode& k : n.kids) tally(k, block, t);
  }

  // The dims of the array variable `v` holds when the loop starts (-1: none).
  int dims_of_var(const FNode& v) const { return v.op == Op::Var ? dims_of_reg(v.reg) : -1; }
  int dims_of_reg(int reg) const {
    if (reg < 0 || static_cast<size_t>(reg) >= regs_.size()) return -1;
    const Reg& r = regs_[static_cast<size_t>(reg)];
    if (r.k != Reg::Arr || r.a < 0 || static_cast<size_t>(r.a) >= arrays_.size()) return -1;
    return arrays_[static_cast<size_t>(r.a)].nd;
  }
  // Of A[p...]'s root A, when `g` is that (already flattened) getitem.
  int dims_of(const FNode& g) const {
    if (g.op != Op::GetItem || g.kids.empty()) return -1;
    return dims_of_var(g.kids[0]);
  }
  static bool same(const FNode& a, const FNode& b) { return FastLoop::Impl::same_pure(a, b); }
  const std::vector<Reg>& regs_;
  const std::vector<ArrEntry>& arrays_;
};

}  // namespace

// ---- optimisation, machine code and linking (both tiers)

namespace {
// Links `obj` as `name` unless linked already (under the JIT's lock).
NativeFn link_locked(Jit& j, const std::string& obj, const std::string& name, std::string& why) {
  if (auto it = j.loaded.find(name); it != j.loaded.end()) return it->second;
  if (auto err = j.lljit->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(obj, name))) {
    why = "the JIT refused the code: " + llvm::toString(std::move(err));
    return nullptr;
  }
  auto sym = j.lljit->lookup(name);
  if (!sym) {
    why = "the JIT did not find the code: " + llvm::toString(sym.takeError());
    return nullptr;
  }
  const auto fn = reinterpret_cast<NativeFn>(sym->getAddress());
  j.loaded[name] = fn;
  return fn;
}

}  // namespace

namespace native_tiers {

namespace {
// The quick tier's passes (TESSERA_NATIVE_QUICK_PASSES: another list, in
// `opt -passes=` syntax, to measure; "default<O1>" is LLVM's -O1).
const std::string& quick_passes() {
  static const std::string& v = *new std::string([] {
    const char* e = std::getenv("TESSERA_NATIVE_QUICK_PASSES");
    return std::string(e && *e ? e : "function(sroa,early-cse,instcombine,simplifycfg)");
  }());
  return v;
}
}  // namespace

std::string emit_object(llvm::Module& mod, llvm::TargetMachine& tm, bool quick, std::string& why,
                        std::mutex* codegen_mu, double* ms) {
  const auto t_opt = std::chrono::steady_clock::now();
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // -O3 with both vectorisers (PassBuilder leaves SLP off unless asked). The
  // quick tier: four passes, which put the registers of the generated frame
  // into machine registers (sroa) and fold what the generator spelled out;
  // -O1 took 55-100 ms on a nest (its loop passes, GVN), this 4-15 ms. Its
  // code runs only until the -O3 one is swapped in.
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = !quick;
  pto.SLPVectorization = !quick;
  pto.LoopInterleaving = !quick;
  pto.LoopUnrolling = !quick;
  llvm::PassBuilder pb(&tm, pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::ModulePassManager mpm;
  if (quick) {
    if (auto err = pb.parsePassPipeline(mpm, quick_passes())) {
      why = "TESSERA_NATIVE_QUICK_PASSES: " + llvm::toString(std::move(err));
      return "";
    }
  } else {
    mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  }
  mpm.run(mod, mam);
  const auto t_cg = std::chrono::steady_clock::now();
  if (native_setting() == "ir") {
    llvm::errs() << "; tessera native loop " << mod.getName() << (quick ? " (quick tier)" : "")
                 << "\n";
    mod.print(llvm::errs(), nullptr);
  }
  // Machine code: an object file, the cache's entry and what the JIT links.
  llvm::SmallVector<char, 0> buf;
  {
    std::unique_lock<std::mutex> lock;
    if (codegen_mu) lock = std::unique_lock<std::mutex>(*codegen_mu);
    llvm::raw_svector_ostream out(buf);
    llvm::legacy::PassManager pm;
    if (tm.addPassesToEmitFile(pm, out, nullptr, llvm::CGFT_ObjectFile)) {
      why = "the target cannot emit an object file";
      return "";
    }
    pm.run(mod);
  }
  if (ms) {
    const auto t_end = std::chrono::steady_clock::now();
    ms[0] = std::chrono::duration<double, std::milli>(t_cg - t_opt).count();
    ms[1] = std::chrono::duration<double, std::milli>(t_end - t_cg).count();
  }
  return std::string(buf.data(), buf.size());
}

namespace {
// A target machine for the host at code generator level `level`.
std::unique_ptr<llvm::TargetMachine> host_tm(llvm::CodeGenOpt::Level level, std::string& why) {
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) {
    why = llvm::toString(jtmb.takeError());
    return nullptr;
  }
  jtmb->setCodeGenOptLevel(level);
  auto tm = jtmb->createTargetMachine();
  if (!tm) {
    why = llvm::toString(tm.takeError());
    return nullptr;
  }
  return std::move(*tm);
}
}  // namespace

// The target machines (and the strings below) are leaked on purpose: a
// function-local static first reached on the tier thread would be destroyed
// at exit before the handler that waits for that thread's compile has run
// (exit handlers run in reverse order of registration).
llvm::TargetMachine* background_tm(std::string& why) {
  static std::string* error = new std::string;
  static llvm::TargetMachine* tm = host_tm(llvm::CodeGenOpt::Aggressive, *error).release();
  why = *error;
  return tm;
}

llvm::TargetMachine* quick_tm(std::mutex*& mu, std::string& why) {
  // CodeGenOpt::None: fast instruction selection and register allocation,
  // and no loop strength reduction (half the code generator's time on a
  // nest at the other levels).
  static std::mutex* m = new std::mutex;
  static std::string* error = new std::string;
  static llvm::TargetMachine* tm = host_tm(llvm::CodeGenOpt::None, *error).release();
  mu = m;
  why = *error;
  return tm;
}

bool still_wanted(const std::string& name) {
  Jit& j = jit();
  std::lock_guard<std::mutex> lock(j.mu);
  auto p = j.pending.find(name);
  if (p == j.pending.end()) return false;
  for (const auto& up : p->second.targets) {
    std::lock_guard<std::mutex> up_lock(up->mu);
    if (up->code || !up->superseded) return true;
  }
  j.pending.erase(p);  // a later compile of the same code queues it again
  return false;
}

NativeFn link_optimised(const std::string& obj, const std::string& name,
                        std::vector<std::shared_ptr<NativeUpgrade>>& targets, std::string& why) {
  Jit& j = jit();
  std::lock_guard<std::mutex> lock(j.mu);
  if (auto p = j.pending.find(name); p != j.pending.end()) {
    targets = std::move(p->second.targets);
    j.pending.erase(p);
  }
  return obj.empty() ? nullptr : link_locked(j, obj, name, why);
}

}  // namespace native_tiers

namespace {

// The cache's mark that a partial code with this key met a failed check
// before a loop: later compiles of the loop go whole at once.
Digest needs_whole_key(const std::string& key_hex) { return sha1("needs whole\n", key_hex); }

// The mark's text: "whole", or "sites" and the ids of the checks given their
// general versions (Gen::site_id; native_complete adds one). Read as
// untrusted: anything else, or more than kMaxSites ids, reads as "whole".
constexpr size_t kMaxSites = 4;
std::string sites_mark(const std::set<int>& sites) {
  std::string s = "sites";
  for (int x : sites) s += " " + std::to_string(x);
  return s;
}
bool parse_sites_mark(const std::string& mark, std::set<int>& sites) {
  if (mark.rfind("sites", 0) != 0 || mark.size() > 200) return false;
  std::set<int> out;
  for (size_t i = 5; i < mark.size();) {
    if (mark[i] != ' ') return false;
    size_t j = ++i;
    while (j < mark.size() && mark[j] >= '0' && mark[j] <= '9') ++j;
    if (j == i || j - i > 9) return false;
    out.insert(std::stoi(mark.substr(i, j - i)));
    i = j;
  }
  if (out.empty() || out.size() > kMaxSites) return false;
  sites = std::move(out);
  return true;
}

}  // namespace

// The one entry point of a loop's compile, both tiers and the cache's loads.
std::unique_ptr<NativeCode> native_compile(const FastLoop::Impl& im, const std::vector<Reg>& regs,
                                           const std::vector<ArrEntry>& arrays,
                                           const std::vector<Value>& objects, std::string& why,
                                           bool lazy, const std::set<int>* general_sites) {
  Jit& j = jit();
  if (!j.lljit) {
    why = "the JIT could not start: " + j.error;
    return nullptr;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto context = std::make_unique<llvm::LLVMContext>();
  auto fresh = [&] {
    auto m = std::make_unique<llvm::Module>("tessera_loop", *context);
    m->setDataLayout(j.lljit->getDataLayout());
    m->setTargetTriple(j.lljit->getTargetTriple().str());
    return m;
  };
  std::unique_ptr<llvm::Module> mod;
  std::vector<bool> dyn(regs.size(), false);
  std::vector<bool> f32(regs.size(), false);  // of those, Python's float or np.float32
  const FastLoop::Impl::FNode* cond = &im.cond;
  const FastLoop::Impl::FNode* body = &im.body;
  FastLoop::Impl::FNode flat_cond, flat_body;
  ChainFlattener chains(regs, arrays);
  if (chains.has_chain(im.cond) || chains.has_chain(im.body)) {
    flat_cond = im.cond;
    flat_body = im.body;
    chains.rewrite(flat_cond);
    chains.rewrite(flat_body);
    cond = &flat_cond;
    body = &flat_body;
  }
  const std::map<int, RowOf> rows = chains.rows(*cond, *body);
  bool partial = false;
  const bool tiers = native_tiers_enabled();
  const char* cpu_key = std::getenv("TESSERA_CACHE_CPU");  // tests: another CPU's entry
  const std::string salt = std::string("tessera ") + TESSERA_VERSION_STRING + " llvm " +
                           LLVM_VERSION_STRING + " format 6" +
                           (j.llvm_args.empty() ? "" : " llvm " + j.llvm_args) + " helpers " +
                           std::to_string(std::size(kHelpers)) + " cpu " +
                           (cpu_key ? std::string(cpu_key) : j.cpu + " " + j.features) + "\n";
  std::string ir, base_hex;
  Digest key{};
  std::set<int> sites;
  if (general_sites) sites = *general_sites;
  for (bool marked = false;;) {
    mod = fresh();
    for (;;) {
      try {
        Gen g(im, *cond, *body, regs, arrays, objects, *context, *mod, dyn, rows);
        g.f32_dyn = &f32;
        g.lazy_build = lazy;
        g.general_sites = &sites;
        g.build("tessera_loop");
        partial = lazy && !g.need_full->use_empty();
        break;
      } catch (const NoLazy&) {
        lazy = false;
        mod = fresh();
      } catch (const Refuse& r) {
        why = r.why;
        return nullptr;
      } catch (const Retry& r) {
        if (dyn[r.reg]) {
          why = "internal error: a variable's kind could not be settled";
          return nullptr;
        }
        dyn[r.reg] = true;
        f32[r.reg] = r.f32;
        mod = fresh();
      }
    }
    std::string verify;
    llvm::raw_string_ostream os(verify);
    if (llvm::verifyModule(*mod, &os)) {
      why = "internal error: invalid code generated: " + os.str();
      return nullptr;
    }
    // The key: the code before optimisation, and what makes the same code
    // give other machine code.
    ir.clear();
    llvm::raw_string_ostream ios(ir);
    mod->print(ios, nullptr);
    ios.flush();
    key = sha1(salt, ir);
    // A completion (native_complete): the mark is its caller's.
    if (!partial || marked || !sites.empty()) break;
    // A loop whose partial code failed a check before (this process or an
    // earlier one): at once with the general versions it needed (or whole),
    // not partial then more.
    base_hex = hex(key);
    std::string unused;
    const std::string mark = NativeCache(needs_whole_key(base_hex)).load(unused);
    if (mark.empty()) break;
    native_tiers::count_needs_whole();
    marked = true;
    if (!parse_sites_mark(mark, sites)) {
      lazy = false;
      partial = false;
    }
  }
  const std::string name = "tessera_loop_" + hex(key);
  auto code = std::make_unique<NativeCode>();
  code->signature = native_signature(regs, arrays);
  code->partial = partial;
  code->key_hex = hex(key);
  code->base_key_hex = base_hex.empty() ? code->key_hex : base_hex;
  code->general_sites = sites;
  code->ir_bytes = ir.size();
  {
    std::lock_guard<std::mutex> lock(j.mu);
    auto it = j.loaded.find(name);
    auto p = j.pending.find(name);
    if (it != j.loaded.end() || p != j.pending.end()) {
      // The same code, compiled in this process already (optimised, or its
      // quick tier while the optimised one is being compiled).
      if (it != j.loaded.end()) {
        code->fn.store(it->second);
      } else {
        code->fn.store(p->second.quick);
        code->quick.store(true);
        code->upgrade = std::make_shared<NativeUpgrade>();
        code->upgrade->code = code.get();
        p->second.targets.push_back(code->upgrade);
      }
      code->from_cache = true;
      code->from_process = true;
      code->compile_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      return code;
    }
  }
  const NativeCache cache(key);
  std::string note;
  std::string obj = cache.load(note);
  code->from_cache = !obj.empty();
  std::mutex* quick_mu = nullptr;
  llvm::TargetMachine* qtm = nullptr;
  if (obj.empty() && tiers && native_tiers::accepting()) {
    std::string unused;
    qtm = native_tiers::quick_tm(quick_mu, unused);
  }
  const bool quick = obj.empty() && qtm;
  const std::string symbol = quick ? name + "_quick" : name;
  if (obj.empty()) {
    mod->getFunction("tessera_loop")->setName(symbol);
    const auto t_opt = std::chrono::steady_clock::now();
    double ms[2] = {0, 0};
    obj = quick ? native_tiers::emit_object(*mod, *qtm, true, why, quick_mu, ms)
                : native_tiers::emit_object(*mod, *j.tm, false, why, &j.mu, ms);
    if (obj.empty()) return nullptr;
    code->generate_ms = std::chrono::duration<double, std::milli>(t_opt - t0).count();
    code->optimise_ms = ms[0];
    code->codegen_ms = ms[1];
    if (native_debug()) {  // where the first call's time goes
      note += std::string(partial ? "; partial" : lazy ? "; lazy, whole" : "; whole") +
              (quick ? ", quick tier" : "") + ", IR " + std::to_string(ir.size()) +
              " bytes, generated in " +
              std::to_string(std::lround(
                  std::chrono::duration<double, std::milli>(t_opt - t0).count())) +
              " ms, optimised in " + std::to_string(std::lround(ms[0])) + " ms, codegen in " +
              std::to_string(std::lround(ms[1])) + " ms";
    }
    if (!quick) cache.store(obj, note);
  }
  {
    std::lock_guard<std::mutex> lock(j.mu);
    const NativeFn fn = link_locked(j, obj, symbol, why);
    if (!fn) return nullptr;
    code->fn.store(fn);
    if (quick) {
      // The optimised tier of the same IR, on the background thread.
      code->quick.store(true);
      code->upgrade = std::make_shared<NativeUpgrade>();
      code->upgrade->code = code.get();
      auto& p = j.pending[name];
      p.quick = fn;
      p.targets.push_back(code->upgrade);
      native_tiers::count_quick();
      const bool traced = trace::on();
      native_tiers::submit(std::move(ir), name, key, im.where,
                           traced ? native_trace_name(im) : nullptr,
                           traced ? native_trace_signature(im, regs, arrays) : nullptr);
    }
  }
  code->cache_note = note;
  code->compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return code;
}

bool FastLoop::Impl::native_complete(const NativeCode& code, const State& st, bool whole) const {
  std::lock_guard<std::mutex> lock(native_mu);
  if (!code.partial.load()) return true;  // made whole by another thread meanwhile
  if (code.whole_refused) return false;
  // The check that failed (NativeCtx::need_site) gets its loop's general
  // version, the others still return kNativeNeedFull: a nest whose one inner
  // check fails compiles that loop's versions, not every loop's (the whole
  // code). Once only: a second failure (a check inside the general version
  // added, growcut's) compiles the whole code, so that a first call costs at
  // most one such code more than partial then whole (each step costs a compile
  // of a larger IR: growcut's three steps took 1.45 times partial then whole).
  // Also whole for a parallel loop's chunks (`whole`) or a site not known.
  const int site = static_cast<int>(st.need_site) - 1;
  if (!whole && site >= 0 && code.general_sites.count(site)) return true;  // added meanwhile
  std::set<int> sites = code.general_sites;
  const bool by_site = !whole && site >= 0 && sites.empty();
  if (by_site) sites.insert(site);
  std::string why;
  NativeCompileTrace traced(*this, st.regs, st.arrays, true);
  std::unique_ptr<NativeCode> next =
      native_compile(*this, st.regs, st.arrays, st.objects, why, by_site, by_site ? &sites : nullptr);
  traced.done(next.get());
  auto& mine = const_cast<NativeCode&>(code);  // fn and partial are atomics; the rest is locked
  if (!next || next->signature != code.signature) {
    mine.whole_refused = true;
    if (debug() || native_debug())
      std::fprintf(stderr, "[fast loops] %s: no whole native code, the interpreter runs what "
                   "the partial one does not: %s\n", where.c_str(),
                   next ? "the registers' kinds changed" : why.c_str());
    return false;
  }
  // Remembered in the cache: the next process compiles this loop at once
  // with the general versions it needed (or whole).
  if (!mine.base_key_hex.empty()) {
    std::string unused;
    NativeCache(needs_whole_key(mine.base_key_hex)).store(by_site ? sites_mark(sites) : "whole",
                                                          unused);
  }
  if (debug() || native_debug()) {
    const std::string what =
        by_site ? std::string(site % native_gen::Gen::kSiteKinds == native_gen::Gen::kSiteWrap
                                  ? "native code admitting negative indices in check "
                                  : "native code with the general version of check ") +
                      std::to_string(site) +
                      (next->partial.load() ? " (partial)" : "")
                : std::string("whole native code");
    std::fprintf(stderr, "[fast loops] %s: a check before a loop failed; the %s %s "
                 "in %.1f ms%s%s%s\n", where.c_str(), what.c_str(),
                 next->from_cache ? "loaded from the cache" : "compiled", next->compile_ms,
                 next->quick.load() ? " (quick tier)" : "",
                 next->cache_note.empty() ? "" : "; cache: ", next->cache_note.c_str());
  }
  mine.compile_ms += next->compile_ms;
  // The partial code's optimised tier, if still coming, is no longer wanted;
  // the whole code's, if coming, is swapped into this code instead.
  if (mine.upgrade) {
    std::lock_guard<std::mutex> up_lock(mine.upgrade->mu);
    mine.upgrade->code = nullptr;
    mine.upgrade->superseded = true;
  }
  mine.general_sites = next->general_sites;
  mine.key_hex = next->key_hex;
  if (next->upgrade) {
    std::lock_guard<std::mutex> up_lock(next->upgrade->mu);
    mine.fn.store(next->fn.load());  // the optimised one if it came meanwhile
    mine.quick.store(next->quick.load());
    next->upgrade->code = &mine;
    mine.upgrade = std::move(next->upgrade);
  } else {
    mine.fn.store(next->fn.load());
    mine.quick.store(false);
    mine.upgrade.reset();
  }
  mine.partial.store(next->partial.load());
  return true;
}

}  // namespace tessera
