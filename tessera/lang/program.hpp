// A compiled program: parse + compile once, run many times.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/lang/tree.hpp"

namespace tessera {

class Program {
 public:
  // Parses and compiles `text`; `file` names it in error messages. The
  // program sees its command-line arguments in the variable `argv`.
  explicit Program(std::string_view text, std::string file = "<expr>");

  // Evaluates the program and waits for the result (the outermost boundary:
  // never call from a task). If the program's value is a function, it is
  // called with `args`. Errors are rethrown with their source positions.
  Value run(std::vector<Value> args = {}) const;

  // Starts evaluation and returns the future of the result.
  Future<Value> start(std::vector<Value> args = {}) const;

  // The execution tree as Graphviz DOT, with per-node counters.
  std::string tree_dot() const;
  // Per-node counters as CSV: name, source position, evaluations, total time
  // (ns), mean time (ns), inline or async.
  std::string counters_csv() const;
  void reset_counters() const;

  const FunctionCode& code() const { return *code_; }
  // True if the program's top-level frame is made once and kept (see
  // resident_ below): a run then only calls the program's function.
  bool resident() const { return resident_ != nullptr; }
  // The program's text, as compiled.
  const std::string& text() const { return *text_; }

 private:
  // Starts a run; `frame` is set to its top-level frame, which the caller
  // clears once the result is there (see start).
  Future<Value> begin(std::vector<Value> args, FramePtr& frame) const;

  std::shared_ptr<const FunctionCode> code_;
  std::shared_ptr<const std::string> text_;
  // A program that only defines functions and ends with one of them (what
  // the Python front end makes of a function, and the usual .tsl program
  // run with arguments), whose functions neither read `argv` nor assign a
  // top-level variable: its top-level frame is the same in every run, so it
  // is made once, here, and a run only calls the function. Null for other
  // programs. Shared by copies; cleared when the last one goes (the
  // functions in it close over it).
  struct Resident;
  static std::shared_ptr<const Resident> make_resident(const FunctionCode& code);
  std::shared_ptr<const Resident> resident_;
};

// A program run while a trace was recording, as tessera/trace writes it: its
// tree and text, and the counters of every node (in depth-first order, the
// order of visit_tree) when the program was first run in the recording, so
// that the trace holds the counts of the recorded runs only.
struct TracedProgram {
  std::shared_ptr<const FunctionCode> code;
  std::shared_ptr<const std::string> text;
  struct Counts {
    uint64_t evaluations = 0, total_ns = 0, spawned = 0;
  };
  std::vector<Counts> baseline;
};

// Forgets the programs noted so far (a recording starts).
void begin_traced_programs();
// The programs run since begin_traced_programs, in the order first run.
std::vector<TracedProgram> end_traced_programs();

// Calls fn(node, parent) for every node of the tree under `root`, depth first
// (parent is null for the root).
void visit_tree(const Node* root, const std::function<void(const Node*, const Node*)>& fn);

// Calls a function value (a closure returned by a program) from outside the
// runtime and waits for its result, like Program::run.
Value call_function(const Value& fn, std::vector<CallArg> args);

// Convenience: compile and run a program text.
Value eval_string(std::string_view text, std::vector<Value> args = {},
                  const std::string& file = "<expr>");

// Parses a command-line argument: ints and floats become numbers, true/false
// bools, anything else a string.
Value parse_cli_value(const std::string& text);

}  // namespace tessera
