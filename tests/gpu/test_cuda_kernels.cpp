// Kernels of the CUDA backend alone against an fp64 computation on the CPU from the same inputs,
// at sizes the whole-model comparisons (test_cuda_backend.cpp) cannot reach: there the bf16
// forward's own rounding exceeds the loose bounds past a few thousand rows, whatever the kernel.
// Built where the backend is (STATETRACK_TEST_KERNELS: the launchers' header, kernels.cuh, is the
// backend's own); without a GPU these tests skip.
#include <gtest/gtest.h>

#if STATETRACK_TEST_KERNELS
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "kernels.cuh"
#include "statetrack/gpu/cuda_backend.hpp"
#include "statetrack/gpu/random.hpp"
#include "skip_without_gpu.hpp"

namespace statetrack::gpu::cuda {
namespace {

// A device array that frees itself.
template <class T>
struct DeviceArray {
    T* data = nullptr;
    std::size_t size = 0;
    explicit DeviceArray(std::size_t n) : size(n) { STATETRACK_CUDA(cudaMalloc(&data, n * sizeof(T))); }
    ~DeviceArray() { cudaFree(data); }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;
};

std::vector<bf16> random_bf16(std::size_t n, double scale, Rng& rng) {
    std::vector<bf16> out(n);
    for (auto& x : out) x = __float2bfloat16(float(scale * normal(rng)));
    return out;
}
template <class T>
void upload(DeviceArray<T>& dst, const std::vector<T>& src) {
    STATETRACK_CUDA(cudaMemcpy(dst.data, src.data(), src.size() * sizeof(T), cudaMemcpyHostToDevice));
}
template <class T>
std::vector<T> download(const DeviceArray<T>& src) {
    std::vector<T> out(src.size);
    STATETRACK_CUDA(cudaMemcpy(out.data(), src.data, src.size * sizeof(T), cudaMemcpyDeviceToHost));
    return out;
}
// Outputs are poisoned (every byte 0xff: a NaN in bf16 and fp32) before a kernel runs, and have
// guard_rows rows more than the kernel is given, which must stay poisoned: a write past the last row
// would otherwise land in cudaMalloc's slack unseen.
constexpr std::size_t guard_rows = 16;
template <class T>
void poison(DeviceArray<T>& a) {
    STATETRACK_CUDA(cudaMemset(a.data, 0xff, a.size * sizeof(T)));
}
template <class T>
std::size_t touched_past(const std::vector<T>& got, std::size_t used) {
    std::size_t touched = 0;
    for (std::size_t i = used; i < got.size(); ++i) {
        unsigned char bytes[sizeof(T)];
        std::memcpy(bytes, &got[i], sizeof(T));
        for (unsigned char b : bytes) touched += b != 0xff;
    }
    return touched;
}
double value(bf16 x) { return double(__bfloat162float(x)); }

// The error of K fp32 sums of products, relative to the sum of their magnitudes: K 2^-24 at worst,
// and not below 2^-18 (the first H100 runs came to 0.98 of that with d 128); a term left out or
// counted twice is ~1/K of the magnitude, far above it.
double fp32_sums_bound(std::size_t K) { return std::max(0x1p-18, double(K) * 0x1p-24); }

// The largest error in units of each entry's bound, how many entries exceed it (NaN included), and
// the first of them.
struct Worst {
    std::size_t bad = 0, first_bad = 0;
    double worst = 0;
    void note(double err, std::size_t at = 0) {
        if (!(err <= 1.0) && bad++ == 0) first_bad = at;
        if (err > worst || std::isnan(err)) worst = err;
    }
};
// r + a w_row over k < K in fp64, and the sum of its terms' magnitudes (a residual product's entry).
struct ProductSum {
    double value, magnitude;
};
ProductSum residual_sum(double r, const bf16* a, const bf16* w_row, std::size_t K) {
    ProductSum sum{r, std::abs(r)};
    for (std::size_t j = 0; j < K; ++j) {
        const double term = value(a[j]) * value(w_row[j]);
        sum.value += term, sum.magnitude += std::abs(term);
    }
    return sum;
}

struct MlpCase {
    std::size_t rows, d, m;
};

// What mlp_down_backward computes, in fp64 from the same bf16 values: dh = dy w_down, then
// SwiGLU's backward at gu (gate a, up u: d(silu(a) u) = (dh u silu'(a), dh silu(a))). bound[i]: the
// error the kernel may make at entry i: its bf16 output's rounding (at most 2^-8 relative: 8
// significant bits), 2^-14 relative more for its fast sigmoid, and its fp32 sums over d
// (fp32_sums_bound of the sum of |terms|, where dh cancels to near 0).
void mlp_down_reference(const MlpCase& c, const std::vector<bf16>& dy, const std::vector<bf16>& w,
                        const std::vector<bf16>& gu, std::vector<double>& want, std::vector<double>& bound) {
    want.assign(c.rows * 2 * c.m, 0.0), bound.assign(c.rows * 2 * c.m, 0.0);
    const double sums = fp32_sums_bound(c.d);
    for (std::size_t r = 0; r < c.rows; ++r)
        for (std::size_t j = 0; j < c.m; ++j) {
            double dh = 0, magnitude = 0;
            for (std::size_t k = 0; k < c.d; ++k) {
                const double term = value(dy[r * c.d + k]) * value(w[k * c.m + j]);
                dh += term, magnitude += std::abs(term);
            }
            const double a = value(gu[r * 2 * c.m + j]), u = value(gu[r * 2 * c.m + c.m + j]);
            const double sg = 1.0 / (1.0 + std::exp(-a)), silu_grad = sg * (1.0 + a * (1.0 - sg));
            const std::size_t gate = r * 2 * c.m + j, up = gate + c.m;
            want[gate] = dh * u * silu_grad, want[up] = dh * a * sg;
            bound[gate] = (0x1p-8 + 0x1p-14) * std::abs(want[gate]) + sums * magnitude * std::abs(u * silu_grad) + 1e-30;
            bound[up] = (0x1p-8 + 0x1p-14) * std::abs(want[up]) + sums * magnitude * std::abs(a * sg) + 1e-30;
        }
}

bool device_runs_bf16_mma() {
    int device = 0;
    cudaDeviceProp props{};
    STATETRACK_CUDA(cudaGetDevice(&device));
    STATETRACK_CUDA(cudaGetDeviceProperties(&props, device));
    return props.major >= 8;
}
// Hopper (compute capability 9.0): where the MLP's warpgroup kernels (sm_90a) must run.
bool device_is_hopper() {
    int device = 0;
    cudaDeviceProp props{};
    STATETRACK_CUDA(cudaGetDevice(&device));
    STATETRACK_CUDA(cudaGetDeviceProperties(&props, device));
    return props.major == 9 && props.minor == 0;
}

// Many tiles a block (40,001 rows: 2,501 tiles of 16 over at most two blocks an SM, so every block
// takes both of its buffers through several prefetches, and the last tile is one row), a width whose
// last 32-column block is part zeros (m 72), a single short tile, and the paper's shape again after
// smaller ones (the launcher keeps the kernel's shared-memory limit at the largest shape it was
// given). The output is poisoned (NaN) first, so a tile the kernel skips fails too.
TEST(CudaKernels, MlpDownBackwardMatchesFp64OverManyTiles) {
    SKIP_WITHOUT_GPU();
    const bool hopper = device_is_hopper();
    for (const MlpCase c : {MlpCase{1000, 48, 72}, MlpCase{40001, 128, 256}, MlpCase{7, 16, 8}, MlpCase{777, 144, 136},
                            MlpCase{333, 96, 264}, MlpCase{3000, 128, 256}, MlpCase{555, 64, 128},
                            MlpCase{2001, 128, 768}, MlpCase{301, 64, 512}}) {
        Rng rng = make_rng(c.rows + c.d + c.m, 11);
        const auto dy = random_bf16(c.rows * c.d, 1.0, rng), w = random_bf16(c.d * c.m, 0.1, rng),
                   gu = random_bf16(c.rows * 2 * c.m, 2.0, rng);
        DeviceArray<bf16> ddy(dy.size()), dw(w.size()), dgu_in(gu.size()), dgu(gu.size() + guard_rows * 2 * c.m);
        upload(ddy, dy), upload(dw, w), upload(dgu_in, gu);
        std::vector<double> want, bound;
        mlp_down_reference(c, dy, w, gu, want, bound);
        // the warpgroup kernel where the device has it and the shape fits it (d 64 or 128, m a multiple
        // of 128: 768 at d 128 its largest), then mma.sync's (for 768 and 512 its two blocks an SM do not
        // fit: it says no)
        for (const bool warpgroups : {true, false}) {
            SCOPED_TRACE(warpgroups ? "the warpgroup kernel where it runs" : "mma.sync's kernel");
            poison(dgu);
            const bool ran =
                mlp_down_backward(ddy.data, dw.data, dgu_in.data, dgu.data, c.rows, c.d, c.m, nullptr, warpgroups);
            STATETRACK_CUDA(cudaDeviceSynchronize());
            if (!device_runs_bf16_mma()) {
                EXPECT_FALSE(ran) << "the kernel needs sm_80's bf16 mma";
                break;
            }
            // the two widest shapes fit only the warpgroup kernel (mma.sync's needs two blocks an SM)
            const bool warpgroup_shape = hopper && (c.d == 64 || c.d == 128) && c.m % 128 == 0;
            if (!ran && c.m >= 512 && !(warpgroups && warpgroup_shape)) continue;
            ASSERT_TRUE(ran) << "rows " << c.rows << " d " << c.d << " m " << c.m;
            const auto got = download(dgu);
            EXPECT_EQ(touched_past(got, want.size()), 0u) << "rows " << c.rows << ": written past the last row";
            Worst errors;
            for (std::size_t i = 0; i < want.size(); ++i) errors.note(std::abs(value(got[i]) - want[i]) / bound[i], i);
            const std::size_t first = errors.first_bad;
            EXPECT_EQ(errors.bad, 0u) << "rows " << c.rows << " d " << c.d << " m " << c.m << ": first at row "
                                      << first / (2 * c.m) << " column " << first % (2 * c.m) << ", got "
                                      << value(got[first]) << " want " << want[first];
            std::printf("mlp_down_backward (%s) rows %zu d %zu m %zu: worst error %.3f of its bound\n",
                        warpgroups ? "warpgroups where they run" : "mma.sync", c.rows, c.d, c.m, errors.worst);
        }
    }
}

// The forward kernel over the same shapes: h against SwiGLU in fp64 (its bf16 rounding, at most 2^-8
// relative, and 2^-14 more), y against r + h w_down^T in fp64 from the kernel's own h (its fp32 sums
// over m, fp32_sums_bound). Without h_out the same y, and h untouched. Outputs poisoned first, with
// guard rows after them.
TEST(CudaKernels, MlpDownForwardMatchesFp64OverManyTiles) {
    SKIP_WITHOUT_GPU();
    for (const MlpCase c : {MlpCase{1000, 48, 72}, MlpCase{40001, 128, 256}, MlpCase{7, 16, 8}, MlpCase{777, 144, 136},
                            MlpCase{3000, 128, 256}}) {
        Rng rng = make_rng(c.rows + c.d + c.m, 12);
        const auto gu = random_bf16(c.rows * 2 * c.m, 2.0, rng), w = random_bf16(c.d * c.m, 0.1, rng);
        std::vector<float> r(c.rows * c.d);
        for (float& x : r) x = float(normal(rng));
        DeviceArray<bf16> dgu(gu.size()), dw(w.size()), dh((c.rows + guard_rows) * c.m);
        DeviceArray<float> dr(r.size()), dy((c.rows + guard_rows) * c.d), dy2(r.size());
        upload(dgu, gu), upload(dw, w), upload(dr, r);
        poison(dh), poison(dy), poison(dy2);
        const bool ran = mlp_down_forward(dgu.data, dw.data, dr.data, dh.data, dy.data, c.rows, c.m, c.d, 0, nullptr);
        STATETRACK_CUDA(cudaDeviceSynchronize());
        if (!device_runs_bf16_mma()) {
            EXPECT_FALSE(ran) << "the kernel needs sm_80's bf16 mma";
            continue;
        }
        ASSERT_TRUE(ran) << "rows " << c.rows << " d " << c.d << " m " << c.m;
        const auto h = download(dh);
        auto y = download(dy);
        EXPECT_EQ(touched_past(h, c.rows * c.m) + touched_past(y, c.rows * c.d), 0u)
            << "rows " << c.rows << ": written past the last row";
        y.resize(c.rows * c.d);
        Worst h_errors, y_errors;
        for (std::size_t row = 0; row < c.rows; ++row) {
            for (std::size_t j = 0; j < c.m; ++j) {
                const double a = value(gu[row * 2 * c.m + j]), u = value(gu[row * 2 * c.m + c.m + j]);
                const double want = a / (1.0 + std::exp(-a)) * u, got = value(h[row * c.m + j]);
                h_errors.note(std::abs(got - want) / ((0x1p-8 + 0x1p-14) * std::abs(want) + 1e-30));
            }
            for (std::size_t o = 0; o < c.d; ++o) {
                const ProductSum want = residual_sum(r[row * c.d + o], &h[row * c.m], &w[o * c.m], c.m);
                y_errors.note(std::abs(double(y[row * c.d + o]) - want.value) /
                              (fp32_sums_bound(c.m) * want.magnitude + 1e-30));
            }
        }
        EXPECT_EQ(h_errors.bad, 0u) << "rows " << c.rows << " d " << c.d << " m " << c.m;
        EXPECT_EQ(y_errors.bad, 0u) << "rows " << c.rows << " d " << c.d << " m " << c.m;
        std::printf("mlp_down_forward rows %zu d %zu m %zu: worst error h %.3f, y %.3f of its bound\n", c.rows, c.d, c.m,
                    h_errors.worst, y_errors.worst);

        // inference: no h written, the same y to the bit
        STATETRACK_CUDA(cudaMemset(dh.data, 0, dh.size * sizeof(bf16)));
        ASSERT_TRUE(mlp_down_forward(dgu.data, dw.data, dr.data, nullptr, dy2.data, c.rows, c.m, c.d, 0, nullptr));
        STATETRACK_CUDA(cudaDeviceSynchronize());
        EXPECT_EQ(std::memcmp(download(dy2).data(), y.data(), y.size() * sizeof(float)), 0);
        for (const bf16 x : download(dh)) ASSERT_EQ(value(x), 0.0);
    }
}

// The whole MLP forward (mlp_forward), over many tiles of 16 rows (the last one part empty; warps
// through several tiles) and every d it takes (64, 128) with m a multiple of 64 (the paper's d 128,
// m 256 among them): gu against xn [Wg; Wu]^T in fp64 (its bf16 rounding, at
// most 2^-8 relative, and fp32_sums_bound of the sum of |terms| over d), h against SwiGLU in fp64 of
// the kernel's own gu (2^-8 and 2^-14 more), y against r + h w_down^T in fp64 of the kernel's own h
// (fp32_sums_bound over m). Outputs poisoned first, with guard rows after them. Without gu and h (as
// at inference) the same y to the bit, and gu and h untouched.
TEST(CudaKernels, MlpForwardMatchesFp64OverManyTiles) {
    SKIP_WITHOUT_GPU();
    if (device_is_hopper()) {
        EXPECT_TRUE(mlp_forward_has_warpgroups(128, 256)) << "sm_90a's kernel not built";
    }
    for (const MlpCase c : {MlpCase{1000, 64, 128}, MlpCase{7, 64, 64}, MlpCase{777, 64, 192}, MlpCase{129, 64, 64},
                            MlpCase{40001, 128, 256}, MlpCase{3000, 128, 128}, MlpCase{1001, 64, 512}}) {
        SCOPED_TRACE("rows " + std::to_string(c.rows) + " d " + std::to_string(c.d) + " m " + std::to_string(c.m));
        Rng rng = make_rng(c.rows + c.d + c.m, 13);
        const auto xn = random_bf16(c.rows * c.d, 1.0, rng), w_gu = random_bf16(2 * c.m * c.d, 0.15, rng),
                   w_down = random_bf16(c.d * c.m, 0.1, rng);
        std::vector<float> r(c.rows * c.d);
        for (float& x : r) x = float(normal(rng));
        DeviceArray<bf16> dxn(xn.size()), dwgu(w_gu.size()), dwdown(w_down.size());
        DeviceArray<bf16> dgu((c.rows + guard_rows) * 2 * c.m), dh((c.rows + guard_rows) * c.m);
        DeviceArray<float> dr(r.size()), dy((c.rows + guard_rows) * c.d), dy2(r.size());
        upload(dxn, xn), upload(dwgu, w_gu), upload(dwdown, w_down), upload(dr, r);
        for (const bool warpgroups : {true, false}) {
            SCOPED_TRACE(warpgroups ? "the warpgroup kernel where the device has it" : "mma.sync's kernel");
            poison(dgu), poison(dh), poison(dy), poison(dy2);
            const bool ran = mlp_forward(dxn.data, dwgu.data, dwdown.data, dr.data, dgu.data, dh.data, dy.data, c.rows, c.d,
                                         c.m, 0, nullptr, warpgroups);
            STATETRACK_CUDA(cudaDeviceSynchronize());
            if (!device_runs_bf16_mma()) {
                EXPECT_FALSE(ran) << "the kernel needs sm_80's bf16 mma";
                break;
            }
            ASSERT_TRUE(ran);
            const auto gu = download(dgu), h = download(dh);
            auto y = download(dy);
            EXPECT_EQ(touched_past(gu, c.rows * 2 * c.m) + touched_past(h, c.rows * c.m) + touched_past(y, c.rows * c.d), 0u)
                << "written past the last row";
            y.resize(c.rows * c.d);
            const double sums_d = fp32_sums_bound(c.d), sums_m = fp32_sums_bound(c.m);
            Worst gu_errors, h_errors, y_errors;
            for (std::size_t row = 0; row < c.rows; ++row) {
                for (std::size_t j = 0; j < 2 * c.m; ++j) {
                    const ProductSum want = residual_sum(0.0, &xn[row * c.d], &w_gu[j * c.d], c.d);
                    gu_errors.note(std::abs(value(gu[row * 2 * c.m + j]) - want.value) /
                                   (0x1p-8 * std::abs(want.value) + sums_d * want.magnitude + 1e-30));
                }
                for (std::size_t j = 0; j < c.m; ++j) {
                    const double a = value(gu[row * 2 * c.m + j]), u = value(gu[row * 2 * c.m + c.m + j]);
                    const double want = a / (1.0 + std::exp(-a)) * u;
                    h_errors.note(std::abs(value(h[row * c.m + j]) - want) / ((0x1p-8 + 0x1p-14) * std::abs(want) + 1e-30));
                }
                for (std::size_t o = 0; o < c.d; ++o) {
                    const ProductSum want = residual_sum(r[row * c.d + o], &h[row * c.m], &w_down[o * c.m], c.m);
                    y_errors.note(std::abs(double(y[row * c.d + o]) - want.value) / (sums_m * want.magnitude + 1e-30));
                }
            }
            EXPECT_EQ(gu_errors.bad, 0u);
            EXPECT_EQ(h_errors.bad, 0u);
            EXPECT_EQ(y_errors.bad, 0u);
            std::printf("mlp_forward (%s) rows %zu d %zu m %zu: worst error gu %.3f, h %.3f, y %.3f of its bound\n",
                        warpgroups && mlp_forward_has_warpgroups(c.d, c.m) ? "wgmma" : "mma.sync", c.rows, c.d, c.m,
                        gu_errors.worst, h_errors.worst, y_errors.worst);

            // inference: neither gu nor h written, the same y to the bit
            STATETRACK_CUDA(cudaMemset(dgu.data, 0, dgu.size * sizeof(bf16)));
            STATETRACK_CUDA(cudaMemset(dh.data, 0, dh.size * sizeof(bf16)));
            ASSERT_TRUE(mlp_forward(dxn.data, dwgu.data, dwdown.data, dr.data, nullptr, nullptr, dy2.data, c.rows, c.d, c.m,
                                    0, nullptr, warpgroups));
            STATETRACK_CUDA(cudaDeviceSynchronize());
            EXPECT_EQ(std::memcmp(download(dy2).data(), y.data(), y.size() * sizeof(float)), 0);
            for (const bf16 x : download(dgu)) ASSERT_EQ(value(x), 0.0);
            for (const bf16 x : download(dh)) ASSERT_EQ(value(x), 0.0);
        }
    }
}

// The MLP's backward with gate and up rebuilt from xn (mlp_down_backward_from_xn, Hopper only): its dgu
// against mlp_down_reference at the gu that mlp_forward's warpgroup kernel writes for the same xn
// (which the kernel must rebuild to the bit), and, where m is a multiple of 128, the very bits of
// mlp_down_backward's warpgroup kernel reading that gu. Over many tiles of 64 rows (the last one part
// empty) and both d it takes; outputs poisoned first, with guard rows after them. Elsewhere it
// declines.
TEST(CudaKernels, MlpDownBackwardFromXnRebuildsTheForwardsGateUp) {
    SKIP_WITHOUT_GPU();
    if (!device_is_hopper()) {
        EXPECT_FALSE(mlp_recomputes_gu(128, 256));
        return;
    }
    EXPECT_TRUE(mlp_recomputes_gu(128, 256)) << "sm_90a's kernel not built";
    EXPECT_FALSE(mlp_recomputes_gu(128, 512)) << "both weights past shared memory";
    EXPECT_FALSE(mlp_recomputes_gu(128, 96)) << "a width not a multiple of 64";
    EXPECT_FALSE(mlp_recomputes_gu(96, 256)) << "d 96";
    for (const MlpCase c : {MlpCase{40001, 128, 256}, MlpCase{777, 64, 192}, MlpCase{7, 64, 64},
                            MlpCase{3000, 128, 128}, MlpCase{1001, 64, 512}, MlpCase{129, 128, 64}}) {
        SCOPED_TRACE("rows " + std::to_string(c.rows) + " d " + std::to_string(c.d) + " m " + std::to_string(c.m));
        ASSERT_TRUE(mlp_recomputes_gu(c.d, c.m));
        Rng rng = make_rng(c.rows + c.d + c.m, 14);
        const auto xn = random_bf16(c.rows * c.d, 1.0, rng), w_gu = random_bf16(2 * c.m * c.d, 0.15, rng),
                   w_down = random_bf16(c.d * c.m, 0.1, rng), dy = random_bf16(c.rows * c.d, 1.0, rng);
        DeviceArray<bf16> dxn(xn.size()), dwgu(w_gu.size()), dwdown(w_down.size()), ddy(dy.size());
        DeviceArray<bf16> dgu_fwd(c.rows * 2 * c.m), dh(c.rows * c.m), dgu((c.rows + guard_rows) * 2 * c.m),
            dgu_read(c.rows * 2 * c.m);
        DeviceArray<float> dr(c.rows * c.d), dyf(c.rows * c.d);
        upload(dxn, xn), upload(dwgu, w_gu), upload(dwdown, w_down), upload(ddy, dy);
        STATETRACK_CUDA(cudaMemset(dr.data, 0, dr.size * sizeof(float)));
        ASSERT_TRUE(mlp_forward(dxn.data, dwgu.data, dwdown.data, dr.data, dgu_fwd.data, dh.data, dyf.data, c.rows, c.d,
                                c.m, 0, nullptr));
        poison(dgu);
        ASSERT_TRUE(mlp_down_backward_from_xn(ddy.data, dxn.data, dwgu.data, dwdown.data, dgu.data, c.rows, c.d, c.m,
                                              nullptr));
        STATETRACK_CUDA(cudaDeviceSynchronize());
        const auto gu = download(dgu_fwd);
        auto got = download(dgu);
        std::vector<double> want, bound;
        mlp_down_reference(c, dy, w_down, gu, want, bound);
        EXPECT_EQ(touched_past(got, want.size()), 0u) << "written past the last row";
        got.resize(want.size());
        Worst errors;
        for (std::size_t i = 0; i < want.size(); ++i) errors.note(std::abs(value(got[i]) - want[i]) / bound[i], i);
        const std::size_t first = errors.first_bad;
        EXPECT_EQ(errors.bad, 0u) << "first at row " << first / (2 * c.m) << " column " << first % (2 * c.m) << ", got "
                                  << value(got[first]) << " want " << want[first];
        if (c.m % 128 == 0) {  // mlp_down_backward's warpgroup kernel on the forward's gu: the same bits
            ASSERT_TRUE(mlp_down_backward(ddy.data, dwdown.data, dgu_fwd.data, dgu_read.data, c.rows, c.d, c.m, nullptr));
            STATETRACK_CUDA(cudaDeviceSynchronize());
            const auto read = download(dgu_read);
            EXPECT_EQ(std::memcmp(read.data(), got.data(), read.size() * sizeof(bf16)), 0)
                << "not the bits of the backward that reads the forward's gu";
        }
        std::printf("mlp_down_backward_from_xn rows %zu d %zu m %zu: worst error %.3f of its bound\n", c.rows, c.d, c.m,
                    errors.worst);
    }
}

// The product with the RMSNorm after it (the mixer's output product and the MLP's norm), over shapes
// like the forward kernel's (k, the product's depth, a multiple of 16): y against r + x w^T in fp64
// (fp32_sums_bound of the sum of |terms|), rinv against the norm of the kernel's own y in fp64 (2^-20
// relative), xn against gain y rinv (its bf16 rounding). Outputs poisoned first. Both kernels: the
// warpgroup one where it runs (Hopper, d 128, k 128: its y, whose sums go in another order, differs
// from mma.sync's in some bits, which shows it ran) and mma.sync's; on the other shapes both calls
// take mma.sync's and give the same bits. The first layer's form, r a table read by token (the
// embedding's rows): where the warpgroup kernel runs, the very bits of the same rows given as r;
// elsewhere it declines.
TEST(CudaKernels, ResidualNormForwardMatchesFp64OverManyTiles) {
    SKIP_WITHOUT_GPU();
    for (const MlpCase c : {MlpCase{1000, 48, 32}, MlpCase{40001, 128, 128}, MlpCase{7, 16, 16}, MlpCase{517, 256, 128},
                            MlpCase{3000, 128, 128}, MlpCase{65, 128, 128}}) {
        const std::size_t k = c.m;
        Rng rng = make_rng(c.rows + c.d + k, 13);
        const auto x = random_bf16(c.rows * k, 1.0, rng), w = random_bf16(c.d * k, 0.1, rng);
        std::vector<float> r(c.rows * c.d), gain(c.d);
        for (float& v : r) v = float(normal(rng));
        for (float& v : gain) v = float(1.0 + 0.2 * normal(rng));
        std::vector<float> y_warpgroups;
        for (const bool warpgroups : {true, false}) {
            SCOPED_TRACE(warpgroups ? "warpgroups where they run" : "mma.sync");
            DeviceArray<bf16> dx(x.size()), dw(w.size()), dxn((c.rows + guard_rows) * c.d);
            DeviceArray<float> dr(r.size()), dgain(gain.size()), dy((c.rows + guard_rows) * c.d),
                drinv(c.rows + guard_rows);
            upload(dx, x), upload(dw, w), upload(dr, r), upload(dgain, gain);
            poison(dxn), poison(dy), poison(drinv);
            const bool ran = residual_norm_forward(dx.data, dw.data, dr.data, dy.data, dgain.data, dxn.data, drinv.data,
                                                   c.rows, k, c.d, 0, nullptr, warpgroups);
            STATETRACK_CUDA(cudaDeviceSynchronize());
            if (!device_runs_bf16_mma()) {
                EXPECT_FALSE(ran) << "the kernel needs sm_80's bf16 mma";
                continue;
            }
            ASSERT_TRUE(ran) << "rows " << c.rows << " d " << c.d << " k " << k;
            const auto y = download(dy), rinv = download(drinv);
            const bool same_bits = y_warpgroups.size() == y.size() &&
                                   std::memcmp(y.data(), y_warpgroups.data(), c.rows * c.d * sizeof(float)) == 0;
            if (warpgroups) {
                y_warpgroups = y;
            } else if (!(device_is_hopper() && c.d == 128 && k == 128)) {
                EXPECT_TRUE(same_bits) << "rows " << c.rows << ": a shape only mma.sync's kernel takes gave other bits";
            } else if (c.rows > 64) {
                EXPECT_FALSE(same_bits) << "rows " << c.rows
                                        << ": the same bits as mma.sync's: did the warpgroup kernel run?";
            }
            const auto xn = download(dxn);
            EXPECT_EQ(touched_past(y, c.rows * c.d) + touched_past(xn, c.rows * c.d) + touched_past(rinv, c.rows), 0u)
                << "rows " << c.rows << ": written past the last row";
            Worst y_errors, r_errors, xn_errors;
            for (std::size_t row = 0; row < c.rows; ++row) {
                double squares = 0;
                for (std::size_t o = 0; o < c.d; ++o) {
                    const ProductSum want = residual_sum(r[row * c.d + o], &x[row * k], &w[o * k], k);
                    const double got = y[row * c.d + o];
                    y_errors.note(std::abs(got - want.value) / (fp32_sums_bound(k) * want.magnitude + 1e-30));
                    squares += got * got;
                }
                const double want_r = 1.0 / std::sqrt(squares / double(c.d) + 1e-6);
                r_errors.note(std::abs(rinv[row] - want_r) / (0x1p-20 * want_r));
                for (std::size_t o = 0; o < c.d; ++o) {
                    const double want = double(gain[o]) * y[row * c.d + o] * want_r;
                    xn_errors.note(std::abs(value(xn[row * c.d + o]) - want) /
                                   ((0x1p-8 + 0x1p-14) * std::abs(want) + 1e-30));
                }
            }
            EXPECT_EQ(y_errors.bad + r_errors.bad + xn_errors.bad, 0u) << "rows " << c.rows << " d " << c.d << " k " << k;
            std::printf("residual_norm_forward (%s) rows %zu d %zu k %zu: worst error y %.3f, rinv %.3f, xn %.3f of its "
                        "bound\n",
                        warpgroups ? "warpgroups where they run" : "mma.sync", c.rows, c.d, k, y_errors.worst,
                        r_errors.worst, xn_errors.worst);
        }
        // r by token: a table of 3 rows, and the rows it gives as r
        const std::size_t vocab = 3;
        std::vector<float> table(vocab * c.d), r_rows(c.rows * c.d);
        for (float& v : table) v = float(normal(rng));
        std::vector<std::int32_t> tokens(c.rows);
        for (std::size_t row = 0; row < c.rows; ++row) {
            tokens[row] = std::int32_t(uniform_below(rng, vocab));
            std::copy_n(table.begin() + std::ptrdiff_t(tokens[row] * c.d), c.d, r_rows.begin() + std::ptrdiff_t(row * c.d));
        }
        DeviceArray<bf16> dx(x.size()), dw(w.size()), dxn((c.rows + guard_rows) * c.d);
        DeviceArray<float> dr(r_rows.size()), dtable(table.size()), dgain(gain.size()), dy((c.rows + guard_rows) * c.d),
            drinv(c.rows + guard_rows);
        DeviceArray<std::int32_t> dtokens(tokens.size());
        upload(dx, x), upload(dw, w), upload(dr, r_rows), upload(dtable, table), upload(dgain, gain), upload(dtokens, tokens);
        // y, xn and rinv of one run from poisoned outputs, one after another in `out`; whether it ran
        auto run = [&](const float* r_arg, const std::int32_t* r_tokens, std::vector<float>& out) {
            poison(dxn), poison(dy), poison(drinv);
            const bool ran = residual_norm_forward(dx.data, dw.data, r_arg, dy.data, dgain.data, dxn.data, drinv.data,
                                                   c.rows, k, c.d, 0, nullptr, true, r_tokens);
            STATETRACK_CUDA(cudaDeviceSynchronize());
            out = download(dy);
            const auto xn = download(dxn);
            const auto rinv = download(drinv);
            for (const bf16 v : xn) out.push_back(value(v));
            out.insert(out.end(), rinv.begin(), rinv.end());
            return ran;
        };
        std::vector<float> given, by_token;
        const bool ran_by_token = run(dtable.data, dtokens.data, by_token);
        if (!(device_is_hopper() && c.d == 128 && k == 128)) {
            EXPECT_FALSE(ran_by_token) << "rows " << c.rows << ": r by token where the warpgroup kernel does not run";
            continue;
        }
        ASSERT_TRUE(ran_by_token) << "rows " << c.rows;
        ASSERT_TRUE(run(dr.data, nullptr, given));
        EXPECT_TRUE(std::memcmp(given.data(), by_token.data(), given.size() * sizeof(float)) == 0)
            << "rows " << c.rows << ": r by token gave other bits than its rows";
    }
}

// The input gradient into an RMSNorm with the norm's backward after it, against fp64: dxn = dy w
// over K (its fp32 sums: fp32_sums_bound of the sum of |terms|), then dx = dx_before + r g dxn - x
// r^3 sum(g dxn x) / d (each entry's bound: its dxn's error carried through both terms, the row
// sum's own fp32 error, and 2^-21 of the terms for the last operations), dx16 dx rounded to bf16
// exactly, and the gain's gradient sum(dxn x r) over the rows through the partial sums (its fp32
// error bounded by the kernel's longest chain of additions: a lane's rows over its block's tiles,
// the block's warps, the blocks). A second run gives the same bits. Shapes: blocks taking two and
// three or more 128-row tiles (40,001 rows; the GPU's blocks three times over and 77 rows), K not a
// multiple of the 64-column slices (392, the projections' depth at the paper's sizes; 200, 48), dy's
// rows wider than K with NaN past it (not summed), d 32, 64 and 128, with and without accumulation
// and the bf16 copy; the paper's shape again after smaller ones. dx's and dx16's guard rows stay
// poisoned.
struct NormCase {
    std::size_t rows, K, ldy, d;
    bool accumulate, copy16;
};
// Whether two of the kernel's blocks fit an SM (three 35 KB buffers each at d 128: not on an A100's
// 164 KB), without which it refuses.
bool two_norm_blocks_fit() {
    int device = 0, shared = 0;
    STATETRACK_CUDA(cudaGetDevice(&device));
    STATETRACK_CUDA(cudaDeviceGetAttribute(&shared, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
    return shared >= 2 * (107520 + 1024);
}
// A case's random inputs: dy with NaN past K in each row (never summed), w, x, dx's value before
// (accumulate), rinv and the gain.
struct NormInputs {
    std::vector<bf16> dy, w;
    std::vector<float> x, dx_before, rinv, gain;
};
NormInputs norm_inputs(const NormCase& c) {
    Rng rng = make_rng(c.rows + c.K + c.d, 14);
    NormInputs in;
    in.dy = random_bf16(c.rows * c.ldy, 1.0, rng);
    for (std::size_t r = 0; r < c.rows; ++r)
        for (std::size_t k = c.K; k < c.ldy; ++k) in.dy[r * c.ldy + k] = __float2bfloat16(NAN);
    in.w = random_bf16(c.K * c.d, 0.1, rng);
    in.x.resize(c.rows * c.d), in.dx_before.resize(c.rows * c.d), in.rinv.resize(c.rows), in.gain.resize(c.d);
    for (float& v : in.x) v = float(normal(rng));
    for (float& v : in.dx_before) v = float(normal(rng));
    for (float& v : in.rinv) v = float(0.5 + 0.5 * std::abs(normal(rng)));
    for (float& v : in.gain) v = float(1.0 + 0.2 * normal(rng));
    return in;
}
// The value dx adds to, in bf16 (a bf16 dx's before): in.dx_before rounded, and in.dx_before set to
// those values for the reference.
std::vector<bf16> bf16_before(NormInputs& in) {
    std::vector<bf16> before(in.dx_before.size());
    for (std::size_t i = 0; i < before.size(); ++i)
        before[i] = __float2bfloat16(in.dx_before[i]), in.dx_before[i] = float(value(before[i]));
    return before;
}
// The fp64 reference: dx's entries and their bounds, the gain's gradient and what its bound is made of.
struct NormReference {
    std::vector<double> dx, bound, g, g_magnitude, g_carried;
};
NormReference norm_reference(const NormCase& c, const NormInputs& in) {
    NormReference ref{std::vector<double>(c.rows * c.d), std::vector<double>(c.rows * c.d), std::vector<double>(c.d),
                      std::vector<double>(c.d), std::vector<double>(c.d)};
    std::vector<double> dxn(c.d), err(c.d);
    const double sums_k = fp32_sums_bound(c.K), sums_d = fp32_sums_bound(c.d);
    for (std::size_t row = 0; row < c.rows; ++row) {
        const double r = in.rinv[row];
        double dot = 0, dot_magnitude = 0, carried = 0;  // carried: sum |g x| err of the row's dxn
        for (std::size_t o = 0; o < c.d; ++o) {
            double v = 0, magnitude = 0;
            for (std::size_t k = 0; k < c.K; ++k) {
                const double term = value(in.dy[row * c.ldy + k]) * value(in.w[k * c.d + o]);
                v += term, magnitude += std::abs(term);
            }
            dxn[o] = v, err[o] = sums_k * magnitude;
            const double gx = double(in.gain[o]) * in.x[row * c.d + o];
            dot += gx * v, dot_magnitude += std::abs(gx * v), carried += std::abs(gx) * err[o];
        }
        for (std::size_t o = 0; o < c.d; ++o) {
            const double xo = in.x[row * c.d + o], before = c.accumulate ? in.dx_before[row * c.d + o] : 0.0;
            const double first = r * in.gain[o] * dxn[o], second = xo * r * r * r * dot / double(c.d);
            ref.dx[row * c.d + o] = before + first - second;
            ref.bound[row * c.d + o] = std::abs(r * in.gain[o]) * err[o] +
                                       std::abs(xo) * r * r * r / double(c.d) * (carried + sums_d * dot_magnitude) +
                                       0x1p-21 * (std::abs(first) + std::abs(second) + std::abs(before)) + 1e-30;
            ref.g[o] += dxn[o] * xo * r;
            ref.g_magnitude[o] += std::abs(dxn[o] * xo * r), ref.g_carried[o] += std::abs(xo * r) * err[o];
        }
    }
    return ref;
}
// The fp32 error bound of sums over the kernel's longest chain of additions: a lane's rows over its
// block's tiles, the block's warps, the blocks.
double norm_chain_bound(std::size_t rows) {
    const std::size_t tile = 128, tiles = (rows + tile - 1) / tile, blocks = std::min<std::size_t>(tiles, 2 * sm_count());
    return fp32_sums_bound(16 * ((tiles + blocks - 1) / blocks) + 8 + blocks);
}

TEST(CudaKernels, NormBackwardProductMatchesFp64OverManyTiles) {
    SKIP_WITHOUT_GPU();
    const std::size_t blocks_most = 2 * sm_count(), tile = 128, repeated = 3 * blocks_most * tile + 77;
    for (const NormCase c : {NormCase{1000, 512, 512, 128, true, true}, NormCase{40001, 512, 512, 128, true, true},
                             NormCase{7, 48, 56, 32, false, true}, NormCase{repeated, 48, 56, 32, true, true},
                             NormCase{777, 392, 392, 128, true, false}, NormCase{333, 200, 208, 64, true, true},
                             NormCase{repeated, 200, 208, 64, true, false}, NormCase{3000, 392, 392, 128, true, true}}) {
        const NormInputs in = norm_inputs(c);
        DeviceArray<bf16> ddy(in.dy.size()), dw(in.w.size()), ddx16((c.rows + guard_rows) * c.d);
        DeviceArray<float> dx_arr(in.x.size()), drinv(in.rinv.size()), dgain(in.gain.size()),
            ddx((c.rows + guard_rows) * c.d), dg(c.d), scratch(rmsnorm_backward_partials(c.rows, c.d));
        upload(ddy, in.dy), upload(dw, in.w), upload(dx_arr, in.x), upload(drinv, in.rinv), upload(dgain, in.gain);
        // one run from poisoned outputs: whether it ran, and dx, dx16 and the gain's gradient
        auto run = [&](std::vector<float>& got, std::vector<bf16>& got16, std::vector<float>& got_g) {
            poison(ddx), poison(ddx16);
            if (c.accumulate)
                STATETRACK_CUDA(cudaMemcpy(ddx.data, in.dx_before.data(), in.dx_before.size() * sizeof(float),
                                           cudaMemcpyHostToDevice));
            STATETRACK_CUDA(cudaMemset(dg.data, 0, c.d * sizeof(float)));
            std::vector<PartialSum> sums;
            const bool ran = norm_backward_product(ddy.data, c.ldy, dw.data, dx_arr.data, dgain.data, drinv.data,
                                                   ddx.data, c.copy16 ? ddx16.data : nullptr, dg.data, c.rows, c.K, c.d,
                                                   c.accumulate, 0, Partials{scratch.data, &sums}, nullptr);
            if (ran) add_partial_sums(sums, nullptr);
            STATETRACK_CUDA(cudaDeviceSynchronize());
            got = download(ddx), got16 = download(ddx16), got_g = download(dg);
            return ran;
        };
        std::vector<float> got, got_g, again, again_g;
        std::vector<bf16> got16, again16;
        const bool ran = run(got, got16, got_g);
        if (!device_runs_bf16_mma() || !two_norm_blocks_fit()) {
            EXPECT_FALSE(ran) << "the kernel needs sm_80's bf16 mma and two blocks an SM";
            continue;
        }
        ASSERT_TRUE(ran) << "rows " << c.rows << " K " << c.K << " d " << c.d;
        ASSERT_TRUE(run(again, again16, again_g));
        EXPECT_TRUE(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)) == 0 &&
                    std::memcmp(got_g.data(), again_g.data(), got_g.size() * sizeof(float)) == 0)
            << "rows " << c.rows << ": a second run gave other bits";
        EXPECT_EQ(touched_past(got, c.rows * c.d), 0u) << "rows " << c.rows << ": dx written past the last row";
        EXPECT_EQ(touched_past(got16, c.copy16 ? c.rows * c.d : 0), 0u) << "rows " << c.rows << ": dx16";
        const NormReference ref = norm_reference(c, in);
        Worst dx_errors, g_errors;
        std::size_t copies_wrong = 0;
        for (std::size_t i = 0; i < c.rows * c.d; ++i) {
            dx_errors.note(std::abs(got[i] - ref.dx[i]) / ref.bound[i], i);
            if (c.copy16) {
                const bf16 copy = got16[i], rounded = __float2bfloat16(got[i]);
                copies_wrong += std::memcmp(&copy, &rounded, sizeof(bf16)) != 0;
            }
        }
        const double chain = norm_chain_bound(c.rows);
        for (std::size_t o = 0; o < c.d; ++o)
            g_errors.note(std::abs(got_g[o] - ref.g[o]) / (ref.g_carried[o] + chain * ref.g_magnitude[o] + 1e-30), o);
        const std::size_t first = dx_errors.first_bad;
        EXPECT_EQ(dx_errors.bad, 0u) << "rows " << c.rows << " K " << c.K << " d " << c.d << ": first at row "
                                     << first / c.d << " column " << first % c.d << ", got " << got[first];
        EXPECT_EQ(copies_wrong, 0u) << "rows " << c.rows << ": dx16 is not dx rounded to bf16";
        EXPECT_EQ(g_errors.bad, 0u) << "rows " << c.rows << " K " << c.K << " d " << c.d << ": gain column "
                                    << g_errors.first_bad;
        std::printf("norm_backward_product rows %zu K %zu d %zu: worst error dx %.3f, gain %.3f of its bound\n", c.rows,
                    c.K, c.d, dx_errors.worst, g_errors.worst);
    }
}

// The letters' sums against fp64: every row's dx (ref) added to its letter's entry of the table's
// values before, each within the rows' bounds plus the chain of additions' (as the gain's); and
// the gain's gradient against fp64 within the same chain.
struct LetterErrors {
    Worst table, gain;
};
LetterErrors letter_errors(const NormCase& c, const NormReference& ref, const std::vector<std::int32_t>& tokens,
                           const std::vector<float>& table_before, const std::vector<float>& got,
                           const std::vector<float>& got_g) {
    std::vector<double> want(table_before.begin(), table_before.end()), bound(want.size()), magnitude(want.size());
    for (std::size_t row = 0; row < c.rows; ++row)
        for (std::size_t o = 0; o < c.d; ++o) {
            const std::size_t at = std::size_t(tokens[row]) * c.d + o;
            want[at] += ref.dx[row * c.d + o], bound[at] += ref.bound[row * c.d + o];
            magnitude[at] += std::abs(ref.dx[row * c.d + o]);
        }
    const double chain = norm_chain_bound(c.rows);
    LetterErrors e;
    for (std::size_t i = 0; i < want.size(); ++i)
        e.table.note(std::abs(got[i] - want[i]) / (bound[i] + chain * (magnitude[i] + std::abs(table_before[i])) + 1e-30),
                     i);
    for (std::size_t o = 0; o < c.d; ++o)
        e.gain.note(std::abs(got_g[o] - ref.g[o]) / (ref.g_carried[o] + chain * ref.g_magnitude[o] + 1e-30), o);
    return e;
}

// The first layer's form (LetterSums): dx not written (its poison stays) but summed per letter into
// the embedding's gradient, added to what the table held; against the fp64 dx of every row summed
// by its letter, within the rows' bounds plus the chain of additions' (as the gain's), and the gain's
// gradient as in the test above; a second run gives the same bits. Vocabularies of 1, 2 (parity's),
// 5 and 8 (the larger tables: 8 a lane, the instance that spills at d 128), the letters random, at
// d 32, 64 and 128, blocks through one tile and through three or more; 9 letters are refused.
// The MLP's backward through its norm in one kernel (mlp_backward_through_norm, Hopper, d 128): dgu
// to the bit as mlp_down_backward_from_xn writes it; dx against the fp64 norm backward of dgu w_gu
// (norm_reference from the kernel's own dgu, with its bf16 rounding, 2^-8 relative, more) added to
// before; the gain's gradient against fp64 (fp32 sums over the rows in any order). Outputs poisoned
// first, with guard rows after them. Elsewhere, and at d 64, it declines.
TEST(CudaKernels, MlpBackwardThroughNormMatchesFp64) {
    SKIP_WITHOUT_GPU();
    for (const MlpCase mc : {MlpCase{40001, 128, 256}, MlpCase{3000, 128, 128}, MlpCase{129, 128, 64},
                             MlpCase{777, 128, 192}, MlpCase{1000, 64, 128}}) {
        SCOPED_TRACE("rows " + std::to_string(mc.rows) + " d " + std::to_string(mc.d) + " m " + std::to_string(mc.m));
        const std::size_t rows = mc.rows, d = mc.d, m = mc.m;
        const NormCase c{rows, 2 * m, 2 * m, d, true, false};
        NormInputs in = norm_inputs(c);  // x, rinv, the gain and before (dy and w are replaced below)
        const std::vector<bf16> before = bf16_before(in);
        Rng rng = make_rng(rows + m, 16);
        const auto xn = random_bf16(rows * d, 1.0, rng), w_gu = random_bf16(2 * m * d, 0.15, rng),
                   w_down = random_bf16(d * m, 0.1, rng), dy = random_bf16(rows * d, 1.0, rng);
        DeviceArray<bf16> ddy(dy.size()), dxn(xn.size()), dwgu(w_gu.size()), dwdown(w_down.size()),
            dbefore(before.size()), ddgu((rows + guard_rows) * 2 * m), dgu_alone(rows * 2 * m),
            ddx((rows + guard_rows) * d);
        DeviceArray<float> dx_arr(in.x.size()), drinv(in.rinv.size()), dgain(in.gain.size()), dg(d),
            scratch(rmsnorm_backward_partials(rows, d));
        upload(ddy, dy), upload(dxn, xn), upload(dwgu, w_gu), upload(dwdown, w_down), upload(dbefore, before);
        upload(dx_arr, in.x), upload(drinv, in.rinv), upload(dgain, in.gain);
        poison(ddgu), poison(ddx);
        STATETRACK_CUDA(cudaMemset(dg.data, 0, d * sizeof(float)));
        std::vector<PartialSum> sums;
        const bool ran = mlp_backward_through_norm(ddy.data, dxn.data, dwgu.data, dwdown.data, ddgu.data,
                                                   {dx_arr.data, dgain.data, drinv.data, dbefore.data, ddx.data, dg.data},
                                                   rows, d, m, Partials{scratch.data, &sums}, nullptr);
        if (!device_is_hopper() || d != 128) {
            EXPECT_FALSE(ran) << "the kernel is Hopper's, for d 128";
            continue;
        }
        ASSERT_TRUE(ran);
        add_partial_sums(sums, nullptr);
        ASSERT_TRUE(mlp_down_backward_from_xn(ddy.data, dxn.data, dwgu.data, dwdown.data, dgu_alone.data, rows, d, m,
                                              nullptr));
        STATETRACK_CUDA(cudaDeviceSynchronize());
        auto dgu = download(ddgu);
        const auto dx = download(ddx), alone = download(dgu_alone);
        const auto g = download(dg);
        EXPECT_EQ(touched_past(dgu, rows * 2 * m) + touched_past(dx, rows * d), 0u) << "written past the last row";
        dgu.resize(rows * 2 * m);
        EXPECT_EQ(std::memcmp(dgu.data(), alone.data(), dgu.size() * sizeof(bf16)), 0)
            << "not the bits of mlp_down_backward_from_xn";
        in.dy = dgu, in.w = w_gu;
        const NormReference ref = norm_reference(c, in);
        Worst dx_errors, g_errors;
        for (std::size_t i = 0; i < rows * d; ++i)
            dx_errors.note(std::abs(value(dx[i]) - ref.dx[i]) / (ref.bound[i] + 0x1p-8 * std::abs(ref.dx[i])), i);
        for (std::size_t o = 0; o < d; ++o)
            g_errors.note(std::abs(g[o] - ref.g[o]) / (ref.g_carried[o] + fp32_sums_bound(rows) * ref.g_magnitude[o] + 1e-30),
                          o);
        const std::size_t first = dx_errors.first_bad;
        EXPECT_EQ(dx_errors.bad, 0u) << "first at row " << first / d << " column " << first % d << ", got "
                                     << value(dx[first]) << " want " << ref.dx[first];
        EXPECT_EQ(g_errors.bad, 0u) << "gain column " << g_errors.first_bad << ": got " << g[g_errors.first_bad]
                                    << " want " << ref.g[g_errors.first_bad];
        std::printf("mlp_backward_through_norm rows %zu m %zu: worst error dx %.3f, gain %.3f of its bound\n", rows, m,
                    dx_errors.worst, g_errors.worst);
    }
}

// A bf16 dx added to a before of its own at d 128 with the delta rule's projection widths (K 385 to
// 448): norm_backward_product's warpgroup kernel on Hopper (norm_backward_wgmma), and mma.sync's
// without `warpgroups`, against fp64 (norm_reference, with the bf16 rounding of dx, 2^-8 relative,
// more). dy holds NaN past K in each row (never read), outputs are poisoned first with guard rows.
TEST(CudaKernels, NormBackwardProductOnWarpgroupsMatchesFp64) {
    SKIP_WITHOUT_GPU();
    for (const NormCase c : {NormCase{40001, 392, 400, 128, true, false}, NormCase{777, 392, 392, 128, true, false},
                             NormCase{129, 448, 448, 128, true, false}, NormCase{3000, 400, 408, 128, true, false}}) {
        SCOPED_TRACE("rows " + std::to_string(c.rows) + " K " + std::to_string(c.K));
        NormInputs in = norm_inputs(c);
        const std::vector<bf16> before = bf16_before(in);
        DeviceArray<bf16> ddy(in.dy.size()), dw(in.w.size()), dbefore(before.size()), ddx((c.rows + guard_rows) * c.d);
        DeviceArray<float> dx_arr(in.x.size()), drinv(in.rinv.size()), dgain(in.gain.size()), dg(c.d),
            scratch(rmsnorm_backward_partials(c.rows, c.d));
        upload(ddy, in.dy), upload(dw, in.w), upload(dx_arr, in.x), upload(drinv, in.rinv), upload(dgain, in.gain);
        upload(dbefore, before);
        const NormReference ref = norm_reference(c, in);
        for (const bool warpgroups : {true, false}) {
            SCOPED_TRACE(warpgroups ? "warpgroups where they run" : "mma.sync");
            poison(ddx);
            STATETRACK_CUDA(cudaMemset(dg.data, 0, c.d * sizeof(float)));
            std::vector<PartialSum> sums;
            const bool ran = norm_backward_product(ddy.data, c.ldy, dw.data, dx_arr.data, dgain.data, drinv.data, ddx.data,
                                                   static_cast<bf16*>(nullptr), dg.data, c.rows, c.K, c.d, true, 0,
                                                   Partials{scratch.data, &sums}, nullptr, {}, dbefore.data, warpgroups);
            if (!device_runs_bf16_mma()) {
                EXPECT_FALSE(ran) << "the kernels need sm_80's bf16 mma";
                break;
            }
            if (!ran && !warpgroups && !two_norm_blocks_fit()) continue;  // mma.sync's needs two blocks an SM
            ASSERT_TRUE(ran);
            // on Hopper the warpgroup kernel took it: one block an SM, so at most as many partial sums
            if (warpgroups && device_is_hopper()) {
                ASSERT_EQ(sums.size(), 1u);
                EXPECT_LE(sums[0].parts, std::size_t(sm_count()));
            }
            add_partial_sums(sums, nullptr);
            STATETRACK_CUDA(cudaDeviceSynchronize());
            const auto dx = download(ddx);
            const auto g = download(dg);
            EXPECT_EQ(touched_past(dx, c.rows * c.d), 0u) << "written past the last row";
            Worst dx_errors, g_errors;
            for (std::size_t i = 0; i < c.rows * c.d; ++i)
                dx_errors.note(std::abs(value(dx[i]) - ref.dx[i]) / (ref.bound[i] + 0x1p-8 * std::abs(ref.dx[i])), i);
            for (std::size_t o = 0; o < c.d; ++o)
                g_errors.note(std::abs(g[o] - ref.g[o]) /
                                  (ref.g_carried[o] + fp32_sums_bound(c.rows) * ref.g_magnitude[o] + 1e-30),
                              o);
            const std::size_t first = dx_errors.first_bad;
            EXPECT_EQ(dx_errors.bad, 0u) << "first at row " << first / c.d << " column " << first % c.d << ", got "
                                         << value(dx[first]) << " want " << ref.dx[first];
            EXPECT_EQ(g_errors.bad, 0u) << "gain column " << g_errors.first_bad;
            std::printf("norm_backward_product, bf16 dx (%s) rows %zu K %zu: worst error dx %.3f, gain %.3f of its bound\n",
                        warpgroups ? "warpgroups where they run" : "mma.sync", c.rows, c.K, dx_errors.worst,
                        g_errors.worst);
        }
    }
}

TEST(CudaKernels, NormBackwardProductSumsDxByLetters) {
    SKIP_WITHOUT_GPU();
    const std::size_t repeated = 3 * 2 * sm_count() * 128 + 77;
    struct LetterCase {
        NormCase c;
        std::size_t vocab;
    };
    for (const LetterCase lc : {LetterCase{{40001, 392, 392, 128, true, false}, 2}, LetterCase{{3000, 392, 392, 128, true, false}, 8},
                                LetterCase{{repeated, 392, 392, 128, true, false}, 3},
                                LetterCase{{repeated, 48, 56, 32, true, false}, 5}, LetterCase{{333, 200, 208, 64, false, false}, 1},
                                LetterCase{{repeated, 200, 208, 64, true, false}, 2}}) {
        const NormCase& c = lc.c;
        const NormInputs in = norm_inputs(c);
        Rng rng = make_rng(c.rows + lc.vocab, 15);
        std::vector<std::int32_t> tokens(c.rows);
        for (auto& t : tokens) t = std::int32_t(uniform_below(rng, lc.vocab));
        std::vector<float> table_before(lc.vocab * c.d);
        for (float& v : table_before) v = float(normal(rng));
        DeviceArray<bf16> ddy(in.dy.size()), dw(in.w.size());
        DeviceArray<float> dx_arr(in.x.size()), drinv(in.rinv.size()), dgain(in.gain.size()), ddx(c.rows * c.d), dg(c.d),
            scratch(rmsnorm_backward_partials(c.rows, c.d)), table(lc.vocab * c.d),
            letter_scratch(rmsnorm_backward_embed_partials(c.rows, c.d, lc.vocab));
        DeviceArray<std::int32_t> dtokens(c.rows);
        upload(ddy, in.dy), upload(dw, in.w), upload(dx_arr, in.x), upload(drinv, in.rinv), upload(dgain, in.gain);
        upload(dtokens, tokens);
        poison(ddx);
        if (c.accumulate)
            STATETRACK_CUDA(cudaMemcpy(ddx.data, in.dx_before.data(), in.dx_before.size() * sizeof(float),
                                       cudaMemcpyHostToDevice));
        const std::vector<float> dx_given = download(ddx);
        // one run from the table's values before: whether it ran, the table and the gain's gradient
        auto run = [&](std::vector<float>& got, std::vector<float>& got_g) {
            upload(table, table_before);
            STATETRACK_CUDA(cudaMemset(dg.data, 0, c.d * sizeof(float)));
            std::vector<PartialSum> sums;
            const LetterSums letters{dtokens.data, lc.vocab, table.data, Partials{letter_scratch.data, &sums}};
            const bool ran = norm_backward_product(ddy.data, c.ldy, dw.data, dx_arr.data, dgain.data, drinv.data,
                                                   ddx.data, nullptr, dg.data, c.rows, c.K, c.d, c.accumulate, 0,
                                                   Partials{scratch.data, &sums}, nullptr, letters);
            if (ran) add_partial_sums(sums, nullptr);
            STATETRACK_CUDA(cudaDeviceSynchronize());
            got = download(table), got_g = download(dg);
            return ran;
        };
        std::vector<float> got, got_g, again, again_g;
        const bool ran = run(got, got_g);
        if (!device_runs_bf16_mma() || !two_norm_blocks_fit()) {
            EXPECT_FALSE(ran);
            continue;
        }
        ASSERT_TRUE(ran) << "rows " << c.rows << " d " << c.d << " vocab " << lc.vocab;
        ASSERT_TRUE(run(again, again_g));
        EXPECT_TRUE(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)) == 0 &&
                    std::memcmp(got_g.data(), again_g.data(), got_g.size() * sizeof(float)) == 0)
            << "rows " << c.rows << ": a second run gave other bits";
        const std::vector<float> dx_after = download(ddx);
        EXPECT_TRUE(std::memcmp(dx_after.data(), dx_given.data(), dx_given.size() * sizeof(float)) == 0)
            << "rows " << c.rows << ": dx was written";
        const LetterErrors e = letter_errors(c, norm_reference(c, in), tokens, table_before, got, got_g);
        EXPECT_EQ(e.table.bad, 0u) << "rows " << c.rows << " d " << c.d << " vocab " << lc.vocab << ": letter "
                                   << e.table.first_bad / c.d << " column " << e.table.first_bad % c.d;
        EXPECT_EQ(e.gain.bad, 0u) << "rows " << c.rows << " d " << c.d << ": gain column " << e.gain.first_bad;
        std::printf("norm_backward_product by letters rows %zu d %zu vocab %zu: worst error %.3f, gain %.3f of its bound\n",
                    c.rows, c.d, lc.vocab, e.table.worst, e.gain.worst);
        // more letters than the tables take: refused, nothing launched
        std::vector<PartialSum> none;
        const LetterSums nine{dtokens.data, 9, table.data, Partials{letter_scratch.data, &none}};
        EXPECT_FALSE(norm_backward_product(ddy.data, c.ldy, dw.data, dx_arr.data, dgain.data, drinv.data, ddx.data,
                                           nullptr, dg.data, c.rows, c.K, c.d, c.accumulate, 0,
                                           Partials{scratch.data, &none}, nullptr, nine));
        EXPECT_TRUE(none.empty());
    }
}

