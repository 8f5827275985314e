// `tessera run`: starts an SPMD program on N localities through mpirun.
//
// Sets Open MPI's root-user flags, sizes each rank's threads so the ranks do
// not oversubscribe the cores (cores / N each unless --threads), runs `.tsl`
// files with this binary's `eval` and `.py` files with the project's Python
// (TESSERA_PYTHON, the .venv beside the build folder, or python3), prefixes each output line with `[rank r] `, and when a
// rank fails says which one and with what error.
//
// Each rank runs under a guard (this binary again, `run --rank-guard`): it
// starts the rank's program as its child, passes on the signals mpirun sends,
// and when the program ends writes one hidden line saying how (pid, exit
// status or signal), so that a rank killed by a signal is named with its pid
// and signal even though mpirun reports neither reliably.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tessera/distributed/comm.hpp"
#include "tessera/kernels/io.hpp"

namespace tessera::cli {

namespace {

std::string self_path() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "tessera";
  return std::string(buf, static_cast<size_t>(n));
}

// The Python that runs scripts: TESSERA_PYTHON, else the project's virtual
// environment next to this binary's build folder (build/../.venv), where
// `import tessera` works after `make`, else python3 from PATH.
std::string python_for_scripts() {
  if (const char* py = std::getenv("TESSERA_PYTHON"); py && *py) return py;
  std::string self = self_path();
  auto slash = self.rfind('/');
  if (slash != std::string::npos) {
    std::string venv = self.substr(0, slash) + "/../.venv/bin/python";
    if (access(venv.c_str(), X_OK) == 0) return venv;
  }
  return "python3";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int positive(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n <= 0 || n > 1 << 20) {
    throw std::invalid_argument(flag + " must be a positive integer, got '" + v + "'");
  }
  return static_cast<int>(n);
}

// The line a rank's guard writes on stderr when the rank's program ends.
constexpr const char* kEndMarker = "tessera-run-rank-ended:";

// How a rank's program ended, as its guard reported it.
struct RankEnd {
  long pid = 0;
  int status = 0;     // exit status, when signal == 0
  int signal = 0;     // the signal that ended it, or 0
  int forwarded = 0;  // a signal the guard passed on from mpirun (the job was being stopped), or 0
};

// A rank declared failed by another (its heartbeats stopped: failure
// detection, distributed/heartbeat.hpp), as the first rank to say so wrote it.
struct PeerFailed {
  int rank = -1;
  char host[256] = "?";
  char addr[64] = "-";  // its IPv4 address, or "-"
  double silent = 0;
  int by = -1;
  int cut_off = 0;         // the rank heard from none of its peers (its link is down)
  size_t ends_before = 0;  // how many ranks' ends the guards had reported before
};

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "an unknown signal";
}

// Python scripts run through this bootstrap (`python -c BOOT script args`):
// a script that calls sys.exit(3) would otherwise run MPI_Finalize at exit,
// which waits for the other ranks, while they wait in a collective for it. On
// a non-zero exit or an uncaught exception it leaves at once (os._exit, so no
// MPI_Finalize) and mpirun stops the job. Tracebacks start at the script.
constexpr const char* kPythonBootstrap = R"(import os, runpy, sys
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path[0] = os.path.dirname(os.path.abspath(script))
def leave(code):
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
try:
    runpy.run_path(script, run_name="__main__")
except SystemExit as e:
    if e.code is None or e.code == 0:
        raise
    if not isinstance(e.code, int):
        print(e.code, file=sys.stderr)
    leave(e.code if isinstance(e.code, int) else 1)
except BaseException:
    kind, value, tb = sys.exc_info()
    while tb is not None and tb.tb_frame.f_code.co_filename != script:
        tb = tb.tb_next
    sys.excepthook(kind, value.with_traceback(tb), tb)
    leave(1)
)";

