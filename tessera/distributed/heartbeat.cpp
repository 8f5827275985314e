#include "tessera/distributed/heartbeat.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>

#include "tessera/core/error.hpp"

namespace tessera::distributed::detail {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", s);
  return buf;
}

// This host's IPv4 addresses, those other hosts can reach first (loopback
// only when there is nothing else).
std::vector<uint32_t> local_addresses(size_t at_most) {
  std::vector<uint32_t> out, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP)) continue;
      uint32_t ip = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr;
      (a->ifa_flags & IFF_LOOPBACK ? loopback : out).push_back(ip);
    }
    freeifaddrs(list);
  }
  if (out.empty())
    out = loopback.empty() ? std::vector<uint32_t>{htonl(INADDR_LOOPBACK)} : loopback;
  if (out.size() > at_most) out.resize(at_most);
  return out;
}

}  // namespace

double failure_timeout_seconds() {
  const char* s = std::getenv("TESSERA_FAILURE_TIMEOUT");
  if (!s || !*s) return 30.0;
  std::string v = s;
  if (v == "off") return 0.0;
  char* end = nullptr;
  double t = std::strtod(v.c_str(), &end);
  if (end == v.c_str() || *end != '\0' || !std::isfinite(t) || t < 0) {
    throw std::invalid_argument(
        error_message("[locality] TESSERA_FAILURE_TIMEOUT must be a number of seconds (0 or 'off' "
                      "turns failure detection off), "
                      "got '",
                      v, "'"));
  }
  return t;
}

std::string PeerFailure::message() const {
  std::string limit =
      error_message(seconds_text(silent), " s, more than TESSERA_FAILURE_TIMEOUT=", timeout, " s");
  if (cut_off && noticed_by == self) {
    std::string list;
    for (size_t i = 0; i < peers.size(); ++i) list += error_message(i ? ", " : "", peers[i]);
    return error_message("this rank, rank ", rank, " on host ", host,
                         ", has heard from none of the ranks it watches (", list, ") for ", limit,
                         ": its network link is probably down, or they all stopped");
  }
  if (rank == self) {
    return error_message("rank ", noticed_by, " has not heard from this rank, rank ", rank,
                         " on host ", host, ", for ", limit,
                         ": this process was stopped, or its network link is down");
  }
  if (cut_off) {
    return error_message("rank ", rank, " on host ", host,
                         " has heard from none of the ranks it watches for ", limit,
                         ": its network link is probably down");
  }
  std::string msg = error_message("rank ", rank, " on host ", host, " has not been heard from for ",
                                  limit, " (it stopped, died, or its network link is down");
  if (noticed_by != self) msg += error_message("; noticed by rank ", noticed_by);
  return msg + ")";
}

std::string PeerFailure::marker() const {
  // host is "name" or "name (address)".
  size_t space = host.find(' ');
  std::string name = host.substr(0, space), addr = "-";
  if (space != std::string::npos && host.size() > space + 3)
    addr = host.substr(space + 2, host.size() - space - 3);
  return error_message(kPeerFailedMarker, " rank=", rank, " host=", name.empty() ? "?" : name,
                       " addr=", addr, " silent=", seconds_text(silent), " by=", noticed_by,
                       " cutoff=", cut_off ? 1 : 0);
}

// A datagram between heartbeat threads.
struct Heartbeat::Packet {
  enum Kind : int32_t { beat = 1, goodbye = 2, failed = 3 };
  uint64_t job = 0;  // the job's id (rank 0's nonce): datagrams of other jobs are ignored
  int32_t kind = beat;
  int32_t from = -1, to = -1;
  int32_t subject = -1;  // failed: the rank declared failed
  int32_t cut_off = 0;   // failed: the subject declared itself cut off
  double silent = 0;     // failed: seconds the subject was silent
};

