#include "tessera/lang/autodiff.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <unordered_map>

#include "tessera/lang/parser.hpp"
#include "tessera/primitives/gradient_expansions.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

namespace {

[[noreturn]] void fail(const SourceLoc& loc, const std::string& msg) {
  throw SyntaxError("[grad] " + msg + " (at " + loc.str() + ")");
}

AstPtr ident(const std::string& name, const SourceLoc& loc) {
  auto a = std::make_shared<Ast>();
  a->kind = Ast::Kind::identifier;
  a->name = name;
  a->loc = loc;
  return a;
}

AstPtr literal(Value v, const SourceLoc& loc) {
  auto a = std::make_shared<Ast>();
  a->value = std::move(v);
  a->loc = loc;
  return a;
}

AstPtr call(const std::string& name, std::vector<AstPtr> args, const SourceLoc& loc) {
  auto a = std::make_shared<Ast>();
  a->kind = Ast::Kind::call;
  a->name = name;
  a->builtin = true;  // the primitive or special form, whatever the program defines
  a->loc = loc;
  for (auto& x : args) a->args.push_back({"", std::move(x)});
  return a;
}

AstPtr define(const std::string& name, AstPtr value, const SourceLoc& loc) {
  return call("define", {ident(name, loc), std::move(value)}, loc);
}

AstPtr block(std::vector<AstPtr> stmts, const SourceLoc& loc) {
  return call("block", std::move(stmts), loc);
}

// lambda(params..., body): `params` ends with the body.
AstPtr lambda_of(std::vector<AstArg> params, const SourceLoc& loc) {
  auto a = std::make_shared<Ast>();
  a->kind = Ast::Kind::call;
  a->name = "lambda";
  a->loc = loc;
  a->args = std::move(params);
  return a;
}

// The parsed gradient rules of a primitive (parsed once), then its shared
// expression (PrimitiveSpec::grad_common; null when it has none).
const std::vector<AstPtr>& parsed_rules(const PrimitiveSpec& spec) {
  static std::mutex mutex;
  static std::unordered_map<const PrimitiveSpec*, std::vector<AstPtr>> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(&spec);
  if (it != cache.end()) return it->second;
  std::vector<AstPtr> rules;
  auto parse = [&](const std::string& r) {
    return r.empty() ? nullptr : parse_expression(r, "<grad rule of " + spec.name + ">");
  };
  for (const std::string& r : spec.grads) rules.push_back(parse(r));
  rules.push_back(parse(spec.grad_common));
  return cache.emplace(&spec, std::move(rules)).first->second;
}

// The parsed expansion of a backward primitive (gradient_expansions.hpp),
// parsed once; null when it has none.
AstPtr parsed_expansion(const PrimitiveSpec& spec) {
  static std::mutex mutex;
  static std::unordered_map<const PrimitiveSpec*, AstPtr> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(&spec);
  if (it != cache.end()) return it->second;
  AstPtr rule;
  if (const std::string* text = gradient_expansion(spec.name)) {
    rule = parse_expression(*text, "<expansion of " + spec.name + ">");
  }
  return cache.emplace(&spec, std::move(rule)).first->second;
}

// The parsed grad_fusion_common of a primitive (parsed once; null when none).
const AstPtr& parsed_fusion_common(const PrimitiveSpec& spec) {
  static std::mutex mutex;
  static std::unordered_map<const PrimitiveSpec*, AstPtr> cache;
  std::lock_guard lock(mutex);
  auto it = cache.find(&spec);
  if (it != cache.end()) return it->second;
  AstPtr rule;
  if (!spec.grad_fusion_common.empty()) {
    rule = parse_expression(spec.grad_fusion_common, "<fused grad rule of " + spec.name + ">");
  }
  return cache.emplace(&spec, std::move(rule)).first->second;
}

bool names_identifier(const AstPtr& a, const std::string& name) {
  if (a->kind == Ast::Kind::identifier && a->name == name) return true;
  if (a->callee && names_identifier(a->callee, name)) return true;
  for (const auto& arg : a->args) {
    if (names_identifier(arg.value, name)) return true;
  }
  return false;
}

// A copy of `rule` with identifiers replaced by `bindings` and every position
// set to `loc` (errors in a rule point at the differentiated call).
AstPtr substitute(const AstPtr& rule, const std::map<std::string, AstPtr>& bindings,
                  const SourceLoc& loc) {
  if (rule->kind == Ast::Kind::identifier) {
    auto it = bindings.find(rule->name);
    if (it != bindings.end()) return it->second;
  }
  auto a = std::make_shared<Ast>(*rule);
  a->loc = loc;
  // A rule's calls are of primitives, whatever the program defines.
  if (a->kind == Ast::Kind::call && !a->callee) a->builtin = true;
  if (a->callee) a->callee = substitute(a->callee, bindings, loc);
  for (auto& arg : a->args) arg.value = substitute(arg.value, bindings, loc);
  return a;
}

// A value in the transformed program: an expression (literal, or the name of
// a variable holding an intermediate) and, for intermediates, its id.
struct Operand {
  AstPtr ast;
  int id = -1;
};

// One forward step whose backward the gradient needs.
struct Step {
  enum class Kind { primitive, getitem, getitem_grad, cond, list, checkpoint };
  Kind kind = Kind::primitive;
  SourceLoc loc;
  const PrimitiveSpec* spec = nullptr;
  // per parameter; for getitem: target then indices; for getitem_grad: g then indices
  std::vector<Operand> args;
  int out = -1;
  AstPtr cond;
  std::vector<Step> then_steps, else_steps;
  struct Merge {
    Operand then_src, else_src;
    int out;
  };
  std::vector<Merge> merges;
  // checkpoint: the statements recomputing the function's forward (its
  // steps in then_steps, its value args[0]) and the ids they define.
  std::vector<AstPtr> recompute;
  int first_local = 0, end_local = 0;
};

struct Context {
  std::map<std::string, Operand> env;
  std::map<std::string, FunctionSource> functions;
};

const std::set<std::string>& unsupported_forms() {
  static const std::set<std::string> forms = {
      "while",  "parallel_while", "for_each", "parallel_block", "break",          "continue",
      "return", "lambda",   "grad",           "value_and_grad", "dict", "vjp"};
  return forms;
}

// Backward primitives (the gradient rules' own: matmul_grad_x, conv2d_grad_input,
// relu_grad, ...): a second-order gradient reaching one without a rule of its
// own is refused by name.
bool ad_is_backward(const PrimitiveSpec& spec) {
  return spec.family == "autodiff" || spec.name.find("_grad") != std::string::npos;
}

class Differentiator {
 public:
  explicit Differentiator(const FunctionLookup& lookup) : lookup_(lookup) {}

