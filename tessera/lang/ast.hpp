// The abstract syntax tree of the expression language. Every node keeps its
// source position so that errors can point at the user's text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/core/value.hpp"

namespace tessera {

struct Ast;
using AstPtr = std::shared_ptr<const Ast>;

// One argument of a call: optional name (for `f(x, axis=1)`) and expression.
struct AstArg {
  std::string name;
  AstPtr value;
};

struct Ast {
  enum class Kind {
    literal,     // a number, string, true/false/nil: `value`
    identifier,  // a name: `name`
    call,        // `name(args)` or `(expr)(args)`: `name` or `callee`, `args`
    list,        // `[a, b]`: `args` (unnamed)
  };
  Kind kind = Kind::literal;
  SourceLoc loc;
  Value value;
  std::string name;
  AstPtr callee;  // for calls whose callee is an expression rather than a name
  // A call the syntax makes (an operator such as `+`, `x[i]`, `a:b`) or a
  // gradient expansion: `name` is the primitive or special form whatever
  // the program defines under that name (a function of its own named `add`
  // does not change what `x + y` means).
  bool builtin = false;
  std::vector<AstArg> args;

  // The program text of this node (for messages and tests).
  std::string str() const;
};

}  // namespace tessera
