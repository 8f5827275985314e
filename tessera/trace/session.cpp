#include "tessera/trace/session.hpp"

#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include "tessera/core/error.hpp"
#include "tessera/kernels/io.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/trace/format.hpp"

namespace tessera::trace {

namespace {

struct Session {
  std::mutex mutex;
  bool active = false;
  std::string dir;
  std::string run_id;
  int64_t realtime_ns = 0;  // CLOCK_REALTIME when the recording started
  std::map<std::string, std::string> sources;
};

Session& session() {
  static Session* s = new Session();  // never destroyed: an atexit handler may stop it
  return *s;
}

int env_int(const char* a, const char* b, int fallback) {
  for (const char* name : {a, b}) {
    if (!name) continue;
    if (const char* v = std::getenv(name); v && *v) return std::atoi(v);
  }
  return fallback;
}

// This process's locality and the number of localities, from the variables
// mpirun sets: no MPI call (the trace must not start MPI in a program that
// does not use it).
std::pair<int, int> locality_from_env() {
  int rank = env_int("OMPI_COMM_WORLD_RANK", "PMIX_RANK", 0);
  int size = env_int("OMPI_COMM_WORLD_SIZE", nullptr, 1);
  return {rank, std::max(size, rank + 1)};
}

int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string hostname() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// Text into a stream through a large buffer, numbers by to_chars: a trace
// of a million events is written in a fraction of a second.
class Writer {
 public:
  explicit Writer(std::ostream& os) : os_(os) { buf_.reserve(kFlushBytes + 4096); }
  ~Writer() { flush(); }
  Writer& operator<<(std::string_view s) {
    buf_ += s;
    if (buf_.size() > kFlushBytes) flush();
    return *this;
  }
  Writer& operator<<(char c) {
    buf_ += c;
    return *this;
  }
  template <class I>
    requires(std::is_integral_v<I> && !std::is_same_v<I, char>)
  Writer& operator<<(I v) {
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    buf_.append(tmp, r.ptr);
    return *this;
  }
  void flush() {
    os_.write(buf_.data(), static_cast<std::streamsize>(buf_.size()));
    buf_.clear();
  }

