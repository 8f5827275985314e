// Futures with continuations and when_all, run on the scheduler's workers.
//
// A Future<T> is either ready at creation (the common case for cheap work
// evaluated inline: no allocation, no locking) or backed by a shared state that
// a Promise fulfils later. Continuations attached with `then` run as soon as
// the value is there, on the thread that produced it (or as a new task when
// that thread is deep in nested continuations). No worker ever waits on a
// future; only the outermost boundary calls `wait`.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/spinlock.hpp"

namespace tessera {

template <class T>
class Future;
template <class T>
class Promise;

namespace detail {

// Continuations run inline up to this nesting depth, then as new tasks, so
// long chains cannot overflow a worker's stack.
inline constexpr int kMaxInlineContinuationDepth = 48;
int& continuation_depth();

// Runs a continuation inline, or spawns it when the inline chain is deep.
void run_continuation(std::function<void()> fn);

// Called over and over by Future::wait while the future is pending (the
// waiting thread is not a worker): for kWaitHelpSeconds at first, and
// kWaitHelpAfterProgressSeconds more after each time it completes
// something, before the thread blocks; a blocked thread looks again every
// kWaitRecheckSeconds and helps for kWaitRecheckHelpSeconds if there is
// work. The communication engine installs one that progresses MPI, so an
// outermost wait for a collective completes without a hand-off between
// threads, and so does a program's loop of collectives (each completion runs
// the program on to its next one, here). Returns kHelpIdle when it has
// nothing to do (the waiting thread then blocks at once), kHelpBusy while
// work is in flight, kHelpProgressed when it completed something, and
// kHelpBusyYielded for kHelpBusy when the poll already gave the core up
// (MPI's progress yields when it finds nothing, as Open MPI's does when
// oversubscribed): the waiter then does not yield again. A thread
// calls it with HelpCall::enter before its first poll and HelpCall::leave
// after its last, so the helper knows someone is polling (the engine's
// progress thread then stays asleep instead of competing for the core and
// the results).
inline constexpr int kHelpIdle = 0, kHelpBusy = 1, kHelpProgressed = 2, kHelpBusyYielded = 3;
enum class HelpCall { enter, poll, leave };
using WaitHelper = int (*)(HelpCall);
std::atomic<WaitHelper>& wait_helper();
inline constexpr double kWaitHelpSeconds = 2e-3;
inline constexpr double kWaitHelpAfterProgressSeconds = 2e-4;
inline constexpr double kWaitRecheckSeconds = 1e-3;
inline constexpr double kWaitRecheckHelpSeconds = 5e-5;
// Helps while `ready()` is false, for `seconds` plus the extensions after
// progress. True once ready.
bool help_while_pending(const std::function<bool()>& ready, double seconds = kWaitHelpSeconds);

// Runs the tasks this thread (outside the arena) spawned that no worker has
// started yet, newest first, until `ready()` or none is left (scheduler.cpp).
// True if it ran any.
bool run_own_queued_tasks(const std::function<bool()>& ready);

// When ranks outnumber cores (the communication engine detects it at
// start-up), a waiting thread must not keep a core from the ranks it waits
// for: in WaitMode::yield help_while_pending gives its core up (sched_yield)
// after each poll that found nothing, as MPI's blocking calls do, and blocks
// when nothing is in flight or nothing progressed for long. WaitMode::spin: above.
enum class WaitMode { spin, yield };
void set_wait_mode(WaitMode m);
WaitMode wait_mode();

// Threads blocked in Future::wait (with a wait helper installed) take work
// handed to them: the communication engine's progress thread gives them the
// completions it makes, so a program waited for at the boundary runs on from
// them on that thread (which then polls again) instead of moving to a
// worker for good. A blocked thread registers the mutex and condition
// variable it blocks on (its state's parking place) while it blocks.
struct BlockedWaiter {
  std::mutex* mutex;
  std::condition_variable* cv;
};
void block_at_boundary(BlockedWaiter w);
// Unregisters and runs what was handed over meanwhile; true if it ran any.
bool unblock_at_boundary(BlockedWaiter w);
// True once `fn` is handed to a blocked boundary thread (woken to run it);
// false when none is blocked.
bool hand_to_boundary(std::function<void()> fn);
// True while work handed over waits to be run (a blocked thread's wake-up
// condition).
bool handed_work_waiting();

// A boundary wait that nothing can end: no task queued or running, no other
// evaluation in progress and no communication engine (which completes
// futures from outside tasks). A program cannot get there, but a bug (a
// dependency cycle in the dataflow) could; the wait then fails after
// stuck_seconds() of it (TESSERA_STUCK_SECONDS, default 10; 0: never)
// instead of hanging. check_stuck is called every kStuckCheckSeconds.
inline constexpr double kStuckCheckSeconds = 0.25;
struct StuckWatch {
  uint64_t spawned = 0, outstanding = 1;
  double idle = 0;
};
void check_stuck(StuckWatch& w);
double stuck_seconds();
void set_stuck_seconds(double s);

// Rewrites an error (adds the source position of the call that made the
// future, say); `context` is what it was installed with.
using ErrorDecorator = std::exception_ptr (*)(std::exception_ptr error, const void* context);

// Where a thread blocks until a shared state completes: one of a fixed set
// of mutex and condition variable pairs, picked by the state's address (a
// state has no condition variable of its own: most are never waited for,
// and each would cost 88 bytes and a notification on completion). Threads
// waiting on different states may share one; each checks its own state.
struct Parking {
  std::mutex mutex;
  std::condition_variable cv;
};
Parking& parking_for(const void* state);

template <class T>
struct SharedState {
  SpinLock spin;
  // Set (under spin, after the value or error) when complete; read
  // without the lock by is_ready, which then sees the value too.
  std::atomic<bool> done{false};
  // Set by a thread before it blocks on this state's parking place:
  // completion then wakes it (wake_waiters).
  std::atomic<bool> waited{false};
  std::optional<T> value;
  std::exception_ptr error;
  // Applied to the error this state is completed with (Future::decorate_errors).
  ErrorDecorator decorate = nullptr;
  std::shared_ptr<const void> decorate_context;

