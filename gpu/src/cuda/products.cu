// Matrix products: cuBLAS's default algorithm, or the fastest measured candidate (products.cuh).
#include <algorithm>
#include <stdexcept>
#include <string>

#include "kernels.cuh"
#include "products.cuh"

namespace statetrack::gpu::cuda {

void check_blas(cublasStatus_t status, const char* what) {
    if (status != CUBLAS_STATUS_SUCCESS)
        throw std::runtime_error(std::string("cuBLAS: ") + what + ": " + cublasGetStatusString(status));
}
namespace {

const float one = 1.0f, zero = 0.0f;

cublasStatus_t run_default(const Products& p, const ProductShape& s, const void* A, const void* B, void* C) {
    return cublasGemmEx(p.blas, s.ta, s.tb, s.m, s.n, s.k, &one, A, s.in, s.lda, B, s.in, s.ldb,
                        s.accumulate ? &one : &zero, C, s.out, s.ldc, s.compute, CUBLAS_GEMM_DEFAULT);
}

cublasStatus_t run_lt(const Products& p, const TunedProduct& t, const void* A, const void* B, void* C) {
    const float* beta = t.timing.shape.accumulate ? &one : &zero;
    return cublasLtMatmul(p.lt, t.desc, &one, A, t.a, B, t.b, beta, C, t.c, C, t.c, &t.algo, p.workspace,
                          p.workspace_bytes, p.stream);
}

// Microseconds per launch, over `reps` launches after two to warm up; negative if a launch failed.
template <class Launch>
double time_us(cudaStream_t stream, Launch&& launch, int reps = 10) {
    for (int i = 0; i < 2; ++i)
        if (launch() != CUBLAS_STATUS_SUCCESS) return -1;
    cudaEvent_t start, stop;
    STATETRACK_CUDA(cudaEventCreate(&start));
    STATETRACK_CUDA(cudaEventCreate(&stop));
    STATETRACK_CUDA(cudaEventRecord(start, stream));
    bool ok = true;
    for (int i = 0; i < reps && ok; ++i) ok = launch() == CUBLAS_STATUS_SUCCESS;
    STATETRACK_CUDA(cudaEventRecord(stop, stream));
    STATETRACK_CUDA(cudaEventSynchronize(stop));
    float ms = 0;
    STATETRACK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return ok ? 1e3 * double(ms) / reps : -1;
}

std::size_t element_bytes(cudaDataType_t type) { return type == CUDA_R_16BF ? 2 : 4; }

// The cublasLt description of a shape (column-major, as cuBLAS).
void describe(TunedProduct& t) {
    const ProductShape& s = t.timing.shape;
    STATETRACK_BLAS(cublasLtMatmulDescCreate(&t.desc, s.compute, CUDA_R_32F));
    STATETRACK_BLAS(cublasLtMatmulDescSetAttribute(t.desc, CUBLASLT_MATMUL_DESC_TRANSA, &s.ta, sizeof s.ta));
    STATETRACK_BLAS(cublasLtMatmulDescSetAttribute(t.desc, CUBLASLT_MATMUL_DESC_TRANSB, &s.tb, sizeof s.tb));
    const bool na = s.ta == CUBLAS_OP_N, nb = s.tb == CUBLAS_OP_N;
    STATETRACK_BLAS(cublasLtMatrixLayoutCreate(&t.a, s.in, na ? s.m : s.k, na ? s.k : s.m, s.lda));
    STATETRACK_BLAS(cublasLtMatrixLayoutCreate(&t.b, s.in, nb ? s.k : s.n, nb ? s.n : s.k, s.ldb));
    STATETRACK_BLAS(cublasLtMatrixLayoutCreate(&t.c, s.out, s.m, s.n, s.ldc));
}

// Times cuBLAS's default and every cublasLt candidate on the call's operands. A product that
// overwrites its output is timed in place (the chosen algorithm writes it afterwards); one that
// accumulates is timed on a scratch output, so the real output is added to once.
TunedProduct tune(Products& p, const ProductCall& call) {
    TunedProduct t;
    t.timing.shape = call.shape;
    const ProductShape& s = call.shape;
    void* out = call.C;
    if (s.accumulate) {
        const std::size_t bytes = std::size_t(s.ldc) * std::size_t(s.n) * element_bytes(s.out);
        if (bytes > max_tuning_scratch_bytes) {
            t.timing.why = "accumulating output larger than the tuning scratch";
            return t;
        }
        if (bytes > p.scratch_bytes) {
            if (p.scratch) STATETRACK_CUDA(cudaFree(p.scratch));
            p.scratch = nullptr, p.scratch_bytes = 0;
            STATETRACK_CUDA(cudaMalloc(&p.scratch, bytes));
            p.scratch_bytes = bytes;
        }
        out = p.scratch;
    }
    t.timing.default_us = time_us(p.stream, [&] { return run_default(p, s, call.A, call.B, out); });
    t.timing.best_us = p.lt_only ? 1e30 : t.timing.default_us;
    if (!p.lt) STATETRACK_BLAS(cublasLtCreate(&p.lt));
    describe(t);
    cublasLtMatmulPreference_t preference = nullptr;
    STATETRACK_BLAS(cublasLtMatmulPreferenceCreate(&preference));
    const std::uint64_t limit = p.workspace_bytes;
    STATETRACK_BLAS(cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &limit,
                                                          sizeof limit));
    cublasLtMatmulHeuristicResult_t found[16];
    int count = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(p.lt, t.desc, t.a, t.b, t.c, t.c, preference, 16, found, &count);
    cublasLtMatmulPreferenceDestroy(preference);
    if (status != CUBLAS_STATUS_SUCCESS) count = 0;
    for (int i = 0; i < count; ++i) {
        if (found[i].state != CUBLAS_STATUS_SUCCESS) continue;
        TunedProduct candidate = t;
        candidate.algo = found[i].algo;
        const double us = time_us(p.stream, [&] { return run_lt(p, candidate, call.A, call.B, out); });
        ++t.timing.candidates;
        if (us > 0 && us < t.timing.best_us) t.timing.best_us = us, t.algo = found[i].algo, t.timing.uses_lt = true;
    }
    if (!t.timing.uses_lt) t.timing.best_us = t.timing.default_us;
    if (t.timing.candidates == 0) t.timing.why = "cublasLt offered no algorithm";
    return t;
}

bool capturing(cudaStream_t stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    STATETRACK_CUDA(cudaStreamIsCapturing(stream, &status));
    return status != cudaStreamCaptureStatusNone;
}

}  // namespace

