// What the native code generator (native_gen.hpp) keeps per comprehension
// and per view of a concatenation (native_gen_comprehensions.cpp; docs/runtime.md,
// "Comprehensions and list concatenation in native code").
#pragma once

#include <vector>

#include <llvm/IR/Value.h>

#include "tessera/lang/fastloop_impl.hpp"

namespace tessera::native_gen {

// A comprehension's list filled once, after its loop: `acc = list()`
// followed (acc not used in between) by a while loop that uses acc only as
// `acc = append(acc, x)` of numbers (Gen::find_comprehensions). Its items'
// payloads go into a buffer of the call's (native_comp_room), all of one
// kind, the kind of the first append emitted; when the loop ends (its end or
// a break) native_comp_put appends them to acc's list. No helper call per
// item, so the list reads' kept addresses stay good through the loop
// (list_epoch). A bail inside the loop leaves the buffer: the turn is redone
// from its start.
struct CompSite {
  int reg = -1;
  int kind = -1;
  llvm::Value *buf = nullptr, *cap = nullptr, *n = nullptr;  // allocas
};

// `_it = iterate(a + b)` (`for x in row + [0]`, zip's parts) where `_it` is
// only indexed and measured (`_it[k]`, `len(_it)`) in the statements of its
// block after it, which write none of a, b: no list made, `_it[k]` read from
// the parts (list variables, displays of constants) where they are, all of
// one kind of number (Gen::find_views).
struct ViewPart {
  const FastLoop::Impl::FNode* node = nullptr;  // a list variable or a display of constants
  llvm::Value *obj = nullptr, *len = nullptr;  // allocas (a variable's)
};
struct View {
  int kind = -1;
  const FastLoop::Impl::FNode* assign = nullptr;
  std::vector<ViewPart> parts;
};

}  // namespace tessera::native_gen
