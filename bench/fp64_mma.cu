// bench_fp64_mma: what the chunked delta rule's products cost on this GPU (gpu/src/cuda/delta_chunked.cu).
//
//   bench_fp64_mma [--out FILE]
//
// The chunked kernels multiply fp32 tiles exactly: each operand converted to double (F2F), the
// products summed on the FP64 tensor cores. This measures, per SM and clock, the rate of each
// FP64 mma shape (sm_80's m8n8k4, two per 16-row tile; sm_90's m16n8k4, m16n8k8, m16n8k16) with
// 4, 8 and 16 warps an SM, the latency of one dependent chain (one warp), and the rate of the
// fp32 -> fp64 conversion, alone and interleaved with the mma as `product` issues them. On an H100
// (2026-11-26) m8n8k4 ran at half the rate of the others (~33 against 54-64 TFLOPS), which is why
// delta_chunked.cu issues m16n8k4 on sm_90; a conversion runs at 16 lanes per SM and clock, and
// conversions and mma issued together overlap only in part (docs/PERFORMANCE.md).
// Without a GPU it says so and exits 0.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <type_traits>
#include <vector>

namespace {

enum Shape { m8n8k4_twice, m16n8k4, m16n8k8, m16n8k16 };
constexpr const char* shape_names[] = {"2 x m8n8k4", "m16n8k4", "m16n8k8", "m16n8k16"};
constexpr int shape_k[] = {4, 4, 8, 16};  // every shape is a 16 x 8 x k tile

// c += a b on one 16 x 8 x k tile (operands as registers; their values do not matter here).
template <Shape S>
__device__ __forceinline__ void tile(double (&c)[4], const double (&a)[8], const double (&b)[4]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if constexpr (S == m8n8k4_twice) {
        asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                     : "+d"(c[0]), "+d"(c[1]) : "d"(a[0]), "d"(b[0]));
        asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                     : "+d"(c[2]), "+d"(c[3]) : "d"(a[1]), "d"(b[0]));
    } else if constexpr (S == m16n8k4) {
        asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5}, {%6}, {%0,%1,%2,%3};"
                     : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3]) : "d"(a[0]), "d"(a[1]), "d"(b[0]));
    } else if constexpr (S == m16n8k8) {
        asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                     "{%0,%1,%2,%3};"
                     : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                     : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7,%8,%9,%10,%11}, {%12,%13,%14,%15}, {%0,%1,%2,%3};"
                     : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                     : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                       "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
    }
#else
    __trap();  // main() runs these only on sm_90 or later
#endif
}

