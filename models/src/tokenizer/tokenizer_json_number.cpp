// JSON numbers as serde_json reads them (see tokenizer_json_number.h): serde_json 1.x de.rs,
// parse_integer / parse_decimal / parse_exponent / f64_from_parts without float_roundtrip.
#include "tokenizer_json_number.h"

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>

#include <nlohmann/json.hpp>

namespace ree::models::tokenizer_internal {
namespace {

// serde_json's POW10 table: the literals 1e0 .. 1e308, each correctly rounded.
const std::array<double, 309>& powersOfTen() {
  static const std::array<double, 309> table = [] {
    std::array<double, 309> powers{};
    for (size_t i = 0; i < powers.size(); ++i)
      powers[i] = std::strtod(("1e" + std::to_string(i)).c_str(), nullptr);
    return powers;
  }();
  return table;
}

// f64_from_parts: the significand rounded to a double, then one multiplication or division by a
// power of ten (two roundings, hence the ulp differences from strtod).
bool fromParts(bool positive, uint64_t significand, int64_t exponent, double* out) {
  double f = static_cast<double>(significand);
  const auto& pow10 = powersOfTen();
  for (;;) {
    const uint64_t index =
        exponent < 0 ? static_cast<uint64_t>(-exponent) : static_cast<uint64_t>(exponent);
    if (index < pow10.size()) {
      if (exponent >= 0) {
        f *= pow10[index];
        if (std::isinf(f)) return false;
      } else {
        f /= pow10[index];
      }
      break;
    }
    if (f == 0.0) break;
    if (exponent >= 0) return false;
    f /= 1e308;
    exponent += 308;
  }
  *out = positive ? f : -f;
  return true;
}

// serde_json's overflow! check: significand * 10 + digit would exceed u64::MAX.
bool wouldOverflow(uint64_t significand, uint64_t digit) {
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  return significand >= kMax / 10 && (significand > kMax / 10 || digit > kMax % 10);
}

bool isDigit(std::string_view s, size_t at) {
  return at < s.size() && s[at] >= '0' && s[at] <= '9';
}

}  // namespace

bool serdeJsonDouble(std::string_view s, double* out) {
  size_t at = 0;
  const bool positive = !(at < s.size() && s[at] == '-');
  if (!positive) ++at;
  uint64_t significand = 0;
  int64_t exponent = 0;
  // Integer digits: once the significand would overflow, the rest only scale it
  // (parse_long_integer).
  bool overflowed = false;
  for (; isDigit(s, at); ++at) {
    const auto digit = static_cast<uint64_t>(s[at] - '0');
    if (overflowed || wouldOverflow(significand, digit)) {
      overflowed = true;
      ++exponent;
    } else {
      significand = significand * 10 + digit;
    }
  }
  // Fraction digits: the check starts afresh; from the first that would overflow, all are
  // dropped (parse_decimal_overflow).
  if (at < s.size() && s[at] == '.') {
    overflowed = false;
    for (++at; isDigit(s, at); ++at) {
      const auto digit = static_cast<uint64_t>(s[at] - '0');
      if (overflowed || wouldOverflow(significand, digit)) {
        overflowed = true;
        continue;
      }
      significand = significand * 10 + digit;
      --exponent;
    }
  }
  if (at < s.size() && (s[at] == 'e' || s[at] == 'E')) {
    ++at;
    bool positive_exponent = true;
    if (at < s.size() && (s[at] == '+' || s[at] == '-')) positive_exponent = s[at++] == '+';
    int64_t written = 0;
    for (; isDigit(s, at); ++at) {
      written = written * 10 + (s[at] - '0');
      if (written > std::numeric_limits<int32_t>::max()) {
        // parse_exponent_overflow: an error upward, zero downward.
        if (significand != 0 && positive_exponent) return false;
        *out = positive ? 0.0 : -0.0;
        return true;
      }
    }
    // serde_json saturates the i32 exponent; the result is the same for every exponent this far
    // out (0 or out of range).
    exponent += positive_exponent ? written : -written;
  }
  return fromParts(positive, significand, exponent, out);
}

namespace {

// Finds the floats at model.vocab[i][1] in one SAX pass, following the path of containers and
// keys (repeated keys are already refused by checkJsonText).
class UnigramScoreCollector : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<std::pair<size_t, double>> scores;
  size_t bad_index = SIZE_MAX;

  bool null() override { return element(); }
  bool boolean(bool) override { return element(); }
  bool number_integer(number_integer_t) override { return element(); }
  bool number_unsigned(number_unsigned_t) override { return element(); }
  bool number_float(number_float_t, const string_t& text) override {
    element();
    if (!atScore()) return true;
    double score = 0.0;
    if (!serdeJsonDouble(text, &score)) {
      if (bad_index == SIZE_MAX) bad_index = stack_[2].current;
      return true;
    }
    scores.emplace_back(stack_[2].current, score);
    return true;
  }
  bool string(string_t&) override { return element(); }
  bool binary(binary_t&) override { return element(); }
  bool start_object(std::size_t) override { return open(false); }
  bool key(string_t& key) override {
    stack_.back().key = key;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
    return false;
  }

 private:
  struct Frame {
    bool is_array = false;
    size_t next = 0, current = 0;  // arrays: index of the element being read
    std::string key;               // objects: key of the member being read
  };
  std::vector<Frame> stack_;

  bool element() {
    if (!stack_.empty() && stack_.back().is_array) stack_.back().current = stack_.back().next++;
    return true;
  }
  bool open(bool is_array) {
    element();
    stack_.push_back(Frame{is_array, 0, 0, {}});
    return true;
  }
  bool close() {
    stack_.pop_back();
    return true;
  }
  bool atScore() const {
    return stack_.size() == 4 && !stack_[0].is_array && stack_[0].key == "model" &&
           !stack_[1].is_array && stack_[1].key == "vocab" && stack_[2].is_array &&
           stack_[3].is_array && stack_[3].current == 1;
  }
};

}  // namespace

bool unigramScoresAsSerdeReadsThem(const std::string& json_text,
                                   std::vector<std::pair<size_t, double>>* scores,
                                   size_t* bad_index) {
  UnigramScoreCollector collector;
  if (!nlohmann::json::sax_parse(json_text, &collector)) return false;
  *scores = std::move(collector.scores);
  *bad_index = collector.bad_index;
  return true;
}

}  // namespace ree::models::tokenizer_internal
