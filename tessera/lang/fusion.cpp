// Fused elementwise expressions in the execution tree (primitives/fused.hpp,
// docs/runtime.md "Fused expressions"): the compiler's rewrite of a nested
// elementwise call, and of an assignment of one, into a single call of a
// fused primitive on the expression's leaves, keeping the unfused tree.
#include <algorithm>

#include "tessera/lang/nodes.hpp"

namespace tessera {

namespace {

// At most this many operations in one fused expression: longer chains
// (a sum of thousands of terms) are fused in pieces of this size.
constexpr size_t kMaxFusedSteps = 32;

// Operands bound positionally to exactly the primitive's parameters.
bool positional(const PrimitiveSpec& spec, const std::vector<int>& slots) {
  if (spec.variadic || slots.size() != spec.params.size()) return false;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] != static_cast<int>(i)) return false;
  }
  return true;
}

// The family of a fused call whose value is its expression (make_fused_spec);
// a fused assignment or reduction also holds an expression, but its value is
// not that expression's.
constexpr const char* kFusedValueFamily = "arithmetic";

}  // namespace

NodePtr PrimitiveCallNode::fuse(const SourceLoc& loc, const PrimitiveSpec* spec,
                                const std::vector<NodePtr>& operands, const std::vector<int>& slots,
                                int same_site) {
  if (!fusion_enabled() || !fusable_spec(*spec) || !positional(*spec, slots)) return nullptr;
  // Each operand is a part: a fused call (its steps and leaves), an
  // elementwise call (one step over its operands) or a leaf.
  struct Part {
    std::vector<FusedExpr::Step> steps;
    std::vector<NodePtr> leaves;
    NodePtr unfused;
  };
  // The step of a call of `s` at `at`, on operands 0 and 1.
  auto step_of = [](const PrimitiveSpec* s, const SourceLoc& at) {
    FusedExpr::Step st;
    st.spec = s;
    st.binary = s->fuse_binary >= 0;
    if (st.binary) {
      st.bop = static_cast<BinaryOp>(s->fuse_binary);
    } else {
      st.uop = static_cast<UnaryOp>(s->fuse_unary);
    }
    st.a = 0;
    st.b = 1;
    st.loc = at;
    return st;
  };
  std::vector<Part> parts;
  size_t n_steps = 1, n_leaves = 0;
  bool any = false;
  for (const NodePtr& o : operands) {
    Part part;
    auto* p = dynamic_cast<const PrimitiveCallNode*>(o.get());
    if (p && p->fused_ && p->owned_spec_->family == kFusedValueFamily) {
      part.steps = p->fused_->steps;
      part.leaves = p->operands_;
      part.unfused = p->unfused_;
    } else if (p && fusable_spec(*p->spec_) && positional(*p->spec_, p->slots_)) {
      part.steps = {step_of(p->spec_, p->loc())};
      part.leaves = p->operands_;
      part.unfused = o;
    } else {
      part.leaves = {o};
      part.unfused = o;
    }
    any = any || !part.steps.empty();
    n_steps += part.steps.size();
    n_leaves += part.leaves.size();
    parts.push_back(std::move(part));
  }
  if (!any || n_steps > kMaxFusedSteps) return nullptr;
  for (const Part& part : parts) {
    for (const NodePtr& leaf : part.leaves) {
      if (!pure_value(leaf.get()) || may_write(leaf.get())) return nullptr;
    }
  }
  // Renumber: the leaves of all parts first (in operand order: the order
  // the unfused tree evaluates them), then the steps of all parts.
  auto expr = std::make_shared<FusedExpr>();
  expr->n_leaves = n_leaves;
  std::vector<NodePtr> leaves, unfused_operands;
  std::vector<int> value_of;  // per operand: the id of its value
  size_t leaf_base = 0, step_base = 0;
  for (const Part& part : parts) {
    const int nl = static_cast<int>(part.leaves.size());
    auto renumber = [&](int id) {
      return id < nl ? static_cast<int>(leaf_base) + id
                     : static_cast<int>(n_leaves + step_base) + (id - nl);
    };
    for (const FusedExpr::Step& st : part.steps) {
      FusedExpr::Step s = st;
      s.a = renumber(st.a);
      if (s.binary) s.b = renumber(st.b);
      expr->steps.push_back(std::move(s));
    }
    value_of.push_back(part.steps.empty()
                           ? static_cast<int>(leaf_base)
                           : static_cast<int>(n_leaves + step_base + part.steps.size() - 1));
    leaves.insert(leaves.end(), part.leaves.begin(), part.leaves.end());
    unfused_operands.push_back(part.unfused);
    leaf_base += part.leaves.size();
    step_base += part.steps.size();
  }
  // A single-step part numbers its operands 0 and 1 as leaves: renumber()
  // above mapped them; this call's own step reads the parts' values.
  FusedExpr::Step own = step_of(spec, loc);
  own.a = value_of.at(0);
  if (own.binary) own.b = value_of.at(1);
  expr->steps.push_back(std::move(own));

  std::shared_ptr<const PrimitiveSpec> fused_spec = make_fused_spec(expr);
  return fused_call(loc, std::move(fused_spec), std::move(expr), std::move(leaves), spec,
                    std::move(unfused_operands), slots, same_site);
}

