// The fast eager entry of the C++ operators (docs/python.md, "Calling the operators"):
// ree.ops.<name> is a CPython builtin made here for the operator torch.ops.ree.<name>.default. A
// plain eager call (tensors exactly torch.Tensor or nn.Parameter on the CPU or CUDA, no torch
// function or dispatch mode, no autograd graph to record, no profiler, arguments of simple types)
// is parsed by the operator's schema and runs its CPU or CUDA kernel below autograd, as the
// dispatcher's route does for such a call (forwardOnly in torch_ops_library.cpp); every other call
// goes to the OpOverload with the same arguments, so tracing, fake tensors, vmap, torch.compile,
// argument errors and the "has no backward" error stay the operator's own. The OpOverload path
// spends most of its host time in Python (OpOverload.__call__) and in torch's generic argument
// parsing; this one does not.
//
// This file also makes libree_torch_ops.so importable as the extension module ree.libree_torch_ops
// (ree/ops.py imports it after torch.ops.load_library, which registered the operators).
#include <Python.h>

#include <ATen/PythonTorchFunctionTLS.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ree::torch_ops {
namespace {

// How the fast path reads an argument of the schema; kOther: never on the fast path.
enum class ArgKind {
  kTensor,
  kOptionalTensor,
  kInt,
  kBool,
  kFloat,
  kOptionalFloat,
  kString,
  kScalarType,
  kOther
};

constexpr size_t kMaxArgs = 8;  // the most arguments of a fast operator (ree::sample has 7)
constexpr size_t kMaxOps = 64;  // the most fast operators (one C function per slot, below)

// One operator's fast entry: its schema read once, and the OpOverload of the slow path.
struct FastOp {
  explicit FastOp(c10::OperatorHandle handle) : op(std::move(handle)) {}
  c10::OperatorHandle op;
  PyObject* overload = nullptr;  // torch.ops.ree.<name>.default (a strong reference)
  bool eligible = false;         // every argument has a kind, and one Tensor is returned
  std::vector<ArgKind> kinds;    // per argument of the schema
  std::vector<PyObject*> names;  // per argument: its name, interned (strong references)
  std::vector<bool> kwarg_only;  // per argument
  std::vector<std::optional<c10::IValue>> defaults;  // per argument
  std::string name, doc;  // the builtin's __name__ and __doc__ (text signature first)
  PyMethodDef def{};
  // Its CUDA kernel may wait for the GPU (host tables through a full pinned ring, embedding's id
  // check): the operators tagged cudagraph_unsafe (torch_ops_model.cpp).
  bool cuda_may_wait = false;
};

std::array<FastOp*, kMaxOps> g_ops{};  // slot -> operator (never freed: the module stays loaded)
size_t g_op_count = 0;
uint64_t g_fast_calls = 0;  // calls that took the fast path (counted under the GIL; tests read it)

ArgKind kindOf(const c10::Argument& arg) {
  if (arg.alias_info() != nullptr) return ArgKind::kOther;
  const c10::TypePtr& type = arg.real_type();
  switch (type->kind()) {
    case c10::TypeKind::TensorType:
      return ArgKind::kTensor;
    case c10::TypeKind::IntType:
    case c10::TypeKind::SymIntType:
      return ArgKind::kInt;
    case c10::TypeKind::BoolType:
      return ArgKind::kBool;
    case c10::TypeKind::FloatType:
      return ArgKind::kFloat;
    case c10::TypeKind::StringType:
      return ArgKind::kString;
    case c10::TypeKind::ScalarTypeType:
      return ArgKind::kScalarType;
    case c10::TypeKind::OptionalType: {
      const auto& element = type->expectRef<c10::OptionalType>().getElementType();
      if (element->kind() == c10::TypeKind::TensorType) return ArgKind::kOptionalTensor;
      if (element->kind() == c10::TypeKind::FloatType) return ArgKind::kOptionalFloat;
      return ArgKind::kOther;
    }
    default:
      return ArgKind::kOther;
  }
}

// Reads the schema of `fast.op` into `fast` (argument kinds, names, defaults, eligibility).
bool readSchema(FastOp& fast) {
  const c10::FunctionSchema& schema = fast.op.schema();
  const auto& returns = schema.returns();
  fast.eligible = schema.arguments().size() <= kMaxArgs && returns.size() == 1 &&
                  returns[0].real_type()->kind() == c10::TypeKind::TensorType &&
                  returns[0].alias_info() == nullptr && !schema.is_mutable();
  for (const c10::Argument& arg : schema.arguments()) {
    fast.kinds.push_back(kindOf(arg));
    fast.eligible = fast.eligible && fast.kinds.back() != ArgKind::kOther;
    PyObject* name = PyUnicode_InternFromString(arg.name().c_str());
    if (name == nullptr) return false;
    fast.names.push_back(name);
    fast.kwarg_only.push_back(arg.kwarg_only());
    fast.defaults.push_back(arg.default_value());
  }
  return true;
}

// One call's arguments as the operator's boxed stack, with what decides the route.
struct Call {
  torch::jit::Stack stack;
  c10::DispatchKeySet tensor_keys;  // the union of the tensors' dispatch keys
  bool requires_grad = false;       // some tensor requires grad
};

bool pushTensor(PyObject* obj, Call& call) {
  if (!THPVariable_CheckExact(obj)) return false;  // subclasses may define __torch_function__
  const at::Tensor& tensor = THPVariable_Unpack(obj);
  call.tensor_keys = call.tensor_keys | tensor.key_set();
  call.requires_grad = call.requires_grad || tensor.requires_grad();
  call.stack.emplace_back(tensor);
  return true;
}

// Pushes `obj` as torch's argument parsing would for `kind` (torch::jit::toIValue), or returns
// false for anything but the plain Python types (those go the OpOverload's way, errors included).
bool pushArg(ArgKind kind, PyObject* obj, Call& call) {
  switch (kind) {
    case ArgKind::kTensor:
      return pushTensor(obj, call);
    case ArgKind::kOptionalTensor:
      if (obj != Py_None) return pushTensor(obj, call);
      call.stack.emplace_back();
      return true;
    case ArgKind::kInt: {
      if (!PyLong_CheckExact(obj)) return false;  // bool, numpy and symbolic ints: slow path
      int overflow = 0;
      const long long value = PyLong_AsLongLongAndOverflow(obj, &overflow);
      if (overflow != 0) return false;
      call.stack.emplace_back(static_cast<int64_t>(value));
      return true;
    }
    case ArgKind::kBool:
      if (obj != Py_True && obj != Py_False) return false;
      call.stack.emplace_back(obj == Py_True);
      return true;
    case ArgKind::kOptionalFloat:
      if (obj == Py_None) {
        call.stack.emplace_back();
        return true;
      }
      return pushArg(ArgKind::kFloat, obj, call);
    case ArgKind::kFloat: {
      if (PyFloat_CheckExact(obj)) {
        call.stack.emplace_back(PyFloat_AS_DOUBLE(obj));
        return true;
      }
      if (!PyLong_CheckExact(obj)) return false;
      const double value = PyLong_AsDouble(obj);  // as float(obj); an overflow takes the slow path
      if (value == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
      call.stack.emplace_back(value);
      return true;
    }
    case ArgKind::kString: {
      if (!PyUnicode_CheckExact(obj)) return false;
      Py_ssize_t size = 0;
      const char* text = PyUnicode_AsUTF8AndSize(obj, &size);
      if (text == nullptr) {
        PyErr_Clear();
        return false;
      }
      call.stack.emplace_back(std::string(text, static_cast<size_t>(size)));
      return true;
    }
    case ArgKind::kScalarType:
      if (!THPDtype_Check(obj)) return false;
      call.stack.emplace_back(static_cast<int64_t>(reinterpret_cast<THPDtype*>(obj)->scalar_type));
      return true;
    case ArgKind::kOther:
      return false;
  }
  return false;
}

// The argument index named `name`, or -1.
int argumentIndex(const FastOp& fast, PyObject* name) {
  for (size_t i = 0; i < fast.names.size(); ++i)
    if (fast.names[i] == name) return static_cast<int>(i);  // interned: the usual case
  for (size_t i = 0; i < fast.names.size(); ++i)
    if (PyUnicode_Compare(fast.names[i], name) == 0) return static_cast<int>(i);
  PyErr_Clear();
  return -1;
}

// Fills `call` from a vectorcall's arguments by the schema, or returns false where torch's own
// parsing must decide (too many arguments, unknown or repeated keywords, missing arguments,
// values not of the plain types).
bool parseCall(const FastOp& fast, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
               Call& call) {
  const size_t n = fast.kinds.size();
  if (nargs < 0 || static_cast<size_t>(nargs) > n) return false;
  std::array<PyObject*, kMaxArgs> given{};
  for (Py_ssize_t i = 0; i < nargs; ++i) {
    if (fast.kwarg_only[i]) return false;
    given[i] = args[i];
  }
  const Py_ssize_t n_keywords = kwnames == nullptr ? 0 : PyTuple_GET_SIZE(kwnames);
  for (Py_ssize_t k = 0; k < n_keywords; ++k) {
    const int at = argumentIndex(fast, PyTuple_GET_ITEM(kwnames, k));
    if (at < 0 || given[at] != nullptr) return false;
    given[at] = args[nargs + k];
  }
  call.stack.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (given[i] == nullptr) {
      if (!fast.defaults[i]) return false;
      call.stack.push_back(*fast.defaults[i]);
    } else if (!pushArg(fast.kinds[i], given[i], call)) {
      return false;
    }
  }
  return true;
}

// The backend key of a call whose dispatch keys (the tensors', with the thread's included keys
// and without its excluded ones, as the dispatcher computes them) are those of plain dense CPU or
// CUDA tensors: besides the backend, at most autograd, ADInplaceOrView and BackendSelect. Python
// (fake, functional tensors, dispatch modes), functorch (vmap), functionalization, autocast,
// tracing, conjugate/negative views, named, sparse or meta tensors, or a CPU/CUDA mix: nullopt.
std::optional<c10::DispatchKey> plainBackend(c10::DispatchKeySet tensor_keys) {
  const c10::impl::LocalDispatchKeySet local = c10::impl::tls_local_dispatch_key_set();
  const c10::DispatchKeySet keys = (tensor_keys | local.included_) - local.excluded_;
  static const c10::DispatchKeySet cpu_allowed{c10::DispatchKey::CPU, c10::DispatchKey::AutogradCPU,
                                               c10::DispatchKey::ADInplaceOrView,
                                               c10::DispatchKey::BackendSelect};
  static const c10::DispatchKeySet cuda_allowed{
      c10::DispatchKey::CUDA, c10::DispatchKey::AutogradCUDA, c10::DispatchKey::ADInplaceOrView,
      c10::DispatchKey::BackendSelect};
  // Raw bits: DispatchKeySet's `-` removes functionality bits only, not backend ones.
  if (keys.has(c10::DispatchKey::CPU) && (keys.raw_repr() & ~cpu_allowed.raw_repr()) == 0)
    return c10::DispatchKey::CPU;
  if (keys.has(c10::DispatchKey::CUDA) && (keys.raw_repr() & ~cuda_allowed.raw_repr()) == 0)
    return c10::DispatchKey::CUDA;
  return std::nullopt;
}

// The GIL released for a CPU kernel (which may run long); taken back before anything else.
class GilRelease {
 public:
  GilRelease() : state_(PyEval_SaveThread()) {}
  ~GilRelease() { PyEval_RestoreThread(state_); }
  GilRelease(const GilRelease&) = delete;
  GilRelease& operator=(const GilRelease&) = delete;

