// The background tier of native loops (native_tiers.hpp): one thread of its
// own (not a runtime worker running user tasks) compiles the queued loops at
// -O3, one at a time, stores them in the disk cache and swaps them into the
// codes that run their quick version. At process exit the queue is dropped
// and the compile under way is waited for (atexit), so that LLVM's globals
// are not destroyed under a running compile.
#include "tessera/lang/native_tiers.hpp"

#include <pthread.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <thread>
#include <utility>

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>

#include "tessera/runtime/trace.hpp"

namespace tessera {

bool native_tiers_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("TESSERA_NATIVE_TIERS");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

NativeCode::~NativeCode() {
  if (upgrade) {
    std::lock_guard<std::mutex> lock(upgrade->mu);
    if (upgrade->code == this) upgrade->code = nullptr;
  }
}

namespace native_tiers {
namespace {

struct Job {
  std::string ir, name, where;
  Digest key;
  const std::string* trace_name = nullptr;
  const std::string* trace_signature = nullptr;
};

std::atomic<int64_t> g_quick{0}, g_optimised{0}, g_swapped{0}, g_needs_whole{0};

// The queue and its one thread. Leaked on purpose (as the JIT is): the
// atexit handler stops the thread; nothing runs after it.
struct Worker {
  std::mutex mu;
  std::condition_variable wake, idle;
  std::deque<Job> queue;
  bool busy = false;
  bool stop = false;
  bool started = false;
  std::thread thread;
  // Held by the thread for each compile: fork() waits for it (fork_prepare),
  // so that no lock of a compile under way is copied locked into the child.
  std::mutex gate;

  void run();
  void compile(Job& job);
  void start_locked();
};

// fork() copies only the calling thread: the child has this Worker's state
// but not its thread. Left as it was, the child's exit would join a thread
// that does not exist there (std::system_error: the process aborted) and its
// queued loops would wait for a compile that never comes. The child gets a
// fresh Worker holding the same queue, whose thread starts at its next submit
// or wait; the old one (its mutexes locked by fork_prepare) is leaked.
Worker* g_worker = nullptr;

void fork_prepare() {
  g_worker->gate.lock();
  g_worker->mu.lock();
}

void fork_parent() {
  g_worker->mu.unlock();
  g_worker->gate.unlock();
}

void fork_child() {
  Worker* old = g_worker;
  Worker* fresh = new Worker;
  fresh->queue = std::move(old->queue);
  fresh->stop = old->stop;
  g_worker = fresh;
}

Worker& worker() {
  static const bool made = [] {
    g_worker = new Worker;
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    return true;
  }();
  (void)made;
  return *g_worker;
}

void stop_at_exit() { native_tiers_stop(); }

void stop_worker() {
  Worker& w = worker();
  {
    std::lock_guard<std::mutex> lock(w.mu);
    w.stop = true;
    w.queue.clear();  // their codes keep the quick tier: the process is ending
  }
  w.wake.notify_all();
  if (w.thread.joinable() && w.thread.get_id() != std::this_thread::get_id())
    w.thread.join();  // the compile under way, at most
}

void Worker::run() {
  trace::name_thread("native tier");
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu);
      wake.wait(lock, [&] { return stop || !queue.empty(); });
      if (stop) {
        busy = false;
        idle.notify_all();
        return;
      }
      job = std::move(queue.front());
      queue.pop_front();
      busy = true;
    }
    {
      std::lock_guard<std::mutex> forking(gate);
      compile(job);
    }
    {
      std::lock_guard<std::mutex> lock(mu);
      busy = false;
      if (queue.empty()) idle.notify_all();
    }
  }
}

