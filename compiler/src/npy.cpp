#include "ree/compiler/npy.h"

#include <cstring>
#include <fstream>

#include "ree/core/file.h"
#include "ree/core/text.h"

namespace ree {

namespace {

constexpr uint64_t kMaxNpyBytes = uint64_t{16} << 30;
constexpr size_t kMaxHeaderBytes = 1 << 16;

// The value of `key` in the header dict, up to the next top-level ',' or '}' (a shape's tuple
// kept whole).
bool headerField(const std::string& header, const std::string& key, std::string* value) {
  size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return false;
  at = header.find(':', at);
  if (at == std::string::npos) return false;
  size_t end = at + 1;
  int depth = 0;
  for (; end < header.size(); ++end) {
    char ch = header[end];
    if (ch == '(') ++depth;
    if (ch == ')') --depth;
    if (depth == 0 && (ch == ',' || ch == '}')) break;
    if (depth < 0) return false;
  }
  *value = header.substr(at + 1, end - at - 1);
  size_t first = value->find_first_not_of(' '), last = value->find_last_not_of(' ');
  *value = first == std::string::npos ? "" : value->substr(first, last - first + 1);
  return true;
}

Status parseShape(const std::string& text, const std::string& what, std::vector<int64_t>* shape) {
  REE_CHECK_ARG(text.size() >= 2 && text.front() == '(' && text.back() == ')',
                "%s: shape '%s' is not a tuple", what.c_str(), printableText(text, 60).c_str());
  size_t pos = 1;
  while (pos < text.size() - 1) {
    while (pos < text.size() - 1 && (text[pos] == ' ' || text[pos] == ','))
      ++pos;
    if (pos >= text.size() - 1) break;
    size_t end = pos;
    while (end < text.size() - 1 && text[end] >= '0' && text[end] <= '9')
      ++end;
    REE_CHECK_ARG(end > pos && end - pos <= 12 && shape->size() < 16,
                  "%s: shape '%s' is not a tuple of at most 16 integers", what.c_str(),
                  printableText(text, 60).c_str());
    shape->push_back(std::stoll(text.substr(pos, end - pos)));
    pos = end;
  }
  return Status::kSuccess;
}

Status convertElements(const std::string& descr, const char* raw, GraphTensor* out) {
  const int64_t n = out->numel();
  for (int64_t i = 0; i < n; ++i) {
    if (descr == "'<f8'") {
      double v;
      std::memcpy(&v, raw + 8 * i, 8);
      out->as<float>()[i] = static_cast<float>(v);
    } else if (descr == "'<i4'") {
      int32_t v;
      std::memcpy(&v, raw + 4 * i, 4);
      out->as<int64_t>()[i] = v;
    } else if (descr == "'|b1'") {
      out->as<uint8_t>()[i] = raw[i] != 0 ? 1 : 0;
    }
  }
  if (descr == "'<f4'" || descr == "'<i8'") std::memcpy(out->data(), raw, out->nbytes());
  return Status::kSuccess;
}

}  // namespace

Status parseNpy(const std::string& bytes, const std::string& what, GraphTensor* out) {
  REE_CHECK_ARG(bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0,
                "%s: not an .npy file (no \\x93NUMPY magic)", what.c_str());
  const int major = static_cast<uint8_t>(bytes[6]);
  REE_CHECK_ARG(major >= 1 && major <= 3, "%s: .npy version %d is not supported", what.c_str(),
                major);
  const size_t length_bytes = major == 1 ? 2 : 4;
  REE_CHECK_ARG(bytes.size() >= 8 + length_bytes, "%s: truncated header", what.c_str());
  size_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i)
    header_length |= static_cast<size_t>(static_cast<uint8_t>(bytes[8 + i])) << (8 * i);
  const size_t data_start = 8 + length_bytes + header_length;
  REE_CHECK_ARG(header_length <= kMaxHeaderBytes && data_start <= bytes.size(),
                "%s: header of %zu bytes is truncated or too long", what.c_str(), header_length);
  const std::string header = bytes.substr(8 + length_bytes, header_length);
  std::string descr, fortran, shape_text;
  REE_CHECK_ARG(headerField(header, "descr", &descr) && headerField(header, "shape", &shape_text) &&
                    headerField(header, "fortran_order", &fortran),
                "%s: header lacks descr, fortran_order or shape", what.c_str());
  REE_CHECK_ARG(fortran == "False", "%s: Fortran order is not supported", what.c_str());
  ElementType type;
  int stored = 0;
  if (descr == "'<f4'" || descr == "'<f8'") type = ElementType::kFloat32;
  if (descr == "'<i8'" || descr == "'<i4'") type = ElementType::kInt64;
  if (descr == "'|b1'") type = ElementType::kBool;
  stored = descr == "'<f4'" || descr == "'<i4'" ? 4 : descr == "'|b1'" ? 1 : 8;
  REE_CHECK_ARG(descr == "'<f4'" || descr == "'<f8'" || descr == "'<i8'" || descr == "'<i4'" ||
                    descr == "'|b1'",
                "%s: dtype %s is not supported (<f4, <f8, <i8, <i4, |b1 are)", what.c_str(),
                printableText(descr, 20).c_str());
  std::vector<int64_t> shape;
  REE_RETURN_IF_ERROR(parseShape(shape_text, what, &shape));
  REE_RETURN_IF_ERROR(GraphTensor::empty(type, shape, out));
  REE_CHECK_ARG(bytes.size() - data_start == static_cast<size_t>(out->numel()) * stored,
                "%s: %zu data bytes for shape %s", what.c_str(), bytes.size() - data_start,
                printableText(shape_text, 60).c_str());
  return convertElements(descr, bytes.data() + data_start, out);
}

Status readNpyFile(const std::string& path, GraphTensor* out) {
  std::string bytes;
  REE_RETURN_IF_ERROR(readRegularFile(path, kMaxNpyBytes, ".npy input", &bytes));
  return parseNpy(bytes, "'" + printableText(path, 120) + "'", out);
}

std::string formatNpy(const GraphTensor& tensor) {
  const char* descr = tensor.type == ElementType::kFloat32 ? "<f4"
                      : tensor.type == ElementType::kInt64 ? "<i8"
                                                           : "|b1";
  std::string shape = "(";
  for (size_t i = 0; i < tensor.shape.size(); ++i)
    shape += (i ? ", " : "") + std::to_string(tensor.shape[i]);
  shape += tensor.shape.size() == 1 ? ",)" : ")";
  std::string header =
      std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + header.size() + 1) % 64 != 0)
    header += ' ';
  header += '\n';
  std::string bytes = "\x93NUMPY\x01";
  bytes += '\0';
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  bytes.append(static_cast<const char*>(tensor.data()), tensor.nbytes());
  return bytes;
}

Status writeNpyFile(const std::string& path, const GraphTensor& tensor) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::string bytes = formatNpy(tensor);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out)
    return REE_FAIL(Status::kIoError, "cannot write '%s'", printableText(path, 120).c_str());
  return Status::kSuccess;
}

}  // namespace ree
