// The native code's runs of a loop (fastloop_impl.hpp): the code found for
// the registers' kinds, one call of it from a checkpoint, and the buffers a
// run takes from the run before on its thread (fastloop_buffers.hpp).
#include <atomic>
#include <cstdio>
#include <mutex>
#include <vector>

#include "tessera/lang/fastloop_buffers.hpp"
#include "tessera/lang/fastloop_impl.hpp"
#include "tessera/lang/native.hpp"
#include "tessera/lang/native_random.hpp"
#include "tessera/lang/native_trace.hpp"
#include "tessera/primitives/random_stream.hpp"
#include "tessera/runtime/interrupt.hpp"

namespace tessera {

namespace {
// The buffers a run of a loop leaves on its thread for the next one: a
// small jit function's loop runs its few turns in well under a microsecond,
// and its State's vectors, the native call's array table and the signature
// were a dozen allocations of each run. A run inside another (a loop in a
// function the outer loop's general path calls) finds them taken and
// allocates its own, as before; the first to finish gives its back.
struct LoopRunSpares {
  std::vector<Reg> regs, saved;
  std::vector<uint8_t> assigned, saved_assigned, signature;
  std::vector<uint64_t> counts, saved_counts;
  std::vector<const Reg*> roots;
  std::vector<NativeArray> arrays;
  // The objects' table and its columns (a comprehension's lists).
  std::vector<Value> objects;
  std::vector<uint32_t> object_epoch, object_logged;
  std::vector<int8_t> object_ascii;
};
thread_local LoopRunSpares t_loop_spares;

// A buffer of larger runs is not kept (a loop of thousands of registers or
// counters is rare; its buffer is freed as before).
constexpr size_t kMaxLoopSpareBytes = size_t{64} << 10;

template <class T>
void take_loop_spare(std::vector<T>& spare, std::vector<T>& v) {
  v.swap(spare);
  v.clear();
}

template <class T>
void give_loop_spare(std::vector<T>& v, std::vector<T>& spare) {
  if (spare.capacity() == 0 && v.capacity() * sizeof(T) <= kMaxLoopSpareBytes) {
    v.clear();
    v.swap(spare);
  }
}

// A spare buffer held for one scope (the native call's array table, the
// signature).
template <class T>
struct BorrowedLoopSpare {
  std::vector<T>& spare;
  std::vector<T> v;
  explicit BorrowedLoopSpare(std::vector<T>& s) : spare(s) { take_loop_spare(spare, v); }
  ~BorrowedLoopSpare() { give_loop_spare(v, spare); }
  BorrowedLoopSpare(const BorrowedLoopSpare&) = delete;
  BorrowedLoopSpare& operator=(const BorrowedLoopSpare&) = delete;
};
}  // namespace

RecycledState::RecycledState(FastLoop::Impl::State& s) : st(s) {
  take_loop_spare(t_loop_spares.regs, st.regs);
  take_loop_spare(t_loop_spares.saved, st.saved);
  take_loop_spare(t_loop_spares.assigned, st.assigned);
  take_loop_spare(t_loop_spares.saved_assigned, st.saved_assigned);
  take_loop_spare(t_loop_spares.counts, st.counts);
  take_loop_spare(t_loop_spares.saved_counts, st.saved_counts);
  take_loop_spare(t_loop_spares.roots, st.roots);
  take_loop_spare(t_loop_spares.objects, st.objects);
  take_loop_spare(t_loop_spares.object_epoch, st.object_epoch);
  take_loop_spare(t_loop_spares.object_logged, st.object_logged);
  take_loop_spare(t_loop_spares.object_ascii, st.object_ascii);
}

RecycledState::~RecycledState() {
  give_loop_spare(st.regs, t_loop_spares.regs);
  give_loop_spare(st.saved, t_loop_spares.saved);
  give_loop_spare(st.assigned, t_loop_spares.assigned);
  give_loop_spare(st.saved_assigned, t_loop_spares.saved_assigned);
  give_loop_spare(st.counts, t_loop_spares.counts);
  give_loop_spare(st.saved_counts, t_loop_spares.saved_counts);
  give_loop_spare(st.roots, t_loop_spares.roots);
  give_loop_spare(st.objects, t_loop_spares.objects);
  give_loop_spare(st.object_epoch, t_loop_spares.object_epoch);
  give_loop_spare(st.object_logged, t_loop_spares.object_logged);
  give_loop_spare(st.object_ascii, t_loop_spares.object_ascii);
}

const NativeCode* FastLoop::Impl::native_for(const State& st) const {
  BorrowedLoopSpare<uint8_t> sig_buffer(t_loop_spares.signature);
  std::vector<uint8_t>& sig = sig_buffer.v;
  native_signature(st.regs, st.arrays, sig);
  // Set once a code is in native_codes, which keeps it as long as the loop.
  if (const NativeCode* recent = native_recent.load(std::memory_order_acquire);
      recent && recent->signature == sig)
    return recent;
  std::lock_guard<std::mutex> lock(native_mu);
  for (const auto& c : native_codes) {
    if (c->signature == sig) {
      native_recent.store(c.get(), std::memory_order_release);
      return c.get();
    }
  }
  for (const auto& r : native_refused) {
    if (r == sig) return nullptr;
  }
  // A few signatures at most (a loop run with other kinds of arguments).
  if (native_codes.size() + native_refused.size() >= 4) return nullptr;
  std::string why;
  NativeCompileTrace traced(*this, st.regs, st.arrays, false);
  std::unique_ptr<NativeCode> code =
      native_compile(*this, st.regs, st.arrays, st.objects, why, native_lazy_enabled());
  traced.done(code.get());
  if (!code) {
    if (debug() || native_debug())
      std::fprintf(stderr, "[fast loops] %s: no native code, the interpreter runs the loop: %s\n",
                   where.c_str(), why.c_str());
    native_refused.push_back(std::move(sig));
    return nullptr;
  }
  if (debug() || native_debug()) {
    if (code->from_cache)
      std::fprintf(stderr, "[fast loops] %s: native code loaded from the cache in %.1f ms%s\n",
                   where.c_str(), code->compile_ms, code->partial ? " (partial)" : "");
    else
      std::fprintf(stderr, "[fast loops] %s: native code compiled in %.1f ms%s%s%s\n",
                   where.c_str(), code->compile_ms,
                   code->partial ? " (partial: the versions checked before each loop)" : "",
                   code->cache_note.empty() ? "" : "; cache: ", code->cache_note.c_str());
  }
  native_codes.push_back(std::move(code));
  native_recent.store(native_codes.back().get(), std::memory_order_release);
  return native_codes.back().get();
}

int32_t FastLoop::Impl::run_native(const NativeCode& code, State& st, Reg& last,
                                   NativeLog& log, int64_t& undo_count) const {
  BorrowedLoopSpare<NativeArray> arrays_buffer(t_loop_spares.arrays);
  std::vector<NativeArray>& arrs = arrays_buffer.v;
  native_array_table(st.regs, st.arrays, arrs);
  if (log.entries.size() < 4096) log.entries.resize(4096);
  log.ranges.clear();
  log.bytes.clear();
  log.copies.clear();
  NativeCtx c;
  c.regs = st.regs.data();
  c.assigned = st.assigned.data();
  c.counts = st.counts.data();
  c.arrays = arrs.data();
  c.entries = st.arrays.data();
  c.undo = log.entries.data();
  c.undo_n = 0;
  c.undo_cap = static_cast<int64_t>(log.entries.size());
  c.log = &log;
  c.range_units = 0;
  // Checkpoints every 16384 turns or 65536 logged element writes: a bail
  // redoes at most that many turns on the interpreter.
  c.max_turns = int64_t{1} << 14;
  c.max_undo = int64_t{1} << 16;
  c.last = last;
  c.helpers = native_helpers();
  c.interrupt = interrupt_flag_address();
  c.draws = 0;
  c.draws_at_turn = 0;
  NativeDraws draws;
  c.rand = &draws;
  c.state = &st;
  c.impl = this;
  const int32_t status = code.fn.load(std::memory_order_acquire)(&c);
  native_draws_settle(draws);
  undo_count = c.undo_n;
  last = c.last;
  st.need_site = c.need_site;
  // Random draws the general evaluation makes again: back to the call's
  // start (rollback rewinds st.draws), or to the start of the turn stopped.
  if (status == kNativeBailCall || status == kNativeNeedFull) {
    st.draws += static_cast<uint64_t>(c.draws);
  } else if (status == kNativeBail && c.draws > c.draws_at_turn) {
    const uint64_t at = st.stream_at_checkpoint;
    rewind_random_stream(at + static_cast<uint64_t>(c.draws),
                         at + static_cast<uint64_t>(c.draws_at_turn));
  }
  return status;
}

}  // namespace tessera
