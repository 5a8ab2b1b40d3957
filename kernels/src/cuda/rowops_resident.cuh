// The row-resident kernel of rowops.cu (RMSNorm, LayerNorm, softmax, log-softmax, and the
// reductions sum, mean, var, max and min, with each row read from global memory once) and its
// launch plan. A piece of rowops.cu, kept in a file of its
// own because it is a kernel of its own (shared layout, three work shapes, plan): rowops.cu
// includes it once, inside its anonymous namespace, after the row and reduce kernels and the
// launch helpers, whose RowArgs, Pack, vecWidth, loadVec, aligned and divUp it uses. Not a header
// for any other file.
#pragma once

// ---- row-resident kernel (RMSNorm, LayerNorm, softmax, log-softmax, reductions) --------------
// Each row is read from global memory once, into shared memory, and every later pass works on
// that copy: the statistics, then the outputs. The canonical orders are unchanged: one thread runs
// the sequential chain of one 128-element chunk, one thread merges the chunk partials left to
// right, and the row maximum is an order-free selection (any tree).
//
// Shared layout. A chunk lives in a "slot": its 128 input elements as 16-byte pieces (16 for
// 16-bit types, 32 for f32); piece k of slot q is stored at piece position k ^ (q & 7). The XOR
// makes both access patterns conflict-free: in the chains, eight consecutive threads read piece k
// of eight consecutive slots (q & 7 differs, so the bank groups differ); in the coalesced passes,
// eight consecutive threads read eight consecutive pieces of one slot.
// Softmax keeps the fp32 exponentials e_k (32 pieces of 4 floats per slot, same swizzle) so that
// crExp runs once per element: a slot is 512 bytes, the 16-bit input sits in its upper half (or
// is the whole slot for f32), and each warp converts whole slots in place (all lanes read the
// slot's inputs, __syncwarp, all write its exponentials). Log-softmax computes them the same way
// (all threads, coalesced) for its sum, but keeps x beside them (512 + 128 * sizeof(x) bytes per
// slot) for its outputs (x - m) - log(s).
//
// Three shapes of work, chosen per call by planResident():
// - warp mode (rows of <= 8 chunks, many rows): each warp owns R rows of L slots each (L = the
//   chunk count rounded up to a power of two, R * L <= 32) and works alone after the load; lane q
//   runs slot q's chain and the maximum is a shuffle tree within the L lanes of a row, so short
//   rows (qk-norm over 128-element heads) still fill the lanes.
// - CTA mode (other rows that fit in shared memory): one block per row; thread t runs the chains
//   of chunks t, t + blockDim, ...; thread 0 merges.
// - cluster mode (rows too long for one block's shared memory; sm_90): a cluster of kClusterSize
//   blocks holds one row, block b the chunks [b * S, (b + 1) * S). Each block sends its chunk
//   partials (and its maximum) to every block of the cluster through distributed shared memory,
//   and every block's thread 0 merges the whole row's partials left to right itself.
// With few rows (decode) the weight and bias (or the block's slice of them) are staged in shared
// memory with the row, in the same copy group, so that the kernel waits for DRAM once; with many
// rows they are read from global memory (L2 / L1 hits) in the output pass and shared memory holds
// more rows.
constexpr int kClusterSize = 8;
constexpr int kResidentMaxThreads = 256;
constexpr int kEPieces = kReduceChunk / 4;  // 16-byte pieces of one slot's fp32 exponentials

struct ResidentArgs {
  RowArgs a;
  int warps_per_group;  // 1: warp mode; otherwise the whole block serves one row (R == 1)
  int rows_per_group;   // R
  int slots_per_row;    // L (warp mode: a power of two); CTA and cluster modes: S
  int slots_per_row_log2;
  int slice_chunks;  // S: chunks of the row held by one block
  int row_chunks;    // chunks of the whole row
  bool x_async;      // 16-byte cp.async copies of the x rows are legal
  bool y_vector;     // vector stores of y are legal
  bool params_staged;
  bool weight_async;  // staging: 16-byte cp.async copies (else element by element)
  bool bias_async;
  bool weight_vector;  // one access per piece (always when staged; else element by element)
  bool bias_vector;
  // Byte offsets in dynamic shared memory: per group (group_bytes apart) the slots at 0, two
  // partial arrays and the row statistics; per block the staged weight and bias.
  int group_bytes;
  int partial_offset;
  int partial_count;  // floats in one of the two partial arrays
  int stats_offset;
  int weight_offset;
  int bias_offset;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define REE_HAVE_CLUSTERS 1
#else
#define REE_HAVE_CLUSTERS 0
#endif

__device__ __forceinline__ unsigned clusterRank() {
#if REE_HAVE_CLUSTERS
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
#else
  return 0;
#endif
}

// Cluster barrier in two halves (all threads of all blocks): arrive has release semantics, wait
// acquire, so shared-memory writes into other blocks before arrive are seen after wait.
__device__ __forceinline__ void clusterArrive(bool relaxed = false) {
#if REE_HAVE_CLUSTERS
  if (relaxed) {
    asm volatile("barrier.cluster.arrive.relaxed;\n" ::: "memory");
  } else {
    asm volatile("barrier.cluster.arrive.release;\n" ::: "memory");
  }
#else
  (void)relaxed;
#endif
}
__device__ __forceinline__ void clusterWait() {
#if REE_HAVE_CLUSTERS
  asm volatile("barrier.cluster.wait.acquire;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void clusterSync() {
  clusterArrive();
  clusterWait();
}

// Stores `value` at the address of `local` in the shared memory of cluster block `rank`.
__device__ __forceinline__ void storeToBlock(float* local, unsigned rank, float value) {
#if REE_HAVE_CLUSTERS
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(local));
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(address), "r"(rank));
  asm volatile("st.shared::cluster.f32 [%0], %1;\n" ::"r"(remote), "f"(value) : "memory");
#else
  (void)rank;
  *local = value;
#endif
}

// Where a slot's pieces are (see the layout above).
template <int kOp, typename InT>
struct Slots {
  static constexpr int kV = vecWidth<InT>();         // elements per piece
  static constexpr int kPieces = kReduceChunk / kV;  // pieces per slot
  static_assert(kPieces == 16 || kPieces == 32, "16- or 32-bit input");
  static constexpr int kRawBytes = kReduceChunk * sizeof(InT);  // 256 or 512
  static constexpr int kLog2Pieces = kPieces == 16 ? 4 : 5;
  // Softmax: the exponentials replace x (512 bytes); log-softmax: both are kept (x after them).
  static constexpr int kBytes =
      kOp == kSoftmax ? 512 : (kOp == kLogSoftmax ? 512 + kRawBytes : kRawBytes);
  static constexpr int kRawBase = kOp == kLogSoftmax ? 512 : kBytes - kRawBytes;
  static __device__ __forceinline__ int raw(int slot, int k) {
    return slot * kBytes + kRawBase + ((k ^ (slot & 7)) << 4);
  }
  static __device__ __forceinline__ int exp(int slot, int k4) {
    return slot * kBytes + ((k4 ^ (slot & 7)) << 4);
  }
};

