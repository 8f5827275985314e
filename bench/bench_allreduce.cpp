// Collectives: tessera's all_reduce against raw MPI_Allreduce from 4 B to
// 64 MB, at two levels: the collective as the communication engine runs it
// (the call the all_reduce primitive makes, waited for at once) and the
// primitive in a program (Program::run of a one-line program, which adds the
// interpreter's call and future plumbing). Also a 4 KB latency comparison
// with the three interleaved in blocks (a noisy machine shifts them alike),
// fused against unfused small all-reduces, and how much of a 16 MB
// all-reduce hides behind computation. Run on 2 localities:
//   OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TESSERA_THREADS=1
//   mpirun -n 2 --bind-to none build/bench/bench_allreduce [--json] [--repeats N] [--max-bytes B]
//   [--only overlap]   (the overlap measurement alone)
//   [--profile engine|program|loop N]   (only N 4 KB all-reduces of one kind,
//   to count instructions under callgrind: docs/benchmarks.md)
//   [--scaling B1,B2,...]   (bench_scaling.py: per size in bytes, one engine all-reduce bracketed
//   by MPI_Pcontrol for the PMPI counter of bench/pmpi/pmpi_count.cpp, then the engine's and
//   MPI_Allreduce's median times; one JSON object on rank 0)
// --json prints one JSON object (rank 0) instead of the table, for
// bench/bench_collectives.py, which also runs PyTorch's gloo at the same sizes.
// A figure is the median of single timed calls on rank 0 after one warm-up
// (the interleaved 4 KB comparison: the median of blocks' means).
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "machine.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/scheduler.hpp"

using namespace tessera;
using Clock = std::chrono::steady_clock;

namespace {

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

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

// Small messages are cheap and noisy, so they get more repetitions; a fixed
// --repeats overrides this.
int repeats_for(int64_t bytes, int fixed) {
  if (fixed > 0) return fixed;
  if (bytes <= (int64_t{64} << 10)) return 51;
  if (bytes <= (int64_t{4} << 20)) return 15;
  return 7;
}

struct Options {
  bool json = false;
  bool overlap_only = false;  // --only overlap
  int repeats = 0;  // 0: by size (repeats_for)
  int64_t max_bytes = int64_t{64} << 20;
  // --profile MODE N: only N 4 KB all-reduces of one kind (engine, program
  // or loop), for an instruction count under callgrind (docs/benchmarks.md).
  std::string profile;
  int64_t profile_calls = 0;
  std::vector<int64_t> scaling;  // --scaling: the all-reduce sizes in bytes
};

// Returns false (after saying why on rank 0) when an argument is not understood.
bool parse(int argc, char** argv, Options& o, bool speak) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    char* end = nullptr;
    if (a == "--json") {
      o.json = true;
    } else if (a == "--only" && i + 1 < argc && std::string(argv[i + 1]) == "overlap") {
      o.overlap_only = true;
      ++i;
    } else if (a == "--profile" && i + 2 < argc) {
      o.profile = argv[++i];
      long long v = std::strtoll(argv[++i], &end, 10);
      if ((o.profile != "engine" && o.profile != "program" && o.profile != "loop") || *end != '\0' || v <= 0) {
        if (speak) {
          std::fprintf(stderr, "bench_allreduce: --profile needs engine, program or loop and a positive count, "
                       "got '%s %s'\n", o.profile.c_str(), argv[i]);
        }
        return false;
      }
      o.profile_calls = v;
    } else if (a == "--scaling" && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t at = 0; at <= list.size();) {
        size_t comma = list.find(',', at);
        if (comma == std::string::npos) comma = list.size();
        std::string item = list.substr(at, comma - at);
        long long v = std::strtoll(item.c_str(), &end, 10);
        if (item.empty() || *end != '\0' || v < 4 || v % 4 != 0) {
          if (speak) {
            std::fprintf(stderr, "bench_allreduce: --scaling needs sizes in bytes, multiples of 4, "
                         "separated by commas, got '%s'\n", list.c_str());
          }
          return false;
        }
        o.scaling.push_back(v);
        at = comma + 1;
      }
    } else if ((a == "--repeats" || a == "--max-bytes") && i + 1 < argc) {
      long long v = std::strtoll(argv[++i], &end, 10);
      if (*end != '\0' || v <= 0) {
        if (speak) {
          std::fprintf(stderr, "bench_allreduce: %s needs a positive integer, got '%s'\n", a.c_str(), argv[i]);
        }
        return false;
      }
      if (a == "--repeats") o.repeats = static_cast<int>(v);
      else o.max_bytes = v;
    } else {
      if (speak) {
        std::fprintf(stderr, "bench_allreduce: unknown argument '%s'; usage: bench_allreduce [--json] "
                     "[--repeats N] [--max-bytes B] [--only overlap] [--profile engine|program|loop N]\n", a.c_str());
      }
      return false;
    }
  }
  return true;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// Overlap: a 16 MB all-reduce beside ~20 ms of matrix products, each alone
