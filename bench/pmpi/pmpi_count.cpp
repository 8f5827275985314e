// pmpi_count: a PMPI interposer that counts, per rank, the messages and bytes an MPI program
// sends, plus the regular files it opens and the bytes it reads from them.
//
// Preload it into every rank:
//   mpirun -n 8 -x LD_PRELOAD=build/bench/libpmpi_count.so -x PMPI_COUNT_OUT=/tmp/counts.jsonl ...
// At MPI_Finalize each rank appends one JSON line to $PMPI_COUNT_OUT (one write(2) of the whole
// line on an O_APPEND descriptor, so lines of different ranks never interleave). A "%r" in the
// name is replaced by the rank; such a per-rank file is written to a temporary and renamed into
// place.
//
// What is counted (see docs/scaling.md, "Measuring"):
//   - point-to-point: every MPI_Send/Bsend/Ssend/Rsend/Isend/Ibsend/Issend/Irsend is one message of
//     count*size(type) bytes; MPI_Sendrecv(_replace) one message; MPI_Start/Startall of a
//     persistent send request (made by MPI_Send_init/Bsend_init/Ssend_init/Rsend_init) one
//     message each.
//   - collectives: the call (calls["MPI_Iallreduce"] etc.) and the messages and bytes this rank
//     sends in a fixed textbook model of the collective, whatever the MPI library chooses:
//       all-reduce      recursive doubling           ceil(log2 N) messages of n bytes
//       all-gather(v)   recursive doubling           ceil(log2 N) messages, total - own bytes
//       reduce-scatter  recursive halving            ceil(log2 N) messages, total - own bytes
//       broadcast       binomial tree                one message of n bytes per child
//       reduce          binomial tree                one message of n bytes to the parent
//       alltoall(v)     pairwise                     one message per other rank (nonzero count)
//       gather(v)       direct                       non-roots: one message of their bytes
//       scatter(v)      direct                       root: one message per other rank
//       barrier         dissemination                ceil(log2 N) messages of 0 bytes
//     "msgs"/"bytes" are the point-to-point plus the modelled collective counts; the parts are
//     reported separately as p2p_* and coll_*, and per communicator name ("by_comm": the name
//     MPI_Comm_set_name gave, e.g. tessera's "tessera.data" and "tessera.round"; "MPI_COMM_WORLD";
//     "" for unnamed ones).
//   - files: open/open64/openat/openat64/fopen/fopen64 of a path (under $PMPI_COUNT_PATH when set),
//     and read/pread/pread64/readv/preadv bytes on descriptors so opened (libstdc++ streams read
//     through read(2), Python's os.readv through readv(2)); a name relative to a folder's
//     descriptor is counted by the opened file's own path (/proc/self/fd).
//
// MPI_Pcontrol(0) pauses counting, MPI_Pcontrol(1) resumes it, MPI_Pcontrol(2) zeroes every
// counter and resumes, and MPI_Pcontrol(3, "label") records the counts so far under the label
// (the line's "segments" list, in order): a program (or Python, through
// ctypes.CDLL(None).MPI_Pcontrol) brackets the parts it wants measured. PMPI_COUNT_START=0 starts
// paused.
#include <mpi.h>

#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace {

using Counter = std::atomic<std::uint64_t>;

enum Call : int {
  kSend,
  kBsend,
  kSsend,
  kRsend,
  kIsend,
  kIbsend,
  kIssend,
  kIrsend,
  kSendrecv,
  kSendrecvReplace,
  kStart,
  kAllreduce,
  kIallreduce,
  kAllgather,
  kIallgather,
  kAllgatherv,
  kIallgatherv,
  kBcast,
  kIbcast,
  kReduce,
  kIreduce,
  kReduceScatter,
  kIreduceScatter,
  kReduceScatterBlock,
  kIreduceScatterBlock,
  kAlltoall,
  kIalltoall,
  kAlltoallv,
  kIalltoallv,
  kGather,
  kIgather,
  kGatherv,
  kIgatherv,
  kScatter,
  kIscatter,
  kScatterv,
  kIscatterv,
  kBarrier,
  kIbarrier,
  kCallCount
};

