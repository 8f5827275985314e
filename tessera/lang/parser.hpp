// Lexer and parser of the expression language (see docs/language.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/lang/ast.hpp"

namespace tessera {

// How deep expressions may nest: each pair of parentheses, call, list,
// index or slice, unary operator and right-associative `**` that holds
// another is a level; a deeper expression is a SyntaxError. A chain of
// left-associative binary operators (`a + b - c + ...`, `x * y / z`,
// `p && q && r`, `a < b == c`, of any mix of them) is one level however
// long it is: the parser lowers a long chain to a sequence (parser.cpp,
// Parser::Chain), so no pass recurses per term. Every pass over a
// program's tree (compiler, autodiff, evaluation, printing) recurses once
// per level, and once per operator of a chain of up to kChainSegment
// terms; at this depth they stay well inside a 1 MB stack, while written
// and generated programs nest a few dozen levels.
inline constexpr int kMaxExpressionDepth = 256;
// A chain of binary operators of up to this many terms is the tree of
// calls it reads as (`add(add(a, b), c)`); a longer one becomes a sequence
// of steps of this many terms each (see Parser::Chain).
inline constexpr int kChainSegment = 8;

// Parses a whole program: a sequence of expressions. Throws SyntaxError with
// "file:line:col" on malformed input.
std::vector<AstPtr> parse_program(std::string_view text, const std::string& file = "<expr>");

// Parses exactly one expression.
AstPtr parse_expression(std::string_view text, const std::string& file = "<expr>");

}  // namespace tessera
