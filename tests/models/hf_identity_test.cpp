// A model directory's identity binds the files that decide where generation stops and how a chat
// is rendered (docs/receipt.md, "Model identity"): generation_config_sha256 hashes
// generation_config.json, chat_template_sha256 tokenizer_config.json and chat_template.jinja, each
// as raw bytes after a version line, a missing file recorded as missing. One changed eos list,
// chat template, template file or template token changes exactly one field; the values equal the
// independent recomputation of scripts/reference/receipt_reference.py hf-files. Receipts: one of
// this build verifies; one written before the binding (no such keys) still verifies, with a note;
// a model whose files changed cannot verify it, the field named; "" for the keys is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "receipt_test_util.h"
#include "ree/models/builtin.h"
#include "ree/models/engine.h"
#include "ree/models/model_identity.h"
#include "ree/models/receipt.h"
#include "subprocess_util.h"

namespace ree {
namespace {

namespace fs = std::filesystem;

std::string testRoot() {
  const char* tmp = std::getenv("REE_TEST_TMP");
  std::string root = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp/ree_models_hf_identity_test";
  fs::create_directories(root);
  return root;
}

void writeFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// A fresh copy of the built-in model's directory (config.json, generation_config.json with
// eos_token_id 257, tokenizer.json, tokenizer_config.json without a chat template, the weights)
// under `name`.
std::string modelCopy(const std::string& name) {
  std::string builtin;
  EXPECT_EQ(models::materializeBuiltinModel("builtin:tiny-llama", &builtin), Status::kSuccess)
      << lastErrorMessage();
  const std::string copy = testRoot() + "/" + name;
  fs::remove_all(copy);
  fs::copy(builtin, copy, fs::copy_options::recursive);
  return copy;
}

ModelIdentity identityOf(const std::string& model) {
  ModelIdentity identity;
  EXPECT_EQ(computeModelIdentity(model, &identity), Status::kSuccess) << lastErrorMessage();
  return identity;
}

constexpr const char* kTemplate =
    "{% for m in messages %}{{ bos_token }}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}";

// One edit of the base directory per case, and the field it must change.
struct Variant {
  const char* name;
  const char* field;  // "generation_config" or "chat_template"
  void (*edit)(const std::string& dir);
};

std::vector<Variant> variants() {
  return {
      {"eos_list", "generation_config",
       [](const std::string& d) {
         writeFile(d + "/generation_config.json",
                   "{\n  \"bos_token_id\": 256,\n  \"eos_token_id\": [257, 3]\n}");
       }},
      // Raw bytes: the same content re-serialised is another file (docs/receipt.md says why).
      {"generation_whitespace", "generation_config",
       [](const std::string& d) {
         writeFile(d + "/generation_config.json", "{\"bos_token_id\": 256, \"eos_token_id\": 257}");
       }},
      {"generation_removed", "generation_config",
       [](const std::string& d) { fs::remove(d + "/generation_config.json"); }},
      {"template_in_config", "chat_template",
       [](const std::string& d) {
         writeFile(d + "/tokenizer_config.json", nlohmann::json({{"bos_token", "<|begin_of_text|>"},
                                                                 {"eos_token", "<|end_of_text|>"},
                                                                 {"chat_template", kTemplate}})
                                                     .dump(2));
       }},
      {"template_jinja", "chat_template",
       [](const std::string& d) { writeFile(d + "/chat_template.jinja", kTemplate); }},
      {"bos_token", "chat_template",
       [](const std::string& d) {
         writeFile(
             d + "/tokenizer_config.json",
             nlohmann::json({{"bos_token", "<s>"}, {"eos_token", "<|end_of_text|>"}}).dump(2));
       }},
      {"tokenizer_config_removed", "chat_template",
       [](const std::string& d) { fs::remove(d + "/tokenizer_config.json"); }},
  };
}

std::string variantDirectory(const Variant& v) {
  const std::string dir = modelCopy(std::string("variant_") + v.name);
  v.edit(dir);
  return dir;
}

// receipt_reference.py hf-files of `dir`; null with *skipped when Python is absent.
nlohmann::json referenceModelFiles(const std::string& dir, bool* skipped) {
  const char* python = std::getenv("REE_PYTHON");
  const char* source = std::getenv("REE_SOURCE_DIR");
  *skipped = python == nullptr || *python == '\0' || source == nullptr || *source == '\0';
  if (*skipped) return nullptr;
  std::string output;
  const std::string script = std::string(source) + "/scripts/reference/receipt_reference.py";
  const int code = test::runCommand(test::shellQuote(python) + " " + test::shellQuote(script) +
                                        " hf-files " + test::shellQuote(dir),
                                    &output);
  EXPECT_EQ(code, 0) << output;
  nlohmann::json json = nlohmann::json::parse(output, nullptr, false);
  EXPECT_TRUE(json.is_object()) << output;
  return json;
}

TEST(HfIdentity, EachChangedFileChangesExactlyItsField) {
  const ModelIdentity base = identityOf(modelCopy("base"));
  ASSERT_EQ(base.generation_config_sha256.size(), 64u);
  ASSERT_EQ(base.chat_template_sha256.size(), 64u);
  EXPECT_EQ(identityOf(modelCopy("base_again")).generation_config_sha256,
            base.generation_config_sha256);
  EXPECT_EQ(identityOf(modelCopy("base_again")).chat_template_sha256, base.chat_template_sha256);
  std::vector<std::string> seen = {base.generation_config_sha256, base.chat_template_sha256};
  for (const Variant& v : variants()) {
    const ModelIdentity changed = identityOf(variantDirectory(v));
    const bool generation = std::string(v.field) == "generation_config";
    const std::string& field =
        generation ? changed.generation_config_sha256 : changed.chat_template_sha256;
    const std::string& other =
        generation ? changed.chat_template_sha256 : changed.generation_config_sha256;
    EXPECT_EQ(field.size(), 64u) << v.name;
    EXPECT_EQ(std::count(seen.begin(), seen.end(), field), 0) << v.name;
    seen.push_back(field);
    EXPECT_EQ(other, generation ? base.chat_template_sha256 : base.generation_config_sha256)
        << v.name;
    EXPECT_EQ(changed.config_sha256, base.config_sha256) << v.name;
    EXPECT_EQ(changed.tokenizer_sha256, base.tokenizer_sha256) << v.name;
    EXPECT_EQ(changed.weights_sha256, base.weights_sha256) << v.name;
  }
}

// The bytes docs/receipt.md defines, written out by hand: the version line, then each file in
// order as NAME \t SIZE \n BYTES, or NAME \t - \n when it does not exist.
TEST(HfIdentity, FileBytesAreTheDocumentedSerialisation) {
  const std::string dir = testRoot() + "/bytes";
  fs::remove_all(dir);
  fs::create_directories(dir);
  writeFile(dir + "/generation_config.json", "{\"eos_token_id\": [2, 7]}\n");
  writeFile(dir + "/chat_template.jinja", "{{ x }}\n\t");
  std::string bytes;
  ASSERT_EQ(modelFilesIdentityBytes(dir, ModelFiles::kGenerationConfig, &bytes), Status::kSuccess)
      << lastErrorMessage();
  const std::string generation =
      "ree-generation-config/1\ngeneration_config.json\t25\n{\"eos_token_id\": [2, 7]}\n";
  EXPECT_EQ(bytes, generation);
  ASSERT_EQ(modelFilesIdentityBytes(dir, ModelFiles::kChatTemplate, &bytes), Status::kSuccess)
      << lastErrorMessage();
  const std::string chat =
      "ree-chat-template/1\ntokenizer_config.json\t-\nchat_template.jinja\t9\n{{ x }}\n\t";
  EXPECT_EQ(bytes, chat);
  bool skipped = false;
  nlohmann::json reference = referenceModelFiles(dir, &skipped);
  if (!skipped) {
    EXPECT_EQ(reference["generation_config_sha256"],
              sha256Hex(generation.data(), generation.size()));
    EXPECT_EQ(reference["chat_template_sha256"], sha256Hex(chat.data(), chat.size()));
  }
  // Neither file: still a value (so "" in a receipt can only mean a receipt from before).
  fs::remove(dir + "/generation_config.json");
  ASSERT_EQ(modelFilesIdentityBytes(dir, ModelFiles::kGenerationConfig, &bytes), Status::kSuccess);
  EXPECT_EQ(bytes, "ree-generation-config/1\ngeneration_config.json\t-\n");
  // A file that is there but not a regular file is refused, naming it.
  fs::create_directories(dir + "/tokenizer_config.json");
  EXPECT_NE(modelFilesIdentityBytes(dir, ModelFiles::kChatTemplate, &bytes), Status::kSuccess);
  EXPECT_NE(std::string(lastErrorMessage()).find("tokenizer_config.json"), std::string::npos)
      << lastErrorMessage();
}

TEST(HfIdentity, EqualsTheIndependentRecomputation) {
  std::vector<std::string> dirs = {modelCopy("reference_base")};
  for (const Variant& v : variants())
    dirs.push_back(variantDirectory(v));
  for (const std::string& dir : dirs) {
    bool skipped = false;
    const nlohmann::json reference = referenceModelFiles(dir, &skipped);
    if (skipped) GTEST_SKIP() << "REE_PYTHON / REE_SOURCE_DIR not set (ctest sets them)";
    const ModelIdentity identity = identityOf(dir);
    EXPECT_EQ(reference["generation_config_sha256"], identity.generation_config_sha256) << dir;
    EXPECT_EQ(reference["chat_template_sha256"], identity.chat_template_sha256) << dir;
  }
}

// ---- Receipts -----------------------------------------------------------------------------

std::unique_ptr<Engine> makeEngine(EngineOptions options, const std::string& model) {
  options.model = model;
  options.device = Device::cpu();
  options.max_batch = 1;
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  return engine;
}

// The receipt of one greedy request from text on the model directory `dir`.
Receipt generateReceipt(const std::string& dir) {
  EngineOptions options;
  options.max_context = 32;
  std::unique_ptr<Engine> engine = makeEngine(options, dir);
  if (engine == nullptr) return Receipt();
  std::vector<GenerationRequest> requests(1);
  requests[0].prompt_text = "Hello receipts";
  requests[0].max_new_tokens = 4;
  std::vector<GenerationResult> results;
  EXPECT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  return test::cpuReceipt(*engine, dir, identityOf(dir), requests, results);
}

void rehash(Receipt* receipt) {
  std::string body;
  ASSERT_EQ(canonicalReceiptBody(*receipt, &body), Status::kSuccess);
  receipt->receipt_sha256 = sha256Hex(body.data(), body.size());
}

VerifyReport verify(const Receipt& receipt, const std::string& dir) {
  EngineOptions options;
  EXPECT_EQ(receiptEngineOptions(receipt, &options), Status::kSuccess) << lastErrorMessage();
  std::unique_ptr<Engine> engine = makeEngine(options, dir);
  VerifyReport report;
  if (engine == nullptr) return report;
  EXPECT_EQ(verifyReceipt(receipt, *engine, dir, &report), Status::kSuccess) << lastErrorMessage();
  return report;
}

// The receipt as a file says it, read back.
Receipt roundTrip(const Receipt& receipt) {
  std::string text;
  EXPECT_EQ(receiptFileText(receipt, &text), Status::kSuccess) << lastErrorMessage();
  Receipt back;
  EXPECT_EQ(parseReceipt(text, "r.json", &back), Status::kSuccess) << lastErrorMessage();
  return back;
}

TEST(HfIdentityReceipt, ReceiptsBindTheFilesAndOldOnesStillVerify) {
  const std::string dir = modelCopy("receipt_model");
  const Receipt receipt = roundTrip(generateReceipt(dir));
  ASSERT_EQ(receipt.requests.size(), 1u);
  EXPECT_EQ(receipt.identity.generation_config_sha256, identityOf(dir).generation_config_sha256);
  EXPECT_EQ(receipt.identity.chat_template_sha256, identityOf(dir).chat_template_sha256);
  ASSERT_EQ(validateReceipt(receipt, nullptr), Status::kSuccess) << lastErrorMessage();
  VerifyReport report = verify(receipt, dir);
  EXPECT_EQ(report.verdict, Verdict::kVerified) << report.summary;
  EXPECT_EQ(report.note, "");

  // Written before the binding: neither key (and re-hashed, as that release wrote it).
  Receipt old = receipt;
  old.identity.generation_config_sha256.clear();
  old.identity.chat_template_sha256.clear();
  rehash(&old);
  std::string text;
  ASSERT_EQ(receiptFileText(old, &text), Status::kSuccess);
  EXPECT_EQ(text.find("generation_config_sha256"), std::string::npos);
  EXPECT_EQ(text.find("chat_template_sha256"), std::string::npos);
  old = roundTrip(old);
  ASSERT_EQ(validateReceipt(old, nullptr), Status::kSuccess) << lastErrorMessage();
  report = verify(old, dir);
  EXPECT_EQ(report.verdict, Verdict::kVerified) << report.summary;
  for (const char* field : {"model.generation_config_sha256 is absent: the receipt predates",
                            "model.chat_template_sha256 is absent: the receipt predates"}) {
    EXPECT_NE(report.note.find(field), std::string::npos) << report.note;
    EXPECT_NE(report.json.find(field), std::string::npos) << report.json;
  }
}

TEST(HfIdentityReceipt, AChangedFileCannotVerifyNamingTheField) {
  const std::string dir = modelCopy("receipt_model");
  const Receipt receipt = generateReceipt(dir);
  ASSERT_EQ(receipt.requests.size(), 1u);
  for (const Variant& v : variants()) {
    const std::string changed = variantDirectory(v);
    const std::string field = std::string("model.") + v.field + "_sha256";
    VerifyReport report;
    EXPECT_FALSE(checkModelIdentity(receipt, identityOf(changed), &report)) << v.name;
    EXPECT_EQ(report.verdict, Verdict::kCouldNotVerify) << v.name;
    EXPECT_EQ(report.field, field) << v.name << ": " << report.summary;
    EXPECT_NE(report.summary.find("model identity differs"), std::string::npos) << report.summary;
  }
  // Through verify itself, on a model whose eos list and one whose chat template changed.
  for (const Variant& v : variants()) {
    const std::string name = v.name;
    if (name != "eos_list" && name != "template_jinja") continue;
    const VerifyReport report = verify(receipt, variantDirectory(v));
    EXPECT_EQ(report.verdict, Verdict::kCouldNotVerify) << report.summary;
    EXPECT_EQ(report.field, std::string("model.") + v.field + "_sha256") << report.summary;
  }
  // A receipt naming another hash for this very directory: never accepted.
  Receipt forged = receipt;
  forged.identity.chat_template_sha256[0] =
      forged.identity.chat_template_sha256[0] == '0' ? '1' : '0';
  rehash(&forged);
  const VerifyReport report = verify(forged, dir);
  EXPECT_EQ(report.verdict, Verdict::kCouldNotVerify) << report.summary;
  EXPECT_EQ(report.field, "model.chat_template_sha256") << report.summary;
}

// The keys are written only with a digest: "" is malformed (not "a receipt from before").
TEST(HfIdentityReceipt, AnEmptyValueIsRefusedNamingTheKey) {
  const Receipt receipt = generateReceipt(modelCopy("receipt_model"));
  std::string text;
  ASSERT_EQ(receiptFileText(receipt, &text), Status::kSuccess);
  for (const char* key : {"generation_config_sha256", "chat_template_sha256"}) {
    nlohmann::json json = nlohmann::json::parse(text);
    json["model"][key] = "";
    Receipt parsed;
    EXPECT_EQ(parseReceipt(json.dump(1), "r.json", &parsed), Status::kIoError) << key;
    EXPECT_NE(std::string(lastErrorMessage()).find(std::string("r.json: model.") + key + ": "),
              std::string::npos)
        << lastErrorMessage();
    json["model"][key] = "ab";
    EXPECT_EQ(parseReceipt(json.dump(1), "r.json", &parsed), Status::kIoError) << key;
    EXPECT_NE(std::string(lastErrorMessage()).find("64 lowercase hex"), std::string::npos)
        << lastErrorMessage();
  }
}

}  // namespace
}  // namespace ree