const char* const kCallNames[kCallCount] = {
    "MPI_Send",           "MPI_Bsend",           "MPI_Ssend",          "MPI_Rsend",
    "MPI_Isend",          "MPI_Ibsend",          "MPI_Issend",         "MPI_Irsend",
    "MPI_Sendrecv",       "MPI_Sendrecv_replace", "MPI_Start",         "MPI_Allreduce",
    "MPI_Iallreduce",     "MPI_Allgather",       "MPI_Iallgather",     "MPI_Allgatherv",
    "MPI_Iallgatherv",    "MPI_Bcast",           "MPI_Ibcast",         "MPI_Reduce",
    "MPI_Ireduce",        "MPI_Reduce_scatter",  "MPI_Ireduce_scatter", "MPI_Reduce_scatter_block",
    "MPI_Ireduce_scatter_block", "MPI_Alltoall", "MPI_Ialltoall",      "MPI_Alltoallv",
    "MPI_Ialltoallv",     "MPI_Gather",          "MPI_Igather",        "MPI_Gatherv",
    "MPI_Igatherv",       "MPI_Scatter",         "MPI_Iscatter",       "MPI_Scatterv",
    "MPI_Iscatterv",      "MPI_Barrier",         "MPI_Ibarrier"};

struct Counts {
  Counter p2p_msgs{0}, p2p_bytes{0}, coll_msgs{0}, coll_bytes{0};
  Counter file_opens{0}, read_calls{0}, read_bytes{0};
  Counter calls[kCallCount] = {};
};

Counts g_counts;
std::atomic<bool> g_enabled{true};
std::once_flag g_env_once;
std::string g_path_prefix;  // count only files under this prefix when not empty

// Descriptors opened by a counted open; reads on them are counted.
constexpr int kMaxFd = 1 << 16;
std::atomic<bool> g_tracked_fd[kMaxFd];

// Persistent send requests: request -> bytes of the message each start sends.
std::mutex g_persist_mu;
std::unordered_map<MPI_Request, std::pair<std::uint64_t, MPI_Comm>>& persistent() {
  static auto* m = new std::unordered_map<MPI_Request, std::pair<std::uint64_t, MPI_Comm>>;
  return *m;
}

void read_env() {
  std::call_once(g_env_once, [] {
    if (const char* s = getenv("PMPI_COUNT_START"); s && strcmp(s, "0") == 0) g_enabled = false;
    if (const char* p = getenv("PMPI_COUNT_PATH")) g_path_prefix = p;
  });
}

struct EnvAtLoad {
  EnvAtLoad() { read_env(); }
} g_env_at_load;

bool on() { return g_enabled.load(std::memory_order_relaxed); }

void add(Counter& c, std::uint64_t v) { c.fetch_add(v, std::memory_order_relaxed); }

std::uint64_t type_bytes(int count, MPI_Datatype t) {
  if (count <= 0 || t == MPI_DATATYPE_NULL) return 0;
  int size = 0;
  PMPI_Type_size(t, &size);
  return static_cast<std::uint64_t>(count) * static_cast<std::uint64_t>(size > 0 ? size : 0);
}

int comm_size(MPI_Comm c) {
  int n = 1;
  int inter = 0;
  PMPI_Comm_test_inter(c, &inter);
  if (inter) PMPI_Comm_remote_size(c, &n);
  else PMPI_Comm_size(c, &n);
  return n;
}

int comm_rank(MPI_Comm c) {
  int r = 0;
  PMPI_Comm_rank(c, &r);
  return r;
}

std::uint64_t ceil_log2(int n) {
  std::uint64_t l = 0;
  while ((1LL << l) < n) ++l;
  return l;
}

// Messages and bytes per communicator name (the first kMaxNames names seen; later ones: "other").
constexpr int kMaxNames = 32;
struct NameCount {
  std::string name;
  std::uint64_t msgs = 0, bytes = 0;
};
std::mutex g_names_mu;
NameCount g_names[kMaxNames + 1];
int g_name_count = 0;

void by_comm(MPI_Comm c, std::uint64_t msgs, std::uint64_t bytes) {
  char name[MPI_MAX_OBJECT_NAME] = {};
  int len = 0;
  if (c != MPI_COMM_NULL) PMPI_Comm_get_name(c, name, &len);
  std::lock_guard<std::mutex> lock(g_names_mu);
  int i = 0;
  while (i < g_name_count && g_names[i].name != name) ++i;
  if (i == g_name_count) {
    if (g_name_count < kMaxNames) {
      g_names[g_name_count++].name = name;
    } else {
      i = kMaxNames;
      g_names[i].name = "other";
    }
  }
  g_names[i].msgs += msgs;
  g_names[i].bytes += bytes;
}

void p2p(Call call, int count, MPI_Datatype t, MPI_Comm c) {
  if (!on()) return;
  add(g_counts.calls[call], 1);
  add(g_counts.p2p_msgs, 1);
  add(g_counts.p2p_bytes, type_bytes(count, t));
  by_comm(c, 1, type_bytes(count, t));
}

void coll(Call call, std::uint64_t msgs, std::uint64_t bytes, MPI_Comm c) {
  if (!on()) return;
  add(g_counts.calls[call], 1);
  add(g_counts.coll_msgs, msgs);
  add(g_counts.coll_bytes, bytes);
  by_comm(c, msgs, bytes);
}

