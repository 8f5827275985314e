#include "tessera/lang/compiler.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>

#include "tessera/lang/autodiff.hpp"
#include "tessera/lang/nodes.hpp"

namespace tessera {

namespace {

// The variables of one function being compiled.
struct Scope {
  std::map<std::string, size_t> slots;
  Scope* parent = nullptr;
  int loop_depth = 0;                // loops around the code being compiled
  FunctionCode* function = nullptr;  // null at the program's top level
  // Sources of the functions defined in this scope, for grad().
  std::map<std::string, FunctionSource> functions;

  size_t add(const std::string& name) {
    auto it = slots.find(name);
    if (it != slots.end()) return it->second;
    size_t s = slots.size();
    slots.emplace(name, s);
    return s;
  }
};

struct Resolved {
  int depth;
  size_t slot;
};

const std::set<std::string>& special_form_names() {
  static const std::set<std::string> names = {
      "define",   "lambda", "block",    "parallel_block", "if",   "while",
      "parallel_while", "for_each", "store",  "list",     "tuple",          "dict", "__and__",
      "__or__",   "break",  "continue", "return",         "grad", "value_and_grad",
      "vjp"};
  return names;
}

[[noreturn]] void syntax_error(const SourceLoc& loc, const std::string& msg) {
  throw SyntaxError(msg + " (at " + loc.str() + ")");
}

class Compiler {
 public:
  NodePtr compile(const AstPtr& a, Scope& scope) {
    switch (a->kind) {
      case Ast::Kind::literal:
        return std::make_shared<ConstantNode>(a->loc, a->value);
      case Ast::Kind::identifier:
        return identifier(a, scope);
      case Ast::Kind::list: {
        bool all_literal = !a->args.empty();
        for (const auto& e : a->args) all_literal = all_literal && constant_array_part(e.value);
        std::vector<NodePtr> items;
        for (const auto& e : a->args) items.push_back(compile(e.value, scope));
        if (all_literal) {
          // A list literal of numbers is an array constant, built once.
          try {
            List vals;
            for (const auto& e : a->args) vals.push_back(literal_value(e.value));
            return std::make_shared<ConstantNode>(
                a->loc, Value(to_array(Value(std::move(vals)), "[]", "list literal")));
          } catch (const std::invalid_argument& e) {
            syntax_error(a->loc, e.what());
          }
        }
        return std::make_shared<ListNode>(a->loc, std::move(items), true);
      }
      case Ast::Kind::call:
        return call(a, scope);
    }
    syntax_error(a->loc, "[compile] unknown syntax");
  }

  // Collects the names a function body defines (not entering nested functions).
  void hoist(const AstPtr& a, Scope& scope) {
    if (a->kind == Ast::Kind::list) {
      for (const auto& e : a->args) hoist(e.value, scope);
      return;
    }
    if (a->kind != Ast::Kind::call) return;
    if (!a->callee && a->name == "lambda") return;
    if (!a->callee && a->name == "define" && !a->args.empty() &&
        a->args[0].value->kind == Ast::Kind::identifier) {
      scope.add(a->args[0].value->name);
      if (a->args.size() > 2) {
        // A function: its body has its own scope.
        std::vector<AstArg> params(a->args.begin() + 1, a->args.end() - 1);
        scope.functions[a->args[0].value->name] =
            FunctionSource{a->args[0].value->name, params, a->args.back().value, a->loc};
        return;
      }
    }
    if (a->callee) hoist(a->callee, scope);
    for (const auto& e : a->args) hoist(e.value, scope);
  }

 private:
  std::map<std::string, int> sites_;  // primitive calls compiled so far per source position
  static bool constant_array_part(const AstPtr& a) {
    if (a->kind == Ast::Kind::literal) {
      return a->value.is_int() || a->value.is_float() || a->value.is_bool();
    }
    if (a->kind == Ast::Kind::list) {
      if (a->args.empty()) return false;
      for (const auto& e : a->args) {
        if (!constant_array_part(e.value)) return false;
      }
      return true;
    }
    return false;
  }

  static Value literal_value(const AstPtr& a) {
    if (a->kind == Ast::Kind::literal) return a->value;
    List l;
    for (const auto& e : a->args) l.push_back(literal_value(e.value));
    return Value(std::move(l));
  }

