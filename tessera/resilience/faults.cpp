#include "tessera/resilience/faults.hpp"

#include <cstdlib>
#include <cstring>
#include <mutex>

#include "tessera/core/error.hpp"

namespace tessera {

namespace detail {
std::atomic<bool> g_fault_injection_on{false};
}  // namespace detail

namespace {

struct InjectorState {
  std::mutex mutex;
  FaultConfig config;
  std::string environment_error;  // a malformed TESSERA_INJECT_FAULTS
  std::atomic<uint64_t> next_call{0};
  std::atomic<uint64_t> calls{0}, throws{0}, bitflips{0};
};

InjectorState& state() {
  static InjectorState s;
  return s;
}

// SplitMix64's finalizer: a well-mixed 64-bit hash of x.
uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// The draw number `salt` of attempt `index` of call `call`: independent of
// which thread runs it and when.
uint64_t draw(uint64_t seed, uint64_t call, int index, uint64_t salt) {
  return mix(mix(mix(mix(seed) ^ call) ^ static_cast<uint64_t>(index)) ^ salt);
}

double uniform(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && (s[b] == ' ' || s[b] == '\t')) ++b;
  while (e > b && (s[e - 1] == ' ' || s[e - 1] == '\t')) --e;
  return std::string(s.substr(b, e - b));
}

double parse_probability(const std::string& key, const std::string& value, std::string_view text,
                         std::string_view source) {
  char* end = nullptr;
  double p = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !(p >= 0.0 && p <= 1.0)) {
    throw std::invalid_argument(error_message("[inject_faults] ", source, ": ", key,
                                              " must be a probability in [0, 1], got '", value,
                                              "' in '", text, "'"));
  }
  return p;
}

// Counts the bits that can be flipped in `v`: those of its non-empty
// arrays, ints and floats (bools, strings and the rest are left alone).
uint64_t flippable_bits(const Value& v) {
  if (v.is_array()) return v.as_array().nbytes() * 8;
  if (v.is_int() || v.is_float()) return 64;
  if (v.is_list()) {
    uint64_t n = 0;
    for (const Value& e : v.as_list()) n += flippable_bits(e);
    return n;
  }
  if (v.is_dict()) {
    uint64_t n = 0;
    for (const auto& kv : v.as_dict().items) n += flippable_bits(kv.second);
    return n;
  }
  return 0;
}

// `v` with bit number `bit` (counted over flippable_bits, in order) flipped;
// arrays are copied before the flip, so no other holder sees it.
Value flip_bit(const Value& v, uint64_t& bit) {
  if (v.is_array()) {
    const Array& a = v.as_array();
    uint64_t n = a.nbytes() * 8;
    if (bit >= n) {
      bit -= n;
      return v;
    }
    Array c = a.copy();
    static_cast<unsigned char*>(c.origin_raw())[bit / 8] ^=
        static_cast<unsigned char>(1u << (bit % 8));
    bit = ~uint64_t{0};
    return Value(std::move(c));
  }
  if (v.is_int() || v.is_float()) {
    if (bit >= 64) {
      bit -= 64;
      return v;
    }
    uint64_t mask = uint64_t{1} << bit;
    bit = ~uint64_t{0};
    if (v.is_int()) return Value(static_cast<int64_t>(static_cast<uint64_t>(v.as_int()) ^ mask));
    double d = v.as_float();
    uint64_t u;
    std::memcpy(&u, &d, sizeof u);
    u ^= mask;
    std::memcpy(&d, &u, sizeof d);
    return Value(d);
  }
  if (v.is_list()) {
    List out;
    out.reserve(v.as_list().size());
    for (const Value& e : v.as_list()) out.push_back(bit == ~uint64_t{0} ? e : flip_bit(e, bit));
    return v.is_tuple() ? Value::tuple(std::move(out)) : Value(std::move(out));
  }
  if (v.is_dict()) {
    Dict out;
    for (const auto& [k, e] : v.as_dict().items) {
      out.set(k, bit == ~uint64_t{0} ? e : flip_bit(e, bit));
    }
    return Value(std::make_shared<const Dict>(std::move(out)));
  }
  return v;
}

// Reads TESSERA_INJECT_FAULTS when the library loads.
const bool environment_read = [] {
  const char* env = std::getenv("TESSERA_INJECT_FAULTS");
  if (!env || !*env) return true;
  try {
    set_fault_injection(parse_fault_config(env, "TESSERA_INJECT_FAULTS"));
  } catch (const std::exception& e) {
    // Reported by the first replay or replicate (no exception may leave a
    // static initializer): injection is on so that they look.
    std::lock_guard lock(state().mutex);
    state().environment_error = e.what();
    detail::g_fault_injection_on.store(true);
  }
  return true;
}();

}  // namespace