// Recursive doubling: ceil(log2 N) messages, each of the whole buffer.
void allreduce_model(Call call, int count, MPI_Datatype t, MPI_Comm c) {
  const std::uint64_t l = ceil_log2(comm_size(c));
  coll(call, l, l * type_bytes(count, t), c);
}

// Recursive doubling all-gather / recursive halving reduce-scatter: ceil(log2 N) messages
// carrying everything but the rank's own part in total.
void log_model(Call call, std::uint64_t others_bytes, MPI_Comm c) {
  const int n = comm_size(c);
  coll(call, n > 1 ? ceil_log2(n) : 0, n > 1 ? others_bytes : 0, c);
}

// Binomial broadcast: a message to every child of the rank in the tree rooted at root.
void bcast_model(Call call, int count, MPI_Datatype t, int root, MPI_Comm c) {
  const int n = comm_size(c);
  const int v = (comm_rank(c) - root + n) % n;
  std::uint64_t children = 0;
  for (long long step = 1; step < n; step <<= 1)
    if (v < step && v + step < n) ++children;
  coll(call, children, children * type_bytes(count, t), c);
}

// Binomial reduce: one message to the parent (none at the root).
void reduce_model(Call call, int count, MPI_Datatype t, int root, MPI_Comm c) {
  const int n = comm_size(c);
  const bool root_rank = comm_rank(c) == root;
  coll(call, root_rank || n == 1 ? 0 : 1, root_rank || n == 1 ? 0 : type_bytes(count, t), c);
}

void alltoall_model(Call call, int count, MPI_Datatype t, MPI_Comm c) {
  const int n = comm_size(c);
  const std::uint64_t msgs = count > 0 ? static_cast<std::uint64_t>(n - 1) : 0;
  coll(call, msgs, msgs * type_bytes(count, t), c);
}

void alltoallv_model(Call call, const int* counts, MPI_Datatype t, MPI_Comm c) {
  const int n = comm_size(c);
  const int me = comm_rank(c);
  std::uint64_t msgs = 0, bytes = 0;
  for (int i = 0; i < n; ++i) {
    if (i == me || counts[i] <= 0) continue;
    ++msgs;
    bytes += type_bytes(counts[i], t);
  }
  coll(call, msgs, bytes, c);
}

void to_root_model(Call call, int count, MPI_Datatype t, int root, MPI_Comm c) {
  const bool root_rank = comm_rank(c) == root;
  coll(call, root_rank ? 0 : 1, root_rank ? 0 : type_bytes(count, t), c);
}

void from_root_model(Call call, const int* counts, int count, MPI_Datatype t, int root,
                     MPI_Comm c) {
  if (comm_rank(c) != root) {
    coll(call, 0, 0, c);
    return;
  }
  const int n = comm_size(c);
  std::uint64_t msgs = 0, bytes = 0;
  for (int i = 0; i < n; ++i) {
    if (i == root) continue;
    const int k = counts ? counts[i] : count;
    ++msgs;
    bytes += type_bytes(k, t);
  }
  coll(call, msgs, bytes, c);
}

std::uint64_t sum_counts(const int* counts, int n, int skip, MPI_Datatype t) {
  std::uint64_t b = 0;
  for (int i = 0; i < n; ++i)
    if (i != skip) b += type_bytes(counts[i], t);
  return b;
}

void remember_persistent(MPI_Request r, int count, MPI_Datatype t, MPI_Comm c) {
  std::lock_guard<std::mutex> lock(g_persist_mu);
  persistent()[r] = {type_bytes(count, t), c};
}

void start_one(MPI_Request r) {
  if (!on()) return;
  std::uint64_t bytes = 0;
  MPI_Comm c = MPI_COMM_NULL;
  {
    std::lock_guard<std::mutex> lock(g_persist_mu);
    auto it = persistent().find(r);
    if (it == persistent().end()) return;  // a receive
    bytes = it->second.first;
    c = it->second.second;
  }
  add(g_counts.calls[kStart], 1);
  add(g_counts.p2p_msgs, 1);
  add(g_counts.p2p_bytes, bytes);
  by_comm(c, 1, bytes);
}

// ---- files ----

