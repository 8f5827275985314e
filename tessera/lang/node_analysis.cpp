// What the nodes of a function's tree read, write and may do, found before
// it runs (declared in nodes.hpp): the frame slots a subtree reads and
// writes, which variables each loop's body reads outside it, whether a
// subtree is a pure value or may write into arrays, and how a primitive call
// draws random numbers. Split from nodes.cpp (evaluation).
#include <functional>
#include <vector>

#include "tessera/lang/nodes.hpp"
#include "tessera/primitives/registry.hpp"

namespace tessera {

void frame_access(const Node* n, int nesting, FrameAccess& acc) {
  if (!n) return;
  if (auto* v = dynamic_cast<const VariableNode*>(n)) {
    if (v->depth() == nesting) acc.reads.push_back(v->slot());
    return;
  }
  if (auto* a = dynamic_cast<const AssignNode*>(n)) {
    if (a->depth() == nesting) {
      acc.writes.push_back(a->slot());
    } else if (a->depth() > nesting) {
      acc.writes_around = true;
    }
    frame_access(a->value(), nesting, acc);
    return;
  }
  if (auto* f = dynamic_cast<const FunctionNode*>(n)) {
    if (f->slot() && nesting == 0) acc.writes.push_back(*f->slot());
    for (const auto& d : f->code().defaults) frame_access(d.get(), nesting, acc);
    frame_access(f->code().body.get(), nesting + 1, acc);
    return;
  }
  for (const Node* c : n->children()) frame_access(c, nesting, acc);
}

void mark_loop_reads(const Node* body, size_t frame_size) {
  FrameAccess all;
  frame_access(body, 0, all);
  std::vector<int64_t> total(frame_size, 0);
  for (size_t s : all.reads)
    if (s < frame_size) ++total[s];
  std::function<bool(const Node*)> makes_functions = [&](const Node* n) {
    if (!n) return false;
    if (dynamic_cast<const FunctionNode*>(n)) return true;
    for (const Node* c : n->children())
      if (makes_functions(c)) return true;
    return false;
  };
  int loops = 0;
  std::function<void(const Node*)> walk = [&](const Node* n) {
    if (!n || dynamic_cast<const FunctionNode*>(n)) return;
    if (auto* w = dynamic_cast<const WhileNode*>(n)) {
      w->set_runs_once(loops == 0 && !makes_functions(w));
      FrameAccess in;
      frame_access(w, 0, in);
      std::vector<int64_t> inside(frame_size, 0);
      for (size_t s : in.reads)
        if (s < frame_size) ++inside[s];
      std::vector<bool> outside(frame_size);
      for (size_t s = 0; s < frame_size; ++s) outside[s] = total[s] > inside[s];
      w->set_reads_outside(std::move(outside));
      ++loops;
      for (const Node* c : n->children()) walk(c);
      --loops;
      return;
    }
    for (const Node* c : n->children()) walk(c);
  };
  walk(body);
}

// True if `n` computes a value and nothing else: primitives without effects
// (registry.hpp: has_effects), no calls of functions (whose bodies may have
// effects), no break(), continue() or return(). Only such a define may go
// on computing while its block moves to the next statement: nothing it does
// can be seen out of order.
bool pure_value(const Node* n) {
  if (dynamic_cast<const ControlNode*>(n) || dynamic_cast<const CallNode*>(n)) return false;
  if (n->is_primitive() && has_effects(*static_cast<const PrimitiveCallNode*>(n)->spec()))
    return false;
  for (const Node* c : n->children()) {
    if (c && !pure_value(c)) return false;
  }
  return true;
}

// True if evaluating `n` may write into an array: a primitive that writes,
// or a call of a function (whose body may write).
bool may_write(const Node* n) {
  if (!n) return false;
  if (n->is_primitive()) {
    const auto* call = static_cast<const PrimitiveCallNode*>(n);
    const PrimitiveSpec* spec = call->spec();
    if (spec->writes || spec->calls_functions || call->draws_from_a_stream()) return true;
  }
  if (dynamic_cast<const CallNode*>(n) || dynamic_cast<const ForEachNode*>(n)) return true;
  if (dynamic_cast<const FunctionNode*>(n)) return false;  // made, not called
  for (const Node* c : n->children()) {
    if (may_write(c)) return true;
  }
  return false;
}

int stream_seed_param(const PrimitiveSpec& spec) {
  if (spec.family != "random" || spec.name == "default_rng") return kNoStreamDraw;
  if (spec.name == "set_seed") return kStreamDraw;  // moves the global stream
  for (size_t p = 0; p < spec.params.size(); ++p)
    if (spec.params[p].name == "seed") return static_cast<int>(p);
  return kStreamDraw;  // a Generator's draw, shuffle, permutation
}

bool PrimitiveCallNode::draws_from_a_stream() const {
  const int seed = stream_seed_param(*spec_);
  if (seed < 0) return seed == kStreamDraw;
  for (size_t i = 0; i < operands_.size() && i < slots_.size(); ++i) {
    if (slots_[i] != seed) continue;
    // A seed given: its own stream, in any order (unless it is None).
    Value v;
    const auto* c = dynamic_cast<const ConstantNode*>(operands_[i].get());
    return c && c->eval_now(nullptr, v) && v.is_nil();
  }
  return true;  // the default seed: None
}

}  // namespace tessera
