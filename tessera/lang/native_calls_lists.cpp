// Lists of numbers in native calls (native_calls_impl.hpp's kNcList): what
// is not code generation. A list argument of a call from the general path is
// copied into a buffer of 8-byte items that the group's functions share by
// reference (a callee's appends, pops and item stores are its caller's, as
// in Python); the lists a function gives back beside its result (the
// translator's `_out` variants: `return list(result, p, ...)`) are made from
// those buffers when the call returns. The caller's own list is never
// written, so a bail anywhere in the recursion has nothing of the lists to
// undo: the buffers are dropped and the general path runs the call again on
// the lists as they were.
//
// Lists a function makes (a display, a comprehension, `a + b`, a call's
// list result) are new descriptors of the call's arena (NcFreshLists): the
// code never frees them, since the language's lists are values and a bail
// must leave nothing to undo; the arena frees them all when the call from
// the general path returns, after its result was copied out.
#include <cstdlib>
#include <cstring>

#include "tessera/lang/native_calls_impl.hpp"
#include "tessera/lang/nodes.hpp"

extern "C" int32_t nc_list_grow(int64_t* desc) {
  const int64_t room = desc[2] < 4 ? 8 : desc[2] * 2;
  void* p = std::realloc(reinterpret_cast<void*>(static_cast<uintptr_t>(desc[0])),
                         static_cast<size_t>(room) * 8);
  if (!p) return 1;  // a bail: the general path meets the MemoryError, if any
  desc[0] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(p));
  desc[2] = room;
  return 0;
}

namespace tessera::detail {
namespace {

// The arena of the call running on this thread (one at a time: native code
// never runs inside native code); null outside a call that may make lists.
thread_local NcFreshLists* t_fresh = nullptr;

// Past this many bytes of new lists in one call, the call bails: the
// general path frees lists as they die, the arena only at the end.
constexpr size_t kFreshBytes = size_t{1} << 28;

}  // namespace

NcFreshLists::NcFreshLists() : outer_(t_fresh) { t_fresh = this; }

NcFreshLists::~NcFreshLists() {
  for (int64_t* d : descs_) {
    std::free(reinterpret_cast<void*>(static_cast<uintptr_t>(d[0])));
    std::free(d);
  }
  t_fresh = outer_;
}

int64_t* NcFreshLists::make(int64_t room) {
  if (room < 0) return nullptr;
  const size_t items = room < 4 ? 4 : static_cast<size_t>(room);
  bytes_ += items * 8 + 24;
  if (bytes_ > kFreshBytes) return nullptr;
  auto* d = static_cast<int64_t*>(std::malloc(24));
  void* data = std::malloc(items * 8);
  if (!d || !data) {
    std::free(d);
    std::free(data);
    return nullptr;
  }
  try {
    descs_.push_back(d);
  } catch (...) {  // the code has no unwind tables: out of memory is a bail
    std::free(d);
    std::free(data);
    return nullptr;
  }
  d[0] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(data));
  d[1] = 0;
  d[2] = static_cast<int64_t>(items);
  return d;
}

}  // namespace tessera::detail

extern "C" int64_t* nc_list_new(int64_t room) {
  using tessera::detail::t_fresh;
  return t_fresh ? t_fresh->make(room) : nullptr;  // without an arena: a bail
}

namespace tessera::detail {
namespace {

// The positions of the parameters a `list(result, p, ...)` return names,
// or false when it is not of that form.
bool list_return(const Node* n, const FunctionCode& code, std::vector<int>& out) {
  auto* p = dynamic_cast<const ListNode*>(n);
  if (!p || p->label() != "list") return false;
  const std::vector<const Node*> kids = p->children();
  if (kids.size() < 2) return false;
  out.clear();
  for (size_t i = 1; i < kids.size(); ++i) {
    auto* v = dynamic_cast<const VariableNode*>(kids[i]);
    if (!v || v->depth() != 0 || v->slot() >= code.params.size()) return false;
    out.push_back(static_cast<int>(v->slot()));
  }
  return true;
}

bool scan_returns(const Node* n, const FunctionCode& code, std::vector<int>& lists, int& seen,
                  bool& plain) {
  if (!n) return true;
  if (auto* c = dynamic_cast<const ControlNode*>(n); c && c->label() == "return") {
    const std::vector<const Node*> kids = c->children();
    std::vector<int> here;
    if (!kids.empty() && list_return(kids[0], code, here)) {
      if (seen++ > 0 && here != lists) return false;
      lists = here;
    } else {
      plain = true;
    }
  }
  for (const Node* k : n->children())
    if (!scan_returns(k, code, lists, seen, plain)) return false;
  return true;
}

}  // namespace

bool nc_ret_lists(const FunctionCode& code, std::vector<int>& out) {
  out.clear();
  int seen = 0;
  bool plain = false;
  if (!scan_returns(code.body.get(), code, out, seen, plain)) return false;
  // The body's last value (falling off the end: `list(nil, p, ...)`).
  if (auto* b = dynamic_cast<const BlockNode*>(code.body.get()); b && !b->statements().empty()) {
    std::vector<int> tail;
    if (list_return(b->statements().back().get(), code, tail)) {
      if (seen++ > 0 && tail != out) return false;
      out = tail;
    }
  }
  return !(plain && !out.empty());  // some returns give the lists back, others not
}

bool nc_list_in(const Value& a, NcListArg& out) {
  if (!a.is_list() || a.is_tuple()) return false;
  NumberKind k = NumberKind::py_int;  // an empty list: ints (another kind appended refuses)
  const size_t n = a.list_size();
  if (const NumberList* nl = a.number_items()) {
    k = nl->kind;
  } else if (n > 0 && !NumberList::python_kind(a.list_item(0), k)) {
    return false;
  }
  switch (k) {
    case NumberKind::py_int: out.kind = nc_list_kind(NcKind::Int); break;
    case NumberKind::py_float: out.kind = nc_list_kind(NcKind::Float); break;
    case NumberKind::py_bool: out.kind = nc_list_kind(NcKind::Bool); break;
    default: return false;
  }
  out.number = k;
  const size_t room = n + 8;
  auto* data = static_cast<uint64_t*>(std::malloc(room * 8));
  if (!data) return false;
  out.desc[0] = static_cast<int64_t>(reinterpret_cast<uintptr_t>(data));
  out.desc[1] = static_cast<int64_t>(n);
  out.desc[2] = static_cast<int64_t>(room);
  if (const NumberList* nl = a.number_items()) {
    if (n) std::memcpy(data, nl->bits.data(), n * 8);
    return true;
  }
  for (size_t i = 0; i < n; ++i)
    if (!NumberList::bits_of(a.list_item(i), k, data[i])) return false;  // a mixed list
  return true;
}

Value nc_list_out(const NcListArg& a) { return nc_list_value(a.desc, a.number); }

Value nc_list_value(const int64_t* desc, NumberKind kind) {
  const auto* data = reinterpret_cast<const uint64_t*>(static_cast<uintptr_t>(desc[0]));
  return Value::number_list(kind, std::vector<uint64_t>(data, data + static_cast<size_t>(desc[1])));
}

NcListArg::~NcListArg() { std::free(reinterpret_cast<void*>(static_cast<uintptr_t>(desc[0]))); }

}  // namespace tessera::detail
