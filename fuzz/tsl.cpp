// Fuzz target: the expression language's parser and compiler (with the
// gradient transformation grad() runs at compile time, and the tree dump).
// Programs are compiled, never run: a fuzzed program could loop forever or
// write files.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "fuzz_util.hpp"
#include "tessera/lang/program.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  tessera::fuzz::expect_clean_error([&] {
    tessera::Program program(text, "fuzz.tsl");
    (void)program.tree_dot();
  });
  return 0;
}
