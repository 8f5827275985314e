#include "tessera/cli/run_output.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <stdexcept>

#include "tessera/distributed/comm.hpp"

namespace tessera::cli {

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "an unknown signal";
}

Tag parse_tag(std::string_view text) {
  // "[" digits "," digits "]<" ("stdout" | "stderr") ">:"
  Tag t;
  auto digits = [&](size_t at) {
    size_t end = at;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9') ++end;
    return end;
  };
  if (text.empty() || text[0] != '[') return t;
  size_t job_end = digits(1);
  if (job_end == 1 || job_end >= text.size() || text[job_end] != ',') return t;
  size_t rank_end = digits(job_end + 1);
  if (rank_end == job_end + 1) return t;
  std::string_view rest = text.substr(rank_end);
  bool err;
  if (rest.starts_with("]<stdout>:")) {
    err = false;
  } else if (rest.starts_with("]<stderr>:")) {
    err = true;
  } else {
    return t;
  }
  int rank = -1;
  auto [end, ec] = std::from_chars(text.data() + job_end + 1, text.data() + rank_end, rank);
  (void)end;
  if (ec != std::errc{}) return t;  // a rank beyond int is no tag
  t.rank = rank;
  t.err = err;
  t.length = rank_end + std::strlen("]<stdout>:");
  return t;
}

int log_name_rank(std::string_view name) {
  if (!name.starts_with("rank-") || !name.ends_with(".log")) return -1;
  std::string_view digits = name.substr(5, name.size() - 9);
  if (digits.empty() || (digits.size() > 1 && digits[0] == '0')) return -1;
  int rank = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
  if (ec != std::errc{} || end != digits.data() + digits.size()) return -1;
  return rank;
}

bool is_error_line(std::string_view line) {
  size_t at = !line.empty() && line[0] == '[' ? 1 : 0;
  size_t end = at;
  auto word = [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  };
  while (end < line.size() && word(line[end])) ++end;
  std::string_view w = line.substr(at, end - at);
  return w.ends_with("Error") || w.ends_with("Exception");
}