// and both at once in a parallel_block (medians of single runs).
struct Overlap {
  double comm_s = 0, work_s = 0, both_s = 0;
  int64_t bytes = 0;
  int repeats = 0;
  // The share of the all-reduce hidden: (t_comm + t_work - t_both) / t_comm.
  double hidden() const { return std::clamp((comm_s + work_s - both_s) / comm_s, 0.0, 1.0); }
  // "16 MB all-reduce ... hidden", for the table.
  void print() const {
    std::printf("16 MB all-reduce %.2f ms, computation %.2f ms, both at once %.2f ms: %.0f%% of the all-reduce "
                "hidden (goal >= 90%%)\n", comm_s * 1e3, work_s * 1e3, both_s * 1e3, hidden() * 100);
  }
  // The "overlap" object of --json.
  std::string json() const {
    char out[256];
    std::snprintf(out, sizeof out,
                  "{\"bytes\": %lld, \"repeats\": %d, \"comm_s\": %.9g, \"work_s\": %.9g, \"both_s\": %.9g, "
                  "\"hidden\": %.6f}",
                  static_cast<long long>(bytes), repeats, comm_s, work_s, both_s, hidden());
    return out;
  }
};

Overlap measure_overlap(int repeats) {
  Array big = Array::full(DType::float32, {int64_t{4} << 20}, 1.0);
  // Four products of 384 x 384 float64: ~20 ms on one core of the
  // development machine (512 x 512 took ~57 ms).
  Array m = Array::full(DType::float64, {384, 384}, 0.001);
  Program comm("define(f, x, m, all_reduce(x)) f", "c.tsl");
  Program work("define(f, x, m, block(define(a, m @ m), define(b, a @ m), define(c, b @ m), "
               "define(d, c @ m), sum(d))) f", "w.tsl");
  Program both("define(f, x, m, parallel_block(define(r, all_reduce(x)), block(define(a, m @ m), "
               "define(b, a @ m), define(c, b @ m), define(d, c @ m), sum(d)))) f", "b.tsl");
  Overlap o;
  o.bytes = big.nbytes();
  o.repeats = repeats;
  // In turn, so that a slow spell of the shared machine slows all three.
  comm.run({Value(big), Value(m)});
  both.run({Value(big), Value(m)});
  std::vector<double> tc, tw, tb;
  auto timed = [&](Program& p, std::vector<double>& into) {
    call_primitive("barrier", std::vector<Value>{});
    double t0 = now_s();
    p.run({Value(big), Value(m)});
    into.push_back(now_s() - t0);
  };
  for (int r = 0; r < repeats; ++r) {
    timed(comm, tc);
    timed(work, tw);
    timed(both, tb);
  }
  o.comm_s = median(tc);
  o.work_s = median(tw);
  o.both_s = median(tb);
  return o;
}

