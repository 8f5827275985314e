// tessera._core: the C++ engine seen from Python.
//
// Program compiles expression text once and runs it many times with the GIL
// released; conversions are in convert.cpp. C++ exceptions become Python's:
// tessera::SyntaxError -> CompileError (a ValueError), TypeError -> TypeError,
// std::invalid_argument -> ValueError, std::out_of_range -> IndexError,
// MemoryError / std::bad_alloc -> MemoryError, std::runtime_error ->
// RuntimeError; messages are kept as they are.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pythread.h>

#include <csignal>
#include <functional>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/core/array.hpp"
#include "tessera/core/error.hpp"
#include "tessera/core/recursion_error.hpp"
#include "tessera/distributed/comm.hpp"
#include "tessera/distributed/heartbeat.hpp"
#include "tessera/distributed/locality.hpp"
#include "tessera/kernels/conv.hpp"
#include "tessera/kernels/simd.hpp"
#include "tessera/lang/autodiff.hpp"
#include "tessera/lang/native.hpp"
#include "tessera/lang/program.hpp"
#include "tessera/lang/tree.hpp"
#include "tessera/primitives/registry.hpp"
#include "tessera/python/convert.hpp"
#include "tessera/python/jit_entry.hpp"
#include "tessera/python/sigint.hpp"
#include "tessera/resilience/faults.hpp"
#include "tessera/resilience/resilience.hpp"
#include "tessera/runtime/interrupt.hpp"
#include "tessera/runtime/parallel.hpp"
#include "tessera/runtime/scheduler.hpp"
#include "tessera/runtime/trace.hpp"
#include "tessera/trace/export.hpp"
#include "tessera/trace/session.hpp"

namespace py = pybind11;

