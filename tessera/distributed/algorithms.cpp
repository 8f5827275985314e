// The engine's all-reduce algorithms: the choice and the schedules (see
// algorithms.hpp; ring.cpp runs them).
#include "tessera/distributed/algorithms.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "tessera/core/error.hpp"

namespace tessera::distributed::detail {

namespace {

int floor_pow2(int n) {
  int p = 1;
  while (p * 2 <= n) p *= 2;
  return p;
}

int log2_of(int p) {
  int l = 0;
  while ((1 << l) < p) ++l;
  return l;
}

// The first 2r ranks of a non-power-of-two size pair up (even, odd): the
// even one sends its array to the odd one, which stands in for both in the
// power-of-two core (its new rank: rank / 2; the others': rank - r) and
// returns the result at the end.
struct Fold {
  int p2, r, rank;
  bool folded_out() const { return rank < 2 * r && rank % 2 == 0; }
  bool stands_in() const { return rank < 2 * r && rank % 2 == 1; }
  int core_rank() const { return rank < 2 * r ? rank / 2 : rank - r; }
  int real_rank(int v) const { return v < r ? 2 * v + 1 : v + r; }
};

// The fold's first step; returns false if this rank then waits for the result only.
bool fold_in(const Fold& f, int64_t elements, bool in_out, std::vector<Step>& steps) {
  if (f.folded_out()) {
    Step send;
    send.send_to = f.rank + 1;
    send.send_hi = elements;
    send.send_from_x = !in_out;
    steps.push_back(send);
    Step back;
    back.recv_from = f.rank + 1;
    back.recv_hi = elements;
    steps.push_back(back);
    return false;
  }
  if (f.stands_in()) {
    Step in;
    in.recv_from = f.rank - 1;
    in.recv_hi = elements;
    in.reduce = true;
    in.came_left = true;  // the lower rank's array on the left
    in.mine_from_x = !in_out;
    steps.push_back(in);
  }
  return true;
}

void fold_out(const Fold& f, int64_t elements, std::vector<Step>& steps) {
  if (!f.stands_in()) return;
  Step back;
  back.send_to = f.rank - 1;
  back.send_hi = elements;
  steps.push_back(back);
}

std::vector<Step> ring_schedule(int rank, int size, int64_t elements, bool in_out) {
  std::vector<int64_t> at = part_offsets(elements, size);
  std::vector<Step> steps;
  int right = (rank + 1) % size, left = (rank - 1 + size) % size;
  for (int step = 0; step < 2 * (size - 1); ++step) {
    bool scatter = step < size - 1;
    int s = scatter ? step : step - (size - 1);
    int shift = scatter ? 0 : 1;  // the all-gather passes the chunk reduced last
    int send = ((rank - s + shift) % size + size) % size;
    int recv = ((rank - s - 1 + shift) % size + size) % size;
    Step st;
    st.send_to = right;
    st.send_lo = at[send];
    st.send_hi = at[send + 1];
    st.send_from_x = step == 0 && !in_out;
    st.recv_from = left;
    st.recv_lo = at[recv];
    st.recv_hi = at[recv + 1];
    // The reduce-scatter adds what came to this rank's own chunk (reduced
    // here for the first and only time); the all-gather copies.
    st.reduce = scatter;
    st.came_left = false;
    st.mine_from_x = !in_out;
    steps.push_back(st);
  }
  return steps;
}

std::vector<Step> halving_schedule(int rank, int size, int64_t elements, bool in_out) {
  Fold f{floor_pow2(size), size - floor_pow2(size), rank};
  std::vector<Step> steps;
  if (!fold_in(f, elements, in_out, steps)) return steps;
  bool reduced = in_out || f.stands_in();
  std::vector<int64_t> at = part_offsets(elements, f.p2);
  int v = f.core_rank();
  // The reduce-scatter halves this rank's range of chunks with the partner
  // at distance 1, 2, 4 ...: the partners and the order of recursive
  // doubling, so every element is reduced in doubling's order (adjacent
  // pairs level by level: the same bits as doubling and as
  // reduce_doubling_order), and a cached agreement round, whose steps these
  // are, can carry the first half of the data (Engine::start_cached). This
  // rank ends with chunk bitreverse(v); the all-gather undoes the halvings,
  // the last first.
  int lo = 0, hi = f.p2;
  for (int m = 1; m < f.p2; m *= 2) {
    int mid = lo + (hi - lo) / 2;
    bool lower = (v & m) == 0;
    int keep_lo = lower ? lo : mid, keep_hi = lower ? mid : hi;
    int give_lo = lower ? mid : lo, give_hi = lower ? hi : mid;
    Step st;
    st.send_to = st.recv_from = f.real_rank(v ^ m);
    st.send_lo = at[give_lo];
    st.send_hi = at[give_hi];
    st.send_from_x = !reduced;
    st.recv_lo = at[keep_lo];
    st.recv_hi = at[keep_hi];
    st.reduce = true;
    st.came_left = !lower;  // the partner holds the lower ranks' sum when this rank's bit is set
    st.mine_from_x = !reduced;
    steps.push_back(st);
    reduced = true;
    lo = keep_lo;
    hi = keep_hi;
  }
  for (int m = f.p2 / 2; m >= 1; m /= 2) {
    bool lower = (v & m) == 0;
    int width = hi - lo;
    Step st;
    st.send_to = st.recv_from = f.real_rank(v ^ m);
    st.send_lo = at[lo];
    st.send_hi = at[hi];
    int other_lo = lower ? hi : lo - width, other_hi = lower ? hi + width : lo;
    st.recv_lo = at[other_lo];
    st.recv_hi = at[other_hi];
    steps.push_back(st);
    lo = std::min(lo, other_lo);
    hi = std::max(hi, other_hi);
  }
  fold_out(f, elements, steps);
  return steps;
}

std::vector<Step> doubling_schedule(int rank, int size, int64_t elements, bool in_out) {
  Fold f{floor_pow2(size), size - floor_pow2(size), rank};
  std::vector<Step> steps;
  if (!fold_in(f, elements, in_out, steps)) return steps;
  bool reduced = in_out || f.stands_in();
  int v = f.core_rank();
  for (int m = 1; m < f.p2; m *= 2) {
    Step st;
    st.send_to = st.recv_from = f.real_rank(v ^ m);
    st.send_hi = st.recv_hi = elements;
    st.send_from_x = !reduced;
    st.reduce = true;
    st.came_left = (v & m) != 0;  // the partner holds the lower ranks' sum
    st.mine_from_x = !reduced;
    steps.push_back(st);
    reduced = true;
  }
  fold_out(f, elements, steps);
  return steps;
}

// Peers numbered within `members` made world (channel) ranks.
void remap(std::vector<Step>& steps, size_t from, const std::vector<int>& members) {
  for (size_t i = from; i < steps.size(); ++i) {
    if (steps[i].send_to >= 0) steps[i].send_to = members[steps[i].send_to];
    if (steps[i].recv_from >= 0) steps[i].recv_from = members[steps[i].recv_from];
  }
}

// Reduce within the host to its first rank (a binomial tree: the partial of
// the higher local ranks on the right), the hosts' first ranks all-reduce
// among themselves by recursive halving, then a binomial broadcast within the
// host.
std::vector<Step> hierarchical_schedule(int rank, int size, int64_t elements,
                                        const std::vector<int>& host_of) {
  if (static_cast<int>(host_of.size()) != size)
    throw std::invalid_argument(error_message("[all_reduce] the hierarchical all-reduce needs the "
                                              "host of each of the ", size, " ranks, got ",
                                              host_of.size()));
  std::vector<int> local, leaders;
  for (int r = 0; r < size; ++r) {
    if (host_of[r] == host_of[rank]) local.push_back(r);
    bool first = true;
    for (int q = 0; q < r && first; ++q) first = host_of[q] != host_of[r];
    if (first) leaders.push_back(r);
  }
  const int k = static_cast<int>(local.size());
  const int i = static_cast<int>(std::find(local.begin(), local.end(), rank) - local.begin());
  std::vector<Step> steps;
  bool reduced = false;
  for (int m = 1; m < k; m *= 2) {
    Step st;
    if (i & m) {
      st.send_to = local[i - m];
      st.send_hi = elements;
      st.send_from_x = !reduced;
      steps.push_back(st);
      break;
    }
    if (i + m < k) {
      st.recv_from = local[i + m];
      st.recv_hi = elements;
      st.reduce = true;
      st.came_left = false;
      st.mine_from_x = !reduced;
      steps.push_back(st);
      reduced = true;
    }
  }
  const int hosts = static_cast<int>(leaders.size());
  if (i == 0 && hosts > 1) {
    const int me =
        static_cast<int>(std::find(leaders.begin(), leaders.end(), rank) - leaders.begin());
    size_t at = steps.size();
    std::vector<Step> more = elements < floor_pow2(hosts)
                                 ? doubling_schedule(me, hosts, elements, reduced)
                                 : halving_schedule(me, hosts, elements, reduced);
    steps.insert(steps.end(), more.begin(), more.end());
    remap(steps, at, leaders);
    reduced = true;
  }
  // The broadcast: receive from the parent (at the lowest set bit of i), then
  // send to the children, farthest first.
  int top = 1;
  while (top < k) top *= 2;
  for (int m = top / 2; m >= 1; m /= 2) {
    Step st;
    if (i % (2 * m) == m) {
      st.recv_from = local[i - m];
      st.recv_hi = elements;
      steps.push_back(st);
    } else if (i % (2 * m) == 0 && i + m < k) {
      st.send_to = local[i + m];
      st.send_hi = elements;
      st.send_from_x = false;  // the result: a rank with children reduced (or received) it
      steps.push_back(st);
    }
  }
  return steps;
}

}  // namespace

const char* algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::mpi: return "mpi";
    case Algorithm::ring: return "ring";
    case Algorithm::halving: return "halving";
    case Algorithm::doubling: return "doubling";
    case Algorithm::hierarchical: return "hierarchical";
  }
  return "?";
}

