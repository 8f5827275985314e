// Tiered compilation of native loops (docs/runtime.md, "Native loops",
// "Compile time"): a loop's first code is compiled by a quick tier (LLVM's
// -O1 pipeline, the code generator's lowest level: no loop strength
// reduction, fast instruction selection) and runs at once; the same
// unoptimised IR is compiled at -O3 on one background thread, written to
// the disk cache, and swapped into the loop's NativeCode::fn. Only the
// optimised code is ever cached, so a process that finds the cache warm
// never runs the quick tier. Private to native.cpp and native_tiers.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tessera/lang/native.hpp"
#include "tessera/lang/native_cache.hpp"

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace tessera {

// The link from a background compile to the NativeCode it upgrades: the
// code's destructor clears `code` (the loop's function freed before its
// optimised tier came), and native_complete moves it to another code, all
// under `mu`, under which the swap happens too.
struct NativeUpgrade {
  std::mutex mu;
  NativeCode* code = nullptr;
  NativeFn optimised = nullptr;  // set once the background compile linked it
  // Its partial code was made whole: the optimised partial code would be
  // neither run nor (the needs-whole mark) loaded by a later process. A code
  // merely freed still has its optimised version cached, for the next process.
  bool superseded = false;
};

namespace native_tiers {

// Optimises `mod` (-O3 with both vectorisers, or the quick tier's -O1) and
// emits an object file with `tm` (native.cpp), its code generator under
// `codegen_mu` when given (a target machine shared by threads). Empty with
// `why` on failure; the ms of optimisation and code generation in `ms`.
std::string emit_object(llvm::Module& mod, llvm::TargetMachine& tm, bool quick, std::string& why,
                        std::mutex* codegen_mu = nullptr, double* ms = nullptr);
// The quick tier's target machine (the code generator's lowest level) and
// the lock its users take.
llvm::TargetMachine* quick_tm(std::mutex*& mu, std::string& why);
// The background thread's own target machine, made on first use (by that
// thread only: a TargetMachine is not for two threads at once).
llvm::TargetMachine* background_tm(std::string& why);
// False (and `name` no longer pending) when every code that waited for
// `name` was superseded (NativeUpgrade::superseded; native.cpp).
bool still_wanted(const std::string& name);
// Under the JIT's lock: links the optimised `obj` (none when empty) as
// `name`, and takes the codes waiting for it (the pending entry of `name`)
// into `targets`. The function, or null with `why` (native.cpp).
NativeFn link_optimised(const std::string& obj, const std::string& name,
                        std::vector<std::shared_ptr<NativeUpgrade>>& targets, std::string& why);

// Queues the -O3 compile of `ir` (the unoptimised IR the key was made of,
// its function "tessera_loop") as symbol `name`, then stored in the cache
// under `key`, linked, and swapped into the codes registered as waiting for
// `name` (Jit::pending, native.cpp). `where`: the loop, for the debug log.
// `trace_name`, `trace_signature`: the loop's, interned, when a trace
// recorded at the quick compile (the optimised one is then a compile event
// of the background thread), else null.
void submit(std::string ir, std::string name, const Digest& key, std::string where,
            const std::string* trace_name = nullptr, const std::string* trace_signature = nullptr);

// False once the background thread was stopped (native_tiers_stop): loops
// are then compiled optimised at once.
bool accepting();

// Counting (native_tier_stats).
void count_quick();
void count_needs_whole();

}  // namespace native_tiers
}  // namespace tessera
