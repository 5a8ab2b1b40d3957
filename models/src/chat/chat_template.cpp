// The public chat-template API: compile once, render conversations; interpreter errors become a
// Status and one line naming the template, the line and the column.
#include "ree/models/chat_template.h"

#include <cstdio>

#include "chat/chat_variables.h"
#include "chat/jinja_error.h"
#include "chat/jinja_eval.h"
#include "chat/jinja_lexer.h"
#include "chat/jinja_parser.h"
#include "chat/jinja_text.h"
#include "ree/core/text.h"

namespace ree::models {

using jinja::Dict;
using jinja::JinjaError;
using jinja::Kind;
using jinja::Value;

struct ChatTemplate::Impl {
  std::string source_name;
  ChatTemplateLimits limits;
  std::unique_ptr<jinja::SourceMap> source;
  jinja::Body body;
};

namespace {

// Control characters escaped and the length bounded, so the message stays one line.
std::string oneLine(const std::string& text) {
  std::string out;
  for (const char c : text) {
    if (out.size() > 400) {
      while (!out.empty() && (static_cast<unsigned char>(out.back()) & 0xC0) == 0x80)
        out.pop_back();
      if (!out.empty() && static_cast<unsigned char>(out.back()) >= 0xC0) out.pop_back();
      return out + "...";
    }
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte == 0x7F) {
      char buffer[8];
      std::snprintf(buffer, sizeof(buffer), "\\x%02x", byte);
      out += buffer;
    } else {
      out += c;
    }
  }
  return out;
}

Status templateError(const std::string& source_name, const JinjaError& error) {
  const std::string where = printableText(source_name, 120);
  return REE_FAIL(Status::kInvalidArgument, "chat template %s:%d:%d: %s%s", where.c_str(),
                  error.line, error.column, error.limit ? "limit reached: " : "",
                  oneLine(error.message).c_str());
}

Status renderWith(const ChatTemplate::Impl& impl, Dict variables, const ChatRenderOptions& options,
                  std::string* text) {
  REE_CHECK_ARG(text != nullptr, "ChatTemplate::render: text is null");
  variables.set("tools", Value::none());
  variables.set("documents", Value::none());
  variables.set("add_generation_prompt", Value::fromBool(options.add_generation_prompt));
  variables.set("bos_token", Value::fromString(options.bos_token));
  variables.set("eos_token", Value::fromString(options.eos_token));
  if (!options.extra_variables_json.empty()) {
    Value extra;
    REE_RETURN_IF_ERROR(
        jinja::valueFromJson(options.extra_variables_json, "chat template variables", &extra));
    REE_CHECK_ARG(extra.kind == Kind::kDict, "chat template variables: a JSON object is expected");
    for (const auto& entry : extra.dict->entries)
      variables.set(entry.first, entry.second);
  }
  jinja::RenderLimits limits;
  limits.max_steps = impl.limits.max_steps;
  limits.max_output_bytes = impl.limits.max_output_bytes;
  limits.max_call_depth = impl.limits.max_call_depth;
  try {
    *text = jinja::renderTemplate(impl.body, *impl.source, std::move(variables), limits);
  } catch (const JinjaError& error) {
    return templateError(impl.source_name, error);
  } catch (const std::bad_alloc&) {
    return REE_FAIL(Status::kOutOfMemory, "chat template %s: out of memory while rendering",
                    printableText(impl.source_name, 120).c_str());
  } catch (const std::exception& error) {
    return REE_FAIL(Status::kInternal, "chat template %s: %s",
                    printableText(impl.source_name, 120).c_str(), error.what());
  }
  return Status::kSuccess;
}

}  // namespace

ChatTemplate::ChatTemplate(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ChatTemplate::~ChatTemplate() = default;

const std::string& ChatTemplate::sourceName() const {
  return impl_->source_name;
}

Status ChatTemplate::parse(std::string_view text, const std::string& source_name,
                           std::unique_ptr<ChatTemplate>* out, const ChatTemplateLimits& limits) {
  REE_CHECK_ARG(out != nullptr, "ChatTemplate::parse: out is null");
  const std::string where = printableText(source_name, 120);
  REE_CHECK_ARG(text.size() <= limits.max_template_bytes,
                "chat template %s: %zu bytes, over the limit of %zu", where.c_str(), text.size(),
                limits.max_template_bytes);
  REE_CHECK_ARG(jinja::isValidUtf8(text), "chat template %s: not valid UTF-8", where.c_str());
  auto impl = std::make_unique<Impl>();
  impl->source_name = source_name;
  impl->limits = limits;
  impl->source = std::make_unique<jinja::SourceMap>(text);
  try {
    impl->body =
        jinja::parseTemplate(jinja::lexTemplate(*impl->source), *impl->source, limits.max_nesting);
  } catch (const JinjaError& error) {
    return templateError(source_name, error);
  } catch (const std::bad_alloc&) {
    return REE_FAIL(Status::kOutOfMemory, "chat template %s: out of memory while parsing",
                    where.c_str());
  } catch (const std::exception& error) {
    return REE_FAIL(Status::kInternal, "chat template %s: %s", where.c_str(), error.what());
  }
  out->reset(new ChatTemplate(std::move(impl)));
  return Status::kSuccess;
}

Status ChatTemplate::render(const std::vector<ChatMessage>& messages,
                            const ChatRenderOptions& options, std::string* text) const {
  jinja::List list;
  for (size_t i = 0; i < messages.size(); ++i) {
    REE_CHECK_ARG(jinja::isValidUtf8(messages[i].role) && jinja::isValidUtf8(messages[i].content),
                  "chat message %zu: not valid UTF-8", i);
    Dict message;
    message.set("role", Value::fromString(messages[i].role));
    message.set("content", Value::fromString(messages[i].content));
    list.push_back(Value::fromDict(std::move(message)));
  }
  Dict variables;
  variables.set("messages", Value::fromList(std::move(list)));
  return renderWith(*impl_, std::move(variables), options, text);
}

Status ChatTemplate::renderJson(std::string_view messages_json, const ChatRenderOptions& options,
                                std::string* text) const {
  Value messages;
  REE_RETURN_IF_ERROR(jinja::valueFromJson(messages_json, "chat messages", &messages));
  REE_CHECK_ARG(messages.kind == Kind::kList,
                "chat messages: a JSON array of messages is expected");
  Dict variables;
  variables.set("messages", std::move(messages));
  return renderWith(*impl_, std::move(variables), options, text);
}

}  // namespace ree::models
