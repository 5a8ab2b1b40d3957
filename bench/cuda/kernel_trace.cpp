// A CUPTI activity tracer, loaded into any CUDA program through CUDA's injection hook:
//
//   CUDA_INJECTION64_PATH=build/bench/libree_kernel_trace.so REE_KERNEL_TRACE=trace.csv prog ...
//
// It records the GPU start and end time of every kernel and memory copy the program runs, at the
// clocks the GPU runs at in that program (Nsight Compute serialises kernels and measures each in
// isolation, which inflates short latency-bound kernels; this tracer does not change the
// schedule), and writes one CSV line per activity when the program exits:
//   kind,start_ns,end_ns,device,stream,name       (kind: kernel | memcpy; name: kernel or copy
//   kind)
// With REE_KERNEL_TRACE_API=1 it also records every CUDA runtime API call on the host, on the same
// clock, as `api,start_ns,end_ns,0,thread_id,cudaFunctionName`: the host's side of a step (which
// call waits, and the host time between calls) beside what the GPU did.
// scripts/gpu/profile_decode.sh turns the trace into per-step kernel totals and GPU idle time.
#include <cupti.h>

#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;

std::mutex g_mutex;
std::vector<std::string> g_lines;

std::string demangle(const char* name) {
  if (name == nullptr) return "?";
  int status = 0;
  char* plain = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string out = (status == 0 && plain != nullptr) ? plain : name;
  std::free(plain);
  // Keep the CSV simple: the kernel's name up to its argument list, commas replaced.
  for (char& c : out)
    if (c == ',') c = ';';
  return out;
}

const char* copyKindName(uint8_t kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD:
      return "HtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH:
      return "DtoH";
    case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD:
      return "DtoD";
    case CUPTI_ACTIVITY_MEMCPY_KIND_PTOP:
      return "PtoP";
    default:
      return "other";
  }
}

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::vector<std::string> lines;
  char line[1024];
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    if (record->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL ||
        record->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
      auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(record);
      std::snprintf(line, sizeof line, "kernel,%llu,%llu,%u,%u,%s",
                    static_cast<unsigned long long>(k->start),
                    static_cast<unsigned long long>(k->end), k->deviceId, k->streamId,
                    demangle(k->name).c_str());
      lines.emplace_back(line);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      auto* m = reinterpret_cast<CUpti_ActivityMemcpy6*>(record);
      std::snprintf(line, sizeof line, "memcpy,%llu,%llu,%u,%u,%s %llu bytes",
                    static_cast<unsigned long long>(m->start),
                    static_cast<unsigned long long>(m->end), m->deviceId, m->streamId,
                    copyKindName(m->copyKind), static_cast<unsigned long long>(m->bytes));
      lines.emplace_back(line);
    } else if (record->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      auto* a = reinterpret_cast<CUpti_ActivityAPI*>(record);
      const char* name = nullptr;
      if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, a->cbid, &name) != CUPTI_SUCCESS) {
        name = "?";
      }
      std::snprintf(line, sizeof line, "api,%llu,%llu,0,%u,%s",
                    static_cast<unsigned long long>(a->start),
                    static_cast<unsigned long long>(a->end), a->threadId, name);
      lines.emplace_back(line);
    }
  }
  std::free(buffer);
  std::lock_guard<std::mutex> lock(g_mutex);
  g_lines.insert(g_lines.end(), lines.begin(), lines.end());
}

void writeTrace() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  const char* path = std::getenv("REE_KERNEL_TRACE");
  if (path == nullptr || *path == '\0') path = "kernel_trace.csv";
  std::FILE* f = std::fopen(path, "w");
  if (f == nullptr) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fprintf(f, "kind,start_ns,end_ns,device,stream,name\n");
  for (const std::string& l : g_lines)
    std::fprintf(f, "%s\n", l.c_str());
  std::fclose(f);
  std::fprintf(stderr, "kernel_trace: %zu activities written to %s\n", g_lines.size(), path);
}

bool check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return true;
  const char* message = nullptr;
  cuptiGetResultString(result, &message);
  std::fprintf(stderr, "kernel_trace: %s failed: %s\n", what, message ? message : "?");
  return false;
}

}  // namespace

// Called by the CUDA driver when CUDA_INJECTION64_PATH names this library. Returns 1 on success.
extern "C" int InitializeInjection(void) {
  if (!check(cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted),
             "cuptiActivityRegisterCallbacks") ||
      !check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
             "enabling kernel records") ||
      !check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY), "enabling copy records")) {
    return 0;
  }
  const char* api = std::getenv("REE_KERNEL_TRACE_API");
  if (api != nullptr && std::string(api) == "1" &&
      !check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "enabling runtime API records")) {
    return 0;
  }
  std::atexit(writeTrace);
  return 1;
}