// Reads mpirun's tagged output ("[job,rank]<stdout>:text") and rewrites it.
struct OutputFilter {
  std::map<int, std::string> last_error_line;
  std::map<int, bool> has_error_line;
  std::map<int, RankEnd> ended;
  std::vector<int> end_order;
  int failed_rank = -1;
  int failed_code = 0;
  int signaled_rank = -1;
  int improper_rank = -1;
  PeerFailed peer_failed;
  std::string pending[2];

  void line(int stream, const std::string& text) {
    static const std::regex tagged(R"(^\[\d+,(\d+)\]<(stdout|stderr)>:(.*)$)");
    static const std::regex process(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
    static const std::regex exit_code(R"(Exit code:\s*(-?\d+))");
    static const std::regex on_signal(R"(process rank (\d+) with PID \d+ on node \S+ exited on signal)");
    static const std::regex improper(R"(due to process rank (\d+) with PID)");
    std::smatch m;
    if (std::regex_match(text, m, tagged)) {
      int rank = std::stoi(m[1]);
      bool err = m[2] == "stderr";
      // mpirun tags every chunk a process writes, so a line written in
      // pieces carries further tags inside it.
      static const std::regex inner_tag(R"(\[\d+,\d+\]<(stdout|stderr)>:)");
      std::string body = std::regex_replace(std::string(m[3]), inner_tag, "");
      // The guard's line (after any unfinished line of the program).
      if (size_t at = body.find(kEndMarker); err && at != std::string::npos) {
        RankEnd e;
        std::sscanf(body.c_str() + at + std::strlen(kEndMarker), " pid=%ld status=%d signal=%d forwarded=%d",
                    &e.pid, &e.status, &e.signal, &e.forwarded);
        ended[rank] = e;
        end_order.push_back(rank);
        body.erase(at);
        if (body.empty()) return;
      }
      if (size_t at = body.find(distributed::detail::kPeerFailedMarker);
          err && at != std::string::npos) {
        PeerFailed p;
        int got =
            std::sscanf(body.c_str() + at + std::strlen(distributed::detail::kPeerFailedMarker),
                        " rank=%d host=%255s addr=%63s silent=%lf by=%d cutoff=%d", &p.rank, p.host,
                        p.addr, &p.silent, &p.by, &p.cut_off);
        p.ends_before = end_order.size();
        if (got == 6 && peer_failed.rank < 0) peer_failed = p;
        body.erase(at);
        if (body.empty()) return;
      }
      std::fprintf(err ? stderr : stdout, "[rank %d] %s\n", rank, body.c_str());
      std::fflush(err ? stderr : stdout);
      // The error of a rank is its last "SomethingError: ..." line (the
      // first line of a multi-line message, the last of a Python traceback),
      // else its last line on stderr.
      static const std::regex error_line(R"(^\[?\w*(Error|Exception)\b.*)");
      if (err && std::regex_match(body, error_line)) {
        last_error_line[rank] = body;
        has_error_line[rank] = true;
      } else if (err && !has_error_line[rank] && body.find_first_not_of(" \t") != std::string::npos) {
        last_error_line[rank] = body;
      }
      return;
    }
    if (std::regex_search(text, m, process)) failed_rank = std::stoi(m[1]);
    if (std::regex_search(text, m, exit_code)) failed_code = std::stoi(m[1]);
    if (std::regex_search(text, m, on_signal)) signaled_rank = std::stoi(m[1]);
    if (std::regex_search(text, m, improper)) improper_rank = std::stoi(m[1]);
    FILE* out = stream == 1 ? stdout : stderr;
    std::fprintf(out, "%s\n", text.c_str());
    std::fflush(out);
  }

  void feed(int stream, const char* data, size_t n) {
    std::string& buf = pending[stream - 1];
    buf.append(data, n);
    size_t pos;
    while ((pos = buf.find('\n')) != std::string::npos) {
      line(stream, buf.substr(0, pos));
      buf.erase(0, pos + 1);
    }
  }

  void flush() {
    for (int s = 1; s <= 2; ++s) {
      if (!pending[s - 1].empty()) line(s, pending[s - 1]);
      pending[s - 1].clear();
    }
  }
};

pid_t guarded_child = 0;
volatile sig_atomic_t forwarded_signal = 0;

void forward_signal(int sig) {
  forwarded_signal = sig;
  if (guarded_child > 0) kill(guarded_child, sig);
}

// `tessera run --rank-guard PROGRAM ARGS...`, started by mpirun for each rank.
int guard_rank(std::vector<std::string> cmd) {
  if (cmd.empty()) throw std::invalid_argument("[run] --rank-guard needs a program");
  pid_t guard = getpid();
  pid_t child = fork();
  if (child < 0) throw std::runtime_error(std::string("[run] fork failed: ") + std::strerror(errno));
  if (child == 0) {
    // The program must not outlive its guard: mpirun stops a job by
    // signalling the processes it started, which are the guards.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != guard) _exit(127);
    std::vector<char*> args;
    for (auto& s : cmd) args.push_back(s.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "tessera run: cannot start %s: %s\n", cmd[0].c_str(), std::strerror(errno));
    _exit(127);
  }
  guarded_child = child;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) std::signal(sig, forward_signal);
  int status = 0;
  while (waitpid(child, &status, 0) < 0) {
    if (errno != EINTR) throw std::runtime_error(std::string("[run] waitpid failed: ") + std::strerror(errno));
  }
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  std::fflush(stdout);
  std::fprintf(stderr, "%s pid=%ld status=%d signal=%d forwarded=%d\n", kEndMarker, static_cast<long>(child), code,
               sig, static_cast<int>(forwarded_signal));
  std::fflush(stderr);
  if (sig != 0) {
    // End the same way, so mpirun sees (and reports) the signal, without a
    // core file of the guard.
    rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    std::signal(sig, SIG_DFL);
    kill(getpid(), sig);
    return 128 + sig;
  }
  return code;
}

