// The trace recorder: what the runtime did, event by event (tasks, primitive
// evaluations, communication, training steps), for tessera/trace to write out
// and draw. Off by default; a hook costs one relaxed atomic load when off.
//
// Each thread appends to a buffer of its own (no lock, no shared cache line on
// the hot path); a buffer is read only when a recording stops. Times are
// steady-clock nanoseconds; tessera/trace maps them onto the wall clock so
// that localities line up.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::trace {

enum class EventKind : uint8_t {
  node,  // a primitive node's own work: what = the Node
  task,  // a task run by the scheduler (what = the Node whose work it ran, or null) or a tile
         // of parallel_for (flags & kTile, what = the node that started it)
  comm,  // a communication operation from submission to completion: what/where = interned
         // operation and call site, amount = bytes, peer = rank or -1 for a collective
  step,  // a training step: amount = its iteration
  loop,  // a run of a fast loop (lang/fastloop): what = the WhileNode, where = its interned
         // name (file:line), amount = turns run on the interpreter, peer = calls of its
         // native code, flags = kLoop*
  compile,  // a native compile or cache load: amount = its index in Recording::compiles
};

// Flags of a task event.
inline constexpr uint8_t kTile = 1;  // a tile of parallel_for
// Flags of a loop event.
inline constexpr uint8_t kLoopNative = 1;      // its native code ran
inline constexpr uint8_t kLoopParallel = 2;    // in chunks on the workers (prange)
inline constexpr uint8_t kLoopGeneral = 4;     // stopped early: the general evaluation went on
inline constexpr uint8_t kLoopRolledBack = 8;  // a native call bailed (its writes undone)

// A native compile (lang/native_trace.cpp): rare and with more fields than
// an Event, so kept in a table of its own that a `compile` event points to.
struct CompileRecord {
  const std::string* name = nullptr;       // interned: the loop's file:line
  const std::string* signature = nullptr;  // interned: the registers' kinds
  // translation: a jit function's Python translated into an execution tree
  // (python/tessera/jit.py; name: the function, no signature or steps).
  // optimised: a loop's -O3 tier compiled on the background thread
  // (lang/native_tiers.cpp; generate_ns: parsing the unoptimised IR there).
  enum class Mode : uint8_t { whole, partial, completed, refused, translation, optimised } mode =
      Mode::whole;
  enum class Source : uint8_t { compiled, disk_cache, process } source = Source::compiled;
  uint64_t ir_bytes = 0;
  // The compile's steps (-1: not run, a load from a cache).
  int64_t generate_ns = -1, optimise_ns = -1, codegen_ns = -1;
};

struct Event {
  int64_t t0 = 0, t1 = 0;
  // node: the calling thread's CPU clock (CLOCK_THREAD_CPUTIME_ID, ns) at the
  // start and the end of the work, -1 when it could not be read. cpu1 - cpu0
  // is the work's own cost, which a descheduled thread's wall span overstates;
  // the clock between two events of a thread is its CPU spent between them.
  int64_t cpu0 = -1, cpu1 = -1;
  const void* what = nullptr;
  const void* where = nullptr;
  uint64_t amount = 0;
  int32_t peer = -1;
  EventKind kind = EventKind::node;
  uint8_t flags = 0;
};

namespace detail {
extern std::atomic<bool> recording;
extern std::atomic<bool> cpu_clock;
}  // namespace detail

// True while a recording is running (the check every hook makes first).
inline bool on() { return detail::recording.load(std::memory_order_relaxed); }

// The recorder's clock (std::chrono::steady_clock, nanoseconds).
int64_t now_ns();

// The calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID, nanoseconds), or -1.
int64_t thread_cpu_ns();

// Whether the running recording reads the thread's CPU clock around each
// primitive evaluation (start(true)): a system call each time (0.6-0.9 us here), so
// only when asked (TESSERA_TRACE_CPU=1, session.hpp).
inline bool cpu_clock_on() { return detail::cpu_clock.load(std::memory_order_relaxed); }