 private:
  PyThreadState* state_;
};

// Runs the backend kernel as forwardOnly does for a call that needs no autograd node: below
// autograd (ADInplaceOrView is a fallthrough), the outputs left on `stack`.
void redispatchBelowAutograd(const FastOp& fast, c10::DispatchKey backend,
                             torch::jit::Stack& stack) {
  at::AutoDispatchBelowAutograd below_autograd;
  if (backend == c10::DispatchKey::CPU || fast.cuda_may_wait) {
    GilRelease no_gil;
    fast.op.redispatchBoxed(c10::DispatchKeySet(backend), &stack);
  } else {  // CUDA: the kernel only queues work; keep the GIL rather than pay for its release
    fast.op.redispatchBoxed(c10::DispatchKeySet(backend), &stack);
  }
}

// The kernel's output tensor, or NULL with the Python exception torch's binding would raise
// (c10::ValueError -> ValueError, c10::TypeError -> TypeError, ...; C++ warnings as warnings).
PyObject* runKernel(const FastOp& fast, c10::DispatchKey backend, torch::jit::Stack& stack) {
  HANDLE_TH_ERRORS
  redispatchBelowAutograd(fast, backend, stack);
  return THPVariable_Wrap(std::move(stack.back()).toTensor());
  END_HANDLE_TH_ERRORS
}

// Whether nothing outside the dispatcher's backend route must see a call: no torch function or
// dispatch mode, no RecordFunction callbacks (the profiler, which the dispatcher would feed).
bool plainContext() {
  return !at::impl::torch_function_mode_enabled() &&
         !c10::impl::TorchDispatchModeTLS::any_modes_set() && !at::hasCallbacks();
}

PyObject* callOp(const FastOp& fast, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  if (fast.eligible && plainContext()) {
    Call call;
    if (parseCall(fast, args, nargs, kwnames, call) &&
        !(call.requires_grad && at::GradMode::is_enabled())) {
      if (const std::optional<c10::DispatchKey> backend = plainBackend(call.tensor_keys)) {
        ++g_fast_calls;
        return runKernel(fast, *backend, call.stack);
      }
    }
  }
  return PyObject_Vectorcall(fast.overload, args, static_cast<size_t>(nargs), kwnames);
}

// One C function per slot: a builtin's only state is its PyMethodDef, so the slot names the op.
using FastCallFunction = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t, PyObject*);

