#include "ree/models/engine.h"

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <filesystem>

#include "generation_sampling.h"
#include "ree/models/builtin.h"
#include "ree/models/causal_lm.h"
#include "ree/models/checkpoint.h"
#include "ree/models/tokenizer.h"

namespace ree {

using models::CausalLM;
using models::Checkpoint;
using models::Tokenizer;

std::string sha256Hex(const void* data, size_t bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(data, bytes, digest, &length, EVP_sha256(), nullptr);
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out += hex[digest[i] >> 4];
    out += hex[digest[i] & 15];
  }
  return out;
}

struct Engine::Impl {
  EngineOptions options;
  std::string directory;
  models::ModelConfig config;
  models::GenerationConfig generation;
  std::unique_ptr<Checkpoint> checkpoint;
  std::unique_ptr<Tokenizer> tokenizer;
  std::unique_ptr<OperationSet> ops;
  std::unique_ptr<CausalLM> model;
  std::vector<int64_t> eos;
  int max_context = 0;
};

Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

const models::ModelConfig& Engine::config() const {
  return impl_->config;
}
const models::Tokenizer* Engine::tokenizer() const {
  return impl_->tokenizer.get();
}
const EngineOptions& Engine::options() const {
  return impl_->options;
}
std::vector<int64_t> Engine::eosTokenIds() const {
  return impl_->eos;
}

Status Engine::create(const EngineOptions& options, std::unique_ptr<Engine>* out) {
  REE_CHECK_ARG(out != nullptr, "Engine::create: out is null");
  REE_CHECK_ARG(!options.model.empty(),
                "--model is required (a model directory or builtin:tiny-llama)");
  REE_CHECK_ARG(options.max_batch >= 1, "--max-batch must be >= 1 (got %d)", options.max_batch);
  REE_CHECK_ARG(options.max_context >= 0, "--max-context must be >= 0 (got %d)",
                options.max_context);
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->directory = options.model;
  if (models::isBuiltinModel(options.model)) {
    REE_RETURN_IF_ERROR(models::materializeBuiltinModel(options.model, &impl->directory));
  } else if (!std::filesystem::is_directory(options.model)) {
    return REE_FAIL(Status::kIoError,
                    "--model %s: not a directory (expected a Hugging Face model "
                    "directory with config.json and *.safetensors, or builtin:tiny-llama)",
                    options.model.c_str());
  }
  REE_RETURN_IF_ERROR(
      models::loadModelDirectoryConfigs(impl->directory, &impl->config, &impl->generation));
  impl->eos = models::effectiveEosTokenIds(impl->config, impl->generation);
  std::string tokenizer_path = impl->directory + "/tokenizer.json";
  if (std::filesystem::exists(tokenizer_path)) {
    REE_RETURN_IF_ERROR(Tokenizer::load(tokenizer_path, &impl->tokenizer));
  }
  REE_RETURN_IF_ERROR(Checkpoint::open(impl->directory, &impl->checkpoint));
  REE_RETURN_IF_ERROR(createOperationSet(options.operation_set, options.device, &impl->ops));
  models::LoadOptions load;
  load.weight_dtype = options.weight_dtype;
  REE_RETURN_IF_ERROR(CausalLM::load(impl->config, *impl->checkpoint, *impl->ops,
                                     models::LayerRange{}, &impl->model, load));
  int64_t context = std::min<int64_t>(impl->config.max_position_embeddings, 4096);
  if (options.max_context > 0) {
    if (options.max_context > impl->config.max_position_embeddings) {
      return REE_FAIL(Status::kInvalidArgument,
                      "--max-context %d exceeds the model's max_position_embeddings %lld",
                      options.max_context,
                      static_cast<long long>(impl->config.max_position_embeddings));
    }
    context = options.max_context;
  }
  impl->max_context = static_cast<int>(context);
  REE_RETURN_IF_ERROR(impl->model->allocateCache(options.max_batch, impl->max_context));
  out->reset(new Engine(std::move(impl)));
  return Status::kSuccess;
}

