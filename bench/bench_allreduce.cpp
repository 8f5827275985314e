// Collectives: tessera's all_reduce primitive against raw MPI_Allreduce, fused
// against unfused small all-reduces, and how much of a 16 MB all-reduce hides
// behind computation. Run on 2 localities:
//   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TESSERA_THREADS=1
//   mpirun -n 2 --bind-to none build/bench/bench_allreduce
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "machine.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/scheduler.hpp"

using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

template <class F>
double median_s(int repeats, F&& f) {
  std::vector<double> t;
  f();
  for (int i = 0; i < repeats; ++i) {
    double t0 = now_s();
    f();
    t.push_back(now_s() - t0);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main() {
  int rank = static_cast<int>(call_primitive("locality", std::vector<Value>{}).as_int());
  int size = static_cast<int>(call_primitive("num_localities", std::vector<Value>{}).as_int());
  if (size < 2) {
    std::printf("run on at least 2 localities: mpirun -n 2 build/bench/bench_allreduce\n");
    return 0;
  }
  int level = 0;
  MPI_Query_thread(&level);
  bool raw_ok = level == MPI_THREAD_MULTIPLE;
  if (rank == 0) {
    std::printf("%s\nlocalities: %d, threads per locality: %d; median of 7\n\n",
                bench::machine_line().c_str(), size, num_threads());
    std::printf("%10s %14s %14s %8s\n", "bytes", "tessera us", "raw MPI us", "ratio");
  }
  for (int64_t bytes = 4; bytes <= (int64_t{64} << 20); bytes *= 16) {
    int64_t n = std::max<int64_t>(1, bytes / 4);
    Array x = Array::full(DType::float32, {n}, 1.0);
    Program p("define(f, x, all_reduce(x)) f", "bench.tsl");
    double t = median_s(7, [&] { p.run({Value(x)}); });
    double raw = 0;
    if (raw_ok) {
      std::vector<float> in(n, 1.0f), out(n);
      raw = median_s(7, [&] {
        MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM,
                      MPI_COMM_WORLD);
      });
    }
    if (rank == 0) {
      std::printf("%10lld %14.1f %14.1f %8.2f\n", static_cast<long long>(bytes), t * 1e6,
                  raw * 1e6, raw > 0 ? t / raw : 0.0);
    }
  }

  // 256 all-reduces of 4 KB: separate (in flight together) or fused into one.
  std::string parts;
  for (int i = 0; i < 256; ++i) {
    parts += std::string(i ? ", " : "") + "all_reduce(x + " + std::to_string(i) + ")";
  }
  Program unfused("define(f, x, list(" + parts + ")) f", "unfused.tsl");
  std::string cat;
  for (int i = 0; i < 256; ++i) cat += std::string(i ? ", " : "") + "x + " + std::to_string(i);
  Program fused("define(f, x, split(all_reduce(concatenate(list(" + cat + "))), 256)) f",
                "fused.tsl");
  Array small = Array::full(DType::float32, {1024}, 1.0);
  double tu = median_s(7, [&] { unfused.run({Value(small)}); });
  double tf = median_s(7, [&] { fused.run({Value(small)}); });
  if (rank == 0) {
    std::printf("\n256 all-reduces of 4 KB: unfused %.2f ms, fused %.2f ms: fused %.1fx faster "
                "(goal >= 5x)\n", tu * 1e3, tf * 1e3, tu / tf);
  }

  // Overlap: a 16 MB all-reduce beside ~20 ms of matrix products.
  Array big = Array::full(DType::float32, {int64_t{4} << 20}, 1.0);
  Array m = Array::full(DType::float64, {512, 512}, 0.001);
  Program comm("define(f, x, m, all_reduce(x)) f", "c.tsl");
  Program work("define(f, x, m, block(define(a, m @ m), define(b, a @ m), define(c, b @ m), "
               "define(d, c @ m), sum(d))) f", "w.tsl");
  Program both("define(f, x, m, parallel_block(define(r, all_reduce(x)), block(define(a, m @ m), "
               "define(b, a @ m), define(c, b @ m), define(d, c @ m), sum(d)))) f", "b.tsl");
  double tc = median_s(7, [&] { comm.run({Value(big), Value(m)}); });
  double tw = median_s(7, [&] { work.run({Value(big), Value(m)}); });
  double tb = median_s(7, [&] { both.run({Value(big), Value(m)}); });
  if (rank == 0) {
    double hidden = std::clamp((tc + tw - tb) / tc, 0.0, 1.0);
    std::printf("\n16 MB all-reduce %.2f ms, computation %.2f ms, both at once %.2f ms: "
                "%.0f%% of the all-reduce hidden (goal >= 90%%)\n", tc * 1e3, tw * 1e3, tb * 1e3,
                hidden * 100);
  }
  return 0;
}
