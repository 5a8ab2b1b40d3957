// GGUF block dequantization (ree/models/gguf_dequant.h), one function per block type; each is the
// transcription of its section of docs/repops-spec/gguf-dequant.md. The build compiles with
// -ffp-contract=off (cmake/ReeNumerics.cmake), so `a * b + c` is two roundings, as specified.
#include "ree/models/gguf_dequant.h"

#include <cstring>

#include "ree/core/parallel.h"
#include "ree/kernels/numeric.h"

namespace ree::models {
namespace {

constexpr int kQK = 32;    // elements per block of Q8_0, Q4_0, Q4_1
constexpr int kQKK = 256;  // elements per super-block of the K types

float halfAt(const unsigned char* p) {
  return toFloat(f16_t{static_cast<uint16_t>(p[0] | (p[1] << 8))});
}

// Q8_0: d (fp16), 32 int8 codes. y = q * d.
void blockQ8_0(const unsigned char* b, float* y) {
  const float d = halfAt(b);
  for (int j = 0; j < kQK; ++j)
    y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// Q4_0: d (fp16), 16 bytes of codes (low nibbles: elements 0..15, high nibbles: 16..31).
// y = (q - 8) * d.
void blockQ4_0(const unsigned char* b, float* y) {
  const float d = halfAt(b);
  for (int j = 0; j < kQK / 2; ++j) {
    y[j] = static_cast<float>((b[2 + j] & 0x0F) - 8) * d;
    y[j + kQK / 2] = static_cast<float>((b[2 + j] >> 4) - 8) * d;
  }
}

// Q4_1: d, m (fp16), 16 bytes of codes as Q4_0. y = (d * q) + m, two roundings.
void blockQ4_1(const unsigned char* b, float* y) {
  const float d = halfAt(b), m = halfAt(b + 2);
  for (int j = 0; j < kQK / 2; ++j) {
    const float low = d * static_cast<float>(b[4 + j] & 0x0F);
    const float high = d * static_cast<float>(b[4 + j] >> 4);
    y[j] = low + m;
    y[j + kQK / 2] = high + m;
  }
}

// The 5-bit code of element j of a Q5_0/Q5_1 block: low 4 bits as Q4_0, bit 4 = bit j of the
// little-endian uint32 qh.
int code5(const unsigned char* qh, const unsigned char* qs, int j) {
  const uint32_t high_bits = qh[0] | (qh[1] << 8) | (qh[2] << 16) | (uint32_t{qh[3]} << 24);
  const int low = j < kQK / 2 ? (qs[j] & 0x0F) : (qs[j - kQK / 2] >> 4);
  return low | static_cast<int>(((high_bits >> j) & 1u) << 4);
}

// Q5_0: d (fp16), qh (4 bytes), 16 bytes of low nibbles. y = (q - 16) * d.
void blockQ5_0(const unsigned char* b, float* y) {
  const float d = halfAt(b);
  for (int j = 0; j < kQK; ++j)
    y[j] = static_cast<float>(code5(b + 2, b + 6, j) - 16) * d;
}

// Q5_1: d, m (fp16), qh, 16 bytes of low nibbles. y = (d * q) + m, two roundings.
void blockQ5_1(const unsigned char* b, float* y) {
  const float d = halfAt(b), m = halfAt(b + 2);
  for (int j = 0; j < kQK; ++j) {
    const float scaled = d * static_cast<float>(code5(b + 4, b + 8, j));
    y[j] = scaled + m;
  }
}

// The 6-bit scale and min of sub-block j of a Q4_K/Q5_K super-block (12 packed bytes).
void scaleMinK(const unsigned char* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

// Q4_K: d, dmin (fp16), 12 bytes of scales/mins, 128 bytes of codes. Sub-block j (32 elements)
// has scale d * sc_j and offset dmin * m_j; bytes 32c..32c+31 hold sub-block 2c in their low
// nibbles and 2c+1 in their high ones. y = (d * sc_j) * q - (dmin * m_j).
void blockQ4_K(const unsigned char* b, float* y) {
  const float d = halfAt(b), dmin = halfAt(b + 2);
  const unsigned char* scales = b + 4;
  const unsigned char* qs = b + 16;
  for (int j = 0; j < 8; ++j) {
    int sc = 0, m = 0;
    scaleMinK(scales, j, &sc, &m);
    const float scale = d * static_cast<float>(sc), offset = dmin * static_cast<float>(m);
    const unsigned char* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      const float scaled = scale * static_cast<float>((q[l] >> shift) & 0x0F);
      y[32 * j + l] = scaled - offset;
    }
  }
}

// Q5_K: as Q4_K, with 32 bytes qh after the scales whose bit j of byte l is bit 4 of element l
// of sub-block j.
void blockQ5_K(const unsigned char* b, float* y) {
  const float d = halfAt(b), dmin = halfAt(b + 2);
  const unsigned char* scales = b + 4;
  const unsigned char* qh = b + 16;
  const unsigned char* qs = b + 48;
  for (int j = 0; j < 8; ++j) {
    int sc = 0, m = 0;
    scaleMinK(scales, j, &sc, &m);
    const float scale = d * static_cast<float>(sc), offset = dmin * static_cast<float>(m);
    const unsigned char* q = qs + 32 * (j / 2);
    const int shift = 4 * (j % 2);
    for (int l = 0; l < 32; ++l) {
      const int code = ((q[l] >> shift) & 0x0F) | (((qh[l] >> j) & 1) << 4);
      const float scaled = scale * static_cast<float>(code);
      y[32 * j + l] = scaled - offset;
    }
  }
}

// Q6_K: 128 bytes ql, 64 bytes qh, 16 int8 scales, d (fp16). Element e (h = e / 128, r = e % 128):
// low 4 bits from ql[64h + r % 64] (nibble r / 64), high 2 bits from qh[32h + r % 32] (bits
// 2 (r / 32)); q = code - 32; y = (d * scales[e / 16]) * q.
void blockQ6_K(const unsigned char* b, float* y) {
  const unsigned char* ql = b;
  const unsigned char* qh = b + 128;
  const auto* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = halfAt(b + 208);
  for (int e = 0; e < kQKK; ++e) {
    const int h = e / 128, r = e % 128;
    const int low = (ql[64 * h + r % 64] >> (4 * (r / 64))) & 0x0F;
    const int high = (qh[32 * h + r % 32] >> (2 * (r / 32))) & 0x03;
    const float scale = d * static_cast<float>(scales[e / 16]);
    y[e] = scale * static_cast<float>((low | (high << 4)) - 32);
  }
}

using BlockFunction = void (*)(const unsigned char*, float*);

BlockFunction blockFunction(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
      return blockQ8_0;
    case GgmlType::kQ4_0:
      return blockQ4_0;
    case GgmlType::kQ4_1:
      return blockQ4_1;
    case GgmlType::kQ5_0:
      return blockQ5_0;
    case GgmlType::kQ5_1:
      return blockQ5_1;
    case GgmlType::kQ4_K:
      return blockQ4_K;
    case GgmlType::kQ5_K:
      return blockQ5_K;
    case GgmlType::kQ6_K:
      return blockQ6_K;
    default:
      return nullptr;
  }
}

// F32, F16, BF16: element-wise, exact.
void dequantizeFloat(GgmlType type, const unsigned char* data, int64_t begin, int64_t end,
                     float* out) {
  for (int64_t i = begin; i < end; ++i) {
    if (type == GgmlType::kF32) {
      std::memcpy(&out[i], data + 4 * i, 4);
    } else {
      const auto bits = static_cast<uint16_t>(data[2 * i] | (data[2 * i + 1] << 8));
      out[i] = type == GgmlType::kF16 ? toFloat(f16_t{bits}) : toFloat(bf16_t{bits});
    }
  }
}

}  // namespace

bool isDequantizableGgmlType(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kBF16 ||
         blockFunction(type) != nullptr;
}

const char* dequantizableGgmlTypeNames() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K";
}

void dequantizeGgml(GgmlType type, const unsigned char* data, int64_t elements, float* out) {
  const GgmlTypeTraits* traits = ggmlTypeTraits(static_cast<uint32_t>(type));
  const BlockFunction block = blockFunction(type);
  if (block == nullptr) {
    parallelFor(elements, 1 << 16,
                [&](int64_t begin, int64_t end) { dequantizeFloat(type, data, begin, end, out); });
    return;
  }
  const int64_t blocks = elements / traits->block_elems;
  parallelFor(blocks, 1024, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      block(data + i * traits->block_bytes, out + i * traits->block_elems);
  });
}

}  // namespace ree::models