namespace {

using Clock = std::chrono::steady_clock;

struct ActiveSequence {
  size_t request = 0;
  int slot = 0;
  std::vector<int32_t> feed;  // tokens to run in the next step
  int cached = 0;             // tokens already in the KV cache
  int produced = 0;
  Clock::time_point start;
  Clock::time_point first_token;
  std::unique_ptr<models::DecodeStream> stream;
};

}  // namespace

Status Engine::generate(const std::vector<GenerationRequest>& requests,
                        std::vector<GenerationResult>* results, const TokenCallback& on_token) {
  REE_CHECK_ARG(results != nullptr, "Engine::generate: results is null");
  Impl& m = *impl_;
  results->assign(requests.size(), GenerationResult());
  int64_t vocab = m.config.vocab_size;
  // Tokenize and validate every request before any work, so a bad prompt fails fast.
  for (size_t r = 0; r < requests.size(); ++r) {
    const GenerationRequest& req = requests[r];
    GenerationResult& res = (*results)[r];
    if (!req.prompt_ids.empty()) {
      res.prompt_ids = req.prompt_ids;
    } else {
      if (!m.tokenizer) {
        return REE_FAIL(Status::kInvalidArgument,
                        "request %zu: the model directory has no tokenizer.json; pass token ids "
                        "(--prompt-ids)",
                        r);
      }
      REE_RETURN_IF_ERROR(
          m.tokenizer->encode(req.prompt_text, req.add_special_tokens, &res.prompt_ids));
    }
    if (res.prompt_ids.empty()) {
      return REE_FAIL(Status::kInvalidArgument, "request %zu: the prompt is empty", r);
    }
    for (size_t i = 0; i < res.prompt_ids.size(); ++i) {
      if (res.prompt_ids[i] < 0 || res.prompt_ids[i] >= vocab) {
        return REE_FAIL(Status::kInvalidArgument,
                        "request %zu: prompt token %zu is id %d, outside the vocabulary [0, %lld)",
                        r, i, res.prompt_ids[i], static_cast<long long>(vocab));
      }
    }
    if (static_cast<int>(res.prompt_ids.size()) >= m.max_context) {
      return REE_FAIL(
          Status::kInvalidArgument,
          "request %zu: the prompt has %zu tokens, the context holds %d (--max-context)", r,
          res.prompt_ids.size(), m.max_context);
    }
    REE_CHECK_ARG(req.max_new_tokens >= 1, "request %zu: --max-new-tokens must be >= 1 (got %d)", r,
                  req.max_new_tokens);
    REE_RETURN_IF_ERROR(models::validateSampling(req.sampling, r));
  }

  std::deque<size_t> waiting;
  for (size_t r = 0; r < requests.size(); ++r)
    waiting.push_back(r);
  std::vector<int> free_slots;
  for (int s = m.options.max_batch - 1; s >= 0; --s)
    free_slots.push_back(s);
  std::vector<ActiveSequence> active;
  std::vector<float> host_logits;

  while (!waiting.empty() || !active.empty()) {
    while (!waiting.empty() && !free_slots.empty()) {
      ActiveSequence seq;
      seq.request = waiting.front();
      waiting.pop_front();
      seq.slot = free_slots.back();
      free_slots.pop_back();
      seq.feed = (*results)[seq.request].prompt_ids;
      seq.start = Clock::now();
      if (m.tokenizer) seq.stream = std::make_unique<models::DecodeStream>(*m.tokenizer, true);
      active.push_back(std::move(seq));
    }
    StepBatch batch;
    std::vector<int32_t> ids;
    std::vector<int32_t> last_rows;
    batch.query_offsets.push_back(0);
    for (ActiveSequence& seq : active) {
      ids.insert(ids.end(), seq.feed.begin(), seq.feed.end());
      batch.query_offsets.push_back(static_cast<int32_t>(ids.size()));
      batch.cached_lens.push_back(seq.cached);
      batch.cache_slots.push_back(seq.slot);
      last_rows.push_back(static_cast<int32_t>(ids.size()) - 1);
    }
    REE_RETURN_IF_ERROR(batch.finalize());
    Tensor hidden, logits;
    REE_RETURN_IF_ERROR(m.model->embed(ids, batch, &hidden));
    REE_RETURN_IF_ERROR(m.model->runLayers(hidden, batch));
    REE_RETURN_IF_ERROR(m.model->logits(hidden, last_rows, &logits));
    host_logits.resize(static_cast<size_t>(logits.numel()));
    REE_RETURN_IF_ERROR(copyTensor(
        logits, Tensor::wrap(host_logits.data(), Device::cpu(), DType::kF32, logits.shape())));

    std::vector<ActiveSequence> still_active;
    for (size_t i = 0; i < active.size(); ++i) {
      ActiveSequence& seq = active[i];
      const GenerationRequest& req = requests[seq.request];
      GenerationResult& res = (*results)[seq.request];
      const float* row = host_logits.data() + i * vocab;
      res.step_logits_sha256.push_back(sha256Hex(row, vocab * sizeof(float)));
      int32_t token = 0;
      REE_RETURN_IF_ERROR(models::sampleNextToken(row, vocab, req.sampling,
                                                  static_cast<uint64_t>(seq.request),
                                                  static_cast<uint64_t>(seq.produced), &token));
      seq.cached += static_cast<int>(seq.feed.size());
      seq.produced += 1;
      res.output_ids.push_back(token);
      if (seq.produced == 1) seq.first_token = Clock::now();
      std::string piece;
      if (seq.stream) REE_RETURN_IF_ERROR(seq.stream->step(token, &piece));
      bool is_eos = std::find(m.eos.begin(), m.eos.end(), token) != m.eos.end();
      bool at_length = seq.produced >= req.max_new_tokens || seq.cached + 1 >= m.max_context;
      if (is_eos || at_length) {
        std::string tail;
        if (seq.stream) REE_RETURN_IF_ERROR(seq.stream->finish(&tail));
        piece += tail;
      }
      if (on_token) on_token(seq.request, token, piece);
      if (is_eos || at_length) {
        res.finish_reason = is_eos ? "eos" : "length";
        auto end = Clock::now();
        res.prefill_seconds = std::chrono::duration<double>(seq.first_token - seq.start).count();
        res.decode_seconds = std::chrono::duration<double>(end - seq.first_token).count();
        res.output_ids_sha256 =
            sha256Hex(res.output_ids.data(), res.output_ids.size() * sizeof(int32_t));
        if (m.tokenizer) {
          REE_RETURN_IF_ERROR(m.tokenizer->decode(res.output_ids, true, &res.text));
        }
        free_slots.push_back(seq.slot);
      } else {
        seq.feed.assign(1, token);
        still_active.push_back(std::move(seq));
      }
    }
    active = std::move(still_active);
  }
  return Status::kSuccess;
}

