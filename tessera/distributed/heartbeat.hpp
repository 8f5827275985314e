// Failure detection that does not depend on MPI: a thread of its own sends
// small UDP datagrams (heartbeats) to a few peers and declares a peer failed
// when nothing came from it for TESSERA_FAILURE_TIMEOUT seconds. An MPI
// message stalls when a peer is stopped or a link is dead, and MPI calls may
// block; this thread neither calls MPI after start-up nor waits for workers
// or the progress thread, so a loaded machine does not silence it.
//
// Who watches whom: rank r sends to r + 1, r + 2, r + 4, ... (mod N) and
// watches r - 1, r - 2, r - 4, ...: each rank sends and checks log2(N)
// peers, and every rank is watched by as many. A rank that declares a peer
// failed sends a notice (twice: a datagram may be lost) to the ranks it sends
// heartbeats to, and every rank that learns of the failure from a notice
// passes it on the same way, once (dissemination over the heartbeats' graph):
// every rank is told within ceil(log2 N) hops, by up to ceil(log2 N) senders,
// and no rank sends more than 2 ceil(log2 N) datagrams per address for a
// notice (it was 2(N - 1) from every rank that noticed). All of them fail
// at once, naming the same rank. A rank that hears from none of the (two or more) peers it
// watches says that it is cut off itself. A rank whose program ended cleanly
// says goodbye, after which its silence is no failure. A rank that was not
// running itself for half the timeout (stopped, suspended) forgets what it
// heard before: it cannot judge its peers over a time it did not see.
//
// Datagrams are authenticated (docs/security.md, "Heartbeats"): every one
// carries HMAC-SHA-256 (mac.hpp) over all its bytes, keyed with the job's
// secret (TESSERA_JOB_KEY from `tessera run`, or drawn by rank 0 and shared
// through the start-up MPI exchange under plain mpirun), the launch's nonce
// and a per-sender sequence number; the receiver checks the MAC before
// reading any field, then the launch, the sender's address and port, and that
// the sequence number is above the last one accepted from that sender. The
// socket is bound to the address the job uses (loopback when every rank is
// on one host). Whatever fails a check is counted and ignored.
//
// Internal to tessera/distributed (the engine starts it: engine.hpp).
#pragma once

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tessera/distributed/comm.hpp"

namespace tessera::distributed::detail {

// Seconds of silence after which a peer is declared failed
// (TESSERA_FAILURE_TIMEOUT; default 30; 0 or "off": no detection). Throws
// ValueError naming the variable for anything else than a number or "off".
double failure_timeout_seconds();

// The environment variable that carries the job's secret (64 hex digits) from
// `tessera run` to its ranks.
inline constexpr const char* kJobKeyEnv = "TESSERA_JOB_KEY";

// Moves the job's secret out of the environment into this process (once;
// later calls do nothing): the value is overwritten in place (so that
// /proc/<pid>/environ shows no secret) and the variable removed (so that
// child processes do not get it). The Python package calls it at import;
// Heartbeat::start calls it too, and reports a value that is not 64 hex
// digits as its start-up error. Never throws.
void take_job_key_from_environment();

// Datagrams a heartbeat ignored, by reason.
struct Ignored {
  uint64_t junk = 0;        // not a heartbeat datagram (size)
  uint64_t forged = 0;      // the MAC does not match
  uint64_t replayed = 0;    // authentic, but of another launch, for another rank, or not newer
  uint64_t misaddressed = 0;  // authentic, but not from the sender's address and port
  uint64_t total() const { return junk + forged + replayed + misaddressed; }
  // "tessera: warning: [locality] rank 1 ignored 12 heartbeat datagrams ...".
  std::string message(int rank, const std::string& where) const;
};

// The ranks `rank` sends heartbeats to, rank + 1, rank + 2, rank + 4, ...
// (mod size), ceil(log2 size) of them; and those it watches, rank - 1,
// rank - 2, rank - 4, ...
std::vector<int> heartbeat_targets(int rank, int size);
std::vector<int> heartbeat_watched(int rank, int size);

// Where `rank` sends a failure notice about `subject` when it first learns of
// the failure (by its own detection or from a notice): its heartbeat targets
// but the subject. Each gets kNoticeCopies copies.
std::vector<int> notice_targets(int rank, int size, int subject);
inline constexpr int kNoticeCopies = 2;

// A rank declared failed.
struct PeerFailure {
  int rank = -1;           // the rank not heard from (this rank's own when it is cut off)
  std::string host;        // its host name and address: "node3 (10.0.0.3)"
  double silent = 0;       // seconds since it was last heard from
  int noticed_by = -1;     // the rank that noticed (this one, or the one that sent a notice)
  int self = -1;           // the rank this process runs
  bool cut_off = false;    // this rank heard from none of the peers it watches
  std::vector<int> peers;  // cut_off: the peers it watches
  double timeout = 0;

