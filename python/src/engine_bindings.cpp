// Engine bindings: ree::Engine (generation), the receipts of docs/receipt.md (made exactly as
// `ree-launch run --receipt-path` makes them) and their verification (as `ree-launch verify`).
// ree/engine.py is the Python face; this file converts arguments and results only.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <atomic>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "binding_util.h"
#include "ree/models/chat_template.h"
#include "ree/models/engine.h"
#include "ree/models/model_identity.h"
#include "ree/models/receipt.h"

namespace nb = nanobind;

namespace ree::python {
namespace {

// One request from Python: prompt text (or None with ids), ids, max_new_tokens, temperature,
// top_k, top_p, seed, add_special_tokens, top_logprobs (-1: none).
using RequestTuple = std::tuple<std::optional<std::string>, std::vector<int32_t>, int, float, int,
                                float, uint64_t, bool, int>;

// The engine's scheduling options, which never change results: the prefix cache, chunked prefill,
// decode lookahead, the KV pool's size in blocks and CUDA graphs (EngineOptions says what each
// does).
using SchedulingTuple = std::tuple<bool, int, bool, int64_t, bool>;

EngineOptions makeOptions(const std::string& model, const std::string& operation_set,
                          const std::string& repops_spec, const std::string& device,
                          int n_partitions, int max_batch, int max_context,
                          const std::string& weight_dtype, const SchedulingTuple& scheduling) {
  EngineOptions options;
  options.model = model;
  check(parseOperationSet(operation_set, &options.operation_set));
  check(parseRepOpsSpec(repops_spec, "repops_spec", &options.repops_spec));
  check(parseDevice(device, &options.device));
  options.n_partitions = n_partitions;
  options.max_batch = max_batch;
  options.max_context = max_context;
  std::tie(options.prefix_caching, options.prefill_chunk, options.decode_lookahead,
           options.kv_blocks, options.cuda_graphs) = scheduling;
  if (weight_dtype == "f32") {
    options.weight_dtype = DType::kF32;
  } else if (weight_dtype == "bf16") {
    options.weight_dtype = DType::kBF16;
  } else if (weight_dtype == "f16") {
    options.weight_dtype = DType::kF16;
  } else if (weight_dtype != "auto") {
    throw nb::value_error("weight_dtype must be auto, f32, bf16 or f16");
  }
  EngineOptionNames& names = options.names;
  names.operation_set = "operation_set";
  names.repops_spec = "repops_spec";
  names.max_batch = "max_batch";
  names.max_context = "max_context";
  names.kv_blocks = "kv_blocks";
  names.prefill_chunk = "prefill_chunk";
  return options;
}

GenerationRequest toRequest(const RequestTuple& tuple) {
  GenerationRequest request;
  const auto& [text, ids, max_new_tokens, temperature, top_k, top_p, seed, special, top_logprobs] =
      tuple;
  if (text) request.prompt_text = *text;
  request.prompt_ids = ids;
  request.max_new_tokens = max_new_tokens;
  request.sampling.temperature = temperature;
  request.sampling.top_k = top_k;
  request.sampling.top_p = top_p;
  request.sampling.seed = seed;
  request.add_special_tokens = special;
  request.top_logprobs = top_logprobs;
  return request;
}

nb::dict toDict(const GenerationResult& result) {
  nb::dict out;
  out["prompt_ids"] = result.prompt_ids;
  out["output_ids"] = result.output_ids;
  out["text"] = result.text;
  out["finish_reason"] = result.finish_reason;
  out["output_ids_sha256"] = result.output_ids_sha256;
  out["step_logits_sha256"] = result.step_logits_sha256;
  out["prefill_seconds"] = result.prefill_seconds;
  out["decode_seconds"] = result.decode_seconds;
  // Per output token: (its log-probability, [(token, log-probability) of the most likely]).
  std::vector<std::pair<float, std::vector<std::pair<int32_t, float>>>> logprobs;
  for (const TokenLogprobs& step : result.token_logprobs) {
    std::vector<std::pair<int32_t, float>> top;
    for (const TokenLogprob& alternative : step.top)
      top.emplace_back(alternative.token, alternative.logprob);
    logprobs.emplace_back(step.logprob, std::move(top));
  }
  out["token_logprobs"] = std::move(logprobs);
  return out;
}

// ree.StopFlag: set from another Python thread while generate() runs (the GIL is released there),
// it stops that generation's requests at the engine's next step (GenerationRequest::stop).
struct StopFlag {
  std::shared_ptr<std::atomic<bool>> flag = std::make_shared<std::atomic<bool>>(false);
};

class EngineHandle {
 public:
  EngineHandle(const std::string& model, const std::string& operation_set,
               const std::string& repops_spec, const std::string& device, int n_partitions,
               int max_batch, int max_context, const std::string& weight_dtype,
               const SchedulingTuple& scheduling) {
    options_ = makeOptions(model, operation_set, repops_spec, device, n_partitions, max_batch,
                           max_context, weight_dtype, scheduling);
    Status status;
    {
      nb::gil_scoped_release release;
      status = Engine::create(options_, &engine_);
    }
    check(status);
  }