template <typename F>
F next(const char* name) {
  return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

bool counted_path(const char* path) {
  if (!path) return false;
  if (g_path_prefix.empty()) return true;
  std::string p(path);
  if (p[0] != '/') {
    char cwd[4096];
    if (getcwd(cwd, sizeof cwd)) p = std::string(cwd) + "/" + p;
  }
  return p.compare(0, g_path_prefix.size(), g_path_prefix) == 0;
}

void opened(int fd, const char* path) {
  if (fd < 0 || fd >= kMaxFd) return;
  struct stat st;
  const bool regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  // a name relative to a folder's descriptor (openat): the file's own path
  char real[4096];
  if (regular && path && path[0] != '/' && !g_path_prefix.empty()) {
    const std::string link = "/proc/self/fd/" + std::to_string(fd);
    const ssize_t k = readlink(link.c_str(), real, sizeof real - 1);
    if (k > 0) {
      real[k] = '\0';
      path = real;
    }
  }
  const bool track = regular && counted_path(path);
  g_tracked_fd[fd].store(track, std::memory_order_relaxed);
  if (track && on()) add(g_counts.file_opens, 1);
}

void did_read(int fd, ssize_t n) {
  if (n < 0 || fd < 0 || fd >= kMaxFd || !on()) return;
  if (!g_tracked_fd[fd].load(std::memory_order_relaxed)) return;
  add(g_counts.read_calls, 1);
  add(g_counts.read_bytes, static_cast<std::uint64_t>(n));
}

bool needs_mode(int flags) {
#ifdef O_TMPFILE
  if ((flags & O_TMPFILE) == O_TMPFILE) return true;
#endif
  return (flags & O_CREAT) != 0;
}

// `mode`, the mode argument of an open-like call whose last named argument
// is `flags`: read only when the flags create a file (va_start must run in
// the variadic function itself, hence a macro).
#define PMPI_COUNT_MODE(flags, mode)                 \
  mode_t mode = 0;                                   \
  if (needs_mode(flags)) {                           \
    va_list ap;                                      \
    va_start(ap, flags);                             \
    mode = static_cast<mode_t>(va_arg(ap, int));     \
    va_end(ap);                                      \
  }

// ---- output ----

void append_json(std::string& s, const char* key, std::uint64_t v, bool comma = true) {
  s += '"';
  s += key;
  s += "\":";
  s += std::to_string(v);
  if (comma) s += ',';
}

std::string json_label(const char* label) {
  std::string s = "\"";
  for (const char* p = label; p && *p; ++p) {
    const unsigned char c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\') s += '\\';
    if (c >= 0x20) s += static_cast<char>(c);
  }
  return s + "\"";
}

std::mutex g_segments_mu;
std::string g_segments;  // the JSON objects recorded by MPI_Pcontrol(3, label), comma-separated

std::string counts_json() {
  auto get = [](const Counter& c) { return c.load(std::memory_order_relaxed); };
  std::string s;
  append_json(s, "msgs", get(g_counts.p2p_msgs) + get(g_counts.coll_msgs));
  append_json(s, "bytes", get(g_counts.p2p_bytes) + get(g_counts.coll_bytes));
  append_json(s, "p2p_msgs", get(g_counts.p2p_msgs));
  append_json(s, "p2p_bytes", get(g_counts.p2p_bytes));
  append_json(s, "coll_msgs", get(g_counts.coll_msgs));
  append_json(s, "coll_bytes", get(g_counts.coll_bytes));
  append_json(s, "file_opens", get(g_counts.file_opens));
  append_json(s, "read_calls", get(g_counts.read_calls));
  append_json(s, "read_bytes", get(g_counts.read_bytes));
  {
    std::lock_guard<std::mutex> lock(g_names_mu);
    s += "\"by_comm\":{";
    bool first = true;
    for (int i = 0; i <= kMaxNames; ++i) {
      const NameCount& nc = g_names[i];
      if (i == kMaxNames ? nc.name.empty() : i >= g_name_count) continue;
      if (!first) s += ',';
      first = false;
      s += json_label(nc.name.c_str()) + ":{";
      append_json(s, "msgs", nc.msgs);
      append_json(s, "bytes", nc.bytes, false);
      s += '}';
    }
    s += "},";
  }
  s += "\"calls\":{";
  bool first = true;
  for (int i = 0; i < kCallCount; ++i) {
    const std::uint64_t v = get(g_counts.calls[i]);
    if (!v) continue;
    if (!first) s += ',';
    first = false;
    append_json(s, kCallNames[i], v, false);
  }
  s += "}";
  return s;
}


std::string json_line(int rank, int size) {
  std::string s = "{";
  append_json(s, "rank", static_cast<std::uint64_t>(rank));
  append_json(s, "size", static_cast<std::uint64_t>(size));
  s += counts_json();
  std::lock_guard<std::mutex> lock(g_segments_mu);
  s += ",\"segments\":[" + g_segments + "]}\n";
  return s;
}

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t w = ::write(fd, s.data() + done, s.size() - done);
    if (w < 0) return false;
    done += static_cast<size_t>(w);
  }
  return true;
}

