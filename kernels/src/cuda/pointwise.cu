// CUDA embedding gather and elementwise operators (docs/repops-spec/pointwise.md). Same
// arithmetic as the CPU: each element goes through the per-element functions of pointwise.h.
// Only the thread organisation, the width of the memory accesses and the compile-time choice of
// the activation are CUDA's own; none of them changes a result bit.
#include <algorithm>
#include <climits>
#include <cstring>

#include "chained_launch.cuh"
#include "common/dtype_dispatch.h"
#include "common/pointwise_args.h"
#include "ree/core/cuda_check.h"
#include "ree/kernels/pointwise.h"
#include "shared_memory.cuh"

namespace ree::repops::cuda {
namespace {

constexpr int kThreads = 256;

bool aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

int64_t ceilDiv(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// Blocks for `items` one-per-thread work items; past the cap the kernels loop (grid stride).
unsigned gridFor(int64_t items) {
  return static_cast<unsigned>(std::min<int64_t>(ceilDiv(items, kThreads), 65536 * 8));
}

// Launch shape of a [rows, items_per_row] problem, one item per thread and row: a row's items
// along x (a block spans up to kThreads of them), short rows stacked along y so that a block
// still has about kThreads threads. The 2-D grid gives each thread its row and column without a
// division; past the grid limits the kernels loop.
struct RowGrid {
  dim3 grid;
  dim3 block;
};

RowGrid rowGrid(int64_t rows, int64_t items_per_row) {
  const int64_t x = std::min<int64_t>(kThreads, ceilDiv(items_per_row, 32) * 32);
  const int64_t y = kThreads / x;
  RowGrid shape;
  shape.block = dim3(static_cast<unsigned>(x), static_cast<unsigned>(y));
  shape.grid = dim3(static_cast<unsigned>(std::min<int64_t>(ceilDiv(items_per_row, x), INT_MAX)),
                    static_cast<unsigned>(std::min<int64_t>(ceilDiv(rows, y), 65535)));
  return shape;
}

// Elements of T in 16 bytes: the widest access (LDG.128 / STG.128) one thread can make.
template <typename T>
constexpr int kPerVector = 16 / static_cast<int>(sizeof(T));

// kCount consecutive elements at p: one 16-byte access when they fill 16 bytes (p is then
// 16-byte aligned), else one access per element.
template <int kCount, typename T>
__device__ __forceinline__ void loadElements(const T* p, T (&v)[kCount]) {
  if constexpr (kCount * sizeof(T) == 16) {
    const uint4 raw = *reinterpret_cast<const uint4*>(p);
    memcpy(v, &raw, sizeof(raw));
  } else {
#pragma unroll
    for (int j = 0; j < kCount; ++j)
      v[j] = p[j];
  }
}

template <int kCount, typename T>
__device__ __forceinline__ void storeElements(T* p, const T (&v)[kCount]) {
  if constexpr (kCount * sizeof(T) == 16) {
    uint4 raw;
    memcpy(&raw, v, sizeof(raw));
    *reinterpret_cast<uint4*>(p) = raw;
  } else {
#pragma unroll
    for (int j = 0; j < kCount; ++j)
      p[j] = v[j];
  }
}

// ---- embedding ----------------------------------------------------------------------------------

// Words a thread copies per row, all loads issued before the stores: more bytes in flight per
// thread than one word would give, for a gather whose rows lie anywhere in a large table.
constexpr int kEmbeddingUnroll = 4;

// Copies rows in `Word` units (16, 4 or 2 bytes; chosen by alignment). Thread (x, y) of the grid
// copies words of output row y, so the row's id is read once per thread and no index is divided.
// A bad id zeroes its row and lowers *first_bad to its position.
template <typename Word>
__global__ void __launch_bounds__(kThreads)
    embeddingKernel(const Word* table, int64_t vocab, int64_t row_words, const int32_t* ids,
                    int64_t count, Word* out, unsigned long long* first_bad) {
  waitForPredecessor();
  allowSuccessorLaunch();
  const int64_t tile = static_cast<int64_t>(blockDim.x) * kEmbeddingUnroll;
  for (int64_t position = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y;
       position < count; position += static_cast<int64_t>(gridDim.y) * blockDim.y) {
    const int32_t id = ids[position];
    const bool bad = id < 0 || id >= vocab;
    if (bad && first_bad != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
      atomicMin(first_bad, static_cast<unsigned long long>(position));
    }
    const Word* src = table + (bad ? 0 : static_cast<int64_t>(id) * row_words);
    Word* dst = out + position * row_words;
    for (int64_t start = blockIdx.x * tile + threadIdx.x; start < row_words;
         start += static_cast<int64_t>(gridDim.x) * tile) {
      Word words[kEmbeddingUnroll];
#pragma unroll
      for (int k = 0; k < kEmbeddingUnroll; ++k) {
        const int64_t column = start + static_cast<int64_t>(k) * blockDim.x;
        words[k] = (bad || column >= row_words) ? Word{} : src[column];
      }
#pragma unroll
      for (int k = 0; k < kEmbeddingUnroll; ++k) {
        const int64_t column = start + static_cast<int64_t>(k) * blockDim.x;
        if (column < row_words) dst[column] = words[k];
      }
    }
  }
}

template <typename Word>
Status launchEmbedding(const void* table, int64_t vocab, int64_t row_bytes, const int32_t* ids,
                       int64_t count, void* out, unsigned long long* first_bad,
                       cudaStream_t stream) {
  const int64_t row_words = row_bytes / static_cast<int64_t>(sizeof(Word));
  const RowGrid shape = rowGrid(count, ceilDiv(row_words, kEmbeddingUnroll));
  launchChained(embeddingKernel<Word>, shape.grid, shape.block, 0, stream,
                static_cast<const Word*>(table), vocab, row_words, ids, count,
                static_cast<Word*>(out), first_bad);
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// The widest word that divides the rows and the alignment of both buffers.
Status gatherRows(const void* table, int64_t vocab, int64_t row_bytes, const int32_t* ids,
                  int64_t count, void* out, unsigned long long* first_bad, cudaStream_t stream) {
  if (row_bytes % 16 == 0 && aligned(table, 16) && aligned(out, 16)) {
    return launchEmbedding<uint4>(table, vocab, row_bytes, ids, count, out, first_bad, stream);
  }
  if (row_bytes % 4 == 0 && aligned(table, 4) && aligned(out, 4)) {
    return launchEmbedding<uint32_t>(table, vocab, row_bytes, ids, count, out, first_bad, stream);
  }
  return launchEmbedding<uint16_t>(table, vocab, row_bytes, ids, count, out, first_bad, stream);
}

// ---- elementwise --------------------------------------------------------------------------------
//
// One kernel per (type, operator, activation): the activation is a template argument, so each
// kernel holds only its own activation's code (pointwise.h's switch folds away). kCount is the
// number of consecutive elements a thread handles: kPerVector<T> (16-byte accesses; every pointer
// 16-byte aligned) or 1 (any alignment).

enum class BinaryOp { kAdd, kMul };

template <BinaryOp kOp, typename T>
__device__ __forceinline__ T binaryElement(T a, T b) {
  if constexpr (kOp == BinaryOp::kAdd) {
    return addElement(a, b);
  } else {
    return mulElement(a, b);
  }
}

// Thread i handles elements [i * kCount, i * kCount + kCount) (then i + grid size, ...); the
// n % kCount trailing elements go one each to the first threads. An element is read and written
// by the same thread, so out may alias a or b.
template <typename T, BinaryOp kOp, int kCount>
__global__ void __launch_bounds__(kThreads)
    binaryKernel(const T* a, const T* b, T* out, int64_t n) {
  waitForPredecessor();
  allowSuccessorLaunch();
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t groups = n / kCount;
  for (int64_t i = first; i < groups; i += step) {
    T va[kCount], vb[kCount], vo[kCount];
    loadElements<kCount>(a + i * kCount, va);
    loadElements<kCount>(b + i * kCount, vb);
#pragma unroll
    for (int j = 0; j < kCount; ++j)
      vo[j] = binaryElement<kOp>(va[j], vb[j]);
    storeElements<kCount>(out + i * kCount, vo);
  }
  if constexpr (kCount > 1) {
    const int64_t k = groups * kCount + first;
    if (k < n) out[k] = binaryElement<kOp>(a[k], b[k]);
  }
}

// kCount > 1 (16-byte accesses): step k of block b covers groups [(b + k * grid) * 2 * blockDim,
// + 2 * blockDim); thread t maps groups base + t and base + blockDim + t, both loaded before either
// is computed (twice the bytes in flight), the math of the two halves sharing one copy of the code.
// kCount == 1: one element per thread. The n % kCount trailing elements go one each to the first
// threads. An element is read and written by the same thread, so out may alias x.
template <typename T, Activation kAct, int kCount>
__global__ void __launch_bounds__(kThreads) activationKernel(const T* x, T* out, int64_t n) {
  waitForPredecessor();
  allowSuccessorLaunch();
  const int64_t first = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const int64_t groups = n / kCount;
  if constexpr (kCount > 1) {
    const int64_t step = static_cast<int64_t>(gridDim.x) * 2 * blockDim.x;
    for (int64_t base = blockIdx.x * 2 * static_cast<int64_t>(blockDim.x); base < groups;
         base += step) {
      const int64_t i0 = base + threadIdx.x;
      const int64_t i1 = i0 + blockDim.x;
      T v0[kCount] = {}, v1[kCount] = {};
      if (i0 < groups) loadElements<kCount>(x + i0 * kCount, v0);
      if (i1 < groups) loadElements<kCount>(x + i1 * kCount, v1);
#pragma unroll 1
      for (int half = 0; half < 2; ++half) {
        const int64_t i = half == 0 ? i0 : i1;
        T v[kCount];
#pragma unroll
        for (int j = 0; j < kCount; ++j)
          v[j] = activationElement(kAct, half == 0 ? v0[j] : v1[j]);
        if (i < groups) storeElements<kCount>(out + i * kCount, v);
      }
    }
    const int64_t k = groups * kCount + first;
    if (k < n) out[k] = activationElement(kAct, x[k]);
  } else {
    const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
    for (int64_t i = first; i < n; i += step)
      out[i] = activationElement(kAct, x[i]);
  }
}

// Grid (column groups, rows): thread (x, y) handles columns [x * kCount, x * kCount + kCount) of
// row y. With kCount > 1 the rows start 16-byte aligned (pointers and strides checked on the
// host) and a row's last cols % kCount columns are done one by one by the thread they fall to.
//
// SwiGLU on 16-bit types is bound by instruction issue (most of it the correctly rounded exp);
// calls of kActivationTableMinElements or more take tableKernel instead (below). Four blocks per SM
// (64 registers) measured fastest on H100 at 4096 x 14336: one-pass kernel 0.150 ms (0.155 ms with
// five blocks, 48 registers and spills); the looping kernel 0.170 ms (0.176 ms with five blocks,
// 0.175 ms with the compiler's choice). The other activations keep the default.
template <typename T, Activation kAct>
constexpr int kGatedMinBlocks = (kAct == Activation::kSilu && sizeof(T) == 2) ? 4 : 1;

// kOnePass: the grid covers every (row, column group) once (launchGated checks), so a thread has
// one item and no loop state (fewer registers: SwiGLU is bound by instruction issue).
template <typename T, Activation kAct, int kCount, bool kOnePass>
__global__ void __launch_bounds__(kThreads, (kGatedMinBlocks<T, kAct>))
    gatedKernel(const T* gate, int64_t gate_stride, const T* up, int64_t up_stride, T* out,
                int64_t out_stride, int64_t rows, int64_t cols) {
  waitForPredecessor();
  allowSuccessorLaunch();
  const int64_t column0 = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) * kCount;
  const int64_t row0 = blockIdx.y * static_cast<int64_t>(blockDim.y) + threadIdx.y;
  auto item = [&](int64_t r, int64_t c) {
    const T* gate_row = gate + r * gate_stride;
    const T* up_row = up + r * up_stride;
    T* out_row = out + r * out_stride;
    if (kCount == 1 || c + kCount <= cols) {
      T g[kCount], u[kCount], o[kCount];
      loadElements<kCount>(gate_row + c, g);
      loadElements<kCount>(up_row + c, u);
#pragma unroll
      for (int j = 0; j < kCount; ++j)
        o[j] = gatedElement(kAct, g[j], u[j]);
      storeElements<kCount>(out_row + c, o);
    } else {
      for (int64_t k = c; k < cols; ++k)
        out_row[k] = gatedElement(kAct, gate_row[k], up_row[k]);
    }
  };
  if constexpr (kOnePass) {
    if (row0 < rows && column0 < cols) item(row0, column0);
  } else {
    const int64_t column_step = static_cast<int64_t>(gridDim.x) * blockDim.x * kCount;
    for (int64_t r = row0; r < rows; r += static_cast<int64_t>(gridDim.y) * blockDim.y) {
      for (int64_t c = column0; c < cols; c += column_step)
        item(r, c);
    }
  }
}

template <typename T, BinaryOp kOp>
void launchBinary(const void* a, const void* b, void* out, int64_t n, cudaStream_t stream) {
  constexpr int kVector = kPerVector<T>;
  const T* ta = static_cast<const T*>(a);
  const T* tb = static_cast<const T*>(b);
  T* tout = static_cast<T*>(out);
  if (aligned(a, 16) && aligned(b, 16) && aligned(out, 16)) {
    launchChained(binaryKernel<T, kOp, kVector>, gridFor(ceilDiv(n, kVector)), kThreads, 0, stream,
                  ta, tb, tout, n);
  } else {
    launchChained(binaryKernel<T, kOp, 1>, gridFor(n), kThreads, 0, stream, ta, tb, tout, n);
  }
}

template <BinaryOp kOp>
Status binary(const char* name, DType dtype, const void* a, const void* b, void* out, int64_t n,
              cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateBinaryArgs(name, dtype, a, b, out, n));
  if (n == 0) return Status::kSuccess;
  REE_RETURN_IF_ERROR(dispatchStorageType(
      dtype, name, [&](auto tag) { launchBinary<decltype(tag), kOp>(a, b, out, n, stream); }));
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

// ---- 16-bit activations by table lookup ---------------------------------------------------------
// With bf16 or f16 storage, activationElement (R(act(x))) depends only on the 16 bits of x, and
// the gated unit R(R(act(gate)) * up) equals R(loadFloat(activationElement(gate)) * up): the two
// inner roundings agree on every non-NaN value, and a NaN activation makes the product NaN, which
// the outer R canonicalises either way. kActivationTables holds activationElement of all 65536
// patterns of each 16-bit type and activation, generated at build time by the host build of that
// same function (kernels/src/gen/activation_table_gen.cpp). A large call copies its table
// (128 KiB) into every block's shared memory once and looks each element up: about fifteen
// instructions per element instead of the sixty-odd of the correctly rounded exp, the division and
// the roundings (SwiGLU was bound by instruction issue), so it is bound by memory. The tests
// compare these calls with the CPU's computed results, bit for bit, on every 16-bit pattern.

// [bf16 silu, gelu_erf, gelu_tanh, f16 silu, gelu_erf, gelu_tanh][input bits].
static __device__ const uint16_t kActivationTables[6][65536] = {
#include "ree_activation_tables.inc"
};

constexpr int kTableThreads = 1024;  // one block per SM: the table fills most of shared memory
constexpr int kTableBytes = 65536 * 2;
// Items per thread whose loads are in flight together (4 measured no faster on H100).
constexpr int kTableUnroll = 2;

template <typename T, Activation kAct>
__device__ __forceinline__ const uint16_t* activationTable() {
  static_assert(sizeof(T) == 2, "16-bit types only");
  return kActivationTables[(std::is_same_v<T, bf16_t> ? 0 : 3) + static_cast<int>(kAct)];
}

// One output element from its looked-up activation (and its up value when kGated).
template <typename T, bool kGated>
__device__ __forceinline__ T tableElement(const uint16_t* lookup, T x, T up) {
  const T activated{lookup[x.bits]};
  if constexpr (kGated) {
    return storeCanonical<T>(loadFloat(activated) * loadFloat(up));
  } else {
    (void)up;
    return activated;
  }
}

// Item (row r, group c) covers columns [8 c, 8 c + 8) of row r (fewer at the row's end). Block b
// owns the items [b I / G, (b + 1) I / G) of the I = rows x groups in row-major order; thread t
// takes every blockDim.x-th of them from the block's first + t, two at a time so that two items'
// loads are in flight together. An element is read and written by the same thread, so out may
// alias x or up. Rows start 16-byte aligned (pointers and strides checked on the host).
template <typename T, Activation kAct, bool kGated>
__global__ void __launch_bounds__(kTableThreads, 1)
    tableKernel(const T* x, int64_t x_stride, const T* up, int64_t up_stride, T* out,
                int64_t out_stride, int64_t rows, int64_t cols) {
  constexpr int V = kPerVector<T>;
  extern __shared__ uint4 shared_table[];
  // The table is never written by a kernel, so it is copied before waiting for the predecessor.
  const uint4* table = reinterpret_cast<const uint4*>(activationTable<T, kAct>());
  for (int i = threadIdx.x; i < kTableBytes / 16; i += blockDim.x)
    cpAsync16(shared_table + i, table + i, 16);
  cpAsyncCommit();
  waitForPredecessor();
  allowSuccessorLaunch();
  const uint16_t* lookup = reinterpret_cast<const uint16_t*>(shared_table);

  // 32-bit item indices (launchTable checks that they fit): fewer registers per item in flight.
  const int groups = static_cast<int>((cols + V - 1) / V);
  const int items = static_cast<int>(rows) * groups;
  const int end = static_cast<int>(static_cast<int64_t>(items) * (blockIdx.x + 1) / gridDim.x);
  const int step = blockDim.x;
  const int step_r = step / groups, step_c = step % groups;
  int i = static_cast<int>(static_cast<int64_t>(items) * blockIdx.x / gridDim.x) + threadIdx.x;
  int r = i / groups, c = i % groups;
  auto advance = [&](int& row, int& group) {
    row += step_r;
    group += step_c;
    if (group >= groups) group -= groups, ++row;
  };
  auto full = [&](int group) { return static_cast<int64_t>(group + 1) * V <= cols; };
  auto load = [&](int64_t row, int group, T(&xv)[V], T(&uv)[V]) {
    const int64_t k = static_cast<int64_t>(group) * V;
    loadElements<V>(x + row * x_stride + k, xv);
    if constexpr (kGated) loadElements<V>(up + row * up_stride + k, uv);
  };
  auto store = [&](int64_t row, int group, const T(&xv)[V], const T(&uv)[V]) {
    T o[V];
#pragma unroll
    for (int j = 0; j < V; ++j)
      o[j] = tableElement<T, kGated>(lookup, xv[j], uv[j]);
    storeElements<V>(out + row * out_stride + static_cast<int64_t>(group) * V, o);
  };
  auto tail = [&](int64_t row, int group) {  // the row's last cols % V columns
    for (int64_t k = static_cast<int64_t>(group) * V; k < cols; ++k) {
      out[row * out_stride + k] = tableElement<T, kGated>(lookup, x[row * x_stride + k],
                                                          kGated ? up[row * up_stride + k] : T{});
    }
  };
  cpAsyncWait<0>();
  __syncthreads();
  for (; i < end; i += kTableUnroll * step) {
    int rs[kTableUnroll], cs[kTableUnroll];
    T xv[kTableUnroll][V] = {}, uv[kTableUnroll][V] = {};
#pragma unroll
    for (int u = 0; u < kTableUnroll; ++u) {
      rs[u] = r, cs[u] = c;
      if (i + u * step < end && full(c)) load(r, c, xv[u], uv[u]);
      advance(r, c);
    }
#pragma unroll
    for (int u = 0; u < kTableUnroll; ++u) {
      if (i + u * step < end) {
        if (full(cs[u])) {
          store(rs[u], cs[u], xv[u], uv[u]);
        } else {
          tail(rs[u], cs[u]);
        }
      }
    }
  }
}

// Launches tableKernel when the call is large enough and the device has the shared memory for
// the table; otherwise leaves *launched false (the caller computes the activations instead).
template <typename T, Activation kAct, bool kGated>
Status launchTable(const T* x, int64_t x_stride, const T* up, int64_t up_stride, T* out,
                   int64_t out_stride, int64_t rows, int64_t cols, cudaStream_t stream,
                   bool* launched) {
  *launched = false;
  const int64_t items = rows * ceilDiv(cols, kPerVector<T>);
  // The kernel's 32-bit item indices run up to items + kTableUnroll * kTableThreads.
  if (rows * cols < kActivationTableMinElements || items > INT_MAX / 2) return Status::kSuccess;
  int optin = 0, device = 0, sms = 0;
  REE_RETURN_IF_ERROR(sharedMemoryOptin(&optin));
  if (optin < kTableBytes) return Status::kSuccess;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  REE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  auto kernel = tableKernel<T, kAct, kGated>;
  REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
  const unsigned blocks =
      static_cast<unsigned>(std::max<int64_t>(1, std::min<int64_t>(sms, items / kTableThreads)));
  launchChained(kernel, dim3(blocks), dim3(kTableThreads), kTableBytes, stream, x, x_stride, up,
                up_stride, out, out_stride, rows, cols);
  REE_CUDA_CHECK_LAUNCH();
  *launched = true;
  return Status::kSuccess;
}

template <typename T, Activation kAct>
Status launchActivation(const void* x, void* out, int64_t n, cudaStream_t stream) {
  constexpr int kVector = kPerVector<T>;
  const T* tx = static_cast<const T*>(x);
  T* tout = static_cast<T*>(out);
  if (aligned(x, 16) && aligned(out, 16)) {
    if constexpr (sizeof(T) == 2) {
      bool launched = false;
      REE_RETURN_IF_ERROR(
          (launchTable<T, kAct, false>(tx, n, nullptr, 0, tout, n, 1, n, stream, &launched)));
      if (launched) return Status::kSuccess;
    }
    // Two 16-byte groups per thread (at least one block, for the trailing elements).
    launchChained(activationKernel<T, kAct, kVector>, gridFor(ceilDiv(ceilDiv(n, kVector), 2)),
                  kThreads, 0, stream, tx, tout, n);
  } else {
    launchChained(activationKernel<T, kAct, 1>, gridFor(n), kThreads, 0, stream, tx, tout, n);
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <typename T>
Status launchActivation(Activation activation, const void* x, void* out, int64_t n,
                        cudaStream_t stream) {
  switch (activation) {
    case Activation::kSilu:
      return launchActivation<T, Activation::kSilu>(x, out, n, stream);
    case Activation::kGeluErf:
      return launchActivation<T, Activation::kGeluErf>(x, out, n, stream);
    case Activation::kGeluTanh:
      return launchActivation<T, Activation::kGeluTanh>(x, out, n, stream);
  }
  return Status::kSuccess;
}

template <typename T, Activation kAct>
Status launchGated(const void* gate, int64_t gate_stride, const void* up, int64_t up_stride,
                   void* out, int64_t out_stride, int64_t rows, int64_t cols, cudaStream_t stream) {
  constexpr int kVector = kPerVector<T>;
  const T* tgate = static_cast<const T*>(gate);
  const T* tup = static_cast<const T*>(up);
  T* tout = static_cast<T*>(out);
  // Every row of every operand must start 16-byte aligned for the vector kernel.
  const bool vector = aligned(gate, 16) && aligned(up, 16) && aligned(out, 16) &&
                      gate_stride % kVector == 0 && up_stride % kVector == 0 &&
                      out_stride % kVector == 0;
  if constexpr (sizeof(T) == 2) {
    if (vector) {
      bool launched = false;
      REE_RETURN_IF_ERROR((launchTable<T, kAct, true>(tgate, gate_stride, tup, up_stride, tout,
                                                      out_stride, rows, cols, stream, &launched)));
      if (launched) return Status::kSuccess;
    }
  }
  const int64_t items_per_row = vector ? ceilDiv(cols, kVector) : cols;
  const RowGrid shape = rowGrid(rows, items_per_row);
  const bool one_pass = static_cast<int64_t>(shape.grid.x) * shape.block.x >= items_per_row &&
                        static_cast<int64_t>(shape.grid.y) * shape.block.y >= rows;
  auto launch = [&](auto kernel) {
    launchChained(kernel, shape.grid, shape.block, 0, stream, tgate, gate_stride, tup, up_stride,
                  tout, out_stride, rows, cols);
  };
  if (vector) {
    one_pass ? launch(gatedKernel<T, kAct, kVector, true>)
             : launch(gatedKernel<T, kAct, kVector, false>);
  } else {
    one_pass ? launch(gatedKernel<T, kAct, 1, true>) : launch(gatedKernel<T, kAct, 1, false>);
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}

template <typename T>
Status launchGated(Activation activation, const void* gate, int64_t gate_stride, const void* up,
                   int64_t up_stride, void* out, int64_t out_stride, int64_t rows, int64_t cols,
                   cudaStream_t stream) {
  switch (activation) {
    case Activation::kSilu:
      return launchGated<T, Activation::kSilu>(gate, gate_stride, up, up_stride, out, out_stride,
                                               rows, cols, stream);
    case Activation::kGeluErf:
      return launchGated<T, Activation::kGeluErf>(gate, gate_stride, up, up_stride, out, out_stride,
                                                  rows, cols, stream);
    case Activation::kGeluTanh:
      return launchGated<T, Activation::kGeluTanh>(gate, gate_stride, up, up_stride, out,
                                                   out_stride, rows, cols, stream);
  }
  return Status::kSuccess;
}

}  // namespace

Status embedding(DType dtype, const void* table, int64_t vocab, int64_t dim, const int32_t* ids,
                 int64_t count, void* out, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateEmbeddingArgs(dtype, table, vocab, dim, ids, count, out));
  if (count == 0) return Status::kSuccess;
  const int64_t row_bytes = dim * dtypeSize(dtype);
  unsigned long long* first_bad = nullptr;
  REE_CUDA_CHECK(cudaMallocAsync(&first_bad, sizeof(*first_bad), stream));
  Status status = Status::kSuccess;
  cudaError_t err = cudaMemsetAsync(first_bad, 0xff, sizeof(*first_bad), stream);
  if (err == cudaSuccess) {
    status = gatherRows(table, vocab, row_bytes, ids, count, out, first_bad, stream);
  }
  unsigned long long bad_position = ULLONG_MAX;
  int32_t bad_id = 0;
  if (err == cudaSuccess && status == Status::kSuccess) {
    err = cudaMemcpyAsync(&bad_position, first_bad, sizeof(bad_position), cudaMemcpyDeviceToHost,
                          stream);
    if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
    if (err == cudaSuccess && bad_position != ULLONG_MAX) {
      err = cudaMemcpy(&bad_id, ids + bad_position, sizeof(bad_id), cudaMemcpyDeviceToHost);
    }
  }
  cudaError_t free_err = cudaFreeAsync(first_bad, stream);
  REE_CUDA_CHECK(err);
  REE_RETURN_IF_ERROR(status);
  REE_CUDA_CHECK(free_err);
  REE_CHECK_ARG(bad_position == ULLONG_MAX,
                "embedding: ids[%llu] = %d is outside the vocabulary [0, %lld) (device check; "
                "its output row was zeroed)",
                bad_position, bad_id, static_cast<long long>(vocab));
  return Status::kSuccess;
}

Status embeddingHostChecked(DType dtype, const void* table, int64_t vocab, int64_t dim,
                            const int32_t* ids, const int32_t* host_ids, int64_t count, void* out,
                            cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateEmbeddingArgs(dtype, table, vocab, dim, ids, count, out));
  if (count == 0) return Status::kSuccess;
  REE_CHECK_ARG(host_ids != nullptr, "embedding: host_ids is null (count=%lld)",
                static_cast<long long>(count));
  REE_RETURN_IF_ERROR(validateEmbeddingIds(host_ids, count, vocab));  // the CPU kernel's check
  return gatherRows(table, vocab, dim * dtypeSize(dtype), ids, count, out, nullptr, stream);
}

Status embeddingOfDeviceIds(DType dtype, const void* table, int64_t vocab, int64_t dim,
                            const int32_t* ids, int64_t count, void* out, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateEmbeddingArgs(dtype, table, vocab, dim, ids, count, out));
  if (count == 0) return Status::kSuccess;
  return gatherRows(table, vocab, dim * dtypeSize(dtype), ids, count, out, nullptr, stream);
}

Status add(DType dtype, const void* a, const void* b, void* out, int64_t n, cudaStream_t stream) {
  return binary<BinaryOp::kAdd>("add", dtype, a, b, out, n, stream);
}

Status mul(DType dtype, const void* a, const void* b, void* out, int64_t n, cudaStream_t stream) {
  return binary<BinaryOp::kMul>("mul", dtype, a, b, out, n, stream);
}

Status activation(Activation activation, DType dtype, const void* x, void* out, int64_t n,
                  cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateActivationArgs(activation, dtype, x, out, n));
  if (n == 0) return Status::kSuccess;
  return dispatchStorageType(dtype, "activation", [&](auto tag) {
    return launchActivation<decltype(tag)>(activation, x, out, n, stream);
  });
}

Status gated(Activation activation, DType dtype, const void* gate, int64_t gate_stride,
             const void* up, int64_t up_stride, void* out, int64_t out_stride, int64_t rows,
             int64_t cols, cudaStream_t stream) {
  REE_RETURN_IF_ERROR(validateGatedArgs(activation, dtype, gate, gate_stride, up, up_stride, out,
                                        out_stride, rows, cols));
  if (rows == 0 || cols == 0) return Status::kSuccess;
  return dispatchStorageType(dtype, "gated", [&](auto tag) {
    return launchGated<decltype(tag)>(activation, gate, gate_stride, up, up_stride, out, out_stride,
                                      rows, cols, stream);
  });
}

}  // namespace ree::repops::cuda
