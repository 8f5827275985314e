// The task scheduler: one oneTBB arena that owns the cores (DESIGN.md
// principle 1). All evaluation runs as tasks in this arena; only the outermost
// API boundary (the CLI, the Python binding) waits for results.
#pragma once

#include <cstdint>
#include <functional>

namespace tessera {

// Number of worker threads the runtime uses. Defaults to TESSERA_THREADS or
// all cores; `set_num_threads` changes it (before or between evaluations).
int num_threads();
void set_num_threads(int n);

// Runs `task` asynchronously on a worker of the arena (fire and forget; the
// task reports its result through a promise).
void spawn(std::function<void()> task);

// Runs `fn` inside the arena on the calling thread and returns when it is
// done, so nested parallel work uses the arena's workers. For the outermost
// boundary only: never call it from a task.
void run_in_arena(const std::function<void()>& fn);

// True when the calling thread is one of the arena's workers (or runs inside
// run_in_arena).
bool in_worker();

// Held by every outermost evaluation (Program::run, a call from Python) for
// its duration. set_num_threads waits until no evaluation holds one, and new
// evaluations wait while it is pending, so the arena is never replaced under
// running work. Never hold one while calling set_num_threads.
class EvaluationScope {
 public:
  EvaluationScope();
  ~EvaluationScope();
  EvaluationScope(const EvaluationScope&) = delete;
  EvaluationScope& operator=(const EvaluationScope&) = delete;
};

// Tasks spawned since the process started (a counter for tests and benches).
uint64_t tasks_spawned();
// Tasks spawned and not finished yet (queued or running).
uint64_t tasks_outstanding();
// Outermost evaluations in progress (EvaluationScope holders).
int evaluations_in_progress();

}  // namespace tessera