template <size_t Slot>
PyObject* callSlot(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs,
                   PyObject* kwnames) {
  return callOp(*g_ops[Slot], args, nargs, kwnames);
}

template <size_t... Slots>
constexpr std::array<FastCallFunction, sizeof...(Slots)> slotFunctions(
    std::index_sequence<Slots...>) {
  return {&callSlot<Slots>...};
}

constexpr std::array<FastCallFunction, kMaxOps> kSlotFunctions =
    slotFunctions(std::make_index_sequence<kMaxOps>());

// fast_op(name, overload, doc, module_name): the builtin for ree::<name>, whose slow path calls
// `overload`; `doc` starts with its text signature ("sum(x, dim=-1, keepdim=False)\n--\n\n").
PyObject* makeFastOp(PyObject* module, PyObject* args) {
  HANDLE_TH_ERRORS
  const char* name = nullptr;
  PyObject* overload = nullptr;
  const char* doc = nullptr;
  PyObject* module_name = nullptr;
  if (!PyArg_ParseTuple(args, "sOsU:fast_op", &name, &overload, &doc, &module_name)) return nullptr;
  if (g_op_count == kMaxOps) {
    PyErr_Format(PyExc_RuntimeError, "ree: more than %d fast operators", static_cast<int>(kMaxOps));
    return nullptr;
  }
  auto fast = std::make_unique<FastOp>(
      c10::Dispatcher::singleton().findSchemaOrThrow((std::string("ree::") + name).c_str(), ""));
  if (!readSchema(*fast)) return nullptr;
  Py_INCREF(overload);
  fast->overload = overload;
  fast->name = name;
  fast->doc = doc;
  fast->cuda_may_wait = fast->op.hasTag(at::Tag::cudagraph_unsafe);
  fast->def = {
      fast->name.c_str(),
      reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(kSlotFunctions[g_op_count])),
      METH_FASTCALL | METH_KEYWORDS, fast->doc.c_str()};
  FastOp* op = fast.release();
  g_ops[g_op_count++] = op;
  return PyCFunction_NewEx(&op->def, module, module_name);
  END_HANDLE_TH_ERRORS
}

PyObject* fastCalls(PyObject* /*module*/, PyObject* /*unused*/) {
  return PyLong_FromUnsignedLongLong(g_fast_calls);
}

PyMethodDef kModuleMethods[] = {
    {"fast_op", makeFastOp, METH_VARARGS,
     "fast_op(name, overload, doc, module_name)\n--\n\nThe fast builtin of ree::<name>."},
    {"fast_calls", fastCalls, METH_NOARGS,
     "fast_calls()\n--\n\nHow many calls took the fast path (for tests)."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef kModule = {PyModuleDef_HEAD_INIT,
                       "libree_torch_ops",
                       "The fast eager entries of ree.ops' C++ operators (torch_ops_fast.cpp).",
                       -1,
                       kModuleMethods,
                       nullptr,
                       nullptr,
                       nullptr,
                       nullptr};

}  // namespace
}  // namespace ree::torch_ops

PyMODINIT_FUNC PyInit_libree_torch_ops() {
  return PyModule_Create(&ree::torch_ops::kModule);
}