// The V input elements of piece k of slot q, widened.
template <int kOp, typename InT>
__device__ __forceinline__ void loadPiece(const unsigned char* base, int slot, int k, float* out) {
  constexpr int V = vecWidth<InT>();
  alignas(16) InT v[V];
  *reinterpret_cast<uint4*>(v) =
      *reinterpret_cast<const uint4*>(base + Slots<kOp, InT>::raw(slot, k));
#pragma unroll
  for (int j = 0; j < V; ++j)
    out[j] = loadFloat(v[j]);
}

// Input elements 4 * k4 .. 4 * k4 + 3 of slot q, widened (a whole piece for f32, half of one for
// 16-bit types).
template <int kOp, typename InT>
__device__ __forceinline__ void loadQuad(const unsigned char* base, int slot, int k4, float* out) {
  constexpr int kQuadsPerPiece = vecWidth<InT>() / 4;
  const Pack<InT, 4> p = *reinterpret_cast<const Pack<InT, 4>*>(
      base + Slots<kOp, InT>::raw(slot, k4 / kQuadsPerPiece) +
      (k4 % kQuadsPerPiece) * 4 * static_cast<int>(sizeof(InT)));
#pragma unroll
  for (int j = 0; j < 4; ++j)
    out[j] = loadFloat(p.v[j]);
}

// N consecutive elements of a weight or bias vector of runtime dtype, widened: one access when
// `vector` (the address is then a multiple of N elements and of 16 bytes or the access size),
// else element by element.
template <int N>
__device__ __forceinline__ void loadParams(const void* base, DType dtype, int64_t element,
                                           bool vector, float* out) {
  if (!vector) {
#pragma unroll
    for (int j = 0; j < N; ++j)
      out[j] = rowmath::loadAt(base, dtype, element + j);
    return;
  }
  switch (dtype) {
    case DType::kBF16: {
      const Pack<bf16_t, N> p = static_cast<const Pack<bf16_t, N>*>(base)[element / N];
#pragma unroll
      for (int j = 0; j < N; ++j)
        out[j] = toFloat(p.v[j]);
      break;
    }
    case DType::kF16: {
      const Pack<f16_t, N> p = static_cast<const Pack<f16_t, N>*>(base)[element / N];
#pragma unroll
      for (int j = 0; j < N; ++j)
        out[j] = toFloat(p.v[j]);
      break;
    }
    default: {
      const Pack<float, N> p = static_cast<const Pack<float, N>*>(base)[element / N];
#pragma unroll
      for (int j = 0; j < N; ++j)
        out[j] = p.v[j];
      break;
    }
  }
}

// The block's threads copy `bytes` from global `src` to shared `dst` (both 16-byte aligned).
__device__ __forceinline__ void copyToSharedAsync(unsigned char* dst, const void* src,
                                                  size_t bytes) {
  const unsigned char* from = static_cast<const unsigned char*>(src);
  for (size_t off = threadIdx.x * size_t{16}; off < bytes; off += blockDim.x * size_t{16}) {
    cpAsync16(dst + off, from + off, static_cast<int>(bytes - off < 16 ? bytes - off : 16));
  }
}

// Copies `count` elements of `bytes_per_element` from global to shared: 16-byte cp.async pieces
// when `async` (src 16-byte aligned), else element by element. Block-wide.
__device__ __forceinline__ void stageVector(unsigned char* dst, const void* src, int count,
                                            int bytes_per_element, bool async) {
  if (async) {
    copyToSharedAsync(dst, src, static_cast<size_t>(count) * bytes_per_element);
  } else if (bytes_per_element == 2) {
    for (int i = threadIdx.x; i < count; i += blockDim.x)
      reinterpret_cast<uint16_t*>(dst)[i] = static_cast<const uint16_t*>(src)[i];
  } else {
    for (int i = threadIdx.x; i < count; i += blockDim.x)
      reinterpret_cast<uint32_t*>(dst)[i] = static_cast<const uint32_t*>(src)[i];
  }
}

// The output passes are limited by instruction issue, so the roundings below are written with
// fewer operations than the generic rowmath::storeOut / storeAs, with the same bits: the NaN test
// is the IEEE comparison v != v, and a non-NaN value is rounded to bf16 by the conversion
// instruction, as numeric.h's toBF16 does on the GPU (proven equal to the integer rounding of the
// CPU build on all 2^32 inputs by NumericCuda.NarrowingMatchesCpuForAllFloats). The pair form
// (toBF16x2) converts two values with one instruction.

// Two bf16 outputs (storeCanonical, numeric.h) packed in one word, element `lo` first.
__device__ __forceinline__ uint32_t storeOutputPair(float lo, float hi) {
  uint32_t packed = toBF16x2(lo, hi);
  if (lo != lo) packed = (packed & 0xffff0000u) | 0x7fc0u;
  if (hi != hi) packed = (packed & 0x0000ffffu) | 0x7fc00000u;
  return packed;
}

// The canonical chain of one chunk (reduce.h) over its `length` terms: kSumX p + x, kDotX
// fma(x, x, p), kDotShifted fma(x - c, x - c, p), kSumE p + e over the stored exponentials.
enum ChainKind : int { kSumX = 0, kDotX = 1, kDotShifted = 2, kSumE = 3 };