NodePtr PrimitiveCallNode::fuse_in_place(const SourceLoc& loc, const PrimitiveSpec* spec,
                                         const std::vector<NodePtr>& operands,
                                         const std::vector<int>& slots, int same_site) {
  // x OP= value with value a fused expression or one elementwise call
  // (Gram-Schmidt's v -= dot(q, a) * q): x OP value as one expression.
  if (!fusion_enabled() || operands.size() != 2 || !positional(*spec, slots)) return nullptr;
  const PrimitiveSpec* base = fusable_in_place_base(*spec);
  auto* value = dynamic_cast<const PrimitiveCallNode*>(operands[1].get());
  if (!base || !value) return nullptr;
  auto expr = std::make_shared<FusedExpr>();
  if (value->fused_ && value->owned_spec_->family == kFusedValueFamily) {
    *expr = *value->fused_;
  } else if (fusable_spec(*value->spec_) && positional(*value->spec_, value->slots_)) {
    FusedExpr::Step st;
    st.spec = value->spec_;
    st.binary = value->spec_->fuse_binary >= 0;
    if (st.binary) {
      st.bop = static_cast<BinaryOp>(value->spec_->fuse_binary);
    } else {
      st.uop = static_cast<UnaryOp>(value->spec_->fuse_unary);
    }
    st.a = 0;
    st.b = 1;
    st.loc = value->loc();
    expr->steps.push_back(std::move(st));
    expr->n_leaves = value->operands_.size();
  } else {
    return nullptr;
  }
  if (expr->steps.size() + 1 > kMaxFusedSteps) return nullptr;
  // x is evaluated first, then the value's leaves: the unfused order.
  if (!pure_value(operands[0].get()) || may_write(operands[0].get())) return nullptr;
  for (const NodePtr& leaf : value->operands_) {
    if (!pure_value(leaf.get()) || may_write(leaf.get())) return nullptr;
  }
  // The whole expression: x is leaf 0, which moves every other id up by one.
  auto whole = std::make_shared<FusedExpr>();
  whole->n_leaves = expr->n_leaves + 1;
  for (FusedExpr::Step st : expr->steps) {
    st.a += 1;
    if (st.binary) st.b += 1;
    whole->steps.push_back(std::move(st));
  }
  FusedExpr::Step own;
  own.spec = base;
  own.binary = true;
  own.bop = static_cast<BinaryOp>(base->fuse_binary);
  own.a = 0;
  own.b = static_cast<int>(whole->n_leaves + whole->steps.size() - 1);
  own.loc = loc;
  whole->steps.push_back(std::move(own));

  std::shared_ptr<const PrimitiveSpec> fused_spec = make_fused_in_place_spec(whole, expr, *spec);
  std::vector<NodePtr> all{operands[0]};
  all.insert(all.end(), value->operands_.begin(), value->operands_.end());
  // fused_call's node, marked as the in-place one (eval sends a number x to
  // the unfused tree).
  std::vector<int> in_order(all.size());
  for (size_t i = 0; i < in_order.size(); ++i) in_order[i] = static_cast<int>(i);
  auto node = std::make_shared<PrimitiveCallNode>(loc, fused_spec.get(), std::move(all),
                                                  std::move(in_order), same_site);
  node->owned_spec_ = std::move(fused_spec);
  node->fused_ = std::move(whole);
  node->unfused_ = std::make_shared<PrimitiveCallNode>(loc, spec, operands, slots, same_site);
  node->fused_in_place_ = true;
  return node;
}

