#include "chat/jinja_lexer.h"

#include <cerrno>
#include <cstdlib>

#include "chat/jinja_error.h"
#include "chat/jinja_string_literal.h"
#include "chat/jinja_text.h"

namespace ree::models::jinja {

SourceMap::SourceMap(std::string_view template_text) {
  // jinja2: every \r\n, \r and \n becomes "\n"; one trailing newline is dropped.
  text_.reserve(template_text.size());
  for (size_t i = 0; i < template_text.size(); ++i) {
    const char c = template_text[i];
    if (c == '\r') {
      if (i + 1 < template_text.size() && template_text[i + 1] == '\n') ++i;
      text_ += '\n';
    } else {
      text_ += c;
    }
  }
  if (!text_.empty() && text_.back() == '\n') text_.pop_back();
  line_starts_.push_back(0);
  for (size_t i = 0; i < text_.size(); ++i) {
    if (text_[i] == '\n') line_starts_.push_back(i + 1);
  }
}

void SourceMap::position(size_t offset, int* line, int* column) const {
  size_t index = 0;
  while (index + 1 < line_starts_.size() && line_starts_[index + 1] <= offset)
    ++index;
  *line = static_cast<int>(index + 1);
  const size_t start = line_starts_[index];
  const size_t end = offset < text_.size() ? offset : text_.size();
  *column =
      static_cast<int>(codePointCount(std::string_view(text_).substr(start, end - start))) + 1;
}

namespace {

bool isSpaceAt(const std::string& s, size_t pos, size_t* length) {
  const unsigned char c = static_cast<unsigned char>(s[pos]);
  if (c < 0x80) {
    *length = 1;
    return isPythonSpace(c);
  }
  const std::vector<uint32_t> one = codePoints(std::string_view(s).substr(pos, 4));
  std::string encoded;
  appendUtf8(one[0], &encoded);
  *length = encoded.size();
  return isPythonSpace(one[0]);
}

bool isDigit(char c) {
  return c >= '0' && c <= '9';
}
bool isNameStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool isNameChar(char c) {
  return isNameStart(c) || isDigit(c);
}

class Lexer {
 public:
  explicit Lexer(const SourceMap& source) : map_(source), src_(source.text()) {}

