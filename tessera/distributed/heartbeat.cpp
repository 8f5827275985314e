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
#include <cstddef>
#include <cstring>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "tessera/core/error.hpp"
#include "tessera/distributed/mac.hpp"

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

// An IPv4 address of this host and its network mask (network order).
struct Interface {
  uint32_t addr = 0, mask = 0;
  std::string name;  // eth0
};

// This host's IPv4 addresses, those other hosts can reach first (loopback
// only when there is nothing else).
std::vector<Interface> local_addresses(size_t at_most) {
  std::vector<Interface> out, loopback;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) == 0) {
    for (ifaddrs* a = list; a; a = a->ifa_next) {
      if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET || !(a->ifa_flags & IFF_UP)) continue;
      Interface i;
      i.name = a->ifa_name ? a->ifa_name : "";
      i.addr = reinterpret_cast<const sockaddr_in*>(a->ifa_addr)->sin_addr.s_addr;
      if (a->ifa_netmask && a->ifa_netmask->sa_family == AF_INET)
        i.mask = reinterpret_cast<const sockaddr_in*>(a->ifa_netmask)->sin_addr.s_addr;
      (a->ifa_flags & IFF_LOOPBACK ? loopback : out).push_back(i);
    }
    freeifaddrs(list);
  }
  if (out.empty()) {
    out = loopback;
    if (out.empty()) out.push_back({htonl(INADDR_LOOPBACK), htonl(0xff000000), "lo"});
  }
  if (out.size() > at_most) out.resize(at_most);
  return out;
}

// Whether the interface is one the job's MPI traffic is told to use:
// OMPI_MCA_btl_tcp_if_include or OMPI_MCA_oob_tcp_if_include (which `tessera
// run` sets to the network its hosts share), each a list of networks
// ("10.0.0.0/24") and interface names.
bool chosen_for_mpi(const Interface& i) {
  for (const char* var : {"OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include"}) {
    const char* list = std::getenv(var);
    if (!list) continue;
    std::string all = list;
    size_t at = 0;
    while (at <= all.size()) {
      size_t comma = std::min(all.find(',', at), all.size());
      std::string item = all.substr(at, comma - at);
      at = comma + 1;
      size_t slash = item.find('/');
      if (slash == std::string::npos) {
        if (!item.empty() && item == i.name) return true;
        continue;
      }
      in_addr net{};
      char* end = nullptr;
      long bits = std::strtol(item.c_str() + slash + 1, &end, 10);
      if (inet_pton(AF_INET, item.substr(0, slash).c_str(), &net) != 1 || *end != '\0' ||
          bits < 0 || bits > 32) {
        continue;
      }
      uint32_t mask = bits == 0 ? 0 : htonl(~uint32_t{0} << (32 - bits));
      if ((i.addr & mask) == (net.s_addr & mask)) return true;
    }
  }
  return false;
}

std::string address_text(uint32_t addr, uint16_t port) {
  char ip[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &addr, ip, sizeof ip);
  return error_message(ip, ":", ntohs(port));
}

// The job's secret as taken from the environment (take_job_key_from_environment).
struct JobKey {
  std::mutex mu;
  bool taken = false;
  bool present = false;
  std::array<uint8_t, 32> key{};
  std::string error;  // set but not 64 hex digits
};

JobKey& job_key() {
  static JobKey* k = new JobKey();  // never destroyed: the heartbeat thread may outlive statics
  return *k;
}

// What ranks compare to learn that they hold the same secret, without
// showing it.
std::array<uint8_t, 8> key_check(const std::array<uint8_t, 32>& key) {
  static constexpr char kLabel[] = "tessera job key check";
  Digest d = hmac_sha256(key.data(), key.size(), kLabel, sizeof kLabel - 1);
  std::array<uint8_t, 8> out;
  std::memcpy(out.data(), d.data(), out.size());
  return out;
}

}  // namespace

void take_job_key_from_environment() {
  JobKey& k = job_key();
  std::lock_guard lock(k.mu);
  if (k.taken) return;
  k.taken = true;
  char* value = std::getenv(kJobKeyEnv);
  if (!value) return;
  size_t n = std::strlen(value);
  bool ok = from_hex(value, k.key.data(), k.key.size());
  // Overwritten where it is (the process's initial environment block is
  // what /proc/<pid>/environ shows), then removed for child processes.
  std::memset(value, '0', n);
  unsetenv(kJobKeyEnv);
  if (ok) {
    k.present = true;
  } else {
    k.error = error_message(kJobKeyEnv,
                            " must be 64 hex digits (the 32-byte job secret `tessera run` makes), "
                            "got ",
                            n, " characters");
  }
}

