/* offload.h — what serving a model on a GPU takes, read from its file for
 * the CUDA backend's memory planner (backend/cuda/cuda.h): shared by
 * `corvid serve` (--device, --gpu-layers, --gpu-memory, --cpu-moe) and the
 * planner's tests, which compile offload.c in. */
#ifndef CV_CLI_OFFLOAD_H
#define CV_CLI_OFFLOAD_H

#include "backend/cuda/cuda.h"
#include "gguf/gguf.h"
#include "model/model.h"

/* Fills *out from the tensor index of g and its summary s, with KV stored
 * as kv_type (CV_GGML_F16, F32 or Q8_0): each layer's tensors (blk.N.*;
 * its routed experts are the *_exps.* tensors, biases included, and any
 * whose third dimension is the expert count), the token embedding, the
 * output part
 * (output.weight or the tied embedding, the final norm and any other
 * global tensor), KV bytes a position per attention layer, each Gated
 * DeltaNet layer's share of the state, and the scratch a batch token, a
 * logit row and a decoding sequence's attention take (docs/CUDA.md gives
 * the formulas). out->layers is allocated; the caller frees it.
 * CV_ECORRUPT for a tensor named blk.N. with N outside the model's
 * layers. */
int cv_offload_need_from_model(const cv_gguf *g, const cv_model_summary *s, uint32_t kv_type, cv_offload_need *out,
                               cv_err *err);

#endif