  std::optional<Resolved> resolve(const std::string& name, Scope& scope) {
    int depth = 0;
    for (Scope* s = &scope; s; s = s->parent, ++depth) {
      auto it = s->slots.find(name);
      if (it != s->slots.end()) return Resolved{depth, it->second};
    }
    return std::nullopt;
  }

  [[noreturn]] void unknown_name(const AstPtr& a, const std::string& what) {
    // A name of any length may come in: the message shows its start.
    constexpr size_t kShown = 60;
    // (Cut at a character: a name may hold UTF-8 sequences.)
    size_t cut = kShown;
    auto continuation = [&](size_t i) {
      return (static_cast<unsigned char>(a->name[i]) & 0xC0) == 0x80;
    };
    while (cut > 0 && cut < a->name.size() && continuation(cut)) --cut;
    std::string shown = a->name.size() <= kShown + 20
                            ? a->name
                            : error_message(a->name.substr(0, cut), "... (",
                                            std::count_if(a->name.begin(), a->name.end(),
                                                          [](char c) {
                                                            return (static_cast<unsigned char>(c) &
                                                                    0xC0) != 0x80;
                                                          }),
                                            " characters)");
    std::string msg = error_message("[compile] unknown ", what, " '", shown, "'");
    auto similar = similar_primitive_names(a->name);
    if (!similar.empty()) {
      msg += "; did you mean ";
      for (size_t i = 0; i < similar.size(); ++i) msg += (i ? ", " : "") + similar[i];
      msg += "?";
    }
    syntax_error(a->loc, msg);
  }

  NodePtr identifier(const AstPtr& a, Scope& scope) {
    if (auto r = resolve(a->name, scope)) {
      return std::make_shared<VariableNode>(a->loc, a->name, r->depth, r->slot);
    }
    if (const PrimitiveSpec* spec = find_primitive(a->name)) {
      return std::make_shared<ConstantNode>(a->loc,
                                            Value(std::static_pointer_cast<const Callable>(
                                                std::make_shared<PrimitiveFunction>(spec))));
    }
    if (special_form_names().count(a->name)) {
      syntax_error(a->loc, "[compile] '" + a->name + "' is a special form and must be called");
    }
    unknown_name(a, "name");
  }

  void expect_args(const AstPtr& a, size_t min, size_t max, const char* form_signature) {
    size_t n = a->args.size();
    if (n < min || n > max) {
      syntax_error(a->loc, error_message("[", a->name, "] expects ", form_signature, ", got ", n,
                                         " argument", n == 1 ? "" : "s"));
    }
    for (const auto& arg : a->args) {
      if (!arg.name.empty() && a->name != "define" && a->name != "lambda" && a->name != "dict") {
        syntax_error(
            arg.value->loc,
            error_message("[", a->name, "] takes no named arguments, got '", arg.name, "='"));
      }
    }
  }

  std::vector<NodePtr> compile_all(const std::vector<AstArg>& args, Scope& scope, size_t from = 0) {
    std::vector<NodePtr> out;
    for (size_t i = from; i < args.size(); ++i) out.push_back(compile(args[i].value, scope));
    return out;
  }

