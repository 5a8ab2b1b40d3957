// The library "ree" of torch operators (torch.ops.ree.*, docs/python.md): the schemas of the
// operators whose kernels are C++ (torch_ops_*.cpp), and their one Autograd kernel. The schemas
// are those torch.library.custom_op inferred from ree/ops.py's Python signatures, so callers and
// compiled graphs see the same operators. torch_ops_model.cpp adds rope, attention, embedding and
// sample to the same namespace (a FRAGMENT); ree/ops.py adds every fake (meta) kernel, for
// torch.compile.
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/basic_ops.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/library.h>

#include <string>
#include <vector>

#include "torch_ops_util.h"

namespace ree::torch_ops {
namespace {

// The operators defined here (each also gets forwardOnly as its Autograd kernel).
constexpr const char* kSchemas[] = {
    "cast(Tensor x, ScalarType dtype) -> Tensor",
    "linear(Tensor x, Tensor weight, Tensor? bias=None) -> Tensor",
    "matmul(Tensor a, Tensor b) -> Tensor",
    "rms_norm(Tensor x, Tensor? weight=None, float eps=1e-06, bool cast_before_weight=False) -> "
    "Tensor",
    "layer_norm(Tensor x, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor",
    "sum(Tensor x, SymInt dim=-1, bool keepdim=False) -> Tensor",
    "mean(Tensor x, SymInt dim=-1, bool keepdim=False) -> Tensor",
    "max(Tensor x, SymInt dim=-1, bool keepdim=False) -> Tensor",
    "min(Tensor x, SymInt dim=-1, bool keepdim=False) -> Tensor",
    "var(Tensor x, SymInt dim=-1, bool keepdim=False) -> Tensor",
    "softmax(Tensor x, SymInt dim=-1) -> Tensor",
    "log_softmax(Tensor x, SymInt dim=-1) -> Tensor",
    "argmax(Tensor x, SymInt dim=-1, bool keepdim=False) -> Tensor",
    "sigmoid(Tensor x) -> Tensor",
    "exp(Tensor x) -> Tensor",
    "expm1(Tensor x) -> Tensor",
    "log(Tensor x) -> Tensor",
    "log1p(Tensor x) -> Tensor",
    "tanh(Tensor x) -> Tensor",
    "erf(Tensor x) -> Tensor",
    "sin(Tensor x) -> Tensor",
    "cos(Tensor x) -> Tensor",
    "rsqrt(Tensor x) -> Tensor",
    "softplus(Tensor x) -> Tensor",
    "silu(Tensor x) -> Tensor",
    "gelu(Tensor x, str approximate=\"none\") -> Tensor",
    "swiglu(Tensor gate, Tensor up) -> Tensor",
    "geglu(Tensor gate, Tensor up, str approximate=\"tanh\") -> Tensor",
};

std::string operatorName(const std::string& schema) {
  return schema.substr(0, schema.find('('));
}

}  // namespace

// The RepOps are forward only. A call runs below autograd; when grad mode is on and an input
// requires grad, its floating outputs get a backward node that raises naming the operator (as
// calling backward through ree/ops.py's Python operators did).
void forwardOnly(const c10::OperatorHandle& op, c10::DispatchKeySet keys,
                 torch::jit::Stack* stack) {
  const size_t n_args = op.schema().arguments().size();
  std::vector<at::Tensor> grad_inputs;
  if (at::GradMode::is_enabled()) {
    for (const c10::IValue& value : torch::jit::last(*stack, n_args)) {
      if (value.isTensor() && value.toTensor().requires_grad()) {
        grad_inputs.push_back(value.toTensor());
      }
    }
  }
  {
    at::AutoDispatchBelowAutograd below_autograd;
    op.redispatchBoxed(keys & c10::after_autograd_keyset, stack);
  }
  if (grad_inputs.empty()) return;
  const std::string name = operatorName(op.schema().name());
  auto node = std::shared_ptr<torch::autograd::Error>(
      new torch::autograd::Error(
          name.substr(name.find("::") + 2).insert(0, "ree.ops.") +
              " has no backward: the RepOps are forward only (docs/python.md)",
          torch::autograd::collect_next_edges(grad_inputs)),
      torch::autograd::deleteNode);
  const size_t n_returns = op.schema().returns().size();
  for (const c10::IValue& value : torch::jit::last(*stack, n_returns)) {
    if (!value.isTensor()) continue;
    at::Tensor out = value.toTensor();
    if (at::isFloatingType(out.scalar_type())) torch::autograd::set_history(out, node);
  }
}

TORCH_LIBRARY(ree, m) {
  for (const char* schema : kSchemas)
    m.def(schema);
}

TORCH_LIBRARY_IMPL(ree, Autograd, m) {
  for (const char* schema : kSchemas) {
    m.impl(operatorName(schema).c_str(), torch::CppFunction::makeFromBoxedFunction<&forwardOnly>());
  }
}

}  // namespace ree::torch_ops
