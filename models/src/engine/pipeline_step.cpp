#include "pipeline_step.h"

#include <openssl/evp.h>

namespace ree::models {
namespace {

constexpr uint32_t kMagic = 0x52454531;  // "REE1"

class Writer {
 public:
  void u32(uint32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void i32(int32_t v) { raw(&v, 4); }
  void f32(float v) { raw(&v, 4); }
  void i32s(const std::vector<int32_t>& v) {
    u64(v.size());
    raw(v.data(), v.size() * 4);
  }
  void digests(const std::vector<Digest>& v) {
    u64(v.size());
    for (const Digest& d : v)
      raw(d.data(), d.size());
  }
  std::vector<uint8_t> take() { return std::move(bytes_); }

 private:
  // The wire is little-endian; every supported host (x86-64, aarch64) is too.
  void raw(const void* p, size_t n) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    bytes_.insert(bytes_.end(), b, b + n);
  }
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  Reader(const std::vector<uint8_t>& bytes, const char* what) : bytes_(bytes), what_(what) {}
  Status u32(uint32_t* v, const char* field) { return raw(v, 4, field); }
  Status u64(uint64_t* v, const char* field) { return raw(v, 8, field); }
  Status i32(int32_t* v, const char* field) { return raw(v, 4, field); }
  Status f32(float* v, const char* field) { return raw(v, 4, field); }
  Status count(uint64_t* n, size_t element_bytes, const char* field) {
    REE_RETURN_IF_ERROR(u64(n, field));
    if (*n > (bytes_.size() - pos_) / element_bytes) return truncated(field);
    return Status::kSuccess;
  }
  Status i32s(std::vector<int32_t>* v, const char* field) {
    uint64_t n = 0;
    REE_RETURN_IF_ERROR(count(&n, 4, field));
    v->resize(n);
    return raw(v->data(), n * 4, field);
  }
  Status digests(std::vector<Digest>* v, const char* field) {
    uint64_t n = 0;
    REE_RETURN_IF_ERROR(count(&n, 32, field));
    v->resize(n);
    for (Digest& d : *v)
      REE_RETURN_IF_ERROR(raw(d.data(), d.size(), field));
    return Status::kSuccess;
  }
  Status end() {
    if (pos_ != bytes_.size()) {
      return REE_FAIL(Status::kCommError, "%s: %zu unexpected trailing bytes", what_,
                      bytes_.size() - pos_);
    }
    return Status::kSuccess;
  }

