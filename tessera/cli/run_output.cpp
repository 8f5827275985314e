#include "tessera/cli/run_output.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <regex>
#include <stdexcept>

#include "tessera/distributed/comm.hpp"

namespace tessera::cli {

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "an unknown signal";
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
  // Logs of an earlier run with more ranks would pass for this run's. Only
  // the names tessera writes (rank-<r>.log, r without leading zeros) are
  // logs; any other name is left alone.
  if (opt_.launch <= 1) {
    static const std::regex log_name(R"(rank-(0|[1-9]\d*)\.log)");
    for (const auto& entry : fs::directory_iterator(opt_.output_dir)) {
      std::smatch m;
      std::string name = entry.path().filename().string();
      if (!std::regex_match(name, m, log_name)) continue;
      long rank = -1;
      const std::string digits = m[1];
      auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), rank);
      (void)end;
      if (err == std::errc{} && rank >= opt_.ranks) fs::remove(entry.path(), ec);
    }
  }
  std::string header;
  if (opt_.launches > 1) {
    char when[32] = "?";
    std::time_t now = std::time(nullptr);
    std::tm utc{};
    if (gmtime_r(&now, &utc)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &utc);
    header = "=== launch " + std::to_string(opt_.launch) + " of " +
             std::to_string(opt_.launches) + ", " + when + " ===\n";
  }
  // A constructor that throws runs no destructor: the logs opened so far are
  // closed here.
  auto fail = [&](const std::string& message) {
    for (auto& [rank, f] : log_) std::fclose(f);
    log_.clear();
    throw std::runtime_error(message);
  };
  for (int r = 0; r < opt_.ranks; ++r) {
    std::string path = opt_.output_dir + "/rank-" + std::to_string(r) + ".log";
    // O_NOFOLLOW: a symlink planted in a shared directory is not written
    // through; O_NONBLOCK: a FIFO planted there fails at once (no reader) or
    // is refused below, instead of blocking the launcher.
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK |
                (opt_.launch <= 1 ? O_TRUNC : O_APPEND);
    int fd = open(path.c_str(), flags, 0644);
    struct stat st{};
    const std::string not_regular = "[run] cannot write a rank's log: '" + path +
                                    "' is not a regular file (--output-dir " + opt_.output_dir +
                                    ")";
    if (fd < 0) {
      int err = errno;
      if (lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) fail(not_regular);
      fail("[run] --output-dir: cannot write '" + path + "': " + std::strerror(err));
    }
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      fail(not_regular);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE* f = fdopen(fd, opt_.launch <= 1 ? "w" : "a");
    if (!f) {
      close(fd);
      fail("[run] --output-dir: cannot write '" + path + "': " + std::strerror(errno));
    }
    log_[r] = f;
    if (!header.empty() && (std::fputs(header.c_str(), f) < 0 || std::fflush(f) != 0))
      fail("[run] --output-dir: cannot write '" + path + "': " + std::strerror(errno));
  }
}

OutputFilter::~OutputFilter() {
  for (auto& [rank, f] : log_) std::fclose(f);
}

