#include "ree/core/json_guard.h"

#include <nlohmann/json.hpp>
#include <unordered_set>
#include <vector>

#include "ree/core/text.h"

namespace ree {
namespace {

using Json = nlohmann::json;

// A SAX handler that keeps, per open object, the set of keys seen so far, and per open array the
// index of the next element: enough to name where a repeated key is without building a document.
class GuardHandler : public nlohmann::json_sax<Json> {
 public:
  explicit GuardHandler(size_t max_depth) : max_depth_(max_depth) {}

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }

  bool start_object(std::size_t) override { return open(/*is_object=*/true); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(/*is_object=*/false); }
  bool end_array() override { return close(); }

  bool key(string_t& key) override {
    Frame& frame = frames_.back();
    frame.key = key;
    if (!frame.keys.insert(key).second) {
      problem_ = "repeats the key '" + printableText(key, 80) + "' in the object at " + path();
      return false;
    }
    return true;
  }

  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& error) override {
    // nlohmann's message is "[json.exception.parse_error.101] parse error at line 1, column 5:
    // ..."; keep the part after the id.
    std::string message = error.what();
    size_t bracket = message.find("] ");
    if (bracket != std::string::npos) message = message.substr(bracket + 2);
    problem_ = "not valid JSON (byte " + std::to_string(position) + "): " + message;
    return false;
  }

  const std::string& problem() const { return problem_; }

 private:
  struct Frame {
    bool is_object = false;
    std::unordered_set<std::string> keys;
    std::string key;   // the current key of an object
    size_t index = 0;  // the index of the current element of an array
  };

  bool value() {
    if (!frames_.empty() && !frames_.back().is_object) ++frames_.back().index;
    return true;
  }

  bool open(bool is_object) {
    if (frames_.size() >= max_depth_) {
      problem_ = "nests deeper than " + std::to_string(max_depth_) + " levels at " + path();
      return false;
    }
    frames_.push_back(Frame{is_object, {}, {}, 0});
    return true;
  }

  bool close() {
    frames_.pop_back();
    return value();  // the closed container was one element of its parent
  }

  std::string path() const {
    std::string out = "$";
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& frame = frames_[i];
      if (frame.is_object) {
        out += "." + printableText(frame.key, 40);
      } else {
        out += "[" + std::to_string(frame.index) + "]";
      }
      if (out.size() > 300) return out + "...";
    }
    return out;
  }

  size_t max_depth_;
  std::vector<Frame> frames_;
  std::string problem_;
};

}  // namespace

Status checkJsonText(std::string_view text, const std::string& what, JsonGuardLimits limits) {
  GuardHandler handler(limits.max_depth);
  bool ok = false;
  try {
    ok = Json::sax_parse(text.begin(), text.end(), &handler, nlohmann::json::input_format_t::json,
                         /*strict=*/true);
  } catch (const std::exception& error) {  // the handler returns false instead; belt and braces
    return REE_FAIL(Status::kIoError, "%s: not valid JSON: %s", what.c_str(), error.what());
  }
  if (!ok) {
    const std::string& problem =
        handler.problem().empty() ? std::string("not valid JSON") : handler.problem();
    return REE_FAIL(Status::kIoError, "%s: %s", what.c_str(), problem.c_str());
  }
  return Status::kSuccess;
}

}  // namespace ree