template <int kKind, int kOp, typename InT>
__device__ __forceinline__ float chunkChain(const unsigned char* base, int slot, int length,
                                            float c) {
  float p = 0.0f;
  auto step = [&](float v) {
    if constexpr (kKind == kSumX || kKind == kSumE) {
      p = p + v;
    } else if constexpr (kKind == kDotX) {
      p = fmaF32(v, v, p);
    } else {
      const float d = v - c;
      p = fmaF32(d, d, p);
    }
  };
  if constexpr (kKind == kSumE) {
    if (length == kReduceChunk) {
#pragma unroll 8
      for (int k4 = 0; k4 < kEPieces; ++k4) {
        const float4 v = *reinterpret_cast<const float4*>(base + Slots<kOp, InT>::exp(slot, k4));
        step(v.x);
        step(v.y);
        step(v.z);
        step(v.w);
      }
    } else {
      for (int k4 = 0; 4 * k4 < length; ++k4) {
        const float4 v = *reinterpret_cast<const float4*>(base + Slots<kOp, InT>::exp(slot, k4));
        const float values[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (4 * k4 + j < length) step(values[j]);
        }
      }
    }
  } else {
    constexpr int V = vecWidth<InT>();
    if (length == kReduceChunk) {  // unrolled: the loads run ahead of the dependent chain
#pragma unroll 4
      for (int k = 0; k < Slots<kOp, InT>::kPieces; ++k) {
        float v[V];
        loadPiece<kOp, InT>(base, slot, k, v);
#pragma unroll
        for (int j = 0; j < V; ++j)
          step(v[j]);
      }
    } else {
      for (int k = 0; k * V < length; ++k) {
        float v[V];
        loadPiece<kOp, InT>(base, slot, k, v);
#pragma unroll
        for (int j = 0; j < V; ++j) {
          if (k * V + j < length) step(v[j]);
        }
      }
    }
  }
  return p;
}

// Where this thread's group, rows and row slice are.
struct ResidentCtx {
  bool warp_mode;
  int tid;      // thread index within the group
  int threads;  // threads per group
  int rows_here;
  int64_t first_row;
  unsigned rank;     // cluster block rank (0 outside cluster mode)
  int64_t begin;     // first element of the slice
  int slice_n;       // elements of the slice (<= S * 128; 0 for an empty trailing block)
  int slice_chunks;  // chunks of the slice holding elements
  int slots;         // slots the group walks
  unsigned char* base;
  float* partials;  // two arrays of partial_count
  float* stats;     // [R][2] statistics, then scratch
};

// Row (within the group) and chunk (within the slice) of slot q.
__device__ __forceinline__ void slotPosition(const ResidentArgs& a, const ResidentCtx& c, int slot,
                                             int* r, int* chunk) {
  if (c.warp_mode) {
    *r = slot >> a.slots_per_row_log2;
    *chunk = slot - (*r << a.slots_per_row_log2);
  } else {
    *r = 0;
    *chunk = slot;
  }
}

// Elements of slot q (0 when it holds none: a padding slot or a row past the end).
__device__ __forceinline__ int slotLength(const ResidentCtx& c, int r, int chunk) {
  if (r >= c.rows_here) return 0;
  const int first = chunk * kReduceChunk;
  if (first >= c.slice_n) return 0;
  return min(kReduceChunk, c.slice_n - first);
}

__device__ __forceinline__ void groupSync(const ResidentCtx& c) {
  if (c.warp_mode) {
    __syncwarp();
  } else {
    __syncthreads();
  }
}

// Runs the chains of this thread's slots and merges each row's partials left to right; the
// merging thread passes the total to finish(r, total), which stores the row's statistics. `which`
// selects the partial array (cluster mode must not reuse one: a block may still be merging the
// first when another block writes into the second).
template <int kKind, int kOp, typename InT, bool kCluster, typename Finish>
__device__ __forceinline__ void rowTotals(const ResidentArgs& a, const ResidentCtx& c, int which,
                                          Finish finish) {
  float* partials = c.partials + which * a.partial_count;
  for (int slot = c.tid; slot < c.slots; slot += c.threads) {
    int r, chunk;
    slotPosition(a, c, slot, &r, &chunk);
    const int length = slotLength(c, r, chunk);
    if (length == 0) continue;
    const float shift = kKind == kDotShifted ? c.stats[2 * r] : 0.0f;
    const float p = chunkChain<kKind, kOp, InT>(c.base, slot, length, shift);
    if constexpr (kCluster) {
      const int global_chunk = static_cast<int>(c.rank) * a.slice_chunks + chunk;
      for (unsigned b = 0; b < kClusterSize; ++b)
        storeToBlock(partials + global_chunk, b, p);
    } else {
      partials[slot] = p;
    }
  }
  if constexpr (kCluster) {
    clusterSync();
  } else {
    groupSync(c);
  }
  const int merge_rows = c.warp_mode ? c.rows_here : 1;
  if (c.tid < merge_rows) {
    const int r = c.tid;
    const float* p = partials + (c.warp_mode ? r * a.slots_per_row : 0);
    const int count = a.row_chunks;
    float total = p[0];
    int j = 1;
    // Blocks of four loads ahead of their additions (the additions stay in order).
#pragma unroll 2
    for (; j + 4 <= count; j += 4) {
      const float p0 = p[j], p1 = p[j + 1], p2 = p[j + 2], p3 = p[j + 3];
      total = total + p0;
      total = total + p1;
      total = total + p2;
      total = total + p3;
    }
    for (; j < count; ++j)
      total = total + p[j];
    finish(r, total);
  }
  groupSync(c);
}

// Row maxima (kMin: minima; order-free selections) into stats[2 r].
template <int kOp, typename InT, bool kCluster, bool kMin = false>
__device__ __forceinline__ void rowMaxima(const ResidentArgs& a, const ResidentCtx& c) {
  constexpr int V = vecWidth<InT>();
  constexpr int U = Slots<kOp, InT>::kPieces;
  auto combine = [](float x, float y) {
    return kMin ? rowmath::minCombine(x, y) : rowmath::maxCombine(x, y);
  };
  // -inf for max, +inf for min: combine(neutral, v) selects v.
  const float neutral = bitsFloat(kMin ? 0x7f800000u : 0xff800000u);
  float m = neutral;
  if (c.warp_mode) {
    // Lane q scans slot q; a shuffle tree within each row's L lanes.
    const int slot = c.tid;
    if (slot < c.slots) {
      int r, chunk;
      slotPosition(a, c, slot, &r, &chunk);
      const int length = slotLength(c, r, chunk);
      for (int k = 0; k * V < length; ++k) {
        float v[V];
        loadPiece<kOp, InT>(c.base, slot, k, v);
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (k * V + j < length) m = combine(m, v[j]);
      }
    }
    for (int offset = a.slots_per_row / 2; offset > 0; offset /= 2)
      m = combine(m, __shfl_xor_sync(0xffffffffu, m, offset));
    const int r = slot >> a.slots_per_row_log2;
    if ((slot & (a.slots_per_row - 1)) == 0 && r < c.rows_here) c.stats[2 * r] = m;
    __syncwarp();
    return;
  }
  // One row per block: coalesced pieces, warp trees, then thread 0 over the warps (and, in a
  // cluster, over the blocks).
  for (int idx = c.tid; idx < c.slice_chunks * U; idx += c.threads) {
    const int slot = idx / U, k = idx % U;
    const int first = slot * kReduceChunk + k * V;
    if (first >= c.slice_n) break;
    float v[V];
    loadPiece<kOp, InT>(c.base, slot, k, v);
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (first + j < c.slice_n) m = combine(m, v[j]);
  }
  for (int offset = 16; offset > 0; offset /= 2)
    m = combine(m, __shfl_xor_sync(0xffffffffu, m, offset));
  float* warp_max = c.stats + 2;  // scratch after the one row's statistics
  float* block_max = warp_max + kResidentMaxThreads / 32;
  if ((c.tid & 31) == 0) warp_max[c.tid / 32] = m;
  __syncthreads();
  if (c.tid == 0) {
    float value = warp_max[0];
    for (int w = 1; w < c.threads / 32; ++w)
      value = combine(value, warp_max[w]);
    if constexpr (kCluster) {
      for (unsigned b = 0; b < kClusterSize; ++b)
        storeToBlock(block_max + c.rank, b, value);
    } else {
      c.stats[0] = value;
    }
  }
  if constexpr (kCluster) {
    clusterSync();
    if (c.tid == 0) {
      float value = block_max[0];
      for (int b = 1; b < kClusterSize; ++b)
        value = combine(value, block_max[b]);
      c.stats[0] = value;
    }
  }
  __syncthreads();
}

