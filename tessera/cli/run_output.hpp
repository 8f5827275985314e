// The output side of `tessera run`: reads mpirun's tagged output, gives every
// line of a rank its `[rank r]` (or `[rank r@host]`) prefix or writes it to
// the rank's log file, keeps Open MPI's own messages out of sight unless
// asked, and works out from all of it which rank or host ended the job.
#pragma once

#include <cstdio>
#include <list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::cli {

// The hidden lines a rank's guard writes on stderr: when it starts (with its
// host) and when the rank's program ends (how).
constexpr const char* kStartMarker = "tessera-run-rank-started:";
constexpr const char* kEndMarker = "tessera-run-rank-ended:";

// How a rank's program ended, as its guard reported it.
struct RankEnd {
  long pid = 0;
  int status = 0;     // exit status, when signal == 0
  int signal = 0;     // the signal that ended it, or 0
  int forwarded = 0;  // a signal the guard passed on from mpirun (the job was being stopped), or 0
};

// A rank declared failed by another (its heartbeats stopped: failure
// detection, distributed/heartbeat.hpp), as the first rank to say so wrote it
// (distributed::detail::kPeerFailedMarker).
struct PeerFailed {
  int rank = -1;
  char host[256] = "?";
  char addr[64] = "-";  // its IPv4 address, or "-"
  double silent = 0;
  int by = -1;
  int cut_off = 0;         // the rank heard from none of its peers (its link is down)
  size_t ends_before = 0;  // how many ranks' ends the guards had reported before
};

struct OutputOptions {
  int ranks = 1;
  bool show_hosts = false;  // `[rank r@host]`: the job may span several hosts
  bool verbose = false;     // Open MPI's messages as they come
  std::string output_dir;   // per-rank logs DIR/rank-<r>.log instead of the terminal
  std::string network;      // the network (CIDR) the hosts share, when known
  // Which launch of the job this is (1 the first; --max-restarts launches it
  // again) and how many there may be: the first launch makes the logs fresh,
  // the others append; with more than one, every launch starts each log with
  // "=== launch k of n, <UTC time> ===".
  int launch = 1;
  int launches = 1;
  // How many logs may be open at once (0: half the descriptor limit,
  // RLIMIT_NOFILE, at most 1,024). A log is opened at its rank's first line
  // and the least recently written one closed when more would be open (every
  // line is written at once, so closing loses nothing); a log reopened
  // appends.
  int max_open_logs = 0;
};

// One mpirun tag "[job,rank]<stdout>:" or "[job,rank]<stderr>:" at the start
// of `text` (plain parsing, no regular expression: every line of every rank
// passes here). `length` is 0 when `text` does not start with a tag.
struct Tag {
  int rank = -1;
  bool err = false;
  size_t length = 0;
};
Tag parse_tag(std::string_view text);

// The rank of a log name tessera writes, "rank-<r>.log" (r without leading
// zeros, fits an int), or -1.
int log_name_rank(std::string_view name);

// Whether a line of a rank's stderr reads as its error: an optional "[",
// then a word ending in "Error" or "Exception" ("ValueError: ...",
// "[RuntimeError] ...").
bool is_error_line(std::string_view line);

// Reads mpirun's output ("[job,rank]<stdout>:text" with --tag-output) and rewrites it.
class OutputFilter {
 public:
  explicit OutputFilter(OutputOptions options);
  ~OutputFilter();
  OutputFilter(const OutputFilter&) = delete;
  OutputFilter& operator=(const OutputFilter&) = delete;

  // Bytes read from mpirun's stdout (stream 1) or stderr (stream 2).
  void feed(int stream, const char* data, size_t n);
  // At the end: lines left unfinished are written as they are.
  void finish();

  // Something happened that ends the job (a rank ended badly, a host was
  // lost, MPI cannot connect): the launcher stops the job if mpirun does not.
  bool failure_seen() const { return !failure_.empty(); }
  const std::string& failure() const { return failure_; }

  // The lines that explain a failed job (mpirun exit status `code`).
  std::vector<std::string> failure_report(int code);
  // A note on Open MPI's messages of a job that succeeded, if it printed any.
  std::optional<std::string> warnings_note() const;
  // How many ranks' logs are open now (at most max_open_logs).
  size_t open_logs() const { return open_.size(); }

  // "rank 3 of 4 (pid 42 on node2)", the pid and host as far as known.
  std::string rank_name(int rank, bool with_pid = true);
  // The ranks known to run on `host`, "2, 3".
  std::string ranks_on(const std::string& host) const;

 private:
  void mpirun_line(const std::string& text);
  void rank_line(int rank, bool err, std::string body);
  void emit(int rank, bool err, const std::string& body);
  std::optional<std::string> rank_end_message();
  std::optional<std::string> peer_failed_message();
  std::optional<std::string> mpirun_message();
  // The rank's log, opened if it is not (closing the least recently written
  // one when max_open_logs are open); -1 when it cannot be written (said
  // once on stderr; the rank's lines then go to the terminal).
  int log_file(int rank);
  std::string log_path(int rank) const;

  OutputOptions opt_;
  std::string raw_[2];                                // mpirun's unfinished lines, per stream
  std::map<std::pair<int, bool>, std::string> part_;  // ranks' unfinished lines, per (rank, stderr)
  std::map<int, std::string> host_;
  std::map<int, std::vector<std::pair<bool, std::string>>>
      held_;  // lines waiting for the rank's host
  // The open logs, the most recently written at the front of lru_.
  struct OpenLog {
    int fd = -1;
    std::list<int>::iterator at;
  };
  std::map<int, OpenLog> open_;
  std::list<int> lru_;
  size_t max_open_ = 1;
  std::string header_;        // "=== launch k of n, ... ===\n", or ""
  std::set<int> log_made_;    // ranks whose log this launch has created (or appended its header to)
  std::set<int> log_failed_;
  std::map<int, std::string> last_error_line_;
  std::map<int, bool> has_error_line_;
  std::map<int, RankEnd> ended_;
  std::vector<int> end_order_;
  PeerFailed peer_failed_;
  std::vector<std::string> mpirun_lines_;
  std::vector<std::string>
      loose_lines_;  // mpirun's lines outside its framed messages (ssh's errors, say)
  bool in_frame_ = false;
  std::string failure_;
  int failed_rank_ = -1;
  int failed_code_ = 0;
  int signaled_rank_ = -1;
  int improper_rank_ = -1;
  std::string lost_host_;
  std::string tcp_local_host_, tcp_peer_;
  bool in_tcp_warning_ = false;
};

std::string signal_name(int sig);

}  // namespace tessera::cli
