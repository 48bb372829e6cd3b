/* cuda.h — the CUDA backend's face beyond the backend table: what
 * `corvid doctor` and `corvid serve` ask of it (is there a usable GPU, what
 * is it, where would a model go) and what its tests use (device buffers,
 * the kernel compiler). The table itself (cv_backend_ops) is reached as
 * every backend is, through backend.h: cv_backend_open("cuda[:N]").
 *
 * Nothing of CUDA is needed to build or to run without a GPU: the driver,
 * NVRTC and their functions are found at run time (cuda_int.h), and every
 * function here says in its error what this machine lacks. docs/CUDA.md
 * is the design: what runs on the GPU today, the kernels and their cache,
 * the memory planner. */
#ifndef CV_CUDA_H
#define CV_CUDA_H

#include "backend/backend.h"

/* The oldest compute capability the kernels run on: 6.1, the first with
 * dp4a (int8 dot products of four), which every quantized matmul uses. */
#define CV_CUDA_MIN_SM 61

/* ---- finding and opening a device ---- */

/* "cuda" (device 0) or "cuda:N" -> N; CV_EINVAL for anything else. */
int cv_cuda_parse_device(const char *name, int *ordinal, cv_err *err);

/* The CUDA backend of device `ordinal`: the driver and NVRTC loaded, the
 * device's primary context retained, its compute capability checked
 * (>= CV_CUDA_MIN_SM, and one this NVRTC compiles for). One per device per
 * process, created on first success and never freed (like the CPU
 * backend); kernels are compiled when first needed. CV_EUNSUPPORTED with
 * what is missing: no driver (libcuda.so.1), a driver library without a
 * function corvid calls, the toolkit's stub library, no device or no
 * device N, a card too old, no NVRTC, a driver older than the NVRTC. cv_backend_open("cuda[:N]") calls
 * this. */
int cv_cuda_open(int ordinal, cv_backend **out, cv_err *err);

typedef struct cv_cuda_device_info {
    int ordinal;
    char name[96];         /* "NVIDIA H200" */
    int sm;                /* compute capability x 10 + minor: 90 */
    int n_sm;              /* multiprocessors */
    size_t total_bytes, free_bytes; /* device memory (free: now) */
    int driver_version;    /* 13000 for 13.0 */
    int nvrtc_major, nvrtc_minor;
    bool ptx;              /* NVRTC does not know this architecture: PTX the driver compiles */
    int target_sm;         /* what NVRTC compiles for */
} cv_cuda_device_info;

/* Facts of an opened CUDA backend (be from cv_cuda_open). */
void cv_cuda_device_get(const cv_backend *be, cv_cuda_device_info *out);

/* What CUDA this machine has, a line per item, each starting with
 * `prefix`: the driver (path, version) or why there is none, NVRTC
 * (path, version, architectures) or why none, every device (name, compute
 * capability, memory, whether corvid can use it and why not), and the
 * kernel cache. Returns whether cuda:0 opens. For `corvid doctor`. */
bool cv_cuda_describe(cv_buf *out, const char *prefix);

/* Where compiled kernels are kept: $CORVID_CUDA_CACHE, else
 * $XDG_CACHE_HOME/corvid/cuda, else $HOME/.cache/corvid/cuda; "" when
 * none of these is set (kernels are then compiled at every start). */
void cv_cuda_cache_dir(char *out, size_t n);

/* ---- device memory (tests and the check script; the table's buffers
 * will take this over: docs/CUDA.md) ---- */

/* n bytes of device memory on be, as a pointer the backend's operations
 * take for activations (cv_be_matmul's x and y). CV_ENOMEM names the size
 * and what is free. */
int cv_cuda_alloc(cv_backend *be, size_t n, void **out, cv_err *err);
void cv_cuda_free(cv_backend *be, void *p);
int cv_cuda_upload(cv_backend *be, void *dst, const void *src, size_t n, cv_err *err);
int cv_cuda_download(cv_backend *be, void *dst, const void *src, size_t n, cv_err *err);
/* n bytes from device memory to device memory, returning once copied (the
 * bandwidth probe of the check script). */
int cv_cuda_copy(cv_backend *be, void *dst, const void *src, size_t n, cv_err *err);
/* The first failure a stream's operations met (they return nothing: a
 * launch that fails is logged, recorded here, and the stream's later work
 * skipped), 0 when none; clears it. */