std::string Ignored::message(int rank, const std::string& where) const {
  return error_message("tessera: warning: [locality] rank ", rank, " ignored ", total(),
                       " heartbeat datagrams on ", where, ": ", junk, " junk, ", forged,
                       " forged (MAC did not match), ", replayed,
                       " replayed or of another launch, ", misaddressed,
                       " from an address other than the sender's (see docs/security.md, "
                       "Heartbeats)");
}

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

// A datagram between heartbeat threads. `mac` is HMAC-SHA-256, keyed with
// the job's secret, over every byte before it; the receiver checks it before
// it reads any other field.
struct Heartbeat::Packet {
  enum Kind : int32_t { beat = 1, goodbye = 2, failed = 3 };
  uint64_t launch = 0;  // the launch's nonce (rank 0's): earlier launches' datagrams are refused
  uint64_t seq = 0;     // the sender's sequence number, strictly increasing
  int32_t kind = beat;
  int32_t from = -1, to = -1;
  int32_t subject = -1;  // failed: the rank declared failed
  int32_t cut_off = 0;   // failed: the subject declared itself cut off
  int32_t by = -1;       // failed: the rank that noticed (the sender may pass the notice on)
  double silent = 0;  // failed: seconds the subject was silent
  uint8_t mac[32] = {};
};
static_assert(sizeof(Heartbeat::Packet) == 80 && offsetof(Heartbeat::Packet, mac) == 48,
              "a heartbeat datagram has no padding: every byte is covered by the MAC");

namespace {

// What every rank tells the others at start-up (through MPI), before the
// sockets are bound.
struct Hello {
  uint64_t nonce;
  uint8_t key[32];        // rank 0 without TESSERA_JOB_KEY: the secret it drew; else zeros
  uint8_t key_check[8];   // with TESSERA_JOB_KEY: key_check() of it
  int32_t has_env_key;
  uint16_t count;
  uint16_t preferred;  // bit i: addrs[i] is on the network MPI is told to use (chosen_for_mpi)
  uint32_t addrs[8];  // IPv4, network order
  uint32_t masks[8];
  char host[64];
};

// And after: where its socket is.
struct Bound {
  uint32_t addr;  // network order; 0: every address (INADDR_ANY)
  uint16_t port;  // network order
  uint16_t reserved;
  int32_t ok;
};

bool same_addresses(const Hello& a, const Hello& b) {
  return a.count == b.count && std::equal(a.addrs, a.addrs + std::min<int>(a.count, 8), b.addrs);
}

// The address this rank's socket is bound to: loopback when every rank is on
// this host; else the first of this host's addresses that shares a network
// (by its mask) with an address of every rank on another host (and is not
// that rank's own address too, as a container bridge on every host would
// be), those on the network MPI is told to use first; else 0 (every
// address; the sender's address is still checked).
uint32_t address_to_bind(const std::vector<Hello>& all, int rank) {
  const Hello& me = all[rank];
  auto here = [&](const Hello& h) {
    return std::strncmp(h.host, me.host, sizeof h.host) == 0 && same_addresses(h, me);
  };
  if (std::all_of(all.begin(), all.end(), here)) return htonl(INADDR_LOOPBACK);
  for (int k = 0; k < 2 * std::min<int>(me.count, 8); ++k) {
    int i = k % std::min<int>(me.count, 8);
    bool preferred = (me.preferred >> i) & 1;
    if (preferred != (k < std::min<int>(me.count, 8))) continue;
    uint32_t a = me.addrs[i], m = me.masks[i];
    if (a == htonl(INADDR_LOOPBACK) || m == 0) continue;
    bool reaches_all = true;
    for (const Hello& h : all) {
      if (here(h)) continue;
      bool reached = false;
      for (int j = 0; j < std::min<int>(h.count, 8) && !reached; ++j) {
        uint32_t b = h.addrs[j];
        bool mine = std::find(me.addrs, me.addrs + std::min<int>(me.count, 8), b) !=
                    me.addrs + std::min<int>(me.count, 8);
        reached = !mine && (b & m) == (a & m);
      }
      reaches_all = reaches_all && reached;
    }
    if (reaches_all) return a;
  }
  return 0;
}

}  // namespace