OutputFilter::OutputFilter(OutputOptions options) : opt_(std::move(options)) {
  if (opt_.output_dir.empty()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(opt_.output_dir, ec);
  if (ec || !fs::is_directory(opt_.output_dir)) {
    throw std::runtime_error("[run] --output-dir: cannot create the directory '" + opt_.output_dir +
                             "': " + (ec ? ec.message() : "a file of that name exists"));
  }
  if (access(opt_.output_dir.c_str(), W_OK | X_OK) != 0) {
    throw std::runtime_error("[run] --output-dir: cannot write in '" + opt_.output_dir +
                             "': " + std::strerror(errno));
  }
  // The logs are opened as their ranks write (thousands of ranks would not
  // fit the descriptor limit at once): before that, only the directory is
  // read. The first launch removes every log (rank-<r>.log, r without leading
  // zeros) of an earlier run, which would pass for this run's, and leaves any
  // other name alone; a name of this run's ranks that is not a regular file
  // (a planted link, FIFO or directory) is refused here, before the job
  // starts.
  for (const auto& entry : fs::directory_iterator(opt_.output_dir, ec)) {
    const std::string name = entry.path().filename().string();
    const int rank = log_name_rank(name);
    if (rank < 0) continue;
    struct stat st{};
    const bool regular = lstat(entry.path().c_str(), &st) == 0 && S_ISREG(st.st_mode);
    if (rank < opt_.ranks && !regular) {
      throw std::runtime_error("[run] cannot write a rank's log: '" + log_path(rank) +
                               "' is not a regular file (--output-dir " + opt_.output_dir + ")");
    }
    std::error_code rm;
    if (opt_.launch <= 1) fs::remove(entry.path(), rm);
  }
  if (ec) {
    throw std::runtime_error("[run] --output-dir: cannot read the directory '" + opt_.output_dir +
                             "': " + ec.message());
  }
  if (opt_.launches > 1) {
    char when[32] = "?";
    std::time_t now = std::time(nullptr);
    std::tm utc{};
    if (gmtime_r(&now, &utc)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
    header_ = "=== launch " + std::to_string(opt_.launch) + " of " +
              std::to_string(opt_.launches) + ", " + when + " ===\n";
  }
  if (opt_.max_open_logs > 0) {
    max_open_ = static_cast<size_t>(opt_.max_open_logs);
  } else {
    // Half the descriptor limit, at most kMaxOpenLogs: mpirun's pipes and the
    // launcher's own files keep the rest.
    constexpr rlim_t kMaxOpenLogs = 1024;
    struct rlimit lim{};
    rlim_t soft = getrlimit(RLIMIT_NOFILE, &lim) == 0 ? lim.rlim_cur : 1024;
    max_open_ = static_cast<size_t>(std::clamp<rlim_t>(soft / 2, 1, kMaxOpenLogs));
  }
}

OutputFilter::~OutputFilter() {
  for (auto& [rank, log] : open_) close(log.fd);
}

std::string OutputFilter::log_path(int rank) const {
  return opt_.output_dir + "/rank-" + std::to_string(rank) + ".log";
}

namespace {

// Writes all of `text` to `fd`; false (errno set) if it could not.
bool write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    ssize_t n = write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

}  // namespace

int OutputFilter::log_file(int rank) {
  if (auto it = open_.find(rank); it != open_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.at);
    return it->second.fd;
  }
  if (log_failed_.count(rank)) return -1;
  while (!open_.empty() && open_.size() >= max_open_) {
    int oldest = lru_.back();
    lru_.pop_back();
    close(open_[oldest].fd);
    open_.erase(oldest);
  }
  const std::string path = log_path(rank);
  auto failed = [&](const std::string& why) {
    log_failed_.insert(rank);
    std::fprintf(stderr, "tessera run: cannot write %s (%s); rank %d's output goes here instead\n",
                 path.c_str(), why.c_str(), rank);
    std::fflush(stderr);
    return -1;
  };
  // The first launch makes the log fresh, a later one appends; a log closed
  // to make room and opened again appends. O_NOFOLLOW: a symlink planted in a
  // shared directory is not written through; O_NONBLOCK: a FIFO planted there
  // fails at once (no reader) or is refused below, instead of blocking the
  // launcher.
  const bool fresh = !log_made_.count(rank) && opt_.launch <= 1;
  int flags =
      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (fresh ? O_TRUNC : 0);
  int fd = open(path.c_str(), flags, 0644);
  if (fd < 0) {
    int err = errno;
    struct stat st{};
    if (lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) return failed("not a regular file");
    return failed(std::strerror(err));
  }
  struct stat st{};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return failed("not a regular file");
  }
  // A regular file: O_NONBLOCK changes nothing for it. The log's lines are
  // written whole, unbuffered (one write each).
  if (!log_made_.count(rank)) {
    log_made_.insert(rank);
    if (!write_all(fd, header_)) {
      int err = errno;
      close(fd);
      return failed(std::strerror(err));
    }
  }
  lru_.push_front(rank);
  open_[rank] = OpenLog{fd, lru_.begin()};
  return fd;
}

void OutputFilter::feed(int stream, const char* data, size_t n) {
  std::string& buf = raw_[stream - 1];
  buf.append(data, n);
  size_t start = 0, pos;
  while ((pos = buf.find('\n', start)) != std::string::npos) {
    std::string_view line(buf.data() + start, pos - start);
    start = pos + 1;
    // mpirun tags every chunk a rank writes, and a chunk that does not end a
    // line runs on into the next chunk of whichever rank comes next:
    // "[1,0]<stdout>:par[1,1]<stdout>:whole line\n[1,0]<stdout>:t\n". Each
    // piece goes to its own rank's unfinished line; the newline ends the
    // line of the last piece's rank. Plain parsing: a tag is looked for only
    // where the line has a '['.
    Tag tag = parse_tag(line);
    if (tag.length == 0) {
      mpirun_line(std::string(line));
      continue;
    }
    size_t at = 0;
    while (tag.length != 0) {
      size_t from = at + tag.length;
      Tag next;
      size_t to = from;
      while ((to = line.find('[', to)) != std::string_view::npos) {
        next = parse_tag(line.substr(to));
        if (next.length != 0) break;
        ++to;
      }
      if (to == std::string_view::npos) to = line.size();
      std::string& part = part_[{tag.rank, tag.err}];
      part.append(line.substr(from, to - from));
      if (next.length == 0) {
        std::string body = std::move(part);
        part.clear();
        rank_line(tag.rank, tag.err, std::move(body));
      }
      tag = next;
      at = to;
    }
  }
  buf.erase(0, start);
}

