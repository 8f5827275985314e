#include "tessera/python/convert.hpp"

#include <atomic>
#include <bit>
#include <chrono>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tessera/core/error.hpp"

namespace tessera::python {

namespace {

// Lists nested deeper than this are refused (a list containing itself would
// otherwise recurse until the stack overflows).
constexpr int kMaxNesting = 256;

// A result shared with a worker that has not yet let go of it (the future
// chain finishing) would be copied on the way out; results this large are
// worth waiting a moment for instead.
constexpr size_t kCopyCheapBytes = 64 * 1024;
constexpr auto kOwnershipWait = std::chrono::microseconds(300);

constexpr int kCContiguous = py::detail::npy_api::NPY_ARRAY_C_CONTIGUOUS_;
constexpr int kAligned = py::detail::npy_api::NPY_ARRAY_ALIGNED_;
constexpr int kWriteable = py::detail::npy_api::NPY_ARRAY_WRITEABLE_;

// The byte-order character NumPy uses for this machine's order.
constexpr char kNativeOrder = std::endian::native == std::endian::little ? '<' : '>';

// NumPy objects looked up once (the module holds them for the process).
struct NumPy {
  py::object generic, bool_, int64, float32, float64, copyto;
  py::dtype dt_bool, dt_int64, dt_float32, dt_float64;
};

const NumPy& numpy() {
  // Intentionally leaked: destroying Python objects at C++ exit would run
  // after the interpreter is gone.
  static const NumPy* np = [] {
    py::module_ m = py::module_::import("numpy");
    return new NumPy{m.attr("generic"),        m.attr("bool_"),
                     m.attr("int64"),          m.attr("float32"),
                     m.attr("float64"),        m.attr("copyto"),
                     py::dtype::of<bool>(),    py::dtype::of<int64_t>(),
                     py::dtype::of<float>(),   py::dtype::of<double>()};
  }();
  return *np;
}

// Python references held by Arrays that wrap NumPy buffers. An Array may be
// freed on a worker thread, which does not hold the GIL; its reference is
// then queued and dropped by the next thread that has the GIL (a pending call
// scheduled on the interpreter, or the next entry to the module), so workers
// never wait for the GIL.
struct References {
  std::mutex mutex;
  std::unordered_multimap<const void*, PyObject*> wrapped;  // buffer -> owner
  std::vector<PyObject*> pending;
  // Whether `pending` may hold something: every call from Python drains, and
  // the mutex was a tenth of an empty jit call's cost.
  std::atomic<bool> any_pending{false};
  std::atomic<bool> stopped{false};
};

References& references() {
  static References* r = new References();  // never destroyed: workers may outlive statics
  return *r;
}

int drain_pending_call(void*) {
  drain_released_references();
  return 0;
}

thread_local std::vector<PyObject*>* tl_deferred = nullptr;

void release_python_reference(const void* data, PyObject* obj) {
  References& r = references();
  bool schedule = false;
  {
    std::lock_guard lock(r.mutex);
    auto range = r.wrapped.equal_range(data);
    for (auto it = range.first; it != range.second; ++it) {
      if (it->second == obj) {
        r.wrapped.erase(it);
        break;
      }
    }
    if (r.stopped.load()) return;  // the interpreter is shutting down: leak
    if (!PyGILState_Check() && tl_deferred != nullptr) {
      tl_deferred->push_back(obj);  // dropped by this thread's DeferredReleases
      return;
    }
    if (!PyGILState_Check()) {
      schedule = r.pending.empty();
      r.pending.push_back(obj);
      r.any_pending.store(true, std::memory_order_release);
      obj = nullptr;
    }
  }
  if (obj) {
    Py_DECREF(obj);
  } else if (schedule) {
    // If the interpreter's queue is full the reference waits for the next
    // entry to the module instead.
    Py_AddPendingCall(&drain_pending_call, nullptr);
  }
}

// True when `data` is a NumPy buffer wrapped by a live Array.
bool is_wrapped(const void* data) {
  References& r = references();
  std::lock_guard lock(r.mutex);
  return r.wrapped.count(data) != 0;
}

std::string type_name(py::handle obj) { return py::str(py::type::handle_of(obj).attr("__name__")); }

[[noreturn]] void unsupported(py::handle obj) {
  throw py::type_error("[tessera] cannot pass a Python object of type '" + type_name(obj) +
                       "' to tessera (supported: None, bool, int, float, str, list, tuple, "
                       "dict, slice, NumPy arrays and scalars, tessera functions)");
}

int64_t to_int64(py::handle obj) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(obj.ptr(), &overflow);
  if (overflow != 0) {
    throw std::overflow_error("[tessera] Python int " + std::string(py::str(obj)) +
                              " does not fit in tessera's 64-bit integers");
  }
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  return static_cast<int64_t>(v);
}

// The tessera dtype a NumPy dtype converts to (with a copy unless `exact`),
// or a TypeError naming the dtype.
DType dtype_for(const py::dtype& dt, bool& exact) {
  char kind = dt.kind();
  ssize_t size = dt.itemsize();
  char order = dt.byteorder();
  bool native = order == '=' || order == '|' || order == kNativeOrder;
  exact = native;
  if (kind == 'b' && size == 1) return DType::bool_;
  if (kind == 'i' && size == 8) return DType::int64;
  if (kind == 'f' && size == 4) return DType::float32;
  if (kind == 'f' && size == 8) return DType::float64;
  if (kind == 'i' && size == 1) return DType::int8;
  if (kind == 'i' && size == 2) return DType::int16;
  if (kind == 'i' && size == 4) return DType::int32;
  if (kind == 'u' && size == 1) return DType::uint8;
  if (kind == 'u' && size == 2) return DType::uint16;
  if (kind == 'u' && size == 4) return DType::uint32;
  if (kind == 'u' && size == 8) return DType::uint64;
  if (kind == 'f' && size == 2) return DType::float16;
  if (kind == 'c' && size == 8) return DType::complex64;
  if (kind == 'c' && size == 16) return DType::complex128;
  exact = false;
  throw py::type_error("[tessera] NumPy arrays of dtype " + std::string(py::str(py::object(dt))) +
                       " are not supported (tessera holds bool, int8/16/32/64, uint8/16/32/64, "
                       "float16/32/64 and complex64/128)");
}

py::dtype numpy_dtype(DType dt) {
  const NumPy& np = numpy();
  switch (dt) {
    case DType::bool_: return np.dt_bool;
    case DType::int64: return np.dt_int64;
    case DType::float32: return np.dt_float32;
    case DType::float64: return np.dt_float64;
    default: break;
  }
  // NumPy has no bfloat16: array_to_python hands those out as float32.
  return py::dtype(std::string(dtype_name(dt == DType::bfloat16 ? DType::float32 : dt)));
}

// A NumPy array viewing `a`'s elements (with its strides: a view stays a
// view), which a capsule keeps alive; read-only when `a` is.
// The name of the capsules view_of makes (tessera_array_of finds them).
constexpr const char* kArrayCapsule = "tessera.Array";

py::array view_of(const Array& a) {
  std::vector<ssize_t> shape(a.shape().begin(), a.shape().end());
  std::vector<ssize_t> strides;
  const ssize_t es = static_cast<ssize_t>(dtype_size(a.dtype()));
  for (int64_t st : a.strides()) strides.push_back(static_cast<ssize_t>(st) * es);
  auto* keep = new Array(a);
  py::capsule owner(keep, kArrayCapsule, [](void* p) { delete static_cast<Array*>(p); });
  py::array out(numpy_dtype(a.dtype()), std::move(shape), std::move(strides), a.origin_raw(), owner);
  if (!a.writable()) py::detail::array_proxy(out.ptr())->flags &= ~kWriteable;
  return out;
}

// The converted arrays of the WriteBackScope in force on this thread.
thread_local std::vector<std::pair<py::object, Array>>* tl_write_back = nullptr;

// The Array behind a NumPy array that view_of made (the whole of it, same
// dtype, shape, strides and writability), or null. Passed back to tessera it
// is that Array, with no Python reference between: once Python lets go of
// the NumPy array (Program.run(consume=True)), a program holds the only
// reference and frees the elements at their last use, on any thread (a
// wrapped buffer could only be let go by a thread holding the GIL).
const Array* tessera_array_of(const py::array& arr, DType dt) {
  py::object base = arr.base();
  if (!base || !PyCapsule_IsValid(base.ptr(), kArrayCapsule)) return nullptr;
  auto* a = static_cast<const Array*>(PyCapsule_GetPointer(base.ptr(), kArrayCapsule));
  if (!a || a->dtype() != dt || a->origin_raw() != arr.data() ||
      a->ndim() != static_cast<int>(arr.ndim()) ||
      a->writable() != ((arr.flags() & kWriteable) != 0)) {
    return nullptr;
  }
  const ssize_t es = arr.itemsize();
  const std::vector<int64_t> strides = a->strides();
  for (ssize_t k = 0; k < arr.ndim(); ++k) {
    if (a->dim(static_cast<int>(k)) != arr.shape()[k] ||
        strides[static_cast<size_t>(k)] * es != arr.strides()[k]) {
      return nullptr;
    }
  }
  return a;
}

Array array_from_numpy(py::handle obj) {
  auto arr = py::reinterpret_borrow<py::array>(obj);
  bool exact = false;
  DType dt = dtype_for(arr.dtype(), exact);
  if (exact) {
    if (const Array* own = tessera_array_of(arr, dt)) return *own;
  }
  Shape shape(arr.shape(), arr.shape() + arr.ndim());
  const ssize_t es = arr.itemsize();
  // Any layout NumPy has (slices, transposes, negative or zero strides) is
  // wrapped as it is, as long as its strides are whole elements: writes
  // through it reach the caller's array, as they would in NumPy.
  bool whole_elements = (arr.flags() & kAligned) != 0;
  std::vector<int64_t> strides;
  int64_t lowest = 0, highest = 0;
  bool empty = false;
  for (ssize_t k = 0; k < arr.ndim(); ++k) {
    const ssize_t st = arr.strides()[k];
    whole_elements = whole_elements && st % es == 0;
    strides.push_back(st / es);
    empty = empty || arr.shape()[k] == 0;
    const int64_t span = (arr.shape()[k] - 1) * (st / es);
    (span < 0 ? lowest : highest) += arr.shape()[k] > 0 ? span : 0;
  }
  if (exact && whole_elements && !empty) {
    PyObject* ref = arr.ptr();
    void* data = const_cast<void*>(arr.data());
    const void* start = static_cast<const char*>(data) + lowest * es;
    Py_INCREF(ref);
    std::shared_ptr<void> owner(ref, [start](void* p) {
      release_python_reference(start, static_cast<PyObject*>(p));
    });
    {
      References& r = references();
      std::lock_guard lock(r.mutex);
      r.wrapped.emplace(start, ref);
    }
    const bool writable = (arr.flags() & kWriteable) != 0;
    return Array::wrap_strided(dt, std::move(shape), std::move(strides), data, lowest, highest,
                               writable, std::move(owner));
  }
  // A copy in tessera's own (aligned, C-order) storage; NumPy does the
  // strided walk and the widening.
  Array a(dt, std::move(shape));
  if (a.size() > 0) numpy().copyto(view_of(a), arr, py::arg("casting") = "safe");
  if (tl_write_back && a.size() > 0 && (arr.flags() & kWriteable) != 0) {
    tl_write_back->emplace_back(py::reinterpret_borrow<py::object>(obj), a);
  }
  return a;
}

// A 0-d NumPy array holding the NumPy scalar `obj` (new reference).
PyObject* PyArray_FromScalar_compat(py::handle obj) {
  static py::object asarray = py::module_::import("numpy").attr("asarray");
  return asarray(obj).release().ptr();
}

Value scalar_from_numpy(py::handle obj) {
  py::dtype dt = py::reinterpret_steal<py::dtype>(PyObject_GetAttrString(obj.ptr(), "dtype"));
  if (!dt) throw py::error_already_set();
  switch (dt.kind()) {
    case 'b': return Value(PyObject_IsTrue(obj.ptr()) == 1);
    case 'i':
    case 'u': {
      // Integer scalars keep their dtype, np.int64 too: NumPy's wrap-around
      // (np.int64(2**40) * np.int64(2**40) is 0, np.uint8(255) + 1 is 0) and
      // result dtypes, where a Python int would raise on overflow.
      auto a = py::reinterpret_steal<py::object>(PyArray_FromScalar_compat(obj));
      return Value(array_from_numpy(a).copy());
    }
    case 'f':
      if (dt.itemsize() == 8) return Value(PyFloat_AsDouble(obj.ptr()));
      [[fallthrough]];
    case 'c': {
      // NumPy 2's float32, float16 and complex scalars keep their dtype
      // (np.float32(1) * x is float32 for any x): a 0-d array of it.
      auto a = py::reinterpret_steal<py::object>(
          PyArray_FromScalar_compat(obj));
      return Value(array_from_numpy(a).copy());
    }
    default:
      throw py::type_error("[tessera] NumPy scalars of dtype " +
                           std::string(py::str(py::object(dt))) + " are not supported");
  }
}

Value convert(py::handle obj, int depth) {
  if (depth > kMaxNesting) {
    throw py::value_error("[tessera] lists or dicts nested deeper than " +
                          std::to_string(kMaxNesting) + " levels (a list containing itself?)");
  }
  PyObject* p = obj.ptr();
  if (p == Py_None) return Value();
  if (PyBool_Check(p)) return Value(p == Py_True);
  if (PyLong_CheckExact(p)) return Value(to_int64(obj));
  if (PyFloat_Check(p)) return Value(PyFloat_AS_DOUBLE(p));  // also numpy.float64
  if (PyComplex_CheckExact(p)) {
    return Value(Array::weak_complex({PyComplex_RealAsDouble(p), PyComplex_ImagAsDouble(p)}));
  }
  if (py::isinstance<py::array>(obj)) return Value(array_from_numpy(obj));
  if (PyUnicode_Check(p)) return Value(std::string(py::str(obj)));
  if (PyList_Check(p) || PyTuple_Check(p)) {
    List items;
    py::sequence seq = py::reinterpret_borrow<py::sequence>(obj);
    items.reserve(seq.size());
    for (py::handle item : seq) items.push_back(convert(item, depth + 1));
    if (PyTuple_Check(p)) return Value::tuple(std::move(items));
    return Value(std::move(items));
  }
  if (PyDict_Check(p)) {
    Dict d;
    d.reserve(static_cast<size_t>(PyDict_Size(p)));  // items and index made once
    for (auto [k, v] : py::reinterpret_borrow<py::dict>(obj)) {
      d.set(convert(k, depth + 1), convert(v, depth + 1));
    }
    return Value(std::move(d));
  }
  if (PyLong_Check(p)) return Value(to_int64(obj));  // int subclasses (IntEnum)
  if (PySlice_Check(p)) {
    auto part = [&](const char* name) -> std::optional<int64_t> {
      py::object v = obj.attr(name);
      if (v.is_none()) return std::nullopt;
      if (!PyIndex_Check(v.ptr())) {
        throw py::type_error("[tessera] slice parts must be integers or None, got '" +
                             type_name(v) + "'");
      }
      return to_int64(py::reinterpret_steal<py::object>(PyNumber_Index(v.ptr())));
    };
    return Value(Slice{part("start"), part("stop"), part("step")});
  }
  if (py::isinstance(obj, numpy().generic)) return scalar_from_numpy(obj);
  if (py::isinstance<FunctionHandle>(obj)) return obj.cast<const FunctionHandle&>().fn;
  if (py::isinstance<TiledHandle>(obj)) return obj.cast<const TiledHandle&>().value;
  unsupported(obj);
}

py::object array_to_python(const Array& a) {
  const NumPy& np = numpy();
  if (a.ndim() == 0) {
    switch (a.dtype()) {
      case DType::bool_: return np.bool_(a.get_bool(0));
      case DType::int64: return np.int64(a.get_int(0));
      case DType::float32: return np.float32(a.get_double(0));
      case DType::float64: return np.float64(a.get_double(0));
      default: {
        if (a.weak()) {  // a Python complex number stays one
          const std::complex<double> z = a.get_complex(0);
          return py::reinterpret_steal<py::object>(PyComplex_FromDoubles(z.real(), z.imag()));
        }
        // The NumPy scalar of the array's dtype (int8, float16, complex64, ...).
        Array own = a.dtype() == DType::bfloat16 ? a.astype(DType::float32) : a.copy();
        py::object v = view_of(own);
        return v[py::tuple()];
      }
    }
  }
  if (a.dtype() == DType::bfloat16) return view_of(a.astype(DType::float32));
  // A user's input buffer, or a view of it, comes back as a NumPy view of
  // the same memory, as NumPy would return it.
  if (is_wrapped(a.storage_data())) return view_of(a);
  // A buffer tessera still holds elsewhere (a constant of the program, a
  // value kept in a closure) is copied, so that writing into the result can
  // never change the program.
  return view_of(a.unique() ? a : a.copy());
}

// A list of numbers held unboxed (appended in a native loop) as Python's
// list: NumPy's scalars by `list(array)`, whose items NumPy boxes in C,
// about five times faster than calling np.int64(v) per item, with the same
// types and values; Python's numbers made directly.
py::object number_list_to_python(const NumberList& n) {
  DType dt;
  switch (n.kind) {
    case NumberKind::np_bool: dt = DType::bool_; break;
    case NumberKind::np_int64: dt = DType::int64; break;
    case NumberKind::np_float64: dt = DType::float64; break;
    case NumberKind::np_float32: dt = DType::float32; break;
    case NumberKind::np_int32: dt = DType::int32; break;
    default: {
      // Python's numbers: made directly, no Value in between.
      py::list out(n.bits.size());
      for (size_t i = 0; i < n.bits.size(); ++i) {
        const uint64_t b = n.bits[i];
        PyObject* x = n.kind == NumberKind::py_int ? PyLong_FromLongLong(static_cast<int64_t>(b))
                      : n.kind == NumberKind::py_float
                          ? PyFloat_FromDouble(std::bit_cast<double>(b))
                          : PyBool_FromLong(b != 0);
        if (!x) throw py::error_already_set();
        PyList_SET_ITEM(out.ptr(), static_cast<Py_ssize_t>(i), x);
      }
      return out;
    }
  }
  const size_t count = n.bits.size();
  Array packed(dt, Shape{static_cast<int64_t>(count)});
  for (size_t i = 0; i < count; ++i) {
    const uint64_t b = n.bits[i];
    switch (dt) {
      case DType::bool_: packed.data<bool>()[i] = b != 0; break;
      case DType::int64: packed.data<int64_t>()[i] = static_cast<int64_t>(b); break;
      case DType::int32:
        packed.data<int32_t>()[i] = static_cast<int32_t>(static_cast<int64_t>(b));
        break;
      case DType::float32:
        packed.data<float>()[i] = static_cast<float>(std::bit_cast<double>(b));
        break;
      default: packed.data<double>()[i] = std::bit_cast<double>(b); break;
    }
  }
  py::array arr = view_of(packed);
  PyObject* out = PySequence_List(arr.ptr());
  if (!out) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(out);
}

}  // namespace

