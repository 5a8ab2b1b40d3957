#include "chat/jinja_text.h"

#include <utf8proc.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ree::models::jinja {

namespace {

size_t sequenceLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

bool isCased(uint32_t point) {
  const utf8proc_category_t category = utf8proc_category(static_cast<utf8proc_int32_t>(point));
  return category == UTF8PROC_CATEGORY_LU || category == UTF8PROC_CATEGORY_LL ||
         category == UTF8PROC_CATEGORY_LT;
}

uint32_t upper(uint32_t p) {
  return static_cast<uint32_t>(utf8proc_toupper(p));
}
uint32_t lower(uint32_t p) {
  return static_cast<uint32_t>(utf8proc_tolower(p));
}
uint32_t title(uint32_t p) {
  return static_cast<uint32_t>(utf8proc_totitle(p));
}

// Python's str.isprintable() for one code point: not Cc, Cf, Cs, Co, Cn, Zl, Zp, or Zs but space.
bool isPrintable(uint32_t point) {
  if (point == ' ') return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(point))) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

}  // namespace

bool isValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    utf8proc_int32_t point = 0;
    const utf8proc_ssize_t n =
        utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(&text[i]),
                         static_cast<utf8proc_ssize_t>(text.size() - i), &point);
    if (n <= 0) return false;
    i += static_cast<size_t>(n);
  }
  return true;
}

std::vector<uint32_t> codePoints(std::string_view text) {
  std::vector<uint32_t> points;
  points.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    utf8proc_int32_t point = 0;
    const utf8proc_ssize_t n =
        utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(&text[i]),
                         static_cast<utf8proc_ssize_t>(text.size() - i), &point);
    if (n <= 0) {  // not reached on validated text; keep the byte so nothing is lost
      points.push_back(static_cast<unsigned char>(text[i]));
      ++i;
      continue;
    }
    points.push_back(static_cast<uint32_t>(point));
    i += static_cast<size_t>(n);
  }
  return points;
}

std::string fromCodePoints(const std::vector<uint32_t>& points) {
  std::string out;
  for (uint32_t point : points)
    appendUtf8(point, &out);
  return out;
}

void appendUtf8(uint32_t point, std::string* out) {
  utf8proc_uint8_t buffer[4];
  const utf8proc_ssize_t n = utf8proc_encode_char(static_cast<utf8proc_int32_t>(point), buffer);
  out->append(reinterpret_cast<const char*>(buffer), static_cast<size_t>(n));
}

size_t codePointCount(std::string_view text) {
  size_t count = 0;
  for (size_t i = 0; i < text.size(); i += sequenceLength(static_cast<unsigned char>(text[i]))) {
    ++count;
  }
  return count;
}

bool isPythonSpace(uint32_t p) {
  return (p >= 0x09 && p <= 0x0D) || (p >= 0x1C && p <= 0x20) || p == 0x85 || p == 0xA0 ||
         p == 0x1680 || (p >= 0x2000 && p <= 0x200A) || p == 0x2028 || p == 0x2029 || p == 0x202F ||
         p == 0x205F || p == 0x3000;
}

std::string pythonStrip(std::string_view text, bool left, bool right, const std::string* chars) {
  const std::vector<uint32_t> points = codePoints(text);
  std::vector<uint32_t> strip_set;
  if (chars != nullptr) strip_set = codePoints(*chars);
  auto stripped = [&](uint32_t p) {
    if (chars == nullptr) return isPythonSpace(p);
    for (uint32_t s : strip_set) {
      if (s == p) return true;
    }
    return false;
  };
  size_t begin = 0;
  size_t end = points.size();
  while (left && begin < end && stripped(points[begin]))
    ++begin;
  while (right && end > begin && stripped(points[end - 1]))
    --end;
  return fromCodePoints(std::vector<uint32_t>(points.begin() + static_cast<long>(begin),
                                              points.begin() + static_cast<long>(end)));
}

