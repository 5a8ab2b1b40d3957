// Max and min of many rows, streamed: a piece of rowops.cu, included once inside its anonymous
// namespace after the launch helpers (it uses vecWidth, vecLoadsOk, Pack and ReduceKind from
// there). Not a header for any other file.
//
// The row-resident kernel copies each row into shared memory and reduces it with a block per row;
// a selection needs no copy and no order. Here each warp of a grid sized to the GPU walks rows
// w, w + W, w + 2W, ... (W = warps of the grid); its lanes read a row with coalesced 16-byte loads,
// kSelectBatch of them issued before their values are used, and select by an ordered integer key:
// key(x) orders the numbers as the spec's MAX order (-inf < ... < -0 < +0 < ... < +inf), and a
// NaN's key lies above +inf's (sign bit clear) or below -inf's (sign bit set). The row's value is
// the input of largest (max) or smallest (min) key, or the canonical NaN when the largest key lies
// above +inf's or the smallest below -inf's: the value of MAX / MIN over the row (repops-1 section
// 1; both select an input or the canonical NaN, so any grouping gives the same bits).
//
// H100, fp32 4096 x 4096, a micro-benchmark of the kernel shapes (50 launches back to back / 50):
// 24.75 us here, 25.9 us for the same stream selecting with rowmath::maxCombine (its comparisons
// and NaN tests cost more instructions than a key and an integer max), 27.7 us for the resident
// kernel's CTA mode; a pure read of the same 64 MiB took 24.6 us in the same run. Launched chained
// (programmatic dependent launch, as here): 23.6-23.7 us against 27.2-27.3 us for the CTA mode.

constexpr int kSelectWarps = 8;  // warps per block
constexpr int kSelectBatch = 8;  // 16-byte loads per lane issued before their values are used

// The kernel takes rowops.cu's ReduceArgs (x, x_stride, out, out_dtype, rows, n; warps_per_row and
// kind are not read).

// Signed-integer order of orderedKey(x) = the spec's MAX order of x; keyValue inverts it.
__device__ __forceinline__ int orderedKey(float v) {
  const int b = __float_as_int(v);
  return b ^ ((b >> 31) & 0x7fffffff);
}
__device__ __forceinline__ float keyValue(int key) {
  return __int_as_float(key ^ ((key >> 31) & 0x7fffffff));
}

struct KeyRange {
  int high = INT_MIN;
  int low = INT_MAX;
  __device__ __forceinline__ void add(float v) {
    const int k = orderedKey(v);
    high = max(high, k);
    low = min(low, k);
  }
};

// The lane's keys of the row (n % V == 0, 16-byte aligned): pieces lane, lane + 32, ...
template <typename InT>
__device__ __forceinline__ KeyRange laneKeyRange(const InT* xr, int n, int lane) {
  constexpr int V = vecWidth<InT>();
  const uint4* pieces = reinterpret_cast<const uint4*>(xr);
  const int count = n / V;
  KeyRange range;
  auto addPiece = [&](uint4 bits) {
    const Pack<InT, V> p = *reinterpret_cast<const Pack<InT, V>*>(&bits);
#pragma unroll
    for (int j = 0; j < V; ++j)
      range.add(loadFloat(p.v[j]));
  };
  int i = lane;
  for (; i + (kSelectBatch - 1) * 32 < count; i += kSelectBatch * 32) {
    uint4 bits[kSelectBatch];
#pragma unroll
    for (int b = 0; b < kSelectBatch; ++b)
      bits[b] = __ldcs(pieces + i + b * 32);
#pragma unroll
    for (int b = 0; b < kSelectBatch; ++b)
      addPiece(bits[b]);
  }
  for (; i < count; i += 32)
    addPiece(__ldcs(pieces + i));
  return range;
}

