// `tessera run`: starts an SPMD program on N localities through mpirun.
//
// Sets Open MPI's root-user flags, sizes each rank's threads so the ranks do
// not oversubscribe the cores (cores / N each unless --threads), runs `.tsl`
// files with this binary's `eval` and `.py` files with the project's Python
// (TESSERA_PYTHON, the .venv beside the build folder, or python3), prefixes each output line with `[rank r] `, and when a
// rank fails says which one and with what error.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <regex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

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

// Reads mpirun's tagged output ("[job,rank]<stdout>:text") and rewrites it.
struct OutputFilter {
  std::map<int, std::string> last_error_line;
  std::map<int, bool> has_error_line;
  int failed_rank = -1;
  int failed_code = 0;
  std::string pending[2];

  void line(int stream, const std::string& text) {
    static const std::regex tagged(R"(^\[\d+,(\d+)\]<(stdout|stderr)>:(.*)$)");
    static const std::regex process(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
    static const std::regex exit_code(R"(Exit code:\s*(-?\d+))");
    std::smatch m;
    if (std::regex_match(text, m, tagged)) {
      int rank = std::stoi(m[1]);
      bool err = m[2] == "stderr";
      // mpirun tags every chunk a process writes, so a line written in
      // pieces carries further tags inside it.
      static const std::regex inner_tag(R"(\[\d+,\d+\]<(stdout|stderr)>:)");
      std::string body = std::regex_replace(std::string(m[3]), inner_tag, "");
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

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  int n = 0, threads = 0;
  std::string hosts, script;
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
  if (tsl) {
    cmd.insert(cmd.end(), {self_path(), "eval", "--threads", std::to_string(threads), script});
  } else {
    cmd.insert(cmd.end(), {python_for_scripts(), script});
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
  if (code == 0) return 0;
  if (filter.failed_rank >= 0) {
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
