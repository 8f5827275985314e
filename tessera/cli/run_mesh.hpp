// `tessera run --mesh data=D,tensor=T,pipeline=P`, `--zero S`, `--microbatches M`
// and `--dry-run`: the job's mesh checked before anything starts, passed to the
// ranks (TESSERA_MESH, TESSERA_ZERO, TESSERA_MICROBATCHES), and the placement and
// model-state memory a dry run prints (docs/parallelism.md).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera::cli {

// The sizes of the mesh's axes (1 when not given).
struct MeshSizes {
  int data = 1;
  int pipeline = 1;
  int tensor = 1;
  long long product() const { return static_cast<long long>(data) * pipeline * tensor; }
  // "data=D,tensor=T,pipeline=P": the form given to the ranks in TESSERA_MESH.
  std::string text() const;
};

// `value` of `source` ("--mesh" or "TESSERA_MESH (environment)") as axis=size
// pairs separated by commas. Throws std::invalid_argument naming the source on
// an unknown axis, a size that is not a positive integer, or a repeated axis.
MeshSizes parse_mesh(const std::string& value, const std::string& source);

// The ZeRO stage (0 to 3) of `value`, or throws naming `source`.
int parse_zero(const std::string& value, const std::string& source);

// The number of micro-batches (1 to 2^20) of `value`, or throws naming `source`.
int parse_microbatches(const std::string& value, const std::string& source);

// A parameter count: digits with an optional fraction and suffix K, M, B or
// G, T (powers of 1000): "350000", "100M", "1.5B". Throws naming `source`.
double parse_params(const std::string& value, const std::string& source);

// A host of the job and the ranks Open MPI may place on it; slots == 0 when
// not known (a hostfile line without slots=: Open MPI counts the host's cores).
struct HostSlots {
  std::string name;
  long slots = 0;
};

// The hosts and slots of `--hosts a:2,b:2` (a host without ':N' has 1 slot,
// as with mpirun --host) or of a hostfile's lines ("node1 slots=4"); a host
// named twice gets the slots of both.
std::vector<HostSlots> host_slots_of_list(const std::string& hosts);
std::vector<HostSlots> host_slots_of_file(const std::string& path);

// What a dry run prints.
struct DryRun {
  int ranks = 0;
  MeshSizes mesh;
  int zero = 0;
  int microbatches = 0;          // 0: not given
  double params = -1;            // < 0: not given
  std::vector<HostSlots> hosts;  // empty: this machine
  std::string map_by;            // mpirun --map-by ("" = slot)
  std::string host_note;         // why hosts are not shown, when they are not
};

// The placement (every rank's coordinates and host, the groups of each axis)
// and, with params, the model-state bytes per locality of fp32 Adam under the
// ZeRO stage. Its lines, each ending in '\n'.
std::string dry_run_report(const DryRun& d);

// Model-state bytes per locality for fp32 Adam: {weights, gradients, optimizer
// state} for `params` parameters on a mesh with data size d, tensor t,
// pipeline p, under ZeRO `stage` (Rajbhandari et al., ZeRO, SC'20).
struct StateBytes {
  double weights = 0, gradients = 0, optimizer = 0;
  double total() const { return weights + gradients + optimizer; }
};
StateBytes model_state_bytes(double params, const MeshSizes& mesh, int stage);

}  // namespace tessera::cli