void write_counts() {
  const char* out = getenv("PMPI_COUNT_OUT");
  if (!out || !*out) return;
  int rank = 0, size = 1;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string line = json_line(rank, size);
  std::string path(out);
  using OpenFn = int (*)(const char*, int, ...);
  static OpenFn real_open = next<OpenFn>("open");
  if (const size_t at = path.find("%r"); at != std::string::npos) {
    path.replace(at, 2, std::to_string(rank));
    const std::string tmp = path + ".tmp." + std::to_string(getpid());
    const int fd = real_open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    const bool ok = fd >= 0 && write_all(fd, line);
    if (fd >= 0) close(fd);
    if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
      unlink(tmp.c_str());
      fprintf(stderr, "[pmpi_count] cannot write the counts: rank %d (PMPI_COUNT_OUT=%s)\n", rank,
              out);
    }
    return;
  }
  const int fd = real_open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || !write_all(fd, line))
    fprintf(stderr, "[pmpi_count] cannot append the counts: rank %d (PMPI_COUNT_OUT=%s)\n", rank,
            out);
  if (fd >= 0) close(fd);
}

}  // namespace

extern "C" {

// ---- point-to-point ----

int MPI_Send(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c) {
  p2p(kSend, n, t, c);
  return PMPI_Send(b, n, t, to, tag, c);
}
int MPI_Bsend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c) {
  p2p(kBsend, n, t, c);
  return PMPI_Bsend(b, n, t, to, tag, c);
}
int MPI_Ssend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c) {
  p2p(kSsend, n, t, c);
  return PMPI_Ssend(b, n, t, to, tag, c);
}
int MPI_Rsend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c) {
  p2p(kRsend, n, t, c);
  return PMPI_Rsend(b, n, t, to, tag, c);
}
int MPI_Isend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request* r) {
  p2p(kIsend, n, t, c);
  return PMPI_Isend(b, n, t, to, tag, c, r);
}
int MPI_Ibsend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request* r) {
  p2p(kIbsend, n, t, c);
  return PMPI_Ibsend(b, n, t, to, tag, c, r);
}
int MPI_Issend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request* r) {
  p2p(kIssend, n, t, c);
  return PMPI_Issend(b, n, t, to, tag, c, r);
}
int MPI_Irsend(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c, MPI_Request* r) {
  p2p(kIrsend, n, t, c);
  return PMPI_Irsend(b, n, t, to, tag, c, r);
}
int MPI_Sendrecv(const void* sb, int sn, MPI_Datatype st, int to, int stag, void* rb, int rn,
                 MPI_Datatype rt, int from, int rtag, MPI_Comm c, MPI_Status* s) {
  p2p(kSendrecv, sn, st, c);
  return PMPI_Sendrecv(sb, sn, st, to, stag, rb, rn, rt, from, rtag, c, s);
}
int MPI_Sendrecv_replace(void* b, int n, MPI_Datatype t, int to, int stag, int from, int rtag,
                         MPI_Comm c, MPI_Status* s) {
  p2p(kSendrecvReplace, n, t, c);
  return PMPI_Sendrecv_replace(b, n, t, to, stag, from, rtag, c, s);
}

int MPI_Send_init(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c,
                  MPI_Request* r) {
  const int rc = PMPI_Send_init(b, n, t, to, tag, c, r);
  if (rc == MPI_SUCCESS) remember_persistent(*r, n, t, c);
  return rc;
}
int MPI_Bsend_init(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c,
                   MPI_Request* r) {
  const int rc = PMPI_Bsend_init(b, n, t, to, tag, c, r);
  if (rc == MPI_SUCCESS) remember_persistent(*r, n, t, c);
  return rc;
}
int MPI_Ssend_init(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c,
                   MPI_Request* r) {
  const int rc = PMPI_Ssend_init(b, n, t, to, tag, c, r);
  if (rc == MPI_SUCCESS) remember_persistent(*r, n, t, c);
  return rc;
}
int MPI_Rsend_init(const void* b, int n, MPI_Datatype t, int to, int tag, MPI_Comm c,
                   MPI_Request* r) {
  const int rc = PMPI_Rsend_init(b, n, t, to, tag, c, r);
  if (rc == MPI_SUCCESS) remember_persistent(*r, n, t, c);
  return rc;
}
int MPI_Start(MPI_Request* r) {
  start_one(*r);
  return PMPI_Start(r);
}
int MPI_Startall(int n, MPI_Request* rs) {
  for (int i = 0; i < n; ++i) start_one(rs[i]);
  return PMPI_Startall(n, rs);
}
int MPI_Request_free(MPI_Request* r) {
  {
    std::lock_guard<std::mutex> lock(g_persist_mu);
    persistent().erase(*r);
  }
  return PMPI_Request_free(r);
}

// ---- collectives ----

