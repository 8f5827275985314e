#pragma once

#include <pybind11/pybind11.h>

#include <vector>

#include "tessera/core/value.hpp"
#include "tessera/lang/program.hpp"

namespace tessera::python {

namespace py = pybind11;

// Runs `program` on converted arguments with the GIL released (Ctrl-C
// watched, see sigint.hpp), on `threads` workers if positive, and converts
// its result back. Called with the GIL.
py::object run_converted(const Program& program, std::vector<Value> values, int threads = 0);

// Adds tessera._core.JitEntry, the C base class of tessera.jit's functions:
// a call whose argument types were seen before runs its cached program from
// here, without Python code (see jit_entry.cpp).
void add_jit_entry(py::module_& m);

}  // namespace tessera::python
