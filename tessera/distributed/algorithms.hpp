// The engine's own all-reduce algorithms (docs/scaling.md): which one runs
// for a number of ranks and a size, and each one's schedule of
// point-to-point steps for one rank. Pure (no MPI): ring.cpp runs the
// schedules over MPI, the tests run them in one process. Internal to
// tessera/distributed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/distributed/comm.hpp"

namespace tessera::distributed::detail {

enum class Algorithm {
  mpi,       // MPI_Iallreduce (MPI's own choice)
  ring,      // 2 (N - 1) steps, each sending 1/N of the data to the right
  halving,   // Rabenseifner: recursive-halving reduce-scatter, recursive-doubling all-gather
  doubling,  // recursive doubling: log2 N exchanges of the whole array
  // Reduce within each host, all-reduce across hosts, broadcast within
  // (auto: when ranks share hosts and there are several hosts).
  hierarchical,
};

const char* algorithm_name(Algorithm a);

// TESSERA_ALLREDUCE (the same on every rank): "auto" (or unset), "ring",
// "halving", "doubling", "hierarchical" or "mpi". auto chooses by choose_algorithm; any
// other value runs every all-reduce that does not travel inline in the
// agreement round with that algorithm. Throws invalid_argument naming the
// variable and the value for anything else.
struct AlgorithmSetting {
  bool automatic = true;
  Algorithm forced = Algorithm::ring;
};
AlgorithmSetting algorithm_setting(const char* env);

// Every all-reduce (and coalesced group) that does not travel inline runs as
// one of the engine's algorithms when the setting is auto (MPI_Iallreduce's
// schedule took 1.3-2.4x a blocking MPI_Allreduce from 256 KiB to 16 MiB on
// the development machine, where the engine's ring took 0.9-1.2x; below
// 128 KiB see docs/scaling.md). The ring and the hierarchical algorithm only
// from this many bytes: below, halving or doubling, whose first steps ride
// in a cached agreement round.
constexpr int64_t kWideMinBytes = int64_t{128} << 10;
// Up to this many bytes, recursive doubling whatever the model says: its
// log2 p steps all ride in a cached agreement round (no message of its own),
// where halving adds log2 p of all-gather, and each step waits for the
// engine's next pass. Measured on the development machine at 4 to 16 ranks
// (docs/scaling.md): doubling 0.8-1.8x MPI_Allreduce at 40 KiB where halving
// took 2.2-2.4x; from 96 KiB halving was faster at 4 and 8 ranks.
constexpr int64_t kDoublingMaxBytes = int64_t{64} << 10;
// The ring only where each of its N chunks is at least this large: a step
// then costs ~84 us of bandwidth at 12.5 GB/s against ~3 us of latency, so
// its 2 (N - 1) steps are bandwidth-bound.
constexpr int64_t kRingChunkMinBytes = int64_t{1} << 20;

// The α-β-γ model (docs/scaling.md): α seconds per message, β bytes per
// second on the wire, γ seconds per byte reduced (~5 GB/s: a sum of two
// arrays on one core).
constexpr double kModelAlpha = 3e-6, kModelBeta = 12.5e9, kModelGamma = 1.0 / 5e9;

// The model's time of an all-reduce of `bytes` among `size` ranks by `a`
// (the longest path: ranks folded in by a non-power-of-two size included).
double model_seconds(Algorithm a, int size, double bytes);

// The algorithm of an all-reduce of `bytes` (`elements` elements) among
// `size` ranks on `hosts` hosts that does not travel inline: a function of
// these alone, so the same on every rank. auto, from kWideMinBytes: the
// hierarchical one when ranks share hosts and there are several (1 < hosts
// < size: only one rank per host crosses the network); between 2 ranks the
// ring (its 2 steps are those of halving); the ring where each chunk holds
// kRingChunkMinBytes; otherwise (and always below kWideMinBytes) doubling up
// to kDoublingMaxBytes, above it halving or doubling,
// whichever the α-β-γ model finds faster (doubling when there are fewer
// elements than the largest power of two <= size).
Algorithm choose_algorithm(const AlgorithmSetting& s, int size, int64_t bytes, int64_t elements,
                           int hosts = 1);

// The number of distinct hosts in host_of (a host number per rank).
int host_count(const std::vector<int>& host_of);

// One step of a rank's schedule: send elements [send_lo, send_hi) to rank
// send_to (-1: none) and receive [recv_lo, recv_hi) from recv_from (-1:
// none); the next step starts when both are done. Sent data comes from the
// input (send_from_x) or the result. A received range is either reduced
// (reduce: result[range] = came OP mine, or mine OP came when !came_left,
// where mine is the input's range (mine_from_x) or the result's) or copied
// into the result (!reduce). Every step has a send or a receive.
struct Step {
  int send_to = -1;
  int64_t send_lo = 0, send_hi = 0;
  bool send_from_x = false;
  int recv_from = -1;
  int64_t recv_lo = 0, recv_hi = 0;
  bool reduce = false, came_left = false, mine_from_x = false;
};

// The steps rank `rank` of `size` takes for an all-reduce of `elements`
// elements by `a` (not mpi). Every element of the result is reduced on
// exactly one rank, in an order fixed by size and the algorithm (the
// operand of the lower ranks on the left, except the ring's, which adds
// what came to its own), and copied to the others: the same bits on every
// rank, whatever the timing. Non-powers of two: the first 2r ranks (r =
// size - 2^⌊log2 size⌋) pair up, the even one sends its array to the odd one
// and gets the result back at the end.
// hierarchical: the first rank of each host (host_of: a host number per
// rank, as many as size) reduces its host's arrays by a binomial tree (the
// higher local ranks' partial on the right), the first ranks all-reduce by
// recursive halving (doubling when there are fewer elements than hosts), and
// a binomial tree broadcasts within each host. Throws invalid_argument if
// host_of does not have size entries.
std::vector<Step> schedule(Algorithm a, int rank, int size, int64_t elements,
                           const std::vector<int>& host_of = {});

// The element offsets of `parts` nearly equal parts of `elements` (parts +
// 1 values, the first parts the largest).
std::vector<int64_t> part_offsets(int64_t elements, int parts);

// out = left OP right elementwise for n elements of dt (mean: the sum); out
// may be left or right itself, left and right may be unaligned. max and min
// propagate NaN. Throws invalid_argument for bool. (ring.cpp)
void combine(void* out, const void* left, const void* right, int64_t n, DType dt, ReduceOp rop);

// out = what an all-reduce by Algorithm::doubling (schedule) of data[0],
// ..., data[size - 1] (n elements of dt each) gives, computed in one
// process: with p = 2^⌊log2 size⌋ and r = size - p, the values
// v_i = data[2i] OP data[2i + 1] for i < r and v_i = data[i + r] otherwise,
// then adjacent pairs of v, level by level, the lower operand on the left:
// ((v0 OP v1) OP (v2 OP v3)) ... The engine's order for the sums of floats
// carried in an agreement round (full or cached): fixed by size, whatever
// the timing. Throws invalid_argument for bool or size < 1. (ring.cpp)
void reduce_doubling_order(void* out, const char* const* data, int size, int64_t n, DType dt,
                           ReduceOp rop);

}  // namespace tessera::distributed::detail
