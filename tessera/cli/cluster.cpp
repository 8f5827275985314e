#include "tessera/cli/cluster.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tessera::cli {

namespace {

// A value shown in an error: its start, when it is long.
std::string shown(const std::string& s, size_t most = 200) {
  if (s.size() <= most) return s;
  return s.substr(0, most) + "... (" + std::to_string(s.size()) + " characters)";
}

[[noreturn]] void bad_nodelist(const std::string& list, const std::string& source,
                               const std::string& what) {
  throw std::invalid_argument("[run] cannot read the SLURM node list: " + what + " (" + source +
                              "='" + shown(list) + "')");
}

// The numbers lo..hi of a bracket group, zero-padded to `width` digits
// (the lower bound's): [08-10] is 08, 09, 10.
struct Range {
  long lo = 0, hi = 0;
  size_t width = 0;
};

// A piece of an item of a node list: text, or a bracket group (ranges not empty).
struct Piece {
  std::string text;
  std::vector<Range> ranges;
};

uint64_t saturating_add(uint64_t a, uint64_t b) { return b > UINT64_MAX - a ? UINT64_MAX : a + b; }

uint64_t saturating_mul(uint64_t a, uint64_t b) {
  return a != 0 && b > UINT64_MAX / a ? UINT64_MAX : a * b;
}

// An item of a node list ("rack[1-2]-n[01-03]") as text and bracket groups.
std::vector<Piece> parse_item(const std::string& list, const std::string& source,
                              const std::string& item) {
  std::vector<Piece> pieces;
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] == ']') bad_nodelist(list, source, "']' without '['");
    if (item[i] != '[') {
      size_t next = item.find_first_of("[]", i);
      pieces.push_back({item.substr(i, next == std::string::npos ? std::string::npos : next - i),
                        {}});
      i = next == std::string::npos ? item.size() : next;
      continue;
    }
    size_t close = item.find(']', i);
    if (close == std::string::npos) bad_nodelist(list, source, "'[' without ']'");
    std::string ranges = item.substr(i + 1, close - i - 1);
    if (ranges.empty()) bad_nodelist(list, source, "an empty range '[]'");
    Piece group;
    std::stringstream parts(ranges);
    std::string part;
    while (std::getline(parts, part, ',')) {
      size_t dash = part.find('-');
      std::string lo = part.substr(0, dash),
                  hi = dash == std::string::npos ? lo : part.substr(dash + 1);
      auto digits = [](const std::string& s) {
        return !s.empty() && s.size() < 10 &&
               std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
      };
      if (!digits(lo) || !digits(hi))
        bad_nodelist(list, source, "'" + part + "' is not a number or a range a-b");
      Range r{std::stol(lo), std::stol(hi), lo.size()};
      if (r.lo > r.hi) bad_nodelist(list, source, "the range '" + part + "' runs backwards");
      group.ranges.push_back(r);
    }
    if (ranges.back() == ',') bad_nodelist(list, source, "an empty range in '[" + ranges + "]'");
    pieces.push_back(std::move(group));
    i = close + 1;
  }
  return pieces;
}

// How many names an item makes: the product of its groups' sizes.
uint64_t item_size(const std::vector<Piece>& pieces) {
  uint64_t n = 1;
  for (const auto& p : pieces) {
    if (p.ranges.empty()) continue;
    uint64_t values = 0;
    for (const auto& r : p.ranges) values = saturating_add(values, uint64_t(r.hi - r.lo) + 1);
    n = saturating_mul(n, values);
  }
  return n;
}

// The length of an item's longest name.
size_t item_longest(const std::vector<Piece>& pieces) {
  size_t n = 0;
  for (const auto& p : pieces) {
    size_t widest = p.text.size();
    for (const auto& r : p.ranges)
      widest = std::max({widest, r.width, std::to_string(r.hi).size()});
    n += widest;
  }
  return n;
}

// The names of an item, the first group varying slowest.
void expand_item(const std::vector<Piece>& pieces, std::vector<std::string>& out) {
  std::vector<std::string> names = {""};
  for (const auto& p : pieces) {
    if (p.ranges.empty()) {
      for (auto& n : names) n += p.text;
      continue;
    }
    std::vector<std::string> product;
    for (const auto& n : names) {
      for (const auto& r : p.ranges) {
        for (long v = r.lo; v <= r.hi; ++v) {
          std::string s = std::to_string(v);
          if (s.size() < r.width) s.insert(0, r.width - s.size(), '0');
          product.push_back(n + s);
        }
      }
    }
    names = std::move(product);
  }
  for (auto& n : names) out.push_back(std::move(n));
}

