#include "tessera/runtime/parallel.hpp"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>

#include "tessera/runtime/interrupt.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera {

namespace {

std::atomic<bool>& deterministic_flag() {
  static std::atomic<bool> on = [] {
    const char* s = std::getenv("TESSERA_DETERMINISTIC");
    return s != nullptr && std::strcmp(s, "1") == 0;
  }();
  return on;
}

thread_local bool tl_tiled = false;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// ---- Lingering helpers (HelperOffer).
//
// An offer lives in one of a few static slots, never freed, so a lingering
// helper may look at a slot whose offer has just closed: it registers as a
// holder first, then checks that the slot still holds the offer it saw
// (the caller closes first, then waits for holders: seq_cst on both sides).
struct OfferSlot {
  std::atomic<bool> busy{false};   // owned by a caller
  std::atomic<uint64_t> gen{0};    // the open offer's number, 0 when closed
  std::atomic<int64_t> wanted{0};  // helpers the offer still takes
  std::atomic<int> holders{0};     // lingering helpers looking at or inside it
  std::function<void()> work;      // written only while no offer is open
};
constexpr int kOfferSlots = 8;  // a power of two (the posted word's low bits)
// Never destroyed: a worker may still be lingering while the process exits.
OfferSlot* const g_offer_slots = new OfferSlot[kOfferSlots];
std::atomic<uint64_t> g_offer_posted{0};  // gen * kOfferSlots + slot; 0: none
std::atomic<uint64_t> g_offer_next_gen{1};
std::atomic<int64_t> g_lingering{0};
// Until when (steady_clock ns) helpers do not linger: set when a lingering
// helper finds it was descheduled, i.e. other processes want these cores.
// A spinning helper then holds a core the program's own thread could have
// moved to (the 1,000 x 1,000 products of a loop ran 2x slower than on one
// thread beside a compile), so lingering stops for a while.
std::atomic<int64_t> g_linger_paused_until{0};
constexpr int64_t kLingerPauseNs = 200'000'000;
constexpr int64_t kDescheduledNs = 50'000;  // a gap between two looks at the clock

// The CPU of the last thread that made an offer: a helper lingering on that
// CPU would take turns with the thread it is to help (the kernel woke the
// worker beside its waker and moves one of them only at a later balancing),
// so it moves itself off that CPU (move_off_cpu), or leaves.
std::atomic<int> g_offer_cpu{-1};

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Several ranks of one job on a host share its cores: a helper spinning
// there takes a core another rank's thread needs, so helpers linger only when
// asked to (TESSERA_LINGER_US) under a launcher that put ranks side by side.
int64_t initial_linger_ns() {
  if (const char* e = std::getenv("TESSERA_LINGER_US"); e != nullptr && *e != '\0') {
    char* end = nullptr;
    const long long us = std::strtoll(e, &end, 10);
    if (end != e && *end == '\0' && us >= 0 && us <= 1000000) return us * 1000;
    std::fprintf(stderr,
                 "tessera: TESSERA_LINGER_US=%s is not a whole number of microseconds in "
                 "[0, 1000000]; using the default (200)\n",
                 e);
  }
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMI_LOCAL_SIZE",
                          "SLURM_NTASKS_PER_NODE"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && std::atoi(v) > 1) return 0;
  }
  return 200000;
}

std::atomic<int64_t>& linger_ns_flag() {
  static std::atomic<int64_t> ns{initial_linger_ns()};
  return ns;
}

// Moves this thread off `cpu` (onto another CPU it may run on) and gives it
// its CPUs back: the kernel woke the worker beside the thread it helps, and
// its balancing would move one of them only later. False when it cannot.
bool move_off_cpu(int cpu) {
  cpu_set_t allowed;
  if (cpu < 0 || cpu >= CPU_SETSIZE || sched_getaffinity(0, sizeof allowed, &allowed) != 0) {
    return false;
  }
  if (CPU_COUNT(&allowed) < 2 || !CPU_ISSET(cpu, &allowed)) return false;
  cpu_set_t others = allowed;
  CPU_CLR(cpu, &others);
  const bool moved = sched_setaffinity(0, sizeof others, &others) == 0;
  sched_setaffinity(0, sizeof allowed, &allowed);
  return moved && sched_getcpu() != cpu;
}