// The first layer's form as training runs it under --matmul bf16 (a bf16 dx, the mixer's dx as
// `before`, x the embedding's rows by token, LetterSums::embedding given): the warpgroup kernel on
// Hopper at d 128, mma.sync's elsewhere and with warpgroups off. The letters' sums against fp64 as
// in the test above, the gain's gradient too, dx left unwritten, the same bits on a second run. On
// Hopper the warpgroup run gets x's array poisoned with NaN, which shows it reads x from the
// embedding, and one block an SM (at most sm_count partial rows), which shows that kernel ran.
TEST(CudaKernels, NormBackwardProductByLettersOnWarpgroupsMatchesFp64) {
    SKIP_WITHOUT_GPU();
    struct LetterCase {
        NormCase c;
        std::size_t vocab;
    };
    for (const LetterCase lc : {LetterCase{{40001, 392, 400, 128, true, false}, 2}, LetterCase{{777, 392, 392, 128, true, false}, 8},
                                LetterCase{{129, 448, 448, 128, true, false}, 1}, LetterCase{{3000, 400, 408, 128, true, false}, 3}}) {
        const NormCase& c = lc.c;
        SCOPED_TRACE("rows " + std::to_string(c.rows) + " K " + std::to_string(c.K) + " vocab " + std::to_string(lc.vocab));
        NormInputs in = norm_inputs(c);
        const std::vector<bf16> before = bf16_before(in);
        Rng rng = make_rng(c.rows + lc.vocab, 17);
        std::vector<std::int32_t> tokens(c.rows);
        for (auto& t : tokens) t = std::int32_t(uniform_below(rng, lc.vocab));
        std::vector<float> embedding(lc.vocab * c.d), table_before(lc.vocab * c.d);
        for (float& v : embedding) v = float(normal(rng));
        for (float& v : table_before) v = float(normal(rng));
        for (std::size_t row = 0; row < c.rows; ++row)
            std::copy_n(embedding.begin() + std::ptrdiff_t(tokens[row] * c.d), c.d, in.x.begin() + std::ptrdiff_t(row * c.d));
        DeviceArray<bf16> ddy(in.dy.size()), dw(in.w.size()), dbefore(before.size()), ddx((c.rows + guard_rows) * c.d);
        DeviceArray<float> dx_arr(in.x.size()), drinv(in.rinv.size()), dgain(in.gain.size()), dg(c.d),
            scratch(rmsnorm_backward_partials(c.rows, c.d)), table(lc.vocab * c.d), dembedding(embedding.size()),
            letter_scratch(rmsnorm_backward_embed_partials(c.rows, c.d, lc.vocab));
        DeviceArray<std::int32_t> dtokens(c.rows);
        upload(ddy, in.dy), upload(dw, in.w), upload(drinv, in.rinv), upload(dgain, in.gain), upload(dbefore, before);
        upload(dtokens, tokens), upload(dembedding, embedding);
        const NormReference ref = norm_reference(c, in);
        for (const bool warpgroups : {true, false}) {
            SCOPED_TRACE(warpgroups ? "warpgroups where they run" : "mma.sync");
            const bool x_unread = warpgroups && device_is_hopper();
            if (x_unread) {
                poison(dx_arr);
            } else {
                upload(dx_arr, in.x);
            }
            // one run from the table's values before: whether it ran, the table, the gain's gradient, dx
            // and the partial sums' rows
            auto run = [&](std::vector<float>& got, std::vector<float>& got_g, std::vector<bf16>& dx,
                           std::size_t& parts) {
                upload(table, table_before);
                poison(ddx);
                STATETRACK_CUDA(cudaMemset(dg.data, 0, c.d * sizeof(float)));
                std::vector<PartialSum> sums;
                LetterSums letters{dtokens.data, lc.vocab, table.data, Partials{letter_scratch.data, &sums}};
                letters.embedding = dembedding.data;
                const bool ran = norm_backward_product(ddy.data, c.ldy, dw.data, dx_arr.data, dgain.data, drinv.data,
                                                       ddx.data, static_cast<bf16*>(nullptr), dg.data, c.rows, c.K,
                                                       c.d, true, 0, Partials{scratch.data, &sums}, nullptr, letters,
                                                       dbefore.data, warpgroups);
                parts = sums.empty() ? 0 : sums[0].parts;
                if (ran) add_partial_sums(sums, nullptr);
                STATETRACK_CUDA(cudaDeviceSynchronize());
                got = download(table), got_g = download(dg), dx = download(ddx);
                return ran;
            };
            std::vector<float> got, got_g, again, again_g;
            std::vector<bf16> dx, dx_again;
            std::size_t parts = 0, parts_again = 0;
            const bool ran = run(got, got_g, dx, parts);
            if (!device_runs_bf16_mma()) {
                EXPECT_FALSE(ran) << "the kernels need sm_80's bf16 mma";
                break;
            }
            if (!ran && !warpgroups && !two_norm_blocks_fit()) continue;  // mma.sync's needs two blocks an SM
            ASSERT_TRUE(ran);
            if (x_unread) {
                EXPECT_LE(parts, std::size_t(sm_count())) << "not the warpgroup kernel: one block an SM";
            }
            ASSERT_TRUE(run(again, again_g, dx_again, parts_again));
            EXPECT_TRUE(std::memcmp(got.data(), again.data(), got.size() * sizeof(float)) == 0 &&
                        std::memcmp(got_g.data(), again_g.data(), got_g.size() * sizeof(float)) == 0)
                << "a second run gave other bits";
            EXPECT_EQ(touched_past(dx, 0), 0u) << "dx was written";
            const LetterErrors e = letter_errors(c, ref, tokens, table_before, got, got_g);
            EXPECT_EQ(e.table.bad, 0u) << "letter " << e.table.first_bad / c.d << " column " << e.table.first_bad % c.d
                                       << ": got " << got[e.table.first_bad];
            EXPECT_EQ(e.gain.bad, 0u) << "gain column " << e.gain.first_bad;
            std::printf("norm_backward_product by letters, bf16 dx (%s) rows %zu K %zu vocab %zu: worst error %.3f, "
                        "gain %.3f of its bound\n",
                        warpgroups ? "warpgroups where they run" : "mma.sync", c.rows, c.K, lc.vocab, e.table.worst,
                        e.gain.worst);
        }
    }
}

