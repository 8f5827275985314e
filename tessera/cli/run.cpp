// `tessera run`: starts an SPMD program on N localities through mpirun, on
// this machine or on the hosts of a hostfile, --hosts or a SLURM allocation.
//
// Sets Open MPI's root-user flags, passes the user's Open MPI settings on
// (--mca, -x, --bind-to, --map-by, anything after --), forwards the
// environment that matters to every rank, picks the network the hosts share,
// sizes each rank's threads from its own host's cores, runs `.tsl` files with
// this binary's `eval` and `.py` files with the project's Python
// (TESSERA_PYTHON, which the `tessera` command of `pip install .` sets to the
// interpreter it was installed for; else the .venv beside the build folder,
// the interpreter of the site folder it was installed into, or python3),
// prefixes
// each output line with `[rank r]` (`[rank r@host]` across hosts) or writes it
// to the rank's log, and when the job fails says which rank or host it was.
//
// Each rank runs under a guard (run_guard.cpp). The launcher bounds every
// wait: a job that failed is stopped within seconds even when mpirun hangs on
// a lost host, and a launcher that is stopped or killed takes the whole job
// with it (mpirun runs in its own process group, watched by a keeper process
// that outlives the launcher only to stop that group).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "tessera/cli/cluster.hpp"
#include "tessera/cli/run_guard.hpp"
#include "tessera/cli/run_mesh.hpp"
#include "tessera/cli/run_output.hpp"
#include "tessera/distributed/heartbeat.hpp"
#include "tessera/distributed/mac.hpp"
#include "tessera/kernels/io.hpp"

namespace tessera::cli {

namespace {

constexpr const char* kRunUsage =
    R"(usage: tessera run [options] [-- MPIRUN_OPTIONS...] FILE.tsl|SCRIPT.py [args...]

Runs the program on N localities (MPI ranks) through Open MPI's mpirun. Every
rank's output line is prefixed with [rank r] ([rank r@host] when the job may
span hosts); when the job fails, the last line names the rank (or host) that
failed and why.

options:
  -n N, -np N, --np N    number of ranks (default under SLURM: SLURM_NTASKS)
  --hosts H1:2,H2:2      hosts and their slots (mpirun --host)
  --hostfile FILE        Open MPI hostfile: lines 'node1 slots=4'
  --mca KEY VALUE        an Open MPI setting (repeatable), e.g. --mca btl_tcp_if_include eth0
  -x VAR[=VALUE]         pass VAR (this environment's value, or VALUE) to every rank (repeatable)
  --bind-to WHAT         process binding (default none: threads share the cores)
  --map-by WHAT          how ranks are placed on the hosts (slot, node, ppr:2:node, ...)
  --threads T            worker threads per rank (default: the cores of each rank's
                         host over the ranks on that host; or TESSERA_THREADS if set)
  --output-dir DIR       each rank's output into DIR/rank-<r>.log instead of the terminal
                         (with --max-restarts, each launch appends after a line of its own)
  --trace DIR            record every locality's trace into DIR (see `tessera report`)
  --verbose              show Open MPI's own messages and the mpirun command
  --max-restarts N       launch the job again after a rank or host fails, up to N times
  --checkpoint-dir DIR   the job's checkpoint folder: the ranks get TESSERA_CHECKPOINT_DIR=DIR
                         (each fit call writes its checkpoints to a run folder there and, after
                         a restart, resumes its own run's newest valid one), TESSERA_RESTART=k
                         (0 on the first launch) and TESSERA_RUN_ID (one id for every launch)
  --mesh data=D,tensor=T,pipeline=P
                         arrange the ranks in a mesh (missing axes are 1; D*T*P must be N);
                         every rank gets TESSERA_MESH, which tessera.distributed.mesh() reads
  --zero S               ZeRO stage 0, 1, 2 or 3 (TESSERA_ZERO), read by fit: over the data
                         axis it shards the optimizer state (1), also the gradients (2),
                         also the weights (3); docs/parallelism.md, "ZeRO"
  --microbatches M       micro-batches per data locality and step of a pipelined fit, at
                         least the pipeline's stages (TESSERA_MICROBATCHES)
  --dry-run              start nothing: print every rank's mesh coordinates and host (from
                         --hosts or --hostfile slots, placed as mpirun places them) and the
                         groups of each axis
  --params P             with --dry-run, also the model-state bytes per locality the ZeRO
                         formulas give for P parameters (350000, 100M, 1.5B) under fp32 Adam
  -h, --help             this text
  --                     what follows, up to the program, goes to mpirun as it is
                         (e.g. -- --report-bindings --display-map train.py)

Python scripts run with TESSERA_PYTHON; when it is unset, with the Python the
command was installed for (`pip install .`: <env>/bin/tessera, or the program
it starts, <env>/lib/pythonM.N/site-packages/tessera/bin/tessera, started by
its path: <env>/bin/pythonM.N), or for build/tessera with the checkout's
.venv/bin/python, else python3.

Every rank gets PYTHONPATH, PYTHONHASHSEED, PYTHONUNBUFFERED, PYTHONWARNINGS,
VIRTUAL_ENV, LD_LIBRARY_PATH, OMP_* and TESSERA_* from this environment, and the
variables named with -x (through mca_base_env_list when you set that). With
several hosts the launcher chooses the network the hosts share
(btl_tcp_if_include, oob_tcp_if_include) unless you set it, and detects a
lost host within seconds (oob_tcp_keepalive_*). SIGTERM, SIGINT or SIGHUP stop
every rank on every host (a second one kills at once); so does killing the
launcher. See docs/distributed.md, "Running on a cluster".
)";

std::string self_path() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "tessera";
  return std::string(buf, static_cast<size_t>(n));
}