NodePtr PrimitiveCallNode::fuse_setitem(const SourceLoc& loc, const PrimitiveSpec* spec,
                                        const std::vector<NodePtr>& operands,
                                        const std::vector<int>& slots, int same_site) {
  // setitem(x, value, indices...) with the operands in order and a fused value.
  if (!fusion_enabled() || spec->name != "setitem" || operands.size() < 2) return nullptr;
  for (size_t i = 0; i < slots.size(); ++i) {
    if (slots[i] != static_cast<int>(std::min<size_t>(i, 2))) return nullptr;
  }
  auto* value = dynamic_cast<const PrimitiveCallNode*>(operands[1].get());
  if (!value || !value->fused_ || value->owned_spec_->family != kFusedValueFamily) return nullptr;
  // x and the indices are evaluated before the value's leaves here, after
  // them in setitem's order: only when none of them may write or has effects.
  for (size_t i = 0; i < operands.size(); ++i) {
    if (i != 1 && (!pure_value(operands[i].get()) || may_write(operands[i].get()))) return nullptr;
  }
  const size_t n_indices = operands.size() - 2;
  std::shared_ptr<const PrimitiveSpec> fused_spec =
      make_fused_setitem_spec(value->fused_, n_indices);
  std::vector<NodePtr> all{operands[0]};
  all.insert(all.end(), operands.begin() + 2, operands.end());
  all.insert(all.end(), value->operands_.begin(), value->operands_.end());
  std::vector<NodePtr> unfused_operands = operands;
  unfused_operands[1] = value->unfused_;
  return fused_call(loc, std::move(fused_spec), value->fused_, std::move(all), spec,
                    std::move(unfused_operands), slots, same_site);
}

NodePtr PrimitiveCallNode::fuse_reduce(const SourceLoc& loc, const PrimitiveSpec* spec,
                                       const std::vector<NodePtr>& operands,
                                       const std::vector<int>& slots, int same_site) {
  // reduce(x, axis, keepdims, ...) with x a fused expression given first.
  if (!fusion_enabled() || !fusable_reduction(*spec) || operands.empty() || slots[0] != 0) {
    return nullptr;
  }
  auto* value = dynamic_cast<const PrimitiveCallNode*>(operands[0].get());
  // A fused value, not a fused assignment or reduction.
  if (!value || !value->fused_ || value->owned_spec_->family != kFusedValueFamily) return nullptr;
  std::shared_ptr<const PrimitiveSpec> fused_spec = make_fused_reduce_spec(value->fused_, *spec);
  // The leaves in order, then the reduction's other operands, each bound to
  // its parameter after the leaves. Both orders evaluate the leaves first.
  const int nl = static_cast<int>(value->operands_.size());
  std::vector<NodePtr> all = value->operands_;
  std::vector<int> all_slots(all.size());
  for (int i = 0; i < nl; ++i) all_slots[i] = i;
  for (size_t i = 1; i < operands.size(); ++i) {
    all.push_back(operands[i]);
    all_slots.push_back(slots[i] + nl - 1);
  }
  auto node = std::make_shared<PrimitiveCallNode>(loc, fused_spec.get(), std::move(all),
                                                  std::move(all_slots), same_site);
  node->owned_spec_ = std::move(fused_spec);
  node->fused_ = value->fused_;
  std::vector<NodePtr> unfused_operands = operands;
  unfused_operands[0] = value->unfused_;
  node->unfused_ =
      std::make_shared<PrimitiveCallNode>(loc, spec, std::move(unfused_operands), slots, same_site);
  return node;
}

NodePtr PrimitiveCallNode::fused_call(const SourceLoc& loc,
                                      std::shared_ptr<const PrimitiveSpec> fused_spec,
                                      std::shared_ptr<const FusedExpr> expr,
                                      std::vector<NodePtr> operands, const PrimitiveSpec* spec,
                                      std::vector<NodePtr> unfused_operands,
                                      const std::vector<int>& slots, int same_site) {
  // The fused primitive takes its operands in order, one per parameter.
  std::vector<int> in_order(operands.size());
  for (size_t i = 0; i < in_order.size(); ++i) in_order[i] = static_cast<int>(i);
  auto node = std::make_shared<PrimitiveCallNode>(loc, fused_spec.get(), std::move(operands),
                                                  std::move(in_order), same_site);
  node->owned_spec_ = std::move(fused_spec);
  node->fused_ = std::move(expr);
  node->unfused_ =
      std::make_shared<PrimitiveCallNode>(loc, spec, std::move(unfused_operands), slots, same_site);
  return node;
}

}  // namespace tessera
