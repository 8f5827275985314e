// Agreement rounds of the communication engine (comm.cpp): what one rank
// offers in a round and the allgather that brings every rank's offer to every
// rank. Internal to tessera/dist.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera::dist::detail {

// MPI's text for an error code.
std::string mpi_error(int rc);

// One operation as a rank offers it in an agreement round.
struct Entry {
  uint64_t site = 0;        // hash of the call site
  uint64_t key = 0;         // sequence number of the call site
  uint64_t hash = 0;        // fingerprint: operation, settings, dtype, shape, site
  int64_t extent = 0;       // extent along the free axis (all_gather, gather, all_to_all)
  int64_t inline_bytes = -1;  // bytes of data carried in the round (-1: none)
};

// A byte buffer reused from round to round. Growing it leaves the bytes
// unspecified (they are written or received into at once), where
// std::string would zero them first.
class Bytes {
 public:
  char* data() { return data_.get(); }
  const char* data() const { return data_.get(); }
  size_t size() const { return size_; }
  // Sets the size to n; the contents are unspecified.
  void reset(size_t n) {
    if (n > capacity_) {
      capacity_ = std::max(n, 2 * capacity_);
      data_.reset(new char[capacity_]);
    }
    size_ = n;
  }
  void assign(const char* p, size_t n) {
    reset(n);
    if (n) std::memcpy(data_.get(), p, n);
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0, capacity_ = 0;
};

// What one rank offers in a round, as sent: a header, the entries, then the
// inline data of the entries that carry some, in entry order.
struct OfferHeader {
  int32_t count = 0;
  int32_t finished = 0;  // this rank's program has ended: it will never offer more
};

struct Offer {
  bool finished = false;
  std::vector<Entry> entries;
  std::vector<const char*> data;  // inline data of entries[i] (nullptr: none)
};

// Parses into `o`, reusing its vectors (agreement rounds run per collective:
// no allocation once warm). Throws runtime_error on a malformed block.
void parse_offer(const Bytes& block, Offer& o);
Offer parse_offer(const Bytes& block);

// Every rank's block of bytes on every rank (an allgather of blocks of any
// size), by Bruck's algorithm over point-to-point messages: ceil(log2 N)
// exchanges, any N. Blocks of different sizes are safe (receives are sized
// by probing), which collective allgathers are not.
class BlockGather {
 public:
  // This rank's block for the next round, to fill before start(); its
  // buffer is reused from round to round.
  Bytes& next_block(int rank, int size);

  // Starts gathering every rank's block; this rank's is next_block's.
  void start(MPI_Comm comm, int rank, int size) {
    comm_ = comm;
    rank_ = rank;
    size_ = size;
    held_ = 1;
    stage_ = 0;
    sent_ = receiving_ = false;
    active_ = true;
  }

  bool active() const { return active_; }
  // True while messages this rank sent are not yet complete.
  bool sending() const { return !sends_.empty() || own_send_ != MPI_REQUEST_NULL; }
  const std::vector<Bytes>& blocks() const { return blocks_; }

  // Advances as far as messages allow; true once every block is here.
  // Throws runtime_error on MPI errors. A message holding one block is the
  // block itself (sizes come from probing); one holding several frames each
  // with its length.
  bool progress();

  // Completes the sends of earlier stages (their buffers live until then).
  void reap_sends();

 private:
  static void ok(int rc, const char* call);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, held_ = 1, stage_ = 0;
  bool sent_ = false, receiving_ = false, active_ = false;
  std::vector<Bytes> blocks_;
  Bytes incoming_;
  MPI_Message message_ = MPI_MESSAGE_NULL;
  MPI_Request recv_ = MPI_REQUEST_NULL;
  MPI_Request own_send_ = MPI_REQUEST_NULL;  // this rank's block, sent from blocks_[rank_]
  std::vector<std::pair<MPI_Request, std::shared_ptr<const void>>> sends_;  // with the buffer each reads
};

}  // namespace tessera::dist::detail