  // Stores the error, decorated. Requires spin.
  void set_error_locked(std::exception_ptr e) {
    error = decorate ? decorate(std::move(e), decorate_context.get()) : std::move(e);
  }
  // Continuations in the order attached: most states get one or two, kept
  // in `first` and `second` (no vector to allocate), the others in `more`.
  std::function<void()> first, second;
  std::vector<std::function<void()>> more;

  // After `done` is set: wakes the threads blocked on this state. Both
  // sides order their store before their load (sequentially consistent):
  // either the waiter sees `done` and does not block, or this sees
  // `waited` and notifies under the parking mutex, which the waiter holds
  // from its check of `done` until it sleeps.
  void wake_waiters() {
    if (!waited.load(std::memory_order_seq_cst)) return;
    Parking& p = parking_for(this);
    { std::lock_guard lock(p.mutex); }
    p.cv.notify_all();
  }

  void finish() {
    std::function<void()> cb, cb2;
    std::vector<std::function<void()>> cbs;
    {
      std::lock_guard lock(spin);
      done.store(true, std::memory_order_seq_cst);
      cb.swap(first);
      cb2.swap(second);
      cbs.swap(more);
    }
    wake_waiters();
    if (cb) run_continuation(std::move(cb));
    if (cb2) run_continuation(std::move(cb2));
    for (auto& c : cbs) run_continuation(std::move(c));
  }
};

template <class T>
struct is_future : std::false_type {};
template <class T>
struct is_future<Future<T>> : std::true_type {};

}  // namespace detail

template <class T>
class Future {
 public:
  using value_type = T;

  // An invalid future (only for default construction of containers).
  Future() = default;
  explicit Future(std::shared_ptr<detail::SharedState<T>> s) : state_(std::move(s)) {}

  static Future ready(T value) {
    Future f;
    f.value_.emplace(std::move(value));
    return f;
  }
  static Future failed(std::exception_ptr error) {
    Future f;
    f.error_ = std::move(error);
    return f;
  }
  // Runs fn() now; a thrown exception becomes a failed future.
  template <class F>
  static Future from_call(F&& fn) {
    try {
      return ready(fn());
    } catch (...) {
      return failed(std::current_exception());
    }
  }

  bool valid() const { return value_ || error_ || state_; }

  bool is_ready() const {
    if (value_ || error_) return true;
    return state_->done.load(std::memory_order_acquire);
  }

  // Requires is_ready(). Rethrows the stored error.
  const T& get() const {
    if (value_) return *value_;
    if (error_) std::rethrow_exception(error_);
    if (state_->error) std::rethrow_exception(state_->error);
    return *state_->value;
  }
  // Requires is_ready(). nullptr when the future holds a value.
  std::exception_ptr error() const {
    if (value_ || error_) return error_;
    return state_->error;
  }
  // Moves the value out (requires is_ready() and no error); copies it from
  // a shared state that another future or promise still holds.
  T take() {
    if (value_) return std::move(*value_);
    if (state_.use_count() == 1) return std::move(*state_->value);
    return *state_->value;
  }

  // Blocks the calling thread until ready. Only for the outermost boundary
  // (never from a task): the waiting thread is not a worker.
  const T& wait() const {
    wait_ready();
    return get();
  }

