#include "onnx_tensor.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "external_data.h"
#include "ree/core/text.h"
#include "ree/kernels/numeric.h"

namespace ree::compiler {

namespace {

using onnx::TensorProto;

// Bytes per element as stored in the proto's raw data.
int storedSize(int data_type) {
  switch (data_type) {
    case TensorProto::FLOAT:
    case TensorProto::INT32:
      return 4;
    case TensorProto::INT64:
    case TensorProto::DOUBLE:
      return 8;
    case TensorProto::INT16:
    case TensorProto::UINT16:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
      return 2;
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::BOOL:
      return 1;
  }
  return 0;
}

// Element i of little-endian raw data of `data_type`, widened to double / int64.
double rawAsDouble(const char* raw, int data_type, int64_t i) {
  switch (data_type) {
    case TensorProto::FLOAT: {
      float v;
      std::memcpy(&v, raw + 4 * i, 4);
      return v;
    }
    case TensorProto::DOUBLE: {
      double v;
      std::memcpy(&v, raw + 8 * i, 8);
      return v;
    }
    case TensorProto::FLOAT16: {
      f16_t v;
      std::memcpy(&v.bits, raw + 2 * i, 2);
      return toFloat(v);
    }
    case TensorProto::BFLOAT16: {
      bf16_t v;
      std::memcpy(&v.bits, raw + 2 * i, 2);
      return toFloat(v);
    }
  }
  return 0.0;
}

int64_t rawAsInt(const char* raw, int data_type, int64_t i) {
  switch (data_type) {
    case TensorProto::INT64: {
      int64_t v;
      std::memcpy(&v, raw + 8 * i, 8);
      return v;
    }
    case TensorProto::INT32: {
      int32_t v;
      std::memcpy(&v, raw + 4 * i, 4);
      return v;
    }
    case TensorProto::INT16: {
      int16_t v;
      std::memcpy(&v, raw + 2 * i, 2);
      return v;
    }
    case TensorProto::UINT16: {
      uint16_t v;
      std::memcpy(&v, raw + 2 * i, 2);
      return v;
    }
    case TensorProto::INT8:
      return static_cast<int8_t>(raw[i]);
    case TensorProto::UINT8:
    case TensorProto::BOOL:
      return static_cast<uint8_t>(raw[i]);
  }
  return 0;
}

// Converts `n` raw elements into out's element type.
void convertRaw(const char* raw, int data_type, int64_t n, GraphTensor* out) {
  switch (out->type) {
    case ElementType::kFloat32:
      for (int64_t i = 0; i < n; ++i)
        out->as<float>()[i] = static_cast<float>(rawAsDouble(raw, data_type, i));
      break;
    case ElementType::kInt64:
      for (int64_t i = 0; i < n; ++i)
        out->as<int64_t>()[i] = rawAsInt(raw, data_type, i);
      break;
    case ElementType::kBool:
      for (int64_t i = 0; i < n; ++i)
        out->as<uint8_t>()[i] = raw[i] != 0 ? 1 : 0;
      break;
  }
}

// The typed repeated fields (float_data, int32_data, ...) as raw little-endian bytes.
Status typedFieldsAsRaw(const TensorProto& proto, int64_t n, const std::string& what,
                        std::string* raw) {
  const int t = proto.data_type();
  int64_t have = 0;
  if (t == TensorProto::FLOAT) {
    have = proto.float_data_size();
    if (have == n) raw->assign(reinterpret_cast<const char*>(proto.float_data().data()), 4 * n);
  } else if (t == TensorProto::INT64) {
    have = proto.int64_data_size();
    if (have == n) raw->assign(reinterpret_cast<const char*>(proto.int64_data().data()), 8 * n);
  } else if (t == TensorProto::DOUBLE) {
    have = proto.double_data_size();
    if (have == n) raw->assign(reinterpret_cast<const char*>(proto.double_data().data()), 8 * n);
  } else {
    // int32_data carries INT32/INT16/INT8/UINT8/UINT16/BOOL and the 16 bits of FLOAT16/BFLOAT16.
    have = proto.int32_data_size();
    if (have == n) {
      const int size = storedSize(t);
      raw->resize(static_cast<size_t>(n) * size);
      for (int64_t i = 0; i < n; ++i) {
        int32_t v = proto.int32_data(static_cast<int>(i));
        std::memcpy(&(*raw)[static_cast<size_t>(i) * size], &v, size);
      }
    }
  }
  REE_CHECK_ARG(have == n, "%s: %lld values stored for %lld elements", what.c_str(),
                static_cast<long long>(have), static_cast<long long>(n));
  return Status::kSuccess;
}

Status externalRef(const TensorProto& proto, const std::string& what, ExternalDataRef* ref) {
  for (const auto& entry : proto.external_data()) {
    const std::string& key = entry.key();
    const std::string& value = entry.value();
    if (key == "location") {
      ref->location = value;
    } else if (key == "offset" || key == "length") {
      char* end = nullptr;
      errno = 0;
      unsigned long long v = std::strtoull(value.c_str(), &end, 10);
      REE_CHECK_ARG(!value.empty() && value[0] != '-' && end && *end == '\0' && errno == 0,
                    "%s: external data %s '%s' is not a non-negative integer", what.c_str(),
                    key.c_str(), printableText(value, 40).c_str());
      if (key == "offset") ref->offset = v;
      if (key == "length")
        ref->length = static_cast<int64_t>(std::min<unsigned long long>(v, INT64_MAX));
    }
  }
  REE_CHECK_ARG(!ref->location.empty(), "%s: external data without a location", what.c_str());
  return Status::kSuccess;
}

Status readExternal(const TensorProto& proto, const std::string& what, uint64_t bytes,
                    TensorImportContext* context, std::string* raw) {
  ExternalDataRef ref;
  REE_RETURN_IF_ERROR(externalRef(proto, what, &ref));
  std::string canonical;
  REE_RETURN_IF_ERROR(resolveExternalPath(context->base_dir, ref.location, what, &canonical));
  REE_CHECK_ARG(bytes <= context->max_external_bytes - context->external_bytes_read,
                "%s: external data beyond the limit of %llu bytes for all tensors", what.c_str(),
                static_cast<unsigned long long>(context->max_external_bytes));
  raw->resize(bytes);
  REE_RETURN_IF_ERROR(readExternalData(canonical, ref, bytes, what, raw->data()));
  context->external_bytes_read += bytes;
  if (context->external_files != nullptr &&
      std::find(context->external_files->begin(), context->external_files->end(), canonical) ==
          context->external_files->end()) {
    context->external_files->push_back(canonical);
  }
  return Status::kSuccess;
}

}  // namespace

Status elementTypeFromOnnx(int data_type, const std::string& what, ElementType* out) {
  switch (data_type) {
    case TensorProto::FLOAT:
    case TensorProto::FLOAT16:
    case TensorProto::BFLOAT16:
    case TensorProto::DOUBLE:
      *out = ElementType::kFloat32;
      return Status::kSuccess;
    case TensorProto::INT64:
    case TensorProto::INT32:
    case TensorProto::INT16:
    case TensorProto::INT8:
    case TensorProto::UINT8:
    case TensorProto::UINT16:
      *out = ElementType::kInt64;
      return Status::kSuccess;
    case TensorProto::BOOL:
      *out = ElementType::kBool;
      return Status::kSuccess;
  }
  return REE_FAIL(Status::kUnsupported,
                  "%s: element type %d is not supported (float, float16, "
                  "bfloat16, double, int8..int64, uint8, uint16, bool are)",
                  what.c_str(), data_type);
}

Status tensorFromProto(const TensorProto& proto, const std::string& what,
                       TensorImportContext* context, GraphTensor* out) {
  ElementType type;
  REE_RETURN_IF_ERROR(elementTypeFromOnnx(proto.data_type(), what, &type));
  std::vector<int64_t> shape(proto.dims().begin(), proto.dims().end());
  REE_CHECK_ARG(shape.size() <= 16, "%s: rank %zu exceeds the limit of 16", what.c_str(),
                shape.size());
  int64_t bytes = 8;
  for (int64_t d : shape) {  // a 0 dim counts as 1 (checkTensorBytes says why)
    REE_CHECK_ARG(d >= 0, "%s: dim %lld is negative", what.c_str(), static_cast<long long>(d));
    const int64_t factor = std::max<int64_t>(d, 1);
    REE_CHECK_ARG(bytes <= (int64_t{1} << 40) / factor, "%s: shape beyond the limit of 2^40 bytes",
                  what.c_str());
    bytes *= factor;
  }
  GraphTensor tensor;
  REE_RETURN_IF_ERROR(GraphTensor::empty(type, shape, &tensor));
  const int64_t n = tensor.numel();
  const uint64_t stored_bytes = static_cast<uint64_t>(n) * storedSize(proto.data_type());
  std::string external;
  const std::string* raw = &proto.raw_data();
  if (proto.data_location() == TensorProto::EXTERNAL) {
    REE_RETURN_IF_ERROR(readExternal(proto, what, stored_bytes, context, &external));
    raw = &external;
  } else if (!proto.has_raw_data()) {
    REE_RETURN_IF_ERROR(typedFieldsAsRaw(proto, n, what, &external));
    raw = &external;
  }
  REE_CHECK_ARG(
      raw->size() == stored_bytes, "%s: %zu bytes of data for %lld elements of %s", what.c_str(),
      raw->size(), static_cast<long long>(n),
      TensorProto::DataType_Name(static_cast<TensorProto::DataType>(proto.data_type())).c_str());
  convertRaw(raw->data(), proto.data_type(), n, &tensor);
  *out = std::move(tensor);
  return Status::kSuccess;
}

}  // namespace ree::compiler