Status Engine::prefillLogits(const std::vector<int32_t>& ids, std::vector<float>* logits) {
  Impl& m = *impl_;
  REE_CHECK_ARG(logits != nullptr, "prefillLogits: logits is null");
  REE_CHECK_ARG(!ids.empty() && static_cast<int>(ids.size()) <= m.max_context,
                "prefillLogits: %zu tokens for a context of %d", ids.size(), m.max_context);
  StepBatch batch;
  batch.query_offsets = {0, static_cast<int32_t>(ids.size())};
  batch.cached_lens = {0};
  batch.cache_slots = {0};
  REE_RETURN_IF_ERROR(batch.finalize());
  Tensor hidden, out;
  REE_RETURN_IF_ERROR(m.model->embed(ids, batch, &hidden));
  REE_RETURN_IF_ERROR(m.model->runLayers(hidden, batch));
  std::vector<int32_t> rows(ids.size());
  for (size_t i = 0; i < rows.size(); ++i)
    rows[i] = static_cast<int32_t>(i);
  REE_RETURN_IF_ERROR(m.model->logits(hidden, rows, &out));
  logits->resize(static_cast<size_t>(out.numel()));
  return copyTensor(out, Tensor::wrap(logits->data(), Device::cpu(), DType::kF32, out.shape()));
}

}  // namespace ree