  AstPtr run(const FunctionSource& f, const std::vector<int>& argnums, bool single, bool with_value,
             const SourceLoc& at, bool has_aux, bool split = false) {
    SourceLoc loc = f.loc;
    root_ = f.name;
    Context ctx;
    std::vector<AstArg> params;
    std::vector<Operand> param_ops;
    for (size_t i = 0; i < f.params.size(); ++i) {
      const AstArg& p = f.params[i];
      std::string pname = p.name.empty() ? p.value->name : p.name;
      bool wrt = std::find(argnums.begin(), argnums.end(), static_cast<int>(i)) != argnums.end();
      // Parameters are renamed so that they cannot shadow the primitives
      // that gradient rules call.
      int id = new_ref(wrt, "p" + std::to_string(i));
      Operand op{ident(names_[id], loc), id};
      ctx.env[pname] = op;
      param_ops.push_back(op);
      if (p.name.empty()) {
        params.push_back({"", ident(names_[id], loc)});
      } else {
        params.push_back({names_[id], p.value});
      }
    }
    for (int a : argnums) {
      if (a < 0 || a >= static_cast<int>(f.params.size())) {
        fail(at, error_message("argnums ", a, " is out of range: '", f.name, "' has ",
                               f.params.size(), " parameter", f.params.size() == 1 ? "" : "s"));
      }
    }
    inline_stack_.push_back(f.name);
    std::vector<AstPtr> stmts;
    top_ = &stmts;
    std::vector<Step> steps;
    Operand result;
    AstPtr aux;
    if (has_aux) {
      // The body is list(value, aux) or block(..., list(value, aux)).
      AstPtr body = f.body;
      std::vector<AstPtr> prefix;
      while (body->kind == Ast::Kind::call && !body->callee && body->name == "block" &&
             !body->args.empty()) {
        for (size_t i = 0; i + 1 < body->args.size(); ++i) prefix.push_back(body->args[i].value);
        body = body->args.back().value;
      }
      if (body->kind != Ast::Kind::call || body->callee ||
          (body->name != "list" && body->name != "tuple") || body->args.size() != 2) {
        fail(body->loc,
             "with has_aux the function must end in list(value, aux), got " + body->str());
      }
      for (const auto& e : prefix) transform(e, ctx, stmts, steps);
      result = transform(body->args[0].value, ctx, stmts, steps);
      Context aux_ctx = ctx;
      std::vector<Step> aux_steps;  // the aux value carries no gradient
      aux_mode_ = true;
      aux = transform(body->args[1].value, aux_ctx, stmts, aux_steps).ast;
      aux_mode_ = false;
    } else {
      result = transform(f.body, ctx, stmts, steps);
    }

    if (split) return split_lambda(std::move(params), std::move(stmts), steps, param_ops, argnums,
                                   single, result, aux, at);
    const size_t forward_end = stmts.size();
    // Backward: every intermediate's cotangent starts as nil (no
    // contribution yet); the result's is its seed.
    for (size_t id = 0; id < names_.size(); ++id) {
      if (active_[id])
        stmts.push_back(define(ct(static_cast<int>(id)), literal(Value(), loc), loc));
    }
    if (result.id >= 0 && active_[result.id]) {
      stmts.push_back(define(ct(result.id), call("grad_seed", {result.ast}, loc), loc));
      emit_backward(steps, stmts);
    } else {
      // The value does not depend on the differentiated parameters; the
      // seed still checks that it is a scalar.
      stmts.push_back(call("grad_seed", {result.ast}, loc));
    }
    AstPtr g = gradients(argnums, param_ops, single, loc);
    if (has_aux) {
      stmts.push_back(call("list", {result.ast, g, aux}, loc));
    } else {
      stmts.push_back(with_value ? call("list", {result.ast, g}, loc) : g);
    }
    stmts = rematerialise(std::move(stmts), forward_end);
    stmts = with_templates(std::move(stmts), loc);
    params.push_back({"", block(release_dead(std::move(stmts), loc), loc)});
    return lambda_of(std::move(params), at);
  }

 private:
  // vjp: lambda(params..., block(forward..., list(value, pullback[, aux]))),
  // where pullback = lambda(ct, block(backward..., gradients)) closes over
  // the forward's variables: the intermediates its backward statements read
  // stay alive in the frame the closure captured, every other one is freed
  // after its last forward use, and calling it runs only the backward.
  AstPtr split_lambda(std::vector<AstArg> params, std::vector<AstPtr> fwd,
                      const std::vector<Step>& steps, const std::vector<Operand>& param_ops,
                      const std::vector<int>& argnums, bool single, const Operand& result,
                      const AstPtr& aux, const SourceLoc& at) {
    const SourceLoc& loc = at;
    // The value's shape and dtype (not its data), which the cotangent must have.
    const std::string like = "__vjp_like";
    fwd.push_back(define(like, call("grad_template", {result.ast}, loc), loc));
    const std::string seed = "__vjp_ct";
    std::vector<AstPtr> bwd;
    for (size_t id = 0; id < names_.size(); ++id) {
      if (active_[id]) bwd.push_back(define(ct(static_cast<int>(id)), literal(Value(), loc), loc));
    }
    AstPtr checked = call("vjp_seed", {ident(seed, loc), ident(like, loc)}, loc);
    if (result.id >= 0 && active_[result.id]) {
      bwd.push_back(define(ct(result.id), checked, loc));
      emit_backward(steps, bwd);
    } else {
      bwd.push_back(checked);  // checked all the same; the gradients are zeros
    }
    bwd.push_back(gradients(argnums, param_ops, single, loc));
    bwd = rematerialise(std::move(bwd), 0);
    // Only the pullback's own variables are released inside it: the forward's
    // belong to the captured frame (a define there would make a new local),
    // and stay for a second call.
    std::set<std::string> own;
    for (const auto& st : bwd) collect_defined(st, own);
    bwd = release_dead(std::move(bwd), loc, &own);
    std::vector<AstArg> pb_params{{"", ident(seed, loc)}, {"", block(std::move(bwd), loc)}};
    auto pullback = std::make_shared<Ast>();
    pullback->kind = Ast::Kind::call;
    pullback->name = "lambda";
    pullback->builtin = true;
    pullback->loc = at;
    pullback->args = std::move(pb_params);
    std::vector<AstPtr> items{result.ast, pullback};
    if (aux) items.push_back(aux);
    fwd.push_back(call("list", std::move(items), loc));
    fwd = with_templates(std::move(fwd), loc);
    params.push_back({"", block(release_dead(std::move(fwd), loc), loc)});
    return lambda_of(std::move(params), at);
  }

  // The names `a` defines (define(name, ...) anywhere inside it).
  static void collect_defined(const AstPtr& a, std::set<std::string>& out) {
    if (a->kind == Ast::Kind::call && !a->callee && a->name == "define" && !a->args.empty() &&
        a->args[0].value->kind == Ast::Kind::identifier) {
      out.insert(a->args[0].value->name);
    }
    if (a->callee) collect_defined(a->callee, out);
    for (const auto& arg : a->args) collect_defined(arg.value, out);
  }

  int new_ref(bool active, const std::string& hint) {
    int id = static_cast<int>(names_.size());
    names_.push_back("__ad_" + hint + "_" + std::to_string(id));
    active_.push_back(active);
    return id;
  }

  std::string ct(int id) const { return "__ct_" + std::to_string(id); }

  // The gradients of the parameters `argnums` once the backward has run:
  // each one's cotangent, zeros where nothing reached it; one array when
  // `single`, else a list.
  AstPtr gradients(const std::vector<int>& argnums, const std::vector<Operand>& param_ops,
                   bool single, const SourceLoc& loc) const {
    std::vector<AstPtr> grads;
    for (int a : argnums) {
      const Operand& p = param_ops[a];
      grads.push_back(call("if",
                           {call("is_nil", {ident(ct(p.id), loc)}, loc),
                            call("zeros_like", {p.ast}, loc), ident(ct(p.id), loc)},
                           loc));
    }
    return single ? grads[0] : call("list", grads, loc);
  }

  bool is_active(const Operand& op) const {
    return !forward_only_ && op.id >= 0 && active_[op.id];
  }

  // True when `name` is a variable or a function of the program, not the form.
  bool shadowed(const std::string& name, const Context& ctx) const {
    return ctx.env.count(name) || ctx.functions.count(name) || lookup_(name).has_value();
  }

  // The gradient function that `form` (grad(f, ...), value_and_grad(f, ...))
  // makes, as a function to inline; `defining` gets the context its
  // function was defined in (empty for a function of the program).
  FunctionSource nested_gradient(const AstPtr& form, const Context& ctx, Context& defining) {
    if (form->name == "vjp") {
      fail(form->loc, "cannot differentiate through vjp(...): its pullback is a function "
                      "value; use grad or value_and_grad inside a differentiated function");
    }
    bool local = false;
    FunctionLookup find = [&](const std::string& name) -> std::optional<FunctionSource> {
      if (auto it = ctx.functions.find(name); it != ctx.functions.end()) {
        local = true;
        return it->second;
      }
      if (ctx.env.count(name)) return std::nullopt;  // a variable, not a function
      return lookup_(name);
    };
    const AstPtr& fn = form->args.empty() ? nullptr : form->args[0].value;
    if (fn && fn->kind == Ast::Kind::call && !fn->callee && fn->name == "lambda") local = true;
    AstPtr lambda = gradient_function(form, find);
    if (local) defining = ctx;
    std::string name = form->name + "(" +
                       (fn && fn->kind == Ast::Kind::identifier ? fn->name : "lambda") + ")";
    return FunctionSource{name, std::vector<AstArg>(lambda->args.begin(), lambda->args.end() - 1),
                          lambda->args.back().value, form->loc};
  }