// A bf16 dx (Plan::grad16: the residual stream's gradient under --matmul bf16) is the fp32 one
// rounded: every kernel that writes or reads dx, run on the same inputs with a float dx and with a
// bf16 one (dx's value before, where added to, bf16 values in both), gives the fp32 run's dx rounded
// to nearest even, bit for bit, and the same bits in every other output (the gains', the
// embedding's, the head's gradients and the loss). The fp32 forms are held to fp64 elsewhere
// (above, and test_cuda_backend.cpp), so this carries that to the bf16 ones. Rows that run several
// blocks through several tiles; the fused norm where the device runs it.
struct GradientInputs {
    std::size_t rows, d, vocab, classes;
    std::vector<float> x, dy, before, rinv, gain, w, bias;  // before: bf16 values
    std::vector<std::int32_t> tokens, targets;
    std::vector<bf16> dy16, w16;  // norm_backward_product's product operands
};
GradientInputs gradient_inputs(std::size_t rows, std::size_t d, std::size_t vocab, std::size_t classes) {
    Rng rng = make_rng(rows + d, 15);
    GradientInputs in;
    in.rows = rows, in.d = d, in.vocab = vocab, in.classes = classes;
    auto fill = [&](std::vector<float>& v, std::size_t n, double scale, double offset = 0) {
        v.resize(n);
        for (float& e : v) e = float(offset + scale * normal(rng));
    };
    fill(in.x, rows * d, 1.0), fill(in.dy, rows * d, 1.0), fill(in.before, rows * d, 1.0);
    for (float& e : in.before) e = __bfloat162float(__float2bfloat16(e));
    in.rinv.resize(rows);
    for (float& e : in.rinv) e = float(0.5 + 0.5 * std::abs(normal(rng)));
    fill(in.gain, d, 0.2, 1.0), fill(in.w, classes * d, 0.3), fill(in.bias, classes, 0.1);
    in.tokens.resize(rows), in.targets.resize(rows);
    for (std::size_t r = 0; r < rows; ++r) {
        in.tokens[r] = std::int32_t(uniform_below(rng, vocab));
        in.targets[r] = r % 7 == 3 ? -1 : std::int32_t(uniform_below(rng, classes));  // some unlabelled
    }
    in.dy16 = random_bf16(rows * d, 1.0, rng), in.w16 = random_bf16(d * d, 0.1, rng);
    return in;
}
// dx (downloaded as floats) and every other output of one kernel's run with dx of type D.
struct GradientOutputs {
    std::vector<float> dx, rest;
};
// Which kernel: the row norm's backward (accumulating), into the embedding (the first layer's), the
// embedding's backward alone, the head's step, the fused norm (accumulating) and the fused norm by letters.
template <class T>
T as(float v) {
    if constexpr (std::is_same_v<T, bf16>) return __float2bfloat16(v);
    else return v;
}
template <class T>
float as(bf16 v) {
    return __bfloat162float(v);
}
enum class GradientKernel { norm, norm_into_embedding, embedding, head, fused_norm, fused_by_letters };
template <class D>
GradientOutputs run_gradient_kernel(GradientKernel k, const GradientInputs& in, bool& ran) {
    const std::size_t rows = in.rows, d = in.d, n = rows * d;
    DeviceArray<float> x(n), dy(n), rinv(rows), gain(d), w(in.w.size()), bias(in.classes);
    DeviceArray<std::int32_t> tokens(rows), targets(rows);
    upload(x, in.x), upload(dy, in.dy), upload(rinv, in.rinv), upload(gain, in.gain), upload(w, in.w);
    upload(bias, in.bias), upload(tokens, in.tokens), upload(targets, in.targets);
    DeviceArray<D> dx(n);
    std::vector<D> before(n);
    for (std::size_t i = 0; i < n; ++i) before[i] = as<D>(in.before[i]);
    upload(dx, before);
    // the outputs besides dx, zeroed (they are added to): the gain's, the embedding's, the head's w and bias
    DeviceArray<float> dg(d), dtable(in.vocab * d), dw(in.classes * d), dbias(in.classes);
    for (DeviceArray<float>* a : {&dg, &dtable, &dw, &dbias}) STATETRACK_CUDA(cudaMemset(a->data, 0, a->size * sizeof(float)));
    DeviceArray<float> scratch(std::max({rmsnorm_backward_partials(rows, d), head_step_partials(rows, d, in.classes),
                                         embed_backward_partials(rows, d, in.vocab)})),
        letter_scratch(rmsnorm_backward_embed_partials(rows, d, in.vocab));
    DeviceArray<double> loss_partials(step_results_partials());
    DeviceArray<StepParams> params(1);
    DeviceArray<StepResults> results(1);
    const StepParams p{float(rows), 0, 0, 0, 0, 0, 0, 0, 0};
    upload(params, std::vector<StepParams>{p});
    STATETRACK_CUDA(cudaMemset(results.data, 0, sizeof(StepResults)));
    DeviceArray<bf16> dy16(in.dy16.size()), w16(in.w16.size());
    upload(dy16, in.dy16), upload(w16, in.w16);
    std::vector<PartialSum> sums;
    const Partials partials{scratch.data, &sums}, letters{letter_scratch.data, &sums};
    ran = true;
    switch (k) {
        case GradientKernel::norm:
            rmsnorm_backward(x.data, gain.data, rinv.data, dy.data, dx.data, dg.data, rows, d, d, true, partials, nullptr);
            break;
        case GradientKernel::norm_into_embedding:
            rmsnorm_backward_into_embedding(x.data, gain.data, rinv.data, dy.data, dx.data, dg.data, tokens.data,
                                            dtable.data, rows, d, in.vocab, true, partials, letters, nullptr);
            break;
        case GradientKernel::embedding:
            embed_backward(tokens.data, dx.data, dtable.data, rows, d, in.vocab, partials, nullptr);
            break;
        case GradientKernel::head:
            head_step(x.data, gain.data, w.data, bias.data, targets.data, params.data, results.data, dx.data,
                      nullptr, dw.data, dbias.data, dg.data, rows, d, in.classes, partials, loss_partials.data, nullptr);
            break;
        case GradientKernel::fused_norm:
        case GradientKernel::fused_by_letters: {
            LetterSums by{};
            if (k == GradientKernel::fused_by_letters) by = {tokens.data, in.vocab, dtable.data, letters};
            ran = norm_backward_product(dy16.data, d, w16.data, x.data, gain.data, rinv.data, dx.data, nullptr,
                                        dg.data, rows, d, d, true, 0, partials, nullptr, by);
            break;
        }
    }
    add_partial_sums(sums, nullptr);
    STATETRACK_CUDA(cudaDeviceSynchronize());
    GradientOutputs out;
    for (const D& v : download(dx)) out.dx.push_back(as<float>(v));
    for (const auto& part : {download(dg), download(dtable), download(dw), download(dbias)})
        out.rest.insert(out.rest.end(), part.begin(), part.end());
    const StepResults r = download(results)[0];
    out.rest.push_back(float(r.loss_sum)), out.rest.push_back(float(r.correct));
    return out;
}

