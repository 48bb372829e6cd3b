/* matmul_avx2.c — which AVX2 matmul implementation each weight type uses
 * (the tiles live beside their dtype in dt_*_avx2.c). A type without one
 * runs the generic vec_dot driver with its AVX2 dot. */
#include "kernels/kernels_int.h"

const cv_mm_impl *cv_mm_impl_avx2(uint32_t type)
{
    switch (type) {
    default:
        return NULL;
    }
}