template <typename InT, bool kMax>
__global__ void __launch_bounds__(kSelectWarps * 32) streamSelectKernel(ReduceArgs a) {
  waitForPredecessor();
  allowSuccessorLaunch();
  const int lane = threadIdx.x % 32;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kSelectWarps;
  for (int64_t row = static_cast<int64_t>(blockIdx.x) * kSelectWarps + threadIdx.x / 32;
       row < a.rows; row += step) {
    const InT* xr = static_cast<const InT*>(a.x) + row * a.x_stride;
    KeyRange range = laneKeyRange(xr, a.n, lane);
    for (int offset = 16; offset > 0; offset /= 2) {
      range.high = max(range.high, __shfl_xor_sync(0xffffffffu, range.high, offset));
      range.low = min(range.low, __shfl_xor_sync(0xffffffffu, range.low, offset));
    }
    const bool nan = range.high > orderedKey(bitsFloat(0x7f800000u)) ||
                     range.low < orderedKey(bitsFloat(0xff800000u));
    const float value = nan ? rowmath::canonicalNaN() : keyValue(kMax ? range.high : range.low);
    if (lane == 0) rowmath::storeAt(a.out, a.out_dtype, row, value);
  }
}

// ---- plan
// ---------------------------------------------------------------------------------------- Max and
// min stream when every row allows 16-byte loads and there are at least kSelectRowsPerSm rows an SM
// of rows longer than the resident kernel's warp mode serves (a warp per row reads a short row with
// few loads in flight; warp mode packs such rows several to a warp). Fewer rows leave warps a row
// each, read with a few loads in flight at a time, where the resident kernel's block per row has
// the whole row in flight at once.
constexpr int kSelectRowsPerSm = 8;
constexpr int64_t kSelectMinCols = 8 * kReduceChunk + 1;

template <typename InT>
auto selectKernelFor(int kind) {
  return kind == kRedMax ? streamSelectKernel<InT, true> : streamSelectKernel<InT, false>;
}

// Blocks of streamSelectKernel an SM holds at once (the grid is that many an SM, each warp looping
// over rows): asked of the driver once per kernel and device.
template <typename InT>
Status selectBlocksPerSm(int kind, int device, int* blocks) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, int> known;  // (kind, device) -> blocks
  std::lock_guard<std::mutex> lock(mutex);
  auto it = known.find({kind, device});
  if (it == known.end()) {
    int count = 0;
    REE_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, selectKernelFor<InT>(kind),
                                                                 kSelectWarps * 32, 0));
    it = known.emplace(std::make_pair(kind, device), count < 1 ? 1 : count).first;
  }
  *blocks = it->second;
  return Status::kSuccess;
}

// Max or min of many 16-byte-loadable rows in streamSelectKernel; *done = false: the caller
// launches another kernel.
Status launchSelectStream(int kind, RowsIn x, void* out, DType out_dtype, int64_t rows,
                          int64_t cols, cudaStream_t stream, bool* done) {
  *done = false;
  if ((kind != kRedMax && kind != kRedMin) || cols < kSelectMinCols) return Status::kSuccess;
  int device = 0, sms = 0;
  REE_CUDA_CHECK(cudaGetDevice(&device));
  REE_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (rows < static_cast<int64_t>(kSelectRowsPerSm) * sms) return Status::kSuccess;
  return dispatchStorageType(x.dtype, "rowops", [&](auto in_tag) -> Status {
    using InT = decltype(in_tag);
    if (!vecLoadsOk<InT>(x.data, x.row_stride, rows, cols)) return Status::kSuccess;
    int blocks_per_sm = 0;
    REE_RETURN_IF_ERROR(selectBlocksPerSm<InT>(kind, device, &blocks_per_sm));
    const int64_t blocks = (rows + kSelectWarps - 1) / kSelectWarps;
    const int64_t grid = std::min<int64_t>(blocks, static_cast<int64_t>(blocks_per_sm) * sms);
    const ReduceArgs args = reduceArgsOf(x, out, out_dtype, rows, cols);
    launchChained(selectKernelFor<InT>(kind), static_cast<unsigned>(grid), kSelectWarps * 32, 0,
                  stream, args);
    REE_CUDA_CHECK_LAUNCH();
    *done = true;
    return Status::kSuccess;
  });
}