int MPI_Allreduce(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c) {
  allreduce_model(kAllreduce, n, t, c);
  return PMPI_Allreduce(sb, rb, n, t, op, c);
}
int MPI_Iallreduce(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, MPI_Comm c,
                   MPI_Request* r) {
  allreduce_model(kIallreduce, n, t, c);
  return PMPI_Iallreduce(sb, rb, n, t, op, c, r);
}
int MPI_Allgather(const void* sb, int sn, MPI_Datatype st, void* rb, int rn, MPI_Datatype rt,
                  MPI_Comm c) {
  const std::uint64_t own = sb == MPI_IN_PLACE ? type_bytes(rn, rt) : type_bytes(sn, st);
  log_model(kAllgather, own * static_cast<std::uint64_t>(comm_size(c) - 1), c);
  return PMPI_Allgather(sb, sn, st, rb, rn, rt, c);
}
int MPI_Iallgather(const void* sb, int sn, MPI_Datatype st, void* rb, int rn, MPI_Datatype rt,
                   MPI_Comm c, MPI_Request* r) {
  const std::uint64_t own = sb == MPI_IN_PLACE ? type_bytes(rn, rt) : type_bytes(sn, st);
  log_model(kIallgather, own * static_cast<std::uint64_t>(comm_size(c) - 1), c);
  return PMPI_Iallgather(sb, sn, st, rb, rn, rt, c, r);
}
int MPI_Allgatherv(const void* sb, int sn, MPI_Datatype st, void* rb, const int* rn,
                   const int* displs, MPI_Datatype rt, MPI_Comm c) {
  log_model(kAllgatherv, sum_counts(rn, comm_size(c), comm_rank(c), rt), c);
  return PMPI_Allgatherv(sb, sn, st, rb, rn, displs, rt, c);
}
int MPI_Iallgatherv(const void* sb, int sn, MPI_Datatype st, void* rb, const int* rn,
                    const int* displs, MPI_Datatype rt, MPI_Comm c, MPI_Request* r) {
  log_model(kIallgatherv, sum_counts(rn, comm_size(c), comm_rank(c), rt), c);
  return PMPI_Iallgatherv(sb, sn, st, rb, rn, displs, rt, c, r);
}
int MPI_Bcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c) {
  bcast_model(kBcast, n, t, root, c);
  return PMPI_Bcast(b, n, t, root, c);
}
int MPI_Ibcast(void* b, int n, MPI_Datatype t, int root, MPI_Comm c, MPI_Request* r) {
  bcast_model(kIbcast, n, t, root, c);
  return PMPI_Ibcast(b, n, t, root, c, r);
}
int MPI_Reduce(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c) {
  reduce_model(kReduce, n, t, root, c);
  return PMPI_Reduce(sb, rb, n, t, op, root, c);
}
int MPI_Ireduce(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op, int root, MPI_Comm c,
                MPI_Request* r) {
  reduce_model(kIreduce, n, t, root, c);
  return PMPI_Ireduce(sb, rb, n, t, op, root, c, r);
}
int MPI_Reduce_scatter(const void* sb, void* rb, const int* rn, MPI_Datatype t, MPI_Op op,
                       MPI_Comm c) {
  log_model(kReduceScatter, sum_counts(rn, comm_size(c), comm_rank(c), t), c);
  return PMPI_Reduce_scatter(sb, rb, rn, t, op, c);
}
int MPI_Ireduce_scatter(const void* sb, void* rb, const int* rn, MPI_Datatype t, MPI_Op op,
                        MPI_Comm c, MPI_Request* r) {
  log_model(kIreduceScatter, sum_counts(rn, comm_size(c), comm_rank(c), t), c);
  return PMPI_Ireduce_scatter(sb, rb, rn, t, op, c, r);
}
int MPI_Reduce_scatter_block(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op,
                             MPI_Comm c) {
  log_model(kReduceScatterBlock, type_bytes(n, t) * static_cast<std::uint64_t>(comm_size(c) - 1),
            c);
  return PMPI_Reduce_scatter_block(sb, rb, n, t, op, c);
}
int MPI_Ireduce_scatter_block(const void* sb, void* rb, int n, MPI_Datatype t, MPI_Op op,
                              MPI_Comm c, MPI_Request* r) {
  log_model(kIreduceScatterBlock, type_bytes(n, t) * static_cast<std::uint64_t>(comm_size(c) - 1),
            c);
  return PMPI_Ireduce_scatter_block(sb, rb, n, t, op, c, r);
}
int MPI_Alltoall(const void* sb, int sn, MPI_Datatype st, void* rb, int rn, MPI_Datatype rt,
                 MPI_Comm c) {
  if (sb == MPI_IN_PLACE) alltoall_model(kAlltoall, rn, rt, c);
  else alltoall_model(kAlltoall, sn, st, c);
  return PMPI_Alltoall(sb, sn, st, rb, rn, rt, c);
}
int MPI_Ialltoall(const void* sb, int sn, MPI_Datatype st, void* rb, int rn, MPI_Datatype rt,
                  MPI_Comm c, MPI_Request* r) {
  if (sb == MPI_IN_PLACE) alltoall_model(kIalltoall, rn, rt, c);
  else alltoall_model(kIalltoall, sn, st, c);
  return PMPI_Ialltoall(sb, sn, st, rb, rn, rt, c, r);
}
int MPI_Alltoallv(const void* sb, const int* sn, const int* sd, MPI_Datatype st, void* rb,
                  const int* rn, const int* rd, MPI_Datatype rt, MPI_Comm c) {
  if (sb == MPI_IN_PLACE) alltoallv_model(kAlltoallv, rn, rt, c);
  else alltoallv_model(kAlltoallv, sn, st, c);
  return PMPI_Alltoallv(sb, sn, sd, st, rb, rn, rd, rt, c);
}
int MPI_Ialltoallv(const void* sb, const int* sn, const int* sd, MPI_Datatype st, void* rb,
                   const int* rn, const int* rd, MPI_Datatype rt, MPI_Comm c, MPI_Request* r) {
  if (sb == MPI_IN_PLACE) alltoallv_model(kIalltoallv, rn, rt, c);
  else alltoallv_model(kIalltoallv, sn, st, c);
  return PMPI_Ialltoallv(sb, sn, sd, st, rb, rn, rd, rt, c, r);
}
int MPI_Gather(const void* sb, int sn, MPI_Datatype st, void* rb, int rn, MPI_Datatype rt,
               int root, MPI_Comm c) {
  to_root_model(kGather, sn, st, root, c);
  return PMPI_Gather(sb, sn, st, rb, rn, rt, root, c);
}
int MPI_Igather(const void* sb, int sn, MPI_Datatype st, void* rb, int rn, MPI_Datatype rt,
                int root, MPI_Comm c, MPI_Request* r) {
  to_root_model(kIgather, sn, st, root, c);
  return PMPI_Igather(sb, sn, st, rb, rn, rt, root, c, r);
}
int MPI_Gatherv(const void* sb, int sn, MPI_Datatype st, void* rb, const int* rn, const int* d,
                MPI_Datatype rt, int root, MPI_Comm c) {
  to_root_model(kGatherv, sn, st, root, c);
  return PMPI_Gatherv(sb, sn, st, rb, rn, d, rt, root, c);
}
int MPI_Igatherv(const void* sb, int sn, MPI_Datatype st, void* rb, const int* rn, const int* d,
                 MPI_Datatype rt, int root, MPI_Comm c, MPI_Request* r) {
  to_root_model(kIgatherv, sn, st, root, c);
  return PMPI_Igatherv(sb, sn, st, rb, rn, d, rt, root, c, r);
}
int MPI_Scatter(const void* sb, int sn, MPI_Datatype st, void* rb, int rn, MPI_Datatype rt,
                int root, MPI_Comm c) {
  from_root_model(kScatter, nullptr, sn, st, root, c);
  return PMPI_Scatter(sb, sn, st, rb, rn, rt, root, c);
}
int MPI_Iscatter(const void* sb, int sn, MPI_Datatype st, void* rb, int rn, MPI_Datatype rt,
                 int root, MPI_Comm c, MPI_Request* r) {
  from_root_model(kIscatter, nullptr, sn, st, root, c);
  return PMPI_Iscatter(sb, sn, st, rb, rn, rt, root, c, r);
}
int MPI_Scatterv(const void* sb, const int* sn, const int* d, MPI_Datatype st, void* rb, int rn,
                 MPI_Datatype rt, int root, MPI_Comm c) {
  from_root_model(kScatterv, sn, 0, st, root, c);
  return PMPI_Scatterv(sb, sn, d, st, rb, rn, rt, root, c);
}
int MPI_Iscatterv(const void* sb, const int* sn, const int* d, MPI_Datatype st, void* rb, int rn,
                  MPI_Datatype rt, int root, MPI_Comm c, MPI_Request* r) {
  from_root_model(kIscatterv, sn, 0, st, root, c);
  return PMPI_Iscatterv(sb, sn, d, st, rb, rn, rt, root, c, r);
}
int MPI_Barrier(MPI_Comm c) {
  log_model(kBarrier, 0, c);
  return PMPI_Barrier(c);
}
int MPI_Ibarrier(MPI_Comm c, MPI_Request* r) {
  log_model(kIbarrier, 0, c);
  return PMPI_Ibarrier(c, r);
}

