#include "tessera/cli/cluster.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace tessera::cli {

namespace {

[[noreturn]] void bad_nodelist(const std::string& list, const std::string& what) {
  throw std::invalid_argument("[run] cannot read the SLURM node list '" + list + "': " + what);
}

// The names of one item of a node list ("rack[1-2]-n[01-03]"): the product
// of its bracket groups, the first group varying slowest.
std::vector<std::string> expand_item(const std::string& list, const std::string& item) {
  std::vector<std::string> names = {""};
  size_t i = 0;
  while (i < item.size()) {
    if (item[i] == ']') bad_nodelist(list, "']' without '['");
    if (item[i] != '[') {
      size_t next = item.find_first_of("[]", i);
      std::string text = item.substr(i, next == std::string::npos ? std::string::npos : next - i);
      for (auto& n : names) n += text;
      i = next == std::string::npos ? item.size() : next;
      continue;
    }
    size_t close = item.find(']', i);
    if (close == std::string::npos) bad_nodelist(list, "'[' without ']'");
    std::string ranges = item.substr(i + 1, close - i - 1);
    if (ranges.empty()) bad_nodelist(list, "an empty range '[]'");
    std::vector<std::string> values;
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
        bad_nodelist(list, "'" + part + "' is not a number or a range a-b");
      long a = std::stol(lo), b = std::stol(hi);
      if (a > b) bad_nodelist(list, "the range '" + part + "' runs backwards");
      if (values.size() + static_cast<size_t>(b - a) > 100000)
        bad_nodelist(list, "more than 100000 hosts");
      // Zero padding follows the lower bound: [08-10] is 08, 09, 10.
      for (long v = a; v <= b; ++v) {
        std::string s = std::to_string(v);
        if (s.size() < lo.size()) s.insert(0, lo.size() - s.size(), '0');
        values.push_back(s);
      }
    }
    if (ranges.back() == ',') bad_nodelist(list, "an empty range in '[" + ranges + "]'");
    std::vector<std::string> product;
    for (const auto& n : names) {
      for (const auto& v : values) product.push_back(n + v);
    }
    if (product.size() > 100000) bad_nodelist(list, "more than 100000 hosts");
    names = std::move(product);
    i = close + 1;
  }
  return names;
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

std::vector<std::string> expand_nodelist(const std::string& nodelist) {
  std::vector<std::string> hosts;
  std::string item;
  int depth = 0;
  auto finish = [&] {
    if (item.empty()) bad_nodelist(nodelist, "an empty host name");
    for (auto& h : expand_item(nodelist, item)) hosts.push_back(std::move(h));
    item.clear();
  };
  for (char c : nodelist) {
    if (std::isspace(static_cast<unsigned char>(c))) bad_nodelist(nodelist, "a space in the list");
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (depth < 0 || depth > 1) bad_nodelist(nodelist, "unbalanced brackets");
    if (c == ',' && depth == 0) {
      finish();
    } else {
      item += c;
    }
  }
  if (depth != 0) bad_nodelist(nodelist, "'[' without ']'");
  finish();
  return hosts;
}

std::vector<std::string> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    throw std::runtime_error("[run] --hostfile: cannot read '" + path +
                             "': " + std::strerror(errno));
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
    if (seen.insert(host).second) hosts.push_back(host);
  }
  if (hosts.empty()) throw std::invalid_argument("[run] --hostfile " + path + " lists no host");
  return hosts;
}

std::vector<std::string> parse_hosts(const std::string& hosts) {
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
    if (seen.insert(host).second) out.push_back(host);
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
