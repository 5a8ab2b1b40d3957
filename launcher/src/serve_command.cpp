#include "serve_command.h"

#include <cstdio>
#include <cxxopts.hpp>

#include "flag_values.h"
#include "ree/core/device.h"
#include "ree/core/parallel.h"
#include "ree/core/text.h"

namespace ree::launcher {
namespace {

constexpr int kIntMax = 0x7fffffff;

// cxxopts quotes with U+2018/U+2019; one-line ASCII is easier to grep (as `run`'s errors).
std::string plainQuotes(std::string message) {
  for (const char* quote : {"\xe2\x80\x98", "\xe2\x80\x99"}) {
    for (size_t at = message.find(quote); at != std::string::npos; at = message.find(quote, at)) {
      message.replace(at, 3, "'");
    }
  }
  return printableText(message, 200);
}

std::shared_ptr<cxxopts::Value> value(const char* default_value = nullptr) {
  auto v = cxxopts::value<std::string>();
  if (default_value != nullptr) v->default_value(default_value);
  return v;
}

cxxopts::Options serveOptions() {
  cxxopts::Options options("ree-launch serve",
                           "OpenAI-compatible HTTP server: every answer names a receipt that "
                           "`ree-launch verify` checks (docs/serving.md).");
  options.custom_help("--model DIR|FILE.gguf|smollm2|builtin:tiny-llama [options]");
  // clang-format off
  options.add_options("Model")
    ("model", "Hugging Face model directory, .gguf file or builtin:tiny-llama", value())
    ("served-model-name", "The name clients give as \"model\" (default: --model as given)", value())
    ("dtype", "Weight dtype: auto (as stored), f32, bf16, f16", value("auto"))
    ("operation-set", "default, deterministic or reproducible (bits independent of batch-mates "
                      "and device)", value("reproducible"))
    ("repops-spec", "repops-1, repops-2 or repops-3 (the reproducible set's arithmetic)", value("repops-1"))
    ("device", "cpu, cuda or cuda:N (default: cuda:0 when a GPU is visible, else cpu)", value())
    ("cpu-only", "Run on the CPU (same as --device cpu)")
    ("threads", "CPU threads for CPU kernels; 0 = all, at most 4096", value("0"))
    ("max-batch", "Sequences the engine runs together (a request brings n; the others wait and join at a step boundary), 1..1048576", value("8"))
    ("max-context", "Tokens per sequence (prompt + max_tokens); 0 = min(model's maximum, 4096)", value("0"));
  options.add_options("Server")
    ("host", "Address to listen on (another than loopback exposes the server)", value("127.0.0.1"))
    ("port", "TCP port, 0..65535 (0: any free port, printed on the listening line)", value("8000"))
    ("api-key", "Require \"Authorization: Bearer KEY\" on /v1/* (default: no key)", value())
    ("receipt-dir", "Where receipts are kept, one file per request (default: "
                    "$REE_CACHE_DIR/receipts, $XDG_CACHE_HOME/ree/receipts or ~/.cache/ree/receipts)", value())
    ("max-body-bytes", "Largest request body, 1..1073741824 (413 beyond)", value("1048576"))
    ("max-queue", "Requests waiting for the engine, 1..1000000 (429 beyond)", value("1024"))
    ("http-threads", "Connections served at once (a streaming client holds one), 1..4096", value("64"))
    ("h,help", "Print this help");
  // clang-format on
  return options;
}

Status readEngineFlags(const cxxopts::ParseResult& parsed, EngineOptions* engine) {
  auto text = [&](const char* name) { return parsed[name].as<std::string>(); };
  if (!parsed.count("model") || text("model").empty()) {
    return REE_FAIL(
        Status::kInvalidArgument,
        "--model is required (a model directory, a .gguf file, smollm2 or builtin:tiny-llama)");
  }
  engine->model = text("model");
  const std::string dtype = text("dtype");
  if (dtype == "f32") engine->weight_dtype = DType::kF32;
  if (dtype == "bf16") engine->weight_dtype = DType::kBF16;
  if (dtype == "f16") engine->weight_dtype = DType::kF16;
  if (dtype != "auto" && dtype != "f32" && dtype != "bf16" && dtype != "f16") {
    return REE_FAIL(Status::kInvalidArgument, "--dtype '%s' is not one of auto, f32, bf16, f16",
                    printableText(dtype, 40).c_str());
  }
  REE_RETURN_IF_ERROR(parseOperationSet(text("operation-set"), &engine->operation_set));
  REE_RETURN_IF_ERROR(parseRepOpsSpec(text("repops-spec"), "--repops-spec", &engine->repops_spec));
  if (parsed.count("cpu-only") && parsed.count("device")) {
    return REE_FAIL(Status::kInvalidArgument, "--cpu-only contradicts --device");
  }
  if (parsed.count("device")) {
    REE_RETURN_IF_ERROR(parseDevice(text("device"), &engine->device));
  } else {
    engine->device =
        !parsed.count("cpu-only") && cudaDeviceCount() > 0 ? Device::cuda(0) : Device::cpu();
  }
  REE_RETURN_IF_ERROR(
      parseIntFlag("--max-batch", text("max-batch"), 1, 1 << 20, &engine->max_batch));
  REE_RETURN_IF_ERROR(
      parseIntFlag("--max-context", text("max-context"), 0, kIntMax, &engine->max_context));
  int threads = 0;
  REE_RETURN_IF_ERROR(parseIntFlag("--threads", text("threads"), 0, 4096, &threads));
  if (threads > 0) setCpuThreads(threads);
  return Status::kSuccess;
}

Status readServerFlags(const cxxopts::ParseResult& parsed, server::ServerOptions* out) {
  auto text = [&](const char* name) { return parsed[name].as<std::string>(); };
  out->host = text("host");
  if (out->host.empty()) return REE_FAIL(Status::kInvalidArgument, "--host is empty");
  REE_RETURN_IF_ERROR(parseIntFlag("--port", text("port"), 0, 65535, &out->port));
  if (parsed.count("api-key")) {
    out->api_key = text("api-key");
    if (out->api_key.empty()) return REE_FAIL(Status::kInvalidArgument, "--api-key is empty");
  }
  if (parsed.count("receipt-dir")) {
    out->receipt_dir = text("receipt-dir");
    if (out->receipt_dir.empty())
      return REE_FAIL(Status::kInvalidArgument, "--receipt-dir is empty");
  }
  if (parsed.count("served-model-name")) out->served_model_name = text("served-model-name");
  int64_t body = 0;
  REE_RETURN_IF_ERROR(
      parseIntegerFlag("--max-body-bytes", text("max-body-bytes"), 1, int64_t{1} << 30, &body));
  out->max_body_bytes = static_cast<size_t>(body);
  int max_queue = 0;
  REE_RETURN_IF_ERROR(parseIntFlag("--max-queue", text("max-queue"), 1, 1000000, &max_queue));
  out->max_queue = static_cast<size_t>(max_queue);
  return parseIntFlag("--http-threads", text("http-threads"), 1, 4096, &out->http_threads);
}

}  // namespace

std::string serveHelpText() {
  return serveOptions().help({"Model", "Server"}) +
         "\nEndpoints: POST /v1/completions, POST /v1/chat/completions, GET /v1/models, "
         "GET /v1/receipts/{id},\nGET /health, GET /metrics. SIGTERM or SIGINT: no new "
         "requests; the running ones finish, then exit 0.\n";
}

Status parseServeCommandLine(int argc, const char* const* argv, server::ServerOptions* out,
                             bool* help) {
  cxxopts::Options options = serveOptions();
  cxxopts::ParseResult parsed;
  try {
    parsed = options.parse(argc, argv);
  } catch (const std::exception& error) {
    return REE_FAIL(Status::kInvalidArgument, "serve: %s (see ree-launch serve --help)",
                    plainQuotes(error.what()).c_str());
  }
  *help = parsed.count("help") > 0;
  if (*help) return Status::kSuccess;
  if (!parsed.unmatched().empty()) {
    return REE_FAIL(Status::kInvalidArgument, "serve: unexpected argument '%s'",
                    printableText(parsed.unmatched().front(), 80).c_str());
  }
  for (const cxxopts::KeyValue& item : parsed.arguments()) {
    if (parsed.count(item.key()) > 1) {
      return REE_FAIL(Status::kInvalidArgument, "--%s is given more than once",
                      printableText(item.key(), 40).c_str());
    }
  }
  REE_RETURN_IF_ERROR(readEngineFlags(parsed, &out->engine));
  return readServerFlags(parsed, out);
}

int serveCommand(int argc, const char* const* argv) {
  server::ServerOptions options;
  bool help = false;
  if (parseServeCommandLine(argc, argv, &options, &help) != Status::kSuccess) {
    std::fprintf(stderr, "ree-launch: error: %s\n", lastErrorMessage());
    return 2;
  }
  if (help) {
    std::fputs(serveHelpText().c_str(), stdout);
    return 0;
  }
  if (server::runServer(options) != Status::kSuccess) {
    std::fprintf(stderr, "ree-launch: error: %s\n", lastErrorMessage());
    return 2;
  }
  return 0;
}

}  // namespace ree::launcher