std::vector<int> heartbeat_targets(int rank, int size) {
  std::vector<int> out;
  for (int d = 1; d < size; d *= 2) out.push_back((rank + d) % size);
  return out;
}

std::vector<int> heartbeat_watched(int rank, int size) {
  std::vector<int> out;
  for (int d = 1; d < size; d *= 2) out.push_back((rank - d % size + size) % size);
  return out;
}

std::vector<int> notice_targets(int rank, int size, int subject) {
  std::vector<int> out;
  for (int t : heartbeat_targets(rank, size)) {
    if (t != subject) out.push_back(t);
  }
  return out;
}

std::string Heartbeat::start(const Allgather& allgather, int rank, int size, double timeout,
                             Callbacks callbacks) {
  rank_ = rank;
  size_ = size;
  timeout_ = timeout;
  // Ten heartbeats per timeout, at most one a second: a peer is declared
  // failed after missing about ten.
  interval_ = std::clamp(timeout / 10, 0.02, 1.0);
  callbacks_ = std::move(callbacks);
  targets_ = heartbeat_targets(rank, size);
  watched_ = heartbeat_watched(rank, size);
  last_seq_.assign(size, 0);

  // The job's secret: TESSERA_JOB_KEY (from `tessera run`), else rank 0
  // draws one and gives it to the others below. Every rank makes the same
  // exchanges whatever went wrong, and errors are reported after them.
  std::string error;
  JobKey& jk = job_key();
  take_job_key_from_environment();
  Hello hello{};
  {
    std::lock_guard lock(jk.mu);
    if (!jk.error.empty()) {
      error = jk.error;
    } else if (jk.present) {
      key_ = jk.key;
      hello.has_env_key = 1;
      std::array<uint8_t, 8> check = key_check(key_);
      std::memcpy(hello.key_check, check.data(), check.size());
    } else if (rank == 0 && !random_bytes(hello.key, sizeof hello.key)) {
      error = error_message("cannot draw the job's secret from the kernel (getrandom, "
                            "/dev/urandom): ",
                            std::strerror(errno));
    }
  }
  if (!random_bytes(&hello.nonce, sizeof hello.nonce) && error.empty())
    error = error_message("cannot draw a nonce from the kernel: ", std::strerror(errno));
  std::vector<Interface> addrs = local_addresses(8);
  for (size_t i = 0; i < addrs.size(); ++i) {
    hello.addrs[i] = addrs[i].addr;
    hello.masks[i] = addrs[i].mask;
    if (chosen_for_mpi(addrs[i])) hello.preferred |= static_cast<uint16_t>(1u << i);
  }
  hello.count = static_cast<uint16_t>(addrs.size());
  gethostname(hello.host, sizeof hello.host - 1);
  std::vector<Hello> hellos(size);
  if (!allgather(&hello, hellos.data(), sizeof hello))
    return "[locality] the exchange of heartbeat addresses failed";
  for (Hello& h : hellos) h.host[sizeof h.host - 1] = '\0';
  if (error.empty()) {
    for (int r = 1; r < size && error.empty(); ++r) {
      if (hellos[r].has_env_key != hellos[0].has_env_key) {
        int with = hellos[r].has_env_key ? r : 0, without = hellos[r].has_env_key ? 0 : r;
        error = error_message(kJobKeyEnv, " (the job's secret) is set on rank ", with,
                              " but not on rank ", without,
                              ": start every rank with `tessera run`, or every one with mpirun");
      } else if (hellos[0].has_env_key &&
                 !equal_in_constant_time(hellos[r].key_check, hellos[0].key_check, 8)) {
        error = error_message("rank ", r, " has another job secret (", kJobKeyEnv,
                              ") than rank 0: the ranks belong to different launches");
      }
    }
    if (!hellos[0].has_env_key) std::memcpy(key_.data(), hellos[0].key, key_.size());
  }
  for (Hello& h : hellos) std::memset(h.key, 0, sizeof h.key);
  std::memset(hello.key, 0, sizeof hello.key);
  launch_ = hellos[0].nonce;

  // The socket, bound to the address the job uses.
  uint32_t bind_addr = address_to_bind(hellos, rank);
  fd_ = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  sockaddr_in here{};
  here.sin_family = AF_INET;
  here.sin_addr.s_addr = bind_addr;
  socklen_t len = sizeof here;
  if (!error.empty()) {
  } else if (fd_ < 0 || wake_fd_ < 0) {
    error = error_message("cannot make a socket: ", std::strerror(errno));
  } else if (bind(fd_, reinterpret_cast<sockaddr*>(&here), sizeof here) != 0 ||
             getsockname(fd_, reinterpret_cast<sockaddr*>(&here), &len) != 0) {
    error = error_message("cannot bind a UDP socket to ", address_text(bind_addr, 0), ": ",
                          std::strerror(errno));
  }
  bound_ = address_text(bind_addr, here.sin_port);
  Bound mine{bind_addr, here.sin_port, 0, error.empty()};
  std::vector<Bound> all(size);
  if (!allgather(&mine, all.data(), sizeof mine))
    return "[locality] the exchange of heartbeat addresses failed";
  for (int r = 0; r < size; ++r) {
    if (!all[r].ok) {
      for (int* fd : {&fd_, &wake_fd_}) {
        if (*fd >= 0) close(*fd);
        *fd = -1;
      }
      return error_message(
          "[locality] failure detection (TESSERA_FAILURE_TIMEOUT) cannot start on rank ", r,
          r == rank ? ": " + error : std::string(" (see its error)"));
    }
  }
  contacts_.resize(size);
  for (int r = 0; r < size; ++r) {
    Contact& c = contacts_[r];
    const Hello& h = hellos[r];
    std::vector<uint32_t> known(h.addrs, h.addrs + std::min<int>(h.count, 8));
    if (all[r].addr != 0) {
      c.addrs = {all[r].addr};
    } else {
      c.addrs = known;
      // Bound to every address, it may send from loopback to a rank on
      // its host.
      if (std::strcmp(h.host, hellos[rank].host) == 0 && same_addresses(h, hellos[rank]))
        c.addrs.push_back(htonl(INADDR_LOOPBACK));
    }
    c.port = all[r].port;
    c.host = h.host[0] ? h.host : "?";
    if (!known.empty() && known[0] != htonl(INADDR_LOOPBACK)) {
      char ip[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &known[0], ip, sizeof ip);
      c.host += error_message(" (", ip, ")");
    }
  }
  thread_ = std::thread([this] { loop(); });
  return "";
}

