#include "tessera/runtime/future.hpp"

namespace tessera::detail {

int& continuation_depth() {
  thread_local int depth = 0;
  return depth;
}

void run_continuation(std::function<void()> fn) {
  int& depth = continuation_depth();
  if (depth >= kMaxInlineContinuationDepth) {
    spawn(std::move(fn));
    return;
  }
  ++depth;
  struct Restore {
    int& d;
    ~Restore() { --d; }
  } restore{depth};
  fn();
}

}  // namespace tessera::detail
