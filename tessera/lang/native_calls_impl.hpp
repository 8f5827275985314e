// What the files of native calls share (internal): native_calls.cpp (the
// kinds of arguments, the JIT, the cache, the guards and the entry points of
// native_calls.hpp), native_calls_gen.cpp (the code generator of a group's
// functions) and native_calls_lists.cpp (list arguments' buffers, the lists a
// function gives back). LLVM's types are only named here, not included.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tessera/core/dtype.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/value.hpp"
#include "tessera/lang/fastloop.hpp"
#include "tessera/lang/native.hpp"
#include "tessera/lang/tree.hpp"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace tessera::detail {

// Python's numbers (Int, Float, Bool), NumPy's scalars (an element read
// from an array: Np*), and arrays: kArrayKind | dtype << 3 | ndim.
enum class NcKind : uint8_t {
  Int,
  Float,
  Bool,
  None,
  NpInt64,
  NpFloat64,
  NpInt32,
  NpFloat32,
  NpBool
};

inline constexpr uint8_t kNcArray = 0x80;
// The dtypes of arrays native calls take, in the order of their kind's bits.
inline const DType kNcDtypes[] = {DType::float64, DType::float32, DType::int64, DType::int32,
                           DType::bool_};
inline const NcKind kNcElements[] = {NcKind::NpFloat64, NcKind::NpFloat32, NcKind::NpInt64,
                              NcKind::NpInt32, NcKind::NpBool};
inline constexpr int kNcMaxDims = 7;

inline bool nc_is_array(NcKind k) { return (static_cast<uint8_t>(k) & kNcArray) != 0; }
inline int nc_dims(NcKind k) { return static_cast<uint8_t>(k) & 7; }
inline int nc_dtype(NcKind k) { return (static_cast<uint8_t>(k) >> 3) & 15; }
inline NcKind nc_array_kind(int dtype, int ndim) {
  return static_cast<NcKind>(kNcArray | (dtype << 3) | ndim);
}
inline bool nc_int_kind(NcKind k) {
  return k == NcKind::Int || k == NcKind::NpInt64 || k == NcKind::NpInt32;
}
inline bool nc_float_kind(NcKind k) {
  return k == NcKind::Float || k == NcKind::NpFloat64 || k == NcKind::NpFloat32;
}
inline bool nc_bool_kind(NcKind k) { return k == NcKind::Bool || k == NcKind::NpBool; }
inline bool nc_numpy_kind(NcKind k) {
  return k == NcKind::NpInt64 || k == NcKind::NpFloat64 || k == NcKind::NpInt32 ||
         k == NcKind::NpFloat32 || k == NcKind::NpBool;
}
// A list of Python numbers of one kind (Int, Float or Bool items), passed by
// reference among the group's functions (native_calls_lists.cpp): its
// descriptor is three words, the items' address (8 bytes an item: an int64,
// a double's bits, 0 or 1), their number and the room allocated.
inline constexpr uint8_t kNcList = 0x40;
inline bool nc_is_list(NcKind k) {
  return (static_cast<uint8_t>(k) & (kNcArray | kNcList)) == kNcList;
}
inline NcKind nc_list_kind(NcKind item) {
  return static_cast<NcKind>(kNcList | static_cast<uint8_t>(item));
}
inline NcKind nc_list_item(NcKind k) { return static_cast<NcKind>(static_cast<uint8_t>(k) & 7); }
inline bool nc_number(NcKind k) { return k != NcKind::None && !nc_is_array(k) && !nc_is_list(k); }

// Grows a list's descriptor (native code's append): 0, or 1 when out of memory.
extern "C" int32_t nc_list_grow(int64_t* desc);
// A new empty list with room for `room` items in the running call's arena
// (NcFreshLists); null (a bail) without one, past its limit, or out of memory.
extern "C" int64_t* nc_list_new(int64_t room);

inline bool nc_debug() { return native_debug() || fast_loops_debug(); }