Ignored Heartbeat::ignored() const {
  Ignored i;
  i.junk = junk_.load();
  i.forged = forged_.load();
  i.replayed = replayed_.load();
  i.misaddressed = misaddressed_.load();
  return i;
}

void Heartbeat::report_ignored() const {
  Ignored i = ignored();
  if (i.total() == 0 || reported_.exchange(true)) return;
  std::fprintf(stderr, "%s\n", i.message(rank_, bound_).c_str());
  std::fflush(stderr);
}

void Heartbeat::send_to(int peer, Packet p) {
  const Contact& c = contacts_[peer];
  p.launch = launch_;
  p.to = peer;
  // Every address the peer may be reached at (one, unless it is bound to
  // every address): one of them is on the network between the two hosts.
  for (uint32_t ip : c.addrs) {
    if (ip == htonl(INADDR_LOOPBACK) && c.addrs.size() > 1) continue;
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_addr.s_addr = ip;
    to.sin_port = c.port;
    p.seq = next_seq_.fetch_add(1, std::memory_order_relaxed);
    Digest mac = hmac_sha256(key_.data(), key_.size(), &p, offsetof(Packet, mac));
    std::memcpy(p.mac, mac.data(), sizeof p.mac);
    // Errors (no route, a full buffer) are silence: the receiver judges.
    sendto(fd_, &p, sizeof p, MSG_DONTWAIT | MSG_NOSIGNAL, reinterpret_cast<const sockaddr*>(&to),
           sizeof to);
  }
}

