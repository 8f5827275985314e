// A tiny all-reduce (8 bytes: one float64) through the communication engine
// against a plain MPI_Allreduce of the same 8 bytes, at any number of ranks;
// meant for more ranks than cores (issue 29, item 6: waiting threads must
// block or yield when ranks outnumber cores). Prints the machine, N, the
// ranks per core and, per kind, the median time of one call over blocks of
// calls (the blocks of both kinds interleave, so a noisy machine shifts them
// alike), and the ratio; and the context switches per call of each kind
// (getrusage, every thread of the process, the mean over the ranks):
// voluntary (a thread blocked) and involuntary (preempted, or gave its core
// up by sched_yield), figures that do not depend on the machine's load as
// the times do. Run:
//   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TESSERA_THREADS=1
//   mpirun -n 16 --oversubscribe --bind-to none build/bench/bench_oversubscribed
//   [--calls 50] [--blocks 7] [--bytes 8]
#include <mpi.h>
#include <sched.h>
#include <dirent.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "machine.hpp"
#include "tessera/distributed/comm.hpp"

using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// The context switches of every thread of this process so far: voluntary
// (blocked), involuntary (preempted or yielded).
struct Switches {
  double voluntary = 0, involuntary = 0;
};

Switches switches_now() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return {static_cast<double>(u.ru_nvcsw), static_cast<double>(u.ru_nivcsw)};
}

// Per thread of this process (by thread id): its context switches so far,
// from /proc/self/task/<tid>/status (--per-thread: which threads switch).
std::map<long, Switches> thread_switches() {
  std::map<long, Switches> out;
  DIR* d = opendir("/proc/self/task");
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    long tid = std::atol(e->d_name);
    if (tid <= 0) continue;
    std::ifstream f(std::string("/proc/self/task/") + e->d_name + "/status");
    std::string line;
    Switches s;
    while (std::getline(f, line)) {
      if (line.rfind("voluntary_ctxt_switches:", 0) == 0) s.voluntary = std::atof(line.c_str() + 24);
      if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) s.involuntary = std::atof(line.c_str() + 27);
    }
    out[tid] = s;
  }
  closedir(d);
  return out;
}

int usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) return CPU_COUNT(&set);
  return static_cast<int>(std::thread::hardware_concurrency());
}

}  // namespace

int main(int argc, char** argv) {
  int calls = 50, blocks = 7;
  bool per_thread = false;
  int64_t bytes = 8;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 < argc && a == "--calls") {
      calls = std::atoi(argv[++i]);
    } else if (i + 1 < argc && a == "--blocks") {
      blocks = std::atoi(argv[++i]);
    } else if (a == "--per-thread") {
      per_thread = true;
    } else if (i + 1 < argc && a == "--bytes") {
      bytes = std::atoll(argv[++i]);
    } else {
      std::fprintf(stderr, "bench_oversubscribed: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (calls < 1 || blocks < 1 || bytes < 8) {
    std::fprintf(stderr, "bench_oversubscribed: --calls and --blocks must be >= 1, --bytes >= 8\n");
    return 2;
  }
  // The engine initializes MPI (MPI_THREAD_MULTIPLE) on its own thread.
  auto [rank, size] = distributed::detail::world();
  int64_t n = bytes / 8;
  Array x(DType::float64, Shape{n});
  for (int64_t i = 0; i < n; ++i) static_cast<double*>(x.raw())[i] = rank + 1.0;
  std::vector<double> in(n, rank + 1.0), out(n);
  auto engine = [&] {
    Value v = distributed::detail::all_reduce(x, distributed::ReduceOp::sum, "bench").wait();
    return static_cast<const double*>(v.as_array().raw())[0];
  };
  auto mpi = [&] {
    MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return out[0];
  };
  double expect = size * (size + 1) / 2.0;
  if (engine() != expect || mpi() != expect) {
    std::fprintf(stderr, "bench_oversubscribed: wrong sum on rank %d\n", rank);
    return 1;
  }
  std::vector<double> t_engine, t_mpi;
  Switches sw[2];
  std::map<long, Switches> by_thread[2];
  for (int b = 0; b < blocks; ++b) {
    for (int kind = 0; kind < 2; ++kind) {
      MPI_Barrier(MPI_COMM_WORLD);
      Switches s0 = switches_now();
      std::map<long, Switches> p0;
      if (per_thread) p0 = thread_switches();
      auto t0 = Clock::now();
      for (int i = 0; i < calls; ++i) kind ? mpi() : engine();
      double per = std::chrono::duration<double>(Clock::now() - t0).count() / calls;
      Switches s1 = switches_now();
      if (per_thread) {
        for (auto& [tid, s] : thread_switches()) {
          Switches b0 = p0.count(tid) ? p0[tid] : Switches{};
          by_thread[kind][tid].voluntary += s.voluntary - b0.voluntary;
          by_thread[kind][tid].involuntary += s.involuntary - b0.involuntary;
        }
      }
      sw[kind].voluntary += s1.voluntary - s0.voluntary;
      sw[kind].involuntary += s1.involuntary - s0.involuntary;
      // The slowest rank's time.
      double slowest = 0;
      MPI_Allreduce(&per, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
      (kind ? t_mpi : t_engine).push_back(slowest);
    }
  }
  // Per call and rank: the sum over the ranks / (N * blocks * calls).
  double mine[4] = {sw[0].voluntary, sw[0].involuntary, sw[1].voluntary, sw[1].involuntary};
  double all[4] = {0, 0, 0, 0};
  MPI_Reduce(mine, all, 4, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
  double per_call = 1.0 / (static_cast<double>(size) * blocks * calls);
  if (rank == 0) {
    double te = median(t_engine), tm = median(t_mpi);
    std::printf("%s\n", bench::machine_line().c_str());
    std::printf("N = %d ranks on %d usable cores (%.1f ranks per core), %lld-byte all-reduce, "
                "%d blocks of %d calls\n",
                size, usable_cores(), static_cast<double>(size) / usable_cores(),
                static_cast<long long>(bytes), blocks, calls);
    std::printf("engine all_reduce  %10.4f ms\nMPI_Allreduce      %10.4f ms\nratio              %10.2f\n",
                te * 1e3, tm * 1e3, tm > 0 ? te / tm : 0.0);
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 1) load[0] = -1;
    std::printf("context switches per call and rank (voluntary + involuntary): engine %.2f + %.2f, "
                "MPI_Allreduce %.2f + %.2f; load average %.1f\n",
                all[0] * per_call, all[1] * per_call, all[2] * per_call, all[3] * per_call, load[0]);
  }
  if (per_thread) {
    // Rank by rank (in turn), its threads in the order they were made.
    for (int r = 0; r < size; ++r) {
      MPI_Barrier(MPI_COMM_WORLD);
      if (r != rank) continue;
      std::printf("rank %d, per thread (id: engine vol + invol, MPI vol + invol, per call):", rank);
      for (auto& [tid, s] : by_thread[0]) {
        Switches m = by_thread[1][tid];
        std::printf(" %ld: %.2f+%.2f %.2f+%.2f;", tid, s.voluntary / (blocks * calls),
                    s.involuntary / (blocks * calls), m.voluntary / (blocks * calls),
                    m.involuntary / (blocks * calls));
      }
      std::printf("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}