  // Builds the code of a function from parameter arguments and a body.
  // `loop_body`: the function is the body of a for_each, so break() and
  // continue() inside it belong to that loop.
  std::shared_ptr<FunctionCode> function(const std::string& name, const AstPtr& form,
                                         const std::vector<AstArg>& params, const AstPtr& body,
                                         Scope& outer, bool loop_body = false) {
    auto code = std::make_shared<FunctionCode>();
    code->name = name;
    code->loc = form->loc;
    Scope inner;
    inner.parent = &outer;
    inner.function = code.get();
    inner.loop_depth = loop_body ? 1 : 0;
    for (const auto& p : params) {
      std::string pname;
      AstPtr def;
      if (!p.name.empty()) {
        pname = p.name;
        def = p.value;
      } else if (p.value->kind == Ast::Kind::identifier) {
        pname = p.value->name;
      } else {
        syntax_error(
            p.value->loc,
            error_message("[", form->name, "] parameter must be a name, got ", p.value->str()));
      }
      if (inner.slots.count(pname)) {
        syntax_error(p.value->loc,
                     error_message("[", form->name, "] duplicate parameter '", pname, "'"));
      }
      if (!def && !code->defaults.empty() && code->defaults.back()) {
        syntax_error(p.value->loc, error_message("[", form->name, "] parameter '", pname,
                                                 "' without a default follows one with a default"));
      }
      inner.add(pname);
      code->params.push_back(pname);
      // Defaults are evaluated where the function is defined.
      code->defaults.push_back(def ? compile(def, outer) : nullptr);
    }
    hoist(body, inner);
    code->body = compile(body, inner);
    code->frame_size = inner.slots.size();
    mark_loop_reads(code->body.get(), code->frame_size);
    // A loop's body (for_each) runs once per turn in frames the loop may
    // reuse: its values are left as they are.
    if (!loop_body) {
      std::vector<std::string> names(inner.slots.size());
      for (const auto& [n, slot] : inner.slots) names[slot] = n;
      code->body = release_at_last_use(code->body, names);
    }
    return code;
  }

  // Values freed at their last use: in a function whose body is a block,
  // each variable of its frame (a parameter or a define) that no function
  // made inside it reads or stores (a closure could read it at any later
  // time) is assigned nil right after the last top-level statement that
  // reads it, so a step's arrays do not all live until it returns (the
  // gradient code does the same for its intermediates: autodiff.cpp,
  // release_dead). The statement that reads it has read it by then (a
  // define that goes on computing took its operands' values or futures);
  // a branch still to read it after a pending condition is waited for, as
  // before any assignment (BlockNode, late reads). The block's last
  // statement gives its value: nothing is added after it.
  static NodePtr release_at_last_use(const NodePtr& body, const std::vector<std::string>& names) {
    auto* block = dynamic_cast<const BlockNode*>(body.get());
    if (!block || block->statements().size() < 2) return body;
    const auto& stmts = block->statements();
    std::set<size_t> captured;
    std::map<size_t, size_t> last_read;  // slot -> index of its last reading statement
    for (size_t i = 0; i < stmts.size(); ++i) {
      std::vector<size_t> reads;
      frame_uses(stmts[i].get(), 0, reads, captured);
      for (size_t s : reads) last_read[s] = i;
    }
    std::vector<std::vector<size_t>> dead(stmts.size());
    bool any = false;
    for (const auto& [slot, i] : last_read) {
      if (i + 1 < stmts.size() && !captured.count(slot)) {
        dead[i].push_back(slot);
        any = true;
      }
    }
    if (!any) return body;
    std::vector<NodePtr> out;
    for (size_t i = 0; i < stmts.size(); ++i) {
      out.push_back(stmts[i]);
      for (size_t slot : dead[i]) {
        const SourceLoc& at = stmts[i]->loc();
        // (Labelled "define <release x>" in the tree and its counters.)
        out.push_back(std::make_shared<AssignNode>(at, "<release " + names[slot] + ">", 0, slot,
                                                   std::make_shared<ConstantNode>(at, Value()),
                                                   false));
      }
    }
    return std::make_shared<BlockNode>(body->loc(), std::move(out));
  }

  // The variables of the frame F of a function body that `n` (run in F,
  // or `nesting` functions inside it) reads directly, and those that a
  // function made inside F reads or assigns, or that a parallel_block reads
  // (its tasks read when they run, maybe after the statement has moved on):
  // `captured`, never released.
  static void frame_uses(const Node* n, int nesting, std::vector<size_t>& reads,
                         std::set<size_t>& captured, bool lazy = false) {
    if (!n) return;
    if (dynamic_cast<const ParallelBlockNode*>(n)) lazy = true;
    if (auto* v = dynamic_cast<const VariableNode*>(n)) {
      if (v->depth() != nesting) return;
      if (nesting == 0 && !lazy) {
        reads.push_back(v->slot());
      } else {
        captured.insert(v->slot());
      }
      return;
    }
    if (auto* a = dynamic_cast<const AssignNode*>(n)) {
      if (nesting > 0 && a->depth() == nesting) captured.insert(a->slot());
      frame_uses(a->value(), nesting, reads, captured, lazy);
      return;
    }
    if (auto* f = dynamic_cast<const FunctionNode*>(n)) {
      for (const auto& d : f->code().defaults) {
        frame_uses(d.get(), nesting, reads, captured, lazy);
      }
      frame_uses(f->code().body.get(), nesting + 1, reads, captured, lazy);
      return;
    }
    for (const Node* c : n->children()) frame_uses(c, nesting, reads, captured, lazy);
  }

