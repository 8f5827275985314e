// The compiler: AST to execution tree, resolving every name at compile time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/lang/ast.hpp"
#include "tessera/lang/tree.hpp"

namespace tessera {

// Compiles a parsed program into the code of its top-level function. The
// program's variables live in that function's frame; `globals` names
// variables predefined in slots 0.. (e.g. "argv"). Throws SyntaxError (unknown
// names, malformed special forms) and ValueError (wrong arity for a
// primitive), each with the source position.
std::shared_ptr<const FunctionCode> compile_program(const std::vector<AstPtr>& program,
                                                    const std::vector<std::string>& globals,
                                                    const SourceLoc& loc);

// The special forms of the language, for help output.
const std::vector<std::pair<std::string, std::string>>& special_forms();

}  // namespace tessera
