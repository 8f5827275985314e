// The communication engine: MPI driven by the runtime. Workers enqueue
// operations and get a Future<Value>; MPI is called by one thread at a time —
// the issuing thread posts at once, a thread waiting at the outermost
// boundary polls, otherwise a progress thread polls — so non-blocking
// operations progress while tasks compute and no worker blocks.
//
// Matching across ranks: a collective is identified by its call site and that
// site's sequence number (ranks issue the collectives of one site in the same
// order: SPMD). Ranks agree on what to run in rounds (engine.hpp, Engine; the
// offers and their allgather: round.hpp):
// every rank offers what it has pending with a fingerprint (operation,
// dtype, shape, source position); what all offered runs, in an order all
// derive from the same round, never in arrival order. Disagreeing
// fingerprints give every rank an error naming both sides instead of a hang;
// small all-reduces travel inside the round and are reduced in rank order;
// other small all-reduces agreed together are coalesced into one message. A
// rank whose program ends tells the others, so a collective called on one
// rank only fails at once. A collective pending longer than
// TESSERA_COLLECTIVE_TIMEOUT seconds (default 300) fails with the list of
// what this rank waits for.
//
// Groups (groups.cpp): a collective may run among the members of a group
// (GroupInfo, made by make_group for each axis of a mesh) instead of every
// rank. Each group of several members has its own agreement rounds and
// communicators, so everything above holds among its members and
// collectives on disjoint groups run concurrently; a peer that called the
// same call of a site on another group is found by a probe after a second
// and both sides get the mismatch error.
//
// Failure detection (heartbeat.hpp): every rank sends heartbeats to a few
// peers on a thread and sockets of its own, independent of MPI; a rank not
// heard from for TESSERA_FAILURE_TIMEOUT seconds (default 30; 0 or "off":
// none) is declared failed, every collective waited for and every later one
// fails naming it, its host and what this rank waited for, the rank writes
// its trace and a marker line for `tessera run` (kPeerFailedMarker), and
// leaves (kPeerFailedExitStatus if its program does not end by itself).
//
// With one locality (a process not started by mpirun) nothing here is used
// and no MPI call is made: collectives.cpp computes the local results.
#pragma once

#include <string>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/core/value.hpp"
#include "tessera/runtime/future.hpp"

