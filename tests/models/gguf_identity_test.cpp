// A GGUF model's identity binds its tokenizer (docs/receipt.md, "Model identity"): tokenizer_sha256
// hashes the tokenizer.* metadata entries and general.architecture, so two files that differ in
// one merge, one token, one token type, an end token id or the chat template have different
// identities, and the same entries in another order the same one; the value equals the
// independent recomputation of scripts/reference/receipt_reference.py (which hashes the file's own
// entry bytes, REE re-encodes the parsed values). Receipts: a GGUF receipt verifies; one written
// before the binding (tokenizer_sha256 "") still verifies, with a note; a changed tokenizer entry
// makes verification impossible, naming model.tokenizer_sha256.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf_builder.h"
#include "receipt_test_util.h"
#include "ree/models/engine.h"
#include "ree/models/model_identity.h"
#include "ree/models/receipt.h"
#include "subprocess_util.h"

namespace ree {
namespace {

namespace fs = std::filesystem;
using models::test::GgufBuilder;
using models::test::ggufString;
using models::test::i32Array;
using models::test::stringArray;
using models::test::u32le;
using models::test::u64le;

std::string testRoot() {
  const char* tmp = std::getenv("REE_TEST_TMP");
  std::string root = (tmp != nullptr && *tmp != '\0') ? tmp : "/tmp/ree_models_gguf_identity_test";
  fs::create_directories(root);
  return root;
}

// A one-layer llama (hidden 32, 2 heads of 16, 1 KV head, 8 vocabulary rows) with a byte-level
// tokenizer of 8 tokens and a chat template; `entries` (key -> type + value bytes) can be edited
// before write().
struct ModelFile {
  std::map<std::string, std::string> entries = {
      {"tokenizer.ggml.model", u32le(8) + ggufString("gpt2")},
      {"tokenizer.ggml.pre", u32le(8) + ggufString("gpt-2")},
      {"tokenizer.ggml.tokens",
       u32le(9) + stringArray({"a", "b", "c", "d", "ab", "abc", "<s>", "<|end|>"})},
      {"tokenizer.ggml.token_type", u32le(9) + i32Array({1, 1, 1, 1, 1, 1, 3, 3})},
      {"tokenizer.ggml.merges", u32le(9) + stringArray({"a b", "ab c"})},
      {"tokenizer.ggml.bos_token_id", u32le(4) + u32le(6)},
      {"tokenizer.ggml.eos_token_id", u32le(4) + u32le(7)},
      {"tokenizer.chat_template",
       u32le(8) + ggufString("{% for m in messages %}{{ m['content'] }}{% endfor %}")},
  };
  bool reversed = false;  // write the metadata entries in the opposite order