void OutputFilter::feed(int stream, const char* data, size_t n) {
  std::string& buf = raw_[stream - 1];
  buf.append(data, n);
  size_t start = 0, pos;
  while ((pos = buf.find('\n', start)) != std::string::npos) {
    std::string line = buf.substr(start, pos - start);
    start = pos + 1;
    // mpirun tags every chunk a rank writes, and a chunk that does not end a
    // line runs on into the next chunk of whichever rank comes next:
    // "[1,0]<stdout>:par[1,1]<stdout>:whole line\n[1,0]<stdout>:t\n". Each
    // piece goes to its own rank's unfinished line; the newline ends the
    // line of the last piece's rank.
    static const std::regex tag(R"(\[\d+,(\d+)\]<(stdout|stderr)>:)");
    auto it = std::sregex_iterator(line.begin(), line.end(), tag);
    if (it == std::sregex_iterator() || it->position() != 0) {
      mpirun_line(line);
      continue;
    }
    for (; it != std::sregex_iterator();) {
      int rank = std::stoi((*it)[1]);
      bool err = (*it)[2] == "stderr";
      size_t from = static_cast<size_t>(it->position() + it->length());
      auto next = std::next(it);
      size_t to =
          next == std::sregex_iterator() ? line.size() : static_cast<size_t>(next->position());
      std::string& part = part_[{rank, err}];
      part.append(line, from, to - from);
      if (next == std::sregex_iterator()) {
        std::string body = std::move(part);
        part.clear();
        rank_line(rank, err, std::move(body));
      }
      it = next;
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
  for (auto& [rank, f] : log_) std::fflush(f);
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
  static const std::regex error_line(R"(^\[?\w*(Error|Exception)\b.*)");
  if (err && std::regex_match(body, error_line)) {
    last_error_line_[rank] = body;
    has_error_line_[rank] = true;
  } else if (err && !has_error_line_[rank] && body.find_first_not_of(" \t") != std::string::npos) {
    last_error_line_[rank] = body;
  }
  if (opt_.show_hosts && !host_.count(rank) && log_.empty()) {
    held_[rank].emplace_back(err, std::move(body));
    return;
  }
  emit(rank, err, body);
}

void OutputFilter::emit(int rank, bool err, const std::string& body) {
  if (auto f = log_.find(rank); f != log_.end() && !log_failed_.count(rank)) {
    // A full line per write, flushed: `tail -f` shows whole lines, and a
    // launcher killed mid-run leaves every line written so far.
    if (std::fprintf(f->second, "%s\n", body.c_str()) >= 0 && std::fflush(f->second) == 0) return;
    log_failed_.insert(rank);
    std::fprintf(
        stderr,
        "tessera run: cannot write %s/rank-%d.log (%s); rank %d's output goes here instead\n",
        opt_.output_dir.c_str(), rank, std::strerror(errno), rank);
  }
  FILE* out = err ? stderr : stdout;
  if (opt_.show_hosts) {
    std::fprintf(out, "[rank %d@%s] %s\n", rank, host_[rank].c_str(), body.c_str());
  } else {
    std::fprintf(out, "[rank %d] %s\n", rank, body.c_str());
  }
  std::fflush(out);
}

void OutputFilter::mpirun_line(const std::string& text) {
  static const std::regex process(R"(Process name:\s*\[\[\d+,\d+\],(\d+)\])");
  static const std::regex exit_code(R"(Exit code:\s*(-?\d+))");
  static const std::regex on_signal(
      R"(process rank (\d+) with PID \d+ on node \S+ exited on signal)");
  static const std::regex improper(R"(due to process rank (\d+) with PID)");
  static const std::regex remote_daemon(R"(Remote daemon:\s*\S+ on node (\S+))");
  static const std::regex local_host(R"(^\s*Local host:\s*(\S+))");
  static const std::regex connect_to(R"(connect\(\) to (\S+) failed)");
  std::smatch m;
  if (std::regex_search(text, m, process)) failed_rank_ = std::stoi(m[1]);
  if (std::regex_search(text, m, exit_code)) failed_code_ = std::stoi(m[1]);
  if (std::regex_search(text, m, on_signal)) signaled_rank_ = std::stoi(m[1]);
  if (std::regex_search(text, m, improper)) improper_rank_ = std::stoi(m[1]);
  if (std::regex_search(text, m, remote_daemon)) {
    lost_host_ = m[1];
    if (failure_.empty()) failure_ = "lost host " + lost_host_;
  }
  // "Open MPI failed to TCP connect to a peer MPI process ... Your Open MPI
  // job may now hang": an address that one host cannot reach, usually of a
  // second interface. The job is stopped rather than left hanging.
  if (text.find("failed to TCP connect to a peer") != std::string::npos) in_tcp_warning_ = true;
  if (in_tcp_warning_ && std::regex_search(text, m, local_host)) tcp_local_host_ = m[1];
  if (in_tcp_warning_ && std::regex_search(text, m, connect_to)) {
    tcp_peer_ = m[1];
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
