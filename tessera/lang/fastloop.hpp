// The scalar loop fast path: a while loop whose condition and body are
// scalar code (numbers, array elements read and written, arithmetic,
// comparisons, if, nested loops, break/continue) runs on typed registers
// instead of futures and frames (docs/runtime.md, "Scalar loops").
#pragma once

#include <memory>
#include <string>

#include "tessera/lang/tree.hpp"

namespace tessera {

class WhileNode;
class LoopRunTrace;

class FastLoop {
 public:
  // The compiled loop, or null when `loop` contains anything outside the
  // fast subset (effects, return, lists, ...). `frame` is the one it first
  // runs in: calls of jit functions it holds then are compiled inline.
  static std::unique_ptr<FastLoop> compile(const WhileNode& loop, const Frame& frame);
  ~FastLoop();

  // Runs turns of the loop on `frame` while every value stays in the
  // subset. True when the loop finished (its value in `result`); false when
  // it stopped before a turn (at the start, or after rolling back a turn
  // that met anything else: an error, a list, a value of another dtype),
  // with every variable written back, so the general evaluation continues
  // from that turn and reports what it meets as it always does.
  bool run(const FramePtr& frame, Value& result) const;

  struct Impl;

 private:
  explicit FastLoop(std::unique_ptr<Impl> impl);
  // run's turns; `traced` is told what they did (the run's trace event).
  bool run_turns(const FramePtr& frame, Value& result, LoopRunTrace& traced) const;
  std::unique_ptr<Impl> impl_;
};

// False when TESSERA_FAST_LOOPS=0 (for comparisons and debugging).
bool fast_loops_enabled();
// TESSERA_FAST_LOOPS=debug or TESSERA_NATIVE=debug: say on stderr what the
// fast path and the native code do with each loop.
bool fast_loops_debug();
// A prange loop at `where` runs as range, for the reason `why` (said under
// fast_loops_debug(), once per loop and reason).
void note_serial_prange(const std::string& where, const std::string& why);

}  // namespace tessera