// The entry every compiled call has: arguments as 64-bit words (a double's
// bits, an array's descriptor address), the result's word; returns 0 when
// done, else the code bailed. `ctx` is the NcContext (its status first).
using NcEntry = int32_t (*)(const int64_t* args, int64_t* result, int32_t* ctx);

// A variable the code reads a function from, checked at each call's entry:
// `up` frames above the env of function `caller` of the group, at `slot`, a
// closure of `code` (whose env is function `callee`'s).
struct NcStep {
  size_t caller;
  int up;
  size_t slot;
  const FunctionCode* code;
  size_t callee;
};

struct NcCompiled {
  NcEntry entry = nullptr;  // null: refused
  NcKind ret = NcKind::None;
  // The parameters whose lists the function gives back beside its result
  // (the translator's `_out` variants return list(result, p, ...)).
  std::vector<int> ret_lists;
  std::vector<NcStep> steps;
  size_t functions = 1;
  bool makes_lists = false;  // calls nc_list_new: only entered with an arena
};

struct NcKey {
  const FunctionCode* code;
  std::vector<NcKind> args;
  bool operator<(const NcKey& o) const {
    return code != o.code ? code < o.code : args < o.args;
  }
};

// A list argument of a call from the general path, copied into a buffer
// its descriptor owns (native_calls_lists.cpp), freed with it.
struct NcListArg {
  int64_t desc[3] = {0, 0, 0};
  NcKind kind = NcKind::None;
  NumberKind number = NumberKind::py_int;
  NcListArg() = default;
  NcListArg(const NcListArg&) = delete;
  NcListArg& operator=(const NcListArg&) = delete;
  ~NcListArg();
};

// The lists a call makes (nc_list_new), freed when it ends: one is made
// around each entry from the general path into code that makes lists.
class NcFreshLists {
 public:
  NcFreshLists();
  ~NcFreshLists();
  NcFreshLists(const NcFreshLists&) = delete;
  NcFreshLists& operator=(const NcFreshLists&) = delete;

  // A new descriptor with room for `room` items, or null (see nc_list_new).
  int64_t* make(int64_t room);

 private:
  NcFreshLists* outer_;
  std::vector<int64_t*> descs_;
  size_t bytes_ = 0;
};

// Copies a list of Python numbers of one kind into `out`; false for any
// other value (a tuple, a mixed list, NumPy's scalars, lists of lists).
bool nc_list_in(const Value& a, NcListArg& out);
// The list a buffer holds now, as a new list (unboxed, NumberList).
Value nc_list_out(const NcListArg& a);
// The list a descriptor holds, as a new list of items of `kind`.
Value nc_list_value(const int64_t* desc, NumberKind kind);
// The parameters `code` gives back beside its result: every return (and the
// body's last value) is `list(result, p, ...)` of the same parameters
// (empty: none); false when only some are.
bool nc_ret_lists(const FunctionCode& code, std::vector<int>& out);

// What one round of code generation made (nc_generate).
struct NcGenerated {
  std::string why;  // refused: why, and where
  SourceLoc where;
  bool retry = false;  // a function's return kind was guessed wrong: generate again
  bool recursive = false;
  NcKind ret = NcKind::None;  // the first function's (the call's) result
  std::vector<int> ret_lists;  // its lists given back (NcCompiled's)
  std::vector<NcStep> steps;
  size_t functions = 1;
  bool makes_lists = false;
};

// Generates into `mod` the group of functions a call of `closure` on
// `kinds` runs (the function, and every jit function it calls, with
// `ret_guess` the result kinds guessed so far), and, when one of them
// recurses, the entry `name` calling the first (NcEntry's signature).
// False when refused (`why`) or to be generated again (`retry`).
bool nc_generate(llvm::LLVMContext& ctx, llvm::Module& mod, std::map<NcKey, NcKind>& ret_guess,
                 const Closure& closure, const std::vector<NcKind>& kinds, const std::string& name,
                 NcGenerated& out);

}  // namespace tessera::detail
