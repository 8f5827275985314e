// The mesh settings of `tessera run` and its dry run (run_mesh.hpp).
#include "tessera/cli/run_mesh.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>

#include "tessera/cli/cluster.hpp"

namespace tessera::cli {

namespace {

constexpr long kMaxAxis = 1 << 20;

// A whole number in [low, high] written with digits only, or false.
bool whole(const std::string& v, long low, long high, long& out) {
  if (v.empty() || v.size() > 9 || v.find_first_not_of("0123456789") != std::string::npos)
    return false;
  long n = std::strtol(v.c_str(), nullptr, 10);
  if (n < low || n > high) return false;
  out = n;
  return true;
}

// 1234567 -> "1,234,567".
std::string grouped(long long n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t k = 0; k < digits.size(); ++k) {
    if (k > 0 && (digits.size() - k) % 3 == 0) out += ',';
    out += digits[k];
  }
  return (n < 0 ? "-" : "") + out;
}

std::string human_bytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (b >= 1024.0 && u < 5) b /= 1024.0, ++u;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f %s", u == 0 ? 0 : 2, b, units[u]);
  return buf;
}

std::string members_text(const std::vector<int>& m) {
  std::string s = "[";
  for (size_t k = 0; k < m.size(); ++k) s += (k ? ", " : "") + std::to_string(m[k]);
  return s + "]";
}

}  // namespace

std::string MeshSizes::text() const {
  return "data=" + std::to_string(data) + ",tensor=" + std::to_string(tensor) +
         ",pipeline=" + std::to_string(pipeline);
}

MeshSizes parse_mesh(const std::string& value, const std::string& source) {
  if (value.empty()) {
    throw std::invalid_argument("[run] " + source +
                                " needs axis=size pairs such as data=2,tensor=2,pipeline=2, "
                                "got ''");
  }
  MeshSizes m;
  std::set<std::string> seen;
  std::stringstream parts(value);
  std::string part;
  size_t items = 0;
  while (std::getline(parts, part, ',')) {
    ++items;
    const size_t eq = part.find('=');
    if (eq == std::string::npos) {
      throw std::invalid_argument("[run] " + source + ": '" + part +
                                  "' is not axis=size (the axes are data, tensor, pipeline), in '" +
                                  value + "'");
    }
    const std::string axis = part.substr(0, eq), size = part.substr(eq + 1);
    int* slot = axis == "data"       ? &m.data
                : axis == "tensor"   ? &m.tensor
                : axis == "pipeline" ? &m.pipeline
                                     : nullptr;
    if (slot == nullptr) {
      throw std::invalid_argument("[run] " + source + ": unknown axis '" + axis + "' in '" + value +
                                  "' (the axes are data, tensor, pipeline)");
    }
    if (!seen.insert(axis).second) {
      throw std::invalid_argument("[run] " + source + ": axis '" + axis + "' is given twice, in '" +
                                  value + "'");
    }
    long n = 0;
    if (!whole(size, 1, kMaxAxis, n)) {
      throw std::invalid_argument("[run] " + source + ": the size of axis '" + axis +
                                  "' must be a positive integer (at most " +
                                  std::to_string(kMaxAxis) + "), got '" + size + "' in '" + value +
                                  "'");
    }
    *slot = static_cast<int>(n);
  }
  if (items == 0 || value.back() == ',') {
    throw std::invalid_argument("[run] " + source + ": an empty axis=size pair in '" + value + "'");
  }
  return m;
}

int parse_zero(const std::string& value, const std::string& source) {
  long n = 0;
  if (!whole(value, 0, 3, n)) {
    throw std::invalid_argument("[run] " + source + " must be a ZeRO stage 0, 1, 2 or 3, got '" +
                                value + "'");
  }
  return static_cast<int>(n);
}

int parse_microbatches(const std::string& value, const std::string& source) {
  long n = 0;
  if (!whole(value, 1, kMaxAxis, n)) {
    throw std::invalid_argument("[run] " + source + " must be a positive integer (at most " +
                                std::to_string(kMaxAxis) + "), got '" + value + "'");
  }
  return static_cast<int>(n);
}

double parse_params(const std::string& value, const std::string& source) {
  static const std::map<char, double> scale = {{'K', 1e3},  {'k', 1e3}, {'M', 1e6}, {'m', 1e6},
                                               {'B', 1e9},  {'b', 1e9}, {'G', 1e9}, {'g', 1e9},
                                               {'T', 1e12}, {'t', 1e12}};
  std::string digits = value;
  double factor = 1;
  if (!digits.empty() && scale.count(digits.back())) {
    factor = scale.at(digits.back());
    digits.pop_back();
  }
  const bool shaped = !digits.empty() && digits.size() <= 20 &&
                      digits.find_first_not_of("0123456789.") == std::string::npos &&
                      digits.find('.') == digits.rfind('.') && digits != "." &&
                      digits.front() != '.';
  const double n = shaped ? std::strtod(digits.c_str(), nullptr) * factor : -1;
  if (!shaped || !(n >= 1) || n > 1e15) {
    throw std::invalid_argument(
        "[run] " + source +
        " must be a parameter count from 1 to 1e15 such as 350000, 100M or 1.5B (suffixes K, M, "
        "B or G, T), got '" +
        value + "'");
  }
  return n;
}