// Calls `each` with every item of a node list (split at the commas outside
// brackets), one at a time: the items of a long list are never all held at once.
template <typename F>
void for_each_item(const std::string& list, const std::string& source, F each) {
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i <= list.size(); ++i) {
    char c = i < list.size() ? list[i] : ',';
    if (std::isspace(static_cast<unsigned char>(c)))
      bad_nodelist(list, source, "a space in the list");
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) bad_nodelist(list, source, "unbalanced brackets");
    if (c != ',' || depth != 0) continue;
    if (i == start) bad_nodelist(list, source, "an empty host name");
    each(list.substr(start, i - start));
    start = i + 1;
  }
  if (depth != 0) bad_nodelist(list, source, "'[' without ']'");
}

std::string trim(const std::string& s) {
  size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  size_t b = s.find_last_not_of(" \t\r");
  return s.substr(a, b - a + 1);
}

std::optional<in_addr> ipv4_of(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &res) != 0 || res == nullptr) return std::nullopt;
  in_addr a = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return a;
}

std::string dotted(in_addr a) {
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a, buf, sizeof buf);
  return buf;
}

}  // namespace

std::string host_name_problem(const std::string& host, bool full_names) {
  if (host.empty()) return "an empty host name";
  if (host.size() > kMaxDnsName) {
    return "a host name is too long: '" + shown(host, 80) + "' has " +
           std::to_string(host.size()) + " characters, more than a DNS name may have (" +
           std::to_string(kMaxDnsName) + ")";
  }
  for (size_t a = 0; a < host.size();) {
    size_t dot = std::min(host.find('.', a), host.size());
    if (dot - a > kMaxDnsLabel) {
      return "a host name is too long: '" + host + "' has a part of " + std::to_string(dot - a) +
             " characters between dots, more than a DNS label may have (" +
             std::to_string(kMaxDnsLabel) + ")";
    }
    a = dot + 1;
  }
  // Open MPI keeps a name up to its first '.' (an IPv4 address whole).
  in_addr addr{};
  bool whole = full_names || inet_pton(AF_INET, host.c_str(), &addr) == 1;
  size_t kept = whole ? host.size() : std::min(host.find('.'), host.size());
  if (kept > kMaxHostName) {
    return "a host name is too long for Open MPI: '" + host + "' has " + std::to_string(kept) +
           (whole ? " characters" : " characters before its first '.'") + ", at most " +
           std::to_string(kMaxHostName) + " work (mpirun crashes on longer ones" +
           (full_names ? "; orte_keep_fqdn_hostnames is set)" : ")");
  }
  return "";
}

uint64_t nodelist_size(const std::string& nodelist, const std::string& source) {
  uint64_t total = 0;
  for_each_item(nodelist, source, [&](const std::string& item) {
    total = saturating_add(total, item_size(parse_item(nodelist, source, item)));
  });
  return total;
}