 private:
  Status truncated(const char* field) {
    return REE_FAIL(Status::kCommError, "%s: truncated at field %s (%zu bytes)", what_, field,
                    bytes_.size());
  }
  Status raw(void* p, size_t n, const char* field) {
    if (n > bytes_.size() - pos_) return truncated(field);
    if (n > 0) std::memcpy(p, bytes_.data() + pos_, n);
    pos_ += n;
    return Status::kSuccess;
  }
  const std::vector<uint8_t>& bytes_;
  const char* what_;
  size_t pos_ = 0;
};

}  // namespace

std::vector<uint8_t> encodeStepHeader(const StepWork& work) {
  Writer w;
  w.u32(kMagic);
  w.u32(static_cast<uint32_t>(StepMessageKind::kStep));
  w.u64(work.id);
  w.i32s(work.batch.query_offsets);
  w.i32s(work.batch.cached_lens);
  w.i32(work.batch.blocks_per_seq);
  w.i32s(work.batch.block_tables);
  w.i32s(work.logits_rows);
  w.u64(work.rows.size());
  for (const RowSampling& r : work.rows) {
    w.u64(r.request);
    w.u64(r.step);
    w.f32(r.sampling.temperature);
    w.i32(r.sampling.top_k);
    w.f32(r.sampling.top_p);
    w.u64(r.sampling.seed);
  }
  w.u32(work.trace ? 1 : 0);
  w.i32s(work.trace_group_ends);
  w.u64(work.layer_digests.size());
  for (const std::vector<Digest>& layer : work.layer_digests)
    w.digests(layer);
  return w.take();
}

std::vector<uint8_t> encodeShutdown() {
  Writer w;
  w.u32(kMagic);
  w.u32(static_cast<uint32_t>(StepMessageKind::kShutdown));
  return w.take();
}

Status decodeStepHeader(const std::vector<uint8_t>& bytes, StepMessageKind* kind, StepWork* work) {
  Reader r(bytes, "pipeline step header");
  uint32_t magic = 0, k = 0;
  REE_RETURN_IF_ERROR(r.u32(&magic, "magic"));
  if (magic != kMagic) {
    return REE_FAIL(Status::kCommError, "pipeline step header: bad magic 0x%08x", magic);
  }
  REE_RETURN_IF_ERROR(r.u32(&k, "kind"));
  if (k == static_cast<uint32_t>(StepMessageKind::kShutdown)) {
    *kind = StepMessageKind::kShutdown;
    return r.end();
  }
  if (k != static_cast<uint32_t>(StepMessageKind::kStep)) {
    return REE_FAIL(Status::kCommError, "pipeline step header: unknown kind %u", k);
  }
  *kind = StepMessageKind::kStep;
  *work = StepWork();
  REE_RETURN_IF_ERROR(r.u64(&work->id, "id"));
  REE_RETURN_IF_ERROR(r.i32s(&work->batch.query_offsets, "query_offsets"));
  REE_RETURN_IF_ERROR(r.i32s(&work->batch.cached_lens, "cached_lens"));
  REE_RETURN_IF_ERROR(r.i32(&work->batch.blocks_per_seq, "blocks_per_seq"));
  REE_RETURN_IF_ERROR(r.i32s(&work->batch.block_tables, "block_tables"));
  REE_RETURN_IF_ERROR(r.i32s(&work->logits_rows, "logits_rows"));
  uint64_t n_rows = 0;
  REE_RETURN_IF_ERROR(r.count(&n_rows, 36, "rows"));
  work->rows.resize(n_rows);
  for (RowSampling& row : work->rows) {
    REE_RETURN_IF_ERROR(r.u64(&row.request, "rows.request"));
    REE_RETURN_IF_ERROR(r.u64(&row.step, "rows.step"));
    REE_RETURN_IF_ERROR(r.f32(&row.sampling.temperature, "rows.temperature"));
    REE_RETURN_IF_ERROR(r.i32(&row.sampling.top_k, "rows.top_k"));
    REE_RETURN_IF_ERROR(r.f32(&row.sampling.top_p, "rows.top_p"));
    REE_RETURN_IF_ERROR(r.u64(&row.sampling.seed, "rows.seed"));
  }
  uint32_t trace = 0;
  REE_RETURN_IF_ERROR(r.u32(&trace, "trace"));
  work->trace = trace != 0;
  REE_RETURN_IF_ERROR(r.i32s(&work->trace_group_ends, "trace_group_ends"));
  uint64_t n_layers = 0;
  REE_RETURN_IF_ERROR(r.count(&n_layers, 8, "layer_digests"));
  work->layer_digests.resize(n_layers);
  for (std::vector<Digest>& layer : work->layer_digests)
    REE_RETURN_IF_ERROR(r.digests(&layer, "layer_digests"));
  REE_RETURN_IF_ERROR(r.end());
  if (work->rows.size() != work->logits_rows.size()) {
    return REE_FAIL(Status::kCommError,
                    "pipeline step header: %zu sampling rows for %zu logits rows",
                    work->rows.size(), work->logits_rows.size());
  }
  return work->batch.finalize();
}

std::vector<uint8_t> encodeStepOutput(const StepOutput& output) {
  Writer w;
  w.u32(kMagic);
  w.u64(output.id);
  w.i32s(output.tokens);
  w.digests(output.logits_digests);
  w.u64(output.layer_digests.size());
  for (const std::vector<Digest>& layer : output.layer_digests)
    w.digests(layer);
  return w.take();
}

Status decodeStepOutput(const std::vector<uint8_t>& bytes, StepOutput* output) {
  Reader r(bytes, "pipeline step result");
  uint32_t magic = 0;
  REE_RETURN_IF_ERROR(r.u32(&magic, "magic"));
  if (magic != kMagic) {
    return REE_FAIL(Status::kCommError, "pipeline step result: bad magic 0x%08x", magic);
  }
  *output = StepOutput();
  REE_RETURN_IF_ERROR(r.u64(&output->id, "id"));
  REE_RETURN_IF_ERROR(r.i32s(&output->tokens, "tokens"));
  REE_RETURN_IF_ERROR(r.digests(&output->logits_digests, "logits_digests"));
  uint64_t n_layers = 0;
  REE_RETURN_IF_ERROR(r.count(&n_layers, 8, "layer_digests"));
  output->layer_digests.resize(n_layers);
  for (std::vector<Digest>& layer : output->layer_digests)
    REE_RETURN_IF_ERROR(r.digests(&layer, "layer_digests"));
  REE_RETURN_IF_ERROR(r.end());
  if (!output->logits_digests.empty() && output->logits_digests.size() != output->tokens.size()) {
    return REE_FAIL(Status::kCommError, "pipeline step result: %zu digests for %zu tokens",
                    output->logits_digests.size(), output->tokens.size());
  }
  return Status::kSuccess;
}

std::vector<uint8_t> encodeStepDigests(uint64_t id, const std::vector<Digest>& digests) {
  Writer w;
  w.u32(kMagic);
  w.u64(id);
  w.digests(digests);
  return w.take();
}

Status decodeStepDigests(const std::vector<uint8_t>& bytes, uint64_t* id,
                         std::vector<Digest>* digests) {
  Reader r(bytes, "pipeline step logits hashes");
  uint32_t magic = 0;
  REE_RETURN_IF_ERROR(r.u32(&magic, "magic"));
  if (magic != kMagic) {
    return REE_FAIL(Status::kCommError, "pipeline step logits hashes: bad magic 0x%08x", magic);
  }
  REE_RETURN_IF_ERROR(r.u64(id, "id"));
  REE_RETURN_IF_ERROR(r.digests(digests, "logits_digests"));
  return r.end();
}

std::string digestHex(const Digest& digest) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  out.reserve(64);
  for (uint8_t b : digest) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

Digest sha256Digest(const void* data, size_t bytes) {
  Digest digest{};
  unsigned int length = 0;
  EVP_Digest(data, bytes, digest.data(), &length, EVP_sha256(), nullptr);
  return digest;
}

}  // namespace ree::models
