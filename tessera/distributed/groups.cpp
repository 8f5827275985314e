// Groups in the communication engine (engine.hpp): making a group's channel,
// and the mismatch probe that tells a rank calling a collective on one group
// from a peer calling the same call of the same site on another.
//
// Why a channel per group, and not the group in the world's rounds: a
// round among all ranks would make every collective on a group of 2 cost
// log2 of the world and wait for ranks outside the group, and collectives
// on disjoint groups would no longer run concurrently. A group's own rounds
// keep all of the world's checks among its members (the fingerprint, which
// includes the group, "finished without calling", timeouts). What they
// cannot see is a member that called the collective on another group: that
// rank never offers in this group's round. The probe covers it: an
// operation that waits kProbeDelay asks its peers, and a peer whose same
// call of that site (counted over every group) went to another group says
// so; both fail with the usual message naming both sides.
#include <cstring>
#include <stdexcept>

#include "tessera/distributed/engine.hpp"

namespace tessera::distributed::detail {

void Engine::add_group(int id, const std::string& name, const std::vector<int>& members) {
  world();
  std::lock_guard lock(mu_);
  auto at = std::find(members.begin(), members.end(), rank_);
  if (at == members.end()) {
    throw std::logic_error(
        error_message("[mesh] rank ", rank_, " is not a member of its own group ", name));
  }
  int me = static_cast<int>(at - members.begin());
  // Every rank splits, for groups of one member too: MPI_Comm_split is
  // collective over the world. The groups of an axis are disjoint, so the
  // first member names the group.
  MPI_Comm comm = MPI_COMM_NULL;
  check(MPI_Comm_split(MPI_COMM_WORLD, members.front(), me, &comm), "mesh", "MPI_Comm_split");
  int size = 0;
  MPI_Comm_size(comm, &size);
  if (size != static_cast<int>(members.size())) {
    MPI_Comm_free(&comm);
    std::string msg =
        error_message("[mesh] the ranks disagree on group ", name, ": rank ", rank_, " expected ",
                      members.size(), " members, the split made ", size);
    set_broken(msg);
    throw std::runtime_error(msg);
  }
  if (size == 1) {
    MPI_Comm_free(&comm);
    return;
  }
  auto ch = std::make_unique<Channel>();
  ch->id = id;
  ch->label = "group " + name + " (ranks ";
  for (size_t i = 0; i < members.size(); ++i)
    ch->label += (i ? ", " : "") + std::to_string(members[i]);
  ch->label += ")";
  ch->members = members;
  ch->rank = me;
  ch->size = size;
  ch->inline_budget = inline_budget(size);
  for (MPI_Comm* c : {&ch->round_comm, &ch->data_comm, &ch->diag_comm, &ch->agree_comm}) {
    MPI_Comm_dup(comm, c);
    MPI_Comm_set_errhandler(*c, MPI_ERRORS_RETURN);
  }
  MPI_Comm_set_name(ch->round_comm, "tessera.group.round");
  MPI_Comm_set_name(ch->data_comm, "tessera.group.data");
  MPI_Comm_set_name(ch->diag_comm, "tessera.group.diag");
  MPI_Comm_set_name(ch->agree_comm, "tessera.group.agree");
  ch->host_of = host_map(ch->data_comm, size);
  ch->hosts = ch->host_of.empty() ? 1 : host_count(ch->host_of);
  MPI_Comm_free(&comm);
  std::lock_guard in_lock(in_mu_);
  channel_of_[id] = ch.get();
  channels_.push_back(std::move(ch));
  groups_.store(true);
}

std::vector<int> Engine::host_map(MPI_Comm comm, int size) const {
  if (!algorithm_.automatic && algorithm_.forced != Algorithm::hierarchical) return {};
  std::vector<int> host_of(size);
  if (const char* env = std::getenv("TESSERA_HOST_RANKS")) {
    char* end = nullptr;
    long k = std::strtol(env, &end, 10);
    if (*env == '\0' || *end != '\0' || k <= 0 || k > (1L << 30)) {
      throw std::invalid_argument(error_message(
          "[all_reduce] TESSERA_HOST_RANKS must be a positive integer (ranks per simulated host), "
          "got '", env, "'"));
    }
    for (int r = 0; r < size; ++r) host_of[r] = static_cast<int>(r / k);
    return host_of;
  }
  int me = 0, leader = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm shared = MPI_COMM_NULL;
  MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
  MPI_Allreduce(&me, &leader, 1, MPI_INT, MPI_MIN, shared);
  MPI_Comm_free(&shared);
  MPI_Allgather(&leader, 1, MPI_INT, host_of.data(), 1, MPI_INT, comm);
  return host_of;
}

std::string Engine::mismatch_message(const char* name, int rank_a, const std::string& a, int rank_b,
                                     const std::string& b) const {
  if (rank_b < rank_a) return mismatch_message(name, rank_b, b, rank_a, a);
  return error_message("[", name, "] ranks disagree on the collective: rank ", rank_a, " has ", a,
                       ", rank ", rank_b, " has ", b,
                       " (the same call of that site, on different groups)");
}

void Engine::probe_stalled() {
  auto now = Clock::now();
  for (size_t i = 1; i < channels_.size(); ++i) {
    Channel& ch = *channels_[i];
    for (auto& [k, op] : ch.pending) {
      if (now - op->start < kProbeDelay || now - op->probed < kProbeDelay) continue;
      op->probed = now;
      std::string d = op->desc();
      for (int r = 0; r < ch.size; ++r) {
        if (r == ch.rank) continue;
        auto p = std::make_unique<Probe>();
        p->site = op->entry.site;
        p->site_calls = op->site_calls;
        p->group = op->group;
        p->from = rank_;
        std::memcpy(p->desc, d.data(), std::min<size_t>(d.size(), kDescBytes - 1));
        MPI_Request req;
        check(MPI_Isend(p.get(), sizeof(Probe), MPI_BYTE, ch.members[r], kProbeTag, probe_comm_,
                        &req),
              op->name, "MPI_Isend");
        probe_sends_.push_back({req, std::move(p)});
      }
    }
  }
}

void Engine::answer_probes(std::vector<Completion>& done) {
  for (size_t i = 0; i < probe_sends_.size();) {
    int flag = 0;
    check(MPI_Test(&probe_sends_[i].first, &flag, MPI_STATUS_IGNORE), "collective", "MPI_Test");
    if (flag) {
      probe_sends_[i] = std::move(probe_sends_.back());
      probe_sends_.pop_back();
    } else {
      ++i;
    }
  }
  for (;;) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    check(MPI_Improbe(MPI_ANY_SOURCE, MPI_ANY_TAG, probe_comm_, &flag, &message, &status),
          "collective", "MPI_Improbe");
    if (!flag) return;
    int bytes = 0;
    MPI_Get_count(&status, MPI_BYTE, &bytes);
    Probe p;
    // Another rank of this job sent it (MPI, not the network): a size other
    // than a probe's is dropped all the same.
    check(MPI_Mrecv(&p, static_cast<int>(sizeof p), MPI_BYTE, &message, MPI_STATUS_IGNORE),
          "collective", "MPI_Mrecv");
    if (bytes != static_cast<int>(sizeof p)) continue;
    p.desc[kDescBytes - 1] = '\0';
    std::string msg;
    if (status.MPI_TAG == kProbeTag) {
      // This rank's same call of that site: on another group, a mismatch.
      const Record* mine = nullptr;
      {
        std::lock_guard lock(in_mu_);
        for (auto it = history_.rbegin(); it != history_.rend(); ++it) {
          if (it->site == p.site && it->site_calls == p.site_calls) {
            if (it->group != p.group) {
              mine = &*it;
              msg = mismatch_message(it->name, rank_, it->desc, p.from, p.desc);
            }
            break;
          }
        }
        auto reply = std::make_unique<Probe>();
        *reply = p;
        reply->from = rank_;
        reply->mismatch = mine != nullptr;
        std::memset(reply->desc, 0, kDescBytes);
        if (mine)
          std::memcpy(reply->desc, mine->desc.data(),
                      std::min<size_t>(mine->desc.size(), kDescBytes - 1));
        MPI_Request req;
        check(MPI_Isend(reply.get(), sizeof(Probe), MPI_BYTE, status.MPI_SOURCE, kReplyTag,
                        probe_comm_, &req),
              "collective", "MPI_Isend");
        probe_sends_.push_back({req, std::move(reply)});
      }
    } else if (status.MPI_TAG == kReplyTag && p.mismatch) {
      auto ch = channel_of_.find(p.group);
      if (ch == channel_of_.end()) continue;
      for (auto& [k, op] : ch->second->pending) {
        if (op->entry.site == p.site && op->site_calls == p.site_calls) {
          msg = mismatch_message(op->name, rank_, op->desc(), p.from, p.desc);
          break;
        }
      }
    }
    if (msg.empty()) continue;
    // Both sides fail: what this rank waits for now, and every later collective.
    abandon_waiting(waiting_ops(), msg, done, /*value_error=*/true);
  }
}

void Engine::answer_probes_when_idle() {
  if (!groups_.load() || Clock::now() - last_idle_answer_ < kIdleAnswer) return;
  std::unique_lock lock(mu_, std::try_to_lock);
  if (!lock.owns_lock()) return;
  last_idle_answer_ = Clock::now();
  std::vector<Completion> done;
  try {
    answer_probes(done);
  } catch (const std::exception&) {
    // check() marked the engine broken: the next collective reports it.
  }
  lock.unlock();
  for (auto& c : done) c.complete_on_worker();
}

}  // namespace tessera::distributed::detail
