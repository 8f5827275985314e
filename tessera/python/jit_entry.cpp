// tessera._core.JitEntry: the fixed cost of calling a @tessera.jit function.
//
// JitFunction (python/tessera/jit.py) derives from this type. Its __call__ is
// this tp_call: the arguments' types are matched against the programs the
// Python side registered (_set_fast) for calls it found plain (positional
// arguments only, no function arguments, nothing given back in place, no
// result conversion, no per-function counters or trace), and a match
// runs the program directly. Anything else, a miss included, goes to the
// Python method _call(args, kwargs), which does the full dispatch (and may
// register the call's program for next time). jit.py's Python __call__ was
// about 1.4 us of the 3.1 us (CPU) of an empty call.
#include "tessera/python/jit_entry.hpp"

#include <pybind11/numpy.h>
#include <structmember.h>

#include <cstdint>
#include <cstring>
#include <exception>
#include <utility>

#include "tessera/python/convert.hpp"
#include "tessera/python/sigint.hpp"
#include "tessera/runtime/scheduler.hpp"

namespace tessera::python {
namespace {

// Up to this many arguments take the fast path (the key lives on the stack).
constexpr Py_ssize_t kMaxFastArgs = 16;

// One argument's part of a key: the type object's address, or for a NumPy
// array (exact type) an odd number made of its dtype character and rank, as
// jit.py's _arg_key gives (dtype.char, ndim). Addresses are even, so the two
// never meet.
using ArgCode = uintptr_t;

ArgCode array_code(char dtype_char, int ndim) {
  return (static_cast<ArgCode>(static_cast<unsigned char>(dtype_char)) << 16) |
         (static_cast<ArgCode>(ndim) << 1) | 1u;
}

struct FastProgram {
  std::vector<ArgCode> key;
  PyObject* program_object;  // a reference: keeps `program` alive
  const Program* program;
  PyObject* constants;  // a tuple appended to the arguments (a reference)
  int threads;          // the function's threads= (0: none)
};

struct JitEntryObject {
  PyObject_HEAD
  PyObject* last;  // `_last`: the program of the last call
  std::vector<FastProgram>* fast;
};

bool g_eager = false;                     // tessera.set_eager(True): every call runs Python
PyObject* g_assertion_error = nullptr;    // jit.py's _assertion_error
PyTypeObject* g_ndarray = nullptr;

ArgCode code_of(PyObject* a) {
  if (Py_TYPE(a) == g_ndarray) {
    const auto* arr = py::detail::array_proxy(a);
    if (arr->nd > 0xffff) return 0;
    return array_code(py::detail::array_descriptor_proxy(arr->descr)->type, arr->nd);
  }
  return reinterpret_cast<ArgCode>(Py_TYPE(a));
}

const FastProgram* find(const JitEntryObject* self, PyObject* const* args, Py_ssize_t n) {
  if (self->fast == nullptr || self->fast->empty() || n > kMaxFastArgs) return nullptr;
  ArgCode codes[kMaxFastArgs];
  for (Py_ssize_t i = 0; i < n; ++i) codes[i] = code_of(args[i]);
  for (const FastProgram& f : *self->fast) {
    if (static_cast<Py_ssize_t>(f.key.size()) == n &&
        std::memcmp(f.key.data(), codes, n * sizeof(ArgCode)) == 0) {
      return &f;
    }
  }
  return nullptr;
}

// A failed assert of the program is the AssertionError (or the Python
// exception of the translator's expansion) that the Python path raises,
// `from None`.
void convert_assertion_error() {
  if (g_assertion_error == nullptr || !PyErr_ExceptionMatches(PyExc_RuntimeError)) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  PyObject* text = value ? PyObject_Str(value) : nullptr;
  PyObject* converted = nullptr;
  const char* utf8 = text ? PyUnicode_AsUTF8(text) : nullptr;
  if (utf8 != nullptr && std::strncmp(utf8, "[assert]", 8) == 0) {
    converted = PyObject_CallOneArg(g_assertion_error, text);
  }
  Py_XDECREF(text);
  if (converted == nullptr) {
    if (PyErr_Occurred()) {
      Py_XDECREF(type);
      Py_XDECREF(value);
      Py_XDECREF(traceback);
      return;
    }
    PyErr_Restore(type, value, traceback);
    return;
  }
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  PyException_SetCause(converted, nullptr);  // also suppresses the context: `from None`
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(converted)), converted);
  Py_DECREF(converted);
}

