#pragma once
// The matrix products of the CUDA backend: cuBLAS's default algorithm for each product, or, when
// the session asks for tuned products (CudaOptions::tune_products), the fastest of cuBLAS's default
// and cublasLt's candidates, measured once per shape on the session's own stream.
//
// Why: the weight gradients dW += dY^T X are products with a long inner dimension (every position
// of the batch) and small outputs; cuBLAS's one heuristic choice for them ran at about a third of
// the memory bandwidth on the H100 (docs/PERFORMANCE.md). Timing the candidates is the only way to
// know which is fastest on the card at hand. The choice depends on timings, so two runs can pick
// different algorithms and differ in the last bits: tuning is off unless asked for.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <compare>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace statetrack::gpu::cuda {

void check_blas(cublasStatus_t status, const char* what);  // throws std::runtime_error with cuBLAS's message
#define STATETRACK_BLAS(call) ::statetrack::gpu::cuda::check_blas((call), #call)

// C = op(A) op(B) + beta C in cuBLAS's column-major terms (cuda_backend.cu's Blas maps row-major
// arrays onto it).
struct ProductShape {
    cublasOperation_t ta, tb;
    int m, n, k, lda, ldb, ldc;
    cudaDataType_t in, out;
    cublasComputeType_t compute;
    bool accumulate;  // beta = 1 (else 0)
    auto operator<=>(const ProductShape&) const = default;
};

struct ProductCall {
    ProductShape shape;
    const void *A, *B;
    void* C;
};

// What tuning found for one shape: cuBLAS's default and the fastest candidate, microseconds per
// product; `candidates` is how many cublasLt algorithms were timed (0: not tuned, see `why`).
struct ProductTiming {
    ProductShape shape;
    double default_us = 0, best_us = 0;
    int candidates = 0;
    bool uses_lt = false;
    std::string why;
};

struct TunedProduct {
    ProductTiming timing;
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
};

// The session's products: the cuBLAS handle for the default path and, when tuning, the cublasLt
// handle, the choice per shape and a scratch output for timing accumulating products.
struct Products {
    cublasHandle_t blas = nullptr;
    cudaStream_t stream = nullptr;
    void* workspace = nullptr;  // shared by cuBLAS and cublasLt (the stream orders their use)
    std::size_t workspace_bytes = 0;
    bool tune = false;
    bool lt_only = false;  // ProductTuning::cublaslt: prefer cublasLt's fastest even if the default is faster
    cublasLtHandle_t lt = nullptr;
    std::map<ProductShape, TunedProduct> tuned;
    void* scratch = nullptr;  // tuning only: outputs of accumulating products while timed
    std::size_t scratch_bytes = 0;
};

// Largest output an accumulating product may have to be tuned (its scratch copy).
inline constexpr std::size_t max_tuning_scratch_bytes = 64u << 20;

// C = op(A) op(B) (+ C). With tuning on and the stream not being captured into a graph, a shape
// seen for the first time is timed first (its output is then written by the chosen algorithm).
void run_product(Products& products, const ProductCall& call);

std::vector<ProductTiming> product_timings(const Products& products);
void destroy_products(Products& products);  // frees the tuning state (not the handle or workspace)

}  // namespace statetrack::gpu::cuda