int cv_cuda_stream_error(cv_bstream *s, cv_err *err);

/* ---- where a model goes: the memory planner (cuda_plan.c) ----
 *
 * From what a model needs per layer (weights, routed experts, KV bytes a
 * position, recurrent state) and what serving it asks (context, sequences,
 * batch), choose which layers run on the device and which routed experts
 * stay in host RAM, so that weights + KV + state + scratch fit the
 * device's budget. llama.cpp's conventions: --gpu-layers N offloads the
 * last N layers; --cpu-moe keeps routed experts in RAM (the CPU backend
 * computes them); auto keeps the experts of the first k layers in RAM for
 * the smallest k that fits, else offloads as many layers as fit. The
 * token embedding stays in host RAM (a step reads a row a token); the
 * output matrix goes to the device with the last layer when every layer
 * does. */

typedef struct cv_offload_layer {
    size_t weights;      /* bytes of every tensor of the layer but its routed experts */
    size_t experts;      /* its routed experts' bytes (0: a dense FFN) */
    size_t kv_pos_bytes; /* KV bytes a cached position takes (0: a recurrent layer) */
    int32_t kv_window;   /* positions a sequence keeps: 0 all, else at most this many */
    size_t state_bytes;  /* recurrent state a sequence holds */
} cv_offload_layer;

/* What a model needs, from its file (cli/offload.c builds it from the
 * tensor index and cv_model_summary). */
typedef struct cv_offload_need {
    int32_t n_layer;
    cv_offload_layer *layers;    /* [n_layer], the caller's */
    size_t embd_bytes;           /* the token embedding: host RAM */
    size_t output_bytes;         /* output matrix (or the tied embedding), final norm, rope factors */
    bool tied;                   /* the output matrix is the embedding: on the host, counted once */
    size_t act_bytes_per_token;  /* device scratch a batch token takes (activation rows) */
    size_t logit_row_bytes;      /* one row of logits (n_vocab f32) */
    size_t attn_bytes_per_seq;   /* split-K attention partials a decoding sequence takes */
} cv_offload_need;

typedef struct cv_offload_opts {
    size_t device_free, device_total; /* what the device has now (cuMemGetInfo) */
    size_t budget;         /* --gpu-memory SIZE (at most device_free); 0: auto */
    int32_t gpu_layers;    /* --gpu-layers N (0..n_layer); -1: auto */
    bool cpu_moe;          /* --cpu-moe: every routed expert in host RAM */
    int32_t n_ctx, n_seq;  /* KV positions a sequence, sequences */
    int32_t batch_tokens;  /* tokens a step (scratch) */
    int32_t logit_rows;    /* logit rows a step copies (sampled tokens and drafts) */
} cv_offload_opts;

/* Room auto leaves on the device beyond the plan: the kernel modules, the
 * allocator's rounding and a margin for other processes, as the larger of
 * this and 5% of the device. */
#define CV_OFFLOAD_RESERVE ((size_t)512 << 20)

typedef struct cv_offload_plan {
    int32_t n_layer;
    int32_t gpu_first;      /* layers [gpu_first, n_layer) on the device; n_layer: none */
    int32_t n_cpu_moe;      /* layers [0, n_cpu_moe) keep their routed experts in host RAM */
    bool output_on_device;
    size_t budget;          /* what the plan had to fit in */
    size_t dev_weights, dev_kv, dev_state, dev_scratch, dev_total;
    size_t host_weights, host_kv, host_state;
    bool fits;              /* dev_total <= budget */
    bool auto_chosen;       /* the split was chosen (not given by --gpu-layers / --cpu-moe) */
} cv_offload_plan;

/* Chooses (auto) or checks (explicit flags) a split. CV_EINVAL for a
 * gpu_layers outside -1..n_layer. An explicit split that does not fit is
 * planned anyway with fits false; auto never plans one that does not fit
 * (at worst nothing on the device). */
int cv_offload_plan_make(const cv_offload_need *need, const cv_offload_opts *o, cv_offload_plan *out, cv_err *err);
/* "all 48 layers and the output on the device: weights 16.1 GiB, KV
 * 3.8 GiB (...), scratch 0.4 GiB = 20.3 of 22.4 GiB" and the host part. */
void cv_offload_plan_describe(const cv_offload_plan *p, cv_buf *out);

#endif