namespace {

// The SpecialCasing.txt entries of common text that map one code point to several (Python applies
// them; utf8proc's simple mappings do not): upper and title case.
struct SpecialCase {
  uint32_t point;
  const char* upper;
  const char* title;
};
constexpr SpecialCase kSpecialCases[] = {
    {0x00DF, "SS", "Ss"}, {0xFB00, "FF", "Ff"},   {0xFB01, "FI", "Fi"},
    {0xFB02, "FL", "Fl"}, {0xFB03, "FFI", "Ffi"}, {0xFB04, "FFL", "Ffl"},
    {0xFB05, "ST", "St"}, {0xFB06, "ST", "St"},   {0x0149, "\xCA\xBCN", "\xCA\xBCN"},
};

void appendCased(uint32_t point, bool title_case, std::string* out) {
  for (const SpecialCase& special : kSpecialCases) {
    if (special.point == point) {
      *out += title_case ? special.title : special.upper;
      return;
    }
  }
  appendUtf8(title_case ? title(point) : upper(point), out);
}

// Python lower-cases capital sigma to final sigma at the end of a word (a cased letter before it,
// none after it).
uint32_t lowerInContext(const std::vector<uint32_t>& points, size_t i) {
  if (points[i] == 0x03A3) {
    const bool after_cased = i > 0 && isCased(points[i - 1]);
    const bool before_cased = i + 1 < points.size() && isCased(points[i + 1]);
    if (after_cased && !before_cased) return 0x03C2;
  }
  return lower(points[i]);
}

}  // namespace

std::string toUpper(std::string_view text) {
  std::string out;
  for (uint32_t point : codePoints(text))
    appendCased(point, false, &out);
  return out;
}

std::string toLower(std::string_view text) {
  const std::vector<uint32_t> points = codePoints(text);
  std::string out;
  for (size_t i = 0; i < points.size(); ++i)
    appendUtf8(lowerInContext(points, i), &out);
  return out;
}

std::string capitalize(std::string_view text) {
  const std::vector<uint32_t> points = codePoints(text);
  std::string out;
  for (size_t i = 0; i < points.size(); ++i) {
    if (i == 0) {
      appendCased(points[i], true, &out);
    } else {
      appendUtf8(lowerInContext(points, i), &out);
    }
  }
  return out;
}

std::string titleCase(std::string_view text) {
  const std::vector<uint32_t> points = codePoints(text);
  std::string out;
  bool previous_cased = false;
  for (size_t i = 0; i < points.size(); ++i) {
    if (previous_cased) {
      appendUtf8(lowerInContext(points, i), &out);
    } else {
      appendCased(points[i], true, &out);
    }
    previous_cased = isCased(points[i]);
  }
  return out;
}

std::string pythonRepr(std::string_view text) {
  const bool has_single = text.find('\'') != std::string_view::npos;
  const bool has_double = text.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  for (uint32_t p : codePoints(text)) {
    if (p == static_cast<uint32_t>(quote) || p == '\\') {
      out += '\\';
      out += static_cast<char>(p);
    } else if (p == '\t') {
      out += "\\t";
    } else if (p == '\n') {
      out += "\\n";
    } else if (p == '\r') {
      out += "\\r";
    } else if (isPrintable(p)) {
      appendUtf8(p, &out);
    } else {
      char buffer[16];
      const char* format = p < 0x100 ? "\\x%02x" : (p < 0x10000 ? "\\u%04x" : "\\U%08x");
      std::snprintf(buffer, sizeof(buffer), format, p);
      out += buffer;
    }
  }
  out += quote;
  return out;
}

std::string pythonFloatRepr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  char buffer[64];
  int precision = 1;
  for (; precision < 17; ++precision) {
    std::snprintf(buffer, sizeof(buffer), "%.*e", precision - 1, value);
    if (std::strtod(buffer, nullptr) == value) break;
  }
  std::snprintf(buffer, sizeof(buffer), "%.*e", precision - 1, value);
  // buffer: [-]d.ddde[+-]XX; digits and decimal exponent
  std::string text(buffer);
  const size_t e = text.find('e');
  const int exponent = std::atoi(text.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (text[i] >= '0' && text[i] <= '9') digits += text[i];
  }
  const std::string sign = value < 0 || (value == 0 && std::signbit(value)) ? "-" : "";
  if (exponent < -4 || exponent >= 16) {
    std::string mantissa = digits.substr(0, 1);
    if (digits.size() > 1) mantissa += "." + digits.substr(1);
    std::snprintf(buffer, sizeof(buffer), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    return sign + mantissa + buffer;
  }
  if (exponent < 0)
    return sign + "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  const size_t integer_digits = static_cast<size_t>(exponent) + 1;
  if (digits.size() <= integer_digits) {
    return sign + digits + std::string(integer_digits - digits.size(), '0') + ".0";
  }
  return sign + digits.substr(0, integer_digits) + "." + digits.substr(integer_digits);
}

}  // namespace ree::models::jinja
