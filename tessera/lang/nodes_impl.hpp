// What the files of the execution tree's evaluation share (internal):
// nodes.cpp (values, variables, assignments, functions, calls, lists and
// dicts; it defines the analyses below), nodes_primitive.cpp (calls of
// primitives) and nodes_control.cpp (blocks, branches, loops, and/or,
// break/continue/return).
#pragma once

#include <cstddef>
#include <exception>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "tessera/lang/nodes.hpp"

namespace tessera::detail {

inline Future<Value> fail_at(const SourceLoc& loc, std::exception_ptr e) {
  return Future<Value>::failed(with_location(std::move(e), loc));
}

template <class E>
Future<Value> fail_with(const SourceLoc& loc, const std::string& msg) {
  return fail_at(loc, std::make_exception_ptr(E(msg)));
}

inline std::vector<const Node*> raw(const std::vector<NodePtr>& nodes) {
  std::vector<const Node*> out;
  for (const auto& n : nodes) out.push_back(n.get());
  return out;
}

// fn(), evaluated out of sequence (InSequence) if `off`: a child that is
// started and not awaited before its caller goes on.
template <class F>
Future<Value> out_of_sequence_if(bool off, F&& fn) {
  if (!off) return fn();
  InSequence out(false);
  return fn();
}

// Evaluates nodes (all started before any is awaited, so independent costly
// operands run in parallel) and gathers their values. Each but the last is
// out of sequence: the ones after it start before it is awaited.
inline Future<std::vector<Value>> eval_all(const std::vector<NodePtr>& nodes,
                                           const FramePtr& frame) {
  std::vector<Future<Value>> fs;
  fs.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    fs.push_back(out_of_sequence_if(i + 1 < nodes.size(), [&] { return nodes[i]->eval(frame); }));
  }
  return when_all(std::move(fs));
}

// True if evaluating `n` may reach settle_here: a block or a loop, or a
// function body through a call. (A function made here runs nothing: only
// its defaults, which are its children, are evaluated.)
bool may_settle(const Node* n);

std::vector<size_t> sorted_unique(std::vector<size_t> v);

// True if evaluating `n` may call functions (which may assign anything).
bool calls_functions(const Node* n);

// The operands of a call in a program that writes: operand i > 0 is marked
// when it may write (a writing primitive or a call), so that it starts only
// once the operands before it are done: Python reads them first (in
// `g(x.sum(), h(x))` the sum must not see h's write). Empty when none is.
std::vector<bool> ordered_operands(const std::vector<NodePtr>& operands);

// eval_all, except that a node marked in `ordered` starts only once every
// node before it is done (waited for in place in sequence, else by a
// continuation that goes on from it).
Future<std::vector<Value>> eval_all_ordered(const std::vector<NodePtr>* nodes,
                                            const std::vector<bool>* ordered, const FramePtr& frame,
                                            size_t i,
                                            std::shared_ptr<std::vector<Future<Value>>> fs);

// The variables of the frame they run in that `nodes`, evaluated late,
// read: none to note if they have effects, assign variables or call
// functions, since then the statement around them is not deferred (the
// block waits for it) and notes of their own reads would make their own
// statements wait for them.
std::vector<size_t> late_reads(std::initializer_list<const Node*> nodes);

}  // namespace tessera::detail