// e_k = crExp(x_k - m) for every element (softmax: written over the slot that held x). A warp
// converts whole slots: lane l reads elements 4l .. 4l + 3, the warp synchronises (softmax's
// exponentials overwrite inputs other lanes read), lane l writes their exponentials. Two slots at
// a time; each slot's four exponentials of a lane go through one crExpN, so their latencies
// overlap.
template <int kOp, typename InT>
__device__ __forceinline__ void rowExponentials(const ResidentArgs& a, const ResidentCtx& c) {
  const int lane = c.tid % 32, warp = c.tid / 32, warps = c.threads / 32;
  for (int first_slot = warp; first_slot < c.slots; first_slot += 2 * warps) {  // warp-uniform
    // A lane past a slot's end keeps x = m = 0: a defined input whose result is not stored.
    float v[2][4] = {}, m[2] = {}, e[2][4];
    int slot[2], length[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      slot[h] = first_slot + h * warps;
      int r = 0, chunk = 0;
      length[h] = 0;
      if (slot[h] < c.slots) {
        slotPosition(a, c, slot[h], &r, &chunk);
        length[h] = slotLength(c, r, chunk);
      }
      if (4 * lane < length[h]) {
        m[h] = c.stats[2 * r];
        loadQuad<kOp, InT>(c.base, slot[h], lane, v[h]);
      }
    }
    __syncwarp();
    // Four exps at a time (H100, rowops bench): 3-10% faster than one by one on 128256-wide
    // rows, the same within noise on 4096- and 8192-wide rows; eight at once was up to 8% slower
    // on many rows (80 registers instead of 64 cost resident blocks).
#pragma unroll
    for (int h = 0; h < 2; ++h)
      rowmath::softmaxExpN(v[h], m[h], e[h]);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (4 * lane < length[h]) {
        *reinterpret_cast<float4*>(c.base + Slots<kOp, InT>::exp(slot[h], lane)) =
            make_float4(e[h][0], e[h][1], e[h][2], e[h][3]);
      }
    }
    __syncwarp();
  }
  groupSync(c);
}

// Writes n (<= N) outputs: one N-wide store when allowed.
template <typename OutT, int N>
__device__ __forceinline__ void storeOutputs(OutT* out, int n, bool vector, const float* values) {
  if (vector && n == N) {
    if constexpr (std::is_same<OutT, bf16_t>::value) {
      struct alignas(2 * N) Words {
        uint32_t w[N / 2];
      } words;
#pragma unroll
      for (int j = 0; j < N / 2; ++j)
        words.w[j] = storeOutputPair(values[2 * j], values[2 * j + 1]);
      *reinterpret_cast<Words*>(out) = words;
    } else {
      Pack<OutT, N> pack;
#pragma unroll
      for (int j = 0; j < N; ++j)
        pack.v[j] = storeCanonical<OutT>(values[j]);
      *reinterpret_cast<Pack<OutT, N>*>(out) = pack;
    }
  } else {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      if (j < n) out[j] = storeCanonical<OutT>(values[j]);
    }
  }
}

// The per-element formula of the output pass (rowmath), given the row statistics s0, s1.
template <int kOp, typename InT, bool kCastFirst, bool kWeight, bool kBias>
__device__ __forceinline__ float normOutput(float v, float s0, float s1, float w, float b) {
  if constexpr (kOp == kRms) {
    float scaled = v * s0;
    // A NaN stays a NaN through roundThrough; the output store canonicalises it.
    if (kCastFirst) scaled = roundThrough<InT>(scaled);
    return kWeight ? scaled * w : scaled;
  } else if constexpr (kOp == kLayer) {
    return rowmath::layerNormValue(v, s0, s1, kWeight, w, kBias, b);
  } else {
    return rowmath::logSoftmaxValue(v, s0, s1);
  }
}

// V consecutive elements of a typed vector (weight or bias) as fp32, one access.
template <typename T, int V>
__device__ __forceinline__ void loadPack(const T* p, float* out) {
  const Pack<T, V> pack = *reinterpret_cast<const Pack<T, V>*>(p);
#pragma unroll
  for (int j = 0; j < V; ++j)
    out[j] = loadFloat(pack.v[j]);
}

// normOutputs for the common case, with the same bits: one row per group (CTA and cluster
// modes), whole pieces (the slice is a multiple of V elements), vector stores, and weight and
// bias of compile-time types read one piece per access. The general loop below works out a
// row, a bound check, a runtime weight type and a partial store for every piece, which made the
// output pass about 180 instructions per 8 elements of bf16 RMSNorm (ncu, H100).
template <int kOp, typename InT, typename OutT, bool kCastFirst, bool kWeight, bool kBias,
          typename WT, typename BT>