  // The function of checkpoint(fn) or remat(fn) (`form`) when `callee` is
  // that call (of the primitive, not a function of the program named so),
  // else null.
  AstPtr special_function(const AstPtr& callee, const Context& ctx, const std::string& form) {
    if (callee->kind != Ast::Kind::call || callee->callee || callee->name != form ||
        ctx.env.count(form) || ctx.functions.count(form) ||
        (!callee->builtin && lookup_(form))) {
      return nullptr;
    }
    if (callee->args.size() != 1 || !callee->args[0].name.empty()) {
      fail(callee->loc, error_message(form, " takes one function, got ", callee->args.size(),
                                      " argument", callee->args.size() == 1 ? "" : "s"));
    }
    return callee->args[0].value;
  }

  // The function fn of checkpoint(fn) or remat(fn) (`form`) and the context
  // it was defined in.
  FunctionSource function_of(const AstPtr& fn, const AstPtr& a, const Context& ctx,
                             const std::string& form, Context& defining) {
    FunctionSource f;
    if (fn->kind == Ast::Kind::identifier) {
      if (ctx.env.count(fn->name)) {
        fail(fn->loc, form + " of the function value '" + fn->name +
                          "': give a function defined with define, or a lambda");
      }
      if (auto it = ctx.functions.find(fn->name); it != ctx.functions.end()) {
        f = it->second;
        defining = ctx;
      } else if (auto src = lookup_(fn->name)) {
        f = *src;
      } else {
        fail(fn->loc, form + " of '" + fn->name +
                          "', which is not a function defined with define(" + fn->name +
                          ", params..., body)");
      }
    } else if (fn->kind == Ast::Kind::call && !fn->callee && fn->name == "lambda" &&
               !fn->args.empty()) {
      f = FunctionSource{"lambda", std::vector<AstArg>(fn->args.begin(), fn->args.end() - 1),
                         fn->args.back().value, fn->loc};
      defining = ctx;
    } else {
      fail(fn->loc, form + " takes a function name or a lambda, got " + fn->str());
    }
    if (std::find(inline_stack_.begin(), inline_stack_.end(), f.name) != inline_stack_.end()) {
      fail(a->loc, "cannot differentiate the recursive function '" + f.name + "'");
    }
    return f;
  }

  // checkpoint(fn)(args...): the forward computes fn's value keeping none of
  // its intermediates (all inactive, so each is freed after its last use);
  // the backward recomputes fn's forward from the arguments, which it keeps,
  // then runs fn's backward, whose contributions reach the arguments'
  // cotangents in the order the program without checkpoint adds them.
  Operand checkpointed(const AstPtr& fn, const AstPtr& a, Context& ctx, std::vector<AstPtr>& out,
                       std::vector<Step>& steps) {
    Context defining;
    FunctionSource f = function_of(fn, a, ctx, "checkpoint", defining);
    std::vector<Operand> positional;
    std::map<std::string, Operand> named;
    transform_args(a, ctx, out, steps, positional, named);
    ++checkpoint_depth_;
    checkpoint_names_.push_back({"checkpoint", f.name});
    // The forward: nothing active, nothing kept for a backward.
    const bool was_forward_only = forward_only_;
    forward_only_ = true;
    std::vector<Step> no_steps;
    Operand value = inline_body(f, a, positional, named, defining, out, no_steps);
    forward_only_ = was_forward_only;
    if (forward_only_) {  // inside another checkpoint's forward: no backward to prepare
      checkpoint_names_.pop_back();
      --checkpoint_depth_;
      return value;
    }
    // The recomputation, for the backward.
    Step s;
    s.kind = Step::Kind::checkpoint;
    s.loc = a->loc;
    const int first = static_cast<int>(names_.size());
    Operand recomputed =
        inline_body(f, a, positional, named, defining, s.recompute, s.then_steps);
    s.first_local = first;
    s.end_local = static_cast<int>(names_.size());
    checkpoint_names_.pop_back();
    --checkpoint_depth_;
    if (!is_active(recomputed)) return value;  // no gradient flows through
    Operand r = bind(value.ast, true, out, "ck");
    s.out = r.id;
    s.args.push_back(recomputed);
    steps.push_back(std::move(s));
    return r;
  }

  // remat(fn)(args...): fn's forward and backward as without remat, but its
  // value (and the values views of it compute: see remat_view) is not kept
  // for the backward pass: the backward statements that read it read a
  // recomputation made just before the first of them (rematerialise), so
  // the forward's value is freed after its last forward use. Effective in
  // the differentiated body's own statements (functions it calls included);
  // elsewhere (an if's branch, a checkpoint) a plain call.
  Operand rematerialised(const AstPtr& fn, const AstPtr& a, Context& ctx,
                         std::vector<AstPtr>& out, std::vector<Step>& steps) {
    Context defining;
    FunctionSource f = function_of(fn, a, ctx, "remat", defining);
    std::vector<Operand> positional;
    std::map<std::string, Operand> named;
    transform_args(a, ctx, out, steps, positional, named);
    const size_t start = out.size();
    const int first = static_cast<int>(names_.size());
    ++checkpoint_depth_;
    checkpoint_names_.push_back({"remat", f.name});
    Operand value = inline_body(f, a, positional, named, defining, out, steps);
    checkpoint_names_.pop_back();
    --checkpoint_depth_;
    if (forward_only_ || aux_mode_ || &out != top_ || value.id < first) return value;
    std::set<std::string> defined;
    for (size_t i = start; i < out.size(); ++i) collect_defined(out[i], defined);
    if (!defined.count(names_[value.id])) return value;
    std::map<std::string, std::string> renames;
    for (const auto& n : defined) renames[n] = n + "_rm";
    Remat r;
    for (size_t i = start; i < out.size(); ++i) r.stmts.push_back(renamed(out[i], renames));
    remat_[value.id] = std::move(r);
    return value;
  }

  // The result `r` of a view-like primitive (getitem, reshape, ravel,
  // transpose) of a rematerialised value `x` is rematerialised too: its
  // recomputation is its statement reading x's.
  void remat_view(const PrimitiveSpec& spec, const Operand& x, const Operand& r,
                  const std::vector<AstPtr>& out) {
    static const std::set<std::string> views = {"getitem", "reshape", "ravel", "transpose"};
    if (!views.count(spec.name) || x.id < 0 || !remat_.count(x.id) || &out != top_ ||
        r.id < 0 || out.empty()) {
      return;
    }
    Remat v;
    v.deps.push_back(x.id);
    v.stmts.push_back(renamed(out.back(), {{names_[x.id], names_[x.id] + "_rm"},
                                           {names_[r.id], names_[r.id] + "_rm"}}));
    remat_[r.id] = std::move(v);
  }

  // A copy of `a` with the identifiers in `renames` renamed.
  static AstPtr renamed(const AstPtr& a, const std::map<std::string, std::string>& renames) {
    if (a->kind == Ast::Kind::identifier) {
      auto it = renames.find(a->name);
      if (it == renames.end()) return a;
      auto c = std::make_shared<Ast>(*a);
      c->name = it->second;
      return c;
    }
    if (a->kind != Ast::Kind::call && a->kind != Ast::Kind::list) return a;
    auto c = std::make_shared<Ast>(*a);
    if (c->callee) c->callee = renamed(c->callee, renames);
    for (auto& arg : c->args) arg.value = renamed(arg.value, renames);
    return c;
  }

