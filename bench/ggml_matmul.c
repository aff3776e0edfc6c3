// ggml's CPU matmul of quantized weights against f32 activations, timed: the llama.cpp peer
// of bench/bench_dot_ggml.py (which builds ggml and this file; see there).
//
//   ggml_matmul TYPE M N K THREADS REPS WEIGHTS.f32 X.f32 OUT.f32
//
// TYPE: mxfp4, nvfp4 or f32 (the weights' ggml type).  The weights [N, K] (f32, row-major,
// read from WEIGHTS.f32) are quantized by ggml_quantize_chunk; x [M, K] is f32 (X.f32).  The
// product y [M, N] = x @ w^T is computed REPS times by a graph of one ggml_mul_mat on a
// thread pool of THREADS threads; the fastest time (ms) and the first result (OUT.f32) are
// written (FLUSH_MB: see below).  ggml converts x to its vec-dot type first (Q8_0 for MXFP4: 8-bit activations),
// so its results are approximate, unlike mxlower's.

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-cpu.h"
#include "ggml.h"

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static float *read_f32(const char *path, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "ggml_matmul: cannot open %s\n", path);
        exit(2);
    }
    float *p = malloc(n * sizeof(float));
    if (fread(p, sizeof(float), n, f) != n) {
        fprintf(stderr, "ggml_matmul: %s holds fewer than %zu f32 values\n", path, n);
        exit(2);
    }
    fclose(f);
    return p;
}

int main(int argc, char **argv) {
    if (argc != 10) {
        fprintf(stderr, "usage: ggml_matmul TYPE M N K THREADS REPS WEIGHTS.f32 X.f32 OUT.f32\n");
        return 2;
    }
    enum ggml_type type;
    if (!strcmp(argv[1], "mxfp4")) {
        type = GGML_TYPE_MXFP4;
    } else if (!strcmp(argv[1], "nvfp4")) {
        type = GGML_TYPE_NVFP4;
    } else if (!strcmp(argv[1], "f32")) {
        type = GGML_TYPE_F32;
    } else {
        fprintf(stderr, "ggml_matmul: unknown type %s (mxfp4, nvfp4, f32)\n", argv[1]);
        return 2;
    }
    const int64_t M = atoll(argv[2]), N = atoll(argv[3]), K = atoll(argv[4]);
    const int threads = atoi(argv[5]), reps = atoi(argv[6]);
    float *w = read_f32(argv[7], (size_t)N * K);
    float *x = read_f32(argv[8], (size_t)M * K);

    size_t mem = ggml_row_size(type, K) * N + (size_t)M * K * 4 + (size_t)M * N * 4 +
                 ggml_graph_overhead() + 16 * ggml_tensor_overhead() + (64 << 20);
    struct ggml_init_params ip = {mem, NULL, false};
    struct ggml_context *ctx = ggml_init(ip);
    struct ggml_tensor *tw = ggml_new_tensor_2d(ctx, type, K, N);
    struct ggml_tensor *tx = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, M);
    if (type == GGML_TYPE_F32) {
        memcpy(tw->data, w, (size_t)N * K * 4);
    } else {
        ggml_quantize_chunk(type, w, tw->data, 0, N, K, NULL);
    }
    memcpy(tx->data, x, (size_t)M * K * 4);
    struct ggml_tensor *ty = ggml_mul_mat(ctx, tw, tx);  // [N, M]: y[m][n]
    struct ggml_cgraph *gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, ty);

    struct ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
    struct ggml_threadpool *tp = ggml_threadpool_new(&tpp);
    struct ggml_cplan plan = ggml_graph_plan(gf, threads, tp);
    plan.work_data = plan.work_size ? malloc(plan.work_size) : NULL;
    // FLUSH_MB (environment): write that many MB between repeats, untimed, so the weights
    // come from memory rather than a cache that back-to-back repeats would keep them in
    const char *fl = getenv("FLUSH_MB");
    size_t flush = fl ? (size_t)atoll(fl) << 20 : 0;
    char *junk = flush ? malloc(flush) : NULL;
    double best = 1e30;
    for (int r = 0; r < reps + 1; r++) {  // the first run warms up
        if (junk) {
            memset(junk, r, flush);
        }
        double t0 = now_ms();
        if (ggml_graph_compute(gf, &plan) != GGML_STATUS_SUCCESS) {
            fprintf(stderr, "ggml_matmul: ggml_graph_compute failed\n");
            return 1;
        }
        double t = now_ms() - t0;
        if (r > 0 && t < best) {
            best = t;
        }
    }
    FILE *f = fopen(argv[9], "wb");
    if (!f || fwrite(ty->data, 4, (size_t)M * N, f) != (size_t)M * N) {
        fprintf(stderr, "ggml_matmul: cannot write %s\n", argv[9]);
        return 2;
    }
    fclose(f);
    printf("%.4f\n", best);
    ggml_threadpool_free(tp);
    ggml_free(ctx);
    free(plan.work_data);
    free(junk);
    free(w);
    free(x);
    return 0;
}