__device__ __forceinline__ void normOutputsWhole(const ResidentArgs& ra, const ResidentCtx& c,
                                                 const unsigned char* smem) {
  constexpr int V = vecWidth<InT>();
  constexpr int U = Slots<kOp, InT>::kPieces;
  constexpr int kLog2U = Slots<kOp, InT>::kLog2Pieces;
  const RowArgs& a = ra.a;
  const WT* weight = nullptr;
  const BT* bias = nullptr;
  if constexpr (kWeight) {
    weight = ra.params_staged ? reinterpret_cast<const WT*>(smem + ra.weight_offset)
                              : static_cast<const WT*>(a.weight) + c.begin;
  }
  if constexpr (kBias) {
    bias = ra.params_staged ? reinterpret_cast<const BT*>(smem + ra.bias_offset)
                            : static_cast<const BT*>(a.bias) + c.begin;
  }
  OutT* y = static_cast<OutT*>(a.y) + c.first_row * a.y_stride + c.begin;
  const float s0 = c.stats[0], s1 = c.stats[1];
  const int pieces = c.slice_n / V;
#pragma unroll 2
  for (int idx = c.tid; idx < pieces; idx += c.threads) {
    float v[V], w[V], b[V];
    loadPiece<kOp, InT>(c.base, idx >> kLog2U, idx & (U - 1), v);
    if constexpr (kWeight) loadPack<WT, V>(weight + idx * V, w);
    if constexpr (kBias) loadPack<BT, V>(bias + idx * V, b);
#pragma unroll
    for (int j = 0; j < V; ++j) {
      v[j] = normOutput<kOp, InT, kCastFirst, kWeight, kBias>(v[j], s0, s1, kWeight ? w[j] : 0.0f,
                                                              kBias ? b[j] : 0.0f);
    }
    storeOutputs<OutT, V>(y + idx * V, V, true, v);
  }
}

// Runs normOutputsWhole with the weight (and bias) type of the call; false when the call is not
// of that case (the caller then runs the general loop).
template <int kOp, typename InT, typename OutT, bool kCastFirst, bool kWeight, bool kBias>
__device__ __forceinline__ bool normOutputsWholeDispatch(const ResidentArgs& ra,
                                                         const ResidentCtx& c,
                                                         const unsigned char* smem) {
  const RowArgs& a = ra.a;
  if (c.warp_mode || !ra.y_vector || c.slice_n % vecWidth<InT>() != 0) return false;
  if (kWeight && !ra.weight_vector) return false;
  if (kBias && !ra.bias_vector) return false;
  // The one parameter type: the weight's, else the bias's; with both, they must agree.
  const DType type = kWeight ? a.weight_dtype : a.bias_dtype;
  if (kWeight && kBias && a.bias_dtype != type) return false;
  auto run = [&](auto tag) {
    using P = decltype(tag);
    normOutputsWhole<kOp, InT, OutT, kCastFirst, kWeight, kBias, P, P>(ra, c, smem);
    return true;
  };
  if (!kWeight && !kBias) return run(float{});
  switch (type) {
    case DType::kBF16:
      return run(bf16_t{});
    case DType::kF16:
      return run(f16_t{});
    default:
      return run(float{});
  }
}

// The output pass of RMSNorm, LayerNorm and log-softmax: coalesced pieces of x from shared
// memory, the per-element formula of rowmath (kCastFirst, kWeight, kBias fixed per instance).
template <int kOp, typename InT, typename OutT, bool kCastFirst, bool kWeight, bool kBias>
__device__ __forceinline__ void normOutputs(const ResidentArgs& ra, const ResidentCtx& c,
                                            const unsigned char* smem) {
  if (normOutputsWholeDispatch<kOp, InT, OutT, kCastFirst, kWeight, kBias>(ra, c, smem)) return;
  constexpr int V = vecWidth<InT>();
  constexpr int U = Slots<kOp, InT>::kPieces;
  const RowArgs& a = ra.a;
  OutT* y = static_cast<OutT*>(a.y);
  // The block's staged copies, or the slice of the global vectors.
  const void* weight = nullptr;
  const void* bias = nullptr;
  if (kWeight) {
    weight = ra.params_staged ? smem + ra.weight_offset
                              : static_cast<const unsigned char*>(a.weight) +
                                    c.begin * dtypeSize(a.weight_dtype);
  }
  if (kBias) {
    bias = ra.params_staged
               ? smem + ra.bias_offset
               : static_cast<const unsigned char*>(a.bias) + c.begin * dtypeSize(a.bias_dtype);
  }
  constexpr int kLog2U = Slots<kOp, InT>::kLog2Pieces;
#pragma unroll 2
  for (int idx = c.tid; idx < c.slots * U; idx += c.threads) {
    // idx = (r * L + chunk) * U + k, so the piece's first element is (idx - r * L * U) * V.
    const int r = c.warp_mode ? idx >> (ra.slots_per_row_log2 + kLog2U) : 0;
    const int element = (idx - ((r << ra.slots_per_row_log2) << kLog2U)) * V;  // in the slice
    if (r >= c.rows_here || element >= c.slice_n) continue;
    const int slot = idx >> kLog2U, k = idx & (U - 1);
    float v[V], w[V], b[V];
    loadPiece<kOp, InT>(c.base, slot, k, v);
    if (kWeight) loadParams<V>(weight, a.weight_dtype, element, ra.weight_vector, w);
    if (kBias) loadParams<V>(bias, a.bias_dtype, element, ra.bias_vector, b);
    const float s0 = c.stats[2 * r], s1 = c.stats[2 * r + 1];
#pragma unroll
    for (int j = 0; j < V; ++j) {
      v[j] = normOutput<kOp, InT, kCastFirst, kWeight, kBias>(v[j], s0, s1, kWeight ? w[j] : 0.0f,
                                                              kBias ? b[j] : 0.0f);
    }
    OutT* out = y + (c.first_row + r) * a.y_stride + c.begin + element;
    storeOutputs<OutT, V>(out, min(V, c.slice_n - element), ra.y_vector, v);
  }
}

