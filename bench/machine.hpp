// What every benchmark prints first: the machine and the thread count.
#pragma once

#include <fstream>
#include <string>
#include <thread>

namespace tessera::bench {

// The CPU model name from /proc/cpuinfo ("unknown" elsewhere).
inline std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  }
  return "unknown";
}

inline std::string machine_line() {
  return "machine: " + cpu_model() + ", " + std::to_string(std::thread::hardware_concurrency()) +
         " hardware threads";
}

}  // namespace tessera::bench