DeferredReleases::DeferredReleases() : saved_(tl_deferred) { tl_deferred = &references_; }

DeferredReleases::~DeferredReleases() {
  tl_deferred = saved_;
  for (PyObject* p : references_) Py_DECREF(p);
}

WriteBackScope::WriteBackScope() : saved_(tl_write_back) { tl_write_back = &pending_; }

WriteBackScope::~WriteBackScope() {
  tl_write_back = saved_;
  for (auto& [obj, a] : pending_) {
    // The values came from this array, so unchanged ones convert back
    // exactly; changed ones are cast as NumPy's in-place writes cast.
    try {
      numpy().copyto(obj, view_of(a), py::arg("casting") = "unsafe");
    } catch (py::error_already_set& e) {
      e.discard_as_unraisable("tessera: copying a converted argument back");
    }
  }
}

Value to_value(py::handle obj) { return convert(obj, 0); }

py::object to_python(const Value& v) {
  switch (v.kind()) {
    case ValueKind::nil: return py::none();
    case ValueKind::boolean: return py::bool_(v.as_bool());
    case ValueKind::integer: return py::int_(v.as_int());
    case ValueKind::floating: return py::float_(v.as_float());
    case ValueKind::string: return py::str(v.as_string());
    case ValueKind::array: return array_to_python(v.as_array());
    case ValueKind::list: {
      NestingLevel level("tessera", v);
      if (const NumberList* n = v.number_items()) {  // unboxed: not written out as Values first
        return number_list_to_python(*n);
      }
      const List& items = v.as_list();
      if (v.is_tuple()) {
        py::tuple out(items.size());
        for (size_t i = 0; i < items.size(); ++i) out[i] = to_python(items[i]);
        return out;
      }
      py::list out(items.size());
      for (size_t i = 0; i < items.size(); ++i) out[i] = to_python(items[i]);
      return out;
    }
    case ValueKind::dict: {
      NestingLevel level("tessera", v);
      py::dict out;
      const Dict& d = v.as_dict();
      if (d.items.compact()) {  // numbers only: read in place, not written out as Values first
        for (size_t p = 0; p < d.size(); ++p)
          out[to_python(d.key_at(p))] = to_python(d.value_at(p));
        return out;
      }
      for (const auto& [k, val] : d.items) out[to_python(k)] = to_python(val);
      return out;
    }
    case ValueKind::function: return py::cast(FunctionHandle{v});
    case ValueKind::slice: {
      const Slice& s = v.as_slice();
      auto part = [](const std::optional<int64_t>& x) -> py::object {
        return x ? py::object(py::int_(*x)) : py::object(py::none());
      };
      return py::reinterpret_steal<py::object>(
          PySlice_New(part(s.start).ptr(), part(s.stop).ptr(), part(s.step).ptr()));
    }
    case ValueKind::tiled: return py::cast(TiledHandle{v});
  }
  return py::none();
}

void await_sole_ownership(const Value& v) {
  if (!v.is_array()) return;
  const Array& a = v.as_array();
  if (a.unique() || a.nbytes() < kCopyCheapBytes || is_wrapped(a.storage_data())) return;
  auto until = std::chrono::steady_clock::now() + kOwnershipWait;
  while (!a.unique() && std::chrono::steady_clock::now() < until) std::this_thread::yield();
}

void drain_released_references() {
  References& r = references();
  if (!r.any_pending.load(std::memory_order_acquire)) return;
  std::vector<PyObject*> pending;
  {
    std::lock_guard lock(r.mutex);
    r.any_pending.store(false, std::memory_order_relaxed);
    pending.swap(r.pending);
  }
  for (PyObject* p : pending) Py_DECREF(p);
}

void stop_releasing_references() {
  drain_released_references();
  references().stopped = true;
}

size_t wrapped_buffer_count() {
  References& r = references();
  std::lock_guard lock(r.mutex);
  return r.wrapped.size();
}

}  // namespace tessera::python
