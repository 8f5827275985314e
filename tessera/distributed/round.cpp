#include "tessera/distributed/round.hpp"

#include <algorithm>
#include <stdexcept>

namespace tessera::distributed::detail {

std::string mpi_error(int rc) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(text, len);
}

void parse_offer(const Bytes& block, Offer& o) {
  o.entries.clear();
  o.data.clear();
  OfferHeader h;
  if (block.size() < sizeof h) throw std::runtime_error("[collective] malformed agreement message");
  std::memcpy(&h, block.data(), sizeof h);
  o.finished = (h.finished & OfferHeader::kFinished) != 0;
  o.stalled = (h.finished & OfferHeader::kStalled) != 0;
  size_t at = sizeof h;
  if (h.count < 0 || block.size() < at + sizeof(Entry) * h.count) {
    throw std::runtime_error("[collective] malformed agreement message");
  }
  o.entries.resize(h.count);
  if (h.count) std::memcpy(o.entries.data(), block.data() + at, sizeof(Entry) * h.count);
  at += sizeof(Entry) * h.count;
  for (const Entry& e : o.entries) {
    if (e.inline_bytes < 0) {
      o.data.push_back(nullptr);
      continue;
    }
    if (block.size() < at + static_cast<size_t>(e.inline_bytes)) {
      throw std::runtime_error("[collective] malformed agreement message");
    }
    o.data.push_back(block.data() + at);
    at += e.inline_bytes;
  }
}

Offer parse_offer(const Bytes& block) {
  Offer o;
  parse_offer(block, o);
  return o;
}