// Appends an event to the calling thread's buffer.
void record(const Event& e);

// A string that lives as long as the process (names of communication
// operations and sites; takes a lock: for rare events only).
const std::string* intern(const std::string& s);

// Records a compile from `t0` to `t1` (now_ns() times) on the calling
// thread, when a recording runs.
void record_compile(const CompileRecord& c, int64_t t0, int64_t t1);

// Names the calling thread's events ("native tier"; a thread outside the
// arena is "caller" otherwise), before its first event.
void name_thread(const char* name);

// The node whose work the current task runs: set by a spawned node's task
// body so the scheduler's task event can name it.
void set_task_node(const void* node);
const void* take_task_node();

// The work of a primitive node on this thread, recorded as a node event
// when a trace records; parallel_for tiles started inside it are named after
// the node (current_node).
class NodeScope {
 public:
  explicit NodeScope(const void* node) {
    if (on()) begin(node);
  }
  ~NodeScope() {
    if (node_) end();
  }
  NodeScope(const NodeScope&) = delete;
  NodeScope& operator=(const NodeScope&) = delete;

  // The span of the work when the caller measured it anyway (the node's
  // counters): saves reading the clock twice more.
  template <class TimePoint>
  void measured(TimePoint t0, TimePoint t1) {
    if (node_) {
      t0_ = std::chrono::duration_cast<std::chrono::nanoseconds>(t0.time_since_epoch()).count();
      t1_ = std::chrono::duration_cast<std::chrono::nanoseconds>(t1.time_since_epoch()).count();
      if (cpu0_ >= 0) cpu1_ = thread_cpu_ns();
    }
  }

 private:
  void begin(const void* node);
  void end();
  const void* node_ = nullptr;
  const void* outer_ = nullptr;
  int64_t t0_ = 0, t1_ = 0;
  int64_t cpu0_ = -1, cpu1_ = -1;
};

// The node whose work this thread is doing (inside a NodeScope), or null.
const void* current_node();

// A tile of parallel_for, recorded as a task event of `node` (the node that
// started the parallel_for) when a trace records.
class TileScope {
 public:
  explicit TileScope(const void* node) {
    if (on()) begin(node);
  }
  ~TileScope() {
    if (t0_) end();
  }
  TileScope(const TileScope&) = delete;
  TileScope& operator=(const TileScope&) = delete;

 private:
  void begin(const void* node);
  void end();
  const void* node_ = nullptr;
  const void* outer_ = nullptr;
  int64_t t0_ = 0;
};

// One thread's events of a recording.
struct ThreadEvents {
  int index = 0;     // in order of first event since the process started
  std::string name;  // "worker", "caller" (a thread outside the arena), or name_thread's
  std::vector<Event> events;
};

struct Recording {
  int64_t begin_ns = 0, end_ns = 0;
  std::vector<ThreadEvents> threads;
  uint64_t dropped = 0;  // events lost to a full buffer
  std::vector<CompileRecord> compiles;  // what `compile` events point to
};

// Starts a recording (an error if one is running); with `cpu_clock`, node
// events carry the thread's CPU clock (Event::cpu0, cpu1).
void start(bool cpu_clock = false);
// Stops the recording and returns what every thread recorded since start().
Recording stop();

// What writes a running recording out (tessera/trace's session sets it when
// it starts one): a process about to end abruptly (a locality whose peer
// failed, communication engine) calls write_before_abrupt_end() so that its
// trace is not lost. Returns false when there was nothing to write.
void set_abrupt_end_writer(bool (*writer)());
bool write_before_abrupt_end();

// Events one thread can hold over the life of the process; beyond, events
// are counted as dropped.
inline constexpr size_t kChunkEvents = 1 << 15;
inline constexpr size_t kMaxChunks = 1 << 12;

}  // namespace tessera::trace