TEST(CudaKernels, Bf16GradientIsTheFp32OneRounded) {
    SKIP_WITHOUT_GPU();
    const char* names[] = {"rmsnorm_backward", "rmsnorm_backward_into_embedding", "embed_backward", "head_step",
                           "norm_backward_product", "norm_backward_product by letters"};
    // d 256 and 512: the row kernels' two and four float4 a lane (no head_step, no fused norm there)
    for (const auto [rows, d, vocab] : {std::array<std::size_t, 3>{20011, 128, 2}, {5003, 64, 5}, {777, 32, 8},
                                        {3001, 256, 3}, {1001, 512, 2}})
        for (int k = 0; k < 6; ++k) {
            const GradientKernel kernel = GradientKernel(k);
            if (kernel == GradientKernel::norm_into_embedding && !rmsnorm_backward_embeds(rows, d, vocab)) continue;
            if (kernel == GradientKernel::head && !head_step_fits(d, 3)) continue;
            const GradientInputs in = gradient_inputs(rows, d, vocab, 3);
            bool ran32 = false, ran16 = false;
            const GradientOutputs f = run_gradient_kernel<float>(kernel, in, ran32);
            const GradientOutputs h = run_gradient_kernel<bf16>(kernel, in, ran16);
            SCOPED_TRACE(std::string(names[k]) + " rows " + std::to_string(rows) + " d " + std::to_string(d));
            ASSERT_EQ(ran32, ran16);
            if (!ran32) continue;  // the fused norm where the device cannot run it
            // dx: rounded where written; the first layer's forms leave it as it was (before)
            const bool writes = kernel != GradientKernel::norm_into_embedding && kernel != GradientKernel::embedding &&
                                kernel != GradientKernel::fused_by_letters;
            std::size_t wrong = 0, changed = 0;
            for (std::size_t i = 0; i < f.dx.size(); ++i) {
                const float want = __bfloat162float(__float2bfloat16(f.dx[i]));
                wrong += std::memcmp(&want, &h.dx[i], sizeof(float)) != 0;
                changed += f.dx[i] != in.before[i];
            }
            EXPECT_EQ(wrong, 0u) << "the bf16 dx is not the fp32 one rounded";
            EXPECT_EQ(changed > f.dx.size() / 2, writes) << "dx written where it must not be, or not written";
            ASSERT_EQ(f.rest.size(), h.rest.size());
            EXPECT_EQ(std::memcmp(f.rest.data(), h.rest.data(), f.rest.size() * sizeof(float)), 0)
                << "the other outputs differ";
            double magnitude = 0;
            for (const float v : f.rest) magnitude += std::abs(v);
            EXPECT_GT(magnitude, 0.0) << "no output besides dx: the comparison would hold vacuously";
        }
}

