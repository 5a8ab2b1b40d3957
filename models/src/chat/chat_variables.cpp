#include "chat/chat_variables.h"

#include <nlohmann/json.hpp>

#include "chat/jinja_error.h"
#include "ree/core/json_guard.h"

namespace ree::models::jinja {

namespace {

Value convert(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::fromBool(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::fromInt(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const uint64_t u = json.get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value::fromFloat(static_cast<double>(u));
      return Value::fromInt(static_cast<int64_t>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return Value::fromFloat(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value::fromString(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List items;
      for (const auto& item : json)
        items.push_back(convert(item));
      return Value::fromList(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict dict;
      for (auto it = json.begin(); it != json.end(); ++it)
        dict.entries.emplace_back(it.key(), convert(it.value()));
      return Value::fromDict(std::move(dict));
    }
    default:
      return Value::none();
  }
}

}  // namespace

Status valueFromJson(std::string_view json_text, const std::string& what, Value* value) {
  REE_RETURN_IF_ERROR(checkJsonText(json_text, what));
  // ordered_json keeps the members in their order in the text, as json.loads does.
  nlohmann::ordered_json json = nlohmann::ordered_json::parse(json_text, nullptr, false);
  if (json.is_discarded())
    return REE_FAIL(Status::kInvalidArgument, "%s: malformed JSON", what.c_str());
  try {
    *value = convert(json);
  } catch (const std::exception& e) {
    return REE_FAIL(Status::kInvalidArgument, "%s: %s", what.c_str(), e.what());
  } catch (const JinjaError& e) {
    return REE_FAIL(Status::kInvalidArgument, "%s: %s", what.c_str(), e.message.c_str());
  }
  return Status::kSuccess;
}

}  // namespace ree::models::jinja