PyObject* run_fast(JitEntryObject* self, const FastProgram& f, PyObject* const* args, Py_ssize_t n) {
  // Held for the call: another thread may register or clear programs (the
  // table moves) while this one runs without the GIL.
  const Program* program = f.program;
  const int threads = f.threads;
  py::object program_object = py::reinterpret_borrow<py::object>(f.program_object);
  py::object constants = py::reinterpret_borrow<py::object>(f.constants ? f.constants : Py_None);
  Py_INCREF(f.program_object);
  Py_XSETREF(self->last, f.program_object);
  try {
    std::vector<Value> values;
    const Py_ssize_t n_constants = f.constants ? PyTuple_GET_SIZE(constants.ptr()) : 0;
    values.reserve(n + n_constants);
    drain_released_references();
    // Open before converting: to_value registers the arrays to write back.
    WriteBackScope write_back;
    for (Py_ssize_t i = 0; i < n; ++i) values.push_back(to_value(args[i]));
    for (Py_ssize_t i = 0; i < n_constants; ++i) values.push_back(to_value(PyTuple_GET_ITEM(constants.ptr(), i)));
    return run_converted(*program, std::move(values), threads).release().ptr();
  } catch (py::error_already_set& e) {
    e.restore();
  } catch (...) {
    py::detail::try_translate_exceptions();
  }
  convert_assertion_error();
  return nullptr;
}

PyObject* entry_call(PyObject* self_object, PyObject* args, PyObject* kwargs) {
  auto* self = reinterpret_cast<JitEntryObject*>(self_object);
  if (!g_eager && (kwargs == nullptr || PyDict_GET_SIZE(kwargs) == 0)) {
    PyObject* const* items = &PyTuple_GET_ITEM(args, 0);
    const Py_ssize_t n = PyTuple_GET_SIZE(args);
    if (const FastProgram* f = find(self, items, n)) return run_fast(self, *f, items, n);
  }
  static PyObject* name = PyUnicode_InternFromString("_call");
  PyObject* call_args[3] = {self_object, args, kwargs ? kwargs : Py_None};
  return PyObject_VectorcallMethod(name, call_args, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
}

void clear_fast(JitEntryObject* self) {
  if (self->fast == nullptr) return;
  for (FastProgram& f : *self->fast) {
    Py_XDECREF(f.program_object);
    Py_XDECREF(f.constants);
  }
  self->fast->clear();
}

void entry_dealloc(PyObject* self_object) {
  auto* self = reinterpret_cast<JitEntryObject*>(self_object);
  clear_fast(self);
  delete self->fast;
  self->fast = nullptr;
  Py_CLEAR(self->last);
  // A heap type: its instances hold a reference to it (subclasses' too,
  // given back here since the base is a heap type).
  PyTypeObject* type = Py_TYPE(self_object);
  type->tp_free(self_object);
  Py_DECREF(type);
}

PyObject* entry_new(PyTypeObject* type, PyObject*, PyObject*) {
  auto* self = reinterpret_cast<JitEntryObject*>(type->tp_alloc(type, 0));
  if (self == nullptr) return nullptr;
  self->last = nullptr;
  self->fast = new std::vector<FastProgram>();
  return reinterpret_cast<PyObject*>(self);
}

// _set_fast(key, program, constants, threads): calls whose arguments give
// `key` (jit.py's cache key: types, and (dtype.char, ndim) for arrays) run
// `program` with `constants` appended, on `threads` workers (0: as they are).
PyObject* entry_set_fast(PyObject* self_object, PyObject* const* args, Py_ssize_t n) {
  auto* self = reinterpret_cast<JitEntryObject*>(self_object);
  if (n != 4 || !PyTuple_Check(args[0]) || !PyTuple_Check(args[2]) || !PyLong_Check(args[3])) {
    PyErr_SetString(PyExc_TypeError, "_set_fast(key: tuple, program, constants: tuple, threads: int)");
    return nullptr;
  }
  try {
    FastProgram f;
    for (py::handle k : py::reinterpret_borrow<py::tuple>(args[0])) {
      if (PyType_Check(k.ptr())) {
        f.key.push_back(reinterpret_cast<ArgCode>(k.ptr()));
      } else {
        auto pair = k.cast<std::pair<std::string, int>>();
        if (pair.first.size() != 1 || pair.second < 0 || pair.second > 0xffff) Py_RETURN_NONE;
        f.key.push_back(array_code(pair.first[0], pair.second));
      }
    }
    if (static_cast<Py_ssize_t>(f.key.size()) > kMaxFastArgs) Py_RETURN_NONE;
    f.threads = py::handle(args[3]).cast<int>();
    if (f.threads < 0) Py_RETURN_NONE;
    f.program = py::handle(args[1]).cast<const Program*>();
    f.program_object = Py_NewRef(args[1]);
    f.constants = PyTuple_GET_SIZE(args[2]) ? Py_NewRef(args[2]) : nullptr;
    self->fast->push_back(f);
  } catch (py::error_already_set& e) {
    e.restore();
    return nullptr;
  } catch (...) {
    py::detail::try_translate_exceptions();
    return nullptr;
  }
  Py_RETURN_NONE;
}

PyObject* entry_clear_fast(PyObject* self_object, PyObject*) {
  clear_fast(reinterpret_cast<JitEntryObject*>(self_object));
  Py_RETURN_NONE;
}

PyMethodDef entry_methods[] = {
    {"_set_fast", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&entry_set_fast)), METH_FASTCALL,
     "Registers a program for calls whose arguments give this key."},
    {"_clear_fast", &entry_clear_fast, METH_NOARGS, "Forgets the registered programs."},
    {nullptr, nullptr, 0, nullptr}};

