// Lexer and parser of the expression language (see docs/language.md).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/lang/ast.hpp"

namespace tessera {

// Parses a whole program: a sequence of expressions. Throws SyntaxError with
// "file:line:col" on malformed input.
std::vector<AstPtr> parse_program(std::string_view text, const std::string& file = "<expr>");

// Parses exactly one expression.
AstPtr parse_expression(std::string_view text, const std::string& file = "<expr>");

}  // namespace tessera