  // The backward statements stmts[from:] reading rematerialised values read
  // their recomputations instead. Blocks are dataflow (a statement whose
  // inputs are ready runs at once), so a recomputation's inputs are held
  // back with after(input, token) until the backward pass gets near it: the
  // value of a remat(f) call (a root) is recomputed from the point where the
  // backward pass first needs the root needed before it (a one-value
  // prefetch; the first root: where it is first needed), the token being the
  // cotangents that statement reads; views of a root are made just before
  // the first statement that reads them. Where a statement reads only the
  // shape of a rematerialised value (shape(x) in reshape's rule), it reads
  // its template instead.
  std::vector<AstPtr> rematerialise(std::vector<AstPtr> stmts, size_t from) {
    if (remat_.empty()) return stmts;
    std::map<std::string, int> by_name;
    std::map<std::string, std::string> renames;
    for (const auto& [id, r] : remat_) {
      by_name[names_[id]] = id;
      renames[names_[id]] = names_[id] + "_rm";
    }
    for (size_t i = from; i < stmts.size(); ++i) {
      stmts[i] = shapes_from_templates(stmts[i], by_name);
    }
    auto root_of = [&](int id) {
      while (!remat_.at(id).deps.empty()) id = remat_.at(id).deps.front();
      return id;
    };
    // Where each root is first needed, and the roots in that order.
    std::map<int, size_t> first_need;
    std::vector<std::set<std::string>> read(stmts.size());
    for (size_t i = from; i < stmts.size(); ++i) {
      collect_names(stmts[i], read[i]);
      for (const auto& n : read[i]) {
        if (auto it = by_name.find(n); it != by_name.end()) {
          first_need.emplace(root_of(it->second), i);
        }
      }
    }
    std::vector<std::pair<size_t, int>> order;
    for (const auto& [root, i] : first_need) order.emplace_back(i, root);
    std::sort(order.begin(), order.end());
    std::map<size_t, std::vector<int>> issue_at;  // statement -> roots recomputed before it
    for (size_t k = 0; k < order.size(); ++k) {
      issue_at[k == 0 ? order[0].first : order[k - 1].first].push_back(order[k].second);
    }
    std::vector<AstPtr> out(stmts.begin(), stmts.begin() + static_cast<long>(from));
    std::set<int> made;
    std::function<void(int)> make = [&](int id) {
      if (!made.insert(id).second) return;
      const Remat& r = remat_.at(id);
      for (int d : r.deps) make(d);
      for (const auto& st : r.stmts) out.push_back(st);
    };
    for (size_t i = from; i < stmts.size(); ++i) {
      if (auto it = issue_at.find(i); it != issue_at.end()) {
        std::vector<AstPtr> token;
        for (const auto& n : read[i]) {
          if (n.rfind("__ct_", 0) == 0) token.push_back(ident(n, stmts[i]->loc));
        }
        for (int root : it->second) {
          made.insert(root);
          for (const auto& st : held_back(remat_.at(root).stmts, token, stmts[i]->loc)) {
            out.push_back(st);
          }
        }
      }
      bool reads = false;
      for (const auto& n : read[i]) {
        if (auto it = by_name.find(n); it != by_name.end()) {
          make(it->second);
          reads = true;
        }
      }
      out.push_back(reads ? renamed(stmts[i], renames) : stmts[i]);
    }
    return out;
  }

  // `stmts` with their reads of intermediates they do not define made
  // after(name, list(token...)).
  static std::vector<AstPtr> held_back(const std::vector<AstPtr>& stmts,
                                       const std::vector<AstPtr>& token, const SourceLoc& loc) {
    if (token.empty()) return stmts;
    std::set<std::string> defined, names;
    for (const auto& st : stmts) {
      collect_defined(st, defined);
      collect_names(st, names);
    }
    std::map<std::string, AstPtr> wrap;
    AstPtr t = token.size() == 1 ? token[0] : call("list", token, loc);
    for (const auto& n : names) {
      if (!defined.count(n) && n.rfind("__ad_", 0) == 0) {
        wrap[n] = call("after", {ident(n, loc), t}, loc);
      }
    }
    std::vector<AstPtr> out;
    for (const auto& st : stmts) out.push_back(wrapped(st, wrap));
    return out;
  }

  // A copy of `a` with the identifiers in `wrap` replaced by their expressions
  // (the target of a define left alone).
  static AstPtr wrapped(const AstPtr& a, const std::map<std::string, AstPtr>& wrap) {
    if (a->kind == Ast::Kind::identifier) {
      auto it = wrap.find(a->name);
      return it == wrap.end() ? a : it->second;
    }
    if (a->kind != Ast::Kind::call && a->kind != Ast::Kind::list) return a;
    auto c = std::make_shared<Ast>(*a);
    if (c->callee) c->callee = wrapped(c->callee, wrap);
    const bool is_define = c->kind == Ast::Kind::call && !c->callee &&
                           (c->name == "define" || c->name == "store");
    for (size_t k = 0; k < c->args.size(); ++k) {
      if (is_define && k == 0) continue;
      c->args[k].value = wrapped(c->args[k].value, wrap);
    }
    return c;
  }

  // `a` with shape(x) of a rematerialised intermediate x of the top level
  // read from x's template.
  AstPtr shapes_from_templates(const AstPtr& a, const std::map<std::string, int>& by_name) {
    if (a->kind == Ast::Kind::call && !a->callee && a->name == "shape" && a->args.size() == 1 &&
        a->args[0].value->kind == Ast::Kind::identifier) {
      auto it = by_name.find(a->args[0].value->name);
      if (it != by_name.end() && top_level_.count(it->second)) {
        templated_.insert(it->second);
        auto c = std::make_shared<Ast>(*a);
        c->args[0].value = ident(tg(it->second), a->loc);
        return c;
      }
      return a;
    }
    if (a->kind != Ast::Kind::call && a->kind != Ast::Kind::list) return a;
    auto c = std::make_shared<Ast>(*a);
    if (c->callee) c->callee = shapes_from_templates(c->callee, by_name);
    for (auto& arg : c->args) arg.value = shapes_from_templates(arg.value, by_name);
    return c;
  }

  // Binds `value` to a new variable and returns it as an operand.
  Operand bind(AstPtr value, bool active, std::vector<AstPtr>& out, const std::string& hint) {
    int id = new_ref(active, hint);
    SourceLoc loc = value->loc;
    if (active && &out == top_) top_level_.insert(id);
    out.push_back(define(names_[id], std::move(value), loc));
    return Operand{ident(names_[id], loc), id};
  }

  Operand transform(const AstPtr& a, Context& ctx, std::vector<AstPtr>& out,
                    std::vector<Step>& steps) {
    if (++expressions_ > kMaxGradientExpressions) {
      fail(a->loc, error_message("differentiating '", root_, "' expands more than ",
                                 kMaxGradientExpressions, " expressions (in '",
                                 inline_stack_.empty() ? root_ : inline_stack_.back(),
                                 "'): the calls of functions defined with define are expanded in "
                                 "the gradient, and these call each other too many times"));
    }
    switch (a->kind) {
      case Ast::Kind::literal:
        return Operand{a, -1};
      case Ast::Kind::identifier: {
        auto it = ctx.env.find(a->name);
        if (it != ctx.env.end()) return it->second;
        if (ctx.functions.count(a->name)) {
          fail(a->loc, "cannot differentiate through the function value '" + a->name +
                           "': call it instead");
        }
        return Operand{a, -1};  // a variable of an enclosing scope: a constant here
      }
      case Ast::Kind::list: {
        auto copy = std::make_shared<Ast>(*a);
        bool active = false;
        for (auto& e : copy->args) {
          Operand op = transform(e.value, ctx, out, steps);
          active = active || is_active(op);
          e.value = op.ast;
        }
        if (active && !aux_mode_) fail(a->loc, "cannot differentiate through a list literal [...]");
        return Operand{copy, -1};
      }
      case Ast::Kind::call:
        break;
    }
    if (a->callee) {
      if (is_gradient_form(a->callee) && !shadowed(a->callee->name, ctx)) {
        // grad(f)(args...) inside the differentiated function: the gradient
        // function's source, differentiated in turn (a second-order gradient).
        Context defining;
        FunctionSource g = nested_gradient(a->callee, ctx, defining);
        return inline_call(g, a, ctx, defining, out, steps);
      }
      if (const AstPtr& fn = special_function(a->callee, ctx, "checkpoint")) {
        return checkpointed(fn, a, ctx, out, steps);
      }
      if (const AstPtr& fn = special_function(a->callee, ctx, "remat")) {
        return rematerialised(fn, a, ctx, out, steps);
      }
      fail(a->loc, "cannot differentiate a call of a computed function");
    }
    const std::string& n = a->name;
    if (ctx.env.count(n)) {
      fail(a->loc, "cannot differentiate a call of the function value '" + n + "'");
    }
    if (unsupported_forms().count(n)) {
      fail(a->loc, "cannot differentiate through " + n +
                       "(...): gradients support straight-line "
                       "code, define, store, block, if and function calls");
    }
    if (n == "define" || n == "store") return assignment(a, ctx, out, steps);
    if (n == "block") {
      Operand last{literal(Value(), a->loc), -1};
      for (const auto& e : a->args) last = transform(e.value, ctx, out, steps);
      return last;
    }
    if (n == "if")
      return conditional(a->args[0].value, a->args[1].value,
                         a->args.size() > 2 ? a->args[2].value : nullptr, a->loc, ctx, out, steps);
    if (n == "__and__") {
      return conditional(a->args[0].value, a->args[1].value, literal(Value(false), a->loc), a->loc,
                         ctx, out, steps);
    }
    if (n == "__or__") {
      return conditional(a->args[0].value, literal(Value(true), a->loc), a->args[1].value, a->loc,
                         ctx, out, steps);
    }
    if (n == "list" || n == "tuple") {
      // A list of values (concatenate([a, b]), stack((a, b))): its cotangent
      // is a list of the items' cotangents, handed to each active item.
      std::vector<AstPtr> items;
      std::vector<Operand> ops;
      bool active = false;
      for (const auto& e : a->args) {
        Operand op = transform(e.value, ctx, out, steps);
        active = active || is_active(op);
        items.push_back(op.ast);
        ops.push_back(op);
      }
      active = active && !aux_mode_;
      Operand r = bind(call(n, std::move(items), a->loc), active, out, n);
      if (active) {
        Step s;
        s.kind = Step::Kind::list;
        s.loc = a->loc;
        s.args = std::move(ops);
        s.out = r.id;
        steps.push_back(std::move(s));
      }
      return r;
    }
    // As the compiler resolves calls: a function the program defines (here,
    // then around) before a primitive of that name, except for the
    // syntax's own calls (operators: Ast::builtin).
    if (!a->builtin) {
      if (auto it = ctx.functions.find(n); it != ctx.functions.end()) {
        return inline_call(it->second, a, ctx, ctx, out, steps);
      }
      if (auto src = lookup_(n)) {
        Context outer;
        return inline_call(*src, a, ctx, outer, out, steps);
      }
    }
    if (const PrimitiveSpec* spec = find_primitive(n)) return primitive(*spec, a, ctx, out, steps);
    fail(a->loc, "unknown function '" + n + "'");
  }

