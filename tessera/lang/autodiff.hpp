// Reverse-mode automatic differentiation as a transformation of the program:
// grad(f) becomes a new function whose body runs f's computation forward,
// keeping the intermediates the backward pass needs, then applies each
// primitive's gradient rule (PrimitiveSpec::grads) in reverse order.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "tessera/lang/ast.hpp"

namespace tessera {

// How many expressions differentiating one function may go through, calls
// of defined functions expanded: more is a SyntaxError. Functions calling
// each other (f1 calls f0 four times, f2 calls f1 four times, ...) expand
// exponentially: a program of a few lines would take minutes and gigabytes.
inline constexpr size_t kMaxGradientExpressions = 1000000;

// A function known by its source: parameters (with defaults) and body.
struct FunctionSource {
  std::string name;
  std::vector<AstArg> params;
  AstPtr body;
  SourceLoc loc;
};

// Finds the source of a function called by name from the function being
// differentiated (for inlining); nullopt when the name is not a function
// defined with define(name, params..., body).
using FunctionLookup = std::function<std::optional<FunctionSource>(const std::string&)>;

// The AST of lambda(params..., body) computing the gradient of `f` with
// respect to the parameters at `argnums` (a single gradient when `single`,
// else a list), preceded by f's value when `with_value`. Straight-line code,
// define/store, block, if and calls of functions known to `lookup` are
// differentiated; loops and other constructs raise SyntaxError naming the
// construct and its position.
// With `has_aux`, f must end in list(value, aux): the value is differentiated
// and the result is list(value, gradients, aux) (aux carries no gradient).
AstPtr differentiate(const FunctionSource& f, const std::vector<int>& argnums, bool single,
                     bool with_value, const FunctionLookup& lookup, const SourceLoc& at,
                     bool has_aux = false);

// The AST of lambda(params..., body) splitting f's gradient in two (vjp):
// calling it runs f's forward only and returns list(value, pullback) (with
// has_aux: list(value, pullback, aux)); pullback(ct) runs only the backward,
// from the intermediates the forward left in its frame, and returns the
// gradients of sum(value * ct) with respect to `argnums` (one when
// `single`). ct must have the value's shape and dtype (vjp_seed checks).
AstPtr differentiate_split(const FunctionSource& f, const std::vector<int>& argnums, bool single,
                           const FunctionLookup& lookup, const SourceLoc& at, bool has_aux);

// The AST of the gradient function that the call `form`, grad(f, argnums=0),
// value_and_grad(f, argnums=0, has_aux=false) or vjp(f, argnums=0,
// has_aux=false), stands for; f is a lambda or a name `lookup` finds.
// Inside a differentiated function, a call of such a form is itself
// differentiated (second-order gradients): every primitive its backward uses
// then needs a gradient rule of its own, and one without is refused by name.
AstPtr gradient_function(const AstPtr& form, const FunctionLookup& lookup);

// True for a call of grad, value_and_grad or vjp (the forms that make a
// gradient function; whether the program shadows the name is the caller's to check).
bool is_gradient_form(const AstPtr& a);

// Parses every gradient rule of the registry; a list of problems (rules that
// do not parse or name unknown variables), empty when all are well formed.
std::vector<std::string> check_gradient_rules();

// The backward primitives that a gradient can reach (called by a primitive's
// gradient rule, or emitted by the transformation itself: getitem_grad) but
// that have no gradient rule of their own: a second-order gradient through
// one is refused by name. Sorted, each once.
std::vector<std::string> backward_primitives_without_rules();

}  // namespace tessera
