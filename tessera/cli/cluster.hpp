// What `tessera run` works out about the hosts of a job: the host list (from
// --hosts, a hostfile or a SLURM allocation), the network the ranks should
// talk over, and which environment variables go to every rank.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tessera::cli {

// Host names of a SLURM node list ("node[1-3,5],gpu[01-02]-a,login"), in order,
// as `scontrol show hostnames` prints them. Throws std::invalid_argument on a
// malformed list.
std::vector<std::string> expand_nodelist(const std::string& nodelist);

// The hosts of an Open MPI hostfile ("node1 slots=2", comments after '#'), in
// order, each once. Throws std::runtime_error when the file cannot be read and
// std::invalid_argument (naming file:line) on a line Open MPI would refuse.
std::vector<std::string> read_hostfile(const std::string& path);

// The hosts of `--hosts a:2,b,c:4`, each once.
std::vector<std::string> parse_hosts(const std::string& hosts);

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