std::vector<HostSlots> host_slots_of_list(const std::string& hosts) {
  std::vector<HostSlots> out;
  std::map<std::string, size_t> index;
  std::stringstream parts(hosts);
  std::string part;
  while (std::getline(parts, part, ',')) {
    const size_t colon = part.find(':');
    const std::string name = part.substr(0, colon);
    long slots =
        colon == std::string::npos ? 1 : std::strtol(part.c_str() + colon + 1, nullptr, 10);
    auto [it, fresh] = index.emplace(name, out.size());
    if (fresh) out.push_back({name, 0});
    out[it->second].slots += slots;
  }
  return out;
}

std::vector<HostSlots> host_slots_of_file(const std::string& path) {
  read_hostfile(path);  // refuses what Open MPI would refuse, naming FILE:LINE
  // Read again for the slots: still a regular file (never a FIFO put in its
  // place, which would block), and no more than read_hostfile accepted.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw std::invalid_argument("[run] --hostfile " + path + " is no longer a regular file");
  }
  std::ifstream file(path);
  std::string text(kMaxHostfileBytes, '\0');
  file.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(file.gcount()));
  std::istringstream in(text);
  std::vector<HostSlots> out;
  std::map<std::string, size_t> index;
  std::map<std::string, bool> unknown;
  std::string line;
  while (std::getline(in, line)) {
    line = line.substr(0, line.find('#'));
    std::stringstream words(line);
    std::string name, word;
    if (!(words >> name)) continue;
    long slots = 0;
    while (words >> word) {
      const size_t eq = word.find('=');
      const std::string key = word.substr(0, eq);
      if (eq != std::string::npos &&
          (key == "slots" || key == "slot" || key == "cpu" || key == "count")) {
        slots = std::strtol(word.c_str() + eq + 1, nullptr, 10);
      }
    }
    auto [it, fresh] = index.emplace(name, out.size());
    if (fresh) out.push_back({name, 0});
    if (slots <= 0) unknown[name] = true;
    out[it->second].slots += slots;
  }
  for (auto& h : out) {
    if (unknown[h.name]) h.slots = 0;
  }
  return out;
}

StateBytes model_state_bytes(double params, const MeshSizes& mesh, int stage) {
  // Ψ' = Ψ / (t·p): the parameters one data replica holds. fp32 Adam keeps
  // 4 bytes of weights, 4 of gradients and 8 of optimizer state (m and v) per
  // parameter: 16Ψ' without ZeRO. Stage 1 shards the optimizer state over the
  // data axis, stage 2 the gradients too, stage 3 the weights too.
  const double share = params / (static_cast<double>(mesh.tensor) * mesh.pipeline);
  const double d = mesh.data;
  StateBytes b;
  b.weights = 4 * share / (stage >= 3 ? d : 1);
  b.gradients = 4 * share / (stage >= 2 ? d : 1);
  b.optimizer = 8 * share / (stage >= 1 ? d : 1);
  return b;
}