// A helper that finished its share of an offer: watch for the next offer
// for the lingering time (renewed by each offer taken), and leave at once
// when a task is spawned (it may be waiting for this worker).
void linger_for_offers() {
  const int64_t ns = linger_ns_flag().load(std::memory_order_relaxed);
  if (ns <= 0 || !in_worker() || trace::on()) return;
  int64_t now = steady_ns();
  if (now < g_linger_paused_until.load(std::memory_order_relaxed)) return;
  g_lingering.fetch_add(1);
  const uint64_t spawned = tasks_spawned();
  uint64_t seen = 0;
  int64_t deadline = now + ns;
  for (uint32_t i = 1;; ++i) {
    const uint64_t posted = g_offer_posted.load(std::memory_order_acquire);
    if (posted != 0 && posted != seen) {
      seen = posted;
      OfferSlot& slot = g_offer_slots[posted % kOfferSlots];
      slot.holders.fetch_add(1);
      if (slot.gen.load() == posted / kOfferSlots && slot.wanted.fetch_sub(1) > 0) {
        slot.work();
        now = steady_ns();
        deadline = now + ns;
      }
      slot.holders.fetch_sub(1, std::memory_order_release);
      continue;
    }
    if (i % 64 == 0) {
      if (tasks_spawned() != spawned) break;
      const int cpu = sched_getcpu();
      if (cpu == g_offer_cpu.load(std::memory_order_relaxed)) {
        if (!move_off_cpu(cpu)) break;
        now = steady_ns();  // the move's own wait is not a sign of other processes
        continue;
      }
      const int64_t t = steady_ns();
      if (t - now > kDescheduledNs) {
        g_linger_paused_until.store(t + kLingerPauseNs, std::memory_order_relaxed);
        break;
      }
      now = t;
      if (now > deadline) break;
    }
    cpu_relax();
  }
  g_lingering.fetch_sub(1);
}

}  // namespace

void linger_after_task() {
  if (linger_ns_flag().load(std::memory_order_relaxed) > 0 && tasks_outstanding() == 0) {
    linger_for_offers();
  }
}

int64_t helper_linger_ns() { return linger_ns_flag().load(std::memory_order_relaxed); }
void set_helper_linger_ns(int64_t ns) {
  linger_ns_flag().store(std::max<int64_t>(ns, 0), std::memory_order_relaxed);
}

HelperOffer::HelperOffer(int64_t helpers, std::function<void()> work) {
  if (helpers <= 0) return;
  g_offer_cpu.store(sched_getcpu(), std::memory_order_relaxed);
  const int64_t lingering =
      helper_linger_ns() > 0 ? g_lingering.load(std::memory_order_acquire) : 0;
  if (lingering > 0) {
    for (int i = 0; i < kOfferSlots && slot_ < 0; ++i) {
      bool free = false;
      if (g_offer_slots[i].busy.compare_exchange_strong(free, true)) slot_ = i;
    }
    if (slot_ >= 0) {
      OfferSlot& slot = g_offer_slots[slot_];
      try {
        slot.work = work;
      } catch (...) {
        slot.busy.store(false, std::memory_order_release);
        throw;
      }
      slot.wanted.store(helpers);
      const uint64_t gen = g_offer_next_gen.fetch_add(1);
      slot.gen.store(gen);
      g_offer_posted.store(gen * kOfferSlots + static_cast<uint64_t>(slot_));
      helpers -= std::min(helpers, lingering);
    }
  }
  if (helpers <= 0) return;
  // Spawned helpers check in the same way, so that after the destructor no
  // thread runs `work`, however late its task started.
  try {
    ticket_ = std::make_shared<HelperTicket>();
    for (int64_t h = 0; h < helpers; ++h) {
      spawn([work, ticket = ticket_] {  // lingers afterwards (linger_after_task)
        ticket->holders.fetch_add(1);
        if (!ticket->closed.load()) work();
        ticket->holders.fetch_sub(1, std::memory_order_release);
      });
    }
  } catch (...) {
    withdraw();  // no destructor runs for a constructor that throws
    throw;
  }
}

HelperOffer::~HelperOffer() { withdraw(); }