bool Heartbeat::accept(const Packet& p, size_t got, const void* from_addr) {
  if (got != sizeof p) {
    junk_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  Digest mac = hmac_sha256(key_.data(), key_.size(), &p, offsetof(Packet, mac));
  if (!equal_in_constant_time(mac.data(), p.mac, sizeof p.mac)) {
    forged_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  // Authentic from here: made by a rank of this job, but maybe of another
  // launch, for another rank, re-sent from elsewhere, or again.
  if (p.launch != launch_ || p.to != rank_ || p.from < 0 || p.from >= size_ || p.from == rank_ ||
      p.kind < Packet::beat || p.kind > Packet::failed) {
    replayed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  const auto* sa = static_cast<const sockaddr_in*>(from_addr);
  const Contact& c = contacts_[p.from];
  if (sa->sin_family != AF_INET || sa->sin_port != c.port ||
      std::find(c.addrs.begin(), c.addrs.end(), sa->sin_addr.s_addr) == c.addrs.end()) {
    misaddressed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  if (p.seq <= last_seq_[p.from]) {
    replayed_.fetch_add(1, std::memory_order_relaxed);
    return false;
  }
  last_seq_[p.from] = p.seq;
  return true;
}

void Heartbeat::declare(PeerFailure f) {
  declared_ = true;
  f.self = rank_;
  f.timeout = timeout_;
  {
    // Whether this rank noticed or was told, it passes the notice on to the
    // ranks it sends heartbeats to, once (declare runs once), twice each: a
    // datagram may be lost, and every rank hears from up to log2(N) ranks
    // that pass it on; one that hears nothing is left to its own detection
    // or to mpirun, which stops the job when this rank leaves.
    Packet p;
    p.kind = Packet::failed;
    p.from = rank_;
    p.subject = f.rank;
    p.cut_off = f.cut_off;
    p.by = f.noticed_by;
    p.silent = f.silent;
    const std::vector<int> to = notice_targets(rank_, size_, f.rank);
    for (int copy = 0; copy < kNoticeCopies; ++copy) {
      for (int r : to) send_to(r, p);
    }
  }
  report_ignored();
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
  beat.from = rank_;
  while (!stop_.load(std::memory_order_acquire)) {
    auto until = give_up_at ? std::min(next_beat, *give_up_at) : next_beat;
    int wait_ms =
        static_cast<int>(std::ceil(std::max(0.0, seconds_between(Clock::now(), until)) * 1000));
    pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    poll(fds, 2, wait_ms);
    if (stop_.load(std::memory_order_acquire)) break;
    now = Clock::now();
    // At most so many datagrams a turn: a flood delays the heartbeats this
    // rank sends by one turn, not for as long as it lasts. One byte more than
    // a datagram tells a longer one.
    alignas(Packet) unsigned char buf[sizeof(Packet) + 1];
    Packet p;
    for (int n = 0; n < kDatagramsPerTurn; ++n) {
      sockaddr_in from{};
      socklen_t from_len = sizeof from;
      ssize_t got = recvfrom(fd_, buf, sizeof buf, MSG_DONTWAIT | MSG_TRUNC,
                             reinterpret_cast<sockaddr*>(&from), &from_len);
      if (got < 0) break;
      std::memcpy(&p, buf, sizeof p);
      if (!accept(p, static_cast<size_t>(got), &from)) continue;
      if (p.kind == Packet::beat) {
        heard[p.from] = now;
        ever[p.from] = 1;
      } else if (p.kind == Packet::goodbye) {
        left[p.from] = 1;
      } else if (p.kind == Packet::failed && !declared_ && p.subject >= 0 && p.subject < size_ &&
                 p.by >= 0 && p.by < size_) {
        PeerFailure f;
        f.rank = p.subject;
        f.host = contacts_[p.subject].host;
        f.silent = p.silent;
        f.noticed_by = p.by;
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
      for (int t : targets_) send_to(t, beat);
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
  p.kind = Packet::goodbye;
  p.from = rank_;
  for (int copy = 0; copy < 2; ++copy) {
    for (int t : targets_) send_to(t, p);
  }
  stop_.store(true, std::memory_order_release);
  uint64_t one = 1;
  if (write(wake_fd_, &one, sizeof one) < 0) {
    // The thread also wakes within a heartbeat interval.
  }
  thread_.join();
  close(fd_);
  close(wake_fd_);
  report_ignored();
}

}  // namespace tessera::distributed::detail
