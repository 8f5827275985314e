// Ctrl-C during a run. While the GIL is released Python cannot run its
// SIGINT handler, and the evaluation may be an endless loop on this very
// thread, so polling from here would not do. Instead a C handler sits in
// front of Python's: it asks the runtime to stop (loops and tiles check the
// flag) and forwards the signal to Python's C handler, which marks it
// pending; the failed run (Interrupted) then lets Python run its handler
// (KeyboardInterrupt, or whatever the user installed). Outside runs the
// forwarding makes it invisible.
//
// Python puts its own C handler back whenever signal.signal(SIGINT, ...) is
// called, so ours must be checked for. Asking the kernel (sigaction) on
// every call cost about 0.5 us, most of a short jit call, so a run checks
// synchronously only when Python's handler object changed since the last
// check (signal.getsignal, no system call) or when no run happened for a
// while; a watcher thread checks during long runs, so a handler replaced
// with the same Python object (a saved handler restored) is caught within
// two ticks of a long run starting.
#include "tessera/python/sigint.hpp"

#include <Python.h>
#include <pythread.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <pthread.h>
#include <mutex>
#include <thread>

#include "tessera/runtime/interrupt.hpp"

namespace tessera::python {
namespace {

constexpr auto kTick = std::chrono::milliseconds(10);
// Ticks with no run before the watcher sleeps until the next run wakes it
// (a process that stopped calling tessera gets no wake-ups).
constexpr int kIdleTicks = 100;

unsigned long g_main_thread = 0;
struct sigaction g_python_sigint;  // the handler ours forwards to
std::mutex g_install_mutex;        // the main thread and the watcher both install

PyObject* g_getsignal = nullptr;    // _signal.getsignal
PyObject* g_sigint_number = nullptr;
PyObject* g_seen_handler = nullptr;  // Python's handler at the last check (a reference)

std::atomic<int> g_main_runs{0};            // main-thread runs under way
std::atomic<unsigned long> g_run_starts{0};  // main-thread runs started
std::atomic<bool> g_watcher_asleep{true};    // also before the watcher starts
bool g_watcher_started = false;              // under the watch mutex
// Never destroyed: the watcher thread may still wait on them at exit.
std::mutex* g_watch_mutex = new std::mutex;
std::condition_variable* g_watch_cv = new std::condition_variable;

extern "C" void on_sigint(int sig) {
  if (g_python_sigint.sa_flags & SA_SIGINFO) return;
  void (*forward)(int) = g_python_sigint.sa_handler;
  if (forward == SIG_DFL || forward == SIG_IGN || forward == nullptr) return;
  request_interrupt();
  forward(sig);
}

// Puts our handler in front of Python's unless it is there already (SIG_IGN
// / SIG_DFL or a siginfo handler are left alone: SIGINT ignored stays
// ignored).
void install_handler() {
  std::lock_guard<std::mutex> lock(g_install_mutex);
  struct sigaction current;
  if (sigaction(SIGINT, nullptr, &current) != 0) return;
  if (current.sa_flags & SA_SIGINFO) return;
  if (current.sa_handler == &on_sigint) return;
  if (current.sa_handler == SIG_IGN || current.sa_handler == SIG_DFL) return;
  g_python_sigint = current;
  struct sigaction mine {};
  mine.sa_handler = &on_sigint;
  sigemptyset(&mine.sa_mask);
  mine.sa_flags = current.sa_flags;
  sigaction(SIGINT, &mine, nullptr);
}

// Checks the handler while a main-thread run lasts two ticks or more; sleeps
// when runs stop.
void watch() {
  std::unique_lock<std::mutex> lock(*g_watch_mutex);
  bool was_running = false;
  int idle = 0;
  unsigned long starts_seen = g_run_starts.load(std::memory_order_relaxed);
  for (;;) {
    if (g_watcher_asleep.load(std::memory_order_relaxed)) {
      g_watch_cv->wait(lock, [] { return !g_watcher_asleep.load(std::memory_order_relaxed); });
      was_running = false;
      idle = 0;
    }
    g_watch_cv->wait_for(lock, kTick);
    const bool running = g_main_runs.load(std::memory_order_relaxed) > 0;
    if (running && was_running) install_handler();
    was_running = running;
    const unsigned long starts = g_run_starts.load(std::memory_order_relaxed);
    idle = (running || starts != starts_seen) ? 0 : idle + 1;
    starts_seen = starts;
    if (idle >= kIdleTicks) g_watcher_asleep.store(true, std::memory_order_relaxed);
  }
}

// Wakes (or starts) the watcher; true when it was asleep, i.e. no run for a
// while, so the caller checks the handler itself.
bool wake_watcher() {
  if (!g_watcher_asleep.load(std::memory_order_relaxed)) return false;
  {
    std::lock_guard<std::mutex> lock(*g_watch_mutex);
    g_watcher_asleep.store(false, std::memory_order_relaxed);
    if (!g_watcher_started) {
      g_watcher_started = true;
      std::thread(watch).detach();
    }
  }
  g_watch_cv->notify_one();
  return true;
}

// Whether Python's handler object changed since the last check (one C call,
// no system call). Errors count as changed.
bool python_handler_changed() {
  if (g_getsignal == nullptr) {
    PyObject* signal_module = PyImport_ImportModule("_signal");
    if (signal_module == nullptr) {
      PyErr_Clear();
      return true;
    }
    g_getsignal = PyObject_GetAttrString(signal_module, "getsignal");
    Py_DECREF(signal_module);
    g_sigint_number = PyLong_FromLong(SIGINT);
    if (g_getsignal == nullptr || g_sigint_number == nullptr) {
      PyErr_Clear();
      Py_CLEAR(g_getsignal);
      return true;
    }
  }
  PyObject* handler = PyObject_CallOneArg(g_getsignal, g_sigint_number);
  if (handler == nullptr) {
    PyErr_Clear();
    return true;
  }
  if (handler == g_seen_handler) {
    Py_DECREF(handler);
    return false;
  }
  Py_XSETREF(g_seen_handler, handler);
  return true;
}

}  // namespace

void init_sigint(unsigned long main_thread) {
  g_main_thread = main_thread;
  // A forked child has no watcher thread: the next run starts one.
  pthread_atfork(nullptr, nullptr, [] {
    g_watch_mutex = new std::mutex;
    g_watch_cv = new std::condition_variable;
    g_watcher_started = false;
    g_watcher_asleep.store(true, std::memory_order_relaxed);
    g_main_runs.store(0, std::memory_order_relaxed);
  });
}

SigintWatch::SigintWatch() : main_(PyThread_get_thread_ident() == g_main_thread) {
  clear_interrupt();
  if (!main_) return;
  g_run_starts.fetch_add(1, std::memory_order_relaxed);
  g_main_runs.fetch_add(1, std::memory_order_relaxed);
  const bool woke = wake_watcher();
  if (python_handler_changed() || woke) install_handler();
}

SigintWatch::~SigintWatch() {
  if (main_) g_main_runs.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace tessera::python