namespace tessera::distributed {

enum class ReduceOp { sum, mean, max, min };

// "sum", "mean", "max", "min"; throws ValueError naming `op` otherwise.
ReduceOp parse_reduce_op(const std::string& name, const char* op);

// A group of localities a collective runs among: the world (id 0) or one
// made by make_group (a mesh axis). Ranks inside a group (roots, peers,
// the order of gathered parts) are group ranks: a locality's place in
// `members`.
struct GroupInfo {
  int id = 0;
  std::string name = "world";
  std::vector<int> members;  // world ranks in group rank order (the world: none listed)
  int rank = 0, size = 1;    // this locality's group rank; the number of members
  int world_rank(int r) const { return members.empty() ? r : members[r]; }
};

// Makes this locality's group `name` of world ranks `members` (ascending,
// this locality among them) and returns its id (1, 2, ... in the order
// groups are made, the same on every locality). Every locality must call it,
// in the same order, each with its own group of the same partition (under
// mpirun a split of the world, collective). Throws ValueError on members
// that are not a sorted list of distinct ranks including this one.
int make_group(const std::string& name, const std::vector<int>& members);

// Group `id` (0: the world); throws ValueError naming `op` if there is none.
GroupInfo group_info(int64_t id, const char* op);

// The group a primitive's `group` argument names: nil (the world) or a group
// id; TypeError naming `op` for anything else.
GroupInfo group_of_value(const Value& v, const char* op);

namespace detail {

// True when the process was started by mpirun (OMPI_COMM_WORLD_SIZE or
// PMIX_RANK is set). Makes no MPI call.
bool started_by_mpirun();

// Starts the engine (MPI_Init_thread on the progress thread) if needed and
// returns {rank, size}. Throws RuntimeError if MPI cannot start.
std::pair<int, int> world();

// Marks this process as failing: at exit MPI_Finalize is skipped (it would
// wait for ranks that may be waiting for this one), so mpirun stops the job.
void mark_failed();
void linger_after_peer_failure();

// The exit status of a rank that ends because a peer failed (EX_TEMPFAIL:
// the job may succeed when started again).
inline constexpr int kPeerFailedExitStatus = 75;

// The line a rank writes on stderr when it declares a rank failed, read by
// `tessera run` (cli/run.cpp) to name that rank in its last line:
// "tessera-run-peer-failed: rank=R host=NAME addr=IPV4|- silent=SECONDS by=RANK
// cutoff=0|1".
inline constexpr const char* kPeerFailedMarker = "tessera-run-peer-failed:";

// Seconds a collective may stay pending (TESSERA_COLLECTIVE_TIMEOUT, 300).
double collective_timeout_seconds();

// Multi-rank operations (require the engine; `site` is the source position;
// `group`: the id of a group of several members, 0 the world; ranks and
// "every rank" are those of the group).
// Results: all_reduce, broadcast, reduce_scatter: an Array; all_gather,
// gather (at the root), all_to_all: a List with one Array per rank, in rank
// order (gather on a non-root rank: nil); scatter: this rank's part;
// barrier, send: nil; recv: the received Array.
Future<Value> all_reduce(Array x, ReduceOp op, const std::string& site, int group = 0);
Future<Value> broadcast(const Array& x, int root, const std::string& site, int group = 0);
// Every rank's x, whose shapes may differ along `free_axis` only.
Future<Value> all_gather(const Array& x, int free_axis, const std::string& site, int group = 0);
// x split along axis 0 in num_localities parts (the first size % n get one
// more row); this rank gets the reduction of its part.
Future<Value> reduce_scatter(const Array& x, ReduceOp op, const std::string& site, int group = 0);
Future<Value> gather(const Array& x, int root, const std::string& site, int group = 0);
// The root's x split along axis 0; the other ranks' x is ignored.
Future<Value> scatter(const Array& x, int root, const std::string& site, int group = 0);
// Part j of x (axis 0 split in num_localities parts) goes to rank j; the
// result lists the parts received from every rank.
Future<Value> all_to_all(const Array& x, const std::string& site, int group = 0);
Future<Value> barrier(const std::string& site, int group = 0);
// `what` names the message in errors and timeouts (default "send(dest=D, tag=T)").
Future<Value> send(const Array& x, int dest, int tag, const std::string& site,
                   const std::string& what = "");
Future<Value> recv(int source, int tag, const std::string& site, const std::string& what = "");

// Coalescing of small all-reduces agreed in the same round (on by default;
// TESSERA_COALESCE=0 turns it off). Must be set the same on every rank.
void set_coalescing(bool on);

// The tag space of point-to-point messages (below 2^23, the smallest tag
// bound of Open MPI's transports):
//   0 .. 32767                        send/recv of user programs;
//   32768 .. 32768 + 2^22 - 1         tessera's own primitives (internal_tag);
//   kPipeTagBase .. + 2 kPipeTags - 1 pipe_send/pipe_recv: pipe tag t of a
//                                     message to a higher stage (an activation)
//                                     is kPipeTagBase + 2t, to a lower one (a
//                                     cotangent) kPipeTagBase + 2t + 1.
// The ranges are disjoint: no program's tag can match another range's message.
inline constexpr int kPipeTagBase = 32768 + (1 << 22);
inline constexpr int64_t kPipeTags = int64_t{1} << 20;

// A tag for point-to-point messages tessera sends for its own primitives
// (halo exchanges, retiling): the same on every locality for the same
// (op, site, seq), above the tags user programs give send/recv (0..32767) and
// below kPipeTagBase; different (op, site, seq) share a tag with odds of one
// in four million.
int internal_tag(const std::string& op, const std::string& site, uint64_t seq = 0);

// Bytes of one row (one index along axis 0) of an array of this dtype and shape.
int64_t row_bytes(DType dt, const Shape& shape);

// Row ranges of an axis-0 split of `rows` in `parts` parts (array_split).
std::vector<int64_t> split_counts(int64_t rows, int parts);

}  // namespace detail
}  // namespace tessera::distributed