  // The results as dicts and the run's receipt (docs/receipt.md) as its file text; no receipt
  // ("") when `stop` ended a request before its first token (a receipt holds >= 1 per request).
  // on_token(request, token, text) is called as each token comes, with the GIL; if it raises, the
  // requests stop (as by `stop`, which is set, if given) and generate raises that exception.
  std::pair<std::vector<nb::dict>, std::string> generate(
      const std::vector<RequestTuple>& tuples, const StopFlag* stop,
      const std::optional<nb::callable>& on_token) {
    const std::shared_ptr<std::atomic<bool>> flag =
        stop != nullptr ? stop->flag : std::make_shared<std::atomic<bool>>(false);
    std::vector<GenerationRequest> requests;
    for (const RequestTuple& tuple : tuples) {
      requests.push_back(toRequest(tuple));
      if (stop != nullptr || on_token) requests.back().stop = flag;
    }
    std::exception_ptr callback_error;  // the first exception of on_token
    TokenCallback callback;
    if (on_token) {
      callback = [&](size_t request, int32_t token, const std::string& text) {
        nb::gil_scoped_acquire gil;
        if (callback_error) return;
        try {
          (*on_token)(request, token, text);
        } catch (...) {
          callback_error = std::current_exception();
          flag->store(true, std::memory_order_release);
        }
      };
    }
    std::vector<GenerationResult> results;
    std::string receipt_text;
    Status status;
    {
      nb::gil_scoped_release release;
      status = engine_->generate(requests, &results, callback);
      bool every_one_has_tokens = true;
      for (const GenerationResult& result : results)
        every_one_has_tokens = every_one_has_tokens && !result.output_ids.empty();
      if (status == Status::kSuccess && every_one_has_tokens)
        status = receiptText(requests, results, &receipt_text);
    }
    if (callback_error) std::rethrow_exception(callback_error);
    check(status);
    std::vector<nb::dict> dicts;
    for (const GenerationResult& result : results)
      dicts.push_back(toDict(result));
    return {std::move(dicts), std::move(receipt_text)};
  }

  // The model's chat template applied to (role, content) messages, with the assistant's header.
  std::string renderChat(const std::vector<std::pair<std::string, std::string>>& messages) {
    models::ModelChatTemplate loaded;
    check(models::loadModelChatTemplate(options_.model, &loaded));
    std::vector<models::ChatMessage> chat;
    for (const auto& [role, content] : messages)
      chat.push_back({role, content});
    models::ChatRenderOptions render;
    render.add_generation_prompt = true;
    render.bos_token = loaded.bos_token;
    render.eos_token = loaded.eos_token;
    std::string prompt;
    check(loaded.chat_template->render(chat, render, &prompt));
    return prompt;
  }

  // (verdict, summary, report JSON) of re-executing a receipt's text on this engine's model and
  // device, with the receipt's own options (as `ree-launch verify`).
  std::tuple<std::string, std::string, std::string> verify(const std::string& text) {
    VerifyReport report;
    {
      nb::gil_scoped_release release;
      if (verifyText(text, &report) != Status::kSuccess) {
        report.verdict = Verdict::kCouldNotVerify;
        report.summary = std::string("could not verify: ") + lastErrorMessage();
        finishVerifyReport(&report);
      }
    }
    return {verdictName(report.verdict), report.summary, report.json};
  }

  int maxContext() const { return engine_->maxContext(); }