// What to say about the rank that ended the job, when the guards reported it.
std::optional<std::string> rank_end_message(OutputFilter& f, int n) {
  // A rank declared failed by the others is the one that ended the job (the
  // ranks that noticed ended because of it); it is named by how it ended
  // when its guard saw it end before that, else as the others saw it.
  int rank = -1;
  if (const PeerFailed& p = f.peer_failed; p.rank >= 0) {
    auto first = f.end_order.begin();
    if (std::find(first, first + static_cast<std::ptrdiff_t>(p.ends_before), p.rank) !=
        first + p.ends_before) {
      rank = p.rank;
    } else {
      char silent[32];
      std::snprintf(silent, sizeof silent, "%.1f", p.silent);
      std::string who = "tessera run: rank " + std::to_string(p.rank) + " of " + std::to_string(n) +
                        " on host " + p.host +
                        (std::strcmp(p.addr, "-") ? std::string(" (") + p.addr + ")" : "");
      if (p.cut_off && p.by == p.rank) {
        return who + " heard from none of the ranks it watches for " + silent +
               " s (TESSERA_FAILURE_TIMEOUT): its network link is probably down; the other ranks "
               "were stopped";
      }
      return who + " was not heard from for " + silent +
             " s (TESSERA_FAILURE_TIMEOUT): it stopped, died, or its network link is down (noticed "
             "by rank " +
             std::to_string(p.by) + "); the other ranks were stopped";
    }
  }
  // mpirun names the rank it noticed first; otherwise the first rank whose
  // program ended badly on its own (not by a signal passed on while mpirun
  // was stopping the job).
  if (rank < 0) {
    rank = f.signaled_rank >= 0   ? f.signaled_rank
           : f.improper_rank >= 0 ? f.improper_rank
                                  : f.failed_rank;
  }
  if (rank < 0 || !f.ended.count(rank)) {
    for (int r : f.end_order) {
      const RankEnd& e = f.ended[r];
      if (!e.forwarded && (e.signal != 0 || e.status != 0)) {
        rank = r;
        break;
      }
    }
  }
  if (rank < 0 || !f.ended.count(rank)) return std::nullopt;
  const RankEnd& e = f.ended[rank];
  std::string who = "tessera run: rank " + std::to_string(rank) + " of " + std::to_string(n) + " (pid " +
                    std::to_string(e.pid) + ")";
  if (e.signal != 0) {
    std::string msg = who + " was killed by signal " + std::to_string(e.signal) + " (" + signal_name(e.signal) + ")";
    if (f.has_error_line[rank]) msg += " after printing " + f.last_error_line[rank];
    return msg + "; the other ranks were stopped";
  }
  if (e.status != 0) {
    if (f.has_error_line[rank]) {
      return "tessera run: rank " + std::to_string(rank) + " of " + std::to_string(n) + " failed (exit code " +
             std::to_string(e.status) + "): " + f.last_error_line[rank];
    }
    std::string msg = who + " exited with status " + std::to_string(e.status);
    if (f.last_error_line.count(rank)) msg += ": " + f.last_error_line[rank];
    return msg + "; the other ranks were stopped";
  }
  if (rank == f.improper_rank) {
    return who + " exited with status 0 before the others, without finishing MPI (MPI_Finalize); the other "
                 "ranks were stopped";
  }
  return std::nullopt;
}

