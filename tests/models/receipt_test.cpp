// Receipts (docs/receipt.md): format round trip; agreement with the independent Python
// recomputation (scripts/reference/receipt_reference.py) of the receipt hash, the logits chain and
// the weights hash (also over a re-sharded copy); validate catches tampering and names the field;
// malformed receipts give errors naming the field; verify re-executes receipts of
// builtin:tiny-llama (greedy and sampled, traced or not, any partition count) and names the first
// divergent step / layer / stage of a tampered but re-hashed receipt; another model's identity
// makes verification impossible, not a mismatch. Hostile receipts: repeated keys, sampling
// parameters no run accepts, non-regular files, informational fields that must not decide a
// verdict, and engine errors that name the receipt's field instead of a flag.
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <atomic>
#include <cmath>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "receipt_test_util.h"
#include "ree/core/parallel.h"
#include "ree/models/builtin.h"
#include "ree/models/engine.h"
#include "ree/models/model_identity.h"
#include "ree/models/receipt.h"
#include "ree/models/safetensors.h"
#include "test_util.h"

namespace ree {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

std::string tempDir(const std::string& name) {
  std::string base = env("REE_TEST_TMP");
  if (base.empty()) base = fs::temp_directory_path().string() + "/ree_receipt_test";
  std::string dir = base + "/" + name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// Runs a shell command; returns its stdout and sets *code to its exit status.
std::string run(const std::string& command, int* code) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    *code = -1;
    return out;
  }
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  int status = pclose(pipe);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

std::string python() {
  return env("REE_PYTHON");
}
std::string referenceScript() {
  return env("REE_SOURCE_DIR") + "/scripts/reference/receipt_reference.py";
}
#define REE_SKIP_WITHOUT_PYTHON()                                              \
  do {                                                                         \
    if (python().empty() || env("REE_SOURCE_DIR").empty())                     \
      GTEST_SKIP() << "REE_PYTHON / REE_SOURCE_DIR not set (ctest sets them)"; \
  } while (0)

std::string readText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

void writeText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string builtinDirectory() {
  std::string directory;
  EXPECT_EQ(models::materializeBuiltinModel("builtin:tiny-llama", &directory), Status::kSuccess)
      << lastErrorMessage();
  return directory;
}

std::unique_ptr<Engine> makeEngine(EngineOptions options) {
  options.model = options.model.empty() ? "builtin:tiny-llama" : options.model;
  options.device = Device::cpu();
  std::unique_ptr<Engine> engine;
  Status status = Engine::create(options, &engine);
  EXPECT_EQ(status, Status::kSuccess) << lastErrorMessage();
  return engine;
}

// Two requests: greedy from text (with characters JSON must escape), and sampled from text.
std::vector<GenerationRequest> twoRequests() {
  std::vector<GenerationRequest> requests(2);
  requests[0].prompt_text = "Z\xc3\xbcrich \"quoted\"\n\ttab \xf0\x9f\x99\x82 \x01";
  requests[0].max_new_tokens = 10;
  requests[1].prompt_text = "Once upon a time";
  requests[1].max_new_tokens = 12;
  requests[1].sampling.temperature = 0.7f;
  requests[1].sampling.top_p = 0.9f;
  requests[1].sampling.top_k = 20;
  requests[1].sampling.seed = 18446744073709551557ull;  // > 2^53: must be a string in JSON
  return requests;
}

// The receipt of a generation on an engine with `n_partitions` stages.
Receipt generateReceipt(bool trace, int n_partitions = 1,
                        std::vector<GenerationRequest> requests = twoRequests(),
                        RepOpsSpec spec = kDefaultRepOpsSpec) {
  EngineOptions options;
  options.repops_spec = spec;
  options.trace_layer_hashes = trace;
  options.n_partitions = n_partitions;
  options.max_context = 128;
  std::unique_ptr<Engine> engine = makeEngine(options);
  Receipt receipt;
  if (engine == nullptr) return receipt;
  std::vector<GenerationResult> results;
  EXPECT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  ModelIdentity identity;
  EXPECT_EQ(computeModelIdentity("builtin:tiny-llama", &identity), Status::kSuccess)
      << lastErrorMessage();
  return test::cpuReceipt(*engine, "builtin:tiny-llama", identity, requests, results);
}

// Recomputes every internal hash after a deliberate edit, so that only re-execution can tell.
void rehash(Receipt* receipt) {
  for (ReceiptRequest& r : receipt->requests) {
    r.prompt_ids_sha256 = idsSha256(r.prompt_ids);
    r.output_ids_sha256 = idsSha256(r.output_ids);
    r.logits_chain_sha256 = logitsChainSha256(r.prompt_ids_sha256, r.step_logits_sha256);
  }
  std::string body;
  ASSERT_EQ(canonicalReceiptBody(*receipt, &body), Status::kSuccess);
  receipt->receipt_sha256 = sha256Hex(body.data(), body.size());
}

VerifyReport verify(const Receipt& receipt, int n_partitions = 1,
                    const std::string& model = "builtin:tiny-llama") {
  EngineOptions options;
  options.n_partitions = n_partitions;
  EXPECT_EQ(receiptEngineOptions(receipt, &options), Status::kSuccess) << lastErrorMessage();
  std::unique_ptr<Engine> engine = makeEngine(options);
  VerifyReport report;
  if (engine == nullptr) return report;
  EXPECT_EQ(verifyReceipt(receipt, *engine, model, &report), Status::kSuccess)
      << lastErrorMessage();
  return report;
}

// Parses `text` as a receipt; returns the status and the error message.
Status parseText(const std::string& text, std::string* message) {
  Receipt receipt;
  Status status = parseReceipt(text, "r.json", &receipt);
  if (status == Status::kSuccess) status = validateReceipt(receipt, nullptr);
  *message = status == Status::kSuccess ? "" : lastErrorMessage();
  return status;
}

std::string fileText(const Receipt& receipt) {
  std::string text;
  EXPECT_EQ(receiptFileText(receipt, &text), Status::kSuccess);
  return text;
}

// ---- Format --------------------------------------------------------------------------------

TEST(Receipt, RoundTripIsExact) {
  Receipt receipt = generateReceipt(/*trace=*/true);
  ASSERT_EQ(receipt.requests.size(), 2u);
  std::string summary;
  ASSERT_EQ(validateReceipt(receipt, &summary), Status::kSuccess) << lastErrorMessage();
  std::string dir = tempDir("round_trip");
  ASSERT_EQ(writeReceipt(dir + "/r.json", receipt), Status::kSuccess) << lastErrorMessage();
  Receipt back;
  ASSERT_EQ(readReceipt(dir + "/r.json", &back), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(fileText(back), readText(dir + "/r.json"));
  EXPECT_EQ(back.receipt_sha256, receipt.receipt_sha256);
  EXPECT_EQ(back.requests[1].sampling.seed, 18446744073709551557ull);
  EXPECT_EQ(std::memcmp(&back.requests[1].sampling.temperature,
                        &receipt.requests[1].sampling.temperature, 4),
            0);
  EXPECT_EQ(back.requests[0].prompt_text, twoRequests()[0].prompt_text);
  EXPECT_EQ(back.requests[1].step_layer_sha256, receipt.requests[1].step_layer_sha256);
  // One hash per layer of the model (tiny-llama: 4), every step.
  EXPECT_EQ(back.requests[0].step_layer_sha256.at(0).size(), 4u);
  EXPECT_EQ(validateReceipt(back, nullptr), Status::kSuccess) << lastErrorMessage();
}

TEST(Receipt, PythonReferenceRecomputesReceiptHashAndChain) {
  REE_SKIP_WITHOUT_PYTHON();
  for (bool trace : {false, true}) {
    Receipt receipt = generateReceipt(trace);
    std::string dir = tempDir(trace ? "python_traced" : "python");
    ASSERT_EQ(writeReceipt(dir + "/r.json", receipt), Status::kSuccess);
    int code = 0;
    std::string out =
        run(python() + " " + referenceScript() + " receipt " + dir + "/r.json", &code);
    ASSERT_EQ(code, 0) << out;
    Json report = Json::parse(out);
    EXPECT_TRUE(report["ok"].get<bool>()) << out;
    EXPECT_EQ(report["receipt_sha256"], receipt.receipt_sha256);
    for (size_t i = 0; i < receipt.requests.size(); ++i) {
      EXPECT_EQ(report["requests"][i]["logits_chain_sha256"],
                receipt.requests[i].logits_chain_sha256);
      EXPECT_EQ(report["requests"][i]["output_ids_sha256"], receipt.requests[i].output_ids_sha256);
    }
    // The canonical body byte for byte.
    std::string body;
    ASSERT_EQ(canonicalReceiptBody(receipt, &body), Status::kSuccess);
    EXPECT_EQ(run(python() + " " + referenceScript() + " canonical " + dir + "/r.json", &code),
              body);
  }
}

TEST(Receipt, ChainDefinition) {
  // chain_0 = SHA-256("ree-logits-chain/1" || prompt digest); chain_1 = SHA-256(chain_0 || step).
  std::string prompt = idsSha256({1, 2, 3});
  std::string step = sha256Hex("x", 1);
  std::vector<unsigned char> buffer = {'r', 'e', 'e', '-', 'l', 'o', 'g', 'i', 't',
                                       's', '-', 'c', 'h', 'a', 'i', 'n', '/', '1'};
  auto raw = [](const std::string& hex) {
    std::vector<unsigned char> out;
    for (size_t i = 0; i < hex.size(); i += 2)
      out.push_back(static_cast<unsigned char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
  };
  auto append = [](std::vector<unsigned char>* a, const std::vector<unsigned char>& b) {
    a->insert(a->end(), b.begin(), b.end());
  };
  append(&buffer, raw(prompt));
  std::string chain0 = sha256Hex(buffer.data(), buffer.size());
  EXPECT_EQ(logitsChainSha256(prompt, {}), chain0);
  std::vector<unsigned char> next = raw(chain0);
  append(&next, raw(step));
  EXPECT_EQ(logitsChainSha256(prompt, {step}), sha256Hex(next.data(), next.size()));
}

// ---- Model identity ------------------------------------------------------------------------

TEST(ModelIdentity, IndependentOfShardingAndMatchesPython) {
  REE_SKIP_WITHOUT_PYTHON();
  std::string original = builtinDirectory();
  ModelIdentity a;
  ASSERT_EQ(computeModelIdentity(original, &a), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(a.weights_kind, "safetensors");
  int code = 0;
  std::string out = run(python() + " " + referenceScript() + " identity " + original, &code);
  ASSERT_EQ(code, 0) << out;
  Json reference = Json::parse(out);
  EXPECT_EQ(reference["weights_sha256"], a.weights_sha256);
  EXPECT_EQ(reference["config_sha256"], a.config_sha256);
  EXPECT_EQ(reference["tokenizer_sha256"], a.tokenizer_sha256);
  // The manifest itself, byte for byte.
  std::string manifest;
  ASSERT_EQ(weightsManifest(original, &manifest), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(run(python() + " " + referenceScript() + " manifest " + original, &code), manifest);

  std::string resharded = tempDir("resharded");
  out = run(python() + " " + referenceScript() + " reshard " + original + " " + resharded + " 2>&1",
            &code);
  ASSERT_EQ(code, 0) << out;
  ASSERT_TRUE(fs::exists(resharded + "/model.safetensors.index.json"));
  ASSERT_FALSE(fs::exists(resharded + "/model.safetensors"));
  ModelIdentity b;
  ASSERT_EQ(computeModelIdentity(resharded, &b), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(b.weights_sha256, a.weights_sha256);
  EXPECT_EQ(b.config_sha256, a.config_sha256);
  // The thread count does not matter either.
  setCpuThreads(1);
  ModelIdentity c;
  ASSERT_EQ(computeModelIdentity(resharded, &c), Status::kSuccess) << lastErrorMessage();
  setCpuThreads(0);
  EXPECT_EQ(c.weights_sha256, a.weights_sha256);
}

// Copies the built-in model and flips one byte inside tensor `name`'s data.
std::string copyWithFlippedWeightByte(const std::string& name) {
  std::string copy = tempDir("flipped");
  fs::copy(builtinDirectory(), copy, fs::copy_options::recursive);
  std::unique_ptr<models::SafetensorsFile> file;
  EXPECT_EQ(models::SafetensorsFile::open(copy + "/model.safetensors", &file), Status::kSuccess);
  const models::TensorInfo* info = file->find(name);
  EXPECT_NE(info, nullptr) << name;
  uint64_t offset = 8 + file->headerBytes() + info->data_begin + info->bytes() / 2;
  file.reset();
  std::fstream f(copy + "/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char byte = 0;
  f.read(&byte, 1);
  byte ^= 0x01;
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&byte, 1);
  return copy;
}

TEST(ModelIdentity, OneWeightByteOrTheConfigChangesIt) {
  ModelIdentity original;
  ASSERT_EQ(computeModelIdentity("builtin:tiny-llama", &original), Status::kSuccess);
  std::string copy = copyWithFlippedWeightByte("model.layers.2.mlp.up_proj.weight");
  ModelIdentity flipped;
  ASSERT_EQ(computeModelIdentity(copy, &flipped), Status::kSuccess) << lastErrorMessage();
  EXPECT_NE(flipped.weights_sha256, original.weights_sha256);
  EXPECT_EQ(flipped.config_sha256, original.config_sha256);
  EXPECT_EQ(flipped.tokenizer_sha256, original.tokenizer_sha256);
  // Missing model: an error naming it.
  EXPECT_EQ(computeModelIdentity(copy + "/nowhere", &flipped), Status::kIoError);
  EXPECT_NE(std::string(lastErrorMessage()).find("nowhere"), std::string::npos);
}

// ---- validate -------------------------------------------------------------------------------

// Applies `edit` to the JSON of a valid receipt and returns what parse + validate say.
Status afterEdit(const Receipt& receipt, const std::function<void(Json&)>& edit,
                 std::string* message) {
  Json j = Json::parse(fileText(receipt));
  edit(j);
  return parseText(j.dump(1), message);
}

TEST(Receipt, ValidateDetectsTampering) {
  Receipt receipt = generateReceipt(/*trace=*/true);
  std::string message;
  ASSERT_EQ(parseText(fileText(receipt), &message), Status::kSuccess) << message;
  struct Case {
    const char* what;
    std::function<void(Json&)> edit;
    const char* field;
  } cases[] = {
      {"one output id", [](Json& j) { j["requests"][0]["output_ids"][3] = 5; },
       "requests[0].output_ids_sha256"},
      {"one byte of text",
       [](Json& j) {
         std::string t = j["requests"][1]["text"];
         t[0] = t[0] == 'a' ? 'b' : 'a';
         j["requests"][1]["text"] = t;
       },
       "receipt_sha256"},
      {"the seed", [](Json& j) { j["requests"][1]["sampling"]["seed"] = "1"; }, "receipt_sha256"},
      {"the receipt hash", [](Json& j) { j["receipt_sha256"] = std::string(64, '0'); },
       "receipt_sha256"},
      {"a step hash",
       [](Json& j) { j["requests"][0]["step_logits_sha256"][2] = std::string(64, 'a'); },
       "requests[0].logits_chain_sha256"},
      {"a layer hash",
       [](Json& j) { j["requests"][0]["step_layer_sha256"][1][2] = std::string(64, 'a'); },
       "receipt_sha256"},
      {"a prompt id", [](Json& j) { j["requests"][0]["prompt_ids"][1] = 7; },
       "requests[0].prompt_ids_sha256"},
      {"the config hash", [](Json& j) { j["model"]["config_sha256"] = std::string(64, 'b'); },
       "receipt_sha256"},
      {"a dropped step", [](Json& j) { j["requests"][1]["step_logits_sha256"].erase(0); },
       "requests[1].step_logits_sha256"},
      {"finish reason",
       [](Json& j) {
         j["requests"][0]["max_new_tokens"] = 1000;
         j["requests"][0]["finish_reason"] = "length";
       },
       "requests[0].finish_reason"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(afterEdit(receipt, c.edit, &message), Status::kMismatch) << c.what << ": " << message;
    EXPECT_NE(message.find(c.field), std::string::npos) << c.what << ": " << message;
  }
}

TEST(Receipt, MalformedReceiptsNameTheField) {
  Receipt receipt = generateReceipt(/*trace=*/false);
  std::string message;
  struct Case {
    const char* what;
    std::function<void(Json&)> edit;
    const char* expected;
  } cases[] = {
      {"missing field", [](Json& j) { j["requests"][0].erase("text"); },
       "r.json: requests[0].text: missing"},
      {"wrong type", [](Json& j) { j["requests"][0]["output_ids"][3] = "x"; },
       "r.json: requests[0].output_ids[3]: expected an integer"},
      {"negative id", [](Json& j) { j["requests"][1]["prompt_ids"][0] = -1; },
       "r.json: requests[1].prompt_ids[0]: integer -1 outside"},
      {"float id", [](Json& j) { j["requests"][1]["prompt_ids"][0] = 1.5; },
       "requests[1].prompt_ids[0]: expected an integer"},
      {"bad hex", [](Json& j) { j["model"]["weights_sha256"] = "ABC"; },
       "r.json: model.weights_sha256: expected 64 lowercase hex digits"},
      {"wrong version", [](Json& j) { j["format"] = "ree-receipt/2"; },
       "r.json: format: 'ree-receipt/2' is not ree-receipt/1"},
      {"not a receipt", [](Json& j) { j.erase("format"); }, "r.json: format: missing"},
      {"unknown field", [](Json& j) { j["run"]["extra"] = 1; }, "r.json: run.extra: unknown"},
      {"float disagrees with bits",
       [](Json& j) { j["requests"][1]["sampling"]["temperature"] = "0.7"; },
       "requests[1].sampling.temperature: '0.7' disagrees with temperature_f32"},
      {"bad seed", [](Json& j) { j["requests"][1]["sampling"]["seed"] = "012"; },
       "requests[1].sampling.seed"},
      {"seed as a number", [](Json& j) { j["requests"][1]["sampling"]["seed"] = 12; },
       "requests[1].sampling.seed: expected a string"},
      {"bad finish reason", [](Json& j) { j["requests"][0]["finish_reason"] = "stopped"; },
       "requests[0].finish_reason: 'stopped' is not one of eos, length, stop"},
      {"layer hashes without trace",
       [](Json& j) { j["requests"][0]["step_layer_sha256"] = Json::array(); },
       "requests[0].step_layer_sha256: present but"},
      {"plan stage of the wrong type", [](Json& j) { j["execution"]["plan"][0]["head"] = 1; },
       "execution.plan[0].head: expected true or false"},
      {"empty requests", [](Json& j) { j["requests"] = Json::array(); }, "requests: expected"},
      {"top level not an object", [](Json& j) { j = Json::array(); }, "r.json: (top level)"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(afterEdit(receipt, c.edit, &message), Status::kIoError) << c.what << ": " << message;
    EXPECT_NE(message.find(c.expected), std::string::npos) << c.what << ": " << message;
  }
  std::string text = fileText(receipt);
  EXPECT_EQ(parseText(text.substr(0, text.size() / 2), &message), Status::kIoError);
  EXPECT_NE(message.find("r.json: (file): not valid JSON"), std::string::npos) << message;
  EXPECT_EQ(parseText("", &message), Status::kIoError);
  EXPECT_EQ(parseText("\xff\xfe", &message), Status::kIoError);
  Receipt unused;
  EXPECT_EQ(readReceipt(tempDir("missing") + "/none.json", &unused), Status::kIoError);
  EXPECT_NE(std::string(lastErrorMessage()).find("none.json"), std::string::npos);
}

// ---- verify ---------------------------------------------------------------------------------

TEST(ReceiptVerify, GeneratedReceiptsVerifyOnAnyPartitionCount) {
  for (bool trace : {false, true}) {
    Receipt receipt = generateReceipt(trace, /*n_partitions=*/trace ? 2 : 1);
    for (int n : {1, 2}) {
      VerifyReport report = verify(receipt, n);
      EXPECT_EQ(report.verdict, Verdict::kVerified)
          << "trace " << trace << " n " << n << ": " << report.summary;
      EXPECT_EQ(report.requests_checked, 2);
      EXPECT_EQ(report.steps_checked, static_cast<int64_t>(receipt.requests[0].output_ids.size() +
                                                           receipt.requests[1].output_ids.size()));
      EXPECT_NE(report.json.find("\"verdict\":\"verified\""), std::string::npos) << report.json;
    }
  }
}

TEST(ReceiptVerify, ChangedAndRehashedOutputIdNamesTheFirstDivergentStep) {
  Receipt receipt = generateReceipt(/*trace=*/false);
  ReceiptRequest& sampled = receipt.requests[1];
  ASSERT_GT(sampled.output_ids.size(), 5u);
  sampled.output_ids[4] = (sampled.output_ids[4] + 1) % 200;
  rehash(&receipt);
  ASSERT_EQ(validateReceipt(receipt, nullptr), Status::kSuccess) << lastErrorMessage();
  VerifyReport report = verify(receipt);
  EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
  EXPECT_EQ(report.request, 1);
  EXPECT_EQ(report.step, 4);
  EXPECT_EQ(report.field, "output_ids");
  EXPECT_NE(report.summary.find("request 1 step 4"), std::string::npos) << report.summary;
}

TEST(ReceiptVerify, TracedReceiptNamesTheFirstDivergentLayerAndStage) {
  Receipt receipt = generateReceipt(/*trace=*/true, /*n_partitions=*/2);
  ASSERT_EQ(receipt.plan.size(), 2u);
  // A layer hash of step 3, layer 3: stage 1 of the receipt's plan (4 layers, 2 stages).
  receipt.requests[0].step_layer_sha256[3][3] = std::string(64, 'c');
  rehash(&receipt);
  VerifyReport report = verify(receipt, /*n_partitions=*/1);
  EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
  EXPECT_EQ(report.request, 0);
  EXPECT_EQ(report.step, 3);
  EXPECT_EQ(report.layer, 3);
  EXPECT_EQ(report.stage, 1);
  EXPECT_NE(report.summary.find("first divergent layer 3, stage 1"), std::string::npos)
      << report.summary;

  // A changed prompt id (no prompt text to re-tokenise): everything diverges from step 0, layer 0.
  Receipt prompt = generateReceipt(/*trace=*/true, /*n_partitions=*/2);
  prompt.requests[1].has_prompt_text = false;
  prompt.requests[1].prompt_text.clear();
  prompt.requests[1].prompt_ids[1] = (prompt.requests[1].prompt_ids[1] + 3) % 200;
  rehash(&prompt);
  report = verify(prompt);
  EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
  EXPECT_EQ(report.request, 1);
  EXPECT_EQ(report.step, 0);
  EXPECT_EQ(report.layer, 0);
  EXPECT_EQ(report.stage, 0);
}

TEST(ReceiptVerify, TamperedButRehashedFieldsAreMismatches) {
  Receipt base = generateReceipt(/*trace=*/false);
  {  // The prompt text no longer tokenises to the prompt ids.
    Receipt r = base;
    r.requests[0].prompt_text += "!";
    rehash(&r);
    VerifyReport report = verify(r);
    EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
    EXPECT_EQ(report.field, "prompt_ids");
  }
  {  // The seed of the sampled request.
    Receipt r = base;
    r.requests[1].sampling.seed += 1;
    rehash(&r);
    VerifyReport report = verify(r);
    EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
    EXPECT_EQ(report.field, "output_ids");
    EXPECT_EQ(report.request, 1);
  }
  {  // One byte of text.
    Receipt r = base;
    r.requests[0].text += "x";
    rehash(&r);
    VerifyReport report = verify(r);
    EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
    EXPECT_EQ(report.field, "text");
  }
  {  // A step's logits hash (with the chain recomputed).
    Receipt r = base;
    r.requests[0].step_logits_sha256[6] = std::string(64, 'd');
    rehash(&r);
    VerifyReport report = verify(r);
    EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
    EXPECT_EQ(report.field, "step_logits_sha256");
    EXPECT_EQ(report.step, 6);
  }
  {  // Not re-hashed: the receipt itself is inconsistent.
    Receipt r = base;
    r.requests[0].output_ids[0] += 1;
    VerifyReport report = verify(r);
    EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
    EXPECT_EQ(report.field, "receipt");
  }
}

// A receipt names its RepOps spec and verify re-executes with that version: a repops-2 receipt
// verifies on any partition count, and the same receipt relabelled repops-1 (rehashed, so only
// re-execution can tell) diverges at its first step.
TEST(ReceiptVerify, TheReceiptsSpecVersionIsTheOneReExecuted) {
  Receipt receipt = generateReceipt(/*trace=*/false, 1, twoRequests(), RepOpsSpec::kRepOps2);
  EXPECT_EQ(receipt.repops_spec, "repops-2");
  for (int n : {1, 2}) {
    VerifyReport report = verify(receipt, n);
    EXPECT_EQ(report.verdict, Verdict::kVerified) << "n " << n << ": " << report.summary;
  }
  Receipt relabelled = receipt;
  relabelled.repops_spec = "repops-1";
  rehash(&relabelled);
  VerifyReport report = verify(relabelled);
  EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
  EXPECT_EQ(report.step, 0) << report.summary;
}

// repops-3 the same way, through the receipt's file: written (traced, 2 stages), read back,
// verified on 1 and 3 stages; relabelled repops-1 or repops-2 and re-hashed, re-execution diverges
// at the first step; relabelled repops-1 in the file without re-hashing, the receipt is
// inconsistent.
TEST(ReceiptVerify, ARepOps3ReceiptVerifiesWithItsSpecOnly) {
  Receipt made = generateReceipt(/*trace=*/true, 2, twoRequests(), RepOpsSpec::kRepOps3);
  EXPECT_EQ(made.repops_spec, "repops-3");
  std::string text = fileText(made);
  Receipt receipt;
  ASSERT_EQ(parseReceipt(text, "r3.json", &receipt), Status::kSuccess) << lastErrorMessage();
  ASSERT_EQ(validateReceipt(receipt, nullptr), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(receipt.repops_spec, "repops-3");
  for (int n : {1, 3}) {
    VerifyReport report = verify(receipt, n);
    EXPECT_EQ(report.verdict, Verdict::kVerified) << "n " << n << ": " << report.summary;
  }
  for (const char* other : {"repops-1", "repops-2"}) {
    Receipt relabelled = receipt;
    relabelled.repops_spec = other;
    rehash(&relabelled);
    VerifyReport report = verify(relabelled);
    EXPECT_EQ(report.verdict, Verdict::kMismatch) << other << ": " << report.summary;
    EXPECT_EQ(report.step, 0) << other << ": " << report.summary;
  }
  const std::string field = "\"repops_spec\": \"repops-3\"";
  ASSERT_NE(text.find(field), std::string::npos) << text.substr(0, 400);
  text.replace(text.find(field), field.size(), "\"repops_spec\": \"repops-1\"");
  Receipt tampered;
  ASSERT_EQ(parseReceipt(text, "r3.json", &tampered), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(validateReceipt(tampered, nullptr), Status::kMismatch);
  VerifyReport report = verify(tampered);
  EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
  EXPECT_EQ(report.field, "receipt") << report.summary;
}

TEST(ReceiptHostile, UnknownOrMisappliedSpecVersionsAreRefused) {
  Receipt receipt = generateReceipt(/*trace=*/false, 1, twoRequests(), RepOpsSpec::kRepOps2);
  std::string text = fileText(receipt);
  const std::string field = "\"repops_spec\": \"repops-2\"";
  ASSERT_NE(text.find(field), std::string::npos) << text.substr(0, 400);
  text.replace(text.find(field), field.size(), "\"repops_spec\": \"repops-9\"");
  std::string message;
  EXPECT_EQ(parseText(text, &message), Status::kIoError);
  EXPECT_NE(message.find("runtime.repops_spec: 'repops-9' is not a RepOps spec this release "
                         "implements (repops-1, repops-2, repops-3)"),
            std::string::npos)
      << message;
  Receipt aten = receipt;  // a RepOps spec other than the default on an ATen set
  aten.operation_set = "default";
  rehash(&aten);
  EXPECT_EQ(validateReceipt(aten, nullptr), Status::kMismatch);
  EXPECT_NE(std::string(lastErrorMessage())
                .find("runtime.repops_spec: 'repops-2' with "
                      "run.operation_set 'default'"),
            std::string::npos)
      << lastErrorMessage();
}

TEST(ReceiptVerify, AnotherModelCannotVerify) {
  Receipt receipt = generateReceipt(/*trace=*/false);
  std::string flipped = copyWithFlippedWeightByte("model.layers.0.self_attn.q_proj.weight");
  VerifyReport report = verify(receipt, 1, flipped);
  EXPECT_EQ(report.verdict, Verdict::kCouldNotVerify) << report.summary;
  EXPECT_EQ(report.field, "model.weights_sha256");

  std::string config = tempDir("config_changed");
  fs::copy(builtinDirectory(), config, fs::copy_options::recursive);
  std::string text = readText(config + "/config.json");
  writeText(config + "/config.json", text + "\n");  // same meaning, other bytes
  report = verify(receipt, 1, config);
  EXPECT_EQ(report.verdict, Verdict::kCouldNotVerify) << report.summary;
  EXPECT_EQ(report.field, "model.config_sha256");
  EXPECT_NE(report.summary.find("model identity differs"), std::string::npos) << report.summary;
}

// ---- Hostile receipts -----------------------------------------------------------------------

TEST(ReceiptHostile, RepeatedKeysAreRefusedAnywhere) {
  const std::string text = fileText(generateReceipt(/*trace=*/false));
  std::string message;
  ASSERT_EQ(parseText(text, &message), Status::kSuccess) << message;
  struct Case {
    const char* key;  // the first occurrence of "KEY": gets a forged twin before it
    const char* where;
  } cases[] = {{"\"text\":", "'text' in the object at $.requests[0]"},
               {"\"seed\":", "'seed' in the object at $.requests[0].sampling"},
               {"\"format\":", "'format' in the object at $"},
               {"\"weights_sha256\":", "'weights_sha256' in the object at $.model"}};
  for (const Case& c : cases) {
    std::string forged = text;
    size_t at = forged.find(c.key);
    ASSERT_NE(at, std::string::npos) << c.key;
    forged.insert(at, std::string(c.key) + " \"FORGED\", ");
    EXPECT_EQ(parseText(forged, &message), Status::kIoError) << c.key;
    EXPECT_NE(message.find("r.json: (file): repeats the key"), std::string::npos) << message;
    EXPECT_NE(message.find(c.where), std::string::npos) << message;
  }
}

TEST(ReceiptHostile, ValidateRefusesSamplingNoRunAccepts) {
  const Receipt base = generateReceipt(/*trace=*/false);
  struct Case {
    const char* what;
    float temperature;
    float top_p;
    const char* field;
  } cases[] = {
      {"temperature NaN", std::nanf(""), 0.9f, "requests[1].sampling.temperature"},
      {"temperature +inf", INFINITY, 0.9f, "requests[1].sampling.temperature"},
      {"temperature negative", -0.5f, 0.9f, "requests[1].sampling.temperature"},
      {"top_p 0", 0.7f, 0.0f, "requests[1].sampling.top_p"},
      {"top_p 2", 0.7f, 2.0f, "requests[1].sampling.top_p"},
      {"top_p NaN", 0.7f, std::nanf(""), "requests[1].sampling.top_p"},
  };
  for (const Case& c : cases) {
    Receipt r = base;
    r.requests[1].sampling.temperature = c.temperature;
    r.requests[1].sampling.top_p = c.top_p;
    rehash(&r);  // consistent bits and hashes: only the parameters are impossible
    // Read from a file: malformed, as an id out of range is.
    std::string message;
    EXPECT_EQ(parseText(fileText(r), &message), Status::kIoError) << c.what << ": " << message;
    EXPECT_NE(message.find(c.field), std::string::npos) << c.what << ": " << message;
    EXPECT_NE(message.find("r.json: no run could have produced this receipt"), std::string::npos)
        << message;
    // Built in memory: validate and verify refuse it as inconsistent.
    EXPECT_EQ(validateReceipt(r, nullptr), Status::kMismatch) << c.what;
    EXPECT_NE(std::string(lastErrorMessage()).find(c.field), std::string::npos) << c.what;
    VerifyReport report = verify(r);
    EXPECT_EQ(report.verdict, Verdict::kMismatch) << c.what << ": " << report.summary;
    EXPECT_EQ(report.field, "receipt") << c.what;
  }
}

// A run that relaxed the checkpoint's load rules says so in its receipt, and the verifier loads the
// weights under the same rules; a run under the default rules keeps the receipt form it always had.
TEST(ReceiptHostile, RelaxedLoadRulesAreRecordedAndReplayed) {
  const Receipt plain = generateReceipt(/*trace=*/false);
  const std::string plain_text = fileText(plain);
  EXPECT_EQ(plain_text.find("allow_"), std::string::npos) << "default rules add no field";

  Receipt relaxed = plain;
  relaxed.allow_extra_tensors = true;
  relaxed.allow_non_finite_weights = true;
  rehash(&relaxed);
  const std::string text = fileText(relaxed);
  EXPECT_NE(text.find("\"allow_extra_tensors\": true"), std::string::npos) << text;
  EXPECT_NE(text.find("\"allow_non_finite_weights\": true"), std::string::npos) << text;
  Receipt back;
  ASSERT_EQ(parseReceipt(text, "r.json", &back), Status::kSuccess) << lastErrorMessage();
  EXPECT_TRUE(back.allow_extra_tensors);
  EXPECT_TRUE(back.allow_non_finite_weights);
  EngineOptions options;
  ASSERT_EQ(receiptEngineOptions(back, &options), Status::kSuccess) << lastErrorMessage();
  EXPECT_TRUE(options.allow_extra_tensors);
  EXPECT_TRUE(options.allow_non_finite_weights);
  EXPECT_EQ(verify(back).verdict, Verdict::kVerified);

  // One run has one form: an explicit false is refused, naming the field.
  nlohmann::json j = nlohmann::json::parse(plain_text);
  j["run"]["allow_non_finite_weights"] = false;
  std::string message;
  EXPECT_EQ(parseText(j.dump(), &message), Status::kIoError);
  EXPECT_NE(message.find("run.allow_non_finite_weights"), std::string::npos) << message;
}

// A receipt's own strings never break the one-line error: a format holding a newline is quoted
// escaped (found by fuzz_receipt: `validate` printed a second line that the receipt wrote).
TEST(ReceiptHostile, FieldsQuotedInErrorsStayOnOneLine) {
  nlohmann::json j = nlohmann::json::parse(fileText(generateReceipt(/*trace=*/false)));
  j["format"] = "ree-receipt/1\nreceipt.json: valid: 1 request(s)";
  std::string message;
  EXPECT_EQ(parseText(j.dump(), &message), Status::kIoError);
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
  EXPECT_NE(message.find("\\x0a"), std::string::npos) << message;
}

TEST(ReceiptHostile, ReadingRefusesNonRegularFilesWithTheCause) {
  const std::string dir = tempDir("non_regular");
  const std::string fifo = dir + "/fifo.json";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);  // no writer: opening it for reading would block
  struct Case {
    std::string path;
    const char* cause;
  } cases[] = {{dir, "is a directory, not a regular file"},
               {fifo, "is a FIFO, not a regular file"},
               {"/dev/zero", "is a character device, not a regular file"},
               {dir + "/none.json", "cannot open"}};
  for (const Case& c : cases) {
    Receipt unused;
    EXPECT_EQ(readReceipt(c.path, &unused), Status::kIoError) << c.path;
    const std::string message = lastErrorMessage();
    EXPECT_NE(message.find("receipt '" + c.path + "'"), std::string::npos) << message;
    EXPECT_NE(message.find(c.cause), std::string::npos) << message;
  }
}

// Informational fields (model.source, execution.*) are checked for form only: any values, once
// re-hashed, leave the verdict "verified". Fields that decide change it.
TEST(ReceiptHostile, InformationalFieldsNeverDecideTheVerdict) {
  const Receipt base = generateReceipt(/*trace=*/true, /*n_partitions=*/2);
  const std::function<void(Receipt&)> informational[] = {
      [](Receipt& r) { r.plan[1].end_layer = 1000000000; },
      [](Receipt& r) { r.plan[0].first_layer = 3; },  // not contiguous
      [](Receipt& r) { r.plan.clear(); },
      [](Receipt& r) { r.n_partitions = 7; },
      [](Receipt& r) {
        r.stage_devices = {"cuda:9", "x", "y"};
      },
      [](Receipt& r) { r.model_source = "/elsewhere"; },
  };
  for (size_t i = 0; i < std::size(informational); ++i) {
    Receipt r = base;
    informational[i](r);
    rehash(&r);
    std::string message;
    ASSERT_EQ(parseText(fileText(r), &message), Status::kSuccess)
        << "case " << i << ": " << message;
    VerifyReport report = verify(r);
    EXPECT_EQ(report.verdict, Verdict::kVerified) << "case " << i << ": " << report.summary;
  }
  {  // A divergent layer outside the receipt's plan: reported, its stage unknown (-1).
    Receipt r = base;
    r.plan.clear();
    r.requests[0].step_layer_sha256[2][1] = std::string(64, 'e');
    rehash(&r);
    VerifyReport report = verify(r);
    EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
    EXPECT_EQ(report.layer, 1);
    EXPECT_EQ(report.stage, -1);
  }
  {  // Deciding: the claimed model, the run's context, a layer-hash count.
    Receipt r = base;
    r.identity.weights_sha256 = std::string(64, 'f');
    rehash(&r);
    EXPECT_EQ(verify(r).verdict, Verdict::kCouldNotVerify);
    r = base;
    r.max_context = 3;
    rehash(&r);
    EXPECT_EQ(verify(r).verdict, Verdict::kMismatch);
    r = base;
    for (ReceiptRequest& q : r.requests) {
      for (std::vector<std::string>& layers : q.step_layer_sha256)
        layers.pop_back();
    }
    rehash(&r);  // consistent (3 hashes everywhere) but the model has 4 layers
    VerifyReport report = verify(r);
    EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
    EXPECT_EQ(report.layer, 3);
    r = base;
    r.requests[1].step_layer_sha256[0].pop_back();
    rehash(&r);
    std::string message;
    EXPECT_EQ(parseText(fileText(r), &message), Status::kMismatch) << message;
    EXPECT_NE(message.find("requests[1].step_layer_sha256[0]: 3 layer hashes"), std::string::npos)
        << message;
  }
}

// Values verify takes from the receipt are named as the receipt's, never as flags.
TEST(ReceiptHostile, EngineErrorsNameTheReceiptFieldNotAFlag) {
  Receipt r = generateReceipt(/*trace=*/false);
  ReceiptRequest& q = r.requests[0];
  q.has_prompt_text = false;
  q.prompt_text.clear();
  std::vector<int32_t> long_prompt;
  while (long_prompt.size() < 2100)  // tiny-llama: max_position_embeddings 2048
    long_prompt.insert(long_prompt.end(), q.prompt_ids.begin(), q.prompt_ids.end());
  q.prompt_ids = long_prompt;
  r.max_context = 4096;
  rehash(&r);
  ASSERT_EQ(validateReceipt(r, nullptr), Status::kSuccess) << lastErrorMessage();
  EngineOptions options;
  options.model = "builtin:tiny-llama";
  options.device = Device::cpu();
  ASSERT_EQ(receiptEngineOptions(r, &options), Status::kSuccess);
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(options, &engine), Status::kInvalidArgument);
  const std::string message = lastErrorMessage();
  EXPECT_NE(message.find("the context of the receipt's longest request (requests[0]"),
            std::string::npos)
      << message;
  EXPECT_EQ(message.find("--max-context"), std::string::npos) << message;
}

}  // namespace
}  // namespace ree

// ---- finish_reason "stop": a generation its caller stopped (GenerationRequest::stop) ---------

namespace ree {
namespace {

// The receipt of `requests` on one stage where request `stopped` is stopped at its
// `after`-th token by the token callback (as a server does at a stop string).
Receipt stoppedReceipt(std::vector<GenerationRequest> requests, size_t stopped, int after) {
  auto flag = std::make_shared<std::atomic<bool>>(false);
  requests[stopped].stop = flag;
  EngineOptions options;
  options.max_context = 128;
  std::unique_ptr<Engine> engine = makeEngine(options);
  Receipt receipt;
  if (engine == nullptr) return receipt;
  std::vector<int> produced(requests.size(), 0);
  auto on_token = [&](size_t r, int32_t, const std::string&) {
    if (++produced[r] == after && r == stopped) *flag = true;
  };
  std::vector<GenerationResult> results;
  EXPECT_EQ(engine->generate(requests, &results, on_token), Status::kSuccess) << lastErrorMessage();
  ModelIdentity identity;
  EXPECT_EQ(computeModelIdentity("builtin:tiny-llama", &identity), Status::kSuccess)
      << lastErrorMessage();
  return test::cpuReceipt(*engine, "builtin:tiny-llama", identity, requests, results);
}

TEST(ReceiptStop, AStoppedGenerationsReceiptValidatesAndVerifies) {
  Receipt receipt = stoppedReceipt(twoRequests(), 1, 4);
  ASSERT_EQ(receipt.requests.size(), 2u);
  EXPECT_EQ(receipt.requests[1].finish_reason, "stop");
  EXPECT_EQ(receipt.requests[1].output_ids.size(), 4u);
  EXPECT_EQ(receipt.requests[0].finish_reason, "length");
  std::string message;
  ASSERT_EQ(parseText(fileText(receipt), &message), Status::kSuccess) << message;
  for (int n : {1, 2}) {
    VerifyReport report = verify(receipt, n);
    EXPECT_EQ(report.verdict, Verdict::kVerified) << "n " << n << ": " << report.summary;
    EXPECT_EQ(report.steps_checked,
              4 + static_cast<int64_t>(receipt.requests[0].output_ids.size()));
  }
}

TEST(ReceiptStop, ValidateRefusesAStopAtALimitOrWithoutTokens) {
  Receipt receipt = stoppedReceipt(twoRequests(), 1, 4);
  std::string message;
  // At max_new_tokens the engine says "length", never "stop".
  EXPECT_EQ(afterEdit(
                receipt, [](Json& j) { j["requests"][1]["max_new_tokens"] = 4; }, &message),
            Status::kMismatch);
  EXPECT_NE(message.find("requests[1].finish_reason: 'stop' but max_new_tokens"), std::string::npos)
      << message;
  // At run.max_context too.
  const int64_t total = static_cast<int64_t>(receipt.requests[1].prompt_ids.size()) + 4;
  Receipt at_context = receipt;
  at_context.max_context = total;
  at_context.requests.erase(at_context.requests.begin());
  rehash(&at_context);
  EXPECT_EQ(validateReceipt(at_context, nullptr), Status::kMismatch);
  EXPECT_NE(std::string(lastErrorMessage()).find("'stop' but"), std::string::npos)
      << lastErrorMessage();
  // A "length" relabelled "stop" (request 0 ran to max_new_tokens).
  EXPECT_EQ(afterEdit(
                receipt, [](Json& j) { j["requests"][0]["finish_reason"] = "stop"; }, &message),
            Status::kMismatch);
  EXPECT_NE(message.find("requests[0].finish_reason"), std::string::npos) << message;
  // A stop before the first token has no receipt: the reader refuses it, and so does validate
  // for a receipt built in memory.
  Receipt empty = receipt;
  empty.requests[1].output_ids.clear();
  empty.requests[1].step_logits_sha256.clear();
  empty.requests[1].text.clear();
  rehash(&empty);
  EXPECT_EQ(validateReceipt(empty, nullptr), Status::kMismatch);
  EXPECT_NE(std::string(lastErrorMessage()).find("'stop' without output ids"), std::string::npos)
      << lastErrorMessage();
  EXPECT_EQ(parseText(fileText(empty), &message), Status::kIoError) << message;
  // Edited without re-hashing: inconsistent.
  EXPECT_EQ(afterEdit(
                receipt, [](Json& j) { j["requests"][1]["output_ids"][2] = 9; }, &message),
            Status::kMismatch);
}

TEST(ReceiptStop, VerifyRefusesAStopAfterAnEndTokenAndTamperedTokens) {
  // A sampled generation that ends with the end-of-sequence token before its limit (near-uniform
  // draws over the builtin's 258 ids: the seeds below give several), relabelled "stop".
  std::vector<GenerationRequest> requests(16);
  for (size_t r = 0; r < requests.size(); ++r) {
    requests[r].prompt_text = "Hi";
    requests[r].max_new_tokens = 60;
    requests[r].sampling.temperature = 100.0f;
    requests[r].sampling.seed = 40 + r;
  }
  Receipt receipt = generateReceipt(false, 1, requests);
  auto ended = std::find_if(receipt.requests.begin(), receipt.requests.end(), [](const auto& r) {
    return r.finish_reason == "eos" && static_cast<int64_t>(r.output_ids.size()) < r.max_new_tokens;
  });
  ASSERT_NE(ended, receipt.requests.end()) << "no seed ended with the end token";
  Receipt relabelled = receipt;
  relabelled.requests = {*ended};
  relabelled.requests[0].finish_reason = "stop";
  rehash(&relabelled);
  ASSERT_EQ(validateReceipt(relabelled, nullptr), Status::kSuccess) << lastErrorMessage();
  VerifyReport report = verify(relabelled);
  EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
  EXPECT_EQ(report.field, "finish_reason");
  EXPECT_NE(report.summary.find("finish_reason 'stop' but the last token is an end-of-sequence"),
            std::string::npos)
      << report.summary;

  // A stopped receipt whose last token was changed (re-hashed): the token re-derivation fails.
  Receipt stopped = stoppedReceipt(twoRequests(), 0, 5);
  ASSERT_EQ(stopped.requests[0].finish_reason, "stop");
  stopped.requests[0].output_ids[4] = (stopped.requests[0].output_ids[4] + 1) % 200;
  rehash(&stopped);
  report = verify(stopped);
  EXPECT_EQ(report.verdict, Verdict::kMismatch) << report.summary;
  EXPECT_EQ(report.field, "output_ids");
  EXPECT_EQ(report.step, 4);
}

}  // namespace
}  // namespace ree