// The interpreter whose site folder holds this binary when pip installed it:
// <prefix>/lib/pythonM.N/site-packages/tessera/bin/tessera (a virtual
// environment, or a --prefix install) is run by <prefix>/bin/pythonM.N, when
// that exists. "" for any other place (build/tessera, a copy elsewhere).
std::string python_of_site(const std::string& self) {
  namespace fs = std::filesystem;
  const fs::path bin = fs::path(self).parent_path();
  const fs::path package = bin.parent_path(), site = package.parent_path();
  const fs::path version = site.parent_path(), lib = version.parent_path();
  static const std::regex python_version(R"(python\d+\.\d+)");
  const std::string site_name = site.filename().string();
  if (bin.filename() != "bin" || package.filename() != "tessera" ||
      (site_name != "site-packages" && site_name != "dist-packages") ||
      !std::regex_match(version.filename().string(), python_version) || lib.filename() != "lib") {
    return "";
  }
  const fs::path python = lib.parent_path() / "bin" / version.filename();
  return access(python.c_str(), X_OK) == 0 ? python.string() : "";
}

// The Python that runs scripts: TESSERA_PYTHON, else the project's virtual
// environment next to this binary's build folder (build/../.venv), where
// `import tessera` works after `make`, else the interpreter of the site
// folder this binary was installed into, else python3 from PATH. Installed by
// `pip install .`, this binary is site-packages/tessera/bin/tessera (it finds
// libtessera beside the package by its RPATH, $ORIGIN/..) and is started by
// the console script <env>/bin/tessera (python/_tessera_cli.py), which sets
// TESSERA_PYTHON, when unset, to the interpreter it was installed for: the
// ranks import that installed tessera, wherever the command is called from.
// The site folder's interpreter serves when the binary is started directly.
std::string python_for_scripts() {
  if (const char* py = std::getenv("TESSERA_PYTHON"); py && *py) return py;
  std::string self = self_path();
  auto slash = self.rfind('/');
  if (slash != std::string::npos) {
    std::string venv = self.substr(0, slash) + "/../.venv/bin/python";
    if (access(venv.c_str(), X_OK) == 0) return venv;
  }
  if (std::string site_python = python_of_site(self); !site_python.empty()) return site_python;
  return "python3";
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int positive(const std::string& flag, const std::string& v) {
  char* end = nullptr;
  long n = std::strtol(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || n <= 0 || n > 1 << 20) {
    throw std::invalid_argument("[run] " + flag + " must be a positive integer, got '" + v + "'");
  }
  return static_cast<int>(n);
}

bool is_program(const std::string& a) { return ends_with(a, ".tsl") || ends_with(a, ".py"); }

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
        trace = sys.modules.get("tessera.trace")
        if trace is not None:
            trace._stop_at_exit()
    except BaseException:
        pass
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

// `--trace DIR`: every rank records into DIR (TESSERA_TRACE, passed on like
// every TESSERA_ variable) under one run id; the directory says how many
// localities to expect, and traces of an earlier run there are removed, so a
// rank that writes none is reported missing rather than replaced by an old one.
void prepare_trace(std::string& dir, int n, const std::string& script) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw std::runtime_error("[run] cannot create the trace directory '" + dir +
                             "': " + (ec ? ec.message() : "a file of that name exists"));
  }
  dir = std::filesystem::absolute(dir).lexically_normal().string();
  static const std::regex trace_file(R"(locality-\d+\.trace)");
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (std::regex_match(entry.path().filename().string(), trace_file))
      std::filesystem::remove(entry.path(), ec);
  }
  std::string run = std::to_string(std::chrono::system_clock::now().time_since_epoch().count()) +
                    "-" + std::to_string(getpid());
  kernels::write_file_atomic(
      dir + "/tessera-run.txt",
      "run\t" + run + "\nlocalities\t" + std::to_string(n) + "\nprogram\t" + script + "\n", "run");
  setenv("TESSERA_TRACE", dir.c_str(), 1);
  setenv("TESSERA_TRACE_RUN", run.c_str(), 1);
}

// The job's secret, which authenticates the ranks' heartbeat datagrams
// (docs/security.md, "Heartbeats"): 32 random bytes, made once per `tessera
// run` (restarts differ by the launch nonce the ranks draw), given to the
// ranks in their environment as TESSERA_JOB_KEY (hex). mpirun gets the
// variable's name (-x TESSERA_JOB_KEY, like every TESSERA_ variable), never
// its value on its command line; each rank takes it out of its environment.
void make_job_key() {
  uint8_t key[32];
  if (!distributed::detail::random_bytes(key, sizeof key)) {
    throw std::runtime_error(std::string("[run] cannot draw the job's secret from the kernel "
                                         "(getrandom, /dev/urandom): ") +
                             std::strerror(errno));
  }
  std::string hex = distributed::detail::to_hex(key, sizeof key);
  setenv(distributed::detail::kJobKeyEnv, hex.c_str(), 1);
  std::memset(key, 0, sizeof key);
  std::fill(hex.begin(), hex.end(), '0');
}

struct RunOptions {
  int n = 0;
  int threads = 0;
  std::string hosts, hostfile, trace_dir, output_dir, bind_to, map_by;
  std::vector<std::pair<std::string, std::string>> mca;
  std::vector<std::string> env;          // -x VAR or VAR=VALUE
  std::vector<std::string> mpirun_args;  // after --
  bool verbose = false;
  bool help = false;
  int max_restarts = 0;
  std::string checkpoint_dir;
  std::string mesh, zero, microbatches, params;  // as given; checked by run_mesh.cpp
  bool dry_run = false;
  std::string script;
  std::vector<std::string> script_args;
};