  std::string write(const std::string& name) const {
    GgufBuilder b;
    b.addLlamaMetadata(/*layers=*/1, /*hidden=*/32, /*feed_forward=*/32, /*heads=*/2,
                       /*kv_heads=*/1, /*context=*/64);
    for (const auto& [key, value] : entries)
      b.entries.push_back(ggufString(key) + value);
    if (reversed) std::reverse(b.entries.begin(), b.entries.end());
    auto add = [&](const std::string& tensor, std::vector<uint64_t> dims, float scale) {
      uint64_t n = 1;
      for (uint64_t d : dims)
        n *= d;
      std::vector<float> values(n);
      for (uint64_t i = 0; i < n; ++i)
        values[i] = scale * static_cast<float>(static_cast<int64_t>(i % 7) - 3);
      b.addF32Tensor(tensor, std::move(dims), values);
    };
    add("token_embd.weight", {32, 8}, 0.25f);
    add("blk.0.attn_norm.weight", {32}, 0.5f);
    add("blk.0.attn_q.weight", {32, 32}, 0.01f);
    add("blk.0.attn_k.weight", {32, 16}, 0.02f);
    add("blk.0.attn_v.weight", {32, 16}, 0.03f);
    add("blk.0.attn_output.weight", {32, 32}, 0.01f);
    add("blk.0.ffn_norm.weight", {32}, 0.5f);
    add("blk.0.ffn_gate.weight", {32, 32}, 0.02f);
    add("blk.0.ffn_up.weight", {32, 32}, 0.01f);
    add("blk.0.ffn_down.weight", {32, 32}, 0.03f);
    add("output_norm.weight", {32}, 0.5f);
    add("output.weight", {32, 8}, 0.1f);
    const std::string path = testRoot() + "/" + name + ".gguf";
    b.write(path);
    return path;
  }
};

ModelIdentity identityOf(const std::string& path) {
  ModelIdentity identity;
  EXPECT_EQ(computeModelIdentity(path, &identity), Status::kSuccess) << lastErrorMessage();
  return identity;
}

// receipt_reference.py's tokenizer_sha256 of `path`; "" with *skipped when Python is absent.
std::string referenceTokenizerSha256(const std::string& path, bool* skipped) {
  const char* python = std::getenv("REE_PYTHON");
  const char* source = std::getenv("REE_SOURCE_DIR");
  *skipped = python == nullptr || *python == '\0' || source == nullptr || *source == '\0';
  if (*skipped) return "";
  std::string output;
  const std::string script = std::string(source) + "/scripts/reference/receipt_reference.py";
  const int code = test::runCommand(test::shellQuote(python) + " " + test::shellQuote(script) +
                                        " gguf-tokenizer " + test::shellQuote(path),
                                    &output);
  EXPECT_EQ(code, 0) << output;
  const nlohmann::json json = nlohmann::json::parse(output, nullptr, false);
  EXPECT_FALSE(json.is_discarded()) << output;
  return json.is_discarded() ? "" : json["tokenizer_sha256"].get<std::string>();
}

// One edit of one tokenizer entry per case.
struct Variant {
  const char* name;
  const char* key;
  std::string value;  // type + value bytes
};

std::vector<Variant> oneEntryVariants() {
  return {
      {"merge", "tokenizer.ggml.merges", u32le(9) + stringArray({"a b", "b c"})},
      {"token", "tokenizer.ggml.tokens",
       u32le(9) + stringArray({"a", "b", "c", "e", "ab", "abc", "<s>", "<|end|>"})},
      {"token_type", "tokenizer.ggml.token_type", u32le(9) + i32Array({1, 1, 1, 4, 1, 1, 3, 3})},
      {"eos", "tokenizer.ggml.eos_token_id", u32le(4) + u32le(6)},
      {"eot", "tokenizer.ggml.eot_token_id", u32le(4) + u32le(7)},
      {"template", "tokenizer.chat_template",
       u32le(8) + ggufString("{% for m in messages %}{{ m['content'] }}\n{% endfor %}")},
      {"add_bos", "tokenizer.ggml.add_bos_token", u32le(7) + std::string(1, '\0')},
      {"same_value_other_type", "tokenizer.ggml.bos_token_id", u32le(5) + u32le(6)},
  };
}

TEST(GgufIdentity, TheSameEntriesGiveTheSameIdentityInAnyOrder) {
  const ModelFile spec;
  const ModelIdentity a = identityOf(spec.write("base"));
  ModelFile reordered = spec;
  reordered.reversed = true;
  const ModelIdentity b = identityOf(reordered.write("base_reversed"));
  EXPECT_EQ(a.weights_kind, "gguf");
  EXPECT_EQ(a.tokenizer_sha256.size(), 64u);
  // The end-of-generation ids and the chat template are tokenizer.* entries: no directory files.
  EXPECT_EQ(a.generation_config_sha256, "");
  EXPECT_EQ(a.chat_template_sha256, "");
  EXPECT_EQ(a.tokenizer_sha256, identityOf(spec.write("base_again")).tokenizer_sha256);
  EXPECT_EQ(b.tokenizer_sha256, a.tokenizer_sha256);
  EXPECT_EQ(b.config_sha256, a.config_sha256);
  EXPECT_EQ(b.weights_sha256, a.weights_sha256);
}

TEST(GgufIdentity, OneChangedTokenizerEntryChangesOnlyTheTokenizerHash) {
  const ModelIdentity base = identityOf(ModelFile().write("base"));
  std::vector<std::string> seen = {base.tokenizer_sha256};
  for (const Variant& v : oneEntryVariants()) {
    ModelFile spec;
    spec.entries[v.key] = v.value;
    const ModelIdentity changed = identityOf(spec.write(std::string("variant_") + v.name));
    EXPECT_EQ(std::count(seen.begin(), seen.end(), changed.tokenizer_sha256), 0) << v.name;
    seen.push_back(changed.tokenizer_sha256);
    EXPECT_EQ(changed.weights_sha256, base.weights_sha256) << v.name;
    // The config holds the bos and eos ids (gguf_config.h), nothing else of the tokenizer.
    if (std::string(v.name) != "eos") {
      EXPECT_EQ(changed.config_sha256, base.config_sha256) << v.name;
    }
  }
}

// The bytes docs/receipt.md defines, written out by hand for a small file: the version line, then
// general.architecture and the tokenizer.* entries in byte order of their keys, other keys left
// out; no tokenizer.* key at all gives "".
TEST(GgufIdentity, TokenizerBytesAreTheDocumentedSerialisation) {
  GgufBuilder b;
  b.addU32("tokenizer.ggml.eos_token_id", 2);
  b.addU32("llama.block_count", 1);
  b.addString("tokenizer.chat_template", "{{ x }}");
  b.addString("general.architecture", "llama");
  b.entries.push_back(ggufString("tokenizer.ggml.tokens") + u32le(9) + stringArray({"x", "yz"}));
  b.entries.push_back(ggufString("tokenizer.ggml.token_type") + u32le(9) + i32Array({1, -3}));
  const std::string path = testRoot() + "/bytes.gguf";
  b.write(path);
  std::string bytes;
  ASSERT_EQ(ggufTokenizerIdentityBytes(path, &bytes), Status::kSuccess) << lastErrorMessage();
  const std::string expected =
      std::string("ree-gguf-tokenizer/1\n") +                                     //
      ggufString("general.architecture") + u32le(8) + ggufString("llama") +       //
      ggufString("tokenizer.chat_template") + u32le(8) + ggufString("{{ x }}") +  //
      ggufString("tokenizer.ggml.eos_token_id") + u32le(4) + u32le(2) +           //
      ggufString("tokenizer.ggml.token_type") + u32le(9) + i32Array({1, -3}) +    //
      ggufString("tokenizer.ggml.tokens") + u32le(9) + stringArray({"x", "yz"});
  EXPECT_EQ(bytes, expected);
  bool skipped = false;
  const std::string reference = referenceTokenizerSha256(path, &skipped);
  if (!skipped) {
    EXPECT_EQ(reference, sha256Hex(expected.data(), expected.size()));
  }

  GgufBuilder none;
  none.addString("general.architecture", "llama");
  none.addU32("llama.block_count", 1);
  none.write(path);
  ASSERT_EQ(ggufTokenizerIdentityBytes(path, &bytes), Status::kSuccess) << lastErrorMessage();
  EXPECT_EQ(bytes, "");
  if (!skipped) {
    EXPECT_EQ(referenceTokenizerSha256(path, &skipped), "");
  }
}

TEST(GgufIdentity, EqualsTheIndependentRecomputation) {
  std::vector<std::string> paths = {ModelFile().write("base")};
  for (const Variant& v : oneEntryVariants()) {
    ModelFile spec;
    spec.entries[v.key] = v.value;
    spec.reversed = true;
    paths.push_back(spec.write(std::string("reference_") + v.name));
  }
  for (const std::string& path : paths) {
    bool skipped = false;
    const std::string reference = referenceTokenizerSha256(path, &skipped);
    if (skipped) GTEST_SKIP() << "REE_PYTHON / REE_SOURCE_DIR not set (ctest sets them)";
    EXPECT_EQ(identityOf(path).tokenizer_sha256, reference) << path;
  }
}

// ---- Receipts -----------------------------------------------------------------------------

std::unique_ptr<Engine> makeEngine(EngineOptions options, const std::string& path) {
  options.model = path;
  options.device = Device::cpu();
  options.max_batch = 1;
  std::unique_ptr<Engine> engine;
  EXPECT_EQ(Engine::create(options, &engine), Status::kSuccess) << lastErrorMessage();
  return engine;
}

// The receipt of one greedy request from text on the GGUF model `path`.
Receipt generateReceipt(const std::string& path) {
  EngineOptions options;
  options.max_context = 32;
  std::unique_ptr<Engine> engine = makeEngine(options, path);
  Receipt receipt;
  if (engine == nullptr) return receipt;
  EXPECT_NE(engine->tokenizer(), nullptr);
  std::vector<GenerationRequest> requests(1);
  requests[0].prompt_text = "abcabd<s>";
  requests[0].max_new_tokens = 6;
  std::vector<GenerationResult> results;
  EXPECT_EQ(engine->generate(requests, &results), Status::kSuccess) << lastErrorMessage();
  return test::cpuReceipt(*engine, path, identityOf(path), requests, results);
}

void rehash(Receipt* receipt) {
  std::string body;
  ASSERT_EQ(canonicalReceiptBody(*receipt, &body), Status::kSuccess);
  receipt->receipt_sha256 = sha256Hex(body.data(), body.size());
}

VerifyReport verify(const Receipt& receipt, const std::string& path) {
  EngineOptions options;
  EXPECT_EQ(receiptEngineOptions(receipt, &options), Status::kSuccess) << lastErrorMessage();
  std::unique_ptr<Engine> engine = makeEngine(options, path);
  VerifyReport report;
  if (engine == nullptr) return report;
  EXPECT_EQ(verifyReceipt(receipt, *engine, path, &report), Status::kSuccess) << lastErrorMessage();
  return report;
}

TEST(GgufIdentityReceipt, ReceiptsBindTheTokenizerAndOldOnesStillVerify) {
  const std::string path = ModelFile().write("receipt_model");
  const Receipt receipt = generateReceipt(path);
  ASSERT_EQ(receipt.requests.size(), 1u);
  ASSERT_EQ(receipt.identity.tokenizer_sha256.size(), 64u);
  VerifyReport report = verify(receipt, path);
  EXPECT_EQ(report.verdict, Verdict::kVerified) << report.summary;
  EXPECT_EQ(report.note, "");
  // A GGUF receipt keeps the form it had: no keys for a directory's files.
  std::string text;
  ASSERT_EQ(receiptFileText(receipt, &text), Status::kSuccess);
  EXPECT_EQ(text.find("generation_config_sha256"), std::string::npos);
  EXPECT_EQ(text.find("chat_template_sha256"), std::string::npos);

  // Written before the binding: tokenizer_sha256 "" (and re-hashed, as that release wrote it).
  Receipt old = receipt;
  old.identity.tokenizer_sha256 = "";
  rehash(&old);
  ASSERT_EQ(validateReceipt(old, nullptr), Status::kSuccess) << lastErrorMessage();
  report = verify(old, path);
  EXPECT_EQ(report.verdict, Verdict::kVerified) << report.summary;
  EXPECT_NE(report.note.find("predates"), std::string::npos) << report.note;
  EXPECT_NE(report.json.find("predates"), std::string::npos) << report.json;
}

TEST(GgufIdentityReceipt, AChangedTokenizerEntryCannotVerifyNamingTheField) {
  const std::string path = ModelFile().write("receipt_model");
  const Receipt receipt = generateReceipt(path);
  ASSERT_EQ(receipt.requests.size(), 1u);
  for (const Variant& v : oneEntryVariants()) {
    ModelFile spec;
    spec.entries[v.key] = v.value;
    const ModelIdentity changed = identityOf(spec.write(std::string("receipt_") + v.name));
    VerifyReport report;
    EXPECT_FALSE(checkModelIdentity(receipt, changed, &report)) << v.name;
    EXPECT_EQ(report.verdict, Verdict::kCouldNotVerify) << v.name;
    // eos is also in the derived config, which is compared first.
    const std::string field =
        std::string(v.name) == "eos" ? "model.config_sha256" : "model.tokenizer_sha256";
    EXPECT_EQ(report.field, field) << v.name << ": " << report.summary;
    EXPECT_NE(report.summary.find("model identity differs"), std::string::npos) << report.summary;
  }
  // A receipt naming another tokenizer hash for this very file: never accepted.
  Receipt forged = receipt;
  forged.identity.tokenizer_sha256[0] = forged.identity.tokenizer_sha256[0] == '0' ? '1' : '0';
  rehash(&forged);
  const VerifyReport report = verify(forged, path);
  EXPECT_EQ(report.verdict, Verdict::kCouldNotVerify) << report.summary;
  EXPECT_EQ(report.field, "model.tokenizer_sha256") << report.summary;
  EXPECT_NE(report.summary.find("GGUF tokenizer metadata"), std::string::npos) << report.summary;
}

}  // namespace
}  // namespace ree
