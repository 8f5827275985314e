// What `tessera run` works out about the hosts of a job: the host list (from
// --hosts, a hostfile or a SLURM allocation), the network the ranks should
// talk over, and which environment variables go to every rank.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::cli {

// The most hosts a job's node list, hostfile or --hosts may name. One mpirun
// starts a daemon on every host and the launcher resolves each host's address,
// so a job of this size is already far beyond what one launcher serves well;
// the limit keeps a list of names (at most kMaxDnsName each) to a few MB.
constexpr uint64_t kMaxHosts = 65536;
// The most bytes of a hostfile (65,536 lines of 256 characters each).
constexpr size_t kMaxHostfileBytes = size_t{16} << 20;
// Open MPI 4.1's mpirun crashes (stack smashing, exit status 134) on a host
// name longer than this, counting the part it keeps: the name up to its first
// '.', or all of it with orte_keep_fqdn_hostnames. Measured with
// `mpirun --host NAME -n 1 true`: 56 characters fail cleanly, 57 crash.
constexpr size_t kMaxHostName = 56;
// RFC 1035: a name has at most 253 characters, a label at most 63.
constexpr size_t kMaxDnsName = 253;
constexpr size_t kMaxDnsLabel = 63;

// What is wrong with `host` as a host for Open MPI (too long a name or
// label), or "" when nothing is. `full_names`: orte_keep_fqdn_hostnames is set,
// so Open MPI keeps the whole name, not only its first part.
std::string host_name_problem(const std::string& host, bool full_names = false);

// The number of hosts a SLURM node list names, counted without expanding it
// (saturating at UINT64_MAX). Throws std::invalid_argument, naming `source`
// (the variable it came from), on a malformed list.
uint64_t nodelist_size(const std::string& nodelist,
                       const std::string& source = "SLURM_JOB_NODELIST");

// Host names of a SLURM node list ("node[1-3,5],gpu[01-02]-a,login"), in order,
// as `scontrol show hostnames` prints them. Throws std::invalid_argument,
// naming `source`, on a malformed list, one of more than kMaxHosts hosts
// (before expanding it) or a host name Open MPI cannot take.
std::vector<std::string> expand_nodelist(const std::string& nodelist,
                                         const std::string& source = "SLURM_JOB_NODELIST",
                                         bool full_names = false);

// The hosts of an Open MPI hostfile ("node1 slots=2", comments after '#'), in
// order, each once. Reads regular files only (a FIFO or a device is refused
// without blocking) of at most kMaxHostfileBytes, naming at most kMaxHosts
// hosts. Throws std::runtime_error when the file cannot be opened and
// std::invalid_argument (naming file:line where there is one) on a file or a
// line Open MPI would refuse or crash on.
std::vector<std::string> read_hostfile(const std::string& path, bool full_names = false);

// The hosts of `--hosts a:2,b,c:4`, each once (at most kMaxHosts, each a name
// Open MPI can take).
std::vector<std::string> parse_hosts(const std::string& hosts, bool full_names = false);

// True when `host` names this machine (its hostname, "localhost", or an
// address of one of its interfaces).
bool is_local_host(const std::string& host);

// The networks (CIDR, "10.1.0.0/24") of this machine's interfaces that its
// routes to `hosts` leave through, when every host other than this one
// resolves and its address lies inside one of them; otherwise nullopt, with
// the reason in `why`. Used for btl_tcp_if_include / oob_tcp_if_include.
std::optional<std::string> network_to_hosts(const std::vector<std::string>& hosts,
                                            std::string& why);

// Variables passed on to every rank besides those named with -x: PYTHONPATH
// and a few other Python settings, LD_LIBRARY_PATH, OMP_*, TESSERA_*.
bool forwarded_by_default(const std::string& name);

// A valid environment variable name (letters, digits, '_', not starting with a digit).
bool valid_env_name(const std::string& name);

}  // namespace tessera::cli