std::string Heartbeat::start(const Allgather& allgather, int rank, int size, double timeout,
                             Callbacks callbacks) {
  rank_ = rank;
  size_ = size;
  timeout_ = timeout;
  // Ten heartbeats per timeout, at most one a second: a peer is declared
  // failed after missing about ten.
  interval_ = std::clamp(timeout / 10, 0.02, 1.0);
  callbacks_ = std::move(callbacks);
  for (int d = 1; d < size; d *= 2) {
    targets_.push_back((rank + d) % size);
    watched_.push_back((rank - d % size + size) % size);
  }

  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  sockaddr_in any{};
  any.sin_family = AF_INET;
  any.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof any;
  std::string error;
  if (fd_ < 0 || wake_fd_ < 0) {
    error = error_message("cannot make a socket: ", std::strerror(errno));
  } else if (bind(fd_, reinterpret_cast<sockaddr*>(&any), sizeof any) != 0 ||
             getsockname(fd_, reinterpret_cast<sockaddr*>(&any), &len) != 0) {
    error = error_message("cannot bind a UDP socket: ", std::strerror(errno));
  }

  // Every rank's contact (and whether it could make its socket) through MPI,
  // once.
  struct Wire {
    uint64_t nonce;
    uint32_t addrs[8];
    uint16_t port;
    uint16_t count;
    int32_t ok;
    char host[64];
  } mine{};
  std::random_device rd;
  mine.nonce = (uint64_t{rd()} << 32) ^ rd() ^
               static_cast<uint64_t>(Clock::now().time_since_epoch().count());
  std::vector<uint32_t> addrs = local_addresses(8);
  std::copy(addrs.begin(), addrs.end(), mine.addrs);
  mine.count = static_cast<uint16_t>(addrs.size());
  mine.port = any.sin_port;
  mine.ok = error.empty();
  gethostname(mine.host, sizeof mine.host - 1);
  std::vector<Wire> all(size);
  if (!allgather(&mine, all.data(), sizeof mine))
    return "[locality] the exchange of heartbeat addresses failed";
  for (int r = 0; r < size; ++r) {
    if (!all[r].ok) {
      return error_message(
          "[locality] failure detection (TESSERA_FAILURE_TIMEOUT) cannot start on rank ", r,
          r == rank ? ": " + error : std::string(" (see its error)"));
    }
  }
  job_ = all[0].nonce;
  contacts_.resize(size);
  for (int r = 0; r < size; ++r) {
    Contact& c = contacts_[r];
    c.addrs.assign(all[r].addrs, all[r].addrs + std::min<int>(all[r].count, 8));
    c.port = all[r].port;
    all[r].host[sizeof all[r].host - 1] = '\0';
    c.host = all[r].host[0] ? all[r].host : "?";
    if (!c.addrs.empty() && c.addrs[0] != htonl(INADDR_LOOPBACK)) {
      char ip[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &c.addrs[0], ip, sizeof ip);
      c.host += error_message(" (", ip, ")");
    }
  }
  thread_ = std::thread([this] { loop(); });
  return "";
}

void Heartbeat::send_to(int peer, const Packet& p) {
  const Contact& c = contacts_[peer];
  // Every address the peer has: one of them is on the network between the
  // two hosts (the others reach nobody, or a socket that ignores it).
  for (uint32_t ip : c.addrs) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = ip;
    to.sin_port = c.port;
    // Errors (no route, a full buffer) are silence: the receiver judges.
    sendto(fd_, &p, sizeof p, MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&to),
           sizeof to);
  }
}

void Heartbeat::declare(PeerFailure f) {
  declared_ = true;
  f.self = rank_;
  f.timeout = timeout_;
  if (f.noticed_by == rank_) {
    // Every rank learns it from this one, at once (twice: a datagram may
    // be lost; a lost notice leaves a rank to its own detection or to
    // mpirun, which stops the job when this rank leaves).
    Packet p;
    p.job = job_;
    p.kind = Packet::failed;
    p.from = rank_;
    p.subject = f.rank;
    p.cut_off = f.cut_off;
    p.silent = f.silent;
    for (int copy = 0; copy < 2; ++copy) {
      for (int r = 0; r < size_; ++r) {
        if (r == rank_) continue;
        p.to = r;
        send_to(r, p);
      }
    }
  }
  if (callbacks_.detected) callbacks_.detected(f);
}

