#include "tessera/lang/program.hpp"

#include <algorithm>
#include <charconv>
#include <functional>
#include <sstream>
#include <mutex>
#include <unordered_map>
#include <unordered_set>

#include "tessera/core/text.hpp"
#include "tessera/lang/compiler.hpp"
#include "tessera/lang/nodes.hpp"
#include "tessera/lang/parser.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/trace.hpp"

namespace tessera {

struct Program::Resident {
  FramePtr frame;
  Value fn;  // the function the program ends with
  ~Resident() { frame->clear(); }  // its functions close over it: a cycle
};

// The resident top-level frame of `code` (resident_), or null if the
// program is not of that form. Its functions are defined in it in order, as
// a run would, so a name defined twice holds its last definition.
std::shared_ptr<const Program::Resident> Program::make_resident(const FunctionCode& code) {
  auto* block = dynamic_cast<const BlockNode*>(code.body.get());
  if (!block) return nullptr;
  std::vector<const Node*> statements = block->children();
  auto* last = statements.empty() ? nullptr : dynamic_cast<const VariableNode*>(statements.back());
  if (!last || last->depth() != 0) return nullptr;
  std::vector<const FunctionNode*> defines;
  std::vector<size_t> slots;
  for (size_t i = 0; i + 1 < statements.size(); ++i) {
    auto* f = dynamic_cast<const FunctionNode*>(statements[i]);
    if (!f || !f->slot()) return nullptr;
    // Default values are evaluated in the top-level frame: constants only.
    for (const auto& d : f->code().defaults) {
      if (d && !dynamic_cast<const ConstantNode*>(d.get())) return nullptr;
    }
    defines.push_back(f);
    slots.push_back(*f->slot());
  }
  auto is_function = [&](size_t slot) { return std::find(slots.begin(), slots.end(), slot) != slots.end(); };
  if (!is_function(last->slot())) return nullptr;
  // The functions' bodies may read the top-level functions (calls between
  // them, recursion) and nothing else there: not argv, not a variable of a
  // run; and assign none of them.
  for (const FunctionNode* f : defines) {
    FrameAccess acc;
    frame_access(f->code().body.get(), 1, acc);
    if (!acc.writes.empty() || acc.writes_around) return nullptr;
    for (size_t slot : acc.reads) {
      if (!is_function(slot)) return nullptr;
    }
  }
  auto r = std::make_shared<Program::Resident>();
  r->frame = std::make_shared<Frame>(code.frame_size, nullptr);
  for (const FunctionNode* f : defines) {
    Future<Value> made = f->eval(r->frame);
    if (!made.is_ready() || made.error()) return nullptr;
  }
  std::optional<Value> fn = r->frame->get(last->slot());
  if (!fn || !fn->is_function()) return nullptr;
  r->fn = std::move(*fn);
  return r;
}

Program::Program(std::string_view text, std::string file) {
  auto ast = parse_program(text, file);
  code_ = compile_program(ast, {"argv"}, SourceLoc{file, 1, 1});
  text_ = std::make_shared<const std::string>(text);
  resident_ = make_resident(*code_);
}

namespace {

struct TracedPrograms {
  std::mutex mutex;
  std::unordered_set<const FunctionCode*> seen;
  std::vector<TracedProgram> programs;
};

TracedPrograms& traced_programs() {
  static TracedPrograms* t = new TracedPrograms();  // never destroyed: runs may end during exit
  return *t;
}

// Keeps the program's tree (and the counters it starts from) for the trace.
void note_traced(const std::shared_ptr<const FunctionCode>& code, const std::shared_ptr<const std::string>& text) {
  TracedPrograms& t = traced_programs();
  std::lock_guard lock(t.mutex);
  if (!t.seen.insert(code.get()).second) return;
  TracedProgram p{code, text, {}};
  visit_tree(code->body.get(), [&](const Node* n, const Node*) {
    const NodeCounters& c = n->counters();
    p.baseline.push_back({c.evaluations.load(), c.total_ns.load(), c.spawned.load()});
  });
  t.programs.push_back(std::move(p));
}

}  // namespace

void begin_traced_programs() {
  TracedPrograms& t = traced_programs();
  std::lock_guard lock(t.mutex);
  t.seen.clear();
  t.programs.clear();
}

std::vector<TracedProgram> end_traced_programs() {
  TracedPrograms& t = traced_programs();
  std::lock_guard lock(t.mutex);
  t.seen.clear();
  return std::move(t.programs);
}

namespace {

// The program's value is the result, or, if it is a function, called with
// the program's arguments.
Future<Value> call_with(const Value& v, std::vector<Value>& args, const SourceLoc& loc) {
  if (!v.is_function()) return Future<Value>::ready(v);
  return invoke(v, std::move(args), loc);
}

// Clears a run's top-level frame when the run is over, however it ends:
// that breaks reference cycles through its variables (a function stored
// there that made a closure).
struct ClearFrame {
  FramePtr& frame;
  ~ClearFrame() {
    if (frame) frame->clear();
  }
};

}  // namespace

Future<Value> Program::begin(std::vector<Value> args, FramePtr& frame) const {
  if (trace::on()) note_traced(code_, text_);
  if (resident_) return call_with(resident_->fn, args, code_->loc);
  frame = std::make_shared<Frame>(code_->frame_size, nullptr);
  frame->set(0, Value(List(args)));
  Future<Value> body = code_->body->eval(frame);
  // The usual program defines its function at once: call it here, with no
  // continuation in between.
  if (body.is_ready()) {
    if (body.error()) return body;
    return call_with(body.get(), args, code_->loc);
  }
  return body.then([code = code_, args = std::move(args)](const Value& v) mutable {
    return call_with(v, args, code->loc);
  });
}

Future<Value> Program::start(std::vector<Value> args) const {
  FramePtr frame;
  Future<Value> result;
  {
    ClearFrame clear_on_error{frame};
    result = begin(std::move(args), frame);
    if (frame && !result.is_ready()) {
      result = result.chain([frame](const Future<Value>& r) {
        frame->clear();
        return r;
      });
      frame.reset();  // the continuation clears it
    }
  }
  return result;
}

Value Program::run(std::vector<Value> args) const {
  // Evaluation starts on the calling thread, which is not a worker: cheap
  // programs finish right here with no hand-off between threads (the Python
  // front end's call overhead), while costly nodes spawn tasks onto the
  // workers and deep call chains move onto them (see invoke). This thread
  // then only waits for the result, and clears the frame after it: no
  // continuation to do that on the result's way back.
  EvaluationScope scope;
  FramePtr frame;
  ClearFrame clear{frame};
  Future<Value> f;
  try {
    InSequence seq(true);  // this thread only waits for the result
    f = begin(std::move(args), frame);
  } catch (...) {
    f = Future<Value>::failed(std::current_exception());
  }
  f.wait();  // rethrows an error
  return f.take();
}

Value call_function(const Value& fn, std::vector<CallArg> args) {
  EvaluationScope scope;
  Future<Value> f;
  {
    InSequence seq(true);  // this thread only waits for the result
    f = invoke(fn, std::move(args), SourceLoc{"<call>", 0, 0});
  }
  return f.wait();
}

void visit_tree(const Node* root, const std::function<void(const Node*, const Node*)>& fn) {
  // An explicit stack: trees of long programs are deep enough to matter.
  std::vector<std::pair<const Node*, const Node*>> stack{{root, nullptr}};
  while (!stack.empty()) {
    auto [n, parent] = stack.back();
    stack.pop_back();
    fn(n, parent);
    std::vector<const Node*> kids = n->children();
    for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back({*it, n});
  }
}

std::string Program::tree_dot() const {
  std::ostringstream os;
  std::unordered_map<const Node*, int> ids;
  os << "digraph tessera {\n  node [shape=box, fontname=\"monospace\"];\n";
  visit_tree(code_->body.get(), [&](const Node* n, const Node* parent) {
    int id = static_cast<int>(ids.size());
    ids[n] = id;
    const NodeCounters& c = n->counters();
    os << "  n" << id << " [label=\"" << dot_escape(n->label()) << "\\n" << n->loc().str();
    if (n->is_primitive()) {
      os << "\\nevals=" << c.evaluations.load() << " time=" << c.total_ns.load() / 1000.0 << "us";
    }
    os << "\"];\n";
    if (parent) os << "  n" << ids[parent] << " -> n" << id << ";\n";
  });
  os << "}\n";
  return os.str();
}

std::string Program::counters_csv() const {
  std::ostringstream os;
  os << "name,position,evaluations,total_ns,mean_ns,execution\n";
  visit_tree(code_->body.get(), [&](const Node* n, const Node*) {
    if (!n->is_primitive()) return;
    const NodeCounters& c = n->counters();
    uint64_t evals = c.evaluations.load(), spawned = c.spawned.load();
    os << csv_field(n->label()) << "," << csv_field(n->loc().str()) << "," << evals << ","
       << c.total_ns.load() << "," << static_cast<uint64_t>(c.mean_ns()) << ","
       << (spawned == 0 ? "inline" : spawned == evals ? "async" : "mixed") << "\n";
  });
  return os.str();
}

void Program::reset_counters() const {
  visit_tree(code_->body.get(), [](const Node* n, const Node*) { n->counters().reset(); });
}

Value eval_string(std::string_view text, std::vector<Value> args, const std::string& file) {
  return Program(text, file).run(std::move(args));
}

Value parse_cli_value(const std::string& text) {
  int64_t i;
  auto r = std::from_chars(text.data(), text.data() + text.size(), i);
  if (r.ec == std::errc() && r.ptr == text.data() + text.size()) return Value(i);
  double d;
  auto rd = std::from_chars(text.data(), text.data() + text.size(), d);
  if (rd.ec == std::errc() && rd.ptr == text.data() + text.size()) return Value(d);
  if (text == "true") return Value(true);
  if (text == "false") return Value(false);
  return Value(text);
}

}  // namespace tessera