void OutputFilter::finish() {
  for (int s = 1; s <= 2; ++s) {
    if (!raw_[s - 1].empty()) feed(s, "\n", 1);
  }
  for (auto& [key, part] : part_) {
    if (!part.empty()) rank_line(key.first, key.second, std::move(part));
    part.clear();
  }
  // Lines of a rank whose guard never said where it runs.
  for (auto& [rank, lines] : held_) {
    if (!host_.count(rank)) host_[rank] = "?";
    for (auto& [err, body] : lines) emit(rank, err, body);
  }
  held_.clear();
  // Every rank of the job has its log, also one that wrote nothing (with the
  // launch's header when there are several).
  if (!opt_.output_dir.empty()) {
    for (int r = 0; r < opt_.ranks; ++r) {
      if (!log_made_.count(r)) log_file(r);
    }
  }
}

void OutputFilter::rank_line(int rank, bool err, std::string body) {
  // The guard's lines (after any unfinished line of the program).
  if (size_t at = body.find(kStartMarker); err && at != std::string::npos) {
    char host[256] = {};
    std::sscanf(body.c_str() + at + std::strlen(kStartMarker), " host=%255s", host);
    host_[rank] = host;
    body.erase(at);
    if (auto held = held_.find(rank); held != held_.end()) {
      for (auto& [e, b] : held->second) emit(rank, e, b);
      held_.erase(held);
    }
    if (body.empty()) return;
  }
  if (size_t at = body.find(kEndMarker); err && at != std::string::npos) {
    RankEnd e;
    std::sscanf(body.c_str() + at + std::strlen(kEndMarker),
                " pid=%ld status=%d signal=%d forwarded=%d", &e.pid, &e.status, &e.signal,
                &e.forwarded);
    ended_[rank] = e;
    end_order_.push_back(rank);
    if (!e.forwarded && (e.signal != 0 || e.status != 0) && failure_.empty()) {
      failure_ = "rank " + std::to_string(rank) + " ended";
    }
    body.erase(at);
    if (body.empty()) return;
  }
  if (size_t at = body.find(distributed::detail::kPeerFailedMarker);
      err && at != std::string::npos) {
    PeerFailed p;
    int got = std::sscanf(body.c_str() + at + std::strlen(distributed::detail::kPeerFailedMarker),
                          " rank=%d host=%255s addr=%63s silent=%lf by=%d cutoff=%d", &p.rank,
                          p.host, p.addr, &p.silent, &p.by, &p.cut_off);
    p.ends_before = end_order_.size();
    if (got == 6 && peer_failed_.rank < 0) {
      peer_failed_ = p;
      if (failure_.empty()) failure_ = "rank " + std::to_string(p.rank) + " was lost";
    }
    body.erase(at);
    if (body.empty()) return;
  }
  // The error of a rank is its last "SomethingError: ..." line (the first
  // line of a multi-line message, the last of a Python traceback), else its
  // last line on stderr.
  if (err && is_error_line(body)) {
    last_error_line_[rank] = body;
    has_error_line_[rank] = true;
  } else if (err && !has_error_line_[rank] && body.find_first_not_of(" \t") != std::string::npos) {
    last_error_line_[rank] = body;
  }
  if (opt_.show_hosts && !host_.count(rank) && opt_.output_dir.empty()) {
    held_[rank].emplace_back(err, std::move(body));
    return;
  }
  emit(rank, err, body);
}

void OutputFilter::emit(int rank, bool err, const std::string& body) {
  // Only the job's ranks have logs (a tag of another rank is shown as it is).
  if (!opt_.output_dir.empty() && rank >= 0 && rank < opt_.ranks) {
    if (int fd = log_file(rank); fd >= 0) {
      // A full line per write: `tail -f` shows whole lines, and a launcher
      // killed mid-run leaves every line written so far.
      std::string line;
      line.reserve(body.size() + 1);
      line.append(body).push_back('\n');
      if (write_all(fd, line)) return;
      int err = errno;
      log_failed_.insert(rank);
      close(fd);
      lru_.erase(open_[rank].at);
      open_.erase(rank);
      std::fprintf(stderr,
                   "tessera run: cannot write %s (%s); rank %d's output goes here instead\n",
                   log_path(rank).c_str(), std::strerror(err), rank);
    }
  }
  FILE* out = err ? stderr : stdout;
  if (opt_.show_hosts) {
    std::fprintf(out, "[rank %d@%s] %s\n", rank, host_[rank].c_str(), body.c_str());
  } else {
    std::fprintf(out, "[rank %d] %s\n", rank, body.c_str());
  }
  std::fflush(out);
}