// An Open MPI binding or mapping policy: its first word before ':' must be one
// Open MPI knows (mpirun would stop with a page of help otherwise).
void check_policy(const std::string& flag, const std::string& v,
                  const std::set<std::string>& known) {
  std::string word = v.substr(0, v.find(':'));
  if (!known.count(word)) {
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    throw std::invalid_argument("[run] " + flag + " must be one of " + list +
                                " (with Open MPI's ':' modifiers), got '" + v + "'");
  }
}

RunOptions parse_options(const std::vector<std::string>& argv) {
  RunOptions o;
  size_t i = 0;
  for (; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    std::string flag = a.rfind("--", 0) == 0 ? a.substr(0, a.find('=')) : a;
    auto value = [&]() -> std::string {
      if (flag.size() < a.size()) return a.substr(flag.size() + 1);
      if (i + 1 >= argv.size())
        throw std::invalid_argument("[run] option " + flag + " needs a value");
      return argv[++i];
    };
    if (a == "-n" || a == "-np" || flag == "--np" || a.rfind("-n=", 0) == 0) {
      if (a.rfind("-n=", 0) == 0) {
        o.n = positive("-n", a.substr(3));
      } else {
        o.n = positive(flag, value());
      }
    } else if (flag == "--hosts" || flag == "--host") {
      o.hosts = value();
      parse_hosts(o.hosts);
    } else if (flag == "--hostfile" || flag == "--machinefile") {
      o.hostfile = value();
    } else if (flag == "--threads") {
      o.threads = positive("--threads", value());
    } else if (flag == "--trace") {
      o.trace_dir = value();
    } else if (flag == "--checkpoint-dir") {
      o.checkpoint_dir = value();
      if (o.checkpoint_dir.empty())
        throw std::invalid_argument("[run] --checkpoint-dir needs a folder, got ''");
    } else if (flag == "--max-restarts") {
      std::string v = value();
      char* end = nullptr;
      long k = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || k < 0 || k > 1000000) {
        throw std::invalid_argument("[run] --max-restarts must be an integer >= 0, got '" + v +
                                    "'");
      }
      o.max_restarts = static_cast<int>(k);
    } else if (flag == "--mesh") {
      o.mesh = value();
      parse_mesh(o.mesh, "--mesh");
    } else if (flag == "--zero") {
      o.zero = value();
      parse_zero(o.zero, "--zero");
    } else if (flag == "--microbatches") {
      o.microbatches = value();
      parse_microbatches(o.microbatches, "--microbatches");
    } else if (flag == "--params") {
      o.params = value();
      parse_params(o.params, "--params");
    } else if (a == "--dry-run") {
      o.dry_run = true;
    } else if (flag == "--output-dir") {
      o.output_dir = value();
      if (o.output_dir.empty())
        throw std::invalid_argument("[run] --output-dir needs a directory, got ''");
    } else if (flag == "--mca" || a == "-mca") {
      if (i + 2 >= argv.size())
        throw std::invalid_argument("[run] " + a + " needs a KEY and a VALUE");
      std::string key = argv[i + 1], v = argv[i + 2];
      i += 2;
      if (key.empty() || !valid_env_name(key)) {
        throw std::invalid_argument("[run] --mca: '" + key +
                                    "' is not an Open MPI setting name (letters, digits, _)");
      }
      o.mca.emplace_back(key, v);
    } else if (a == "-x") {
      if (i + 1 >= argv.size())
        throw std::invalid_argument("[run] -x needs a variable: -x VAR or -x VAR=VALUE");
      std::string item = argv[++i];
      std::string name = item.substr(0, item.find('='));
      if (!valid_env_name(name))
        throw std::invalid_argument("[run] -x: '" + item + "' is not VAR or VAR=VALUE");
      if (item.find('=') == std::string::npos && !std::getenv(name.c_str())) {
        throw std::invalid_argument("[run] -x " + name + ": no variable " + name +
                                    " in this environment (set it, or give -x " + name + "=VALUE)");
      }
      o.env.push_back(item);
    } else if (flag == "--bind-to") {
      o.bind_to = value();
      check_policy("--bind-to", o.bind_to,
                   {"none", "hwthread", "core", "l1cache", "l2cache", "l3cache", "socket", "numa",
                    "board", "cpu-list"});
    } else if (flag == "--map-by") {
      o.map_by = value();
      check_policy("--map-by", o.map_by,
                   {"slot", "hwthread", "core", "l1cache", "l2cache", "l3cache", "socket", "numa",
                    "board", "node", "seq", "dist", "ppr"});
    } else if (a == "--help" || a == "-h") {
      o.help = true;  // before the program only: after it, --help is the program's
      return o;
    } else if (a == "--verbose" || a == "-v") {
      o.verbose = true;
    } else if (a == "--") {
      for (++i; i < argv.size() && !is_program(argv[i]); ++i) o.mpirun_args.push_back(argv[i]);
      if (i >= argv.size()) {
        throw std::invalid_argument(
            "[run] no program after '--': the options for mpirun end at the first .tsl or .py "
            "file");
      }
      --i;
    } else if (a.size() > 1 && a[0] == '-') {
      throw std::invalid_argument("[run] unknown option '" + a +
                                  "' (see `tessera run --help`; pass options for "
                                  "mpirun after --)");
    } else {
      o.script = a;
      o.script_args.assign(argv.begin() + static_cast<long>(i) + 1, argv.end());
      break;
    }
  }
  if (!o.hosts.empty() && !o.hostfile.empty()) {
    throw std::invalid_argument("[run] give --hosts or --hostfile, not both");
  }
  return o;
}