std::vector<std::string> expand_nodelist(const std::string& nodelist, const std::string& source,
                                         bool full_names) {
  // Counted and measured first: the names are made only when there are few
  // enough of them, and short enough.
  uint64_t total = nodelist_size(nodelist, source);
  if (total > kMaxHosts) {
    bad_nodelist(nodelist, source,
                 "it names " +
                     (total == UINT64_MAX ? "more than " + std::to_string(UINT64_MAX - 1)
                                          : std::to_string(total)) +
                     " hosts, more than the " + std::to_string(kMaxHosts) +
                     " tessera run accepts");
  }
  std::vector<std::string> hosts;
  for_each_item(nodelist, source, [&](const std::string& item) {
    auto pieces = parse_item(nodelist, source, item);
    if (size_t longest = item_longest(pieces); longest > kMaxDnsName) {
      bad_nodelist(nodelist, source,
                   "the item '" + shown(item, 80) + "' makes host names of " +
                       std::to_string(longest) + " characters, more than a DNS name may have (" +
                       std::to_string(kMaxDnsName) + ")");
    }
    expand_item(pieces, hosts);
  });
  for (const auto& h : hosts) {
    if (auto problem = host_name_problem(h, full_names); !problem.empty())
      throw std::invalid_argument("[run] " + problem + " (" + source + ")");
  }
  return hosts;
}

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// The text of a hostfile: a regular file (a FIFO or a device would block or
// never end), of at most kMaxHostfileBytes.
std::string hostfile_text(const std::string& path) {
  // O_NONBLOCK: opening a FIFO without a writer returns at once (and fstat
  // then refuses it) instead of waiting for one.
  int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw std::runtime_error("[run] --hostfile: cannot read '" + path +
                             "': " + std::strerror(errno));
  struct stat st{};
  std::string text;
  try {
    if (fstat(fd, &st) != 0)
      throw std::runtime_error("[run] --hostfile: cannot read '" + path +
                               "': " + std::strerror(errno));
    if (!S_ISREG(st.st_mode)) {
      throw std::invalid_argument(std::string("[run] the hostfile is not a regular file: ") +
                                  file_kind(st.st_mode) + " (--hostfile " + path + ")");
    }
    auto too_large = [&](uint64_t bytes) {
      throw std::invalid_argument("[run] the hostfile is too large: " + std::to_string(bytes) +
                                  " bytes, at most " + std::to_string(kMaxHostfileBytes) +
                                  " (--hostfile " + path + ")");
    };
    if (static_cast<uint64_t>(st.st_size) > kMaxHostfileBytes) too_large(st.st_size);
    // Read to the end, but never past the limit (the file may grow).
    char buf[65536];
    for (;;) {
      ssize_t got = read(fd, buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0)
        throw std::runtime_error("[run] --hostfile: cannot read '" + path +
                                 "': " + std::strerror(errno));
      if (got == 0) break;
      text.append(buf, static_cast<size_t>(got));
      if (text.size() > kMaxHostfileBytes) too_large(text.size());
    }
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  return text;
}

}  // namespace

std::vector<std::string> read_hostfile(const std::string& path, bool full_names) {
  std::istringstream in(hostfile_text(path));
  static const std::set<std::string> counts = {"slots",     "slot",      "cpu",       "count",
                                               "max-slots", "max_slots", "slots-max", "slots_max"};
  static const std::set<std::string> others = {"username", "user",    "port",
                                               "boards",   "sockets", "cores"};
  std::vector<std::string> hosts;
  std::set<std::string> seen;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::stringstream words(line);
    std::string host, word;
    words >> host;
    auto where = "[run] --hostfile " + path + ":" + std::to_string(number) + ": ";
    while (words >> word) {
      size_t eq = word.find('=');
      std::string key = word.substr(0, eq),
                  value = eq == std::string::npos ? "" : word.substr(eq + 1);
      if (counts.count(key)) {
        char* end = nullptr;
        long v = std::strtol(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || v <= 0 || v > INT_MAX) {
          throw std::invalid_argument(where + key + " must be a positive integer, got '" + word +
                                      "'");
        }
      } else if (!others.count(key) || value.empty()) {
        throw std::invalid_argument(where + "'" + word +
                                    "' is not a setting Open MPI knows (slots=N, max_slots=N)");
      }
    }
    if (size_t at = host.find('@'); at != std::string::npos) host = host.substr(at + 1);
    const std::string file_line = " (--hostfile " + path + ":" + std::to_string(number) + ")";
    if (auto problem = host_name_problem(host, full_names); !problem.empty())
      throw std::invalid_argument("[run] " + problem + file_line);
    if (seen.insert(host).second) hosts.push_back(host);
    if (hosts.size() > kMaxHosts) {
      throw std::invalid_argument("[run] too many hosts in the hostfile: more than the " +
                                  std::to_string(kMaxHosts) + " tessera run accepts" + file_line);
    }
  }
  if (hosts.empty()) throw std::invalid_argument("[run] --hostfile " + path + " lists no host");
  return hosts;
}

std::vector<std::string> parse_hosts(const std::string& hosts, bool full_names) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  std::stringstream parts(hosts);
  std::string part;
  while (std::getline(parts, part, ',')) {
    std::string host = part.substr(0, part.find(':'));
    if (host.empty())
      throw std::invalid_argument("[run] --hosts: an empty host name in '" + hosts + "'");
    if (size_t colon = part.find(':'); colon != std::string::npos) {
      std::string slots = part.substr(colon + 1);
      char* end = nullptr;
      long v = std::strtol(slots.c_str(), &end, 10);
      if (slots.empty() || *end != '\0' || v <= 0 || v > INT_MAX) {
        throw std::invalid_argument("[run] --hosts: the slots of '" + part +
                                    "' must be a positive integer");
      }
    }
    if (auto problem = host_name_problem(host, full_names); !problem.empty())
      throw std::invalid_argument("[run] " + problem + " (--hosts)");
    if (seen.insert(host).second) out.push_back(host);
    if (out.size() > kMaxHosts) {
      throw std::invalid_argument("[run] too many hosts: more than the " +
                                  std::to_string(kMaxHosts) + " tessera run accepts (--hosts)");
    }
  }
  if (out.empty()) throw std::invalid_argument("[run] --hosts: no host in '" + hosts + "'");
  return out;
}