// The chunked delta kernels with pre by token (DeltaShape::tokens: the first layer's projections as
// a table of the letters' rows, which the kernels read by each row's token): the forward's o, u and
// final states, and the backward's dpre and dzbeta (bf16, as --matmul bf16 trains) and its taps' and
// output gain's gradients, are the very bits of the same kernels given the rows the table and the
// tokens stand for. Padded words (T 45: the last chunk is short) and packed ones of lengths 1 to 45
// (words ending inside chunks); outputs poisoned before each run. The table's last row is zeros
// (DeltaShape::zero_token, read for the rows outside a word). Where the chunked kernels do not run,
// both forms decline.
TEST(CudaKernels, DeltaChunksReadPreByTokenAsItsRows) {
    SKIP_WITHOUT_GPU();
    const std::size_t B = 6, T = 45, H = 4, dh = 32, d = H * dh, K = 4, vocab = 3;
    const std::size_t qkv = 3 * d, ld = qkv + H + 4;  // [q | k | v | zbeta | padding]
    for (const bool packed : {false, true}) {
        SCOPED_TRACE(packed ? "packed words" : "padded words");
        Rng rng = make_rng(B * T + packed, 18);
        std::vector<std::int32_t> lengths(B), offsets(B);
        std::size_t N = 0;
        for (std::size_t b = 0; b < B; ++b) {
            lengths[b] = packed ? std::int32_t(1 + uniform_below(rng, T)) : std::int32_t(T);
            offsets[b] = std::int32_t(N), N += std::size_t(lengths[b]);
        }
        auto normals = [&](std::size_t n, double scale, double offset = 0) {
            std::vector<float> v(n);
            for (float& x : v) x = float(offset + scale * normal(rng));
            return v;
        };
        std::vector<float> table = normals((vocab + 1) * ld, 1.0);  // and a row of zeros, token `vocab`
        std::fill(table.begin() + std::ptrdiff_t(vocab * ld), table.end(), 0.0f);
        const std::vector<float> conv = normals(qkv * K, 0.5), dOn = normals(N * d, 1.0), gain = normals(d, 0.2, 1.0);
        std::vector<float> rinv = normals(N * H, 0.5);
        for (float& r : rinv) r = 0.5f + std::abs(r);
        std::vector<std::int32_t> tokens(N);
        std::vector<float> rows(N * ld);
        for (std::size_t n = 0; n < N; ++n) {
            tokens[n] = std::int32_t(uniform_below(rng, vocab));
            std::copy_n(table.begin() + std::ptrdiff_t(tokens[n] * ld), ld, rows.begin() + std::ptrdiff_t(n * ld));
        }
        DeviceArray<float> dtable(table.size()), drows(rows.size()), dconv_taps(conv.size()), ddOn(dOn.size()),
            drinv(rinv.size()), dgain(gain.size()), o((N + guard_rows) * d), u((N + guard_rows) * d),
            final(B * H * dh * dh), dconv(conv.size()), dgain_sum(d);
        DeviceArray<bf16> dpre((N + guard_rows) * ld);
        DeviceArray<std::int32_t> dtokens(N), dlengths(B), doffsets(B);
        upload(dtable, table), upload(drows, rows), upload(dconv_taps, conv), upload(ddOn, dOn), upload(drinv, rinv);
        upload(dgain, gain), upload(dtokens, tokens), upload(dlengths, lengths), upload(doffsets, offsets);
        DeltaShape s{};
        s.B = B, s.T = T, s.H = H, s.dh = dh, s.F = 1, s.K = K, s.beta_scale = 2.0f, s.ld = ld;
        s.lengths = dlengths.data, s.offsets = packed ? doffsets.data : nullptr, s.loose_arithmetic = true;
        // every output of the forward and the backward, one after another, for pre (rows or the table)
        auto run = [&](const float* pre, const std::int32_t* by) {
            DeltaShape shape = s;
            shape.tokens = by, shape.zero_token = std::int32_t(vocab);
            poison(o), poison(u), poison(final), poison(dpre);
            STATETRACK_CUDA(cudaMemset(dconv.data, 0, dconv.size * sizeof(float)));
            STATETRACK_CUDA(cudaMemset(dgain_sum.data, 0, d * sizeof(float)));
            std::vector<float> out;
            if (!delta_forward_in_chunks(shape, pre, dconv_taps.data, pre + qkv, o.data, u.data, final.data, nullptr))
                return out;
            DeviceArray<float> scratch(delta_backward_partials(shape)), gain_scratch(B * d);
            std::vector<PartialSum> sums;
            const OutputNorm on{o.data, ddOn.data, drinv.data, dgain.data};
            EXPECT_TRUE(delta_backward_through_norm(shape, pre, dconv_taps.data, pre + qkv, u.data, final.data, on,
                                                    dpre.data, ld, dconv.data, dpre.data + qkv, dgain_sum.data,
                                                    Partials{scratch.data, &sums}, Partials{gain_scratch.data, &sums},
                                                    nullptr));
            add_partial_sums(sums, nullptr);
            STATETRACK_CUDA(cudaDeviceSynchronize());
            for (const auto* a : {&o, &u, &final, &dconv, &dgain_sum}) {
                const auto v = download(*a);
                out.insert(out.end(), v.begin(), v.end());
            }
            for (const bf16 v : download(dpre)) out.push_back(value(v));
            return out;
        };
        const std::vector<float> given = run(drows.data, nullptr), by_token = run(dtable.data, dtokens.data);
        EXPECT_EQ(given.empty(), by_token.empty()) << "one form ran and the other declined";
        if (given.empty()) continue;  // the chunked kernels do not run on this GPU
        ASSERT_EQ(given.size(), by_token.size());
        EXPECT_TRUE(std::memcmp(given.data(), by_token.data(), given.size() * sizeof(float)) == 0)
            << "pre by token gave other bits than its rows";
        double magnitude = 0;
        for (std::size_t i = 0; i < N * d; ++i) magnitude += std::abs(given[i]);
        EXPECT_GT(magnitude, 0.0) << "no output: the comparison would hold vacuously";
    }
}