template <int kOp, typename InT, typename OutT, bool kCluster>
__device__ __forceinline__ void residentRows(const ResidentArgs& ra, unsigned char* smem) {
  constexpr int V = vecWidth<InT>();
  constexpr int U = Slots<kOp, InT>::kPieces;
  const RowArgs& a = ra.a;
  ResidentCtx c;
  c.warp_mode = !kCluster && ra.warps_per_group == 1;
  const int group = c.warp_mode ? static_cast<int>(threadIdx.x / 32) : 0;
  c.tid = c.warp_mode ? static_cast<int>(threadIdx.x % 32) : static_cast<int>(threadIdx.x);
  c.threads = c.warp_mode ? 32 : static_cast<int>(blockDim.x);
  if constexpr (kCluster) {
    c.rank = clusterRank();
    c.first_row = blockIdx.x / kClusterSize;
  } else {
    c.rank = 0;
    c.first_row =
        (static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32 / ra.warps_per_group) + group) *
        ra.rows_per_group;
  }
  c.rows_here = static_cast<int>(min(static_cast<int64_t>(ra.rows_per_group),
                                     a.rows > c.first_row ? a.rows - c.first_row : 0));
  c.begin = static_cast<int64_t>(c.rank) * ra.slice_chunks * kReduceChunk;
  c.slice_n =
      static_cast<int>(max(int64_t{0}, min(static_cast<int64_t>(ra.slice_chunks) * kReduceChunk,
                                           static_cast<int64_t>(a.n) - c.begin)));
  c.slice_chunks = (c.slice_n + kReduceChunk - 1) / kReduceChunk;
  c.slots = c.warp_mode ? ra.rows_per_group * ra.slots_per_row : c.slice_chunks;
  c.base = smem + group * ra.group_bytes;
  c.partials = reinterpret_cast<float*>(c.base + ra.partial_offset);
  c.stats = reinterpret_cast<float*>(c.base + ra.stats_offset);
  const InT* x = static_cast<const InT*>(a.x);

  // 1. Every global read in flight at once (the group's rows; when staged, the block's weight and
  // bias), one wait. The rows are read completely before any output is written, so y may alias x.
  constexpr int kLog2U = Slots<kOp, InT>::kLog2Pieces;
  if (ra.x_async && !c.warp_mode && c.rows_here > 0 && c.slice_n % V == 0) {
    // One row of whole pieces: piece idx of the slice is piece idx % U of slot idx / U.
    const InT* row = x + c.first_row * a.x_stride + c.begin;
    for (int idx = c.tid; idx < c.slice_n / V; idx += c.threads)
      cpAsync16(c.base + Slots<kOp, InT>::raw(idx >> kLog2U, idx & (U - 1)), row + idx * V, 16);
  } else if (ra.x_async) {
    for (int idx = c.tid; idx < c.slots * U; idx += c.threads) {
      // idx = (r * L + chunk) * U + k, so the piece's first element is (idx - r * L * U) * V.
      const int r = c.warp_mode ? idx >> (ra.slots_per_row_log2 + kLog2U) : 0;
      const int first = (idx - ((r << ra.slots_per_row_log2) << kLog2U)) * V;
      if (r >= c.rows_here || first >= c.slice_n) continue;
      const int slot = idx >> kLog2U, k = idx & (U - 1);
      const InT* src = x + (c.first_row + r) * a.x_stride + c.begin + first;
      cpAsync16(c.base + Slots<kOp, InT>::raw(slot, k), src,
                min(16, (c.slice_n - first) * static_cast<int>(sizeof(InT))));
    }
  } else {
    for (int idx = c.tid; idx < c.slots * kReduceChunk; idx += c.threads) {
      const int slot = idx / kReduceChunk, j = idx % kReduceChunk;
      int r, chunk;
      slotPosition(ra, c, slot, &r, &chunk);
      const int element = chunk * kReduceChunk + j;
      if (r >= c.rows_here || element >= c.slice_n) continue;
      reinterpret_cast<InT*>(c.base + Slots<kOp, InT>::raw(slot, j / V))[j % V] =
          x[(c.first_row + r) * a.x_stride + c.begin + element];
    }
  }
  if (ra.params_staged) {
    if (a.weight) {
      stageVector(smem + ra.weight_offset,
                  static_cast<const unsigned char*>(a.weight) + c.begin * dtypeSize(a.weight_dtype),
                  c.slice_n, dtypeSize(a.weight_dtype), ra.weight_async);
    }
    if (a.bias) {
      stageVector(smem + ra.bias_offset,
                  static_cast<const unsigned char*>(a.bias) + c.begin * dtypeSize(a.bias_dtype),
                  c.slice_n, dtypeSize(a.bias_dtype), ra.bias_async);
    }
  }
  cpAsyncCommit();
  cpAsyncWait<0>();
  __syncthreads();
  if constexpr (kCluster) clusterWait();  // pairs with the kernel's first arrive
  if (c.rows_here <= 0)
    return;  // warp mode: an idle warp of the last block (no block-wide
             // barrier follows in warp mode)

  // 2. Statistics into stats[2 r], stats[2 r + 1]; sum, mean, var, max, min store the row's value.
  const int n = a.n;
  float* stats = c.stats;
  if constexpr (kOp == kRowSum) {
    rowTotals<kSumX, kOp, InT, kCluster>(ra, c, 0, [&](int r, float sum) {
      const float value = a.mean ? rowmath::divideByCount(sum, n) : sum;
      rowmath::storeAt(a.y, a.out_dtype, c.first_row + r, value);
    });
  } else if constexpr (kOp == kRowMax || kOp == kRowMin) {
    rowMaxima<kOp, InT, kCluster, kOp == kRowMin>(ra, c);  // ends with a group barrier
    const int merge_rows = c.warp_mode ? c.rows_here : 1;
    if (c.tid < merge_rows)
      rowmath::storeAt(a.y, a.out_dtype, c.first_row + c.tid, stats[2 * c.tid]);
  } else if constexpr (kOp == kRowVar) {  // var: LayerNorm's two statistics, divided by n
    rowTotals<kSumX, kOp, InT, kCluster>(
        ra, c, 0, [&](int r, float sum) { stats[2 * r] = rowmath::divideByCount(sum, n); });
    rowTotals<kDotShifted, kOp, InT, kCluster>(ra, c, 1, [&](int r, float ssd) {
      rowmath::storeAt(a.y, a.out_dtype, c.first_row + r, rowmath::divideByCount(ssd, n));
    });
  } else if constexpr (kOp == kRms) {
    rowTotals<kDotX, kOp, InT, kCluster>(
        ra, c, 0, [&](int r, float ss) { stats[2 * r] = rowmath::inverseRms(ss, n, a.eps); });
  } else if constexpr (kOp == kLayer) {
    rowTotals<kSumX, kOp, InT, kCluster>(
        ra, c, 0, [&](int r, float sum) { stats[2 * r] = rowmath::divideByCount(sum, n); });
    rowTotals<kDotShifted, kOp, InT, kCluster>(
        ra, c, 1, [&](int r, float ssd) { stats[2 * r + 1] = rowmath::inverseRms(ssd, n, a.eps); });
  } else if constexpr (kOp == kSoftmax || kOp == kLogSoftmax) {
    rowMaxima<kOp, InT, kCluster>(ra, c);
    rowExponentials<kOp, InT>(ra, c);
    rowTotals<kSumE, kOp, InT, kCluster>(
        ra, c, 0, [&](int r, float s) { stats[2 * r + 1] = kOp == kLogSoftmax ? crLog(s) : s; });
  }

  // 3. Outputs, coalesced, from the shared copy (none for the reductions: stored in step 2).
  if constexpr (kOp == kRowSum || kOp == kRowVar || kOp == kRowMax || kOp == kRowMin) {
    (void)stats;
  } else if constexpr (kOp == kSoftmax) {
    OutT* y = static_cast<OutT*>(a.y);
    for (int idx = c.tid; idx < c.slots * kEPieces; idx += c.threads) {
      // idx = (r * L + chunk) * 32 + k4, so the quad's first element is (idx - r * L * 32) * 4.
      const int r = c.warp_mode ? idx >> (ra.slots_per_row_log2 + 5) : 0;
      const int element = (idx - ((r << ra.slots_per_row_log2) << 5)) * 4;  // in the slice
      if (r >= c.rows_here || element >= c.slice_n) continue;
      const int slot = idx >> 5, k4 = idx & (kEPieces - 1);
      const float s = stats[2 * r + 1];
      const float4 e = *reinterpret_cast<const float4*>(c.base + Slots<kOp, InT>::exp(slot, k4));
      const float values[4] = {e.x / s, e.y / s, e.z / s, e.w / s};
      OutT* out = y + (c.first_row + r) * a.y_stride + c.begin + element;
      storeOutputs<OutT, 4>(out, min(4, c.slice_n - element), ra.y_vector, values);
    }
  } else if constexpr (kOp == kRms) {
    const bool cast_first = a.cast_before_weight && !std::is_same<InT, float>::value;
    if (a.weight) {
      if (cast_first) {
        normOutputs<kOp, InT, OutT, true, true, false>(ra, c, smem);
      } else {
        normOutputs<kOp, InT, OutT, false, true, false>(ra, c, smem);
      }
    } else if (cast_first) {
      normOutputs<kOp, InT, OutT, true, false, false>(ra, c, smem);
    } else {
      normOutputs<kOp, InT, OutT, false, false, false>(ra, c, smem);
    }
  } else if constexpr (kOp == kLayer) {
    if (a.weight && a.bias) {
      normOutputs<kOp, InT, OutT, false, true, true>(ra, c, smem);
    } else if (a.weight) {
      normOutputs<kOp, InT, OutT, false, true, false>(ra, c, smem);
    } else if (a.bias) {
      normOutputs<kOp, InT, OutT, false, false, true>(ra, c, smem);
    } else {
      normOutputs<kOp, InT, OutT, false, false, false>(ra, c, smem);
    }
  } else if constexpr (kOp == kLogSoftmax) {
    normOutputs<kOp, InT, OutT, false, false, false>(ra, c, smem);
  }
}

