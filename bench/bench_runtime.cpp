// Runtime costs: spawning a task, evaluating a trivial tree node inline and
// as a task, and a 1e6-iteration `while` loop in the language.
//   build/bench/bench_runtime [repeats]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "machine.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/runtime/future.hpp"
#include "tessera/runtime/scheduler.hpp"

using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

template <class F>
double median_of(int repeats, F&& f) {
  std::vector<double> v;
  for (int i = 0; i < repeats; ++i) v.push_back(f());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Spawn-to-completion: N tasks, each fulfilling its future, joined by
// when_all. Tasks are spawned from a worker, as the tree does.
double task_cost_ns(int n) {
  auto t0 = Clock::now();
  std::vector<Future<int>> fs;
  fs.reserve(n);
  run_in_arena([&] {
    for (int i = 0; i < n; ++i) fs.push_back(async([i] { return i; }));
  });
  when_all(std::move(fs)).wait();
  return seconds_since(t0) * 1e9 / n;
}

// Fire-and-forget tasks counted down by an atomic (the scheduler alone).
double raw_spawn_cost_ns(int n) {
  std::atomic<int> left{n};
  Promise<int> done;
  auto t0 = Clock::now();
  run_in_arena([&] {
    for (int i = 0; i < n; ++i) {
      spawn([&] {
        if (left.fetch_sub(1) == 1) done.set_value(0);
      });
    }
  });
  done.get_future().wait();
  return seconds_since(t0) * 1e9 / n;
}

// Seconds to run a program once (compiled beforehand).
double run_seconds(const Program& p) {
  auto t0 = Clock::now();
  p.run();
  return seconds_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  int repeats = argc > 1 ? std::atoi(argv[1]) : 5;
  std::printf("%s\n", bench::machine_line().c_str());
  std::printf("median of %d runs each\n\n", repeats);

  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const int n = 200000;
    double task = median_of(repeats, [&] { return task_cost_ns(n); });
    double raw = median_of(repeats, [&] { return raw_spawn_cost_ns(n); });
    std::printf("threads=%d  task spawn-to-completion (async + future + when_all): %7.1f ns/task\n",
                threads, task);
    std::printf("threads=%d  scheduler spawn alone:                            %7.1f ns/task\n",
                threads, raw);
  }
  std::printf("goal: under 1000 ns per task\n\n");

  // Node overhead: a loop whose body evaluates K extra trivial nodes costs
  // K * iterations node evaluations more than the same loop without them.
  set_num_threads(2);
  const int iters = 100000;
  Program base("define(i, 0) while(i < " + std::to_string(iters) + ", store(i, i + 1))");
  Program extra("define(i, 0) define(z, 0) while(i < " + std::to_string(iters) +
                ", block(store(z, z + 1), store(z, z + 1), store(z, z + 1), store(z, z + 1), "
                "store(i, i + 1)))");
  // Each extra store(z, z + 1) is three nodes: store, add (a primitive) and a
  // variable read. Only primitives are ever spawned.
  for (bool spawned : {false, true}) {
    set_spawn_threshold_ns(spawned ? 0.0 : kSpawnThresholdNs);
    double tb = median_of(repeats, [&] { return run_seconds(base); });
    double te = median_of(repeats, [&] { return run_seconds(extra); });
    double per_group = (te - tb) * 1e9 / (double(iters) * 4);
    std::printf("threads=2  store(z, z + 1) with add %s: %7.1f ns (%.1f ns/node)\n",
                spawned ? "spawned as a task" : "inline           ", per_group, per_group / 3);
  }
  set_spawn_threshold_ns(kSpawnThresholdNs);

  Program loop("define(i, 0) while(i < 1000000, store(i, i + 1)) i");
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    double t = median_of(repeats, [&] { return run_seconds(loop); });
    std::printf("threads=%d  while loop, 1e6 iterations: %.3f s (%.0f ns/iteration)\n", threads, t,
                t * 1e3);
  }
  return 0;
}
