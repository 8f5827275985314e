// Lexer and parser of the expression language (see docs/language.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/lang/ast.hpp"

namespace tessera {

// How deep expressions may nest (operators, calls, brackets, indexing): a
// deeper one is a SyntaxError. Every pass over a program's tree (compiler,
// autodiff, evaluation, printing) recurses once per level; at this depth
// they stay well inside a 1 MB stack, while written and generated programs
// nest a few dozen levels.
inline constexpr int kMaxExpressionDepth = 256;

// Parses a whole program: a sequence of expressions. Throws SyntaxError with
// "file:line:col" on malformed input.
std::vector<AstPtr> parse_program(std::string_view text, const std::string& file = "<expr>");

// Parses exactly one expression.
AstPtr parse_expression(std::string_view text, const std::string& file = "<expr>");

}  // namespace tessera