// The hosts named by `scontrol show hostnames NODELIST`, or by tessera's own
// reading of the node list where scontrol is not installed; `source` is the
// variable the list came from. The list is counted before either expands it.
std::vector<std::string> slurm_hosts(const std::string& nodelist, const std::string& source,
                                     bool full_names) {
  // A malformed list, or one of too many hosts, is refused without expanding
  // it (expand_nodelist counts first, and throws naming the count).
  if (nodelist_size(nodelist, source) > kMaxHosts) return expand_nodelist(nodelist, source);
  std::string cmd = "scontrol show hostnames '" + nodelist + "' 2>/dev/null";
  if (nodelist.find('\'') == std::string::npos &&
      std::system("command -v scontrol >/dev/null 2>&1") == 0) {
    if (FILE* p = popen(cmd.c_str(), "r")) {
      std::vector<std::string> hosts;
      char line[1024];
      while (hosts.size() <= kMaxHosts && std::fgets(line, sizeof line, p)) {
        std::string h = line;
        while (!h.empty() && std::isspace(static_cast<unsigned char>(h.back()))) h.pop_back();
        if (!h.empty()) hosts.push_back(h);
      }
      if (pclose(p) == 0 && !hosts.empty() && hosts.size() <= kMaxHosts) {
        for (const auto& h : hosts) {
          if (auto problem = host_name_problem(h, full_names); !problem.empty())
            throw std::invalid_argument("[run] " + problem + " (" + source + ")");
        }
        return hosts;
      }
    }
  }
  return expand_nodelist(nodelist, source, full_names);
}

// Where the user set an Open MPI setting: --mca, the arguments after --, or
// OMPI_MCA_<key> in the environment. The value, or nullopt.
std::optional<std::string> user_mca(const RunOptions& o, const std::string& key) {
  for (const auto& [k, v] : o.mca) {
    if (k == key) return v;
  }
  for (size_t i = 0; i + 1 < o.mpirun_args.size(); ++i) {
    const auto& a = o.mpirun_args[i];
    if ((a == "--mca" || a == "-mca" || a == "--gmca" || a == "-gmca") &&
        o.mpirun_args[i + 1] == key) {
      return i + 2 < o.mpirun_args.size() ? o.mpirun_args[i + 2] : "";
    }
  }
  if (const char* v = std::getenv(("OMPI_MCA_" + key).c_str())) return std::string(v);
  return std::nullopt;
}

// Signals that reach the launcher, through a pipe so that poll() wakes up.
int signal_pipe[2] = {-1, -1};

void on_signal(int sig) {
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = write(signal_pipe[1], &b, 1);
  (void)ignored;
}

// The keeper: a process of its own session that stops mpirun's process group
// when the launcher dies without saying it is done (SIGKILL, a crash), since
// nothing else would: mpirun gets SIGTERM from PR_SET_PDEATHSIG, but a mpirun
// stuck on a lost host never ends by itself. It reads the launcher's pipe:
// one byte means done, end of file means the launcher is gone.
pid_t start_keeper(pid_t mpirun, int& keep_fd) {
  int keep[2];
  if (pipe2(keep, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("[run] pipe failed: ") + std::strerror(errno));
  pid_t keeper = fork();
  if (keeper < 0)
    throw std::runtime_error(std::string("[run] fork failed: ") + std::strerror(errno));
  if (keeper == 0) {
    setsid();
    // Only the pipe stays open, so the keeper holds no one's output open.
    int null = open("/dev/null", O_RDWR);
    for (int fd = 0; fd < 3; ++fd) dup2(null, fd);
    for (int fd = 3; fd < 1024; ++fd) {
      if (fd != keep[0]) close(fd);
    }
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGPIPE}) signal(sig, SIG_IGN);
    char b;
    ssize_t got;
    while ((got = read(keep[0], &b, 1)) < 0 && errno == EINTR) {
    }
    if (got == 1) _exit(0);
    kill(-mpirun, SIGTERM);
    for (int k = 0; k < 30 && kill(-mpirun, 0) == 0; ++k) usleep(100000);
    kill(-mpirun, SIGKILL);
    _exit(0);
  }
  close(keep[0]);
  keep_fd = keep[1];
  return keeper;
}

// Starts mpirun in a process group of its own, relays its output through the
// filter, and bounds every wait (see the comment at the top).
// What the last launch said about its failure (its last line), for the
// restart line of --max-restarts; the signal that stopped it, or 0 (a job
// stopped by the user or the batch system is not restarted).
std::string last_failure;
int last_stop_signal = 0;

