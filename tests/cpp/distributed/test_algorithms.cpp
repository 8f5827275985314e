// The engine's all-reduce algorithms (algorithms.hpp) run in one process: every
// rank's schedule is executed against simulated message queues, for N = 2..9
// ranks (powers of two and not), every dtype the all-reduce takes, every
// reduction, and element counts around the chunk boundaries (fewer elements
// than ranks included). Checked: the plain sum (or max, min) of the ranks'
// arrays, the same bits on every rank, the same bits whatever order the
// ranks progress in, the number of messages each rank sends, and the choice
// of algorithm by size and number of ranks. The same schedules run over MPI
// in tests/distributed/allreduce_algorithms.py.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <stdexcept>

#include "tessera/distributed/algorithms.hpp"
#include "test_util.hpp"

namespace tessera::test {
namespace {

using distributed::ReduceOp;
using namespace distributed::detail;

using Bytes = std::vector<char>;

size_t width(DType dt) { return dt == DType::float32 ? 4 : 8; }

// Rank r's input: values whose float sums depend on the order of addition.
Bytes input(DType dt, int rank, int64_t n, uint32_t seed) {
  std::mt19937 gen(seed * 1000 + static_cast<uint32_t>(rank));
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Bytes b(static_cast<size_t>(n) * width(dt));
  for (int64_t i = 0; i < n; ++i) {
    double v = u(gen) * std::pow(10.0, static_cast<int>(gen() % 7) - 3);
    char* at = b.data() + i * width(dt);
    if (dt == DType::float32) {
      float f = static_cast<float>(v);
      std::memcpy(at, &f, 4);
    } else if (dt == DType::float64) {
      std::memcpy(at, &v, 8);
    } else {
      int64_t k = static_cast<int64_t>(gen() % 2001) - 1000;
      std::memcpy(at, &k, 8);
    }
  }
  return b;
}

double value(DType dt, const Bytes& b, int64_t i) {
  const char* at = b.data() + i * width(dt);
  if (dt == DType::float32) {
    float f;
    std::memcpy(&f, at, 4);
    return f;
  }
  if (dt == DType::float64) {
    double d;
    std::memcpy(&d, at, 8);
    return d;
  }
  int64_t k;
  std::memcpy(&k, at, 8);
  return static_cast<double>(k);
}

struct Outcome {
  std::vector<Bytes> out;    // per rank
  std::vector<int> sends;    // messages each rank sent
};

// Runs every rank's schedule; `order` picks which rank moves next (a
// different seed: a different interleaving). A send is buffered when posted,
// as MPI reads the buffer the step posted; a step ends when its receive
// arrived.
Outcome simulate(Algorithm a, int size, int64_t n, DType dt, ReduceOp rop,
                 const std::vector<Bytes>& in, uint32_t order,
                 const std::vector<int>& host_of = {}) {
  const size_t w = width(dt);
  Outcome run;
  run.out.assign(size, Bytes(static_cast<size_t>(n) * w));
  run.sends.assign(size, 0);
  std::vector<std::vector<Step>> steps(size);
  for (int r = 0; r < size; ++r) steps[r] = schedule(a, r, size, n, host_of);
  std::vector<size_t> at(size, 0);
  std::vector<bool> sent(size, false);
  std::map<std::pair<int, int>, std::deque<Bytes>> queue;  // (from, to)
  std::mt19937 gen(order);
  for (int guard = 0;; ++guard) {
    bool all_done = true;
    for (int r = 0; r < size; ++r) all_done = all_done && at[r] == steps[r].size();
    if (all_done) break;
    if (guard > 100000) {
      ADD_FAILURE() << algorithm_name(a) << " N=" << size << " n=" << n << ": deadlock";
      return run;
    }
    int r = static_cast<int>(gen() % size);
    if (at[r] == steps[r].size()) continue;
    const Step& s = steps[r][at[r]];
    EXPECT_TRUE(s.send_to >= 0 || s.recv_from >= 0);
    if (!sent[r] && s.send_to >= 0) {
      const char* from = s.send_from_x ? in[r].data() : run.out[r].data();
      queue[{r, s.send_to}].emplace_back(from + s.send_lo * w, from + s.send_hi * w);
      ++run.sends[r];
    }
    sent[r] = true;
    if (s.recv_from >= 0) {
      auto& q = queue[{s.recv_from, r}];
      if (q.empty()) continue;
      Bytes came = std::move(q.front());
      q.pop_front();
      EXPECT_EQ(static_cast<int64_t>(came.size()),
                (s.recv_hi - s.recv_lo) * static_cast<int64_t>(w));
      char* acc = run.out[r].data() + s.recv_lo * w;
      if (s.reduce) {
        const char* mine = s.mine_from_x ? in[r].data() + s.recv_lo * w : acc;
        if (s.came_left) combine(acc, came.data(), mine, s.recv_hi - s.recv_lo, dt, rop);
        else combine(acc, mine, came.data(), s.recv_hi - s.recv_lo, dt, rop);
      } else if (!came.empty()) {
        std::memcpy(acc, came.data(), came.size());
      }
    }
    ++at[r];
    sent[r] = false;
  }
  for (auto& [k, q] : queue) EXPECT_TRUE(q.empty()) << "messages left unreceived";
  return run;
}

// The messages each rank sends: the ring 2 (N - 1); with p = 2^⌊log2 N⌋ and
// r = N - p, halving 2 log2 p (doubling log2 p), plus the fold: the first r
// even ranks send 1 message only, their odd partners one more.
int expected_sends(Algorithm a, int rank, int size) {
  if (a == Algorithm::ring) return 2 * (size - 1);
  int p = 1;
  while (p * 2 <= size) p *= 2;
  int r = size - p, l = ceil_log2(p);
  int core = a == Algorithm::halving ? 2 * l : l;
  if (rank < 2 * r) return rank % 2 == 0 ? 1 : core + 1;
  return core;
}

const Algorithm kAlgorithms[] = {Algorithm::ring, Algorithm::halving, Algorithm::doubling};

TEST(AllReduceAlgorithms, EachAgreesWithThePlainReduction) {
  for (Algorithm a : kAlgorithms) {
    for (int size = 2; size <= 9; ++size) {
      for (DType dt : {DType::float32, DType::float64, DType::int64}) {
        for (ReduceOp rop : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
          // Fewer elements than ranks, chunk boundaries, uneven chunks.
          for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{size - 1}, int64_t{size},
                            int64_t{size + 1}, int64_t{8 * size - 1}, int64_t{1000}}) {
            std::vector<Bytes> in;
            for (int r = 0; r < size; ++r)
              in.push_back(input(dt, r, n, static_cast<uint32_t>(n + size)));
            Outcome run = simulate(a, size, n, dt, rop, in, 1);
            std::string what = std::string(algorithm_name(a)) + " N=" + std::to_string(size) +
                               " n=" + std::to_string(n) + " " + std::string(dtype_name(dt)) +
                               " op=" + std::to_string(static_cast<int>(rop));
            for (int64_t i = 0; i < n; ++i) {
              double want = value(dt, in[0], i);
              for (int r = 1; r < size; ++r) {
                double v = value(dt, in[r], i);
                want = rop == ReduceOp::sum ? want + v : rop == ReduceOp::max ? std::max(want, v)
                                                                              : std::min(want, v);
              }
              double got = value(dt, run.out[0], i);
              double tol = rop != ReduceOp::sum || dt == DType::int64 ? 0.0
                           : dt == DType::float32                      ? 1e-4 * size
                                                                       : 1e-12 * size;
              ASSERT_NEAR(got, want, tol) << what << " element " << i;
            }
            for (int r = 1; r < size; ++r)
              ASSERT_EQ(run.out[r], run.out[0]) << what << ": rank " << r << " has other bits";
            for (int r = 0; r < size; ++r)
              EXPECT_EQ(run.sends[r], expected_sends(a, r, size)) << what << " rank " << r;
          }
        }
      }
    }
  }
}