  Operand assignment(const AstPtr& a, Context& ctx, std::vector<AstPtr>& out,
                     std::vector<Step>& steps) {
    const std::string& n = a->name;
    if (a->args.size() < 2 || a->args[0].value->kind != Ast::Kind::identifier) {
      fail(a->loc, "malformed " + n + "(...)");
    }
    const std::string& target = a->args[0].value->name;
    if (a->args.size() > 2) {
      // A local function: recorded for inlining where it is called.
      std::vector<AstArg> params(a->args.begin() + 1, a->args.end() - 1);
      ctx.functions[target] = FunctionSource{target, params, a->args.back().value, a->loc};
      return Operand{literal(Value(), a->loc), -1};
    }
    if (n == "define" && is_gradient_form(a->args[1].value) &&
        !shadowed(a->args[1].value->name, ctx)) {
      // define(df, grad(f)): df is a local function, the gradient's source,
      // inlined (and differentiated) where it is called.
      Context defining;
      FunctionSource g = nested_gradient(a->args[1].value, ctx, defining);
      ctx.functions[target] = g;
      return Operand{literal(Value(), a->loc), -1};
    }
    if (n == "store" && !ctx.env.count(target)) {
      fail(a->loc, "cannot differentiate store(" + target +
                       ", ...) to a variable outside the differentiated function");
    }
    Operand v = transform(a->args[1].value, ctx, out, steps);
    ctx.env[target] = v;
    return v;
  }

  Operand conditional(const AstPtr& cond, const AstPtr& then_ast, const AstPtr& else_ast,
                      const SourceLoc& loc, Context& ctx, std::vector<AstPtr>& out,
                      std::vector<Step>& steps) {
    Operand c = transform(cond, ctx, out, steps);
    Step step;
    step.kind = Step::Kind::cond;
    step.loc = loc;
    step.cond = c.ast;
    Context then_ctx = ctx, else_ctx = ctx;
    std::vector<AstPtr> then_out, else_out;
    Operand tv = transform(then_ast, then_ctx, then_out, step.then_steps);
    Operand ev = else_ast ? transform(else_ast, else_ctx, else_out, step.else_steps)
                          : Operand{literal(Value(), loc), -1};
    // Variables (re)defined in either branch are carried out of the if.
    std::vector<std::string> changed;
    auto differs = [&](const Context& branch, const std::string& name) {
      auto before = ctx.env.find(name);
      auto after = branch.env.find(name);
      if (after == branch.env.end()) return false;
      return before == ctx.env.end() || before->second.ast != after->second.ast;
    };
    std::set<std::string> names;
    for (const auto& [k, v] : then_ctx.env) names.insert(k);
    for (const auto& [k, v] : else_ctx.env) names.insert(k);
    for (const auto& k : names) {
      if (differs(then_ctx, k) || differs(else_ctx, k)) changed.push_back(k);
    }
    auto source = [&](const Context& branch, const std::string& name) -> Operand {
      if (auto it = branch.env.find(name); it != branch.env.end()) return it->second;
      return Operand{literal(Value(), loc), -1};
    };
    std::vector<AstPtr> then_vals{tv.ast}, else_vals{ev.ast};
    std::vector<std::pair<Operand, Operand>> sources{{tv, ev}};
    for (const auto& k : changed) {
      Operand ts = source(then_ctx, k), es = source(else_ctx, k);
      then_vals.push_back(ts.ast);
      else_vals.push_back(es.ast);
      sources.emplace_back(ts, es);
    }
    then_out.push_back(call("list", then_vals, loc));
    else_out.push_back(call("list", else_vals, loc));
    Operand joined = bind(call("if", {c.ast, block(then_out, loc), block(else_out, loc)}, loc),
                          false, out, "if");
    std::vector<Operand> results;
    for (size_t k = 0; k < sources.size(); ++k) {
      bool active = is_active(sources[k].first) || is_active(sources[k].second);
      Operand r =
          bind(call("getitem", {joined.ast, literal(Value(static_cast<int64_t>(k)), loc)}, loc),
               active, out, "ifv");
      step.merges.push_back({sources[k].first, sources[k].second, r.id});
      results.push_back(r);
    }
    for (size_t k = 0; k < changed.size(); ++k) ctx.env[changed[k]] = results[k + 1];
    for (auto& [k, v] : then_ctx.functions) ctx.functions.insert({k, v});
    for (auto& [k, v] : else_ctx.functions) ctx.functions.insert({k, v});
    steps.push_back(std::move(step));
    return results[0];
  }

  Operand inline_call(const FunctionSource& f, const AstPtr& a, Context& caller,
                      const Context& defining, std::vector<AstPtr>& out, std::vector<Step>& steps) {
    if (std::find(inline_stack_.begin(), inline_stack_.end(), f.name) != inline_stack_.end()) {
      fail(a->loc, "cannot differentiate the recursive function '" + f.name + "'");
    }
    std::vector<Operand> positional;
    std::map<std::string, Operand> named;
    transform_args(a, caller, out, steps, positional, named);
    return inline_body(f, a, positional, named, defining, out, steps);
  }

  // A call's arguments, evaluated in `ctx` in order: the positional ones and
  // the named ones.
  void transform_args(const AstPtr& a, Context& ctx, std::vector<AstPtr>& out,
                      std::vector<Step>& steps, std::vector<Operand>& positional,
                      std::map<std::string, Operand>& named) {
    for (const auto& arg : a->args) {
      Operand op = transform(arg.value, ctx, out, steps);
      if (arg.name.empty()) {
        positional.push_back(op);
      } else {
        named[arg.name] = op;
      }
    }
  }

