#include "tessera/cli/run_guard.hpp"

#include <sched.h>
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
#include <optional>
#include <stdexcept>
#include <thread>

#include "tessera/cli/run_output.hpp"

namespace tessera::cli {

namespace {

pid_t guarded_child = 0;
volatile sig_atomic_t forwarded_signal = 0;

void forward_signal(int sig) {
  forwarded_signal = sig;
  if (guarded_child > 0) kill(guarded_child, sig);
}

// This host's share of cores for one rank: the cores this process may run on
// (a batch system's cpuset included) over the ranks Open MPI put on this host.
int threads_on_this_host() {
  cpu_set_t set;
  int cores = sched_getaffinity(0, sizeof set, &set) == 0
                  ? CPU_COUNT(&set)
                  : static_cast<int>(std::thread::hardware_concurrency());
  int local = 1;
  if (const char* s = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE")) local = std::max(1, std::atoi(s));
  return std::max(1, cores / local);
}

}  // namespace

int guard_rank(std::vector<std::string> cmd) {
  bool per_host = !cmd.empty() && cmd[0] == "--threads-per-host";
  if (per_host) cmd.erase(cmd.begin());
  if (cmd.empty()) throw std::invalid_argument("[run] --rank-guard needs a program");
  char host[HOST_NAME_MAX + 1] = {};
  gethostname(host, sizeof host - 1);
  std::fprintf(stderr, "%s host=%s\n", kStartMarker, host);
  std::fflush(stderr);
  if (per_host) setenv("TESSERA_THREADS", std::to_string(threads_on_this_host()).c_str(), 1);

  pid_t guard = getpid(), parent = getppid();
  pid_t child = fork();
  if (child < 0)
    throw std::runtime_error(std::string("[run] fork failed: ") + std::strerror(errno));
  if (child == 0) {
    // The program must not outlive its guard: mpirun stops a job by
    // signalling the processes it started, which are the guards.
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != guard) _exit(127);
    std::vector<char*> args;
    for (auto& s : cmd) args.push_back(s.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(stderr, "tessera run: cannot start %s: %s\n", cmd[0].c_str(),
                 std::strerror(errno));
    _exit(127);
  }
  guarded_child = child;
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2})
    std::signal(sig, forward_signal);

  // Watchdog: the guard's parent is mpirun or Open MPI's daemon on this host.
  // When it is gone (killed along with the launcher, or it gave up on a host
  // it lost), nobody else will stop this rank, so the guard does: SIGTERM,
  // then SIGKILL 2 s later.
  using Clock = std::chrono::steady_clock;
  std::optional<Clock::time_point> orphaned;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(child, &status, WNOHANG);
    if (r == child) break;
    if (r < 0 && errno != EINTR)
      throw std::runtime_error(std::string("[run] waitpid failed: ") + std::strerror(errno));
    if (!orphaned && getppid() != parent) {
      orphaned = Clock::now();
      forwarded_signal = SIGTERM;
      kill(child, SIGTERM);
    } else if (orphaned && Clock::now() - *orphaned > std::chrono::seconds(2)) {
      kill(child, SIGKILL);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : 0;
  std::fflush(stdout);
  std::fprintf(stderr, "%s pid=%ld status=%d signal=%d forwarded=%d\n", kEndMarker,
               static_cast<long>(child), code, sig, static_cast<int>(forwarded_signal));
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

}  // namespace tessera::cli