Bytes& BlockGather::next_block(int rank, int size) {
  if (static_cast<int>(blocks_.size()) != size) blocks_.resize(size);
  // A send of the last round may still read the old buffer: it keeps it. A
  // small one is usually complete (copied out eagerly): the buffer is
  // reused, with no allocation.
  if (own_send_ != MPI_REQUEST_NULL) {
    int flag = 0;
    ok(MPI_Test(&own_send_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
  }
  if (own_send_ != MPI_REQUEST_NULL) {
    sends_.push_back({own_send_, std::make_shared<Bytes>(std::move(blocks_[rank]))});
    own_send_ = MPI_REQUEST_NULL;
    blocks_[rank] = Bytes();
  }
  blocks_[rank].reset(0);
  return blocks_[rank];
}

void BlockGather::start(MPI_Comm comm, int rank, int size) {
  comm_ = comm;
  rank_ = rank;
  size_ = size;
  held_ = 1;
  stage_ = 0;
  sent_ = receiving_ = large_ = false;
  active_ = true;
  int stages = 0;
  while ((1 << stages) < size_) ++stages;
  if (static_cast<int>(posted_.size()) != stages) {
    posted_.assign(stages, MPI_REQUEST_NULL);
    posted_buf_.resize(stages);
  }
  for (int s = 0; s < stages; ++s) post(s);
}

void BlockGather::post(int stage) {
  if (posted_[stage] != MPI_REQUEST_NULL) return;
  int from = (rank_ + (1 << stage)) % size_;
  posted_buf_[stage].reset(kPostedBytes);
  ok(MPI_Irecv(posted_buf_[stage].data(), kPostedBytes, MPI_BYTE, from, stage, comm_, &posted_[stage]), "MPI_Irecv");
}

void BlockGather::send(const char* p, size_t n, int to, std::shared_ptr<const void> keep, bool own) {
  MPI_Request req;
  int tag = stage_;
  if (n > static_cast<size_t>(kPostedBytes)) {
    // An empty message announces it; it goes on the large tag.
    ok(MPI_Isend(nullptr, 0, MPI_BYTE, to, stage_, comm_, &req), "MPI_Isend");
    sends_.push_back({req, nullptr});
    tag = stage_ + kLargeTag;
  }
  ok(MPI_Isend(p, static_cast<int>(n), MPI_BYTE, to, tag, comm_, &req), "MPI_Isend");
  if (own) {
    own_send_ = req;
  } else {
    sends_.push_back({req, std::move(keep)});
  }
}

bool BlockGather::progress() {
  reap_sends();
  while (active_ && held_ < size_) {
    int d = 1 << stage_;
    int count = std::min(d, size_ - d);
    int to = (rank_ - d + size_) % size_;
    if (!sent_) {
      if (stage_ == 0) {
        // This rank's own block (stage 0 sends just it), from its buffer: no copy.
        const Bytes& b = blocks_[rank_];
        send(b.data(), b.size(), to, nullptr, true);
      } else {
        auto buf = std::make_shared<std::string>();
        for (int i = 0; i < count; ++i) {
          const Bytes& b = blocks_[(rank_ + i) % size_];
          if (count > 1) {
            uint64_t n = b.size();
            buf->append(reinterpret_cast<const char*>(&n), sizeof n);
          }
          buf->append(b.data(), b.size());
        }
        const char* data = buf->data();
        size_t n = buf->size();
        send(data, n, to, std::move(buf), false);
      }
      sent_ = true;
    }
    // One block lands in its place directly.
    Bytes& into = count == 1 ? blocks_[(rank_ + d) % size_] : incoming_;
    if (!receiving_) {
      int flag = 0;
      MPI_Status status;
      ok(MPI_Test(&posted_[stage_], &flag, &status), "MPI_Test");
      if (!flag) return false;
      int bytes = 0;
      MPI_Get_count(&status, MPI_BYTE, &bytes);
      large_ = bytes == 0;
      if (!large_) {
        // The message is in the posted buffer: it becomes the block, and
        // the block's old buffer takes the next round's receive.
        into.swap(posted_buf_[stage_]);
        into.reset(static_cast<size_t>(bytes));
      }
      post(stage_);
      receiving_ = true;
    }
    if (large_) {
      if (recv_ == MPI_REQUEST_NULL) {
        int flag = 0;
        MPI_Status status;
        ok(MPI_Improbe((rank_ + d) % size_, stage_ + kLargeTag, comm_, &flag, &message_, &status), "MPI_Improbe");
        if (!flag) return false;
        int bytes = 0;
        MPI_Get_count(&status, MPI_BYTE, &bytes);
        into.reset(bytes);
        ok(MPI_Imrecv(into.data(), bytes, MPI_BYTE, &message_, &recv_), "MPI_Imrecv");
      }
      int flag = 0;
      ok(MPI_Test(&recv_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
      if (!flag) return false;
    }
    if (count > 1) {
      size_t at = 0;
      for (int i = 0; i < count; ++i) {
        uint64_t n = 0;
        if (at + sizeof n > incoming_.size()) throw std::runtime_error("[collective] malformed agreement message");
        std::memcpy(&n, incoming_.data() + at, sizeof n);
        at += sizeof n;
        if (at + n > incoming_.size()) throw std::runtime_error("[collective] malformed agreement message");
        blocks_[(rank_ + d + i) % size_].assign(incoming_.data() + at, n);
        at += n;
      }
    }
    held_ += count;
    ++stage_;
    sent_ = receiving_ = large_ = false;
  }
  active_ = false;
  return true;
}

void BlockGather::cancel_posted() {
  for (MPI_Request& r : posted_) {
    if (r == MPI_REQUEST_NULL) continue;
    ok(MPI_Cancel(&r), "MPI_Cancel");
    ok(MPI_Wait(&r, MPI_STATUS_IGNORE), "MPI_Wait");
  }
}

void BlockGather::reap_sends() {
  if (own_send_ != MPI_REQUEST_NULL) {
    int flag = 0;
    ok(MPI_Test(&own_send_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
  }
  for (size_t i = 0; i < sends_.size();) {
    int flag = 0;
    ok(MPI_Test(&sends_[i].first, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    if (flag) {
      sends_[i] = std::move(sends_.back());
      sends_.pop_back();
    } else {
      ++i;
    }
  }
}

void BlockGather::ok(int rc, const char* call) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(std::string("[collective] ") + call + " failed: " + mpi_error(rc));
}

}  // namespace tessera::distributed::detail