  // wait() without get(): an error stays in the future.
  void wait_ready() const {
    if (state_) {
      // The first look helps for kWaitHelpSeconds; later ones briefly, so
      // that a thread waiting through a long computation does not take a
      // core from it while some communication is in flight.
      for (double help = detail::kWaitHelpSeconds;;) {
        if (detail::run_own_queued_tasks([this] { return is_ready(); }) && is_ready()) break;
        if (detail::help_while_pending([this] { return is_ready(); }, help)) break;
        help = detail::kWaitRecheckHelpSeconds;
        detail::Parking& parking = detail::parking_for(state_.get());
        state_->waited.store(true, std::memory_order_seq_cst);
        if (!detail::wait_helper().load(std::memory_order_acquire)) {
          detail::StuckWatch watch;
          std::unique_lock lock(parking.mutex);
          while (!parking.cv.wait_for(lock, std::chrono::duration<double>(detail::kStuckCheckSeconds),
                                      [&] { return state_->done.load(std::memory_order_seq_cst); })) {
            lock.unlock();
            detail::check_stuck(watch);
            lock.lock();
          }
          break;
        }
        // With a helper (communication), look again now and then: the
        // program may have started new communication, which this thread
        // then drives and runs the program on from. Completions the
        // progress thread makes meanwhile are handed to this thread.
        detail::BlockedWaiter me{&parking.mutex, &parking.cv};
        detail::block_at_boundary(me);
        bool done;
        {
          std::unique_lock lock(parking.mutex);
          done = parking.cv.wait_for(lock, std::chrono::duration<double>(detail::kWaitRecheckSeconds),
                                     [&] {
                                       return state_->done.load(std::memory_order_seq_cst) ||
                                              detail::handed_work_waiting();
                                     }) &&
                 state_->done;
        }
        if (detail::unblock_at_boundary(me)) {
          // The program went on here: help again as after the first look.
          help = detail::kWaitHelpSeconds;
          continue;
        }
        if (done) break;
      }
    }
  }

  // Calls cb() once the future is ready (now, if it already is; only a
  // pending future stores it as a std::function).
  template <class F>
  void on_ready(F&& cb) const {
    if (!state_) {
      cb();
      return;
    }
    {
      std::lock_guard lock(state_->spin);
      if (!state_->done) {
        if (!state_->first) {
          state_->first = std::forward<F>(cb);
        } else if (!state_->second) {
          state_->second = std::forward<F>(cb);
        } else {
          state_->more.emplace_back(std::forward<F>(cb));
        }
        return;
      }
    }
    cb();
  }

  // Calls f(ready_future) once ready; f returns a Future<R>. The general form
  // of composition: f may inspect errors and recover.
  template <class F>
  auto chain(F&& f) const -> std::invoke_result_t<F, Future<T>> {
    using FR = std::invoke_result_t<F, Future<T>>;
    static_assert(detail::is_future<FR>::value, "chain's function must return a Future");
    using R = typename FR::value_type;
    if (!state_) return f(*this);
    if (is_ready()) return f(*this);
    auto out = std::make_shared<detail::SharedState<R>>();
    Future self = *this;
    on_ready([self, out, fn = std::forward<F>(f)]() mutable {
      FR r;
      try {
        r = fn(self);
      } catch (...) {
        r = FR::failed(std::current_exception());
      }
      forward_into(r, out);
    });
    return FR(out);
  }

  // This future with `fn` applied to its error, if it fails: the same as
  // chain(f -> failed(fn(f.error()))) but, for a pending future, without a
  // new state and continuation: the decorator is installed on the state and
  // applied when the error is set. Only for a future nothing else observes
  // (fresh from an asynchronous primitive): every holder of the state sees
  // the decorated error. `context` is kept alive until then.
  Future decorate_errors(detail::ErrorDecorator fn, std::shared_ptr<const void> context) const {
    if (!state_) return error_ ? failed(fn(error_, context.get())) : *this;
    {
      std::lock_guard lock(state_->spin);
      if (!state_->done && !state_->decorate) {
        state_->decorate = fn;
        state_->decorate_context = std::move(context);
        return *this;
      }
      if (state_->done && !state_->error) return *this;
    }
    return chain([fn, context](const Future& f) -> Future {
      if (auto e = f.error()) return failed(fn(e, context.get()));
      return f;
    });
  }

  // Calls f(value) once ready; f returns R or Future<R>. Errors skip f and
  // propagate.
  template <class F>
  auto then(F&& f) const {
    using R0 = std::invoke_result_t<F, const T&>;
    if constexpr (detail::is_future<R0>::value) {
      return chain([fn = std::forward<F>(f)](const Future<T>& fut) mutable -> R0 {
        if (auto e = fut.error()) return R0::failed(e);
        return fn(fut.get());
      });
    } else {
      return chain([fn = std::forward<F>(f)](const Future<T>& fut) mutable -> Future<R0> {
        if (auto e = fut.error()) return Future<R0>::failed(e);
        return Future<R0>::from_call([&] { return fn(fut.get()); });
      });
    }
  }

