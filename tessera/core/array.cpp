#include "tessera/core/array.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <new>

#include <malloc.h>
#include <sys/mman.h>

#include "tessera/core/error.hpp"

namespace tessera {

namespace {
constexpr size_t kAlignment = 64;
}

std::string shape_str(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

int64_t shape_size(const Shape& shape, const char* op) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) {
      throw std::invalid_argument(
          error_message("[", op, "] negative dimensions are not allowed: shape ", shape_str(shape)));
    }
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / 8 / d) {
      throw MemoryError(error_message("[", op, "] array is too big: shape ", shape_str(shape)));
    }
    n *= d;
  }
  return n;
}

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * shape[i + 1];
  }
  return strides;
}

namespace {

// Large buffers are kept for reuse when freed: a fresh large allocation is
// mapped anew by glibc's malloc and every page faults on first touch, which
// costs as much as the elementwise work on it (and tcmalloc gives freed pages
// back to the system as another framework in the process churns memory).
// Sizes are rounded to 64 KiB so that the same shapes (every training step)
// find their blocks again; a request takes the smallest kept block at most an
// eighth larger. The cache holds at most TESSERA_CACHE_BYTES (default 2 GiB;
// 0 turns it off), and never so much that live + kept bytes exceed the most
// bytes the program ever had live at once: a block is kept only below that
// mark, and a request that no kept block serves first gives kept blocks back
// to malloc (largest first) until it fits under it. So the cache adds
// nothing to the resident set at a program's peak, where blocks of sizes not
// in use would otherwise sit beside the live ones.
constexpr size_t kCacheGranule = size_t{1} << 16;
constexpr size_t kCacheMinBytes = size_t{1} << 20;

// Bytes held by arrays now, the most since reset_peak_memory(), and the most
// ever (the cache's bound).
std::atomic<size_t> g_live{0};
std::atomic<size_t> g_peak_live{0};
std::atomic<size_t> g_high_water{0};

void raise_to(std::atomic<size_t>& mark, size_t now) {
  size_t seen = mark.load(std::memory_order_relaxed);
  while (now > seen && !mark.compare_exchange_weak(seen, now, std::memory_order_relaxed)) {
  }
}

void count_alloc(size_t rounded) {
  size_t now = g_live.fetch_add(rounded, std::memory_order_relaxed) + rounded;
  raise_to(g_peak_live, now);
  raise_to(g_high_water, now);
}

void count_free(size_t rounded) { g_live.fetch_sub(rounded, std::memory_order_relaxed); }

// glibc's malloc raises its mmap threshold to the size of each mapped block
// it frees, after which blocks of up to 32 MiB come from its heap and stay
// resident after they are freed: a ZeRO-3 step, which makes and frees a
// gathered bucket per layer, took 2.7 times its arrays' peak in resident
// memory. A fixed threshold of kCacheMinBytes keeps blocks that size and
// larger mapped, and given back when freed (the cache above reuses them);
// set when the library is loaded, unless MALLOC_MMAP_THRESHOLD_ says
// otherwise. Another allocator (tcmalloc, jemalloc) ignores it.
bool fix_mmap_threshold(size_t bytes) {
#ifdef M_MMAP_THRESHOLD
  if (!std::getenv("MALLOC_MMAP_THRESHOLD_")) mallopt(M_MMAP_THRESHOLD, static_cast<int>(bytes));
#else
  (void)bytes;
#endif
  return true;
}
const bool mmap_threshold_fixed = fix_mmap_threshold(kCacheMinBytes);

// Blocks of 64 KiB to 1 MiB come from glibc's heaps (above: the mmap
// threshold is fixed, which also fixes the trim threshold at its 128 KiB
// default). A worker thread's blocks come from its own arena, and freeing
// one at that arena's top (the caller frees the result) gave the pages
// back at once, so each call met fresh pages: `np.zeros` of 84,000 int64
// spawned at 2 threads took 200-290 us a call, 15 us at 1 thread. Up to
// 4 MiB of freed top stays in each arena (kept resident: at most that much
// per arena more than before), unless MALLOC_TRIM_THRESHOLD_ says otherwise.
bool fix_trim_threshold(size_t bytes) {
#ifdef M_TRIM_THRESHOLD
  if (!std::getenv("MALLOC_TRIM_THRESHOLD_")) mallopt(M_TRIM_THRESHOLD, static_cast<int>(bytes));
#else
  (void)bytes;
#endif
  return true;
}
const bool trim_threshold_fixed = fix_trim_threshold(4 * kCacheMinBytes);

// Blocks of 2 MiB and more are mapped afresh (the mmap threshold above), so
// each first touch of a 4 KiB page faults: a 32 MB temporary took 8,192
// faults, costing as much as the arithmetic on it (the histogram kernel of
// bench_numpy_kernels: 18,500 faults a call, NumPy's 2,900). Transparent
// huge pages asked for on such a block (THP's usual mode is "madvise") make
// that 16 faults of 2 MiB, as NumPy asks for its own data of 4 MiB and
// more. No block is kept longer and none is larger, so the resident set
// stays as it was (a HAR training step's peak: 1,390 MB either way).
// TESSERA_HUGE_PAGES=0 turns the advice off.
constexpr size_t kHugePageMinBytes = size_t{2} << 20;

void* advise_huge_pages(void* p, size_t bytes) {
#ifdef MADV_HUGEPAGE
  if (p && bytes >= kHugePageMinBytes) {
    static const bool enabled = [] {
      const char* env = std::getenv("TESSERA_HUGE_PAGES");
      return !env || std::strcmp(env, "0") != 0;
    }();
    if (enabled) {
      const uintptr_t page = 4096;
      const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
      const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(page - 1);
      // Advice only: a kernel without THP refuses it, and the block works as before.
      if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
    }
  }
#else
  (void)bytes;
#endif
  return p;
}

struct BlockCache {
  std::mutex mutex;
  std::multimap<size_t, void*> free_blocks;
  size_t cached = 0;
  size_t limit = [] {
    const char* env = std::getenv("TESSERA_CACHE_BYTES");
    return env ? static_cast<size_t>(std::strtoull(env, nullptr, 10)) : size_t{2} << 30;
  }();
};

BlockCache& block_cache() {
  static BlockCache* c = new BlockCache();  // never destroyed: arrays may outlive statics
  return *c;
}

size_t rounded_size(size_t bytes) {
  size_t r = (std::max<size_t>(bytes, 1) + kAlignment - 1) / kAlignment * kAlignment;
  if (r >= kCacheMinBytes) r = (r + kCacheGranule - 1) / kCacheGranule * kCacheGranule;
  return r;
}

// Small blocks (up to 64 KiB) are kept per thread when freed, in
// power-of-two size classes: glibc's aligned allocation of anything above
// 1 KiB first consolidates its fast bins, hundreds of instructions per small
// array (a 4 KB all-reduce's result, a bias's gradient), where a class's free
// list is a pop. A thread keeps at most kSmallPerClass blocks per class
// (about 1 MiB in all); a block freed on another thread goes to that
// thread's lists. The lists are plain thread-local data; a thread-local
// Reaper frees them when the thread ends, after which the thread allocates
// directly.
constexpr size_t kSmallMaxBytes = size_t{64} << 10;
constexpr int kSmallClasses = 11;  // 64 B .. 64 KiB
constexpr int kSmallPerClass = 8;

// An array's Storage with its shared_ptr counts (HeaderAllocator below), of
// which a thread keeps more than of any buffer size: each array has one.
constexpr size_t kHeaderBytes = 64;
constexpr int kHeadersPerThread = 64;

// A number's buffer (a NumPy scalar: a 0-d array of at most 16 bytes) is a
// 16-byte block of malloc's, aligned as malloc aligns (16 bytes: enough for
// any load of the value) instead of a 64-byte aligned block: glibc's aligned
// allocation splits a chunk for each one, and a list of 100,000 appended
// np.float64 paid that and the consolidation of their frees. A thread keeps
// more of these than of the other classes.
constexpr size_t kTinyBytes = 16;
constexpr int kTinyPerThread = 256;

struct SmallCache {
  void* blocks[kSmallClasses][kSmallPerClass];
  int count[kSmallClasses];
  void* tiny[kTinyPerThread];
  int tiny_count;
  void* headers[kHeadersPerThread];
  int header_count;
  bool started, ended;
};
thread_local SmallCache tl_small{};  // trivially destructible: usable until the thread is gone

struct Reaper {
  ~Reaper() {
    for (int c = 0; c < kSmallClasses; ++c) {
      for (int k = 0; k < tl_small.count[c]; ++k) std::free(tl_small.blocks[c][k]);
      tl_small.count[c] = 0;
    }
    for (int k = 0; k < tl_small.header_count; ++k) std::free(tl_small.headers[k]);
    tl_small.header_count = 0;
    for (int k = 0; k < tl_small.tiny_count; ++k) std::free(tl_small.tiny[k]);
    tl_small.tiny_count = 0;
    tl_small.ended = true;
  }
};
thread_local Reaper tl_reaper;

int small_class(size_t rounded) {
  return rounded <= 64 ? 0 : static_cast<int>(std::bit_width(rounded - 1)) - 6;
}

void* small_alloc(size_t rounded) {
  int c = small_class(rounded);
  SmallCache& t = tl_small;
  if (t.count[c] > 0) return t.blocks[c][--t.count[c]];
  if (!t.started) {
    t.started = true;
    (void)&tl_reaper;  // constructed now: it frees the lists at the thread's end
  }
  return std::aligned_alloc(kAlignment, size_t{64} << c);
}

void small_free(void* p, size_t rounded) {
  int c = small_class(rounded);
  SmallCache& t = tl_small;
  if (t.started && !t.ended && t.count[c] < kSmallPerClass) {
    t.blocks[c][t.count[c]++] = p;
    return;
  }
  std::free(p);
}

// What memory_stats counts for a block: a number's 16 bytes as the 64 of
// the smallest class they replaced (the counts, and the cache's bound by
// them, are what they were).
size_t counted_bytes(size_t block) { return block == kTinyBytes ? kAlignment : block; }

void* tiny_alloc() {
  SmallCache& t = tl_small;
  if (t.tiny_count > 0) return t.tiny[--t.tiny_count];
  if (!t.started) {
    t.started = true;
    (void)&tl_reaper;
  }
  return std::malloc(kTinyBytes);
}

void tiny_free(void* p) {
  SmallCache& t = tl_small;
  if (t.started && !t.ended && t.tiny_count < kTinyPerThread) {
    t.tiny[t.tiny_count++] = p;
    return;
  }
  std::free(p);
}

void* header_alloc() {
  SmallCache& t = tl_small;
  if (t.header_count > 0) return t.headers[--t.header_count];
  if (!t.started) {
    t.started = true;
    (void)&tl_reaper;
  }
  return std::malloc(kHeaderBytes);
}

void header_free(void* p) {
  SmallCache& t = tl_small;
  if (t.started && !t.ended && t.header_count < kHeadersPerThread) {
    t.headers[t.header_count++] = p;
    return;
  }
  std::free(p);
}

void release_small_blocks() {
  SmallCache& t = tl_small;
  for (int c = 0; c < kSmallClasses; ++c) {
    for (int k = 0; k < t.count[c]; ++k) std::free(t.blocks[c][k]);
    t.count[c] = 0;
  }
  for (int k = 0; k < t.header_count; ++k) std::free(t.headers[k]);
  t.header_count = 0;
  for (int k = 0; k < t.tiny_count; ++k) std::free(t.tiny[k]);
  t.tiny_count = 0;
}

// The Storage of a new array and its shared_ptr's counts are one block of
// 64 bytes (allocate_shared); it comes from a per-thread list, as small
// buffers do, instead of glibc's malloc and free every time (which were a
// tenth of an operation's cost on 1,000 elements).

template <class T>
struct HeaderAllocator {
  using value_type = T;
  HeaderAllocator() = default;
  template <class U>
  HeaderAllocator(const HeaderAllocator<U>&) noexcept {}
  static constexpr bool pooled(size_t n) {
    return alignof(T) <= alignof(std::max_align_t) && n * sizeof(T) <= kHeaderBytes;
  }
  T* allocate(size_t n) {
    if (!pooled(n)) return static_cast<T*>(::operator new(n * sizeof(T)));
    void* p = header_alloc();
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (!pooled(n)) {
      ::operator delete(p);
      return;
    }
    header_free(p);
  }
  template <class U>
  bool operator==(const HeaderAllocator<U>&) const noexcept {
    return true;
  }
};

}  // namespace