namespace tessera::python {
namespace {

// tessera._core.TiledArray(tile, shape, spans, tiling, group): checks the
// metadata against this locality (its rank in the group) and the tile.
TiledHandle make_tiled(py::handle tile, const Shape& shape,
                       const std::vector<std::vector<std::pair<int64_t, int64_t>>>& spans, const std::string& tiling,
                       py::handle group) {
  Value v = to_value(tile);
  if (!v.is_array()) throw TypeError("[TiledArray] tile must be an array, got " + v.describe());
  const distributed::GroupInfo g = distributed::group_of_value(to_value(group), "TiledArray");
  TiledArray t;
  t.tile = v.as_array();
  t.shape = shape;
  t.locality = g.rank;
  t.group = g.id;
  t.group_name = g.name;
  t.tiling = tiling;
  if (static_cast<int>(spans.size()) != g.size) {
    throw std::invalid_argument(error_message("[TiledArray] needs one span per locality",
                                              g.id ? " of the group '" + g.name + "'" : std::string(), " (", g.size,
                                              "), got ", spans.size()));
  }
  std::vector<Span> table;
  for (size_t r = 0; r < spans.size(); ++r) {
    if (spans[r].size() != shape.size()) {
      throw std::invalid_argument(error_message("[TiledArray] the span of locality ", r, " has ", spans[r].size(),
                                                " dimensions, the array ", shape.size()));
    }
    Span sp;
    for (const auto& [start, stop] : spans[r]) {
      sp.start.push_back(start);
      sp.stop.push_back(stop);
    }
    table.push_back(std::move(sp));
  }
  t.spans = std::move(table);
  check_spans(t.shape, t.spans, true, "TiledArray");
  if (t.tile.shape() != t.span().shape()) {
    throw std::invalid_argument(error_message("[TiledArray] locality ", t.locality, " has span ", t.span().str(),
                                              " of shape ", shape_str(t.span().shape()), " but its tile has shape ",
                                              shape_str(t.tile.shape())));
  }
  return TiledHandle{Value(std::move(t))};
}

// tessera._core.CompileError (created at import, never freed).
PyObject* compile_error = nullptr;

void translate(std::exception_ptr error) {
  // Most derived classes first: SyntaxError and TypeError are invalid_argument,
  // MemoryError and overflow_error are runtime_error.
  try {
    if (error) std::rethrow_exception(error);
  } catch (const py::builtin_exception&) {
    throw;  // pybind11's own (type_error, value_error, ...): its translator knows them
  } catch (const Interrupted& e) {
    // Python's handler runs now (KeyboardInterrupt by default); a handler
    // that does not raise still ends the call with KeyboardInterrupt.
    if (PyErr_CheckSignals() == 0) PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
  } catch (const SyntaxError& e) {
    PyErr_SetString(compile_error, e.what());
  } catch (const TypeError& e) {
    PyErr_SetString(PyExc_TypeError, e.what());
  } catch (const MemoryError& e) {
    PyErr_SetString(PyExc_MemoryError, e.what());
  } catch (const std::bad_alloc&) {
    PyErr_SetString(PyExc_MemoryError, "[tessera] out of memory (std::bad_alloc)");
  } catch (const std::length_error& e) {
    PyErr_SetString(PyExc_MemoryError, e.what());
  } catch (const AttributeError& e) {
    PyErr_SetString(PyExc_AttributeError, e.what());
  } catch (const ZeroDivisionError& e) {
    PyErr_SetString(PyExc_ZeroDivisionError, e.what());
  } catch (const KeyError& e) {
    PyErr_SetString(PyExc_KeyError, e.what());
  } catch (const std::out_of_range& e) {
    PyErr_SetString(PyExc_IndexError, e.what());
  } catch (const std::invalid_argument& e) {
    PyErr_SetString(PyExc_ValueError, e.what());
  } catch (const std::overflow_error& e) {
    PyErr_SetString(PyExc_OverflowError, e.what());
  } catch (const RecursionError& e) {
    PyErr_SetString(PyExc_RecursionError, e.what());
  } catch (const std::runtime_error& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
}

std::vector<Value> to_values(const py::list& args) {
  std::vector<Value> values;
  values.reserve(args.size());
  for (py::handle a : args) values.push_back(to_value(a));
  return values;
}

py::object run_program(const Program& program, const py::list& args, bool consume) {
  drain_released_references();
  WriteBackScope write_back;
  std::vector<Value> values = to_values(args);
  // Handed over: the list lets go of its items, so arrays nothing else in
  // Python holds are the program's alone, freed at their last use in it.
  if (consume) PyList_SetSlice(args.ptr(), 0, PY_SSIZE_T_MAX, nullptr);
  return run_converted(program, std::move(values));
}

py::object call_function_handle(const FunctionHandle& f, const py::args& args,
                                const py::kwargs& kwargs) {
  drain_released_references();
  WriteBackScope write_back;
  std::vector<CallArg> call_args;
  for (py::handle a : args) call_args.push_back({"", to_value(a)});
  for (auto [k, v] : kwargs) call_args.push_back({std::string(py::str(k)), to_value(v)});
  Value fn = f.fn, result;
  {
    SigintWatch watch;
    py::gil_scoped_release release;
    result = tessera::call_function(fn, std::move(call_args));
    await_sole_ownership(result);
  }
  py::object out = to_python(result);
  drain_released_references();
  return out;
}

py::object call_primitive_py(const std::string& name, const py::list& args,
                             const py::dict& kwargs) {
  drain_released_references();
  WriteBackScope write_back;
  std::vector<CallArg> call_args;
  for (py::handle a : args) call_args.push_back({"", to_value(a)});
  for (auto [k, v] : kwargs) call_args.push_back({std::string(py::str(k)), to_value(v)});
  Value result;
  {
    py::gil_scoped_release release;
    EvaluationScope scope;
    result = call_primitive(name, std::move(call_args));
  }
  py::object out = to_python(result);
  drain_released_references();
  return out;
}

}  // namespace
}  // namespace tessera::python

PYBIND11_MODULE(_core, m) {
  using namespace tessera;
  using namespace tessera::python;

  m.doc() = "tessera's C++ engine: compile expression text and run it on the task runtime.";

  compile_error = PyErr_NewExceptionWithDoc(
      "tessera._core.CompileError",
      "The expression text does not parse or compile (a ValueError).", PyExc_ValueError, nullptr);
  if (!compile_error) throw py::error_already_set();
  m.add_object("CompileError", py::handle(compile_error));
  py::register_exception_translator(&translate);
  init_sigint(py::module_::import("threading").attr("main_thread")().attr("ident").cast<unsigned long>());

  add_jit_entry(m);

  py::class_<Program>(m, "Program",
                      "A compiled program: parsed and compiled once, run many times.")
      .def(py::init([](const std::string& text, const std::string& file) {
             py::gil_scoped_release release;
             return Program(text, file);
           }),
           py::arg("text"), py::arg("file") = "<jit>",
           "Compiles `text` (expression language); `file` names it in error messages. "
           "Raises CompileError on errors.")
      .def("run", &run_program, py::arg("args") = py::list(), py::arg("consume") = false,
           "Evaluates the program with the GIL released and returns its value; if the value "
           "is a function it is called with `args`. With consume=True the arguments are handed "
           "over: `args` is emptied once they are converted, so an array that tessera made and "
           "nothing else in Python holds is the program's alone, and is freed after the "
           "program's last read of it instead of after the run.")
      .def("tree_dot", &Program::tree_dot,
           "The execution tree as Graphviz DOT, with per-node counters.")
      .def("counters_csv", &Program::counters_csv,
           "Per-node counters as CSV: name, position, evaluations, total_ns, mean_ns, execution.")
      .def("reset_counters", &Program::reset_counters, "Sets every node's counters to zero.")
      .def("__repr__", [](const Program& p) {
        return "<tessera.Program " + p.code().loc.file + ">";
      });

  py::class_<FunctionHandle>(m, "Function",
                             "A tessera function (closure or primitive) returned by a program. "
                             "It can be called, or passed back to a program as an argument.")
      .def("__call__", &call_function_handle)
      .def_property_readonly("name",
                             [](const FunctionHandle& f) { return f.fn.as_function()->name(); })
      .def("__repr__", [](const FunctionHandle& f) {
        return "<tessera function " + f.fn.as_function()->name() + ">";
      });

  py::class_<TiledHandle>(m, "TiledArray",
                          "This locality's view of an array tiled across localities: its tile "
                          "plus the global shape and every locality's span. Passed back to a "
                          "program it is the same tiled array.")
      .def(py::init(&make_tiled), py::arg("tile"), py::arg("shape"), py::arg("spans"), py::arg("tiling") = "user",
           py::arg("group") = py::none(),
           "A tiled array from this locality's tile, the whole array's shape and every locality's span (a "
           "tuple of (start, stop) per dimension, as .spans gives them), without communication: every "
           "locality must pass the same shape and spans. The spans must cover the array. With group "
           "(mesh.group(axis)) the spans are those of the group's members, in group rank order.")
      .def_property_readonly("tile", [](const TiledHandle& t) { return to_python(Value(t.value.as_tiled().tile)); },
                             "This locality's part (a NumPy array).")
      .def_property_readonly("shape",
                             [](const TiledHandle& t) {
                               py::tuple out(t.value.as_tiled().shape.size());
                               for (size_t i = 0; i < out.size(); ++i) out[i] = t.value.as_tiled().shape[i];
                               return out;
                             },
                             "Shape of the whole array.")
      .def_property_readonly("spans",
                             [](const TiledHandle& t) {
                               py::list out;
                               for (const Span& sp : t.value.as_tiled().spans) {
                                 py::list dims;
                                 for (int d = 0; d < sp.ndim(); ++d) dims.append(py::make_tuple(sp.start[d], sp.stop[d]));
                                 out.append(py::tuple(dims));
                               }
                               return out;
                             },
                             "Every locality's span: a tuple of (start, stop) per dimension.")
      .def_property_readonly("locality", [](const TiledHandle& t) { return t.value.as_tiled().locality; },
                             "This locality's rank among those the array is tiled over (its group's).")
      .def_property_readonly("group", [](const TiledHandle& t) { return t.value.as_tiled().group; },
                             "The id of the group the array is tiled over (0: every locality).")
      .def_property_readonly("tiling", [](const TiledHandle& t) { return t.value.as_tiled().tiling; })
      .def_property_readonly("dtype", [](const TiledHandle& t) { return to_python(Value(t.value.as_tiled().tile)).attr("dtype"); })
      .def("__repr__", [](const TiledHandle& t) { return "<" + t.value.as_tiled().describe() + ">"; });

  m.def(
      "set_num_threads",
      [](int n) {
        if (n < 1) {
          throw py::value_error("[set_num_threads] n must be at least 1, got " +
                                std::to_string(n));
        }
        py::gil_scoped_release release;
        tessera::set_num_threads(n);
      },
      py::arg("n"), "Sets the number of worker threads of the runtime.");
  m.def(
      "set_helper_linger_us",
      [](double us) {
        if (!(us >= 0 && us <= 1e6)) {
          throw py::value_error("[set_helper_linger_us] us must be in [0, 1000000], got " +
                                std::to_string(us));
        }
        tessera::set_helper_linger_ns(static_cast<int64_t>(us * 1000));
      },
      py::arg("us"),
      "How long a worker that finished its share of a parallel operation watches for the "
      "next one before it sleeps (TESSERA_LINGER_US; 0: never).");
  m.def("helper_linger_us", [] { return static_cast<double>(tessera::helper_linger_ns()) / 1000; });
  m.def(
      "_native_tier_stats",
      [] {
        const tessera::NativeTierStats s = tessera::native_tier_stats();
        py::dict d;
        d["quick"] = s.quick;
        d["optimised"] = s.optimised;
        d["swapped"] = s.swapped;
        d["pending"] = s.pending;
        d["needs_whole"] = s.needs_whole;
        return d;
      },
      "Native loops' tiered compilation in this process (docs/runtime.md, \"Compile time\"): "
      "codes compiled by the quick tier, optimised in the background, swapped in, background "
      "compiles pending, lazy compiles that went whole at once.");
  m.def("_native_tiers_stop", [] { tessera::native_tiers_stop(); },
        py::call_guard<py::gil_scoped_release>(),
        "Stops the background compiles of native loops: the queue dropped, the compile under "
        "way waited for (at the interpreter's exit; later loops compile optimised at once).");
  m.def("_native_tiers_wait", [] { tessera::native_tiers_wait(); },
        py::call_guard<py::gil_scoped_release>(),
        "Waits until no background compile of a native loop is queued or running.");
  m.def(
      "memory_stats",
      [] {
        tessera::MemoryStats s = tessera::memory_stats();
        py::dict d;
        d["live_bytes"] = s.live;
        d["peak_live_bytes"] = s.peak_live;
        d["high_water_bytes"] = s.high_water;
        d["cached_bytes"] = s.cached;
        d["cache_limit_bytes"] = s.cache_limit;
        return d;
      },
      "Bytes of array memory: live (held by arrays), peak_live (most held at once since the\n"
      "last reset_peak_memory()), high_water (most ever), cached (freed large blocks kept for\n"
      "reuse; live + cached stays under high_water) and cache_limit.");
  m.def("reset_peak_memory", [] { tessera::reset_peak_memory(); },
        "Starts memory_stats()'s peak_live_bytes again from the bytes live now.");
  m.def("release_cached_memory", [] { tessera::release_cached_blocks(); },
        "Returns the freed large blocks kept for reuse to the system allocator.");
  m.def(
      "num_threads",
      [] {
        py::gil_scoped_release release;
        return tessera::num_threads();
      },
      "The number of worker threads of the runtime.");
  m.def(
      "set_deterministic",
      [](bool on) { tessera::set_deterministic_tiling(on); }, py::arg("on"),
      "Turns deterministic tiling on or off: results that do not depend on the number of threads.");
  m.def(
      "deterministic", [] { return tessera::deterministic_tiling(); },
      "Whether deterministic tiling is on (set_deterministic, TESSERA_DETERMINISTIC=1).");
  m.def(
      "simd_level", [] { return std::string(tessera::simd_name(tessera::simd_level())); },
      "The SIMD level of the elementwise and fused kernels: 'sse2', 'avx2' or 'avx512' (the "
      "CPU's widest, or TESSERA_SIMD).");
  m.def(
      "simd_best", [] { return std::string(tessera::simd_name(tessera::simd_best())); },
      "The widest SIMD level this CPU runs: 'sse2', 'avx2' or 'avx512'.");
  m.def(
      "set_simd_level",
      [](const std::string& name) {
        tessera::set_simd_level(tessera::simd_level_of(name.c_str(), "set_simd_level"));
      },
      py::arg("level"),
      "Chooses the SIMD level of the elementwise and fused kernels ('sse2', 'avx2', 'avx512'; "
      "ValueError for one this CPU lacks). Every level gives the same bits.");
  m.def(
      "set_conv_winograd", [](bool on) { tessera::kernels::set_conv_winograd(on); },
      py::arg("on"),
      "Turns Winograd on or off for float32 3x3 stride-1 convolutions with channels multiples "
      "of 16 (on by default on AVX-512 CPUs; TESSERA_CONV_WINOGRAD=0 turns it off at start). "
      "It is faster, with a rounding error a few times the direct algorithm's.");
  m.def(
      "conv_winograd", [] { return tessera::kernels::conv_winograd(); },
      "Whether Winograd is on for eligible convolutions (set_conv_winograd).");

  m.def(
      "primitives",
      [] {
        std::vector<std::tuple<std::string, std::string, std::string, std::string>> out;
        for (const PrimitiveSpec* p : all_primitives()) {
          out.emplace_back(p->name, p->signature(), p->family, p->help);
        }
        return out;
      },
      "Every primitive as (name, signature, family, help), sorted by name.");
  m.def("_backward_primitives_without_rules", &backward_primitives_without_rules,
        "The backward primitives a gradient can reach that have no gradient rule of their own "
        "(a second-order gradient through one is refused by name).");

  m.def("call_primitive", &call_primitive_py, py::arg("name"), py::arg("args") = py::list(),
        py::arg("kwargs") = py::dict(),
        "Calls one primitive with positional `args` and named `kwargs` and returns its value.");

  // The fault injector and checksums (python/tessera/resilience.py is the
  // Python interface; its eager replay and replicate use these).
  m.def(
      "_set_fault_injection",
      [](const std::optional<std::string>& config) {
        if (config) {
          set_fault_injection(parse_fault_config(*config, "inject_faults"));
        } else {
          clear_fault_injection();
        }
      },
      py::arg("config"),
      "Turns fault injection on with a configuration 'throw=P,bitflip=P,seed=S,only=NAME', or "
      "off with None.");
  m.def(
      "_fault_injection",
      []() -> std::optional<std::string> {
        auto c = fault_injection();
        if (!c) return std::nullopt;
        return c->str();
      },
      "The fault injection in force as 'throw=...,seed=...', or None.");
  m.def(
      "_fault_counts",
      [] {
        FaultCounts c = fault_counts();
        return std::make_tuple(c.calls, c.throws, c.bitflips);
      },
      "(results seen, throws injected, bits flipped) since injection was last set.");
  m.def(
      "_fault_call",
      []() -> std::optional<uint64_t> {
        if (!fault_injection_on()) return std::nullopt;
        check_fault_environment("inject_faults");
        return next_fault_call();
      },
      "The serial number of a new eager replay or replicate call, or None when injection is off.");
  m.def(
      "_inject_fault",
      [](py::handle value, uint64_t call, int index, const std::string& fn, const std::string& op,
         const std::string& where) -> py::object {
        Value v = to_value(value);
        const char* name = op == "replay" ? "replay" : "replicate";
        Value out = inject_fault(v, call, index, fn, name, where);
        if (out.is_array() && v.is_array() &&
            out.as_array().origin_raw() == v.as_array().origin_raw()) {
          return py::reinterpret_borrow<py::object>(value);  // untouched: the caller's own object
        }
        return to_python(out);
      },
      py::arg("value"), py::arg("call"), py::arg("index"), py::arg("fn"), py::arg("op"),
      py::arg("where"),
      "The fault injector applied to one attempt's result (may raise, or return a copy with a bit "
      "flipped).");
  m.def(
      "_value_checksum", [](py::handle value) { return value_checksum(to_value(value)); },
      py::arg("value"), "replicate's bitwise checksum of a value.");

  m.def("_take_job_key", &distributed::detail::take_job_key_from_environment,
        "Moves TESSERA_JOB_KEY (the job's heartbeat secret) out of the environment.");
  m.def(
      "_linger_after_peer_failure",
      [] {
        py::gil_scoped_release release;
        distributed::linger_after_peer_failure();
      },
      "Before a rank that knows of another's failure ends: waits until a second after it learned "
      "of it, so the ranks told at the same time print their errors before mpirun stops them.");
  m.def("_drop_gradient_buckets", &distributed::drop_gradient_buckets,
        "Drops gradient buckets still waiting for members (after a training step failed part way); "
        "returns how many.");

  // Tracing (python/tessera/trace.py is the Python interface).
  m.def(
      "_trace_start", [](const std::string& dir) { trace::start_session(dir); }, py::arg("dir"),
      "Starts recording a trace of this process into `dir`.");
  m.def(
      "_trace_start_from_env", [] { return trace::start_session_from_env(); },
      "Starts recording if TESSERA_TRACE names a directory; True if it did.");
  m.def(
      "_trace_stop",
      [] {
        py::gil_scoped_release release;
        return trace::stop_session();
      },
      "Stops recording and writes this locality's trace file; returns its path.");
  m.def(
      "_number_list_stats",
      [] {
        const tessera::NumberListStats s = tessera::number_list_stats();
        return py::make_tuple(s.made, s.written_out);
      },
      "(made, written_out): lists held unboxed (NumberList) made, and written out as Values.");
  m.def("_trace_active", &trace::session_active, "Whether a trace is being recorded.");
  m.def("_trace_now", &trace::now_ns, "The trace clock (nanoseconds).");
  m.def("_trace_step", &trace::record_step, py::arg("iteration"), py::arg("t0"), py::arg("t1"),
        "Records a training step from t0 to t1 (times of _trace_now).");
  m.def(
      "_trace_translation",
      [](const std::string& function, int64_t t0, int64_t t1) {
        trace::CompileRecord c;
        c.name = trace::intern(function);
        c.mode = trace::CompileRecord::Mode::translation;
        trace::record_compile(c, t0, t1);
      },
      py::arg("function"), py::arg("t0"), py::arg("t1"),
      "Records a jit function's translation (Python to its tree) from t0 to t1 (times of _trace_now).");
  m.def("_trace_add_source", &trace::add_source, py::arg("name"), py::arg("text"),
        "Keeps a source file's text with the running trace (for the report).");
  m.def(
      "_trace_export",
      [](const std::string& dir, const std::string& what) {
        py::gil_scoped_release release;
        trace::TraceSet set = trace::load_trace(dir);
        if (what == "summary") return trace::summary_json(set);
        if (what == "html") return trace::report_html(set);
        if (what == "chrome") return trace::chrome_trace_json(set);
        if (what == "dot") return trace::tree_dot(set);
        if (what == "csv") return trace::counters_csv(set);
        throw std::invalid_argument("[trace] unknown export '" + what + "': summary, html, chrome, dot or csv");
      },
      py::arg("dir"), py::arg("what"),
      "Reads the trace directory `dir` and returns one export as text: 'summary' (JSON), 'html', 'chrome', "
      "'dot' or 'csv'.");

  m.def("_wrapped_buffer_count", &wrapped_buffer_count,
        "Number of NumPy buffers currently viewed by tessera arrays (for tests).");
  m.def("_drain", &drain_released_references,
        "Drops Python references released by worker threads (for tests).");

  // At interpreter exit, references still held by the runtime are leaked
  // rather than dropped from a worker into a finalizing interpreter.
  py::module_::import("atexit").attr("register")(
      py::cpp_function([] { stop_releasing_references(); }));
}