// The one-process order of recursive doubling (reduce_doubling_order), which
// the agreement rounds use for inline float sums, gives bitwise what the
// doubling and halving schedules give over (simulated) messages, and for
// N = 3 the rank order (x0 + x1) + x2.
TEST(AllReduceAlgorithms, DoublingOrderInOneProcessMatchesTheSchedule) {
  for (int size = 1; size <= 17; ++size) {
    for (DType dt : {DType::float32, DType::float64, DType::int64}) {
      for (ReduceOp rop : {ReduceOp::sum, ReduceOp::max, ReduceOp::min}) {
        for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{37}}) {
          std::vector<Bytes> in;
          std::vector<const char*> data;
          for (int r = 0; r < size; ++r) in.push_back(input(dt, r, n, static_cast<uint32_t>(n + 3 * size)));
          for (const Bytes& b : in) data.push_back(b.data());
          Bytes got(static_cast<size_t>(n) * width(dt));
          reduce_doubling_order(got.data(), data.data(), size, n, dt, rop);
          std::string what = "N=" + std::to_string(size) + " n=" + std::to_string(n) + " " +
                             std::string(dtype_name(dt)) + " op=" + std::to_string(static_cast<int>(rop));
          if (size == 1) {
            ASSERT_EQ(got, in[0]) << what;
            continue;
          }
          Outcome run = simulate(Algorithm::doubling, size, n, dt, rop, in, 5);
          ASSERT_EQ(got, run.out[0]) << what;
          // Halving's reduce-scatter pairs ranks at distance 1, 2, 4 ... as
          // doubling does: every element in the same order, the same bits.
          Outcome halved = simulate(Algorithm::halving, size, n, dt, rop, in, 7);
          for (int r = 0; r < size; ++r) ASSERT_EQ(got, halved.out[r]) << what << " halving rank " << r;
          if (size == 3 && rop == ReduceOp::sum && dt != DType::int64) {
            for (int64_t i = 0; i < n; ++i) {
              if (dt == DType::float32) {
                float x[3];
                for (int r = 0; r < 3; ++r) std::memcpy(&x[r], in[r].data() + 4 * i, 4);
                float want = (x[0] + x[1]) + x[2], have;
                std::memcpy(&have, got.data() + 4 * i, 4);
                ASSERT_EQ(std::memcmp(&want, &have, 4), 0) << what << " element " << i;
              } else {
                double x[3];
                for (int r = 0; r < 3; ++r) std::memcpy(&x[r], in[r].data() + 8 * i, 8);
                double want = (x[0] + x[1]) + x[2], have;
                std::memcpy(&have, got.data() + 8 * i, 8);
                ASSERT_EQ(std::memcmp(&want, &have, 8), 0) << what << " element " << i;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_THROW(reduce_doubling_order(nullptr, nullptr, 0, 1, DType::float64, ReduceOp::sum),
               std::invalid_argument);
}

// Hosts: consecutive ranks, interleaved, uneven, one rank each, all on one.
std::vector<std::vector<int>> host_maps(int size) {
  std::vector<std::vector<int>> maps;
  std::vector<int> m(size);
  for (int k : {2, 3}) {
    for (int r = 0; r < size; ++r) m[r] = r / k;
    maps.push_back(m);
  }
  for (int r = 0; r < size; ++r) m[r] = r % 2;
  maps.push_back(m);
  for (int r = 0; r < size; ++r) m[r] = r == 0 ? 0 : 1 + (r - 1) / 4;
  maps.push_back(m);
  for (int r = 0; r < size; ++r) m[r] = r;
  maps.push_back(m);
  maps.push_back(std::vector<int>(size, 7));
  return maps;
}

TEST(AllReduceAlgorithms, HierarchicalAgreesWithThePlainReduction) {
  for (int size = 2; size <= 9; ++size) {
    for (const std::vector<int>& hosts : host_maps(size)) {
      for (DType dt : {DType::float32, DType::int64}) {
        for (ReduceOp rop : {ReduceOp::sum, ReduceOp::max}) {
          for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{size + 1}, int64_t{257}}) {
            std::vector<Bytes> in;
            for (int r = 0; r < size; ++r) in.push_back(input(dt, r, n, 11));
            Outcome run = simulate(Algorithm::hierarchical, size, n, dt, rop, in, 1, hosts);
            Outcome again = simulate(Algorithm::hierarchical, size, n, dt, rop, in, 9, hosts);
            std::string what = "N=" + std::to_string(size) + " n=" + std::to_string(n) +
                               " hosts " + std::to_string(hosts[size - 1] + 1);
            for (int64_t i = 0; i < n; ++i) {
              double want = value(dt, in[0], i);
              for (int r = 1; r < size; ++r) {
                double v = value(dt, in[r], i);
                want = rop == ReduceOp::sum ? want + v : std::max(want, v);
              }
              double tol = rop == ReduceOp::sum && dt == DType::float32 ? 1e-4 * size : 0.0;
              ASSERT_NEAR(value(dt, run.out[0], i), want, tol) << what << " element " << i;
            }
            for (int r = 0; r < size; ++r) {
              ASSERT_EQ(run.out[r], run.out[0]) << what << ": rank " << r << " has other bits";
              ASSERT_EQ(again.out[r], run.out[0]) << what << ": another order, other bits";
            }
          }
        }
      }
    }
  }
  // Two hosts of four: a first rank receives twice within its host, exchanges
  // twice with the other first rank (halving between 2) and sends twice within
  // (the broadcast); the last rank of a host sends up once and receives once.
  std::vector<int> two(8);
  for (int r = 0; r < 8; ++r) two[r] = r / 4;
  EXPECT_EQ(schedule(Algorithm::hierarchical, 0, 8, 100, two).size(), 2u + 2u + 2u);
  EXPECT_EQ(schedule(Algorithm::hierarchical, 3, 8, 100, two).size(), 2u);
  EXPECT_THROW(schedule(Algorithm::hierarchical, 0, 8, 100, {0, 1}), std::invalid_argument);
}

TEST(AllReduceAlgorithms, SameBitsWhateverTheOrderOfProgress) {
  for (Algorithm a : kAlgorithms) {
    for (int size : {3, 5, 6, 8}) {
      int64_t n = 4099;
      std::vector<Bytes> in;
      for (int r = 0; r < size; ++r) in.push_back(input(DType::float32, r, n, 7));
      Outcome first = simulate(a, size, n, DType::float32, ReduceOp::sum, in, 1);
      for (uint32_t order = 2; order < 6; ++order) {
        Outcome again = simulate(a, size, n, DType::float32, ReduceOp::sum, in, order);
        for (int r = 0; r < size; ++r)
          EXPECT_EQ(again.out[r], first.out[0])
              << algorithm_name(a) << " N=" << size << " order " << order;
      }
    }
  }
}

TEST(AllReduceAlgorithms, NanWinsInMaxAndMin) {
  for (Algorithm a : kAlgorithms) {
    int size = 5;
    int64_t n = 11;
    std::vector<Bytes> in;
    for (int r = 0; r < size; ++r) in.push_back(input(DType::float64, r, n, 3));
    double nan = std::nan("");
    std::memcpy(in[3].data() + 4 * 8, &nan, 8);
    for (ReduceOp rop : {ReduceOp::max, ReduceOp::min}) {
      Outcome run = simulate(a, size, n, DType::float64, rop, in, 1);
      for (int r = 0; r < size; ++r) {
        EXPECT_TRUE(std::isnan(value(DType::float64, run.out[r], 4))) << algorithm_name(a);
        EXPECT_FALSE(std::isnan(value(DType::float64, run.out[r], 5))) << algorithm_name(a);
      }
    }
  }
}

TEST(AllReduceAlgorithms, BoolIsRefused) {
  char a[2] = {1, 0}, b[2] = {1, 1}, out[2];
  EXPECT_THROW(combine(out, a, b, 2, DType::bool_, ReduceOp::sum), std::invalid_argument);
}

TEST(AllReduceAlgorithms, ChosenBySizeAndRanks) {
  AlgorithmSetting autom;
  const int64_t kib = 1024, mib = kib * kib;
  // Below kWideMinBytes (from the inline budget up): never MPI_Iallreduce,
  // the ring or the hierarchical one; up to kDoublingMaxBytes doubling
  // (log2 p messages in all, the cached round's included), above it halving
  // or doubling by the model.
  EXPECT_EQ(choose_algorithm(autom, 8, kWideMinBytes - 4, (kWideMinBytes - 4) / 4), Algorithm::halving);
  EXPECT_EQ(choose_algorithm(autom, 2, 96 * kib, 24 * kib), Algorithm::halving);
  for (int size : {2, 3, 4, 16, 1000})
    for (int64_t bytes : {int64_t{8}, 8 * kib, 32 * kib, kDoublingMaxBytes})
      EXPECT_EQ(choose_algorithm(autom, size, bytes, bytes / 4), Algorithm::doubling) << size << " " << bytes;
  EXPECT_EQ(choose_algorithm(autom, 16, kDoublingMaxBytes + 4, kDoublingMaxBytes / 4 + 1, 4), Algorithm::halving);
  for (int size : {3, 5, 8, 32, 1000, 10000}) {
    for (int64_t bytes : {kDoublingMaxBytes + 8, 96 * kib, kWideMinBytes - 8}) {
      Algorithm a = choose_algorithm(autom, size, bytes, bytes / 4);
      EXPECT_TRUE(a == Algorithm::halving || a == Algorithm::doubling) << size << " " << bytes;
      double b = static_cast<double>(bytes);
      int p = 1;
      while (p * 2 <= size) p *= 2;
      if (bytes / 4 < p) continue;  // too few elements to halve: doubling
      EXPECT_LE(model_seconds(a, size, b),
                std::min(model_seconds(Algorithm::halving, size, b), model_seconds(Algorithm::doubling, size, b)))
          << size << " " << bytes;
    }
  }
  // Two ranks: the ring (its two steps are halving's).
  EXPECT_EQ(choose_algorithm(autom, 2, kWideMinBytes, kWideMinBytes / 4), Algorithm::ring);
  EXPECT_EQ(choose_algorithm(autom, 2, 64 * mib, 16 * mib), Algorithm::ring);
  // 4 MiB: chunks under 1 MiB from 5 ranks on: halving; the ring at 4 and less.
  EXPECT_EQ(choose_algorithm(autom, 4, 4 * mib, mib), Algorithm::ring);
  for (int size : {5, 8, 32, 1000, 10000})
    EXPECT_EQ(choose_algorithm(autom, size, 4 * mib, mib), Algorithm::halving) << size;
  // The ring exactly where each chunk reaches kRingChunkMinBytes.
  EXPECT_EQ(choose_algorithm(autom, 8, 8 * kRingChunkMinBytes, 2 * kRingChunkMinBytes),
            Algorithm::ring);
  EXPECT_EQ(choose_algorithm(autom, 8, 8 * kRingChunkMinBytes - 8, 2 * kRingChunkMinBytes - 2),
            Algorithm::halving);
  // Fewer elements than the power-of-two core: doubling.
  EXPECT_EQ(choose_algorithm(autom, 64, kWideMinBytes * 2, 32), Algorithm::doubling);
  // Ranks sharing hosts, several hosts: hierarchical from the engine's range
  // on; one host, or one rank per host: as without hosts.
  EXPECT_EQ(choose_algorithm(autom, 8, 4 * mib, mib, 4), Algorithm::hierarchical);
  EXPECT_EQ(choose_algorithm(autom, 8, kWideMinBytes, kWideMinBytes / 4, 2), Algorithm::hierarchical);
  EXPECT_EQ(choose_algorithm(autom, 8, kWideMinBytes - 4, (kWideMinBytes - 4) / 4, 2), Algorithm::halving);
  EXPECT_EQ(choose_algorithm(autom, 8, 4 * mib, mib, 1), Algorithm::halving);
  EXPECT_EQ(choose_algorithm(autom, 8, 4 * mib, mib, 8), Algorithm::halving);
  EXPECT_EQ(choose_algorithm(algorithm_setting("ring"), 8, 4 * mib, mib, 4), Algorithm::ring);
  EXPECT_EQ(host_count({0, 0, 2, 2, 4}), 3);
  EXPECT_EQ(host_count({}), 0);
  // Forced.
  for (const char* name : {"ring", "halving", "doubling", "hierarchical", "mpi"}) {
    AlgorithmSetting s = algorithm_setting(name);
    EXPECT_FALSE(s.automatic);
    EXPECT_STREQ(algorithm_name(choose_algorithm(s, 8, 16, 2)), name);
  }
  EXPECT_TRUE(algorithm_setting(nullptr).automatic);
  EXPECT_TRUE(algorithm_setting("auto").automatic);
  try {
    algorithm_setting("tree");
    FAIL() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("[all_reduce] unknown all-reduce algorithm: 'tree'"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("TESSERA_ALLREDUCE"), std::string::npos) << e.what();
  }
}

TEST(AllReduceAlgorithms, FourMiBInAtMostTwoLogNMessages) {
  // The target for a 4 MiB all-reduce: 2⌈log2 N⌉ + 2 messages per
  // rank at most (the algorithm's part: the agreement round comes on top).
  AlgorithmSetting autom;
  const int64_t bytes = int64_t{4} << 20;
  for (int size = 3; size <= 64; ++size) {
    Algorithm a = choose_algorithm(autom, size, bytes, bytes / 4);
    if (a == Algorithm::ring) continue;  // N <= 4: 2 (N - 1) <= 6
    for (int r = 0; r < size; ++r)
      EXPECT_LE(static_cast<int>(schedule(a, r, size, bytes / 4).size()), 2 * ceil_log2(size) + 2)
          << size;
  }
}


// Hosts of k ranks, placed consecutively or round-robin: the hierarchical
// all-reduce sends across hosts only from each host's first rank, at most
// 2 ceil(log2 H) + 2 messages (halving among H hosts, the fold of a
// non-power of two); flat halving sends across hosts from every rank. Exact
// counts from the schedules (the same ones the engine runs).
TEST(AllReduceAlgorithms, HierarchicalCrossesHostsFromOneRankPerHost) {
  const int64_t n = 1 << 18;
  for (int hosts : {2, 3, 4, 8}) {
    for (int k : {2, 3, 4}) {
      for (bool round_robin : {false, true}) {
        int size = hosts * k;
        std::vector<int> host_of(size);
        for (int r = 0; r < size; ++r) host_of[r] = round_robin ? r % hosts : r / k;
        ASSERT_EQ(host_count(host_of), hosts);
        std::string what = "H=" + std::to_string(hosts) + " k=" + std::to_string(k) +
                           (round_robin ? " round-robin" : " consecutive");
        int64_t hier_across = 0, flat_across = 0;
        for (int r = 0; r < size; ++r) {
          int across = 0;
          for (const Step& s : schedule(Algorithm::hierarchical, r, size, n, host_of))
            across += s.send_to >= 0 && host_of[s.send_to] != host_of[r];
          bool first = std::find(host_of.begin(), host_of.end(), host_of[r]) - host_of.begin() == r;
          if (!first) {
            EXPECT_EQ(across, 0) << what << " rank " << r;
          }
          EXPECT_LE(across, 2 * ceil_log2(hosts) + 2) << what << " rank " << r;
          hier_across += across;
          for (const Step& s : schedule(Algorithm::halving, r, size, n))
            flat_across += s.send_to >= 0 && host_of[s.send_to] != host_of[r];
        }
        EXPECT_LT(hier_across, flat_across) << what;
        // And the same result as the plain reduction (int64: exact).
        std::vector<Bytes> in;
        for (int r = 0; r < size; ++r) in.push_back(input(DType::int64, r, 1000, 11));
        Outcome run = simulate(Algorithm::hierarchical, size, 1000, DType::int64, ReduceOp::sum, in,
                               3, host_of);
        for (int64_t i = 0; i < 1000; ++i) {
          int64_t want = 0, got;
          for (int r = 0; r < size; ++r) {
            int64_t v;
            std::memcpy(&v, in[r].data() + 8 * i, 8);
            want += v;
          }
          std::memcpy(&got, run.out[size - 1].data() + 8 * i, 8);
          ASSERT_EQ(got, want) << what << " element " << i;
        }
      }
    }
  }
}
}  // namespace
}  // namespace tessera::test
