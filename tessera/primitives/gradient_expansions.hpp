// Backward primitives with a fused kernel (layer_norm_grad, norm_grad, the
// losses' backwards) also state their value as an expression of
// differentiable primitives: a second-order gradient that reaches one
// differentiates the expression in its place (autodiff.cpp), while first-order
// gradients keep the kernel. A family file registers them next to the
// primitives:
//
//   const bool expanded_losses = register_gradient_expansions({
//       {"mean_squared_error_grad", "g * 2.0 * (y_pred - y_true) / size(y_pred)"},
//   });
//
// The expression names the primitive's parameters; it may define locals with
// block(define(name, value), ..., result).
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace tessera {

// Registers (primitive name, expression) pairs; true, for a namespace-scope
// initialiser. A name registered twice keeps its first expression.
bool register_gradient_expansions(std::vector<std::pair<std::string, std::string>> items);

// The expression registered for the primitive `name`, or null.
const std::string* gradient_expansion(const std::string& name);

}  // namespace tessera