namespace {

// A reader of Open MPI's lines (plain parsing, no regular expressions).
struct Scan {
  std::string_view s;
  bool ok = true;

  // Moves past the first `word` (false if there is none).
  bool find(std::string_view word) {
    size_t at = s.find(word);
    if (at == std::string_view::npos) return ok = false;
    s.remove_prefix(at + word.size());
    return true;
  }
  // Moves past `word`, which must come next.
  Scan& lit(std::string_view word) {
    if (ok && s.starts_with(word)) {
      s.remove_prefix(word.size());
    } else {
      ok = false;
    }
    return *this;
  }
  Scan& spaces() {
    while (!s.empty() && (s[0] == ' ' || s[0] == '\t')) s.remove_prefix(1);
    return *this;
  }
  // An integer (optionally negative) that fits an int.
  Scan& integer(int& out) {
    int v = 0;
    auto [end, ec] = ok ? std::from_chars(s.data(), s.data() + s.size(), v)
                        : std::from_chars_result{s.data(), std::errc::invalid_argument};
    if (ec != std::errc{}) {
      ok = false;
    } else {
      out = v;
      s.remove_prefix(static_cast<size_t>(end - s.data()));
    }
    return *this;
  }
  // A run of characters other than white space (at least one).
  Scan& word(std::string* out = nullptr) {
    size_t n = 0;
    while (n < s.size() && !std::isspace(static_cast<unsigned char>(s[n]))) ++n;
    if (!ok || n == 0) {
      ok = false;
    } else {
      if (out) *out = std::string(s.substr(0, n));
      s.remove_prefix(n);
    }
    return *this;
  }
};

}  // namespace

void OutputFilter::mpirun_line(const std::string& text) {
  int n = 0, value = 0;
  std::string name;
  // "Process name: [[1234,1],3]"
  if (Scan c{text}; c.find("Process name:") && c.spaces().lit("[[").integer(n).lit(",").integer(n)
                                                   .lit("],").integer(value).lit("]").ok)
    failed_rank_ = value;
  // "Exit code: 1"
  if (Scan c{text}; c.find("Exit code:") && c.spaces().integer(value).ok) failed_code_ = value;
  // "process rank 3 with PID 42 on node x exited on signal 9"
  if (Scan c{text}; c.find("process rank ") && c.integer(value).lit(" with PID ").integer(n)
                                                   .lit(" on node ").word()
                                                   .lit(" exited on signal").ok)
    signaled_rank_ = value;
  // "... due to process rank 3 with PID 42 ..."
  if (Scan c{text}; c.find("due to process rank ") && c.integer(value).lit(" with PID").ok)
    improper_rank_ = value;
  // "Remote daemon: [[1234,0],1] on node node2"
  if (Scan c{text}; c.find("Remote daemon:") && c.spaces().word().lit(" on node ").word(&name).ok) {
    lost_host_ = name;
    if (failure_.empty()) failure_ = "lost host " + lost_host_;
  }
  // "Open MPI failed to TCP connect to a peer MPI process ... Your Open MPI
  // job may now hang": an address that one host cannot reach, usually of a
  // second interface. The job is stopped rather than left hanging.
  if (text.find("failed to TCP connect to a peer") != std::string::npos) in_tcp_warning_ = true;
  if (Scan c{text}; in_tcp_warning_ && c.spaces().lit("Local host:").spaces().word(&name).ok)
    tcp_local_host_ = name;
  if (Scan c{text};
      in_tcp_warning_ && c.find("connect() to ") && c.word(&name).lit(" failed").ok) {
    tcp_peer_ = name;
    in_tcp_warning_ = false;
    if (failure_.empty()) failure_ = "cannot connect";
  }
  if (text.size() >= 20 && text.find_first_not_of('-') == std::string::npos) {
    in_frame_ = !in_frame_;
  } else if (!in_frame_ && text.find_first_not_of(" \t") != std::string::npos) {
    loose_lines_.push_back(text);
  }
  // The launcher's own words (mpirun could not be started) are always shown.
  if (opt_.verbose || text.rfind("tessera run:", 0) == 0) {
    std::fprintf(stderr, "%s\n", text.c_str());
    std::fflush(stderr);
  }
  mpirun_lines_.push_back(text);
}