template <int kOp, typename InT, typename OutT>
__global__ void __launch_bounds__(kResidentMaxThreads) residentKernel(ResidentArgs a) {
  waitForPredecessor();
  allowSuccessorLaunch();
  extern __shared__ __align__(128) unsigned char resident_smem[];
  residentRows<kOp, InT, OutT, false>(a, resident_smem);
}

// The cluster shape exists on sm_90 and later only; elsewhere the kernel is an empty stub that
// the host never launches (it checks the compute capability).
#if REE_HAVE_CLUSTERS || !defined(__CUDA_ARCH__)
#define REE_ROW_CLUSTER_ATTRIBUTE __cluster_dims__(kClusterSize, 1, 1)
#else
#define REE_ROW_CLUSTER_ATTRIBUTE
#endif

template <int kOp, typename InT, typename OutT>
__global__ void __launch_bounds__(kResidentMaxThreads) REE_ROW_CLUSTER_ATTRIBUTE
    residentClusterKernel(ResidentArgs a) {
  waitForPredecessor();
  allowSuccessorLaunch();
#if REE_HAVE_CLUSTERS
  extern __shared__ __align__(128) unsigned char resident_smem[];
  // Every block of the cluster must be running before another block writes into its shared
  // memory: this arrive pairs with the wait after the loads, before the first exchange.
  clusterArrive(/*relaxed=*/true);
  residentRows<kOp, InT, OutT, true>(a, resident_smem);
#else
  (void)a;
#endif
}

// ---- row-resident launch plan -----------------------------------------------------------------
// Warp mode packs short rows into warps when there are enough rows to fill the GPU; other rows
// get a block each, about one warp per 1024 elements, or all eight warps with few rows, so that
// the loads, exponentials and stores of a decode step spread wide.
constexpr int kWarpModeGroups = 4;             // warps (independent groups) per block in warp mode
constexpr int kWarpModeMaxChunks = 8;          // longer rows take a block each
constexpr size_t kCtaModeMaxSmem = 96 * 1024;  // larger rows go to a cluster

size_t align128(size_t bytes) {
  return (bytes + 127) & ~size_t{127};
}

int nextPow2(int v) {
  int p = 1;
  while (p < v)
    p *= 2;
  return p;
}

int log2Exact(int p) {
  int l = 0;
  while ((1 << l) < p)
    ++l;
  return l;
}

// Fills the shared-memory layout of `ra` (groups of `slots` slots, `partial_count` partials per
// array, weight and bias staged for `param_elements` when ra->params_staged) and returns the
// dynamic bytes per block. Must match Slots<> and residentRows().
size_t residentLayout(int op, DType in, int groups, int slots, int partial_count,
                      int param_elements, ResidentArgs* ra) {
  const RowArgs& a = ra->a;
  const size_t raw_bytes = kReduceChunk * dtypeSize(in);
  const size_t slot_bytes =
      op == kSoftmax ? 512 : (op == kLogSoftmax ? 512 + raw_bytes : raw_bytes);
  size_t offset = align128(static_cast<size_t>(slots) * slot_bytes);
  ra->partial_offset = static_cast<int>(offset);
  ra->partial_count = partial_count;
  offset += align128(2 * static_cast<size_t>(partial_count) * sizeof(float));
  ra->stats_offset = static_cast<int>(offset);
  offset += align128((2 * static_cast<size_t>(ra->rows_per_group) + 32) * sizeof(float));
  ra->group_bytes = static_cast<int>(offset);
  size_t total = static_cast<size_t>(groups) * offset;
  ra->weight_offset = static_cast<int>(total);
  if (ra->params_staged && a.weight) {
    total += align128(static_cast<size_t>(param_elements) * dtypeSize(a.weight_dtype));
  }
  ra->bias_offset = static_cast<int>(total);
  if (ra->params_staged && a.bias) {
    total += align128(static_cast<size_t>(param_elements) * dtypeSize(a.bias_dtype));
  }
  return total;
}

