// Streaming reductions (sum, mean, max, min) of many rows: included by rowops.cu inside its
// anonymous namespace (it uses vecWidth, loadVec and ReduceKind from there).
//
// One warp per row, no shared memory and no block barrier: each lane keeps streamBatch() 16-byte
// loads in flight before it uses them. Same bits as every other path:
// - sum / mean: lane c owns chunk c of each 32-chunk round (kReduceChunk contiguous elements, read
//   in increasing order: p = +0, p = p + x_k, the canonical chain); the round's 32 partials are
//   broadcast by shuffles and merged left to right (total = first partial, then total + p_c),
//   exactly reduce.h's ChunkMerge. Mean is one IEEE division of that sum.
// - max / min: rowmath::maxCombine / minCombine select an input (or the canonical NaN) under a
//   total order, so any grouping gives the same bits: lanes stride over the row (coalesced), then
//   a shuffle tree. Every lane starts from x_0 (a selection of x_0 with itself is x_0).
// Requires 16-byte loads for every row (vecLoadsOk: x aligned, cols and the row stride multiples
// of V).

// 16-byte loads per lane issued before their values are used: 32 floats of registers (8 loads of
// f32, 4 of bf16 / f16), which keeps the kernel within 64 registers (4 blocks an SM: a 4096-row
// reduction in one wave on an H100) without spilling.
template <typename InT>
constexpr int streamBatch() {
  return 32 / vecWidth<InT>();
}

struct StreamReduceArgs {
  const void* x;
  int64_t x_stride;
  void* out;
  DType out_dtype;
  int64_t rows;
  int n;
  int kind;  // kRedSum, kRedMean, kRedMax or kRedMin
};

// CSUM of the row (reduce.h), the same value in every lane.
template <typename InT>
__device__ float streamCanonicalSum(const InT* xr, int n, int lane) {
  constexpr int V = vecWidth<InT>();
  constexpr int kStreamBatch = streamBatch<InT>();
  static_assert(kReduceChunk % (kStreamBatch * V) == 0, "batches tile a whole chunk");
  float total = 0.0f;
  for (int64_t base = 0; base < n; base += 32 * kReduceChunk) {
    const int64_t begin = base + static_cast<int64_t>(lane) * kReduceChunk;
    const int64_t end = begin + kReduceChunk < n ? begin + kReduceChunk : n;
    float partial = 0.0f;
    if (end - begin == kReduceChunk) {
      // A whole chunk: unconditional loads, so that all kStreamBatch of a batch are issued before
      // its adds (with a range check per load the compiler keeps only two in flight).
      // unroll 1: each batch's loads all go out together (unrolled, the compiler interleaves the
      // batches and keeps fewer loads in flight).
#pragma unroll 1
      for (int64_t e = begin; e < end; e += kStreamBatch * V) {
        float v[kStreamBatch][V];
#pragma unroll
        for (int b = 0; b < kStreamBatch; ++b)
          loadVec(xr + e + b * V, v[b]);
#pragma unroll
        for (int b = 0; b < kStreamBatch; ++b) {
#pragma unroll
          for (int j = 0; j < V; ++j)
            partial = partial + v[b][j];
        }
      }
    } else {
      for (int64_t e = begin; e < end; e += V) {  // the row's partial last chunk; n % V == 0
        float v[V];
        loadVec(xr + e, v);
#pragma unroll
        for (int j = 0; j < V; ++j)
          partial = partial + v[j];
      }
    }
    const int64_t chunks_left = (n - base + kReduceChunk - 1) / kReduceChunk;
    const int count = chunks_left < 32 ? static_cast<int>(chunks_left) : 32;
    for (int j = 0; j < 32; ++j) {
      const float p = __shfl_sync(0xffffffffu, partial, j);
      if (j < count) total = base == 0 && j == 0 ? p : total + p;
    }
  }
  return total;
}