  std::vector<Token> run() {
    while (pos_ < src_.size())
      lexRoot();
    Token end;
    end.type = TokenType::kEnd;
    end.offset = src_.size();
    tokens_.push_back(end);
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void error(size_t offset, const std::string& message) const {
    int line = 0;
    int column = 0;
    map_.position(offset, &line, &column);
    failAt(line, column, message);
  }

  bool startsWith(size_t pos, std::string_view what) const {
    return src_.compare(pos, what.size(), what) == 0;
  }

  size_t skipSpaces(size_t pos) const {
    size_t length = 0;
    while (pos < src_.size() && isSpaceAt(src_, pos, &length))
      pos += length;
    return pos;
  }

  void push(TokenType type, std::string text, size_t offset) {
    Token token;
    token.type = type;
    token.text = std::move(text);
    token.offset = offset;
    tokens_.push_back(std::move(token));
  }

  // The data before a tag, with the tag's whitespace control applied (jinja2's OptionalLStrip).
  std::string stripData(size_t begin, size_t end, char sign, bool is_variable) const {
    std::string text = src_.substr(begin, end - begin);
    if (sign == '-') return pythonStrip(text, false, true, nullptr);
    if (sign == '+' || is_variable) return text;
    const size_t newline = text.rfind('\n');
    const size_t line_begin = newline == std::string::npos ? 0 : newline + 1;
    const bool line_starting = begin == 0 || src_[begin - 1] == '\n';
    if (line_begin == 0 && !line_starting) return text;
    size_t p = line_begin;
    size_t length = 0;
    while (p < text.size() && isSpaceAt(text, p, &length))
      p += length;
    if (p == text.size() && line_begin < text.size()) text.resize(line_begin);
    return text;
  }

  // One data run and the tag after it.
  void lexRoot() {
    size_t tag = pos_;
    while (true) {
      tag = src_.find('{', tag);
      if (tag == std::string::npos || tag + 1 >= src_.size()) break;
      const char next = src_[tag + 1];
      if (next == '{' || next == '%' || next == '#') break;
      ++tag;
    }
    if (tag == std::string::npos || tag + 1 >= src_.size()) {
      push(TokenType::kData, src_.substr(pos_), pos_);
      pos_ = src_.size();
      return;
    }
    const char kind = src_[tag + 1];
    const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')
                          ? src_[tag + 2]
                          : '\0';
    std::string data = stripData(pos_, tag, sign, kind == '{');
    if (!data.empty()) push(TokenType::kData, std::move(data), pos_);
    size_t inner = tag + 2 + (sign != '\0' ? 1 : 0);
    if (kind == '#') return lexComment(tag, inner);
    if (kind == '%' && lexRaw(tag, inner)) return;
    push(kind == '%' ? TokenType::kBlockBegin : TokenType::kVariableBegin, "", tag);
    pos_ = inner;
    lexInside(kind == '%', tag);
  }

  void lexComment(size_t tag, size_t inner) {
    for (size_t p = inner; p < src_.size(); ++p) {
      if (startsWith(p, "+#}")) {
        pos_ = p + 3;
        return;
      }
      if (startsWith(p, "-#}")) {
        pos_ = skipSpaces(p + 3);
        return;
      }
      if (startsWith(p, "#}")) {
        pos_ = p + 2 + (startsWith(p + 2, "\n") ? 1 : 0);
        return;
      }
    }
    error(tag, "missing end of comment tag '#}'");
  }

  // Length of a block end ("+%}", "-%}" and the whitespace after it, "%}" and one newline) at p.
  size_t blockEndAt(size_t p, const char* close) const {
    if (startsWith(p, std::string("+") + close)) return 3;
    if (startsWith(p, std::string("-") + close)) return skipSpaces(p + 3) - p;
    if (startsWith(p, close)) return 2 + (close[0] == '%' && startsWith(p + 2, "\n") ? 1 : 0);
    return 0;
  }

  bool nameAt(size_t* p, std::string_view name) const {
    size_t q = skipSpaces(*p);
    if (!startsWith(q, name)) return false;
    q += name.size();
    if (q < src_.size() && isNameChar(src_[q])) return false;
    *p = skipSpaces(q);
    return true;
  }

  // {% raw %}...{% endraw %}: everything between is data.
  bool lexRaw(size_t tag, size_t inner) {
    size_t p = inner;
    if (!nameAt(&p, "raw")) return false;
    // jinja2's raw_begin takes "-%}" and the whitespace after it, or "%}" without trim_blocks.
    size_t end = 0;
    if (startsWith(p, "-%}")) end = skipSpaces(p + 3) - p;
    if (startsWith(p, "%}")) end = 2;
    if (end == 0) return false;
    const size_t body = p + end;
    for (size_t q = body; q + 1 < src_.size(); ++q) {
      if (!startsWith(q, "{%")) continue;
      const char sign =
          q + 2 < src_.size() && (src_[q + 2] == '-' || src_[q + 2] == '+') ? src_[q + 2] : '\0';
      size_t r = q + 2 + (sign != '\0' ? 1 : 0);
      if (!nameAt(&r, "endraw")) continue;
      const size_t close = blockEndAt(r, "%}");
      if (close == 0) continue;
      std::string data = stripData(body, q, sign, false);
      if (!data.empty()) push(TokenType::kData, std::move(data), body);
      pos_ = r + close;
      return true;
    }
    error(tag, "missing end of raw directive '{% endraw %}'");
  }

  // Tokens of a {% %} or {{ }} tag up to its end.
  void lexInside(bool block, size_t tag) {
    const char* close = block ? "%}" : "}}";
    while (true) {
      if (pos_ >= src_.size()) error(tag, std::string("missing end of tag '") + close + "'");
      if (balancing_.empty()) {
        const size_t end = block ? blockEndAt(pos_, close) : variableEndAt(pos_);
        if (end > 0) {
          push(block ? TokenType::kBlockEnd : TokenType::kVariableEnd, "", pos_);
          pos_ += end;
          return;
        }
      }
      lexToken();
    }
  }

  size_t variableEndAt(size_t p) const {
    if (startsWith(p, "-}}")) return skipSpaces(p + 3) - p;
    if (startsWith(p, "}}")) return 2;
    return 0;
  }

  void lexToken() {
    size_t length = 0;
    if (isSpaceAt(src_, pos_, &length)) {
      pos_ += length;
      return;
    }
    const char c = src_[pos_];
    if (isDigit(c)) return lexNumber();
    if (isNameStart(c)) {
      size_t end = pos_;
      while (end < src_.size() && isNameChar(src_[end]))
        ++end;
      push(TokenType::kName, src_.substr(pos_, end - pos_), pos_);
      pos_ = end;
      return;
    }
    if (c == '\'' || c == '"') return lexString();
    lexOperator();
  }

  size_t digitsEnd(size_t p) const {  // (\d+_)*\d+
    if (p >= src_.size() || !isDigit(src_[p])) return std::string::npos;
    while (p < src_.size()) {
      while (p < src_.size() && isDigit(src_[p]))
        ++p;
      if (p + 1 < src_.size() && src_[p] == '_' && isDigit(src_[p + 1])) {
        ++p;
        continue;
      }
      break;
    }
    return p;
  }

  void lexNumber() {
    const size_t begin = pos_;
    size_t end = digitsEnd(begin);
    bool is_float = false;
    const bool after_dot = begin > 0 && src_[begin - 1] == '.';
    if (!after_dot) {
      size_t p = end;
      if (p < src_.size() && src_[p] == '.' && digitsEnd(p + 1) != std::string::npos) {
        p = digitsEnd(p + 1);
        is_float = true;
      }
      size_t q = p;
      if (q < src_.size() && (src_[q] == 'e' || src_[q] == 'E')) {
        ++q;
        if (q < src_.size() && (src_[q] == '+' || src_[q] == '-')) ++q;
        if (digitsEnd(q) != std::string::npos) {
          p = digitsEnd(q);
          is_float = true;
        }
      }
      end = p;
    }
    std::string digits;
    for (size_t i = begin; i < end; ++i) {
      if (src_[i] != '_') digits += src_[i];
    }
    Token token;
    token.offset = begin;
    token.text = digits;
    errno = 0;
    if (is_float) {
      token.type = TokenType::kFloat;
      token.number = std::strtod(digits.c_str(), nullptr);
    } else {
      token.type = TokenType::kInteger;
      token.integer = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) error(begin, "integer literal " + digits + " is out of range");
    }
    tokens_.push_back(std::move(token));
    pos_ = end;
  }