std::string dry_run_report(const DryRun& d) {
  const MeshSizes& m = d.mesh;
  const int n = d.ranks;
  std::string out;
  auto line = [&](const std::string& s) { out += s + "\n"; };
  line("tessera run --dry-run: " + std::to_string(n) + " ranks, mesh " + m.text() +
       " (nothing started)");
  line("rank = (data * " + std::to_string(m.pipeline) + " + pipeline) * " +
       std::to_string(m.tensor) + " + tensor (tensor innermost: consecutive ranks share a host)");

  // Hosts as mpirun places the ranks: by slot (fill each host's slots in
  // order) or, with --map-by node, one rank per host in turn.
  std::vector<std::string> host_of(static_cast<size_t>(n));
  bool placed = false;
  std::string note = d.host_note;
  if (note.empty() && !d.hosts.empty()) {
    long total = 0;
    std::string unknown;
    for (const auto& h : d.hosts) {
      if (h.slots == 0) unknown += (unknown.empty() ? "" : ", ") + h.name;
      total += h.slots;
    }
    const std::string policy = d.map_by.substr(0, d.map_by.find(':'));
    if (!unknown.empty()) {
      note = "hosts not predicted: no slots= for " + unknown +
             " in the hostfile (Open MPI counts the cores of such a host)";
    } else if (!policy.empty() && policy != "slot" && policy != "node") {
      note = "hosts not predicted for --map-by " + d.map_by + " (only slot and node are)";
    } else if (total < n) {
      note = "hosts not predicted: the hosts have " + std::to_string(total) + " slots for " +
             std::to_string(n) + " ranks (mpirun refuses that without -- --oversubscribe)";
    } else {
      std::vector<long> used(d.hosts.size(), 0);
      size_t h = 0;
      for (int r = 0; r < n; ++r) {
        if (policy == "node") {
          while (used[h] >= d.hosts[h].slots) h = (h + 1) % d.hosts.size();
          host_of[r] = d.hosts[h].name;
          ++used[h];
          h = (h + 1) % d.hosts.size();
        } else {
          while (used[h] >= d.hosts[h].slots) ++h;
          host_of[r] = d.hosts[h].name;
          ++used[h];
        }
      }
      placed = true;
      std::string list;
      for (const auto& x : d.hosts)
        list += (list.empty() ? "" : ", ") + x.name + " (" + std::to_string(x.slots) + " slots)";
      line("hosts: " + list + ", ranks placed by " + (policy == "node" ? "node" : "slot") +
           " as mpirun places them");
    }
  }
  if (d.hosts.empty() && note.empty()) line("hosts: this machine");
  if (!note.empty()) line(note);

  char buf[160];
  std::snprintf(buf, sizeof buf, "%6s %6s %9s %7s%s", "rank", "data", "pipeline", "tensor",
                placed ? "  host" : "");
  line(buf);
  auto coords = [&](int r) {
    return std::array<int, 3>{r / (m.tensor * m.pipeline), (r / m.tensor) % m.pipeline,
                              r % m.tensor};
  };
  for (int r = 0; r < n; ++r) {
    auto c = coords(r);
    std::snprintf(buf, sizeof buf, "%6d %6d %9d %7d", r, c[0], c[1], c[2]);
    line(std::string(buf) + (placed ? "  " + host_of[r] : ""));
  }
  const char* names[] = {"data", "pipeline", "tensor"};
  for (int axis = 0; axis < 3; ++axis) {
    // The groups along `axis`: ranks whose other coordinates agree, in order
    // of their coordinate on the axis; listed by their first member.
    std::map<std::array<int, 3>, std::vector<int>> groups;
    std::vector<std::array<int, 3>> order;
    for (int r = 0; r < n; ++r) {
      auto key = coords(r);
      key[axis] = 0;
      auto [it, fresh] = groups.emplace(key, std::vector<int>{});
      if (fresh) order.push_back(key);
      it->second.push_back(r);
    }
    const int size = axis == 0 ? m.data : axis == 1 ? m.pipeline : m.tensor;
    std::string text = std::string("groups along ") + names[axis] + " (" +
                       std::to_string(order.size()) + " groups of " + std::to_string(size) + "):";
    size_t across = 0;
    for (const auto& key : order) {
      const auto& g = groups[key];
      text += " " + members_text(g);
      if (placed) {
        std::set<std::string> on;
        for (int r : g) on.insert(host_of[r]);
        if (on.size() > 1) ++across;
      }
    }
    if (placed) {
      text += across == 0 ? " (each within one host)"
                          : " (" + std::to_string(across) + " across hosts)";
    }
    line(text);
  }
  line("ZeRO stage " + std::to_string(d.zero) +
       (d.microbatches > 0 ? ", " + std::to_string(d.microbatches) + " micro-batches" : "") +
       " (TESSERA_ZERO, TESSERA_MICROBATCHES: read by fit)");
  if (d.params >= 0) {
    const StateBytes b = model_state_bytes(d.params, m, d.zero);
    const double share = d.params / (static_cast<double>(m.tensor) * m.pipeline);
    line("model state per locality, fp32 Adam, ZeRO stage " + std::to_string(d.zero) + ", " +
         grouped(std::llround(d.params)) + " parameters (P' = P/(tensor*pipeline) = " +
         grouped(std::llround(share)) + "; formulas: docs/parallelism.md):");
    const std::string dd = std::to_string(m.data);
    auto row = [&](const char* what, double bytes, const std::string& formula) {
      std::snprintf(buf, sizeof buf, "  %-16s %20s bytes  %-12s %s", what,
                    grouped(std::llround(bytes)).c_str(), human_bytes(bytes).c_str(),
                    formula.c_str());
      line(buf);
    };
    row("weights", b.weights, d.zero >= 3 ? "4P'/" + dd : "4P'");
    row("gradients", b.gradients, d.zero >= 2 ? "4P'/" + dd : "4P'");
    row("optimizer state", b.optimizer, d.zero >= 1 ? "8P'/" + dd : "8P'");
    const std::string total = d.zero == 0   ? "16P'"
                              : d.zero == 1 ? "(8 + 8/" + dd + ")P'"
                              : d.zero == 2 ? "(4 + 12/" + dd + ")P'"
                                            : "16P'/" + dd;
    row("total", b.total(), total);
  }
  return out;
}

}  // namespace tessera::cli