// ROWMAX (kMax) or ROWMIN of the row, the same value in every lane.
template <typename InT, bool kMax>
__device__ float streamSelect(const InT* xr, int n, int lane) {
  constexpr int V = vecWidth<InT>();
  constexpr int kStreamBatch = streamBatch<InT>();
  auto combine = [](float a, float b) {
    return kMax ? rowmath::maxCombine(a, b) : rowmath::minCombine(a, b);
  };
  float best = loadFloat(xr[0]);
  constexpr int64_t kStep = 32 * V;
  for (int64_t e = static_cast<int64_t>(lane) * V; e < n; e += kStreamBatch * kStep) {
    float v[kStreamBatch][V];
#pragma unroll
    for (int b = 0; b < kStreamBatch; ++b) {
      if (e + b * kStep < n) loadVec(xr + e + b * kStep, v[b]);
    }
#pragma unroll
    for (int b = 0; b < kStreamBatch; ++b) {
      if (e + b * kStep < n) {
#pragma unroll
        for (int j = 0; j < V; ++j)
          best = combine(best, v[b][j]);
      }
    }
  }
  for (int offset = 16; offset > 0; offset /= 2)
    best = combine(best, __shfl_xor_sync(0xffffffffu, best, offset));
  return best;
}

// Warp w of the grid serves rows w, w + warps of the grid, ...; lane 0 stores each row's value.
template <typename InT>
__global__ void __launch_bounds__(kThreads, 4) streamReduceKernel(StreamReduceArgs a) {
  const int lane = threadIdx.x % 32;
  const int64_t grid_warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32; row < a.rows;
       row += grid_warps) {
    const InT* xr = static_cast<const InT*>(a.x) + row * a.x_stride;
    float value;
    switch (a.kind) {  // uniform over the grid
      case kRedMax:
        value = streamSelect<InT, true>(xr, a.n, lane);
        break;
      case kRedMin:
        value = streamSelect<InT, false>(xr, a.n, lane);
        break;
      default:
        value = streamCanonicalSum(xr, a.n, lane);
        if (a.kind == kRedMean) value = rowmath::divideByCount(value, a.n);
        break;
    }
    if (lane == 0) rowmath::storeAt(a.out, a.out_dtype, row, value);
  }
}

// Launches streamReduceKernel for sum, mean, max and min when every row allows 16-byte loads, there
// are enough rows to keep each SM's warps streaming (at least kStreamRowsPerSm a SM; fewer rows are
// served faster by the resident kernel's blocks per row) and the rows are long enough to keep all
// 32 lanes of a warp busy: a full 32-chunk round for sum and mean, kStreamMinSelectCols for max and
// min (the resident kernel's warp mode packs shorter rows several to a warp). *done = false
// otherwise.
constexpr int kStreamRowsPerSm = 4;
constexpr int64_t kStreamMinSumCols = 32 * kReduceChunk;
constexpr int64_t kStreamMinSelectCols = 1024;

Status launchStreamReduce(int kind, RowsIn x, void* out, DType out_dtype, int64_t rows,
                          int64_t cols, cudaStream_t stream, bool* done) {
  *done = false;
  if (kind != kRedSum && kind != kRedMean && kind != kRedMax && kind != kRedMin) {
    return Status::kSuccess;
  }
  int device = 0, sms = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  REE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (rows < static_cast<int64_t>(kStreamRowsPerSm) * sms) return Status::kSuccess;
  const bool select = kind == kRedMax || kind == kRedMin;
  if (cols < (select ? kStreamMinSelectCols : kStreamMinSumCols)) return Status::kSuccess;
  bool vec = false;
  REE_RETURN_IF_ERROR(dispatchStorageType(x.dtype, "rowops", [&](auto in_tag) {
    vec = vecLoadsOk<decltype(in_tag)>(x.data, x.row_stride, rows, cols);
  }));
  if (!vec) return Status::kSuccess;
  StreamReduceArgs args{x.data, x.row_stride, out, out_dtype, rows, static_cast<int>(cols), kind};
  const long long blocks = (rows + kWarps - 1) / kWarps;
  const unsigned grid = static_cast<unsigned>(blocks < (1 << 20) ? blocks : (1 << 20));
  REE_RETURN_IF_ERROR(dispatchStorageType(x.dtype, "rowops", [&](auto in_tag) {
    streamReduceKernel<decltype(in_tag)><<<grid, kThreads, 0, stream>>>(args);
  }));
  REE_CUDA_CHECK_LAUNCH();
  *done = true;
  return Status::kSuccess;
}