// --scaling: per size, the counts of one engine all-reduce (segments "engine <bytes>" of the PMPI
// counter's line) and the median times of the engine and MPI_Allreduce, interleaved call by call.
void run_scaling(const Options& opt, int rank, int size, bool raw_ok) {
  std::string rows;
  for (int64_t bytes : opt.scaling) {
    int64_t n = bytes / 4;
    Array x = Array::full(DType::float32, {n}, 1.0);
    std::vector<float> in(n, 1.0f), out(n);
    auto engine = [&] {
      distributed::detail::all_reduce(x, distributed::ReduceOp::sum, "bench").wait();
    };
    auto raw = [&] {
      MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    };
    MPI_Pcontrol(0);
    for (int w = 0; w < 2; ++w) {
      engine();
      if (raw_ok) raw();
    }
    call_primitive("barrier", std::vector<Value>{});
    MPI_Pcontrol(2);
    engine();
    std::string label = "engine " + std::to_string(bytes);
    MPI_Pcontrol(3, label.c_str());
    MPI_Pcontrol(0);
    int reps = opt.repeats ? opt.repeats : (bytes >= (int64_t{1} << 20) ? 5 : 15);
    std::vector<double> te, tm;
    for (int r = 0; r < reps; ++r) {
      double t0 = now_s();
      engine();
      te.push_back(now_s() - t0);
      if (raw_ok) {
        t0 = now_s();
        raw();
        tm.push_back(now_s() - t0);
      }
    }
    char row[256];
    std::snprintf(row, sizeof row,
                  "%s{\"bytes\": %lld, \"repeats\": %d, \"engine_s\": %.9g, \"mpi_s\": %.9g}",
                  rows.empty() ? "" : ", ", static_cast<long long>(bytes), reps, median(te),
                  median(tm));
    rows += row;
  }
  if (rank == 0) {
    std::printf("{\"machine\": %s, \"localities\": %d, \"threads\": %d, \"raw_mpi\": %s, "
                "\"allreduce\": [%s]}\n",
                json_string(bench::machine_line()).c_str(), size, num_threads(),
                raw_ok ? "true" : "false", rows.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rank = static_cast<int>(call_primitive("locality", std::vector<Value>{}).as_int());
  int size = static_cast<int>(call_primitive("num_localities", std::vector<Value>{}).as_int());
  Options opt;
  if (!parse(argc, argv, opt, rank == 0)) return 2;
  if (size < 2) {
    std::printf("run on at least 2 localities: mpirun -n 2 build/bench/bench_allreduce\n");
    return 0;
  }
  int level = 0;
  MPI_Query_thread(&level);
  // Raw MPI calls from this thread beside tessera's progress thread need
  // MPI_THREAD_MULTIPLE; without it the MPI column is left out (0).
  bool raw_ok = level == MPI_THREAD_MULTIPLE;
  if (rank == 0 && !opt.json && opt.scaling.empty()) {
    std::printf("%s\nlocalities: %d, threads per locality: %d; median of %s single calls\n\n",
                bench::machine_line().c_str(), size, num_threads(),
                opt.repeats ? std::to_string(opt.repeats).c_str() : "7 to 51");
    if (!opt.overlap_only) {
      std::printf("%10s %12s %12s %12s %8s %8s %12s %12s\n", "bytes", "engine us", "program us", "raw MPI us",
                  "eng/MPI", "prog/MPI", "engine GB/s", "MPI GB/s");
    }
  }
  if (!opt.scaling.empty()) {
    run_scaling(opt, rank, size, raw_ok);
    return 0;
  }
  if (opt.overlap_only) {
    Overlap o = measure_overlap(opt.repeats ? opt.repeats : 7);
    if (rank == 0 && opt.json) {
      std::printf("{\"machine\": %s, \"localities\": %d, \"threads\": %d, \"overlap\": %s}\n",
                  json_string(bench::machine_line()).c_str(), size, num_threads(), o.json().c_str());
    } else if (rank == 0) {
      o.print();
    }
    return 0;
  }
  std::string rows;
  Program p("define(f, x, all_reduce(x)) f", "bench.tsl");
  Program loop("define(f, x, n, block(define(i, 0), while(i < n, block(define(r, all_reduce(x)), "
               "store(i, i + 1))), i)) f", "loop.tsl");
  if (!opt.profile.empty()) {
    // One warm-up call, then the counted ones (the figure is the mean).
    Array four = Array::full(DType::float32, {1024}, 1.0);
    auto one = [&](int64_t calls) {
      if (opt.profile == "loop") {
        loop.run({Value(four), Value(calls)});
        return;
      }
      for (int64_t k = 0; k < calls; ++k) {
        if (opt.profile == "engine") distributed::detail::all_reduce(four, distributed::ReduceOp::sum, "bench").wait();
        else p.run({Value(four)});
      }
    };
    one(1);
    double t0 = now_s();
    one(opt.profile_calls);
    double t = (now_s() - t0) / static_cast<double>(opt.profile_calls);
    if (rank == 0) {
      std::printf("%lld 4 KB all-reduces (%s): %.2f us each\n", static_cast<long long>(opt.profile_calls),
                  opt.profile.c_str(), t * 1e6);
    }
    return 0;
  }
  for (int64_t bytes = 4; bytes <= opt.max_bytes; bytes *= 4) {
    int64_t n = std::max<int64_t>(1, bytes / 4);
    int reps = repeats_for(bytes, opt.repeats);
    Array x = Array::full(DType::float32, {n}, 1.0);
    // Both paths warmed up at this size first (the allocator adapts to a
    // new size over the first calls: timed first, the program paid for it).
    for (int w = 0; w < 3; ++w) {
      p.run({Value(x)});
      distributed::detail::all_reduce(x, distributed::ReduceOp::sum, "bench").wait();
    }
    double t = median_s(reps, [&] { p.run({Value(x)}); });
    double te = median_s(reps, [&] { distributed::detail::all_reduce(x, distributed::ReduceOp::sum, "bench").wait(); });
    double raw = 0;
    if (raw_ok) {
      std::vector<float> in(n, 1.0f), out(n);
      raw = median_s(reps, [&] {
        MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      });
    }
    if (rank != 0) continue;
    if (opt.json) {
      char row[256];
      std::snprintf(row, sizeof row,
                    "%s{\"bytes\": %lld, \"repeats\": %d, \"tessera_s\": %.9g, \"engine_s\": %.9g, \"mpi_s\": %.9g}",
                    rows.empty() ? "" : ", ", static_cast<long long>(bytes), reps, t, te, raw);
      rows += row;
    } else {
      std::printf("%10lld %12.1f %12.1f %12.1f %8.2f %8.2f %12.3f %12.3f\n", static_cast<long long>(bytes), te * 1e6,
                  t * 1e6, raw * 1e6, raw > 0 ? te / raw : 0.0, raw > 0 ? t / raw : 0.0, bytes / te / 1e9,
                  raw > 0 ? bytes / raw / 1e9 : 0.0);
    }
  }

  // 4 KB latency, interleaved: blocks of 100 raw MPI calls, 100 engine
  // calls, 100 one-line programs and a program looping over 100
  // all-reduces, in turn; the median over the blocks of each block's mean.
  Array four = Array::full(DType::float32, {1024}, 1.0);
  std::vector<double> lat_mpi, lat_engine, lat_program, lat_loop;
  {
    std::vector<float> in(1024, 1.0f), out(1024);
    auto block = [](std::vector<double>& into, auto&& f) {
      double t0 = now_s();
      for (int k = 0; k < 100; ++k) f();
      into.push_back((now_s() - t0) / 100);
    };
    int blocks = opt.repeats ? opt.repeats : 31;
    for (int b = 0; b < blocks; ++b) {
      if (raw_ok) {
        block(lat_mpi, [&] { MPI_Allreduce(in.data(), out.data(), 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); });
      }
      block(lat_engine, [&] { distributed::detail::all_reduce(four, distributed::ReduceOp::sum, "bench").wait(); });
      block(lat_program, [&] { p.run({Value(four)}); });
      double t0 = now_s();
      loop.run({Value(four), Value(int64_t{100})});
      lat_loop.push_back((now_s() - t0) / 100);
    }
  }
  double l_mpi = median(lat_mpi), l_engine = median(lat_engine), l_program = median(lat_program),
         l_loop = median(lat_loop);
  if (rank == 0 && !opt.json) {
    std::printf("\n4 KB all-reduce, interleaved blocks of 100: raw MPI %.2f us, engine %.2f us (%.2fx), "
                "program %.2f us (%.2fx), in a program's loop %.2f us per turn (%.2fx)\n",
                l_mpi * 1e6, l_engine * 1e6, l_mpi > 0 ? l_engine / l_mpi : 0.0, l_program * 1e6,
                l_mpi > 0 ? l_program / l_mpi : 0.0, l_loop * 1e6, l_mpi > 0 ? l_loop / l_mpi : 0.0);
  }

  // 256 all-reduces of 4 KB: separate (in flight together; with the
  // engine's coalescing of what is agreed in one round, and without it, as
  // TESSERA_COALESCE=0 runs them) or fused into one all-reduce of their
  // concatenation. Raw MPI gives the scale: 256 MPI_Allreduce calls of 4 KB
  // against one of 1 MB.
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
  int small_reps = opt.repeats ? opt.repeats : 15;
  double tco = median_s(small_reps, [&] { unfused.run({Value(small)}); });
  distributed::detail::set_coalescing(false);
  double tu = median_s(small_reps, [&] { unfused.run({Value(small)}); });
  distributed::detail::set_coalescing(true);
  double tf = median_s(small_reps, [&] { fused.run({Value(small)}); });
  double mu = 0, mf = 0;
  if (raw_ok) {
    std::vector<float> in(256 * 1024, 1.0f), out(256 * 1024);
    mu = median_s(small_reps, [&] {
      for (int i = 0; i < 256; ++i) {
        MPI_Allreduce(in.data() + i * 1024, out.data() + i * 1024, 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      }
    });
    mf = median_s(small_reps, [&] {
      MPI_Allreduce(in.data(), out.data(), 256 * 1024, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    });
  }
  if (rank == 0 && !opt.json) {
    std::printf("\n256 all-reduces of 4 KB: unfused %.2f ms (coalescing off), coalesced by the engine %.2f ms, "
                "fused %.2f ms: fused %.1fx faster than unfused (goal >= 5x); raw MPI: 256 calls %.2f ms, "
                "one of 1 MB %.2f ms (%.1fx)\n",
                tu * 1e3, tco * 1e3, tf * 1e3, tu / tf, mu * 1e3, mf * 1e3, mf > 0 ? mu / mf : 0.0);
  }

  // A loop of 4 KB all-reduces inside one program (a training loop written
  // in the language): the time per turn, against the single calls above.
  const int64_t turns = 2000;
  double tl = median_s(small_reps, [&] { loop.run({Value(small), Value(turns)}); }) / turns;
  if (rank == 0 && !opt.json) {
    std::printf("\na loop of %lld all-reduces of 4 KB in one program: %.1f us per turn\n",
                static_cast<long long>(turns), tl * 1e6);
  }

  Overlap ov = measure_overlap(opt.repeats ? opt.repeats : 7);
  if (rank == 0 && !opt.json) {
    std::printf("\n");
    ov.print();
  }
  if (rank == 0 && opt.json) {
    std::printf("{\"machine\": %s, \"localities\": %d, \"threads\": %d, \"raw_mpi\": %s, \"allreduce\": [%s], "
                "\"fused\": {\"count\": 256, \"bytes\": 4096, \"repeats\": %d, \"unfused_s\": %.9g, "
                "\"coalesced_s\": %.9g, \"fused_s\": %.9g, \"mpi_unfused_s\": %.9g, \"mpi_fused_s\": %.9g}, "
                "\"loop\": {\"bytes\": 4096, \"turns\": %lld, \"per_turn_s\": %.9g}, "
                "\"latency4k\": {\"mpi_s\": %.9g, \"engine_s\": %.9g, \"program_s\": %.9g, \"loop_s\": %.9g}, "
                "\"overlap\": %s}\n",
                json_string(bench::machine_line()).c_str(), size, num_threads(), raw_ok ? "true" : "false",
                rows.c_str(), small_reps, tu, tco, tf, mu, mf, static_cast<long long>(turns), tl, l_mpi, l_engine,
                l_program, l_loop, ov.json().c_str());
  }
  return 0;
}