  NodePtr call(const AstPtr& a, Scope& scope) {
    if (a->callee) {
      NodePtr callee = compile(a->callee, scope);
      return generic_call(a, callee, scope);
    }
    const std::string& n = a->name;
    // A name the program defines is called as its variable, unless the call
    // is the syntax's own (an operator: Ast::builtin).
    if (special_form_names().count(n) && (a->builtin || !resolve(n, scope)))
      return special_form(a, scope);
    if (auto r = a->builtin ? std::nullopt : resolve(n, scope)) {
      return generic_call(a, std::make_shared<VariableNode>(a->loc, n, r->depth, r->slot), scope);
    }
    const PrimitiveSpec* spec = find_primitive(n);
    if (!spec) unknown_name(a, "function");
    if (AstPtr fused = fuse_transposed_product(a, scope)) return call(fused, scope);
    std::vector<std::string> names;
    for (const auto& arg : a->args) names.push_back(arg.name);
    std::vector<int> slots;
    try {
      slots = bind_arguments(*spec, names);
    } catch (...) {
      rethrow_with_location(std::current_exception(), a->loc);
    }
    // Calls at one source position (a Python line holds several; gradient
    // rules expand at their primitive's position) are told apart by their
    // order in the program, the same on every locality: collectives are
    // matched across localities by that site, and with dataflow blocks two
    // collectives of one line need not be issued in the same order everywhere.
    int same_site = sites_[a->loc.str()]++;
    std::vector<NodePtr> operands = compile_all(a->args, scope);
    if (NodePtr folded = fold_constant_slice(a->loc, *spec, operands, slots)) return folded;
    if (NodePtr fused = PrimitiveCallNode::fuse(a->loc, spec, operands, slots, same_site)) {
      return fused;
    }
    if (NodePtr fused = PrimitiveCallNode::fuse_setitem(a->loc, spec, operands, slots, same_site)) {
      return fused;
    }
    if (NodePtr fused = PrimitiveCallNode::fuse_reduce(a->loc, spec, operands, slots, same_site)) {
      return fused;
    }
    if (NodePtr fused = PrimitiveCallNode::fuse_in_place(a->loc, spec, operands, slots, same_site)) {
      return fused;
    }
    return std::make_shared<PrimitiveCallNode>(a->loc, spec, std::move(operands), std::move(slots),
                                               same_site);
  }

  // slice(nil, nil, nil) and the like with constant bounds (x[:, i], x[1:-1])
  // is a constant: made once here instead of at every evaluation (a slice
  // is an immutable value). Bounds that are not constants, or that the
  // primitive refuses (raised at run time, with its position), are left.
  NodePtr fold_constant_slice(const SourceLoc& loc, const PrimitiveSpec& spec,
                              const std::vector<NodePtr>& operands, const std::vector<int>& slots) {
    if (spec.name != "slice") return nullptr;
    std::vector<CallArg> args;
    for (size_t i = 0; i < operands.size(); ++i) {
      if (!dynamic_cast<const ConstantNode*>(operands[i].get())) return nullptr;
      Value v;
      operands[i]->eval_now(nullptr, v);
      args.push_back({spec.params[static_cast<size_t>(slots[i])].name, std::move(v)});
    }
    try {
      return std::make_shared<ConstantNode>(loc, call_primitive("slice", std::move(args)));
    } catch (...) {
      return nullptr;
    }
  }

  // matmul(transpose(x), y) -> matmul_tn(x, y): the product reads x
  // transposed instead of copying it (the gradient step of every linear model).
  AstPtr fuse_transposed_product(const AstPtr& a, Scope& scope) {
    if (a->name != "matmul" || a->args.size() != 2 || !a->args[0].name.empty() ||
        !a->args[1].name.empty()) {
      return nullptr;
    }
    const AstPtr& t = a->args[0].value;
    if (t->kind != Ast::Kind::call || t->callee || t->name != "transpose" || t->args.size() != 1 ||
        !t->args[0].name.empty() || resolve("transpose", scope) || resolve("matmul_tn", scope) ||
        !find_primitive("matmul_tn")) {
      return nullptr;
    }
    auto fused = std::make_shared<Ast>(*a);
    fused->name = "matmul_tn";
    fused->args[0] = t->args[0];
    return fused;
  }