MemoryStats memory_stats() {
  MemoryStats m;
  m.live = g_live.load(std::memory_order_relaxed);
  m.peak_live = g_peak_live.load(std::memory_order_relaxed);
  m.high_water = g_high_water.load(std::memory_order_relaxed);
  BlockCache& c = block_cache();
  std::lock_guard lock(c.mutex);
  m.cached = c.cached;
  m.cache_limit = c.limit;
  return m;
}

void reset_peak_memory() {
  g_peak_live.store(g_live.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

Storage::Storage(size_t bytes) : bytes_(bytes) {
  allocate(bytes <= kTinyBytes ? kTinyBytes : rounded_size(bytes));
  count_alloc(counted_bytes(block_));
}

void Storage::allocate(size_t rounded) {
  block_ = rounded;
  if (rounded == kTinyBytes) {  // (rounded_size gives 64 and more)
    data_ = tiny_alloc();
    if (!data_) throw MemoryError(error_message("[array] cannot allocate ", bytes_, " bytes"));
    return;
  }
  if (rounded <= kSmallMaxBytes) {
    data_ = small_alloc(rounded);
    if (!data_) {
      release_cached_blocks();
      data_ = small_alloc(rounded);
    }
    if (!data_) throw MemoryError(error_message("[array] cannot allocate ", bytes_, " bytes"));
    return;
  }
  if (rounded >= kCacheMinBytes) {
    BlockCache& c = block_cache();
    std::lock_guard lock(c.mutex);
    // The smallest cached block that fits, if it wastes at most an eighth:
    // shapes that differ a little (a convolution's output one step shorter
    // than its input) share blocks, so the cache holds about what is live
    // at the step's peak rather than the peak of every size.
    auto it = c.free_blocks.lower_bound(rounded);
    if (it != c.free_blocks.end() && it->first <= rounded + rounded / 8) {
      // Of the blocks of that size, the one freed last: the likeliest to be
      // in cache still (a step's temporaries are freed and asked for again in
      // turn). The first freed, as a multimap gives it, had a 12.8 MB
      // convolution output written to memory evicted long before: 1.14 ms
      // instead of 0.53 (the ResNet's first convolution, called in a loop
      // with eight older results cached).
      it = std::prev(c.free_blocks.upper_bound(it->first));
      block_ = it->first;
      data_ = it->second;
      c.cached -= block_;
      c.free_blocks.erase(it);
      return;
    }
    // Kept blocks that would lift live + kept + this request above the
    // high-water mark go back to malloc, which can serve this request
    // from them.
    const size_t live = g_live.load(std::memory_order_relaxed);
    const size_t bound = std::max(g_high_water.load(std::memory_order_relaxed), live + rounded);
    while (c.cached > 0 && live + c.cached + rounded > bound) {
      auto largest = std::prev(c.free_blocks.end());
      std::free(largest->second);
      c.cached -= largest->first;
      c.free_blocks.erase(largest);
    }
  }
  auto get = [rounded] { return advise_huge_pages(std::aligned_alloc(kAlignment, rounded), rounded); };
  data_ = get();
  if (!data_) {
    // Cached blocks may be what stands in the way: give them back and retry.
    release_cached_blocks();
    data_ = get();
  }
  if (!data_) {
    throw MemoryError(error_message("[array] cannot allocate ", bytes_, " bytes"));
  }
}

void release_cached_blocks() {
  release_small_blocks();  // the calling thread's
  BlockCache& c = block_cache();
  std::lock_guard lock(c.mutex);
  for (auto& [size, p] : c.free_blocks) std::free(p);
  c.free_blocks.clear();
  c.cached = 0;
}

Storage::Storage(void* data, size_t bytes, std::shared_ptr<void> owner)
    : data_(data), bytes_(bytes), owned_(false), owner_(std::move(owner)) {}

Storage::~Storage() {
  if (!owned_) return;
  const size_t rounded = block_;
  count_free(counted_bytes(rounded));
  if (rounded == kTinyBytes) {
    tiny_free(data_);
    return;
  }
  if (rounded <= kSmallMaxBytes) {
    small_free(data_, rounded);
    return;
  }
  if (rounded >= kCacheMinBytes) {
    BlockCache& c = block_cache();
    std::lock_guard lock(c.mutex);
    const size_t live = g_live.load(std::memory_order_relaxed);  // without this block
    if (c.cached + rounded <= c.limit &&
        live + c.cached + rounded <= g_high_water.load(std::memory_order_relaxed)) {
      c.free_blocks.emplace(rounded, data_);
      c.cached += rounded;
      return;
    }
  }
  std::free(data_);
}

Array::Array() : Array(DType::float64, {}) { *data<double>() = 0.0; }

Array::Array(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  size_ = shape_size(shape_);
  storage_ = std::allocate_shared<Storage>(HeaderAllocator<Storage>(),
                                          static_cast<size_t>(size_) * dtype_size(dtype_));
}

Array Array::wrap(DType dtype, Shape shape, void* data, std::shared_ptr<void> owner) {
  Array a;
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  a.size_ = shape_size(a.shape_);
  a.storage_ = std::make_shared<Storage>(data, a.nbytes(), std::move(owner));
  return a;
}

Array Array::wrap_strided(DType dtype, Shape shape, std::vector<int64_t> strides, void* data,
                          int64_t lowest, int64_t highest, bool writable,
                          std::shared_ptr<void> owner) {
  const int64_t es = static_cast<int64_t>(dtype_size(dtype));
  Array a{NoStorage{}};
  a.dtype_ = dtype;
  a.shape_ = std::move(shape);
  a.size_ = shape_size(a.shape_);
  // The storage spans the extreme elements; the view starts `-lowest`
  // elements into it.
  char* start = static_cast<char*>(data) + lowest * es;
  a.storage_ = std::make_shared<Storage>(start, static_cast<size_t>((highest - lowest + 1) * es),
                                         std::move(owner));
  a.offset_ = -lowest;
  a.readonly_ = !writable;
  if (strides != contiguous_strides(a.shape_)) a.strides_ = std::move(strides);
  a.normalize_strides();
  return a;
}

Array Array::view(const Array& base, Shape shape, std::vector<int64_t> strides, int64_t offset,
                  bool readonly) {
  Array a{NoStorage{}};
  a.dtype_ = base.dtype_;
  a.shape_ = std::move(shape);
  a.size_ = shape_size(a.shape_);
  a.storage_ = base.storage_;
  a.offset_ = offset;
  a.readonly_ = base.readonly_ || readonly;
  a.strides_ = std::move(strides);
  a.normalize_strides();
  return a;
}

Array Array::weak_complex(std::complex<double> v) {
  Array a(DType::complex128, {});
  *a.data<std::complex<double>>() = v;
  a.weak_ = true;
  return a;
}

Array Array::complex_part_view(const Array& z, int part) {
  Array a{NoStorage{}};
  a.dtype_ = z.dtype_ == DType::complex64 ? DType::float32 : DType::float64;
  a.shape_ = z.shape_;
  a.size_ = z.size_;
  a.storage_ = z.storage_;
  // Two floats per complex element: offsets and strides in floats double.
  a.offset_ = 2 * z.offset_ + part;
  a.readonly_ = z.readonly_;
  a.strides_ = z.strides();
  for (int64_t& st : a.strides_) st *= 2;
  a.normalize_strides();
  return a;
}

void Array::normalize_strides() {
  if (strides_.empty()) return;
  // C-contiguous when every axis of extent > 1 has C order's stride (the
  // strides of extent-1 axes never matter), or when there are no elements.
  bool contiguous = true;
  int64_t expect = 1;
  for (int k = ndim() - 1; k >= 0; --k) {
    if (shape_[k] == 0) {
      contiguous = true;
      break;
    }
    if (shape_[k] != 1 && strides_[k] != expect) contiguous = false;
    expect *= shape_[k];
  }
  if (contiguous) strides_.clear();
}

std::vector<int64_t> Array::strides() const {
  return strides_.empty() ? contiguous_strides(shape_) : strides_;
}

void Array::contiguity_error() const {
  throw std::logic_error(error_message(
      "[array] internal error: a strided view of shape ", shape_str(shape_),
      " reached code that needs a contiguous array (it must be packed with contiguous() first)"));
}

int64_t Array::flat_offset(int64_t i) const {
  if (strides_.empty()) return i;
  int64_t off = 0;
  for (int k = ndim() - 1; k >= 0; --k) {
    off += (i % shape_[k]) * strides_[k];
    i /= shape_[k];
  }
  return off;
}

bool Array::may_overlap(const Array& other) const {
  if (storage_ != other.storage_ || size_ == 0 || other.size_ == 0) return false;
  auto extent = [](const Array& a, int64_t& lo, int64_t& hi) {
    lo = hi = a.offset_;
    std::vector<int64_t> st = a.strides();
    for (int k = 0; k < a.ndim(); ++k) {
      const int64_t span = (a.shape_[k] - 1) * st[k];
      (span < 0 ? lo : hi) += span;
    }
  };
  int64_t lo1, hi1, lo2, hi2;
  extent(*this, lo1, hi1);
  extent(other, lo2, hi2);
  return lo1 <= hi2 && lo2 <= hi1;
}

namespace {

// Calls f(src_offset, dst_offset) for every element of `shape` in C order,
// with offsets (in elements) through the two stride vectors; the innermost
// axis runs as a plain loop.
template <class F>
void walk_two(const Shape& shape, const std::vector<int64_t>& s1, const std::vector<int64_t>& s2,
              F&& f) {
  const int nd = static_cast<int>(shape.size());
  for (int64_t d : shape) {
    if (d == 0) return;
  }
  if (nd == 0) {
    f(0, 0);
    return;
  }
  std::vector<int64_t> idx(nd, 0);
  int64_t o1 = 0, o2 = 0;
  const int64_t n = shape[nd - 1], st1 = s1[nd - 1], st2 = s2[nd - 1];
  while (true) {
    // Unit and zero inner strides get loops of their own, which the compiler
    // vectorises once f is inlined (a copy into a slice, a fill).
    if (st1 == 1 && st2 == 1) {
      for (int64_t i = 0; i < n; ++i) f(o1 + i, o2 + i);
    } else if (st1 == 0 && st2 == 1) {
      for (int64_t i = 0; i < n; ++i) f(o1, o2 + i);
    } else {
      for (int64_t i = 0; i < n; ++i) f(o1 + i * st1, o2 + i * st2);
    }
    int k = nd - 2;
    for (; k >= 0; --k) {
      o1 += s1[k];
      o2 += s2[k];
      if (++idx[k] < shape[k]) break;
      o1 -= s1[k] * shape[k];
      o2 -= s2[k] * shape[k];
      idx[k] = 0;
    }
    if (k < 0) return;
  }
}

}  // namespace

Array Array::scalar(double v, DType dtype) { return full(dtype, {}, v); }
Array Array::scalar_int(int64_t v) {
  Array a(DType::int64, {});
  *a.data<int64_t>() = v;
  return a;
}
Array Array::scalar_bool(bool v) {
  Array a(DType::bool_, {});
  *a.data<bool>() = v;
  return a;
}

Array Array::full(DType dtype, Shape shape, double value) {
  Array a(dtype, std::move(shape));
  dispatch_all(dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::fill_n(a.data<T>(), a.size(), element_cast<T>(value));
  });
  return a;
}

Array Array::copy() const {
  Array a(dtype_, shape_);
  if (!nbytes()) return a;
  if (strides_.empty()) {
    std::memcpy(a.raw(), origin_raw(), nbytes());
    return a;
  }
  a.assign(*this);
  return a;
}

Array Array::reshaped(Shape shape) const {
  Array a = contiguous();
  a.shape_ = std::move(shape);
  return a;
}

Array Array::astype(DType dtype) const {
  if (dtype == dtype_) return *this;
  Array out(dtype, shape_);
  out.assign(*this);
  return out;
}

void Array::assign(const Array& src0) {
  // NumPy reads all of the value before it writes when the two overlap.
  const Array src = src0.may_overlap(*this) ? src0.copy() : src0;
  // The value broadcast to this shape: stretched axes get stride 0.
  std::vector<int64_t> sst(ndim(), 0);
  const std::vector<int64_t> src_strides = src.strides();
  const int lead = ndim() - src.ndim();
  for (int k = 0; k < src.ndim(); ++k) {
    if (src.shape_[k] != 1) sst[lead + k] = src_strides[k];
  }
  const std::vector<int64_t> dst_strides = strides();
  dispatch_all(src.dtype_, [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    dispatch_all(dtype_, [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* sp = src.origin<From>();
      To* dp = origin<To>();
      if (src.size_ == 1) {
        // One value everywhere (`x[i * i::i] = False`): converted once and
        // held in a register, a tight store loop (through `sp` the compiler
        // reloaded it at each element: both pointers may alias).
        const To v = element_cast<To>(sp[0]);
        if (strides_.empty()) {
          std::fill_n(dp, size_, v);
        } else {
          walk_two(shape_, sst, dst_strides, [dp, v](int64_t, int64_t d) { dp[d] = v; });
        }
        return;
      }
      if (strides_.empty() && src.strides_.empty() && src.size_ == size_) {
        for (int64_t i = 0; i < size_; ++i) dp[i] = element_cast<To>(sp[i]);
        return;
      }
      walk_two(shape_, sst, dst_strides,
               [&](int64_t so, int64_t d) { dp[d] = element_cast<To>(sp[so]); });
    });
  });
}

double Array::get_double(int64_t i) const {
  const int64_t o = flat_offset(i);
  return dispatch_all(dtype_, [&](auto tag) -> double {
    using T = typename decltype(tag)::type;
    return element_cast<double>(origin<T>()[o]);
  });
}

int64_t Array::get_int(int64_t i) const {
  const int64_t o = flat_offset(i);
  return dispatch_all(dtype_, [&](auto tag) -> int64_t {
    using T = typename decltype(tag)::type;
    return element_cast<int64_t>(origin<T>()[o]);
  });
}

std::complex<double> Array::get_complex(int64_t i) const {
  const int64_t o = flat_offset(i);
  return dispatch_all(dtype_, [&](auto tag) -> std::complex<double> {
    using T = typename decltype(tag)::type;
    return element_cast<std::complex<double>>(origin<T>()[o]);
  });
}

bool Array::get_bool(int64_t i) const {
  const int64_t o = flat_offset(i);
  return dispatch_all(dtype_, [&](auto tag) -> bool {
    using T = typename decltype(tag)::type;
    return element_cast<bool>(origin<T>()[o]);
  });
}

}  // namespace tessera
