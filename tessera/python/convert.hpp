// Conversions between Python objects and tessera Values (the contract of the
// Python front end: docs in python/tessera/__init__.py).
//
// NumPy arrays of bool/int64/float32/float64 that are C-contiguous, aligned and
// in native byte order cross into tessera without a copy: the Array wraps the
// NumPy buffer and holds a reference to the NumPy object. Arrays come back as
// NumPy arrays sharing tessera's buffer, kept alive by a capsule.
//
// Every function here needs the GIL, except await_sole_ownership.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include "tessera/core/value.hpp"

namespace tessera::python {

namespace py = pybind11;

// A tessera function (closure or primitive) seen from Python: opaque, can be
// passed back as an argument or called.
struct FunctionHandle {
  Value fn;
};

// A tiled array returned to Python (tessera._core.TiledArray); passed back to
// a program it is the same tiled array again.
struct TiledHandle {
  Value value;
};

// Converts a Python object to a Value. Raises TypeError for objects (and array
// dtypes) tessera cannot hold, OverflowError for ints beyond int64.
Value to_value(py::handle obj);

// Converts a Value to a Python object: scalars to Python scalars, 0-d arrays to
// NumPy scalars, arrays to NumPy arrays, lists, dicts, slices, functions.
py::object to_python(const Value& v);

// While one is alive on the calling thread, NumPy arrays that to_value had
// to convert (a dtype tessera holds in another type: int32 as int64, ...)
// are remembered, and copied back into the caller's arrays when it ends
// (with the GIL held), so that writes a function made into them reach the
// caller as they would in NumPy.
// Brackets a run on this thread with the GIL released (constructed and
// destroyed with the GIL held): the Python references of NumPy buffers this
// thread lets go of meanwhile are dropped when the scope ends, instead of
// being queued for the interpreter (a pending call per run, a third of an
// empty jit call with one array argument). Other threads' go on being queued.
class DeferredReleases {
 public:
  DeferredReleases();
  ~DeferredReleases();
  DeferredReleases(const DeferredReleases&) = delete;
  DeferredReleases& operator=(const DeferredReleases&) = delete;

 private:
  std::vector<PyObject*> references_;
  std::vector<PyObject*>* saved_;
};

class WriteBackScope {
 public:
  WriteBackScope();
  ~WriteBackScope();
  WriteBackScope(const WriteBackScope&) = delete;
  WriteBackScope& operator=(const WriteBackScope&) = delete;

 private:
  std::vector<std::pair<py::object, Array>> pending_;
  std::vector<std::pair<py::object, Array>>* saved_;
};

// Without the GIL, after a run: waits (briefly) until a large array result is
// held by `v` alone, so that converting it does not copy it only because a
// worker still finishing the run shares it.
void await_sole_ownership(const Value& v);

// Drops Python references released by threads that did not hold the GIL
// (a wrapped input freed on a worker). Called at every entry to the module.
void drain_released_references();

// Stops dropping Python references (interpreter shutdown: they are leaked).
void stop_releasing_references();

// Number of NumPy buffers currently wrapped by live Arrays (for tests).
size_t wrapped_buffer_count();

}  // namespace tessera::python