  NodePtr generic_call(const AstPtr& a, NodePtr callee, Scope& scope) {
    std::vector<std::string> names;
    for (const auto& arg : a->args) names.push_back(arg.name);
    return std::make_shared<CallNode>(a->loc, std::move(callee), compile_all(a->args, scope),
                                      std::move(names));
  }

  NodePtr lambda(const AstPtr& a, Scope& scope, bool loop_body) {
    expect_args(a, 1, 100000, "lambda(params..., body)");
    std::vector<AstArg> params(a->args.begin(), a->args.end() - 1);
    if (scope.function) scope.function->makes_closures = true;
    auto code = function("lambda", a, params, a->args.back().value, scope, loop_body);
    return std::make_shared<FunctionNode>(a->loc, std::move(code), std::nullopt);
  }

  // grad(f, argnums=0) and value_and_grad(f, argnums=0): the gradient
  // function, built by transforming f's source (see autodiff.hpp).
  NodePtr gradient(const AstPtr& a, Scope& scope) {
    auto lookup = [&scope](const std::string& name) -> std::optional<FunctionSource> {
      for (Scope* s = &scope; s; s = s->parent) {
        if (auto it = s->functions.find(name); it != s->functions.end()) return it->second;
        if (s->slots.count(name)) return std::nullopt;  // shadowed by a variable
      }
      return std::nullopt;
    };
    return compile(gradient_function(a, lookup), scope);
  }