std::string OutputFilter::rank_name(int rank, bool with_pid) {
  std::string s = "rank " + std::to_string(rank) + " of " + std::to_string(opt_.ranks);
  std::string inside;
  if (with_pid && ended_.count(rank)) inside = "pid " + std::to_string(ended_[rank].pid);
  if (opt_.show_hosts && host_.count(rank))
    inside += (inside.empty() ? "on " : " on ") + host_[rank];
  return inside.empty() ? s : s + " (" + inside + ")";
}

std::string OutputFilter::ranks_on(const std::string& host) const {
  std::string list;
  for (const auto& [rank, h] : host_) {
    if (h == host || h.substr(0, h.find('.')) == host.substr(0, host.find('.'))) {
      list += (list.empty() ? "" : ", ") + std::to_string(rank);
    }
  }
  return list;
}

// What to say about a rank the others declared failed (they ended because of
// it), unless its guard saw it end on its own before that (rank_end_message
// names it by how).
std::optional<std::string> OutputFilter::peer_failed_message() {
  const PeerFailed& p = peer_failed_;
  if (p.rank < 0) return std::nullopt;
  auto first = end_order_.begin();
  auto before = first + static_cast<std::ptrdiff_t>(p.ends_before);
  if (std::find(first, before, p.rank) != before) return std::nullopt;
  char silent[32];
  std::snprintf(silent, sizeof silent, "%.1f", p.silent);
  std::string who = "tessera run: rank " + std::to_string(p.rank) + " of " +
                    std::to_string(opt_.ranks) + " on host " + p.host +
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

// What to say about the rank that ended the job, when the guards reported it.
std::optional<std::string> OutputFilter::rank_end_message() {
  // mpirun names the rank it noticed first; otherwise the first rank whose
  // program ended badly on its own (not by a signal passed on while mpirun
  // was stopping the job).
  int rank = signaled_rank_ >= 0   ? signaled_rank_
             : improper_rank_ >= 0 ? improper_rank_
                                   : failed_rank_;
  if (rank < 0 || !ended_.count(rank) || ended_[rank].forwarded) {
    for (int r : end_order_) {
      const RankEnd& e = ended_[r];
      if (!e.forwarded && (e.signal != 0 || e.status != 0)) {
        rank = r;
        break;
      }
    }
  }
  if (rank < 0 || !ended_.count(rank)) return std::nullopt;
  const RankEnd& e = ended_[rank];
  std::string who = "tessera run: " + rank_name(rank);
  if (e.signal != 0) {
    std::string msg = who + " was killed by signal " + std::to_string(e.signal) + " (" +
                      signal_name(e.signal) + ")";
    if (has_error_line_[rank]) msg += " after printing " + last_error_line_[rank];
    return msg + "; the other ranks were stopped";
  }
  if (e.status != 0) {
    if (has_error_line_[rank]) {
      return "tessera run: " + rank_name(rank, false) + " failed (exit code " +
             std::to_string(e.status) + "): " + last_error_line_[rank];
    }
    std::string msg = who + " exited with status " + std::to_string(e.status);
    if (last_error_line_.count(rank)) msg += ": " + last_error_line_[rank];
    return msg + "; the other ranks were stopped";
  }
  if (rank == improper_rank_) {
    return who +
           " exited with status 0 before the others, without finishing MPI (MPI_Finalize); the "
           "other "
           "ranks were stopped";
  }
  return std::nullopt;
}

// Open MPI's own message of a failed job, as one line of tessera's.
std::optional<std::string> OutputFilter::mpirun_message() {
  auto said = [&](const char* words) {
    for (const auto& l : mpirun_lines_) {
      if (l.find(words) != std::string::npos) return true;
    }
    return false;
  };
  if (said("There are not enough slots available")) {
    return "tessera run: the hosts have fewer slots than the " + std::to_string(opt_.ranks) +
           " ranks asked for: give more hosts or slots (--hosts node1:4,node2:4, or 'node1 "
           "slots=4' in the "
           "hostfile), or pass -- --oversubscribe";
  }
  if (said("ORTE was unable to reliably start one or more daemons") ||
      said("ORTE daemon has unexpectedly failed")) {
    // What the remote shell said (ssh: Could not resolve hostname ...).
    std::string detail;
    for (const auto& l : loose_lines_) {
      if (l.rfind("tessera run:", 0) != 0 && l.rfind("[", 0) != 0) {
        detail = l;
        break;
      }
    }
    return "tessera run: could not start Open MPI's daemon (orted) on a remote host" +
           (detail.empty() ? std::string("") : ": " + detail) +
           " (check that `ssh HOST orted --version` works without a password, and --verbose for "
           "Open MPI's message)";
  }
  if (said("was unable to launch the specified application") ||
      said("could not access or execute an executable")) {
    return "tessera run: Open MPI could not start the rank's program on a host (is tessera at the "
           "same path on "
           "every host?); --verbose shows Open MPI's message";
  }
  return std::nullopt;
}

std::vector<std::string> OutputFilter::failure_report(int code) {
  std::vector<std::string> out;
  if (!lost_host_.empty()) {
    std::string ranks = ranks_on(lost_host_);
    std::string on = ranks.empty()
                         ? ""
                         : (ranks.find(',') == std::string::npos ? " (rank " : " (ranks ") + ranks +
                               " of " + std::to_string(opt_.ranks) + ")";
    out.push_back("tessera run: lost contact with host " + lost_host_ + on +
                  ": its network link or the host itself is down; the job was stopped");
    return out;
  }
  if (auto msg = peer_failed_message()) {
    out.push_back(*msg);
    return out;
  }
  if (peer_failed_.rank >= 0 && ended_.count(peer_failed_.rank)) {
    // The lost rank had ended on its own before the others noticed.
    improper_rank_ = signaled_rank_ = -1;
    failed_rank_ = peer_failed_.rank;
  }
  if (auto msg = rank_end_message()) {
    out.push_back(*msg);
    return out;
  }
  if (!tcp_peer_.empty()) {
    std::string setting = opt_.network.empty()
                              ? "NETWORK (a CIDR such as 10.0.0.0/24, or an interface name)"
                              : opt_.network;
    out.push_back(
        "tessera run: the ranks on " + tcp_local_host_ + " cannot connect to " + tcp_peer_ +
        ", an address another host offered on a network that " + tcp_local_host_ +
        " does not reach (hosts with several interfaces); give the network the hosts share: "
        "--mca btl_tcp_if_include " +
        setting + " --mca oob_tcp_if_include " + setting);
    return out;
  }
  if (failed_rank_ >= 0) {
    std::string err = last_error_line_.count(failed_rank_) ? last_error_line_[failed_rank_]
                                                           : "(no error message)";
    out.push_back("tessera run: " + rank_name(failed_rank_, false) + " failed (exit code " +
                  std::to_string(failed_code_) + "): " + err);
    return out;
  }
  if (auto msg = mpirun_message()) {
    out.push_back(*msg);
    return out;
  }
  for (auto& [rank, err] : last_error_line_)
    out.push_back("tessera run: " + rank_name(rank, false) + ": " + err);
  if (!opt_.verbose) {
    // Nothing recognised: Open MPI's own words, without its frames.
    for (const auto& l : mpirun_lines_) {
      if (l.find_first_not_of("- \t") != std::string::npos) out.push_back("mpirun: " + l);
    }
  }
  out.push_back("tessera run: failed (mpirun exit status " + std::to_string(code) + ")");
  return out;
}

std::optional<std::string> OutputFilter::warnings_note() const {
  if (opt_.verbose) return std::nullopt;
  for (const auto& l : mpirun_lines_) {
    size_t a = l.find_first_not_of("- \t");
    if (a != std::string::npos) {
      return "tessera run: Open MPI said: " + l.substr(a) + " (" +
             std::to_string(mpirun_lines_.size()) + " lines; --verbose shows them)";
    }
  }
  return std::nullopt;
}

}  // namespace tessera::cli
