#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/parallel.hpp"

#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/task_arena.h>
#include <oneapi/tbb/task_group.h>
#include <oneapi/tbb/task_scheduler_observer.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>
#include <thread>

#include "tessera/runtime/future.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera {

namespace {

// Workers get deep stacks: evaluation of nested expressions and recursion
// runs on them.
constexpr size_t kWorkerStackBytes = 64u << 20;

int default_threads() {
  if (const char* env = std::getenv("TESSERA_THREADS")) {
    int n = std::atoi(env);
    if (n > 0) return n;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

// Set while a thread works in tessera's arena (observed entry and exit), so
// in_worker() is true for every worker, including one running a stolen
// parallel_for tile, and false for any other thread, even one that TBB has
// attached to its implicit default arena.
thread_local bool tl_in_arena = false;

class ArenaObserver : public oneapi::tbb::task_scheduler_observer {
 public:
  explicit ArenaObserver(oneapi::tbb::task_arena& a) : task_scheduler_observer(a) { observe(true); }
  ~ArenaObserver() override { observe(false); }
  void on_scheduler_entry(bool) override { tl_in_arena = true; }
  void on_scheduler_exit(bool) override { tl_in_arena = false; }
};

struct Scheduler {
  std::mutex mutex;
  int threads = default_threads();
  std::unique_ptr<oneapi::tbb::global_control> parallelism;
  int parallelism_limit = 0;
  std::unique_ptr<oneapi::tbb::global_control> stack;
  // The arena of the current thread count (null until first used, and
  // after set_num_threads: made again at the next use). Switching counts
  // ends the old arena, which frees its workers for the new one at once (a
  // kept arena held a worker spinning in it, and the new arena's parallel
  // loops then ran on one thread).
  struct Slot {
    std::unique_ptr<oneapi::tbb::task_arena> arena;
    // Workers spawn into this group: a push onto the worker's own deque
    // (cheap, stolen by idle workers), unlike task_arena::enqueue, which
    // goes through the arena's shared FIFO (used only from outside the arena).
    std::unique_ptr<oneapi::tbb::task_group> group;
    std::unique_ptr<ArenaObserver> observer;
  };
  Slot slot;
  Slot* current = nullptr;
  std::atomic<uint64_t> spawned{0};
  std::atomic<uint64_t> finished{0};

  // Workers for a thread count of n: n - 1 (at least 1). The thread that
  // runs a program computes too (it takes tiles of every parallel_for it
  // starts, and runs the inline primitives), so n - 1 workers make n threads
  // at work. n workers made n + 1 threads on n cores: the worker no tile was
  // left for spun (as oneTBB's idle workers do before sleeping) on a core
  // that the program's thread then waited for, and the ResNet step at 2
  // threads ran 6 ms of its 80 on one thread.
  static int arena_workers(int n) { return std::max(1, n - 1); }

  oneapi::tbb::task_arena& get() {
    std::lock_guard lock(mutex);
    if (!current) {
      // Every slot goes to a worker (arena_workers): the thread that runs
      // the program stays outside the arena. TBB's market must allow that
      // many workers (never lowered: lowering it ended worker threads that
      // the next switch back had to start again).
      if (threads + 1 > parallelism_limit) {
        parallelism_limit = threads + 1;
        parallelism = std::make_unique<oneapi::tbb::global_control>(
            oneapi::tbb::global_control::max_allowed_parallelism, parallelism_limit);
      }
      if (!stack) {
        stack = std::make_unique<oneapi::tbb::global_control>(
            oneapi::tbb::global_control::thread_stack_size, kWorkerStackBytes);
      }
      slot.arena = std::make_unique<oneapi::tbb::task_arena>(arena_workers(threads), 0);
      slot.arena->initialize();
      slot.observer = std::make_unique<ArenaObserver>(*slot.arena);
      slot.group = std::make_unique<oneapi::tbb::task_group>();
      current = &slot;
    }
    return *current->arena;
  }
};

Scheduler& scheduler() {
  static Scheduler* s = new Scheduler();  // never destroyed: workers may outlive main's statics
  return *s;
}

thread_local int tl_inside = 0;

// A task spawned from outside the arena, run by whichever of a worker and
// the thread that spawned it takes it first.
struct OwnTask {
  std::atomic<bool> taken{false};
  std::function<void()> fn;
};
thread_local std::vector<std::shared_ptr<OwnTask>> tl_own_tasks;

void run_task(const std::function<void()>& t) {
  try {
    t();
  } catch (const std::exception& e) {
    // Tasks report errors through their promises; an exception escaping
    // here would cancel the whole group, so it is reported and dropped.
    std::fprintf(stderr, "tessera: internal error: exception escaped a task: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "tessera: internal error: exception escaped a task\n");
  }
}

// A task while a trace records: its span, and the node whose work it ran (a
// task started inside this one, on this thread, names its own node).
void run_traced(const std::function<void()>& t) {
  const void* outer = trace::take_task_node();
  trace::Event e;
  e.kind = trace::EventKind::task;
  e.t0 = trace::now_ns();
  run_task(t);
  e.t1 = trace::now_ns();
  e.what = trace::take_task_node();
  trace::record(e);
  trace::set_task_node(outer);
}

// Evaluations enter shared, set_num_threads exclusively; a waiting
// set_num_threads holds back new evaluations so that it is not starved. An
// evaluation enters and leaves with one atomic operation each while no
// resize is pending or running (`blockers`, sequentially consistent with
// `evaluations`: an evaluation and a resize that arrive together see each
// other, and the evaluation backs off); the mutex and condition variable
// are for the waits.
struct Gate {
  std::mutex mutex;
  std::condition_variable cv;
  std::atomic<int> evaluations{0};
  std::atomic<int> blockers{0};  // resizes waiting or running
};

Gate& gate() {
  static Gate* g = new Gate();  // never destroyed: workers may outlive main's statics
  return *g;
}

thread_local int tl_scopes = 0;

void leave_gate(Gate& g) {
  if (g.evaluations.fetch_sub(1) == 1 && g.blockers.load() != 0) {
    // The resize waits for the last evaluation: taking the mutex means the
    // notification cannot fall between its check and its sleep.
    std::lock_guard lock(g.mutex);
    g.cv.notify_all();
  }
}

}  // namespace

EvaluationScope::EvaluationScope() {
  // Nested scopes on one thread (a program started from within a call) must
  // not wait behind a pending resize that waits for the outer scope.
  if (tl_scopes++ > 0) return;
  Gate& g = gate();
  for (;;) {
    g.evaluations.fetch_add(1);
    if (g.blockers.load() == 0) return;
    leave_gate(g);  // a resize is pending: let it go first
    std::unique_lock lock(g.mutex);
    g.cv.wait(lock, [&] { return g.blockers.load() == 0; });
  }
}

EvaluationScope::~EvaluationScope() {
  if (--tl_scopes > 0) return;
  leave_gate(gate());
}

int num_threads() {
  Scheduler& s = scheduler();
  std::lock_guard lock(s.mutex);
  return s.threads;
}

void set_num_threads(int n) {
  Gate& g = gate();
  // One resize at a time, after every evaluation has left; evaluations
  // that arrive meanwhile wait for it.
  static std::mutex resize_mutex;
  std::lock_guard one_at_a_time(resize_mutex);
  g.blockers.fetch_add(1);
  {
    std::unique_lock gl(g.mutex);
    g.cv.wait(gl, [&] { return g.evaluations.load() == 0; });
  }
  struct Done {
    Gate& g;
    ~Done() {
      std::lock_guard gl(g.mutex);
      g.blockers.fetch_sub(1);
      g.cv.notify_all();
    }
  } done{g};
  Scheduler& s = scheduler();
  std::lock_guard lock(s.mutex);
  n = std::max(1, n);
  if (n == s.threads && s.current) return;
  s.threads = n;
  if (s.current) {
    // Tasks still queued finish before the arena goes away.
    Scheduler::Slot* slot = s.current;
    slot->arena->execute([&] { slot->group->wait(); });
    slot->group.reset();
    slot->observer.reset();
    slot->arena->terminate();
    slot->arena.reset();
    s.current = nullptr;
  }
}

void spawn(std::function<void()> task) {
  Scheduler& s = scheduler();
  s.spawned.fetch_add(1, std::memory_order_relaxed);
  oneapi::tbb::task_arena& arena = s.get();
  oneapi::tbb::task_group& group = *s.current->group;
  if (tl_inside > 0) {
    group.run([t = std::move(task), &s] {
      ++tl_inside;
      if (trace::on()) {
        run_traced(t);
      } else {
        run_task(t);
      }
      --tl_inside;
      s.finished.fetch_add(1, std::memory_order_release);
      linger_after_task();
    });
    return;
  }
  // From outside the arena (the thread that started an evaluation):
  // enqueue, which does not wait for a slot the way execute() does. The task
  // stays claimable by this thread: when it waits for a value before a
  // worker has taken the task, it runs the task itself (run_own_queued_tasks)
  // instead of sleeping while the worker is woken (on a loaded machine a
  // worker's wake-up takes a time slice or more: `np.zeros` spawned before a
  // loop that needs it made 0.4 ms calls take 4-9 ms at 2 threads).
  auto claim = std::make_shared<OwnTask>();
  claim->fn = std::move(task);
  auto& own = tl_own_tasks;
  if (own.size() >= 64) {
    std::erase_if(own, [](const std::shared_ptr<OwnTask>& t) {
      return t->taken.load(std::memory_order_relaxed);
    });
    if (own.size() >= 1024) own.erase(own.begin(), own.begin() + 512);  // the workers run them
  }
  own.push_back(claim);
  arena.enqueue([claim, &s] {
    if (!claim->taken.exchange(true, std::memory_order_acq_rel)) {
      ++tl_inside;
      if (trace::on()) {
        run_traced(claim->fn);
      } else {
        run_task(claim->fn);
      }
      --tl_inside;
      claim->fn = nullptr;
    }
    s.finished.fetch_add(1, std::memory_order_release);
    linger_after_task();
  });
}

bool detail::run_own_queued_tasks(const std::function<bool()>& ready) {
  bool ran = false;
  auto& own = tl_own_tasks;
  while (!own.empty() && !ready()) {
    std::shared_ptr<OwnTask> t = std::move(own.back());
    own.pop_back();
    if (t->taken.exchange(true, std::memory_order_acq_rel)) continue;
    // Run as the caller runs a node inline: still outside the arena, so what
    // it spawns is enqueued (and claimable) in turn.
    if (trace::on()) {
      run_traced(t->fn);
    } else {
      run_task(t->fn);
    }
    t->fn = nullptr;
    ran = true;
  }
  return ran;
}

void run_in_arena(const std::function<void()>& fn) {
  scheduler().get().execute([&] {
    ++tl_inside;
    fn();
    --tl_inside;
  });
}

bool in_worker() { return tl_inside > 0 || tl_in_arena; }

uint64_t tasks_spawned() { return scheduler().spawned.load(std::memory_order_relaxed); }

uint64_t tasks_outstanding() {
  Scheduler& s = scheduler();
  // Finished first: a task counted as finished was counted as spawned before.
  uint64_t done = s.finished.load(std::memory_order_acquire);
  return s.spawned.load(std::memory_order_acquire) - done;
}

int evaluations_in_progress() { return gate().evaluations.load(); }

}  // namespace tessera