  // Completes `out` from `src` (immediately if ready, else when it becomes so).
  template <class U>
  static void forward_into(const Future<U>& src, const std::shared_ptr<detail::SharedState<U>>& out) {
    auto complete = [](const Future<U>& from, const std::shared_ptr<detail::SharedState<U>>& into) {
      {
        std::lock_guard lock(into->spin);
        if (auto e = from.error()) {
          into->set_error_locked(e);
        } else {
          into->value.emplace(from.get());
        }
      }
      into->finish();
    };
    // A ready source completes `out` here, with no copy of it kept.
    if (src.is_ready()) {
      complete(src, out);
      return;
    }
    src.on_ready([src, out, complete] { complete(src, out); });
  }

 private:
  std::optional<T> value_;
  std::exception_ptr error_;
  std::shared_ptr<detail::SharedState<T>> state_;
};

// The producing side of a future.
template <class T>
class Promise {
 public:
  Promise() : state_(std::make_shared<detail::SharedState<T>>()) {}
  Future<T> get_future() const { return Future<T>(state_); }
  void set_value(T v) const {
    {
      std::lock_guard lock(state_->spin);
      state_->value.emplace(std::move(v));
    }
    state_->finish();
  }
  void set_error(std::exception_ptr e) const {
    {
      std::lock_guard lock(state_->spin);
      state_->set_error_locked(std::move(e));
    }
    state_->finish();
  }
  // Completes from another future.
  void set_from(const Future<T>& f) const { Future<T>::forward_into(f, state_); }

  // Sets the error e, if set, else the value (moved from v), but only while
  // no continuation is attached, so that none runs on the calling thread (a
  // thread blocked in wait is woken). False, leaving the promise pending and
  // v untouched, otherwise: the caller then completes it where continuations
  // should run.
  bool set_if_unobserved(T& v, const std::exception_ptr& e) const {
    {
      std::lock_guard lock(state_->spin);
      if (state_->first || state_->second || !state_->more.empty()) return false;
      if (e) {
        state_->set_error_locked(e);
      } else {
        state_->value.emplace(std::move(v));
      }
      state_->done.store(true, std::memory_order_seq_cst);
    }
    state_->wake_waiters();
    return true;
  }

 private:
  std::shared_ptr<detail::SharedState<T>> state_;
};

// Runs fn() as a task on the scheduler; fn returns T or Future<T>.
template <class F>
auto async(F&& fn) {
  using R0 = std::invoke_result_t<F>;
  if constexpr (detail::is_future<R0>::value) {
    using T = typename R0::value_type;
    Promise<T> p;
    spawn([p, f = std::forward<F>(fn)]() mutable {
      R0 r;
      try {
        r = f();
      } catch (...) {
        r = R0::failed(std::current_exception());
      }
      p.set_from(r);
    });
    return p.get_future();
  } else {
    Promise<R0> p;
    spawn([p, f = std::forward<F>(fn)]() mutable {
      try {
        p.set_value(f());
      } catch (...) {
        p.set_error(std::current_exception());
      }
    });
    return p.get_future();
  }
}

// A future of all values, in order, ready when every input is; the first
// failed input (by position) decides the error.
template <class T>
Future<std::vector<T>> when_all(std::vector<Future<T>> futures) {
  bool all_ready = true;
  for (auto& f : futures) {
    if (!f.is_ready()) {
      all_ready = false;
      break;
    }
  }
  auto collect = [](std::vector<Future<T>>& fs) -> Future<std::vector<T>> {
    std::vector<T> out;
    out.reserve(fs.size());
    for (auto& f : fs) {
      if (auto e = f.error()) return Future<std::vector<T>>::failed(e);
      out.push_back(f.take());
    }
    return Future<std::vector<T>>::ready(std::move(out));
  };
  if (all_ready) return collect(futures);
  struct Join {
    std::vector<Future<T>> futures;
    std::atomic<size_t> remaining;
    Promise<std::vector<T>> promise;
  };
  auto join = std::make_shared<Join>();
  join->futures = std::move(futures);
  join->remaining.store(join->futures.size());
  Future<std::vector<T>> result = join->promise.get_future();
  for (auto& f : join->futures) {
    f.on_ready([join, collect] {
      if (join->remaining.fetch_sub(1) == 1) join->promise.set_from(collect(join->futures));
    });
  }
  return result;
}

}  // namespace tessera