void Worker::compile(Job& job) {
  // A partial code made whole before its turn came: its optimised version
  // would be neither run nor, in a later process, loaded (the needs-whole mark).
  // (A code whose loop was freed is still compiled: the next process loads it.)
  if (!still_wanted(job.name)) {
    if (native_debug())
      std::fprintf(stderr, "[fast loops] %s: optimised native code not compiled: no code "
                   "waits for it (its partial code was made whole)\n", job.where.c_str());
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  const int64_t trace_t0 = trace::on() ? trace::now_ns() : 0;
  std::string why, obj;
  // A context and module of this thread's own, parsed from the IR the key
  // was made of: nothing of the caller's LLVM state is shared.
  llvm::LLVMContext context;
  llvm::SMDiagnostic err;
  std::unique_ptr<llvm::Module> mod =
      llvm::parseIR(llvm::MemoryBufferRef(job.ir, job.name), err, context);
  const double parse_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  llvm::TargetMachine* tm = mod ? background_tm(why) : nullptr;
  if (!mod) why = "the IR did not parse: " + err.getMessage().str();
  double steps_ms[2] = {-1e-6, -1e-6};
  if (tm) {
    mod->getFunction("tessera_loop")->setName(job.name);
    obj = emit_object(*mod, *tm, false, why, nullptr, steps_ms);
  }
  if (trace_t0 && !obj.empty()) {
    // The optimised tier as a compile event of this thread (a trace that
    // recorded the quick compile): `tessera report` shows both tiers.
    trace::CompileRecord c;
    c.name = job.trace_name ? job.trace_name : trace::intern(job.where);
    c.signature = job.trace_signature;
    c.mode = trace::CompileRecord::Mode::optimised;
    c.ir_bytes = job.ir.size();
    c.generate_ns = static_cast<int64_t>(parse_ms * 1e6);
    c.optimise_ns = static_cast<int64_t>(steps_ms[0] * 1e6);
    c.codegen_ns = static_cast<int64_t>(steps_ms[1] * 1e6);
    trace::record_compile(c, trace_t0, trace::now_ns());
  }
  if (!obj.empty()) {
    std::string note;
    NativeCache(job.key).store(obj, note);  // only optimised code is ever cached
  }
  std::vector<std::shared_ptr<NativeUpgrade>> targets;
  const NativeFn fn = link_optimised(obj, job.name, targets, why);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (fn) ++g_optimised;
  int swapped = 0;
  for (const auto& up : targets) {
    std::lock_guard<std::mutex> lock(up->mu);
    up->optimised = fn;
    if (fn && up->code) {
      up->code->fn.store(fn, std::memory_order_release);
      up->code->quick.store(false);
      ++swapped;
    }
  }
  g_swapped += swapped;
  if (native_debug())
    std::fprintf(stderr, "[fast loops] %s: optimised native code %s in %.1f ms in the background%s%s\n",
                 job.where.c_str(), fn ? "compiled" : "not compiled", ms,
                 fn ? (swapped ? ", swapped in" : ", its loop gone") : ": ", fn ? "" : why.c_str());
}

}  // namespace

void submit(std::string ir, std::string name, const Digest& key, std::string where,
            const std::string* trace_name, const std::string* trace_signature) {
  Worker& w = worker();
  {
    std::lock_guard<std::mutex> lock(w.mu);
    if (w.stop) return;
    w.queue.push_back(Job{std::move(ir), std::move(name), std::move(where), key, trace_name,
                          trace_signature});
    w.start_locked();
  }
  w.wake.notify_one();
}

// With mu held: the thread started once per process (again in a forked child).
void Worker::start_locked() {
  if (started) return;
  started = true;
  // No signal for this thread: Ctrl-C is the interpreter's (main) thread's.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  thread = std::thread([this] { run(); });
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  static const bool registered = (std::atexit(stop_at_exit), true);  // once: inherited by a child
  (void)registered;
}

bool accepting() {
  Worker& w = worker();
  std::lock_guard<std::mutex> lock(w.mu);
  return !w.stop;
}

void count_quick() { ++g_quick; }
void count_needs_whole() { ++g_needs_whole; }

}  // namespace native_tiers

NativeTierStats native_tier_stats() {
  using namespace native_tiers;
  NativeTierStats s;
  s.quick = g_quick.load();
  s.optimised = g_optimised.load();
  s.swapped = g_swapped.load();
  s.needs_whole = g_needs_whole.load();
  Worker& w = worker();
  std::lock_guard<std::mutex> lock(w.mu);
  s.pending = static_cast<int64_t>(w.queue.size()) + (w.busy ? 1 : 0);
  return s;
}

void native_tiers_stop() { native_tiers::stop_worker(); }

void native_tiers_wait() {
  native_tiers::Worker& w = native_tiers::worker();
  std::unique_lock<std::mutex> lock(w.mu);
  if (!w.stop && !w.queue.empty()) w.start_locked();  // a forked child's inherited queue
  w.wake.notify_one();
  w.idle.wait(lock, [&] { return w.stop || (w.queue.empty() && !w.busy); });
}

}  // namespace tessera