  void lexString() {
    const char quote = src_[pos_];
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote)
      p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) error(pos_, "unterminated string literal");
    std::string value;
    std::string problem;
    if (!unescapeStringLiteral(std::string_view(src_).substr(pos_ + 1, p - pos_ - 1), &value,
                               &problem)) {
      error(pos_, problem);
    }
    push(TokenType::kString, std::move(value), pos_);
    pos_ = p + 1;
  }

  void lexOperator() {
    static const char* const kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/",
                                             "*",  "%",  "~",  "[",  "]",  "(",  ")", "{", "}",
                                             ">",  "<",  "=",  ".",  ":",  "|",  ",", ";"};
    for (const char* op : kOperators) {
      if (!startsWith(pos_, op)) continue;
      balance(op);
      push(TokenType::kOperator, op, pos_);
      pos_ += std::string_view(op).size();
      return;
    }
    std::string shown;
    appendUtf8(codePoints(std::string_view(src_).substr(pos_, 4))[0], &shown);
    error(pos_, "unexpected character '" + shown + "'");
  }

  void balance(std::string_view op) {
    if (op == "(") balancing_.push_back(')');
    if (op == "[") balancing_.push_back(']');
    if (op == "{") balancing_.push_back('}');
    if (op != ")" && op != "]" && op != "}") return;
    if (balancing_.empty()) error(pos_, "unexpected '" + std::string(op) + "'");
    if (balancing_.back() != op[0]) {
      error(pos_, "unexpected '" + std::string(op) + "', expected '" +
                      std::string(1, balancing_.back()) + "'");
    }
    balancing_.pop_back();
  }

  const SourceMap& map_;
  const std::string& src_;
  size_t pos_ = 0;
  std::vector<Token> tokens_;
  std::string balancing_;
};

}  // namespace

std::vector<Token> lexTemplate(const SourceMap& source) {
  return Lexer(source).run();
}

}  // namespace ree::models::jinja