int supervise(std::vector<std::string>& cmd, OutputFilter& filter, const RunOptions& o) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0 ||
      pipe2(signal_pipe, O_CLOEXEC) != 0) {
    throw std::runtime_error(std::string("[run] pipe failed: ") + std::strerror(errno));
  }
  fcntl(signal_pipe[1], F_SETFL, O_NONBLOCK);
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t launcher = getpid();
  pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("[run] fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    // Its own process group: a terminal's Ctrl-C or a batch system's signal
    // to the launcher's group reaches the launcher, which stops the job in
    // order, and the group is what the launcher (or the keeper) kills.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != launcher) _exit(127);
    dup2(out_pipe[1], 1);
    dup2(err_pipe[1], 2);
    // A process group in the background that reads the terminal is stopped
    // (SIGTTIN): mpirun forwards stdin to rank 0, so give it none then.
    if (isatty(0)) {
      int null = open("/dev/null", O_RDONLY);
      dup2(null, 0);
    }
    std::vector<char*> args;
    for (auto& s : cmd) args.push_back(s.data());
    args.push_back(nullptr);
    execvp(args[0], args.data());
    std::fprintf(
        stderr,
        "tessera run: cannot start mpirun: %s (install openmpi-bin: scripts/install-deps)\n",
        std::strerror(errno));
    _exit(127);
  }
  setpgid(pid, pid);
  close(out_pipe[1]);
  close(err_pipe[1]);
  int keep_fd = -1;
  start_keeper(pid, keep_fd);
  struct sigaction sa{};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) sigaction(sig, &sa, nullptr);

  using Clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  using std::chrono::seconds;
  std::optional<Clock::time_point> stop_at, kill_at, drain_until;
  int stop_signal = 0, status = 0;
  bool done = false, killed = false;
  pollfd fds[3] = {{out_pipe[0], POLLIN, 0}, {err_pipe[0], POLLIN, 0}, {signal_pipe[0], POLLIN, 0}};
  char buf[65536];
  for (;;) {
    int ready = poll(fds, 3, 100);
    if (ready < 0 && errno != EINTR)
      throw std::runtime_error(std::string("[run] poll failed: ") + std::strerror(errno));
    for (int k = 0; ready > 0 && k < 2; ++k) {
      if (fds[k].fd < 0 || !(fds[k].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t got = read(fds[k].fd, buf, sizeof buf);
      if (got > 0) {
        filter.feed(k + 1, buf, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        close(fds[k].fd);
        fds[k].fd = -1;
      }
    }
    auto now = Clock::now();
    if (ready > 0 && (fds[2].revents & POLLIN)) {
      unsigned char sig;
      while (read(signal_pipe[0], &sig, 1) == 1) {
        if (stop_signal == 0) {
          stop_signal = sig;
          std::fprintf(stderr, "tessera run: got %s: stopping every rank\n",
                       signal_name(sig).c_str());
          kill(pid, SIGTERM);
          kill_at = now + seconds(5);
        } else if (!killed) {
          kill(-pid, SIGKILL);
          killed = true;
        }
        fcntl(signal_pipe[0], F_SETFL, O_NONBLOCK);
      }
    }
    // A failure ends the job: mpirun does that itself within a second or
    // so, unless it waits on a host it lost; then it is stopped, and killed.
    if (!done && filter.failure_seen() && !stop_at && !kill_at) stop_at = now + seconds(3);
    if (!done && stop_at && now >= *stop_at && !kill_at) {
      if (o.verbose)
        std::fprintf(stderr, "tessera run: mpirun has not ended the job: stopping it\n");
      kill(pid, SIGTERM);
      kill_at = now + seconds(3);
    }
    if (!done && kill_at && now >= *kill_at && !killed) {
      kill(-pid, SIGKILL);
      killed = true;
    }
    if (!done && waitpid(pid, &status, WNOHANG) == pid) {
      done = true;
      // What mpirun relayed is read to the end, unless a rank's guard that
      // lost mpirun still holds the pipes open.
      drain_until = now + seconds(2);
    }
    if (done && ((fds[0].fd < 0 && fds[1].fd < 0) || now >= *drain_until)) break;
  }
  for (int k = 0; k < 2; ++k) {
    if (fds[k].fd >= 0) close(fds[k].fd);
  }
  filter.finish();
  // The keeper may go: the job is over.
  ssize_t ignored = write(keep_fd, "x", 1);
  (void)ignored;
  close(keep_fd);
  for (int sig : {SIGTERM, SIGINT, SIGHUP}) signal(sig, SIG_DFL);
  close(signal_pipe[0]);
  close(signal_pipe[1]);
  int code =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  if (!o.trace_dir.empty()) {
    std::fprintf(stderr, "trace: %s (view it: tessera report %s)\n", o.trace_dir.c_str(),
                 o.trace_dir.c_str());
  }
  if (stop_signal != 0) {
    last_stop_signal = stop_signal;
    std::fprintf(stderr, "tessera run: stopped by %s; the job was ended%s\n",
                 signal_name(stop_signal).c_str(), killed ? " (mpirun killed)" : "");
    return 128 + stop_signal;
  }
  if (code == 0 && !filter.failure_seen()) {
    if (auto note = filter.warnings_note()) std::fprintf(stderr, "%s\n", note->c_str());
    return 0;
  }
  for (const auto& line : filter.failure_report(code)) {
    std::fprintf(stderr, "%s\n", line.c_str());
    last_failure = line.rfind("tessera run: ", 0) == 0 ? line.substr(13) : line;
  }
  return code == 0 ? 1 : code;
}

// The newest committed checkpoint of this job in DIR: every fit call is a run
// folder DIR/fit<k>-<run id>-<identity> of ckpt-<step> folders (fit checks
// the manifest and checksums when it resumes); the newest is the one of the
// highest fit ordinal k, then the highest step. Links are not followed.
// "" when there is none.
std::string newest_checkpoint(const std::string& dir, const std::string& run_id) {
  static const std::regex ckpt(R"(ckpt-([1-9]\d{0,17}))");
  static const std::regex run(R"(fit([1-9]\d{0,8})-([A-Za-z0-9_.]{1,64})-[0-9a-f]{12})");
  namespace fs = std::filesystem;
  std::error_code ec;
  long long best_fit = -1, best_step = -1;
  std::string path;
  for (fs::directory_iterator r(dir, ec), end; !ec && r != end; r.increment(ec)) {
    std::smatch m;
    const std::string name = r->path().filename().string();
    std::error_code ec2;
    if (!std::regex_match(name, m, run) || m[2] != run_id || !r->is_directory(ec2) ||
        r->is_symlink(ec2)) {
      continue;
    }
    const long long fit = std::stoll(m[1]);
    if (fit < best_fit) continue;
    for (fs::directory_iterator c(r->path(), ec2); !ec2 && c != end; c.increment(ec2)) {
      std::smatch s;
      const std::string cname = c->path().filename().string();
      std::error_code ec3;
      if (!std::regex_match(cname, s, ckpt) || c->is_symlink(ec3) ||
          !fs::is_regular_file(fs::symlink_status(c->path() / "manifest.json", ec3))) {
        continue;
      }
      const long long step = std::stoll(s[1]);
      if (fit > best_fit || step > best_step) {
        best_fit = fit, best_step = step, path = c->path().string();
      }
    }
  }
  return path;
}

// The run id of this `tessera run`, made once and kept across its
// --max-restarts relaunches: the ranks get it in TESSERA_RUN_ID, and fit
// resumes only the checkpoints of its own run. A TESSERA_RUN_ID the user set
// (to continue a run of an earlier launch) is kept if it is well formed;
// under SLURM it is "slurm<SLURM_JOB_ID>", else random.
std::string prepare_run_id() {
  static const std::regex valid(R"([A-Za-z0-9_.]{1,64})");
  const char* given = std::getenv("TESSERA_RUN_ID");
  if (given != nullptr && *given != '\0') {
    if (!std::regex_match(given, valid)) {
      throw std::invalid_argument(
          "[run] TESSERA_RUN_ID must be 1 to 64 letters, digits, '_' or '.', got '" +
          std::string(given).substr(0, 80) + "' (environment)");
    }
    return given;
  }
  // Under SLURM the job's id: a job SLURM requeues (preempted, or a node
  // failed) is the same job, and its fits resume their runs.
  if (const char* job = std::getenv("SLURM_JOB_ID"); job != nullptr && *job != '\0') {
    std::string id = std::string("slurm") + job;
    if (std::regex_match(id, valid)) {
      setenv("TESSERA_RUN_ID", id.c_str(), 1);
      return id;
    }
  }
  std::random_device rd;
  char id[17];
  std::snprintf(id, sizeof id, "%08x%08x", static_cast<unsigned>(rd()),
                static_cast<unsigned>(rd()));
  setenv("TESSERA_RUN_ID", id, 1);
  return id;
}

// `--checkpoint-dir DIR`: created if needed; the ranks find it in
// TESSERA_CHECKPOINT_DIR (passed on like every TESSERA_ variable). Returns
// its absolute path, or "" without the option.
std::string prepare_checkpoint_dir(const std::string& dir) {
  if (dir.empty()) return "";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw std::runtime_error("[run] cannot create the checkpoint folder '" + dir +
                             "': " + (ec ? ec.message() : "a file of that name exists"));
  }
  std::string abs = std::filesystem::absolute(dir).lexically_normal().string();
  setenv("TESSERA_CHECKPOINT_DIR", abs.c_str(), 1);
  return abs;
}

// --mesh, --zero, --microbatches (or TESSERA_MESH, TESSERA_ZERO,
// TESSERA_MICROBATCHES from this environment) checked against each other and
// the number of ranks (`n_source` names where that came from), and set in the
// environment every rank gets. With --dry-run, prints the placement and the
// model-state memory and returns true: nothing is started.
bool prepare_mesh(const RunOptions& o, const std::string& n_source,
                  const std::vector<std::string>& hosts, bool slurm) {
  auto setting = [](const std::string& given, const char* var, std::string option,
                    std::string& source) {
    source = option;
    if (!given.empty()) return given;
    const char* env = std::getenv(var);
    if (env == nullptr || *env == '\0') return std::string();
    source = std::string(var) + " (environment)";
    return std::string(env);
  };
  std::string mesh_source, zero_source, micro_source;
  const std::string mesh_text = setting(o.mesh, "TESSERA_MESH", "--mesh", mesh_source);
  const std::string zero_text = setting(o.zero, "TESSERA_ZERO", "--zero", zero_source);
  const std::string micro_text =
      setting(o.microbatches, "TESSERA_MICROBATCHES", "--microbatches", micro_source);
  MeshSizes mesh;
  mesh.data = o.n;
  if (!mesh_text.empty()) {
    mesh = parse_mesh(mesh_text, mesh_source);
    if (mesh.product() != o.n) {
      throw std::invalid_argument(
          "[run] " + mesh_source + " " + mesh_text + " makes " + std::to_string(mesh.product()) +
          " ranks (data " + std::to_string(mesh.data) + " x tensor " + std::to_string(mesh.tensor) +
          " x pipeline " + std::to_string(mesh.pipeline) + "), but " + n_source + " is " +
          std::to_string(o.n) +
          " (the product of the sizes must equal the number of ranks; missing axes are 1)");
    }
    setenv("TESSERA_MESH", mesh.text().c_str(), 1);
  }
  const int zero = zero_text.empty() ? 0 : parse_zero(zero_text, zero_source);
  if (!zero_text.empty()) setenv("TESSERA_ZERO", std::to_string(zero).c_str(), 1);
  int micro = 0;
  if (!micro_text.empty()) {
    micro = parse_microbatches(micro_text, micro_source);
    if (micro < mesh.pipeline) {
      throw std::invalid_argument("[run] " + micro_source + " " + std::to_string(micro) +
                                  " is fewer micro-batches than the pipeline's " +
                                  std::to_string(mesh.pipeline) + " stages (" + mesh_source + " " +
                                  mesh_text + "): every stage needs at least one micro-batch");
    }
    setenv("TESSERA_MICROBATCHES", std::to_string(micro).c_str(), 1);
  }
  if (!o.params.empty() && !o.dry_run) {
    throw std::invalid_argument("[run] --params " + o.params +
                                " is for --dry-run (the model-state memory it prints)");
  }
  if (!o.dry_run) return false;
  DryRun d;
  d.ranks = o.n;
  d.mesh = mesh;
  d.zero = zero;
  d.microbatches = micro;
  if (!o.params.empty()) d.params = parse_params(o.params, "--params");
  d.map_by = o.map_by;
  if (!o.hosts.empty()) {
    d.hosts = host_slots_of_list(o.hosts);
  } else if (!o.hostfile.empty()) {
    d.hosts = host_slots_of_file(o.hostfile);
  } else if (slurm && !hosts.empty()) {
    d.host_note = "hosts not predicted: SLURM places the ranks on " + std::to_string(hosts.size()) +
                  " hosts of the allocation";
  }
  const std::string report = dry_run_report(d);
  std::fwrite(report.data(), 1, report.size(), stdout);
  std::fflush(stdout);
  return true;
}

}  // namespace