std::string FaultConfig::str() const {
  std::string s;
  auto add = [&](const std::string& part) { s += (s.empty() ? "" : ",") + part; };
  if (throw_probability > 0) add(error_message("throw=", throw_probability));
  if (bitflip_probability > 0) add(error_message("bitflip=", bitflip_probability));
  add(error_message("seed=", seed));
  if (!only.empty()) add("only=" + only);
  return s;
}

FaultConfig parse_fault_config(std::string_view text, std::string_view source) {
  FaultConfig c;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    if (comma == std::string_view::npos) comma = text.size();
    std::string item = trim(text.substr(pos, comma - pos));
    pos = comma + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos) {
      throw std::invalid_argument(error_message("[inject_faults] ", source,
                                                ": expected key=value, got '", item, "' in '", text,
                                                "' (keys: throw, bitflip, seed, only)"));
    }
    std::string key = trim(item.substr(0, eq)), value = trim(item.substr(eq + 1));
    if (key == "throw") {
      c.throw_probability = parse_probability(key, value, text, source);
    } else if (key == "bitflip") {
      c.bitflip_probability = parse_probability(key, value, text, source);
    } else if (key == "seed") {
      char* end = nullptr;
      unsigned long long s = std::strtoull(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || value[0] == '-') {
        throw std::invalid_argument(error_message("[inject_faults] ", source,
                                                  ": seed must be a non-negative integer, got '",
                                                  value, "' in '", text, "'"));
      }
      c.seed = s;
    } else if (key == "only") {
      c.only = value;
    } else {
      throw std::invalid_argument(error_message("[inject_faults] ", source, ": unknown key '", key,
                                                "' in '", text,
                                                "' (keys: throw, bitflip, seed, only)"));
    }
  }
  return c;
}

void set_fault_injection(const FaultConfig& config) {
  InjectorState& s = state();
  std::lock_guard lock(s.mutex);
  s.config = config;
  s.environment_error.clear();
  s.next_call = 0;
  s.calls = 0;
  s.throws = 0;
  s.bitflips = 0;
  detail::g_fault_injection_on.store(true);
}

void clear_fault_injection() {
  InjectorState& s = state();
  std::lock_guard lock(s.mutex);
  s.environment_error.clear();
  detail::g_fault_injection_on.store(false);
}

std::optional<FaultConfig> fault_injection() {
  InjectorState& s = state();
  std::lock_guard lock(s.mutex);
  if (!detail::g_fault_injection_on.load() || !s.environment_error.empty()) return std::nullopt;
  return s.config;
}

void check_fault_environment(const char* op) {
  InjectorState& s = state();
  std::lock_guard lock(s.mutex);
  if (!s.environment_error.empty()) {
    throw std::invalid_argument(error_message(s.environment_error, " (seen by ", op, ")"));
  }
}

FaultCounts fault_counts() {
  InjectorState& s = state();
  return FaultCounts{s.calls.load(), s.throws.load(), s.bitflips.load()};
}

uint64_t next_fault_call() { return state().next_call.fetch_add(1); }

Value inject_fault(Value result, uint64_t call, int index, const std::string& fn, const char* op,
                   const std::string& where) {
  InjectorState& s = state();
  FaultConfig c;
  {
    std::lock_guard lock(s.mutex);
    if (!detail::g_fault_injection_on.load()) return result;
    c = s.config;
  }
  if (!c.only.empty() && c.only != fn) return result;
  s.calls.fetch_add(1);
  std::string at = where.empty() ? "" : " (at " + where + ")";
  if (c.throw_probability > 0 && uniform(draw(c.seed, call, index, 1)) < c.throw_probability) {
    s.throws.fetch_add(1);
    throw std::runtime_error(error_message(
        "[inject_faults] injected fault in ", std::string(op) == "replay" ? "attempt " : "copy ",
        index + 1, " of ", fn, " (", op, " call ", call, ")", at));
  }
  if (c.bitflip_probability > 0 && uniform(draw(c.seed, call, index, 2)) < c.bitflip_probability) {
    uint64_t bits = flippable_bits(result);
    if (bits == 0) return result;
    uint64_t bit = draw(c.seed, call, index, 3) % bits;
    s.bitflips.fetch_add(1);
    return flip_bit(result, bit);
  }
  return result;
}

}  // namespace tessera