AlgorithmSetting algorithm_setting(const char* env) {
  AlgorithmSetting s;
  if (!env || !*env || std::strcmp(env, "auto") == 0) return s;
  s.automatic = false;
  for (Algorithm a : {Algorithm::mpi, Algorithm::ring, Algorithm::halving, Algorithm::doubling,
                      Algorithm::hierarchical}) {
    if (std::strcmp(env, algorithm_name(a)) == 0) {
      s.forced = a;
      return s;
    }
  }
  throw std::invalid_argument(error_message(
      "[all_reduce] unknown all-reduce algorithm: '", env,
      "' (TESSERA_ALLREDUCE: auto, ring, halving, doubling, hierarchical or mpi)"));
}

double model_seconds(Algorithm a, int size, double bytes) {
  if (size <= 1) return 0.0;
  const int p2 = floor_pow2(size);
  const double l = log2_of(p2), n = size;
  // Per message α, per byte sent β⁻¹, per byte reduced γ; the fold sends the
  // array in and the result out and reduces the array once.
  const double fold =
      size > p2 ? 2 * (kModelAlpha + bytes / kModelBeta) + bytes * kModelGamma : 0.0;
  switch (a) {
    case Algorithm::ring:
      return 2 * (n - 1) * (kModelAlpha + bytes / n / kModelBeta) +
             (n - 1) / n * bytes * kModelGamma;
    case Algorithm::halving:
      return 2 * l * kModelAlpha + 2.0 * (p2 - 1) / p2 * bytes / kModelBeta +
             (p2 - 1.0) / p2 * bytes * kModelGamma + fold;
    case Algorithm::doubling:
      return l * (kModelAlpha + bytes / kModelBeta + bytes * kModelGamma) + fold;
    case Algorithm::hierarchical:  // depends on the hosts: not modelled
    case Algorithm::mpi:
      return std::min(model_seconds(Algorithm::halving, size, bytes),
                      model_seconds(Algorithm::doubling, size, bytes));
  }
  return 0.0;
}

