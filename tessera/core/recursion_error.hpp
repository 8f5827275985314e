// Python's RecursionError for tessera's call depth limit (kMaxCallDepth).
//
// Apart from error.hpp so that adding it did not touch every file of the
// library; the few places that map error kinds include it.
#pragma once

#include <stdexcept>

namespace tessera {

// Calls nested deeper than the runtime allows (unbounded recursion): Python's
// RecursionError, a RuntimeError subclass, so it stays a runtime_error here.
class RecursionError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace tessera
