// Cost of the tiled-array metadata checks as the number of localities N
// grows (issue 29 item 4): is_partition (find_overlap), the cover check of a
// tiling and copying a tiled array's spans, for row tilings and square grids
// of N spans. Machine-independent shape: the time per call should grow about
// as N log N (rows, grids); printed with the machine.
//
//   build/bench/bench_tiled_meta [max_n]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "bench/machine.hpp"
#include "tessera/core/tiled.hpp"

using namespace tessera;

namespace {

double median_ms(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double time_ms(F&& f, int runs = 5) {
  std::vector<double> t;
  for (int i = 0; i < runs; ++i) {
    auto a = std::chrono::steady_clock::now();
    f();
    t.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count());
  }
  return median_ms(t);
}

std::vector<Span> grid(int64_t side, int64_t cell) {
  std::vector<Span> spans;
  for (int64_t i = 0; i < side; ++i) {
    for (int64_t j = 0; j < side; ++j) spans.push_back(Span{{i * cell, j * cell}, {(i + 1) * cell, (j + 1) * cell}});
  }
  return spans;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t max_n = argc > 1 ? std::atoll(argv[1]) : 10000;
  std::printf("%s\n", tessera::bench::machine_line().c_str());
  std::printf("median of 5 calls, 1 thread; rows: N row spans of a (4N, 64) array; grid: sqrt(N) x sqrt(N) "
              "blocks\n");
  std::printf("%8s %16s %16s %16s %16s %14s\n", "N", "rows overlap ms", "rows cover ms", "grid overlap ms",
              "grid cover ms", "copy spans us");
  for (int64_t n = 16; n <= max_n; n = n < max_n && n * 4 > max_n ? max_n : n * 4) {
    Shape rows_shape{4 * n, 64};
    std::vector<Span> rows = split_spans(rows_shape, 0, static_cast<int>(n));
    const int64_t side = static_cast<int64_t>(std::sqrt(static_cast<double>(n)));
    Shape grid_shape{side * 4, side * 4};
    std::vector<Span> blocks = grid(side, 4);
    bool ok = true;
    double ro = time_ms([&] { ok = ok && !find_overlap(rows); });
    double rc = time_ms([&] { check_spans(rows_shape, rows, true, "bench"); });
    double go = time_ms([&] { ok = ok && !find_overlap(blocks); });
    double gc = time_ms([&] { check_spans(grid_shape, blocks, true, "bench"); });
    TiledArray t;
    t.shape = rows_shape;
    t.spans = rows;
    double copy_us = 1000.0 * time_ms([&] {
      for (int i = 0; i < 1000; ++i) {
        TiledArray u = t;
        if (u.spans.size() != static_cast<size_t>(n)) std::abort();
      }
    }) / 1000.0;
    if (!ok) {
      std::fprintf(stderr, "bench_tiled_meta: a partition was reported overlapping\n");
      return 1;
    }
    std::printf("%8lld %16.3f %16.3f %16.3f %16.3f %14.3f\n", static_cast<long long>(n), ro, rc, go, gc, copy_us);
    if (n == max_n) break;
  }
  return 0;
}
