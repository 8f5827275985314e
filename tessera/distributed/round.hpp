// Agreement rounds of the communication engine (engine.hpp): what one rank
// offers in a round and the allgather that brings every rank's offer to every
// rank. Internal to tessera/distributed.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera::distributed::detail {

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
  void swap(Bytes& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0, capacity_ = 0;
};

// What one rank offers in a round, as sent: a header, the entries, then the
// inline data of the entries that carry some, in entry order.
struct OfferHeader {
  int32_t count = 0;
  // Bit 0 (kFinished): this rank's program has ended: it will never offer
  // more. Bit 1 (kStalled): this rank's rounds have agreed on nothing for
  // Engine::kUnmatchedDelay while every rank offered something.
  int32_t finished = 0;
  static constexpr int32_t kFinished = 1, kStalled = 2;
};

struct Offer {
  bool finished = false;
  bool stalled = false;
  std::vector<Entry> entries;
  std::vector<const char*> data;  // inline data of entries[i] (nullptr: none)
};

// Parses into `o`, reusing its vectors (agreement rounds run per collective:
// no allocation once warm). Throws runtime_error on a malformed block.
void parse_offer(const Bytes& block, Offer& o);
Offer parse_offer(const Bytes& block);

// Every rank's block of bytes on every rank (an allgather of blocks of any
// size), by Bruck's algorithm over point-to-point messages: ceil(log2 N)
// exchanges, any N. Blocks of different sizes are safe, which collective
// allgathers are not. Each stage's receive for the next round is posted as
// soon as this round's has arrived, so a message of up to kPostedBytes lands
// in place (no probe, no copy out of MPI's queue of unexpected messages); a
// larger one is announced by an empty message and sent on a tag of its own,
// where it is probed for and received at its size.
class BlockGather {
 public:
  // Room for a round's offer with 64 KiB of inline data (engine.hpp:
  // kInlineBudget) and its entries.
  static constexpr int kPostedBytes = 72 << 10;
  static constexpr int kLargeTag = 64;  // added to the stage's tag

  // This rank's block for the next round, to fill before start(); its
  // buffer is reused from round to round.
  Bytes& next_block(int rank, int size);

  // Starts gathering every rank's block; this rank's is next_block's. Every
  // round on `comm` must go through this one object: its posted receives
  // match the other ranks' next messages.
  void start(MPI_Comm comm, int rank, int size);

  bool active() const { return active_; }
  // True while messages this rank sent are not yet complete.
  bool sending() const { return !sends_.empty() || own_send_ != MPI_REQUEST_NULL; }
  const std::vector<Bytes>& blocks() const { return blocks_; }

  // Advances as far as messages allow; true once every block is here.
  // Throws runtime_error on MPI errors. A message holding one block is the
  // block itself; one holding several frames each with its length.
  bool progress();

  // Completes the sends of earlier stages (their buffers live until then).
  void reap_sends();

  // Cancels the receives posted for a round that will not come (before
  // MPI_Finalize). Throws runtime_error on MPI errors.
  void cancel_posted();

 private:
  static void ok(int rc, const char* call);
  // Posts the receive of the stage's next message (if not posted).
  void post(int stage);
  // Sends n bytes at p to `to` for this stage (announced, on the large tag,
  // if more than kPostedBytes); `keep` holds the buffer until sent; `own`:
  // this rank's block (tracked as own_send_).
  void send(const char* p, size_t n, int to, std::shared_ptr<const void> keep, bool own);

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, held_ = 1, stage_ = 0;
  bool sent_ = false, receiving_ = false, active_ = false;
  bool large_ = false;  // this stage's block comes on the large tag (announced)
  std::vector<Bytes> blocks_;
  Bytes incoming_;
  // Per stage: the receive posted for its next message, and its buffer.
  std::vector<MPI_Request> posted_;
  std::vector<Bytes> posted_buf_;
  MPI_Message message_ = MPI_MESSAGE_NULL;
  MPI_Request recv_ = MPI_REQUEST_NULL;
  MPI_Request own_send_ = MPI_REQUEST_NULL;  // this rank's block, sent from blocks_[rank_]
  std::vector<std::pair<MPI_Request, std::shared_ptr<const void>>> sends_;  // with the buffer each reads
};

}  // namespace tessera::distributed::detail