// ---- control and output ----

int MPI_Pcontrol(const int level, ...) {
  if (level == 3) {
    va_list ap;
    va_start(ap, level);
    const char* label = va_arg(ap, const char*);
    va_end(ap);
    std::string seg = "{\"label\":" + json_label(label) + "," + counts_json() + "}";
    std::lock_guard<std::mutex> lock(g_segments_mu);
    if (!g_segments.empty()) g_segments += ',';
    g_segments += seg;
    return MPI_SUCCESS;
  }
  if (level == 2) {
    for (Counter* c : {&g_counts.p2p_msgs, &g_counts.p2p_bytes, &g_counts.coll_msgs,
                       &g_counts.coll_bytes, &g_counts.file_opens, &g_counts.read_calls,
                       &g_counts.read_bytes})
      c->store(0);
    for (Counter& c : g_counts.calls) c.store(0);
    std::lock_guard<std::mutex> lock(g_names_mu);
    for (NameCount& nc : g_names) nc.msgs = nc.bytes = 0;
  }
  g_enabled = level != 0;
  return MPI_SUCCESS;
}

int MPI_Finalize(void) {
  write_counts();
  return PMPI_Finalize();
}

// ---- files ----

int open(const char* path, int flags, ...) {
  static auto real = next<int (*)(const char*, int, ...)>("open");
  PMPI_COUNT_MODE(flags, mode);
  const int fd = real(path, flags, mode);
  opened(fd, path);
  return fd;
}
int open64(const char* path, int flags, ...) {
  static auto real = next<int (*)(const char*, int, ...)>("open64");
  PMPI_COUNT_MODE(flags, mode);
  const int fd = real(path, flags, mode);
  opened(fd, path);
  return fd;
}
int openat(int dir, const char* path, int flags, ...) {
  static auto real = next<int (*)(int, const char*, int, ...)>("openat");
  PMPI_COUNT_MODE(flags, mode);
  const int fd = real(dir, path, flags, mode);
  opened(fd, path);
  return fd;
}
int openat64(int dir, const char* path, int flags, ...) {
  static auto real = next<int (*)(int, const char*, int, ...)>("openat64");
  PMPI_COUNT_MODE(flags, mode);
  const int fd = real(dir, path, flags, mode);
  opened(fd, path);
  return fd;
}
FILE* fopen(const char* path, const char* how) {
  static auto real = next<FILE* (*)(const char*, const char*)>("fopen");
  FILE* f = real(path, how);
  if (f) opened(fileno(f), path);
  return f;
}
FILE* fopen64(const char* path, const char* how) {
  static auto real = next<FILE* (*)(const char*, const char*)>("fopen64");
  FILE* f = real(path, how);
  if (f) opened(fileno(f), path);
  return f;
}
int fclose(FILE* f) {
  static auto real = next<int (*)(FILE*)>("fclose");
  if (f) {
    const int fd = fileno(f);
    if (fd >= 0 && fd < kMaxFd) g_tracked_fd[fd].store(false, std::memory_order_relaxed);
  }
  return real(f);
}
int close(int fd) {
  static auto real = next<int (*)(int)>("close");
  if (fd >= 0 && fd < kMaxFd) g_tracked_fd[fd].store(false, std::memory_order_relaxed);
  return real(fd);
}
ssize_t read(int fd, void* buf, size_t n) {
  static auto real = next<ssize_t (*)(int, void*, size_t)>("read");
  const ssize_t got = real(fd, buf, n);
  did_read(fd, got);
  return got;
}
ssize_t pread(int fd, void* buf, size_t n, off_t at) {
  static auto real = next<ssize_t (*)(int, void*, size_t, off_t)>("pread");
  const ssize_t got = real(fd, buf, n, at);
  did_read(fd, got);
  return got;
}
ssize_t pread64(int fd, void* buf, size_t n, off64_t at) {
  static auto real = next<ssize_t (*)(int, void*, size_t, off64_t)>("pread64");
  const ssize_t got = real(fd, buf, n, at);
  did_read(fd, got);
  return got;
}
// Python's os.readv and os.preadv read through these.
ssize_t readv(int fd, const struct iovec* iov, int count) {
  static auto real = next<ssize_t (*)(int, const struct iovec*, int)>("readv");
  const ssize_t got = real(fd, iov, count);
  did_read(fd, got);
  return got;
}
ssize_t preadv(int fd, const struct iovec* iov, int count, off_t at) {
  static auto real = next<ssize_t (*)(int, const struct iovec*, int, off_t)>("preadv");
  const ssize_t got = real(fd, iov, count, at);
  did_read(fd, got);
  return got;
}
ssize_t preadv64(int fd, const struct iovec* iov, int count, off64_t at) {
  static auto real = next<ssize_t (*)(int, const struct iovec*, int, off64_t)>("preadv64");
  const ssize_t got = real(fd, iov, count, at);
  did_read(fd, got);
  return got;
}

}  // extern "C"