  // "rank 3 on host node3 (10.0.0.3) has not been heard from for 5.2 s (...)".
  std::string message() const;
  // The marker line for `tessera run` (without the newline).
  std::string marker() const;
};

class Heartbeat {
 public:
  struct Callbacks {
    // Called once, on the heartbeat thread, when a failure is declared.
    std::function<void(const PeerFailure&)> detected;
    // Called on the heartbeat thread when the process is still alive
    // kExitGrace after `detected`: ends the process.
    std::function<void()> give_up;
  };

  // Gathers `bytes` bytes from every rank into `all` (rank order), on every
  // rank; false if that failed (the engine's is an MPI_Allgather).
  using Allgather = std::function<bool(const void* mine, void* all, size_t bytes)>;

  // Exchanges addresses with every rank through `allgather` (every rank
  // calls it at start-up) and starts the thread. Returns an error message,
  // or "" when started.
  std::string start(const Allgather& allgather, int rank, int size, double timeout,
                    Callbacks callbacks);

  // This rank's program ended cleanly: tells the ranks that watch it and
  // stops the thread. Not called after a failure (the thread then ends the
  // process if the program does not).
  void goodbye();

  bool running() const { return thread_.joinable(); }

  // What was ignored so far (read by the thread's owner after goodbye, and
  // written to stderr then and when a failure is declared, when nonzero).
  Ignored ignored() const;

  // Time the program has to end on its own after a failure is declared.
  static constexpr double kExitGrace = 2.0;
  // Datagrams read in one turn of the thread at most.
  static constexpr int kDatagramsPerTurn = 256;

 // A datagram between heartbeat threads (80 bytes, heartbeat.cpp).
  struct Packet;

 private:
  void loop();
  void send_to(int peer, Packet p);
  void declare(PeerFailure f);
  // Checks one received datagram; true when it may be acted on.
  bool accept(const Packet& p, size_t got, const void* from_addr);
  void report_ignored() const;

  int rank_ = 0, size_ = 1, fd_ = -1, wake_fd_ = -1;
  double timeout_ = 0, interval_ = 1;
  uint64_t launch_ = 0;           // this launch's nonce (rank 0's)
  std::array<uint8_t, 32> key_{};  // the job's secret
  std::atomic<uint64_t> next_seq_{1};
  std::vector<uint64_t> last_seq_;  // per sender: the last sequence number accepted
  std::atomic<uint64_t> junk_{0}, forged_{0}, replayed_{0}, misaddressed_{0};
  std::string bound_;  // "127.0.0.1:40123"
  mutable std::atomic<bool> reported_{false};
  std::vector<int> targets_, watched_;  // the ranks this one sends to, and watches
  struct Contact {
    std::vector<uint32_t> addrs;  // IPv4, network order
    uint16_t port = 0;            // network order
    std::string host;             // "node3 (10.0.0.3)"
  };
  std::vector<Contact> contacts_;
  Callbacks callbacks_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  bool declared_ = false;
};

}  // namespace tessera::distributed::detail