  // The KV pool and the scheduler's counters over this engine's life (a server's /metrics).
  nb::dict stats() const {
    nb::dict out;
    out["kv_cache_blocks"] = engine_->kvCacheBlocks();
    out["kv_block_size"] = engine_->kvCacheBlockSize();
    out["kv_cache_blocks_used"] = engine_->kvCacheBlocksUsed();
    out["kv_preemptions"] = engine_->kvPreemptions();
    out["kv_prefix_hit_tokens"] = engine_->kvPrefixHitTokens();
    out["lookahead_steps"] = engine_->lookaheadSteps();
    out["graph_steps"] = engine_->graphSteps();
    return out;
  }
  const std::string& modelDirectory() const { return engine_->modelDirectory(); }

 private:
  Status receiptText(const std::vector<GenerationRequest>& requests,
                     const std::vector<GenerationResult>& results, std::string* text) const {
    ReceiptRunInfo run;
    run.model = options_.model;
    REE_RETURN_IF_ERROR(computeModelIdentity(options_.model, &run.identity));
    run.options = engine_->options();
    run.max_context = engine_->maxContext();
    run.plan = engine_->plan();
    for (size_t s = 0; s < run.plan.size(); ++s)
      run.stage_devices.push_back(options_.device.str());
    Receipt receipt;
    REE_RETURN_IF_ERROR(makeReceipt(run, requests, results, &receipt));
    return receiptFileText(receipt, text);
  }

  // kSuccess when `report` holds a verdict; an error when the verification could not run.
  Status verifyText(const std::string& text, VerifyReport* report) const {
    Receipt receipt;
    REE_RETURN_IF_ERROR(parseReceipt(text, "receipt", &receipt));
    Status status = validateReceipt(receipt, nullptr);
    if (status == Status::kMismatch) {
      report->verdict = Verdict::kMismatch;
      report->field = "receipt";
      report->summary = std::string("mismatch: the receipt is inconsistent: ") + lastErrorMessage();
      finishVerifyReport(report);
      return Status::kSuccess;
    }
    REE_RETURN_IF_ERROR(status);
    ModelIdentity identity;
    REE_RETURN_IF_ERROR(computeModelIdentity(options_.model, &identity));
    if (!checkModelIdentity(receipt, identity, report)) return Status::kSuccess;
    EngineOptions options;
    options.model = options_.model;
    options.device = options_.device;
    options.n_partitions = options_.n_partitions;
    REE_RETURN_IF_ERROR(receiptEngineOptions(receipt, &options));
    std::unique_ptr<Engine> engine;
    REE_RETURN_IF_ERROR(Engine::create(options, &engine));
    status = verifyReceipt(receipt, *engine, identity, report);
    Status shut = engine->shutdown();
    REE_RETURN_IF_ERROR(status);
    return shut;
  }

  EngineOptions options_;
  std::unique_ptr<Engine> engine_;
};

}  // namespace

void bindEngine(nb::module_& module) {
  using namespace nb::literals;
  nb::class_<StopFlag>(module, "StopFlag")
      .def(nb::init<>())
      .def("set", [](StopFlag& stop) { stop.flag->store(true, std::memory_order_release); })
      .def("is_set",
           [](const StopFlag& stop) { return stop.flag->load(std::memory_order_acquire); });
  nb::class_<EngineHandle>(module, "Engine")
      .def(nb::init<const std::string&, const std::string&, const std::string&, const std::string&,
                    int, int, int, const std::string&, const SchedulingTuple&>(),
           "model"_a, "operation_set"_a, "repops_spec"_a, "device"_a, "n_partitions"_a,
           "max_batch"_a, "max_context"_a, "weight_dtype"_a, "scheduling"_a)
      .def("generate", &EngineHandle::generate, "requests"_a, "stop"_a.none() = nb::none(),
           "on_token"_a.none() = nb::none())
      .def("render_chat", &EngineHandle::renderChat, "messages"_a)
      .def("verify", &EngineHandle::verify, "receipt_text"_a)
      .def_prop_ro("max_context", &EngineHandle::maxContext)
      .def_prop_ro("stats", &EngineHandle::stats)
      .def_prop_ro("model_directory", &EngineHandle::modelDirectory);
  module.attr("runtime_version") = kRuntimeVersion;
  module.attr("repops_spec_versions") = kRepOpsSpecVersions;
}

}  // namespace ree::python