  // f's body with its parameters bound to evaluated arguments.
  Operand inline_body(const FunctionSource& f, const AstPtr& a,
                      const std::vector<Operand>& positional,
                      const std::map<std::string, Operand>& named, const Context& defining,
                      std::vector<AstPtr>& out, std::vector<Step>& steps) {
    // A local function sees the caller's variables (it closes over them).
    Context callee;
    callee.env = defining.env;
    callee.functions = defining.functions;
    if (positional.size() > f.params.size()) {
      fail(a->loc, error_message("'", f.name, "' takes ", f.params.size(), " arguments but ",
                                 positional.size(), " were given"));
    }
    for (size_t i = 0; i < f.params.size(); ++i) {
      const AstArg& p = f.params[i];
      std::string pname = p.name.empty() ? p.value->name : p.name;
      if (i < positional.size()) {
        callee.env[pname] = positional[i];
      } else if (auto it = named.find(pname); it != named.end()) {
        callee.env[pname] = it->second;
      } else if (!p.name.empty()) {
        callee.env[pname] = transform(p.value, callee, out, steps);
      } else {
        fail(a->loc, "missing argument '" + pname + "' of '" + f.name + "'");
      }
    }
    inline_stack_.push_back(f.name);
    Operand r = transform(f.body, callee, out, steps);
    inline_stack_.pop_back();
    return r;
  }

  Operand primitive(const PrimitiveSpec& spec, const AstPtr& a, Context& ctx,
                    std::vector<AstPtr>& out, std::vector<Step>& steps) {
    std::vector<std::string> arg_names;
    for (const auto& arg : a->args) arg_names.push_back(arg.name);
    std::vector<int> slots;
    try {
      slots = bind_arguments(spec, arg_names);
    } catch (...) {
      rethrow_with_location(std::current_exception(), a->loc);
    }
    if (checkpoint_depth_ > 0 &&
        (has_effects(spec) || spec.name == "pipe_send" || spec.name == "pipe_recv")) {
      // Run twice (forward, then recomputed for the backward), its effect
      // would happen twice; a random draw keyed by a seed is the same twice.
      bool keyed = false;
      if (spec.family == "random") {
        for (size_t i = 0; i < a->args.size(); ++i) {
          const AstPtr& v = a->args[i].value;
          if (spec.params[slots[i]].name == "seed" &&
              !(v->kind == Ast::Kind::literal && v->value.is_nil())) {
            keyed = true;
          }
        }
      }
      if (!keyed) {
        const auto& [form, fname] = checkpoint_names_.back();
        const bool ck = form == "checkpoint";
        fail(a->loc, "'" + spec.name + "' inside the " +
                         (ck ? "checkpointed" : "rematerialised") + " function '" + fname +
                         "' would run again when its " + (ck ? "forward" : "value") +
                         " is recomputed for the backward" +
                         (spec.family == "random"
                              ? " and draw different numbers: give it a seed= (as dropout's) or "
                                "call it outside " + form
                              : ": call it outside " + form));
      }
    }
    auto emitted = std::make_shared<Ast>(*a);
    std::vector<Operand> per_param(spec.params.size());
    std::vector<AstPtr> variadic_items;
    std::vector<Operand> variadic_ops;
    bool any_active = false, variadic_active = false;
    for (size_t i = 0; i < a->args.size(); ++i) {
      Operand op = transform(a->args[i].value, ctx, out, steps);
      emitted->args[i].value = op.ast;
      bool variadic = spec.variadic && static_cast<size_t>(slots[i]) + 1 == spec.params.size() &&
                      a->args[i].name.empty();
      if (variadic) {
        variadic_items.push_back(op.ast);
        variadic_ops.push_back(op);
        variadic_active = variadic_active || is_active(op);
      } else {
        per_param[slots[i]] = op;
      }
      any_active = any_active || is_active(op);
    }
    for (size_t k = 0; k < spec.params.size(); ++k) {
      if (per_param[k].ast) continue;
      if (spec.variadic && k + 1 == spec.params.size()) {
        per_param[k] = Operand{call("list", variadic_items, a->loc), -1};
      } else if (spec.params[k].default_value) {
        per_param[k] = Operand{literal(*spec.params[k].default_value, a->loc), -1};
      }
    }
    if (spec.name == "getitem") {
      // The indices are the variadic arguments: the rule is built here.
      if (variadic_active) fail(a->loc, "cannot differentiate with respect to an index");
      bool active = is_active(per_param[0]);
      Operand r = bind(emitted, active, out, "t");
      remat_view(spec, per_param[0], r, out);
      if (active) {
        Step s;
        s.kind = Step::Kind::getitem;
        s.loc = a->loc;
        s.args.push_back(per_param[0]);
        for (auto& idx : variadic_items) s.args.push_back(Operand{idx, -1});
        s.out = r.id;
        steps.push_back(std::move(s));
      }
      return r;
    }
    if (spec.name == "getitem_grad") {
      // index_add(zeros_like(x), g, indices...) is linear in g, its adjoint
      // getitem(adjoint, indices...); x gives only its shape.
      if (variadic_active) fail(a->loc, "cannot differentiate with respect to an index");
      bool active = is_active(per_param[0]) && !aux_mode_;
      Operand r = bind(emitted, active, out, "t");
      if (active) {
        Step s;
        s.kind = Step::Kind::getitem_grad;
        s.loc = a->loc;
        s.args.push_back(per_param[0]);
        for (auto& idx : variadic_items) s.args.push_back(Operand{idx, -1});
        s.out = r.id;
        steps.push_back(std::move(s));
      }
      return r;
    }
    bool active = false;
    if (any_active && !aux_mode_ && spec.grads.empty()) {
      if (const AstPtr expansion = parsed_expansion(spec)) {
        // A fused backward's own expression, differentiated in its place
        // (its calls are primitives', its names the parameters': renamed, so
        // that batch_norm_grad's `mean` does not hide the primitive mean).
        Context params;
        std::map<std::string, AstPtr> renamed;
        for (size_t k = 0; k < spec.params.size(); ++k) {
          if (!per_param[k].ast) continue;
          const std::string name = "__adx_" + spec.params[k].name;
          renamed[spec.params[k].name] = ident(name, a->loc);
          params.env[name] = per_param[k];
        }
        return transform(substitute(expansion, renamed, a->loc), params, out, steps);
      }
    }
    if (any_active && !aux_mode_) {
      if (spec.grads.empty() && ad_is_backward(spec)) {
        fail(a->loc, "second-order gradient of '" + spec.name +
                         "' is not supported yet (a gradient inside a differentiated function "
                         "reaches this backward primitive, which has no gradient rule)");
      }
      if (spec.grads.empty()) {
        // Primitives that call a function (replay, replicate): their
        // gradient program would call it once, unprotected; the gradient
        // function itself can be replayed instead.
        std::string hint =
            spec.calls_functions
                ? " (differentiate the function it calls, and " + spec.name +
                      " the gradient: " + spec.name + "(n, grad(f), x))"
                : "";
        fail(a->loc, "'" + spec.name +
                         "' has no gradient rule, and its argument depends on a "
                         "differentiated parameter" +
                         hint);
      }
      if (variadic_active) {
        // The variadic arguments as one list value (einsum's operands): the
        // rule gives a list of cotangents, which a list step hands to each.
        const size_t k = spec.params.size() - 1;
        if (spec.grads[k].empty()) {
          fail(a->loc,
               "cannot differentiate '" + spec.name + "' with respect to its variadic arguments");
        }
        Operand lst = bind(call("list", variadic_items, a->loc), true, out, "v");
        Step ls;
        ls.kind = Step::Kind::list;
        ls.loc = a->loc;
        ls.args = variadic_ops;
        ls.out = lst.id;
        steps.push_back(std::move(ls));
        per_param[k] = lst;
      }
      for (size_t k = 0; k < spec.params.size(); ++k) {
        if (is_active(per_param[k]) && !spec.grads[k].empty()) active = true;
      }
    }
    Operand r = bind(emitted, active, out, "t");
    if (!spec.params.empty()) remat_view(spec, per_param[0], r, out);
    if (active) {
      Step s;
      s.kind = Step::Kind::primitive;
      s.loc = a->loc;
      s.spec = &spec;
      s.args = per_param;
      s.out = r.id;
      steps.push_back(std::move(s));
    }
    return r;
  }