void Heartbeat::loop() {
  auto now = Clock::now();
  std::vector<Clock::time_point> heard(size_, now);
  std::vector<char> left(size_, 0), ever(size_, 0);
  auto next_beat = now, last_turn = now;
  std::optional<Clock::time_point> give_up_at;
  auto interval =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(interval_));
  Packet beat;
  beat.job = job_;
  beat.from = rank_;
  while (!stop_.load(std::memory_order_acquire)) {
    auto until = give_up_at ? std::min(next_beat, *give_up_at) : next_beat;
    int wait_ms =
        static_cast<int>(std::ceil(std::max(0.0, seconds_between(Clock::now(), until)) * 1000));
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    poll(fds, 2, wait_ms);
    if (stop_.load(std::memory_order_acquire)) break;
    now = Clock::now();
    Packet p;
    ssize_t got;
    while ((got = recv(fd_, &p, sizeof p, MSG_DONTWAIT)) >= 0) {
      if (got != sizeof p || p.job != job_ || p.to != rank_ || p.from < 0 || p.from >= size_)
        continue;
      if (p.kind == Packet::beat) {
        heard[p.from] = now;
        ever[p.from] = 1;
      } else if (p.kind == Packet::goodbye) {
        left[p.from] = 1;
      } else if (p.kind == Packet::failed && !declared_ && p.subject >= 0 && p.subject < size_) {
        PeerFailure f;
        f.rank = p.subject;
        f.host = contacts_[p.subject].host;
        f.silent = p.silent;
        f.noticed_by = p.from;
        f.cut_off = p.cut_off;
        declare(f);
        give_up_at = now + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(kExitGrace));
      }
    }
    // A turn this late means this process did not run (it was stopped or
    // suspended): what it heard before tells nothing about its peers now.
    if (seconds_between(last_turn, now) > timeout_ / 2) std::fill(heard.begin(), heard.end(), now);
    last_turn = now;
    if (now >= next_beat) {
      for (int t : targets_) {
        beat.to = t;
        send_to(t, beat);
      }
      next_beat += interval;
      if (next_beat <= now) next_beat = now + interval;
    }
    if (give_up_at) {
      if (now >= *give_up_at) {
        if (callbacks_.give_up) callbacks_.give_up();
        return;
      }
      continue;
    }
    // A peer is failed after `timeout_` of silence; this rank is cut off
    // when, by then, every peer it watches has been silent for half as long
    // at least (a live peer is heard from every interval_).
    std::vector<int> quiet;
    int watching = 0, worst = -1;
    double worst_silence = 0;
    for (int w : watched_) {
      if (left[w]) continue;
      double s = seconds_between(heard[w], now);
      if (!ever[w] && s > timeout_) {
        // Not one heartbeat of w ever came: its datagrams do not get here
        // (UDP blocked between the hosts), which says nothing about w.
        std::fprintf(
            stderr,
            "tessera: warning: [locality] rank %d has received no heartbeat from rank %d on "
            "host %s (UDP port %u) since the start, %.0f s ago: failure detection of rank %d "
            "is off here (is UDP blocked between the hosts? TESSERA_FAILURE_TIMEOUT=off "
            "turns detection off)\n",
            rank_, w, contacts_[w].host.c_str(), ntohs(contacts_[w].port), s, w);
        left[w] = 1;
        continue;
      }
      ++watching;
      if (s > worst_silence) worst_silence = s, worst = w;
      if (s > timeout_ / 2) quiet.push_back(w);
    }
    if (worst_silence <= timeout_) continue;
    PeerFailure f;
    f.noticed_by = rank_;
    if (watching >= 2 && static_cast<int>(quiet.size()) == watching) {
      f.cut_off = true;
      f.rank = rank_;
      f.peers = quiet;
      std::sort(f.peers.begin(), f.peers.end());
      f.silent = worst_silence;
    } else {
      f.rank = worst;
      f.silent = worst_silence;
    }
    f.host = contacts_[f.rank].host;
    declare(f);
    give_up_at = now + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(kExitGrace));
  }
}

void Heartbeat::goodbye() {
  if (!thread_.joinable()) return;
  Packet p;
  p.job = job_;
  p.kind = Packet::goodbye;
  p.from = rank_;
  for (int copy = 0; copy < 2; ++copy) {
    for (int t : targets_) {
      p.to = t;
      send_to(t, p);
    }
  }
  stop_.store(true, std::memory_order_release);
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) {
    // The thread also wakes within a heartbeat interval.
  }
  thread_.join();
  close(fd_);
  close(wake_fd_);
}

}  // namespace tessera::distributed::detail