bool is_local_host(const std::string& host) {
  if (host == "localhost" || host == "127.0.0.1") return true;
  char name[HOST_NAME_MAX + 1] = {};
  gethostname(name, sizeof name - 1);
  std::string self = name;
  if (host == self || host == self.substr(0, self.find('.')) ||
      self == host.substr(0, host.find('.')))
    return true;
  auto addr = ipv4_of(host);
  if (!addr) return false;
  if ((ntohl(addr->s_addr) >> 24) == 127) return true;
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return false;
  bool local = false;
  for (ifaddrs* i = ifs; i; i = i->ifa_next) {
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
        reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr == addr->s_addr) {
      local = true;
    }
  }
  freeifaddrs(ifs);
  return local;
}

std::optional<std::string> network_to_hosts(const std::vector<std::string>& hosts,
                                            std::string& why) {
  std::vector<std::string> networks;
  for (const auto& host : hosts) {
    if (is_local_host(host)) continue;
    auto addr = ipv4_of(host);
    if (!addr) {
      why = "the host '" + host + "' does not resolve to an IPv4 address here";
      return std::nullopt;
    }
    // The kernel's route to the host decides the interface: connecting a UDP
    // socket sends nothing but picks the source address.
    int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(9);
    to.sin_addr = *addr;
    sockaddr_in from{};
    socklen_t len = sizeof from;
    bool routed = s >= 0 && connect(s, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0 &&
                  getsockname(s, reinterpret_cast<sockaddr*>(&from), &len) == 0;
    if (s >= 0) close(s);
    if (!routed) {
      why = "no route to '" + host + "' (" + dotted(*addr) + ")";
      return std::nullopt;
    }
    ifaddrs* ifs = nullptr;
    if (getifaddrs(&ifs) != 0) {
      why = "cannot list this machine's interfaces";
      return std::nullopt;
    }
    std::optional<std::string> network;
    for (ifaddrs* i = ifs; i; i = i->ifa_next) {
      if (!i->ifa_addr || !i->ifa_netmask || i->ifa_addr->sa_family != AF_INET) continue;
      auto* a = reinterpret_cast<sockaddr_in*>(i->ifa_addr);
      auto* m = reinterpret_cast<sockaddr_in*>(i->ifa_netmask);
      if (a->sin_addr.s_addr != from.sin_addr.s_addr) continue;
      // A host behind a router is reached through this interface, but its
      // own interface lies in another network, which Open MPI would exclude.
      if ((a->sin_addr.s_addr & m->sin_addr.s_addr) != (addr->s_addr & m->sin_addr.s_addr)) {
        why = "'" + host + "' (" + dotted(*addr) +
              ") is not on a network of this machine (it is reached through a "
              "router from " +
              std::string(i->ifa_name) + ")";
        break;
      }
      in_addr net{a->sin_addr.s_addr & m->sin_addr.s_addr};
      int bits = __builtin_popcount(m->sin_addr.s_addr);
      network = dotted(net) + "/" + std::to_string(bits);
    }
    freeifaddrs(ifs);
    if (!network) {
      if (why.empty()) why = "cannot find the interface of " + dotted(from.sin_addr);
      return std::nullopt;
    }
    if (std::find(networks.begin(), networks.end(), *network) == networks.end())
      networks.push_back(*network);
  }
  if (networks.empty()) {
    why = "every host is this machine";
    return std::nullopt;
  }
  std::string joined;
  for (const auto& n : networks) joined += (joined.empty() ? "" : ",") + n;
  return joined;
}

bool forwarded_by_default(const std::string& name) {
  static const std::set<std::string> names = {"PYTHONPATH",       "PYTHONHASHSEED",
                                              "PYTHONUNBUFFERED", "PYTHONWARNINGS",
                                              "VIRTUAL_ENV",      "LD_LIBRARY_PATH"};
  return names.count(name) || name.rfind("OMP_", 0) == 0 || name.rfind("TESSERA_", 0) == 0;
}

bool valid_env_name(const std::string& name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  return std::all_of(name.begin(), name.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_'; });
}

}  // namespace tessera::cli