// `--trace DIR`: every rank records into DIR (TESSERA_TRACE, passed on like
// every TESSERA_ variable) under one run id; the directory says how many
// localities to expect, and traces of an earlier run there are removed, so a
// rank that writes none is reported missing rather than replaced by an old one.
void prepare_trace(std::string& dir, int n, const std::string& script) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw std::runtime_error("[run] cannot create the trace directory '" + dir + "': " +
                             (ec ? ec.message() : "a file of that name exists"));
  }
  dir = std::filesystem::absolute(dir).lexically_normal().string();
  static const std::regex trace_file(R"(locality-\d+\.trace)");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (std::regex_match(entry.path().filename().string(), trace_file)) std::filesystem::remove(entry.path(), ec);
  }
  std::string run = std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) + "-" +
                    std::to_string(getpid());
  kernels::write_file_atomic(dir + "/tessera-run.txt",
                             "run\t" + run + "\nlocalities\t" + std::to_string(n) + "\nprogram\t" + script + "\n",
                             "run");
  setenv("TESSERA_TRACE", dir.c_str(), 1);
  setenv("TESSERA_TRACE_RUN", run.c_str(), 1);
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "--rank-guard") return guard_rank({argv.begin() + 1, argv.end()});
  int n = 0, threads = 0;
  std::string hosts, script, trace_dir;
  size_t i = 0;
  for (; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    auto value = [&](const std::string& flag) -> std::string {
      if (a.size() > flag.size() && a[flag.size()] == '=') return a.substr(flag.size() + 1);
      if (i + 1 >= argv.size()) throw std::invalid_argument("option " + flag + " needs a value");
      return argv[++i];
    };
    if (a == "-n" || a == "--np" || a.rfind("-n=", 0) == 0) {
      n = positive("-n", value(a.rfind("--np", 0) == 0 ? "--np" : "-n"));
    } else if (a.rfind("--hosts", 0) == 0) {
      hosts = value("--hosts");
    } else if (a.rfind("--threads", 0) == 0) {
      threads = positive("--threads", value("--threads"));
    } else if (a == "--trace" || a.rfind("--trace=", 0) == 0) {
      trace_dir = value("--trace");
    } else if (a.size() > 1 && a[0] == '-') {
      throw std::invalid_argument("[run] unknown option '" + a + "' (see `tessera help`)");
    } else {
      script = a;
      ++i;
      break;
    }
  }
  if (n == 0) throw std::invalid_argument("[run] needs the number of localities: tessera run -n N FILE");
  if (script.empty()) throw std::invalid_argument("[run] needs a program: a .tsl or .py file");
  bool tsl = ends_with(script, ".tsl");
  if (!tsl && !ends_with(script, ".py")) {
    throw std::invalid_argument("[run] the program must be a .tsl or .py file, got '" + script + "'");
  }
  if (access(script.c_str(), R_OK) != 0) {
    throw std::runtime_error("[run] cannot open '" + script + "': " + std::strerror(errno));
  }

  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (threads == 0) threads = std::max(1, cores / n);
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  setenv("TESSERA_THREADS", std::to_string(threads).c_str(), 1);
  if (!trace_dir.empty()) prepare_trace(trace_dir, n, script);

  std::vector<std::string> cmd = {"mpirun", "-n", std::to_string(n), "--tag-output"};
  // Threads, not MPI's process binding, share the cores: each rank's task
  // arena is sized to its share, and binding one rank to one core would
  // leave its workers on that core.
  cmd.insert(cmd.end(), {"--bind-to", "none"});
  if (n > cores && hosts.empty()) cmd.push_back("--oversubscribe");
  if (!hosts.empty()) cmd.insert(cmd.end(), {"--host", hosts});
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("TESSERA_", 0) == 0) cmd.insert(cmd.end(), {"-x", kv.substr(0, kv.find('='))});
  }
  cmd.insert(cmd.end(), {self_path(), "run", "--rank-guard"});
  if (tsl) {
    cmd.insert(cmd.end(), {self_path(), "eval", "--threads", std::to_string(threads), script});
  } else {
    cmd.insert(cmd.end(), {python_for_scripts(), "-c", kPythonBootstrap, script});
  }
  for (; i < argv.size(); ++i) cmd.push_back(argv[i]);

  int out_pipe[2], err_pipe[2];
  if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) {
    throw std::runtime_error(std::string("[run] pipe failed: ") + std::strerror(errno));
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("[run] fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    close(out_pipe[0]);
    close(err_pipe[0]);
    close(out_pipe[1]);
    close(err_pipe[1]);
    std::vector<char*> args;
    for (auto& s : cmd) args.push_back(s.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "tessera run: cannot start mpirun: %s (install openmpi-bin: scripts/install-deps)\n",
                 std::strerror(errno));
    _exit(127);
  }
  close(out_pipe[1]);
  close(err_pipe[1]);
  OutputFilter filter;
  pollfd fds[2] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}};
  int open_fds = 2;
  char buf[65536];
  while (open_fds > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int k = 0; k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(fds[k].fd, buf, sizeof buf);
      if (got > 0) {
        filter.feed(k + 1, buf, static_cast<size_t>(got));
      } else {
        close(fds[k].fd);
        fds[k].fd = -1;
        --open_fds;
      }
    }
  }
  filter.flush();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (!trace_dir.empty()) {
    std::fprintf(stderr, "trace: %s (view it: tessera report %s)\n", trace_dir.c_str(), trace_dir.c_str());
  }
  if (code == 0) return 0;
  if (auto msg = rank_end_message(filter, n)) {
    std::fprintf(stderr, "%s\n", msg->c_str());
  } else if (filter.failed_rank >= 0) {
    std::string err = filter.last_error_line.count(filter.failed_rank)
                          ? filter.last_error_line[filter.failed_rank]
                          : std::string("(no error message)");
    std::fprintf(stderr, "tessera run: rank %d of %d failed (exit code %d): %s\n", filter.failed_rank, n,
                 filter.failed_code, err.c_str());
  } else if (!filter.last_error_line.empty()) {
    for (auto& [rank, err] : filter.last_error_line) {
      std::fprintf(stderr, "tessera run: rank %d of %d: %s\n", rank, n, err.c_str());
    }
    std::fprintf(stderr, "tessera run: failed (mpirun exit status %d)\n", code);
  } else {
    std::fprintf(stderr, "tessera run: failed (mpirun exit status %d)\n", code);
  }
  return code;
}

}  // namespace tessera::cli