  // Adds `contribution` to the cotangent of `target` (summed back to its shape).
  // unbroadcast needs only the target's shape and dtype: for an intermediate
  // of the top level it gets the target's template (see with_templates), so
  // that the value itself is freed once nothing else reads it.
  AstPtr accumulate(const Operand& target, AstPtr contribution, const SourceLoc& loc) {
    AstPtr like = target.ast;
    if (target.id >= 0 && top_level_.count(target.id)) {
      templated_.insert(target.id);
      like = ident(tg(target.id), loc);
    }
    AstPtr made = define(ct(target.id),
                         call("grad_accumulate",
                              {ident(ct(target.id), loc),
                               call("unbroadcast", {contribution, std::move(like)}, loc)},
                              loc),
                         loc);
    // The node is this function's own: fused_common may rebind it.
    contributions_[target.id].push_back(
        {std::const_pointer_cast<Ast>(made), std::move(contribution)});
    return made;
  }

  // The shared expression fused with the backward of the primitive that
  // produced the cotangent of step `out` (PrimitiveSpec::grad_fusion_producer),
  // or null. When the cotangent is exactly one call of the producer with its
  // arguments in order, that cotangent's definition is rewritten to
  // list(the producer's arguments), which the fused expression reads as g.
  AstPtr fused_common(const PrimitiveSpec& spec, int out) {
    const AstPtr& rule = parsed_fusion_common(spec);
    if (!rule) return nullptr;
    auto it = contributions_.find(out);
    if (it == contributions_.end() || it->second.size() != 1) return nullptr;
    Contribution& c = it->second.front();
    const PrimitiveSpec* producer = find_primitive(spec.grad_fusion_producer);
    if (!c.define || !c.value || !producer || c.value->kind != Ast::Kind::call ||
        c.value->callee || c.value->name != producer->name ||
        c.value->args.size() != producer->params.size()) {
      return nullptr;
    }
    std::vector<AstPtr> items;
    for (const AstArg& arg : c.value->args) {
      if (!arg.name.empty()) return nullptr;
      items.push_back(arg.value);
    }
    c.define->args[1].value = call("list", std::move(items), c.value->loc);
    c.define = nullptr;  // rewritten once
    return rule;
  }

  std::string tg(int id) const { return "__tg_" + std::to_string(id); }

  // Puts define(__tg_<id>, grad_template(__ad_..._<id>)) right after the
  // definition of every intermediate whose template the backward pass reads.
  std::vector<AstPtr> with_templates(std::vector<AstPtr> stmts, const SourceLoc& loc) {
    std::map<std::string, int> wanted;
    for (int id : templated_) wanted[names_[id]] = id;
    std::vector<AstPtr> out;
    for (auto& st : stmts) {
      int id = -1;
      if (st->kind == Ast::Kind::call && !st->callee && st->name == "define" &&
          st->args.size() == 2 && st->args[0].value->kind == Ast::Kind::identifier) {
        if (auto it = wanted.find(st->args[0].value->name); it != wanted.end()) id = it->second;
      }
      out.push_back(std::move(st));
      if (id >= 0) {
        out.push_back(
            define(tg(id), call("grad_template", {ident(names_[id], loc)}, loc), loc));
      }
    }
    return out;
  }

  void emit_backward(const std::vector<Step>& steps, std::vector<AstPtr>& out) {
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      const Step& s = *it;
      const SourceLoc& loc = s.loc;
      if (s.kind == Step::Kind::cond) {
        std::vector<AstPtr> then_out, else_out;
        for (const auto& m : s.merges) {
          if (is_active(m.then_src)) then_out.push_back(flow(m.then_src, m.out, loc));
          if (is_active(m.else_src)) else_out.push_back(flow(m.else_src, m.out, loc));
        }
        emit_backward(s.then_steps, then_out);
        emit_backward(s.else_steps, else_out);
        out.push_back(call("if", {s.cond, block(then_out, loc), block(else_out, loc)}, loc));
        continue;
      }
      AstPtr g = ident(ct(s.out), loc);
      std::vector<AstPtr> body;
      if (s.kind == Step::Kind::checkpoint) {
        body = s.recompute;
        const Operand& v = s.args[0];
        contributions_[v.id].push_back({nullptr, nullptr});  // not a producer's call
        body.push_back(
            define(ct(v.id), call("grad_accumulate", {ident(ct(v.id), loc), g}, loc), loc));
        emit_backward(s.then_steps, body);
        // The recomputed values and their cotangents live only in this block.
        std::set<std::string> own;
        for (int id = s.first_local; id < s.end_local; ++id) {
          own.insert(names_[id]);
          own.insert(ct(id));
          own.insert("__adc_" + std::to_string(id));
        }
        body.push_back(literal(Value(), loc));  // released names are all before the end
        body = release_dead(std::move(body), loc, &own);
      } else if (s.kind == Step::Kind::list) {
        // Item i's cotangent is element i of the list's (nil: none reached it).
        for (size_t i = 0; i < s.args.size(); ++i) {
          if (!is_active(s.args[i])) continue;
          AstPtr gi = call("getitem", {g, literal(Value(static_cast<int64_t>(i)), loc)}, loc);
          body.push_back(accumulate(s.args[i], gi, loc));
        }
      } else if (s.kind == Step::Kind::getitem_grad) {
        std::vector<AstPtr> args{g};
        for (size_t i = 1; i < s.args.size(); ++i) args.push_back(s.args[i].ast);
        body.push_back(accumulate(s.args[0], call("getitem", std::move(args), loc), loc));
      } else if (s.kind == Step::Kind::getitem) {
        // Of a rematerialised array, its template (its shape and dtype): the
        // value itself is not made again for this.
        AstPtr target = s.args[0].ast;
        if (remat_.count(s.args[0].id) && top_level_.count(s.args[0].id)) {
          templated_.insert(s.args[0].id);
          target = ident(tg(s.args[0].id), loc);
        }
        std::vector<AstPtr> args{g, target};
        for (size_t i = 1; i < s.args.size(); ++i) args.push_back(s.args[i].ast);
        // An array's: index_add, so repeated indices (x[[0, 0]]) add their
        // cotangents up; a list's (split's result, a list of differentiated
        // values): a list with g at the index, nil elsewhere.
        body.push_back(accumulate(s.args[0], call("getitem_grad", std::move(args), loc), loc));
      } else {
        const auto& rules = parsed_rules(*s.spec);
        // A gradient bucket member (grad_bucket) always contributes, zeros
        // when no cotangent reached it, or its bucket would wait forever; and
        // its statements stand alone, not inside the if below, so that its
        // bucket's all-reduce, while in flight, leaves the backward pass going
        // (a pending define does not hold up its block; an if would).
        // ZeRO-2's grad_bucket_shard is one too (its weight is argument 1).
        const bool sharded = s.spec->name == "grad_bucket_shard";
        const bool bucket = s.spec->name == "grad_bucket" || sharded;
        if (bucket) {
          g = call("if",
                   {call("is_nil", {g}, loc),
                    call("zeros_like", {s.args[sharded ? 1 : 0].ast}, loc), g},
                   loc);
        }
        // `adjoint` and `result` name g and out where a parameter shadows them
        // (the rules of backward primitives, whose own first parameter is g).
        std::map<std::string, AstPtr> bindings{{"g", g},
                                               {"out", ident(names_[s.out], loc)},
                                               {"adjoint", g},
                                               {"result", ident(names_[s.out], loc)}};
        for (size_t k = 0; k < s.spec->params.size(); ++k) {
          bindings[s.spec->params[k].name] = s.args[k].ast;
        }
        if (const AstPtr& common = rules.back()) {
          int users = 0;
          for (size_t k = 0; k < s.args.size(); ++k) {
            users += is_active(s.args[k]) && rules[k] && names_identifier(rules[k], "common");
          }
          if (users >= std::max(s.spec->grad_common_users, 1)) {
            const std::string name = "__adc_" + std::to_string(s.out);
            const AstPtr fused = fused_common(*s.spec, s.out);
            body.push_back(define(name, substitute(fused ? fused : common, bindings, loc), loc));
            bindings["common"] = ident(name, loc);
          } else {
            bindings["common"] = literal(Value(), loc);
          }
        }
        // The gradient of a gather (ZeRO's all_gather, grad_scatter) is a
        // reduce-scatter: its statements stand alone too, each rule guarded
        // by its own if inside the define, so that the collective stays in
        // flight while the backward pass goes on (an if statement around
        // them would wait for it).
        const bool gather = s.spec->name == "all_gather" || s.spec->name == "grad_scatter";
        for (size_t k = 0; k < s.args.size(); ++k) {
          if (!is_active(s.args[k]) || !rules[k]) continue;
          AstPtr rule = substitute(rules[k], bindings, loc);
          if (gather) {
            rule = call("if", {call("is_nil", {g}, loc), literal(Value(), loc), rule}, loc);
          }
          body.push_back(accumulate(s.args[k], std::move(rule), loc));
        }
        if (bucket || (gather && !rules.back())) {
          for (auto& b : body) out.push_back(std::move(b));
          continue;
        }
      }
      // No cotangent reached this step (it fed only a branch not taken).
      out.push_back(
          call("if", {call("is_nil", {g}, loc), literal(Value(), loc), block(body, loc)}, loc));
    }
  }