int host_count(const std::vector<int>& host_of) {
  std::vector<int> hosts(host_of);
  std::sort(hosts.begin(), hosts.end());
  return static_cast<int>(std::unique(hosts.begin(), hosts.end()) - hosts.begin());
}

Algorithm choose_algorithm(const AlgorithmSetting& s, int size, int64_t bytes, int64_t elements,
                           int hosts) {
  if (!s.automatic) return s.forced;
  if (bytes >= kWideMinBytes) {
    if (hosts > 1 && hosts < size) return Algorithm::hierarchical;
    if (size == 2 || bytes / size >= kRingChunkMinBytes) return Algorithm::ring;
  }
  if (elements < floor_pow2(size) || bytes <= kDoublingMaxBytes) return Algorithm::doubling;
  double b = static_cast<double>(bytes);
  return model_seconds(Algorithm::doubling, size, b) < model_seconds(Algorithm::halving, size, b)
             ? Algorithm::doubling
             : Algorithm::halving;
}

std::vector<Step> schedule(Algorithm a, int rank, int size, int64_t elements,
                           const std::vector<int>& host_of) {
  if (size <= 1) return {};
  switch (a) {
    case Algorithm::ring: return ring_schedule(rank, size, elements, false);
    case Algorithm::halving: return halving_schedule(rank, size, elements, false);
    case Algorithm::doubling: return doubling_schedule(rank, size, elements, false);
    case Algorithm::hierarchical: return hierarchical_schedule(rank, size, elements, host_of);
    case Algorithm::mpi: break;
  }
  return {};
}

std::vector<int64_t> part_offsets(int64_t elements, int parts) {
  std::vector<int64_t> at(1, 0);
  int64_t base = elements / parts, extra = elements % parts;
  for (int i = 0; i < parts; ++i) at.push_back(at.back() + base + (i < extra ? 1 : 0));
  return at;
}

}  // namespace tessera::distributed::detail
