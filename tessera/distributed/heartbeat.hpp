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
// failed tells every rank (a notice), so all of them fail at once, naming the
// same rank. A rank that hears from none of the (two or more) peers it
// watches says that it is cut off itself. A rank whose program ended cleanly
// says goodbye, after which its silence is no failure. A rank that was not
// running itself for half the timeout (stopped, suspended) forgets what it
// heard before: it cannot judge its peers over a time it did not see.
//
// Internal to tessera/distributed (the engine starts it: engine.hpp).
#pragma once

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

  // Time the program has to end on its own after a failure is declared.
  static constexpr double kExitGrace = 2.0;

 private:
  struct Packet;
  void loop();
  void send_to(int peer, const Packet& p);
  void declare(PeerFailure f);

  int rank_ = 0, size_ = 1, fd_ = -1, wake_fd_ = -1;
  double timeout_ = 0, interval_ = 1;
  uint64_t job_ = 0;
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
