// Fuzz target: the trace reader of `tessera report` and tessera.trace, with
// every exporter run on what it reads. The input is split at form feeds
// ('\f') into the files of a trace directory: locality-0.trace,
// locality-1.trace, locality-3.trace (a locality missing between them) and
// tessera-run.txt.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

#include "fuzz_util.hpp"
#include "tessera/trace/export.hpp"
#include "tessera/trace/trace_file.hpp"

namespace {

namespace fs = std::filesystem;

// A directory of this process, emptied before each input and removed at exit.
const std::string& trace_dir() {
  static const std::string* dir = [] {
    std::string pattern = (fs::temp_directory_path() / "tessera-fuzz-trace-XXXXXX").string();
    if (!mkdtemp(pattern.data())) tessera::fuzz::fail("mkdtemp", pattern);
    auto* made = new std::string(pattern);  // never freed: used by the exit handler
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(trace_dir(), ec);
    });
    return made;
  }();
  return *dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* const names[] = {"locality-0.trace", "locality-1.trace", "locality-3.trace",
                                      "tessera-run.txt"};
  const std::string& dir = trace_dir();
  for (const auto& entry : fs::directory_iterator(dir)) fs::remove(entry.path());
  std::string_view input(reinterpret_cast<const char*>(data), size);
  for (const char* name : names) {
    size_t end = input.find('\f');
    std::ofstream(fs::path(dir) / name, std::ios::binary) << input.substr(0, end);
    if (end == std::string_view::npos) break;
    input.remove_prefix(end + 1);
  }
  namespace tr = tessera::trace;
  tessera::fuzz::expect_clean_error([&] {
    tr::TraceSet set = tr::load_trace(dir);
    (void)tr::chrome_trace_json(set);
    (void)tr::tree_dot(set);
    (void)tr::counters_csv(set);
    (void)tr::summary_json(set);
    (void)tr::report_html(set);
  });
  return 0;
}
