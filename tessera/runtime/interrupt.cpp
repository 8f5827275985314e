#include "tessera/runtime/interrupt.hpp"

#include <atomic>

namespace tessera {

namespace {

std::atomic<bool> g_interrupt{false};
static_assert(std::atomic<bool>::is_always_lock_free, "the flag is set from a signal handler");

}  // namespace

void request_interrupt() noexcept { g_interrupt.store(true, std::memory_order_relaxed); }
void clear_interrupt() noexcept { g_interrupt.store(false, std::memory_order_relaxed); }
bool interrupt_requested() noexcept { return g_interrupt.load(std::memory_order_relaxed); }
const volatile void* interrupt_flag_address() noexcept { return &g_interrupt; }

void check_interrupt() {
  if (interrupt_requested()) throw Interrupted("[interrupt] evaluation interrupted (SIGINT)");
}

}  // namespace tessera