  // The cotangent of an if's output flows to the branch value it came from.
  AstPtr flow(const Operand& src, int merged, const SourceLoc& loc) {
    contributions_[src.id].push_back({nullptr, nullptr});  // not a producer's call
    return define(ct(src.id),
                  call("grad_accumulate", {ident(ct(src.id), loc), ident(ct(merged), loc)}, loc),
                  loc);
  }

  // Frees every intermediate (forward value or cotangent) right after the
  // last statement that reads it, so activations live only as long as the
  // backward pass needs them. The last statement is the result.
  // With `only`, just those names.
  static std::vector<AstPtr> release_dead(std::vector<AstPtr> stmts, const SourceLoc& loc,
                                          const std::set<std::string>* only = nullptr) {
    std::map<std::string, size_t> last_use;
    for (size_t i = 0; i < stmts.size(); ++i) {
      std::set<std::string> names;
      collect_names(stmts[i], names);
      for (const auto& n : names) {
        if (only && !only->count(n)) continue;
        if (n.rfind("__ad_", 0) == 0 || n.rfind("__ct_", 0) == 0 || n.rfind("__tg_", 0) == 0 ||
            n.rfind("__adc_", 0) == 0 || n.rfind("__vjp_", 0) == 0) {
          last_use[n] = i;
        }
      }
    }
    std::vector<std::vector<std::string>> dead(stmts.size());
    for (const auto& [n, i] : last_use) {
      if (i + 1 < stmts.size()) dead[i].push_back(n);
    }
    std::vector<AstPtr> out;
    for (size_t i = 0; i < stmts.size(); ++i) {
      out.push_back(stmts[i]);
      for (const auto& n : dead[i]) out.push_back(define(n, literal(Value(), loc), loc));
    }
    return out;
  }

  static void collect_names(const AstPtr& a, std::set<std::string>& out) {
    if (a->kind == Ast::Kind::identifier) out.insert(a->name);
    if (a->callee) collect_names(a->callee, out);
    for (const auto& arg : a->args) collect_names(arg.value, out);
  }

  const FunctionLookup& lookup_;
  bool forward_only_ = false;  // a checkpointed call's forward: nothing is active
  int checkpoint_depth_ = 0;   // inside checkpointed functions
  // The checkpointed or rematerialised functions being inlined: (form, name).
  std::vector<std::pair<std::string, std::string>> checkpoint_names_;
  // A rematerialised value (by id): the statements recomputing it as
  // <name>_rm (reading the recomputations of `deps`, made first).
  struct Remat {
    std::vector<int> deps;
    std::vector<AstPtr> stmts;
  };
  std::map<int, Remat> remat_;
  bool aux_mode_ = false;  // transforming the aux value: lists of intermediates are fine
  std::vector<std::string> names_;
  std::vector<bool> active_;
  std::vector<std::string> inline_stack_;
  std::vector<AstPtr>* top_ = nullptr;  // the differentiated body's own statements
  std::set<int> top_level_;             // active intermediates defined there
  std::set<int> templated_;             // those whose template the backward pass reads
  // Every contribution to a cotangent so far (by step id): the define that
  // adds it (null for an if's merge) and the contribution itself.
  struct Contribution {
    std::shared_ptr<Ast> define;
    AstPtr value;
  };
  std::map<int, std::vector<Contribution>> contributions_;
  std::string root_;        // the function differentiated
  size_t expressions_ = 0;  // transformed so far (see kMaxGradientExpressions)
};

void collect_identifiers(const AstPtr& a, std::set<std::string>& out) {
  if (a->kind == Ast::Kind::identifier) out.insert(a->name);
  if (a->callee) collect_identifiers(a->callee, out);
  for (const auto& arg : a->args) collect_identifiers(arg.value, out);
}

void collect_called(const AstPtr& a, std::set<std::string>& out) {
  if (!a) return;
  if (a->kind == Ast::Kind::call && !a->callee) out.insert(a->name);
  if (a->callee) collect_called(a->callee, out);
  for (const auto& arg : a->args) collect_called(arg.value, out);
}

}  // namespace

AstPtr differentiate(const FunctionSource& f, const std::vector<int>& argnums, bool single,
                     bool with_value, const FunctionLookup& lookup, const SourceLoc& at,
                     bool has_aux) {
  Differentiator d(lookup);
  return d.run(f, argnums, single, with_value, at, has_aux);
}

AstPtr differentiate_split(const FunctionSource& f, const std::vector<int>& argnums, bool single,
                           const FunctionLookup& lookup, const SourceLoc& at, bool has_aux) {
  Differentiator d(lookup);
  return d.run(f, argnums, single, true, at, has_aux, true);
}

std::vector<std::string> check_gradient_rules() {
  std::vector<std::string> problems;
  for (const PrimitiveSpec* spec : all_primitives()) {
    if (spec->grads.empty()) continue;
    std::vector<AstPtr> rules;
    try {
      rules = parsed_rules(*spec);
    } catch (const std::exception& e) {
      problems.push_back(spec->name + ": " + e.what());
      continue;
    }
    std::set<std::string> allowed{"g", "out", "adjoint", "result", "true", "false", "nil"};
    for (const auto& p : spec->params) allowed.insert(p.name);
    if (!spec->grad_fusion_common.empty()) {
      try {
        std::set<std::string> names;
        collect_identifiers(parsed_fusion_common(*spec), names);
        for (const auto& n : names) {
          if (!allowed.count(n) && !find_primitive(n)) {
            problems.push_back(spec->name + ": fused gradient rule names unknown '" + n + "'");
          }
        }
      } catch (const std::exception& e) {
        problems.push_back(spec->name + " (fused rule): " + e.what());
      }
      if (!find_primitive(spec->grad_fusion_producer)) {
        problems.push_back(spec->name + ": grad_fusion_producer '" + spec->grad_fusion_producer +
                           "' is not a primitive");
      }
    }
    for (size_t i = 0; i < rules.size(); ++i) {
      const AstPtr& r = rules[i];
      if (!r) continue;
      std::set<std::string> names;
      collect_identifiers(r, names);
      // The rules (not the shared expression itself) may name `common`.
      if (i + 1 < rules.size() && !spec->grad_common.empty()) names.erase("common");
      for (const auto& n : names) {
        if (!allowed.count(n) && !find_primitive(n)) {
          problems.push_back(spec->name + ": gradient rule names unknown '" + n + "'");
        }
      }
    }
  }
  return problems;
}

std::vector<std::string> backward_primitives_without_rules() {
  // What the transformation emits itself, besides the rules' calls.
  std::set<std::string> called{"getitem_grad", "grad_accumulate", "unbroadcast", "grad_seed",
                               "vjp_seed", "grad_template", "zeros_like"};
  for (const PrimitiveSpec* spec : all_primitives()) {
    if (spec->grads.empty()) continue;
    for (const AstPtr& r : parsed_rules(*spec)) collect_called(r, called);
    collect_called(parsed_fusion_common(*spec), called);
  }
  std::vector<std::string> missing;
  for (const std::string& name : called) {
    const PrimitiveSpec* spec = find_primitive(name);
    if (spec && spec->grads.empty() && ad_is_backward(*spec) && !gradient_expansion(name) &&
        name != "getitem_grad") {  // getitem_grad's rule is the transformation's own
      missing.push_back(name);
    }
  }
  return missing;
}

}  // namespace tessera