struct ResidentPlan {
  bool cluster = false;
  unsigned grid = 0;
  int threads = 0;
  size_t smem = 0;
  ResidentArgs args{};
};

// Chooses warp, CTA or cluster mode for this call; *ok = false when the row fits none of them (it
// then takes rowKernel, which re-reads x).
Status planResident(int op, RowsIn x, RowsOut y, int64_t rows, int64_t cols, const RowArgs& a,
                    bool* ok, ResidentPlan* plan) {
  *ok = false;
  int device = 0, sms = 0, optin = 0, major = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  REE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  REE_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  REE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  const int n = static_cast<int>(cols);
  const int chunks = (n + kReduceChunk - 1) / kReduceChunk;
  const int in_bytes = dtypeSize(x.dtype), out_bytes = dtypeSize(y.dtype);
  const int piece = 16 / in_bytes;  // elements per piece
  const bool few_rows = rows < 2 * static_cast<int64_t>(sms);
  ResidentArgs& ra = plan->args;
  ra.a = a;
  ra.row_chunks = chunks;
  ra.x_async = aligned(x.data, 16) && (rows <= 1 || (x.row_stride * in_bytes) % 16 == 0);
  const int store = (op == kSoftmax ? 4 : piece) * out_bytes;  // bytes of one vector store
  ra.y_vector = aligned(y.data, store) && (rows <= 1 || (y.row_stride * out_bytes) % store == 0);
  ra.params_staged = few_rows;
  ra.weight_async = a.weight == nullptr || aligned(a.weight, 16);
  ra.bias_async = a.bias == nullptr || aligned(a.bias, 16);
  ra.weight_vector =
      a.weight != nullptr && (few_rows || aligned(a.weight, piece * dtypeSize(a.weight_dtype)));
  ra.bias_vector =
      a.bias != nullptr && (few_rows || aligned(a.bias, piece * dtypeSize(a.bias_dtype)));

  if (chunks <= kWarpModeMaxChunks && !few_rows) {
    const int slots_per_row = nextPow2(chunks);
    int rows_per_warp = 32 / slots_per_row;
    while (rows_per_warp > 1 && divUp(rows, rows_per_warp) < 8 * static_cast<int64_t>(sms))
      rows_per_warp /= 2;
    ra.warps_per_group = 1;
    ra.rows_per_group = rows_per_warp;
    ra.slots_per_row = slots_per_row;
    ra.slots_per_row_log2 = log2Exact(slots_per_row);
    ra.slice_chunks = chunks;
    const int slots = rows_per_warp * slots_per_row;
    plan->smem = residentLayout(op, x.dtype, kWarpModeGroups, slots, slots,
                                slots_per_row * kReduceChunk, &ra);
    plan->grid = divUp(rows, static_cast<int64_t>(kWarpModeGroups) * rows_per_warp);
    plan->threads = kWarpModeGroups * 32;
    *ok = plan->smem <= static_cast<size_t>(optin);
    return Status::kSuccess;
  }

  const int max_warps = kResidentMaxThreads / 32;
  auto warpsFor = [&](int slice_chunks) {
    if (few_rows) return max_warps;
    const int warps = (slice_chunks + 7) / 8;
    return warps > max_warps ? max_warps : warps;
  };
  ra.rows_per_group = 1;
  ra.slice_chunks = chunks;
  ra.slots_per_row = chunks;
  ra.slots_per_row_log2 = 0;
  ra.warps_per_group = warpsFor(chunks);
  plan->smem = residentLayout(op, x.dtype, 1, chunks, chunks, chunks * kReduceChunk, &ra);
  if (plan->smem <= kCtaModeMaxSmem && plan->smem <= static_cast<size_t>(optin)) {
    plan->grid = static_cast<unsigned>(rows);
    plan->threads = ra.warps_per_group * 32;
    *ok = true;
    return Status::kSuccess;
  }
  // A cluster holds a long row in the shared memory of kClusterSize SMs. With many rows the norms
  // stream better through rowKernel (its second read of x mostly hits L2; a cluster's serial
  // merge and barriers leave the SM idle), and so does log-softmax (one crExp per element there
  // too, and no room for x beside the exponentials); softmax keeps the cluster, which computes
  // crExp once where rowKernel computes it twice.
  if (major < 9 || (!few_rows && op != kSoftmax)) return Status::kSuccess;
  const int slice = (chunks + kClusterSize - 1) / kClusterSize;
  ra.slice_chunks = slice;
  ra.slots_per_row = slice;
  ra.warps_per_group = warpsFor(slice);
  plan->smem = residentLayout(op, x.dtype, 1, slice, chunks, slice * kReduceChunk, &ra);
  plan->cluster = true;
  plan->grid = static_cast<unsigned>(rows * kClusterSize);
  plan->threads = ra.warps_per_group * 32;
  *ok = plan->smem <= static_cast<size_t>(optin);
  return Status::kSuccess;
}

// The row-resident kernels' occupancy is bounded by shared memory: ask for the largest carveout
// (the driver may otherwise pick a smaller one that holds fewer blocks), and allow the opt-in
// dynamic size. Once per kernel and device.
template <typename Kernel>
Status configureResident(Kernel kernel) {
  int device = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::set<std::pair<const void*, int>> configured;
  std::lock_guard<std::mutex> lock(mutex);
  const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), device);
  if (configured.count(key) != 0) return Status::kSuccess;
  REE_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                      cudaSharedmemCarveoutMaxShared));
  configured.insert(key);
  return Status::kSuccess;
}

template <int kOp, typename InT, typename OutT>
Status launchResident(const ResidentPlan& plan, cudaStream_t stream) {
  if (plan.cluster) {
    auto kernel = residentClusterKernel<kOp, InT, OutT>;
    REE_RETURN_IF_ERROR(configureResident(kernel));
    if (plan.smem > 48 * 1024) REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
    launchChained(kernel, plan.grid, plan.threads, plan.smem, stream, plan.args);
  } else {
    auto kernel = residentKernel<kOp, InT, OutT>;
    REE_RETURN_IF_ERROR(configureResident(kernel));
    if (plan.smem > 48 * 1024) REE_RETURN_IF_ERROR(allowFullSharedMemory(kernel));
    launchChained(kernel, plan.grid, plan.threads, plan.smem, stream, plan.args);
  }
  REE_CUDA_CHECK_LAUNCH();
  return Status::kSuccess;
}
