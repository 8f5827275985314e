// The buffers of a loop's run kept on its thread for the next run
// (fastloop_native_run.cpp). Private to the fast path's files.
#pragma once

#include "tessera/lang/fastloop_impl.hpp"

namespace tessera {

// For one run: the vectors of `st` (registers, the checkpoint's copies,
// counters, roots, the objects' table and its columns) taken from what the
// run before on this thread left, and given back cleared at the end. A small
// jit function's loop runs its few turns in well under a microsecond, and
// these were a dozen allocations of each run. Declared after `st`, so that
// it gives them back before `st` is destroyed.
class RecycledState {
 public:
  explicit RecycledState(FastLoop::Impl::State& s);
  ~RecycledState();
  RecycledState(const RecycledState&) = delete;
  RecycledState& operator=(const RecycledState&) = delete;

 private:
  FastLoop::Impl::State& st;
};

}  // namespace tessera
