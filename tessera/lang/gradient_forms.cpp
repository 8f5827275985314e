// The gradient forms grad(f, argnums), value_and_grad(f, argnums, has_aux) and
// vjp(f, argnums, has_aux): their arguments read, f found, and the gradient
// function's source made by the transformation (autodiff.cpp).
#include <optional>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/lang/autodiff.hpp"

namespace tessera {

namespace {

[[noreturn]] void forms_syntax_error(const SourceLoc& loc, const std::string& msg) {
  throw SyntaxError(msg + " (at " + loc.str() + ")");
}

}  // namespace

bool is_gradient_form(const AstPtr& a) {
  return a->kind == Ast::Kind::call && !a->callee &&
         (a->name == "grad" || a->name == "value_and_grad" || a->name == "vjp");
}

AstPtr gradient_function(const AstPtr& a, const FunctionLookup& lookup) {
  const std::string& n = a->name;
  AstPtr f, argnums;
  bool has_aux = false;
  for (const auto& arg : a->args) {
    if (arg.name == "has_aux" && (n == "value_and_grad" || n == "vjp")) {
      if (arg.value->kind != Ast::Kind::literal || !arg.value->value.is_bool()) {
        forms_syntax_error(arg.value->loc, "[" + n + "] has_aux must be true or false");
      }
      has_aux = arg.value->value.as_bool();
    } else if (arg.name == "argnums" || (arg.name.empty() && f && !argnums)) {
      argnums = arg.value;
    } else if (arg.name.empty() && !f) {
      f = arg.value;
    } else {
      forms_syntax_error(arg.value->loc,
                      "[" + n + "] expects " + n + "(function, argnums=0)");
    }
  }
  if (!f) forms_syntax_error(a->loc, "[" + n + "] expects " + n + "(function, argnums=0)");
  FunctionSource src;
  if (f->kind == Ast::Kind::identifier) {
    auto found = lookup(f->name);
    if (!found) {
      forms_syntax_error(f->loc, "[" + n + "] '" + f->name +
                                "' is not a function defined with define(" + f->name +
                                ", params..., body)");
    }
    src = *found;
  } else if (f->kind == Ast::Kind::call && !f->callee && f->name == "lambda" &&
             !f->args.empty()) {
    src = FunctionSource{"lambda", std::vector<AstArg>(f->args.begin(), f->args.end() - 1),
                         f->args.back().value, f->loc};
  } else if (is_gradient_form(f) && !lookup(f->name)) {
    // grad(grad(g)): the gradient of lambda(params..., grad(g)(params...)),
    // with g's parameters (a second-order gradient, see Differentiator).
    AstPtr inner = f;
    while (is_gradient_form(inner) && !inner->args.empty() && inner->args[0].name.empty()) {
      inner = inner->args[0].value;
    }
    std::vector<AstArg> params;
    if (inner->kind == Ast::Kind::identifier) {
      if (auto found = lookup(inner->name)) params = found->params;
    } else if (inner->kind == Ast::Kind::call && !inner->callee && inner->name == "lambda") {
      params.assign(inner->args.begin(), inner->args.end() - 1);
    }
    if (params.empty()) {
      forms_syntax_error(f->loc, "[" + n + "] the function must be a name or a lambda, got " +
                                  f->str());
    }
    auto body = std::make_shared<Ast>();
    body->kind = Ast::Kind::call;
    body->callee = f;
    body->loc = f->loc;
    std::vector<AstArg> plain;
    for (const AstArg& p : params) {
      const std::string pname = p.name.empty() ? p.value->name : p.name;
      auto id = std::make_shared<Ast>();
      id->kind = Ast::Kind::identifier;
      id->name = pname;
      id->loc = f->loc;
      plain.push_back({"", id});
      body->args.push_back({"", id});
    }
    src = FunctionSource{n + "(" + f->name + ")", std::move(plain), body, f->loc};
  } else {
    forms_syntax_error(f->loc,
                    "[" + n + "] the function must be a name or a lambda, got " + f->str());
  }
  std::vector<int> nums;
  bool single = true;
  auto as_int = [&](const AstPtr& e) -> int {
    if (e->kind != Ast::Kind::literal || !e->value.is_int()) {
      forms_syntax_error(e->loc,
                    "[" + n + "] argnums must be an int or a list of ints, got " + e->str());
    }
    return static_cast<int>(e->value.as_int());
  };
  if (!argnums) {
    nums.push_back(0);
  } else if (argnums->kind == Ast::Kind::list ||
             (argnums->kind == Ast::Kind::call &&
              (argnums->name == "list" || argnums->name == "tuple"))) {
    single = false;
    for (const auto& e : argnums->args) nums.push_back(as_int(e.value));
    if (nums.empty()) forms_syntax_error(argnums->loc, "[" + n + "] argnums is empty");
  } else {
    nums.push_back(as_int(argnums));
  }
  return n == "vjp"
             ? differentiate_split(src, nums, single, lookup, a->loc, has_aux)
             : differentiate(src, nums, single, n == "value_and_grad", lookup, a->loc, has_aux);
}

}  // namespace tessera