// Shapes the kernels do not take launch nothing and leave the outputs as they were (the backend then
// runs cuBLAS with swiglu_backward, swiglu_forward or rmsnorm_forward).
TEST(CudaKernels, FusedProductsRefuseShapesTheyDoNotFit) {
    SKIP_WITHOUT_GPU();
    const std::size_t rows = 32, m = 16;
    DeviceArray<bf16> dy(rows * 32), w(32 * m), gu(rows * 2 * m), dgu(rows * 2 * m + 1);
    STATETRACK_CUDA(cudaMemset(dgu.data, 0, dgu.size * sizeof(bf16)));
    EXPECT_FALSE(mlp_down_backward(dy.data, w.data, gu.data, dgu.data, rows, 20, m, nullptr));      // d % 16
    EXPECT_FALSE(mlp_down_backward(dy.data, w.data, gu.data, dgu.data, rows, 16, 12, nullptr));     // m % 8
    EXPECT_FALSE(mlp_down_backward(dy.data, w.data, gu.data, dgu.data + 1, rows, 16, m, nullptr));  // unaligned
    EXPECT_FALSE(mlp_down_backward(dy.data, w.data, gu.data, dgu.data, 0, 16, m, nullptr));         // no rows
    DeviceArray<float> r(rows * 32), y(rows * 32);
    // the whole MLP: d not 64 or 128, m not a multiple of 64, unaligned, few rows
    EXPECT_FALSE(mlp_forward(dy.data, w.data, w.data, r.data, dgu.data, gu.data, y.data, rows, 32, 64, 0, nullptr));
    EXPECT_FALSE(mlp_forward(dy.data, w.data, w.data, r.data, dgu.data, gu.data, y.data, rows, 64, 96, 0, nullptr));
    EXPECT_FALSE(mlp_forward(dy.data, w.data, w.data, r.data, dgu.data + 1, gu.data, y.data, rows, 64, 64, 0, nullptr));
    EXPECT_FALSE(mlp_forward(dy.data, w.data, w.data, r.data, dgu.data, gu.data, y.data, rows, 64, 64, rows + 1, nullptr));
    // weights beyond one block's shared memory (d 128, m 512: 416 KB)
    EXPECT_FALSE(mlp_forward(dy.data, w.data, w.data, r.data, dgu.data, gu.data, y.data, rows, 128, 512, 0, nullptr));
    EXPECT_FALSE(mlp_down_forward(gu.data, w.data, r.data, dgu.data, y.data, rows, m, 20, 0, nullptr));       // d % 16
    EXPECT_FALSE(mlp_down_forward(gu.data, w.data, r.data, dgu.data, y.data, rows, 12, 16, 0, nullptr));      // m % 8
    EXPECT_FALSE(mlp_down_forward(gu.data, w.data, r.data, dgu.data + 1, y.data, rows, m, 16, 0, nullptr));   // unaligned
    EXPECT_FALSE(mlp_down_forward(gu.data, w.data, r.data, dgu.data, y.data, rows, m, 16, rows + 1, nullptr));  // few rows
    DeviceArray<float> rinv(rows);
    EXPECT_FALSE(residual_norm_forward(gu.data, w.data, r.data, y.data, r.data, dgu.data, rinv.data, rows, 24, 16, 0,
                                       nullptr));  // k % 16
    EXPECT_FALSE(residual_norm_forward(gu.data, w.data, r.data, y.data, r.data, dgu.data + 1, rinv.data, rows, 16, 16, 0,
                                       nullptr));  // unaligned
    EXPECT_FALSE(residual_norm_forward(gu.data, w.data, r.data, y.data, r.data, dgu.data, rinv.data, rows, 16, 20, 0,
                                       nullptr));  // d % 16
    EXPECT_FALSE(residual_norm_forward(gu.data, w.data, r.data, y.data, r.data, dgu.data, rinv.data, rows, 16, 16,
                                       rows + 1, nullptr));  // few rows
    // the norm's: d not 32, 64 or 128; K or ldy not a multiple of 8; ldy < K; unaligned
    DeviceArray<float> dg(64), scratch(rmsnorm_backward_partials(rows, 64));
    std::vector<PartialSum> sums;
    const Partials partials{scratch.data, &sums};
    EXPECT_FALSE(norm_backward_product(gu.data, 32, w.data, r.data, r.data, rinv.data, y.data, dgu.data, dg.data, rows, 32,
                                       48, true, 0, partials, nullptr));  // d
    EXPECT_FALSE(norm_backward_product(gu.data, 32, w.data, r.data, r.data, rinv.data, y.data, dgu.data, dg.data, rows, 28,
                                       32, true, 0, partials, nullptr));  // K % 8
    EXPECT_FALSE(norm_backward_product(gu.data, 36, w.data, r.data, r.data, rinv.data, y.data, dgu.data, dg.data, rows, 32,
                                       32, true, 0, partials, nullptr));  // ldy % 8
    EXPECT_FALSE(norm_backward_product(gu.data, 16, w.data, r.data, r.data, rinv.data, y.data, dgu.data, dg.data, rows, 32,
                                       32, true, 0, partials, nullptr));  // ldy < K
    EXPECT_FALSE(norm_backward_product(gu.data, 32, w.data, r.data, r.data, rinv.data, y.data, dgu.data + 1, dg.data, rows,
                                       32, 32, true, 0, partials, nullptr));  // unaligned
    EXPECT_FALSE(norm_backward_product(gu.data, 32, w.data, r.data, r.data, rinv.data, y.data, dgu.data, dg.data, rows, 32,
                                       32, true, rows + 1, partials, nullptr));  // few rows
    EXPECT_TRUE(sums.empty());
    STATETRACK_CUDA(cudaDeviceSynchronize());
    for (const bf16 x : download(dgu)) ASSERT_EQ(value(x), 0.0);
}

}  // namespace
}  // namespace statetrack::gpu::cuda
#endif