  NodePtr special_form(const AstPtr& a, Scope& scope) {
    const std::string& n = a->name;
    const auto& args = a->args;
    if (n == "grad" || n == "value_and_grad" || n == "vjp") return gradient(a, scope);
    if (n == "define") {
      expect_args(a, 2, 100000, "define(name, value) or define(name, params..., body)");
      const AstPtr& target = args[0].value;
      if (target->kind != Ast::Kind::identifier || !args[0].name.empty()) {
        syntax_error(target->loc,
                     "[define] the first argument must be a name, got " + target->str());
      }
      size_t slot = scope.add(target->name);
      if (args.size() == 2) {
        if (!args[1].name.empty()) {
          syntax_error(args[1].value->loc,
                       "[define] the value of a variable cannot be a named argument");
        }
        return std::make_shared<AssignNode>(a->loc, target->name, 0, slot,
                                            compile(args[1].value, scope), false);
      }
      std::vector<AstArg> params(args.begin() + 1, args.end() - 1);
      if (scope.function) scope.function->makes_closures = true;
      auto code = function(target->name, a, params, args.back().value, scope);
      return std::make_shared<FunctionNode>(a->loc, std::move(code), slot);
    }
    if (n == "lambda") return lambda(a, scope, false);
    if (n == "break" || n == "continue") {
      expect_args(a, 0, 0, n == "break" ? "break()" : "continue()");
      if (scope.loop_depth == 0) {
        syntax_error(a->loc,
                     "[" + n + "] outside a loop: " + n + "() must be inside while or for_each");
      }
      return std::make_shared<ControlNode>(
          a->loc, n == "break" ? ControlNode::Kind::brk : ControlNode::Kind::cont, nullptr);
    }
    if (n == "return") {
      expect_args(a, 0, 1, "return() or return(value)");
      if (!scope.function) {
        syntax_error(a->loc,
                     "[return] outside a function: return() must be inside define or lambda");
      }
      scope.function->has_return = true;
      return std::make_shared<ControlNode>(a->loc, ControlNode::Kind::ret,
                                           args.empty() ? nullptr : compile(args[0].value, scope));
    }
    if (n == "store") {
      expect_args(a, 2, 2, "store(name, value)");
      const AstPtr& target = args[0].value;
      if (target->kind != Ast::Kind::identifier) {
        syntax_error(target->loc,
                     "[store] the first argument must be a variable name, got " + target->str());
      }
      auto r = resolve(target->name, scope);
      if (!r) {
        syntax_error(target->loc, "[store] unknown variable '" + target->name +
                                      "': define it first with define(" + target->name + ", ...)");
      }
      return std::make_shared<AssignNode>(a->loc, target->name, r->depth, r->slot,
                                          compile(args[1].value, scope), true);
    }
    if (n == "block") {
      // Any number: the gradient of a long chain (parser.cpp, Parser::Chain)
      // is a block of a few statements per term.
      expect_args(a, 0, std::numeric_limits<size_t>::max(), "block(expressions...)");
      return std::make_shared<BlockNode>(a->loc, compile_all(args, scope));
    }
    if (n == "parallel_block") {
      expect_args(a, 0, 100000, "parallel_block(expressions...)");
      return std::make_shared<ParallelBlockNode>(a->loc, compile_all(args, scope));
    }
    if (n == "if") {
      expect_args(a, 2, 3, "if(condition, then) or if(condition, then, else)");
      return std::make_shared<IfNode>(a->loc, compile(args[0].value, scope),
                                      compile(args[1].value, scope),
                                      args.size() == 3 ? compile(args[2].value, scope) : nullptr);
    }
    if (n == "while" || n == "parallel_while") {
      expect_args(a, 2, 2, (n + "(condition, body)").c_str());
      NodePtr cond = compile(args[0].value, scope);
      ++scope.loop_depth;
      NodePtr body = compile(args[1].value, scope);
      --scope.loop_depth;
      return std::make_shared<WhileNode>(a->loc, std::move(cond), std::move(body),
                                         n == "parallel_while");
    }
    if (n == "for_each") {
      expect_args(a, 2, 2, "for_each(function, iterable)");
      const AstPtr& fn = args[0].value;
      bool literal = fn->kind == Ast::Kind::call && !fn->callee && fn->name == "lambda" &&
                     !resolve("lambda", scope);
      NodePtr fn_node = literal ? lambda(fn, scope, true) : compile(fn, scope);
      return std::make_shared<ForEachNode>(a->loc, std::move(fn_node),
                                           compile(args[1].value, scope));
    }
    if (n == "list" || n == "tuple") {
      expect_args(a, 0, 100000, n == "tuple" ? "tuple(items...)" : "list(items...)");
      return std::make_shared<ListNode>(a->loc, compile_all(args, scope), false, n == "tuple");
    }
    if (n == "dict") {
      // Entries keep their source order: k, v pairs and name=value items.
      std::vector<NodePtr> keys, values;
      for (size_t i = 0; i < args.size(); ++i) {
        if (!args[i].name.empty()) {
          keys.push_back(std::make_shared<ConstantNode>(args[i].value->loc, Value(args[i].name)));
          values.push_back(compile(args[i].value, scope));
          continue;
        }
        if (i + 1 >= args.size() || !args[i + 1].name.empty()) {
          syntax_error(args[i].value->loc,
                       "[dict] expects key, value pairs: dict(k1, v1, k2, v2) or dict(k=v)");
        }
        keys.push_back(compile(args[i].value, scope));
        values.push_back(compile(args[i + 1].value, scope));
        ++i;
      }
      return std::make_shared<DictNode>(a->loc, std::move(keys), std::move(values));
    }
    // __and__ / __or__ from the && and || operators.
    expect_args(a, 2, 2, "two operands");
    return std::make_shared<LogicalNode>(a->loc, n == "__and__", compile(args[0].value, scope),
                                         compile(args[1].value, scope));
  }
};

}  // namespace

namespace {

// True if call `a` of random primitive `spec` draws from a stream that
// advances with every draw (PrimitiveCallNode::draws_from_a_stream): no seed
// of its own given, by name or by position.
bool ast_draws_from_a_stream(const Ast& a, const PrimitiveSpec& spec) {
  const int seed = stream_seed_param(spec);
  if (seed < 0) return seed == kStreamDraw;
  for (size_t i = 0; i < a.args.size(); ++i) {
    const AstArg& g = a.args[i];
    if (g.name == "seed" || (g.name.empty() && i == static_cast<size_t>(seed)))
      return g.value && g.value->kind == Ast::Kind::literal && g.value->value.is_nil();
  }
  return true;
}

// True if the program calls a primitive that writes into an array
// (registry.hpp: PrimitiveSpec::writes) anywhere, or draws from a random
// stream (whose draws must keep Python's order: nodes.cpp, may_write).
bool calls_writing_primitive(const Ast& a) {
  if (a.kind == Ast::Kind::call && a.callee == nullptr) {
    const PrimitiveSpec* spec = find_primitive(a.name);
    if (spec && (spec->writes || ast_draws_from_a_stream(a, *spec))) return true;
  }
  if (a.callee && calls_writing_primitive(*a.callee)) return true;
  for (const auto& arg : a.args) {
    if (arg.value && calls_writing_primitive(*arg.value)) return true;
  }
  return false;
}

}  // namespace

std::shared_ptr<const FunctionCode> compile_program(const std::vector<AstPtr>& program,
                                                    const std::vector<std::string>& globals,
                                                    const SourceLoc& loc) {
  bool writes = false;
  for (const auto& e : program) writes = writes || calls_writing_primitive(*e);
  ProgramWrites scope_of_flag(writes);
  Compiler c;
  Scope top;
  for (const auto& g : globals) top.add(g);
  for (const auto& e : program) c.hoist(e, top);
  std::vector<NodePtr> body;
  for (const auto& e : program) body.push_back(c.compile(e, top));
  auto code = std::make_shared<FunctionCode>();
  code->name = "<program>";
  code->loc = loc;
  code->body = std::make_shared<BlockNode>(loc, std::move(body));
  code->frame_size = top.slots.size();
  return code;
}

const std::vector<std::pair<std::string, std::string>>& special_forms() {
  static const std::vector<std::pair<std::string, std::string>> forms = {
      {"define(name, value)", "Defines a variable in the current scope and returns its value."},
      {"define(name, params..., body)",
       "Defines a function; parameters may have defaults (b=2). Functions are closures and may "
       "recurse."},
      {"lambda(params..., body)", "An anonymous function (a closure over the current scope)."},
      {"block(expressions...)", "Evaluates expressions in order; the value of the last."},
      {"parallel_block(expressions...)",
       "Evaluates expressions concurrently as separate tasks; the value of the last."},
      {"if(condition, then, else)",
       "Evaluates `then` if the condition is true, else `else` (or nil)."},
      {"while(condition, body)", "Repeats body while the condition is true; the last body value."},
      {"parallel_while(condition, body)",
       "A while loop whose turns are independent (tessera.prange): its native code may run "
       "as chunks on the workers, scalar reductions combined in chunk order."},
      {"for_each(function, iterable)",
       "Calls function on each element of a list, each row of an array, or each of 0..n-1."},
      {"store(name, value)", "Assigns a new value to an existing variable."},
      {"break(), continue()",
       "Leave the innermost while/for_each loop, or go on with its next turn."},
      {"return(value), return()", "Return from the innermost function (nil without a value)."},
      {"grad(f, argnums=0)",
       "The gradient function of f (reverse mode): w.r.t. one argument, or a list of gradients "
       "for a list of argnums."},
      {"value_and_grad(f, argnums=0, has_aux=false)",
       "Like grad, returning list(value, gradients); with has_aux, f ends in list(value, aux) "
       "and the result is list(value, gradients, aux)."},
      {"vjp(f, argnums=0, has_aux=false)",
       "The forward/backward split of f's gradient: vjp(f)(args...) runs f's forward only and "
       "returns list(value, pullback) (with has_aux: list(value, pullback, aux)); pullback(ct) "
       "runs only the backward, from the intermediates the forward kept, and returns the "
       "gradients of sum(value * ct) (ct of the value's shape and dtype). It may be called "
       "again (same result) or never."},
      {"list(items...)", "A list of values."},
      {"tuple(items...)",
       "A tuple of values: a list that Python code sees as a tuple (a multi-dimensional index, "
       "returned to Python as a tuple)."},
      {"dict(k1, v1, ...) / dict(name=value, ...)", "A dictionary with string or int keys."},
      {"a && b, a || b", "Logical and/or: short-circuit on scalars, elementwise on arrays."},
  };
  return forms;
}

}  // namespace tessera