PyMemberDef entry_members[] = {
    {"_last", T_OBJECT, offsetof(JitEntryObject, last), 0, "The program of the last call."},
    {nullptr, 0, 0, 0, nullptr}};


}  // namespace

py::object run_converted(const Program& program, std::vector<Value> values, int threads) {
  DeferredReleases deferred;
  Value result;
  {
    SigintWatch watch;
    py::gil_scoped_release release;
    // As jit.py sets a function's threads= (without the GIL: a resize waits
    // for running evaluations, which may want it back).
    if (threads > 0 && num_threads() != threads) set_num_threads(threads);
    result = program.run(std::move(values));
    await_sole_ownership(result);
  }
  py::object out = to_python(result);
  drain_released_references();
  return out;
}

void add_jit_entry(py::module_& m) {
  g_ndarray = py::detail::npy_api::get().PyArray_Type_;
  static PyType_Slot slots[] = {
      {Py_tp_doc, const_cast<char*>("The C base of tessera.jit's functions: calls of argument types seen "
                                    "before run here.")},
      {Py_tp_new, reinterpret_cast<void*>(&entry_new)},
      {Py_tp_dealloc, reinterpret_cast<void*>(&entry_dealloc)},
      {Py_tp_call, reinterpret_cast<void*>(&entry_call)},
      {Py_tp_methods, entry_methods},
      {Py_tp_members, entry_members},
      {0, nullptr}};
  static PyType_Spec spec = {"tessera._core.JitEntry", sizeof(JitEntryObject), 0,
                             Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, slots};
  PyObject* type = PyType_FromSpec(&spec);
  if (type == nullptr) throw py::error_already_set();
  m.add_object("JitEntry", py::reinterpret_steal<py::object>(type));
  m.def("_set_jit_eager", [](bool eager) { g_eager = eager; }, "tessera.set_eager's switch for the C entry.");
  m.def(
      "_set_jit_assertion_error", [](py::object fn) { g_assertion_error = fn.release().ptr(); },
      "The function making a failed program assert Python's exception (jit.py).");
}

}  // namespace tessera::python