void HelperOffer::withdraw() {
  if (ticket_) {
    ticket_->closed.store(true);
    while (ticket_->holders.load() > 0) cpu_relax();
    ticket_.reset();
  }
  if (slot_ < 0) return;
  OfferSlot& slot = g_offer_slots[slot_];
  const uint64_t posted = slot.gen.load() * kOfferSlots + static_cast<uint64_t>(slot_);
  slot.gen.store(0);
  uint64_t expected = posted;
  g_offer_posted.compare_exchange_strong(expected, 0);
  while (slot.holders.load() > 0) cpu_relax();
  slot.work = nullptr;
  slot.busy.store(false, std::memory_order_release);
  slot_ = -1;
}

bool take_tiled_flag() {
  const bool was = tl_tiled;
  tl_tiled = false;
  return was;
}

void set_deterministic_tiling(bool on) { deterministic_flag() = on; }
bool deterministic_tiling() { return deterministic_flag(); }

int64_t tile_count(int64_t n, double ns_per_item) {
  if (n <= 0) return 0;
  double work = static_cast<double>(n) * std::max(ns_per_item, 0.0);
  if (work < 2 * kMinTaskNs) return 1;
  int64_t by_work = static_cast<int64_t>(work / kMinTaskNs);
  int threads = deterministic_tiling() ? kDeterministicThreads : num_threads();
  int64_t cap = 4 * static_cast<int64_t>(threads);
  return std::clamp<int64_t>(std::min(by_work, cap), 1, n);
}

void parallel_for(int64_t n, double ns_per_item,
                  const std::function<void(int64_t, int64_t)>& body) {
  check_interrupt();  // a long run of kernels stops at the next one
  int64_t tiles = tile_count(n, ns_per_item);
  if (tiles <= 1 || num_threads() == 1) {
    if (tiles > 1 && deterministic_tiling()) {
      for (int64_t t = 0; t < tiles; ++t) body(n * t / tiles, n * (t + 1) / tiles);
    } else if (n > 0) {
      body(0, n);
    }
    return;
  }
  tl_tiled = true;
  const void* node = trace::current_node();
  auto run = [&] {
    oneapi::tbb::parallel_for(
        oneapi::tbb::blocked_range<int64_t>(0, tiles, 1),
        [&](const oneapi::tbb::blocked_range<int64_t>& r) {
          for (int64_t t = r.begin(); t != r.end(); ++t) {
            int64_t b = n * t / tiles, e = n * (t + 1) / tiles;
            check_interrupt();
            trace::TileScope traced(node);
            if (b < e) body(b, e);
          }
        },
        oneapi::tbb::simple_partitioner());
  };
  if (in_worker()) {
    run();
    return;
  }
  // From outside the arena (the thread that runs a program): this thread
  // takes tiles itself while helper tasks take the others as workers come
  // to them. Handing all tiles over and sleeping until they were done put a
  // wake-up of this thread (10-20 us) on every call's critical path, which a
  // 30-100 us operation in a loop did not repay. Tiles are claimed one at a
  // time, so nobody waits for a helper that has not started; at the end this
  // thread waits only for tiles a helper is running.
  struct Shared {
    std::atomic<int64_t> next{0};
    std::atomic<int64_t> done{0};
    std::mutex mutex;
    std::exception_ptr error;
  };
  auto shared = std::make_shared<Shared>();
  auto work = [n, tiles, node, &body](Shared& sh) {
    for (;;) {
      const int64_t t = sh.next.fetch_add(1, std::memory_order_relaxed);
      if (t >= tiles) return;
      try {
        check_interrupt();
        trace::TileScope traced(node);
        const int64_t b = n * t / tiles, e = n * (t + 1) / tiles;
        if (b < e) body(b, e);
      } catch (...) {
        std::lock_guard lock(sh.mutex);
        if (!sh.error) sh.error = std::current_exception();
      }
      sh.done.fetch_add(1, std::memory_order_release);
    }
  };
  const int64_t helpers = std::min<int64_t>(tiles - 1, num_threads() - 1);
  {
    // A helper holds the shared state; it touches `body` only for a tile it
    // claimed, and this thread returns only when every tile is done.
    HelperOffer offer(helpers, [shared, work] { work(*shared); });
    work(*shared);
    for (int spins = 0; shared->done.load(std::memory_order_acquire) < tiles; ++spins) {
      if (spins < 64) {
        cpu_relax();
      } else {
        std::this_thread::yield();
      }
    }
  }
  if (shared->error) std::rethrow_exception(shared->error);
}

}  // namespace tessera
