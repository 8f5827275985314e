// Interrupting a running evaluation (Ctrl-C): a process-wide flag that the
// Python binding sets from its SIGINT handler and that loops (while,
// for_each) and parallel_for tiles check, failing the evaluation with
// Interrupted, which the binding turns into KeyboardInterrupt.
#pragma once

#include "tessera/core/error.hpp"  // Interrupted

namespace tessera {

// Async-signal-safe: only stores to a lock-free atomic.
void request_interrupt() noexcept;
void clear_interrupt() noexcept;
bool interrupt_requested() noexcept;
// The flag itself (a lock-free std::atomic<bool>, one byte), for native
// code that checks it on loop back-edges (lang/native_gen.cpp).
const volatile void* interrupt_flag_address() noexcept;

// Throws Interrupted when an interrupt was requested.
void check_interrupt();

}  // namespace tessera
