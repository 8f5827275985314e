#include "tessera/runtime/trace.hpp"

#include <time.h>

#include <chrono>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <unordered_set>

#include "tessera/runtime/scheduler.hpp"

namespace tessera::trace {

namespace detail {
std::atomic<bool> recording{false};
std::atomic<bool> cpu_clock{false};
}  // namespace detail

namespace {

// One thread's events: chunks that are allocated as the thread needs them and
// never move, so the owner appends without a lock and a reader (stop) reads
// everything below the published size.
struct Buffer {
  std::unique_ptr<std::atomic<Event*>[]> chunks{new std::atomic<Event*>[kMaxChunks]()};
  std::atomic<size_t> size{0};
  // Owned by the registry (under its mutex): the first event of the running
  // recording, and chunks below `freed` are gone.
  size_t begin = 0;
  size_t freed = 0;
  int index = 0;
  std::string name;
};

struct Registry {
  std::mutex mutex;
  // Never shrinks: a thread's buffer outlives the thread (workers of a
  // replaced arena), so its events can still be read.
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::atomic<uint64_t> dropped{0};
  bool running = false;
  int64_t begin_ns = 0;
  std::mutex strings_mutex;
  std::unordered_set<std::string> strings;
  // The running recording's compiles (under `mutex`).
  std::vector<CompileRecord> compiles;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: threads may record during exit
  return *r;
}

thread_local Buffer* tl_buffer = nullptr;
thread_local const char* tl_thread_name = nullptr;
thread_local const void* tl_task_node = nullptr;
thread_local const void* tl_current_node = nullptr;

Buffer* make_buffer() {
  Registry& r = registry();
  auto b = std::make_unique<Buffer>();
  b->name = tl_thread_name ? tl_thread_name : in_worker() ? "worker" : "caller";
  std::lock_guard lock(r.mutex);
  b->index = static_cast<int>(r.buffers.size());
  tl_buffer = b.get();
  r.buffers.push_back(std::move(b));
  return tl_buffer;
}

}  // namespace

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t thread_cpu_ns() {
  timespec ts{};
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return -1;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void record(const Event& e) {
  Buffer* b = tl_buffer ? tl_buffer : make_buffer();
  size_t i = b->size.load(std::memory_order_relaxed);
  size_t c = i / kChunkEvents;
  if (c >= kMaxChunks) {
    registry().dropped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  Event* chunk = b->chunks[c].load(std::memory_order_relaxed);
  if (!chunk) {
    chunk = new Event[kChunkEvents];
    b->chunks[c].store(chunk, std::memory_order_release);
  }
  chunk[i % kChunkEvents] = e;
  b->size.store(i + 1, std::memory_order_release);
}

const std::string* intern(const std::string& s) {
  Registry& r = registry();
  std::lock_guard lock(r.strings_mutex);
  return &*r.strings.insert(s).first;
}

void record_compile(const CompileRecord& c, int64_t t0, int64_t t1) {
  if (!on()) return;
  Registry& r = registry();
  Event e;
  e.kind = EventKind::compile;
  e.t0 = t0;
  e.t1 = t1;
  {
    std::lock_guard lock(r.mutex);
    // Stopped meanwhile: the event would point into the next recording's table.
    if (!r.running) return;
    e.amount = r.compiles.size();
    r.compiles.push_back(c);
  }
  record(e);
}

void name_thread(const char* name) { tl_thread_name = name; }

void set_task_node(const void* node) { tl_task_node = node; }

const void* take_task_node() {
  const void* n = tl_task_node;
  tl_task_node = nullptr;
  return n;
}

void NodeScope::begin(const void* node) {
  node_ = node;
  outer_ = tl_current_node;
  tl_current_node = node;
  if (cpu_clock_on()) cpu0_ = thread_cpu_ns();
}

void NodeScope::end() {
  Event e;
  e.kind = EventKind::node;
  if (cpu0_ >= 0) {
    // Read where the caller measured the span (measured), else now.
    int64_t cpu1 = cpu1_ >= 0 ? cpu1_ : thread_cpu_ns();
    if (cpu1 >= cpu0_) {
      e.cpu0 = cpu0_;
      e.cpu1 = cpu1;
    }
  }
  if (t1_ != 0) {
    e.t0 = t0_;
    e.t1 = t1_;
  } else {
    // Not measured (the work failed): the event ends now, a point.
    e.t0 = e.t1 = now_ns();
  }
  e.what = node_;
  record(e);
  tl_current_node = outer_;
}

const void* current_node() { return tl_current_node; }

void TileScope::begin(const void* node) {
  node_ = node;
  // The tile's work is the node's, also on a thread that stole it.
  outer_ = tl_current_node;
  tl_current_node = node;
  t0_ = now_ns();
}

void TileScope::end() {
  Event e;
  e.kind = EventKind::task;
  e.t0 = t0_;
  e.t1 = now_ns();
  e.what = node_;
  e.flags = kTile;
  record(e);
  tl_current_node = outer_;
}

void start(bool cpu_clock) {
  Registry& r = registry();
  std::lock_guard lock(r.mutex);
  if (r.running) throw std::runtime_error("[trace] a trace is already being recorded in this process");
  for (auto& b : r.buffers) {
    b->begin = b->size.load(std::memory_order_acquire);
    // Chunks wholly before the new recording are never written again: the
    // owner only appends at or after `begin`.
    for (size_t c = b->freed; c < b->begin / kChunkEvents; ++c) {
      delete[] b->chunks[c].exchange(nullptr, std::memory_order_acq_rel);
    }
    b->freed = std::max(b->freed, b->begin / kChunkEvents);
  }
  r.dropped.store(0, std::memory_order_relaxed);
  r.compiles.clear();
  r.running = true;
  r.begin_ns = now_ns();
  detail::cpu_clock.store(cpu_clock, std::memory_order_relaxed);
  detail::recording.store(true, std::memory_order_release);
}

namespace {
std::atomic<bool (*)()> abrupt_end_writer{nullptr};
}  // namespace

void set_abrupt_end_writer(bool (*writer)()) {
  abrupt_end_writer.store(writer, std::memory_order_release);
}

bool write_before_abrupt_end() {
  bool (*writer)() = abrupt_end_writer.load(std::memory_order_acquire);
  return writer && writer();
}

Recording stop() {
  // A task writes its event when its body returns, just after it delivered
  // its result, so the evaluation it served may end first: tasks still
  // running get a moment (at most 100 ms) to finish, so that their events
  // are not lost.
  if (!in_worker()) {
    auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
    while (tasks_outstanding() > 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  Registry& r = registry();
  Recording out;
  std::lock_guard lock(r.mutex);
  if (!r.running) throw std::runtime_error("[trace] no trace is being recorded in this process");
  detail::recording.store(false, std::memory_order_release);
  r.running = false;
  out.begin_ns = r.begin_ns;
  out.end_ns = now_ns();
  for (auto& b : r.buffers) {
    size_t n = b->size.load(std::memory_order_acquire);
    if (n <= b->begin) continue;
    ThreadEvents t;
    t.index = b->index;
    t.name = b->name;
    t.events.reserve(n - b->begin);
    for (size_t i = b->begin; i < n; ++i) {
      const Event& e = b->chunks[i / kChunkEvents].load(std::memory_order_acquire)[i % kChunkEvents];
      // A hook that saw the recording on just before an earlier stop may
      // have appended late; its event belongs to no recording.
      if (e.t0 >= out.begin_ns) t.events.push_back(e);
    }
    b->begin = n;
    if (!t.events.empty()) out.threads.push_back(std::move(t));
  }
  out.dropped = r.dropped.load(std::memory_order_relaxed);
  out.compiles = std::move(r.compiles);
  r.compiles.clear();
  return out;
}

}  // namespace tessera::trace