int cmd_run(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "--rank-guard") return guard_rank({argv.begin() + 1, argv.end()});
  RunOptions o = parse_options(argv);
  if (o.help) {
    std::fputs(kRunUsage, stdout);
    return 0;
  }
  // SLURM: inside an allocation mpirun finds the hosts and starts its daemons
  // with srun by itself; tessera only needs the ranks and the host names.
  std::vector<std::string> hosts;
  // Host names are checked against what Open MPI keeps of them: the part
  // before the first '.', or all with orte_keep_fqdn_hostnames.
  const auto keep_fqdn = user_mca(o, "orte_keep_fqdn_hostnames");
  const std::set<std::string> no = {"0", "f", "false", "n", "no"};
  const bool full_names = keep_fqdn && !keep_fqdn->empty() && !no.count(*keep_fqdn);
  const char* slurm_job = std::getenv("SLURM_JOB_ID");
  bool slurm = slurm_job && o.hosts.empty() && o.hostfile.empty();
  std::string n_source = "-n";
  if (slurm) {
    if (o.n == 0) {
      const char* tasks =
          std::getenv("SLURM_NTASKS") ? std::getenv("SLURM_NTASKS") : std::getenv("SLURM_NPROCS");
      if (tasks) {
        o.n = positive("SLURM_NTASKS", tasks);
        n_source = "SLURM_NTASKS";
      }
    }
    const char* var = std::getenv("SLURM_JOB_NODELIST") ? "SLURM_JOB_NODELIST" : "SLURM_NODELIST";
    if (const char* list = std::getenv(var)) hosts = slurm_hosts(list, var, full_names);
  }
  if (!o.hosts.empty()) hosts = parse_hosts(o.hosts, full_names);
  if (!o.hostfile.empty()) hosts = read_hostfile(o.hostfile, full_names);
  if (o.n == 0) {
    throw std::invalid_argument(
        "[run] needs the number of localities: tessera run -n N FILE (see tessera run --help)");
  }
  // The mesh, ZeRO stage and micro-batches, checked before anything starts
  // and given to every rank (TESSERA_MESH, TESSERA_ZERO, TESSERA_MICROBATCHES);
  // with --dry-run, the placement and memory are printed instead.
  if (prepare_mesh(o, n_source, hosts, slurm)) return 0;
  if (o.script.empty()) throw std::invalid_argument("[run] needs a program: a .tsl or .py file");
  bool tsl = ends_with(o.script, ".tsl");
  if (!is_program(o.script)) {
    throw std::invalid_argument("[run] the program must be a .tsl or .py file, got '" + o.script +
                                "'");
  }
  if (access(o.script.c_str(), R_OK) != 0) {
    throw std::runtime_error("[run] cannot open '" + o.script + "': " + std::strerror(errno));
  }
  // Set before the environment to pass on is gathered (both are TESSERA_
  // variables); TESSERA_RESTART is updated for each launch.
  const std::string checkpoint_dir = prepare_checkpoint_dir(o.checkpoint_dir);
  const std::string run_id = prepare_run_id();
  setenv("TESSERA_RESTART", "0", 1);
  if (!checkpoint_dir.empty()) {
    // The id a later launch needs to continue this one's runs (a fresh
    // launch starts runs of its own: docs/resilience.md).
    std::fprintf(stderr,
                 "tessera run: checkpoints in %s, run id %s (TESSERA_RUN_ID=%s continues it)\n",
                 checkpoint_dir.c_str(), run_id.c_str(), run_id.c_str());
  }
  bool several_hosts = hosts.size() > 1 || (hosts.size() == 1 && !is_local_host(hosts[0]));

  // Threads: --threads or TESSERA_THREADS everywhere, else each rank's guard
  // divides its own host's cores among the ranks there.
  if (o.threads == 0) {
    if (const char* t = std::getenv("TESSERA_THREADS"); t && *t)
      o.threads = positive("TESSERA_THREADS", t);
  }
  if (o.threads > 0) setenv("TESSERA_THREADS", std::to_string(o.threads).c_str(), 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
  setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
  if (!o.trace_dir.empty()) prepare_trace(o.trace_dir, o.n, o.script);
  make_job_key();  // before the environment to pass on is gathered

  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::string> cmd = {"mpirun", "-n", std::to_string(o.n), "--tag-output"};
  // Threads, not MPI's process binding, share the cores: each rank's task
  // arena is sized to its share, and binding one rank to one core would
  // leave its workers on that core.
  cmd.insert(cmd.end(), {"--bind-to", o.bind_to.empty() ? "none" : o.bind_to});
  if (!o.map_by.empty()) cmd.insert(cmd.end(), {"--map-by", o.map_by});
  if (o.n > cores && hosts.empty()) cmd.push_back("--oversubscribe");
  if (!o.hosts.empty()) cmd.insert(cmd.end(), {"--host", o.hosts});
  if (!o.hostfile.empty()) cmd.insert(cmd.end(), {"--hostfile", o.hostfile});
  for (const auto& [k, v] : o.mca) cmd.insert(cmd.end(), {"--mca", k, v});
  auto set_mca = [&](const std::string& key, const std::string& v) {
    if (!user_mca(o, key)) cmd.insert(cmd.end(), {"--mca", key, v});
  };

  // The network: with several hosts, the one this machine's routes to them
  // use, so that an address of another interface (a management or container
  // network) is never tried; Open MPI would wait on it and hang.
  std::string network;
  if (several_hosts) {
    std::string why;
    if (auto net = network_to_hosts(hosts, why)) {
      network = *net;
      if (!user_mca(o, "btl_tcp_if_include") && !user_mca(o, "btl_tcp_if_exclude")) {
        cmd.insert(cmd.end(), {"--mca", "btl_tcp_if_include", network});
      }
      if (!user_mca(o, "oob_tcp_if_include") && !user_mca(o, "oob_tcp_if_exclude")) {
        cmd.insert(cmd.end(), {"--mca", "oob_tcp_if_include", network});
      }
    } else if (o.verbose) {
      std::fprintf(stderr, "tessera run: leaving the choice of network to Open MPI: %s\n",
                   why.c_str());
    }
    // A host or link lost: mpirun and the daemons notice within ~5 s
    // (keepalive probes) instead of TCP's ~15 minutes of retries.
    set_mca("oob_tcp_keepalive_time", "2");
    set_mca("oob_tcp_keepalive_intvl", "1");
    set_mca("oob_tcp_keepalive_probes", "3");
  }

  // The environment every rank gets: -x for each variable, or, when the user
  // set mca_base_env_list (which Open MPI refuses to combine with -x), added
  // to that list.
  std::vector<std::string> forward;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    std::string name = kv.substr(0, kv.find('='));
    if (forwarded_by_default(name)) forward.push_back(name);
  }
  for (const auto& item : o.env) {
    std::string name = item.substr(0, item.find('='));
    forward.erase(std::remove(forward.begin(), forward.end(), name), forward.end());
    forward.push_back(item);
  }
  if (auto list = user_mca(o, "mca_base_env_list")) {
    std::string merged = *list;
    for (const auto& f : forward) merged += (merged.empty() ? "" : ";") + f;
    bool in_args = false;
    for (size_t k = 0; k + 1 < o.mpirun_args.size(); ++k) {
      if (o.mpirun_args[k].find("mca") != std::string::npos &&
          o.mpirun_args[k + 1] == "mca_base_env_list") {
        in_args = true;
      }
    }
    if (in_args) {
      throw std::invalid_argument(
          "[run] give mca_base_env_list with --mca (before --), so that tessera can add "
          "the variables it passes on");
    }
    auto own = std::find_if(cmd.begin(), cmd.end(),
                            [](const std::string& s) { return s == "mca_base_env_list"; });
    if (own != cmd.end()) {
      *(own + 1) = merged;
    } else {
      cmd.insert(cmd.end(), {"--mca", "mca_base_env_list", merged});
    }
  } else {
    for (const auto& f : forward) cmd.insert(cmd.end(), {"-x", f});
  }
  cmd.insert(cmd.end(), o.mpirun_args.begin(), o.mpirun_args.end());

  cmd.insert(cmd.end(), {self_path(), "run", "--rank-guard"});
  if (o.threads == 0) cmd.push_back("--threads-per-host");
  if (tsl) {
    cmd.insert(cmd.end(), {self_path(), "eval", o.script});
  } else {
    cmd.insert(cmd.end(), {python_for_scripts(), "-c", kPythonBootstrap, o.script});
  }
  cmd.insert(cmd.end(), o.script_args.begin(), o.script_args.end());
  if (o.verbose) {
    std::string line;
    for (const auto& c : cmd) {
      std::string shown = c == kPythonBootstrap ? "BOOTSTRAP" : c;
      if (shown.find_first_of(" \n;'\"$") != std::string::npos) shown = "'" + shown + "'";
      line += (line.empty() ? "" : " ") + shown;
    }
    std::fprintf(stderr, "tessera run: %s%s\n", line.c_str(),
                 tsl ? "" : " (BOOTSTRAP: the Python bootstrap)");
  }

  OutputOptions out_opt;
  out_opt.ranks = o.n;
  out_opt.show_hosts = several_hosts;
  out_opt.verbose = o.verbose;
  out_opt.output_dir = o.output_dir;
  out_opt.network = network;
  if (!o.output_dir.empty()) {
    std::fprintf(stderr, "tessera run: the output of rank r goes to %s/rank-<r>.log\n",
                 o.output_dir.c_str());
  }
  // --max-restarts: the job is launched again after a failure (not after a
  // stop by a signal), with a fresh output filter, up to max_restarts times.
  for (int attempt = 0;; ++attempt) {
    setenv("TESSERA_RESTART", std::to_string(attempt).c_str(), 1);
    last_failure.clear();
    // Each launch appends to the ranks' logs, after a line of its own.
    out_opt.launch = attempt + 1;
    out_opt.launches = o.max_restarts + 1;
    OutputFilter filter(out_opt);
    const int code = supervise(cmd, filter, o);
    if (code == 0 || last_stop_signal != 0) return code;
    const std::string why = last_failure.empty()
                                ? "the job failed (exit status " + std::to_string(code) + ")"
                                : last_failure;
    if (attempt >= o.max_restarts) {
      if (o.max_restarts > 0) {
        std::fprintf(stderr, "tessera run: giving up after %d restart%s; the last failure: %s\n",
                     o.max_restarts, o.max_restarts == 1 ? "" : "s", why.c_str());
      }
      return code;
    }
    std::string from = checkpoint_dir.empty() ? "" : newest_checkpoint(checkpoint_dir, run_id);
    if (from.empty()) {
      from = checkpoint_dir.empty()
                 ? "the script's own checkpoints"
                 : "the start (no complete checkpoint in " + checkpoint_dir + " yet)";
    }
    // The line before this one names the rank that failed and how.
    std::fprintf(stderr, "tessera run: restart %d of %d from %s\n", attempt + 1, o.max_restarts,
                 from.c_str());
    std::fflush(stderr);
  }
}

}  // namespace tessera::cli
