/* cuda_test.h — what the CUDA backend's tests share: the weight types the
 * GPU must take (every one the CPU computes with). */
#ifndef CV_CUDA_TEST_H
#define CV_CUDA_TEST_H

#include "kernels/kernels.h"

/* The GGUF types of weight matrices (cv_dtypes' is_weight) into out
 * (CV_GGML_TYPE_COUNT entries); returns their number. */
static inline int weight_types(uint32_t *out)
{
    int n = 0;
    for (uint32_t t = 0; t < CV_GGML_TYPE_COUNT; t++) {
        const cv_dtype *dt = cv_dtype_get(t);
        if (dt && dt->is_weight)
            out[n++] = t;
    }
    return n;
}

#endif