 private:
  static constexpr size_t kFlushBytes = 1 << 20;
  std::ostream& os_;
  std::string buf_;
};

// Writes the recording in the format of format.hpp.
void write_trace(std::ostream& stream, const Recording& rec, const std::vector<TracedProgram>& programs,
                 const std::string& run_id, int64_t realtime, const std::map<std::string, std::string>& sources) {
  Writer os(stream);
  auto [rank, size] = locality_from_env();
  int64_t base = rec.begin_ns;
  os << kFileMagic << '\t' << kFileVersion << '\n';
  os << "run\t" << escape_field(run_id) << '\n';
  os << "locality\t" << rank << '\t' << size << '\n';
  os << "host\t" << escape_field(hostname()) << '\t' << getpid() << '\n';
  os << "clock\t" << realtime << '\n';
  os << "span\t" << rec.end_ns - base << '\n';

  // Every node of every program by address, as (program, id).
  std::unordered_map<const void*, std::pair<int, int>> where;
  for (size_t p = 0; p < programs.size(); ++p) {
    const TracedProgram& prog = programs[p];
    os << "program\t" << p << '\t' << escape_field(prog.code->loc.file) << '\n';
    os << "text\t" << p << '\t' << escape_field(*prog.text) << '\n';
    std::unordered_map<const Node*, int> ids;
    visit_tree(prog.code->body.get(), [&](const Node* n, const Node* parent) {
      int id = static_cast<int>(ids.size());
      ids[n] = id;
      where.emplace(n, std::make_pair(static_cast<int>(p), id));
      const NodeCounters& c = n->counters();
      TracedProgram::Counts before = id < static_cast<int>(prog.baseline.size()) ? prog.baseline[id]
                                                                                  : TracedProgram::Counts{};
      std::string family;
      if (n->is_primitive()) {
        if (const PrimitiveSpec* spec = find_primitive(n->label())) family = spec->family;
      }
      os << "node\t" << p << '\t' << id << '\t' << (parent ? ids[parent] : -1) << '\t' << (n->is_primitive() ? 1 : 0)
         << '\t' << escape_field(family) << '\t' << escape_field(n->label()) << '\t' << escape_field(n->loc().str())
         << '\t' << c.evaluations.load() - before.evaluations << '\t' << c.total_ns.load() - before.total_ns << '\t'
         << c.spawned.load() - before.spawned << '\n';
    });
  }
  for (const auto& [name, text] : sources) os << "source\t" << escape_field(name) << '\t' << escape_field(text) << '\n';
  auto node_ref = [&](const void* n) {
    auto it = where.find(n);
    return it == where.end() ? std::make_pair(-1, -1) : it->second;
  };

  std::unordered_map<const void*, int> strings;
  auto string_id = [&](const void* s) {
    auto [it, added] = strings.emplace(s, static_cast<int>(strings.size()));
    if (added) os << "string\t" << it->second << '\t' << escape_field(*static_cast<const std::string*>(s)) << '\n';
    return it->second;
  };

  static const std::string kNoName;
  uint64_t count = 0;
  for (const ThreadEvents& t : rec.threads) {
    bool named = false;
    for (const Event& e : t.events) {
      if ((e.kind == EventKind::node || e.kind == EventKind::task || e.kind == EventKind::loop ||
           e.kind == EventKind::compile) &&
          !named) {
        os << "thread\t" << t.index << '\t' << escape_field(t.name) << '\n';
        named = true;
      }
      int64_t t0 = e.t0 - base, t1 = std::max(e.t1, e.t0) - base;
      switch (e.kind) {
        case EventKind::node: {
          auto [p, id] = node_ref(e.what);
          os << "n\t" << t.index << '\t' << t0 << '\t' << t1 << '\t' << p << '\t' << id << '\t'
             << e.cpu0 << '\t' << e.cpu1 << '\n';
          break;
        }
        case EventKind::task: {
          auto [p, id] = node_ref(e.what);
          os << "t\t" << t.index << '\t' << t0 << '\t' << t1 << '\t' << p << '\t' << id << '\t'
             << ((e.flags & kTile) ? 1 : 0) << '\n';
          break;
        }
        case EventKind::comm: {
          int op = string_id(e.what), site = string_id(e.where);
          os << "c\t" << t0 << '\t' << t1 << '\t' << e.amount << '\t' << e.peer << '\t' << op << '\t' << site << '\n';
          break;
        }
        case EventKind::step:
          os << "s\t" << t0 << '\t' << t1 << '\t' << e.amount << '\n';
          break;
        case EventKind::loop: {
          auto [p, id] = node_ref(e.what);
          int name = string_id(e.where);
          os << "l\t" << t.index << '\t' << t0 << '\t' << t1 << '\t' << p << '\t' << id << '\t' << name << '\t'
             << static_cast<int>(e.flags) << '\t' << e.amount << '\t' << e.peer << '\n';
          break;
        }
        case EventKind::compile: {
          if (e.amount >= rec.compiles.size()) continue;  // of another recording (record_compile)
          const CompileRecord& c = rec.compiles[e.amount];
          int name = string_id(c.name ? c.name : &kNoName);
          int sig = string_id(c.signature ? c.signature : &kNoName);
          os << "x\t" << t.index << '\t' << t0 << '\t' << t1 << '\t' << name << '\t' << sig << '\t'
             << static_cast<int>(c.mode) << '\t' << static_cast<int>(c.source) << '\t' << c.ir_bytes << '\t'
             << c.generate_ns << '\t' << c.optimise_ns << '\t' << c.codegen_ns << '\n';
          break;
        }
      }
      ++count;
    }
  }
  os << "dropped\t" << rec.dropped << '\n';
  os << "end\t" << count << '\n';
}

std::string make_run_id() {
  return error_message(std::hex, realtime_ns(), "-", getpid());
}

}  // namespace

std::string locality_file_name(int locality) { return error_message("locality-", locality, ".trace"); }

namespace {

// Stops the session and writes its file; requires s.mutex and s.active.
std::string stop_locked(Session& s) {
  s.active = false;
  Recording rec = trace::stop();
  std::vector<TracedProgram> programs = end_traced_programs();
  auto [rank, size] = locality_from_env();
  std::string path = (std::filesystem::path(s.dir) / locality_file_name(rank)).string();
  kernels::write_file_atomic(
      path,
      [&](std::ostream& out) {
        write_trace(out, rec, programs, s.run_id, s.realtime_ns, s.sources);
      },
      "trace");
  return path;
}

// The abrupt-end writer (runtime/trace.hpp): never throws.
bool write_if_active() {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  if (!s.active) return false;
  try {
    stop_locked(s);
    return true;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: the trace could not be written: %s\n", e.what());
    return false;
  }
}

}  // namespace

void start_session(const std::string& dir) {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  if (s.active) {
    throw std::runtime_error(error_message("[trace] a trace is already being recorded into '", s.dir,
                                           "': stop it before starting another"));
  }
  if (dir.empty()) throw std::invalid_argument("[trace] the trace directory is an empty string");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw std::runtime_error(error_message("[trace] cannot create the trace directory '", dir,
                                           "': ", ec ? ec.message() : "a file of that name exists"));
  }
  const char* run = std::getenv(kTraceRunEnv);
  s.run_id = run && *run ? run : make_run_id();
  s.dir = dir;
  s.sources.clear();
  begin_traced_programs();
  s.realtime_ns = realtime_ns();
  const char* cpu = std::getenv(kTraceCpuEnv);
  trace::start(cpu && std::string_view(cpu) == "1");
  s.active = true;
  trace::set_abrupt_end_writer(write_if_active);
}

bool start_session_from_env() {
  const char* dir = std::getenv(kTraceDirEnv);
  if (!dir || !*dir || session_active()) return false;
  start_session(dir);
  return true;
}

bool session_active() {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  return s.active;
}

std::string session_dir() {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  return s.active ? s.dir : std::string();
}

std::string stop_session() {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  if (!s.active) throw std::runtime_error("[trace] no trace is being recorded in this process");
  return stop_locked(s);
}

void add_source(const std::string& name, const std::string& text) {
  Session& s = session();
  std::lock_guard lock(s.mutex);
  if (s.active) s.sources[name] = text;
}

void record_step(int64_t iteration, int64_t t0, int64_t t1) {
  if (!on()) return;
  Event e;
  e.kind = EventKind::step;
  e.t0 = t0;
  e.t1 = t1;
  e.amount = static_cast<uint64_t>(iteration);
  record(e);
}

}  // namespace tessera::trace