// CHAINS independent accumulators a warp, `iters` tiles each; warp 0 of block 0 reports its cycles.
template <Shape S, int CHAINS>
__global__ void tiles_kernel(double* out, int iters, long long* cycles) {
    double a[8], b[4], c[CHAINS][4];
    for (int i = 0; i < 8; ++i) a[i] = threadIdx.x * 1e-3 + i;
    for (int i = 0; i < 4; ++i) b[i] = threadIdx.x * 2e-3 + i;
    for (int j = 0; j < CHAINS; ++j)
        for (int i = 0; i < 4; ++i) c[j][i] = 0;
    const long long t0 = clock64();
    for (int it = 0; it < iters; ++it)
#pragma unroll
        for (int j = 0; j < CHAINS; ++j) tile<S>(c[j], a, b);
    const long long t1 = clock64();
    double sum = 0;
    for (int j = 0; j < CHAINS; ++j)
        for (int i = 0; i < 4; ++i) sum += c[j][i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;  // keeps the products
    if (threadIdx.x == 0 && blockIdx.x == 0) *cycles = t1 - t0;
}

// fp32 -> fp64 conversions, 8 independent a thread, each result's high word fed back by an integer
// operation (no FP64 arithmetic, so the conversion is the only FP64-pipe instruction).
__global__ void convert_kernel(const float* in, float* out, int iters) {
    float x[8];
    for (int i = 0; i < 8; ++i) x[i] = in[(threadIdx.x + i) % 64];
    for (int it = 0; it < iters; ++it)
#pragma unroll
        for (int i = 0; i < 8; ++i) x[i] = __int_as_float(__float_as_int(x[i]) ^ (__double2hiint(double(x[i])) & 1));
    float sum = 0;
    for (int i = 0; i < 8; ++i) sum += x[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// As `product` issues them for two 8-column tiles: per iteration two m16n8k4 (MMA), four conversions
// (CONVERT), or both (MMA and CONVERT).
constexpr int MMA = 1, CONVERT = 2;
template <int WHAT>
__global__ void mixed_kernel(const float* in, double* out, int iters) {
    double c0[4] = {}, c1[4] = {};
    const double a[8] = {double(threadIdx.x), 2}, b[4] = {3};
    float x[4];
    for (int i = 0; i < 4; ++i) x[i] = in[(threadIdx.x + i) % 64];
    for (int it = 0; it < iters; ++it) {
        if (WHAT & MMA) {
            tile<m16n8k4>(c0, a, b);
            tile<m16n8k4>(c1, a, b);
        }
        if (WHAT & CONVERT)
#pragma unroll
            for (int i = 0; i < 4; ++i) x[i] = __int_as_float(__float_as_int(x[i]) ^ (__double2hiint(double(x[i])) & 1));
    }
    double sum = 0;
    for (int i = 0; i < 4; ++i) sum += c0[i] + c1[i] + x[i];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "bench_fp64_mma: %s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

struct Row {
    std::string what;
    int warps_per_sm;        // 1 for the latency rows (one warp, one chain)
    double cycles_per_tile;  // warp 0's cycles per tile (0 where not measured)
    double rate;             // TFLOPS; lanes per SM and clock for the conversion; ns per iteration for the mixed rows
};

struct Device {
    int sms = 0, clock_khz = 0;
    double* out = nullptr;
    float* fout = nullptr;
    long long* cycles = nullptr;
};

// Milliseconds of the second of two launches (the first warms up).
template <class Launch>
float timed(Launch launch) {
    cudaEvent_t e0, e1;
    check(cudaEventCreate(&e0), "cudaEventCreate");
    check(cudaEventCreate(&e1), "cudaEventCreate");
    float ms = 0;
    for (int rep = 0; rep < 2; ++rep) {
        check(cudaEventRecord(e0), "cudaEventRecord");
        launch();
        check(cudaEventRecord(e1), "cudaEventRecord");
        check(cudaEventSynchronize(e1), "kernel");
        check(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    }
    cudaEventDestroy(e0);
    cudaEventDestroy(e1);
    return ms;
}

template <Shape S, int CHAINS>
Row measure_tiles(const Device& dev, int blocks, int warps) {
    const int iters = 4096 * 4 / shape_k[S];  // the same products for every shape
    const float ms = timed([&] { tiles_kernel<S, CHAINS><<<blocks, 32 * warps>>>(dev.out, iters, dev.cycles); });
    check(cudaGetLastError(), "tiles_kernel");
    long long cycles = 0;
    check(cudaMemcpy(&cycles, dev.cycles, sizeof cycles, cudaMemcpyDeviceToHost), "cudaMemcpy");
    const double flops = 2.0 * 16 * 8 * shape_k[S] * double(iters) * CHAINS * blocks * warps;
    return {shape_names[S], warps, double(cycles) / iters / CHAINS, flops / (ms * 1e-3) / 1e12};
}

template <Shape S>
void measure_shape(const Device& dev, std::vector<Row>& rows) {
    rows.push_back(measure_tiles<S, 1>(dev, 1, 1));  // latency: one warp, one chain
    rows.back().what += " (one chain)";
    for (int warps : {4, 8, 16}) rows.push_back(measure_tiles<S, 2>(dev, dev.sms, warps));
}

}  // namespace

int main(int argc, char** argv) {
    std::string out_path;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--out" && i + 1 < argc) out_path = argv[++i];
        else {
            std::fprintf(stderr, "usage: bench_fp64_mma [--out FILE]\n");
            return 2;
        }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        std::printf("bench_fp64_mma: no CUDA device; nothing to measure\n");
        return 0;
    }
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
    if (prop.major < 9) {
        std::printf("bench_fp64_mma: %s is sm_%d%d; the shapes measured here need sm_90\n", prop.name, prop.major,
                    prop.minor);
        return 0;
    }
    // code for sm_90 itself: a build of compute_80 PTX, compiled for the GPU at load time, reports
    // binaryVersion 90 but took the kernels' sm_80 branch (__trap)
    cudaFuncAttributes built{};
    check(cudaFuncGetAttributes(&built, tiles_kernel<m16n8k4, 1>), "cudaFuncGetAttributes");
    if (built.binaryVersion < 90 || built.ptxVersion < 90) {
        std::printf("bench_fp64_mma: built for sm_%d (PTX %d); the shapes measured here need code for sm_90\n",
                    built.binaryVersion, built.ptxVersion);
        return 0;
    }
    // the output file first: an unwritable path is an error before minutes of measuring
    std::ofstream json_file;
    if (!out_path.empty()) {
        json_file.open(out_path);
        if (!json_file) {
            std::fprintf(stderr, "bench_fp64_mma: %s: cannot write\n", out_path.c_str());
            return 2;
        }
    }
    Device dev;
    dev.sms = prop.multiProcessorCount;
    check(cudaDeviceGetAttribute(&dev.clock_khz, cudaDevAttrClockRate, 0), "cudaDeviceGetAttribute");
    check(cudaMalloc(&dev.out, sizeof(double) * dev.sms * 32 * 16), "cudaMalloc");
    check(cudaMalloc(&dev.fout, sizeof(float) * dev.sms * 4 * 512), "cudaMalloc");
    check(cudaMalloc(&dev.cycles, sizeof(long long)), "cudaMalloc");
    float* in = nullptr;
    check(cudaMalloc(&in, 64 * sizeof(float)), "cudaMalloc");
    check(cudaMemset(in, 0, 64 * sizeof(float)), "cudaMemset");

    std::vector<Row> rows;
    measure_shape<m8n8k4_twice>(dev, rows);
    measure_shape<m16n8k4>(dev, rows);
    measure_shape<m16n8k8>(dev, rows);
    measure_shape<m16n8k16>(dev, rows);
    {
        const int blocks = dev.sms * 4, threads = 512, iters = 4096;  // 64 warps an SM
        const float ms = timed([&] { convert_kernel<<<blocks, threads>>>(in, dev.fout, iters); });
        check(cudaGetLastError(), "convert_kernel");
        const double lanes = double(blocks) * threads * iters * 8;
        rows.push_back({"fp32 -> fp64 (F2F)", blocks * threads / 32 / dev.sms, 0,
                        lanes / (ms * 1e-3) / dev.sms / (dev.clock_khz * 1e3)});
    }
    {
        const int blocks = dev.sms * 4, threads = 128, iters = 20000;  // 16 warps an SM
        const char* names[] = {"", "2 m16n8k4", "4 F2F", "2 m16n8k4 + 4 F2F"};
        auto mixed = [&](auto what) {
            constexpr int WHAT = decltype(what)::value;
            const float ms = timed([&] { mixed_kernel<WHAT><<<blocks, threads>>>(in, dev.out, iters); });
            check(cudaGetLastError(), "mixed_kernel");
            rows.push_back({names[WHAT], blocks * threads / 32 / dev.sms, 0, ms * 1e6 / iters});
        };
        mixed(std::integral_constant<int, MMA>{});
        mixed(std::integral_constant<int, CONVERT>{});
        mixed(std::integral_constant<int, MMA | CONVERT>{});
    }

    std::printf("%s, %d SMs, %d MHz\n", prop.name, dev.sms, dev.clock_khz / 1000);
    // rate: TFLOPS for the tiles, lanes per SM and clock for F2F, ns per iteration per warp for the
    // mixed rows (their overlap: the last against the sum of the two before it)
    std::printf("%-28s %10s %14s %12s\n", "16 x 8 x k tile", "warps / SM", "cycles / tile", "rate");
    for (const Row& r : rows)
        std::printf("%-28s %10d %14.1f %12.1f\n", r.what.c_str(), r.warps_per_sm, r.cycles_per_tile, r.rate);
    if (!out_path.empty()) {
        std::ofstream& f = json_file;
        f << "{\"device\": \"" << prop.name << "\", \"sms\": " << dev.sms << ", \"clock_mhz\": " << dev.clock_khz / 1000
          << ", \"rows\": [";
        for (std::size_t i = 0; i < rows.size(); ++i)
            f << (i ? ", " : "") << "{\"what\": \"" << rows[i].what << "\", \"warps_per_sm\": " << rows[i].warps_per_sm
              << ", \"cycles_per_tile\": " << rows[i].cycles_per_tile << ", \"rate\": " << rows[i].rate << "}";
        f << "]}\n";
        f.close();
        if (!f) {
            std::fprintf(stderr, "bench_fp64_mma: %s: cannot write\n", out_path.c_str());
            return 2;
        }
    }
    cudaFree(in);
    cudaFree(dev.out);
    cudaFree(dev.fout);
    cudaFree(dev.cycles);
    return 0;
}
