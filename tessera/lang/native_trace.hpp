// The fast loops and the native code in a trace (runtime/trace.hpp): each
// run of a fast loop is one `loop` event (not one per turn: a run costs two
// clock reads when a trace records), and each native compile or cache load
// a `compile` event on the thread that compiled (docs/tracing.md, "Native
// loops in a trace").
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera {

struct NativeCode;

// One run of a fast loop, recorded when it ends if a trace recorded at its
// start. The loop's code says what happened as it goes (cheap when no trace
// records: a few flag and counter updates per run).
class LoopRunTrace {
 public:
  explicit LoopRunTrace(const FastLoop::Impl& im) : im_(im) {
    if (trace::on()) t0_ = trace::now_ns();
  }
  ~LoopRunTrace() {
    if (t0_) record();
  }
  LoopRunTrace(const LoopRunTrace&) = delete;
  LoopRunTrace& operator=(const LoopRunTrace&) = delete;

  // The turns the interpreter ran (the run's counter, read at the end).
  void count_turns(const int64_t* turns) { turns_ = turns; }
  void native_call() { ++calls_; flags_ |= trace::kLoopNative; }
  void flag(uint8_t f) { flags_ |= f; }
  // The run finished the loop (else the general evaluation goes on).
  void finished() { finished_ = true; }

 private:
  void record();
  const FastLoop::Impl& im_;
  int64_t t0_ = 0;
  const int64_t* turns_ = nullptr;
  int32_t calls_ = 0;
  uint8_t flags_ = 0;
  bool finished_ = false;
};

// The loop's name and its signature (`x: float64[2d], n: int`) as a trace
// records them (interned), for a compile recorded elsewhere (the background
// tier, native_tiers.cpp).
const std::string* native_trace_name(const FastLoop::Impl& im);
const std::string* native_trace_signature(const FastLoop::Impl& im, const std::vector<fl::Reg>& regs,
                                          const std::vector<fl::ArrEntry>& arrays);

// A native compile of `im` for the registers of `st`, recorded when `done`
// is called if a trace records: the code's steps (NativeCode's times), or a
// refusal when it is given null.
class NativeCompileTrace {
 public:
  NativeCompileTrace(const FastLoop::Impl& im, const std::vector<fl::Reg>& regs,
                     const std::vector<fl::ArrEntry>& arrays, bool completing)
      : im_(im), regs_(regs), arrays_(arrays), completing_(completing) {
    if (trace::on()) t0_ = trace::now_ns();
  }
  void done(const NativeCode* code);

 private:
  const FastLoop::Impl& im_;
  const std::vector<fl::Reg>& regs_;
  const std::vector<fl::ArrEntry>& arrays_;
  bool completing_;
  int64_t t0_ = 0;
};

}  // namespace tessera
