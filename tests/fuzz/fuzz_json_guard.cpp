// Fuzz target: checkJsonText (core/json_guard.h), the guard every JSON text REE reads goes through.
// Besides not crashing it must agree with the parser it guards: text that nlohmann accepts, with
// no key repeated in an object and nesting within the limit, must pass the guard; text the guard
// passes must parse.
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_util.h"
#include "ree/core/json_guard.h"
#include "ree/core/text.h"

using namespace ree;
using Json = nlohmann::json;

namespace {

// nlohmann's own verdict, with what the guard refuses on top of syntax: repeated keys and depth.
struct ParserVerdict {
  bool valid = false;
  bool repeated_key = false;
  size_t max_depth = 0;
};

ParserVerdict parseWithNlohmann(const std::string& text) {
  ParserVerdict verdict;
  std::vector<std::set<std::string>> open_objects;
  size_t depth = 0;
  auto callback = [&](int, Json::parse_event_t event, Json& parsed) -> bool {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start:
        ++depth;
        if (depth > verdict.max_depth) verdict.max_depth = depth;
        if (event == Json::parse_event_t::object_start) open_objects.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        open_objects.pop_back();
        --depth;
        break;
      case Json::parse_event_t::array_end:
        --depth;
        break;
      case Json::parse_event_t::key:
        if (!open_objects.back().insert(parsed.get<std::string>()).second) {
          verdict.repeated_key = true;
        }
        break;
      default:
        break;
    }
    return true;
  };
  verdict.valid = !Json::parse(text, callback, /*allow_exceptions=*/false).is_discarded();
  return verdict;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  fuzz::quietLogs();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::beginInput();
  const std::string text(fuzz::asText(data, size));
  const JsonGuardLimits limits;
  Status status = checkJsonText(text, "fuzz.json", limits);
  fuzz::checkStatus(status, "checkJsonText");
  const bool guard_ok = status == Status::kSuccess;
  const ParserVerdict parser = parseWithNlohmann(text);
  if (guard_ok) {
    fuzz::require(parser.valid, "the guard passed text that does not parse", printableText(text));
    fuzz::require(!parser.repeated_key, "the guard passed a repeated key", printableText(text));
    fuzz::require(parser.max_depth <= limits.max_depth, "the guard passed too deep nesting");
  } else if (parser.valid && !parser.repeated_key && parser.max_depth <= limits.max_depth) {
    fuzz::require(false, "the guard refused valid JSON", lastErrorMessage());
  }
  return 0;
}