void run_product(Products& p, const ProductCall& call) {
    if (p.tune) {
        auto found = p.tuned.find(call.shape);
        if (found == p.tuned.end() && !capturing(p.stream)) found = p.tuned.emplace(call.shape, tune(p, call)).first;
        if (found != p.tuned.end() && found->second.timing.uses_lt) {
            STATETRACK_BLAS(run_lt(p, found->second, call.A, call.B, call.C));
            return;
        }
    }
    STATETRACK_BLAS(run_default(p, call.shape, call.A, call.B, call.C));
}

std::vector<ProductTiming> product_timings(const Products& p) {
    std::vector<ProductTiming> out;
    for (const auto& [shape, t] : p.tuned) out.push_back(t.timing);
    return out;
}

void destroy_products(Products& p) {
    for (auto& [shape, t] : p.tuned) {
        if (t.desc) cublasLtMatmulDescDestroy(t.desc);
        for (cublasLtMatrixLayout_t l : {t.a, t.b, t.c})
            if (l) cublasLtMatrixLayoutDestroy(l);
    }
    p.tuned.clear();
    if (p.lt) cublasLtDestroy(p.lt);
    if (p.scratch) cudaFree(p.scratch);
    p.lt = nullptr, p.scratch = nullptr, p.scratch_bytes = 0;
}

}  // namespace statetrack::gpu::cuda
