/* gguf_types.c — the format's tables: names of metadata value types, and
 * the block geometry of every ggml tensor type id a GGUF file may carry.
 * Geometry is a fact of the file format (it decides tensor byte sizes), so
 * the reader validates with it even for types corvid cannot compute with;
 * the kernels layer adds functions for the types it supports. */
#include "gguf/gguf.h"

static const char *const value_type_names[CV_GGUF_TYPE_COUNT] = {
    [CV_GGUF_UINT8] = "uint8",   [CV_GGUF_INT8] = "int8",       [CV_GGUF_UINT16] = "uint16",
    [CV_GGUF_INT16] = "int16",   [CV_GGUF_UINT32] = "uint32",   [CV_GGUF_INT32] = "int32",
    [CV_GGUF_FLOAT32] = "float32", [CV_GGUF_BOOL] = "bool",     [CV_GGUF_STRING] = "string",
    [CV_GGUF_ARRAY] = "array",   [CV_GGUF_UINT64] = "uint64",   [CV_GGUF_INT64] = "int64",
    [CV_GGUF_FLOAT64] = "float64",
};

const char *cv_gguf_type_name(cv_gguf_type t)
{
    return (unsigned)t < CV_GGUF_TYPE_COUNT ? value_type_names[t] : "unknown";
}

/* Sizes follow each type's block struct: e.g. q4_K = f16 d, f16 dmin,
 * 12 bytes of 6-bit scales/mins, 128 bytes of nibbles = 144 per 256. */
static const cv_ggml_type_info type_table[CV_GGML_TYPE_COUNT] = {
    [CV_GGML_F32] = { "f32", 1, 4 },
    [CV_GGML_F16] = { "f16", 1, 2 },
    [CV_GGML_Q4_0] = { "q4_0", 32, 18 },
    [CV_GGML_Q4_1] = { "q4_1", 32, 20 },
    [CV_GGML_Q5_0] = { "q5_0", 32, 22 },
    [CV_GGML_Q5_1] = { "q5_1", 32, 24 },
    [CV_GGML_Q8_0] = { "q8_0", 32, 34 },
    [CV_GGML_Q8_1] = { "q8_1", 32, 36 },
    [CV_GGML_Q2_K] = { "q2_K", 256, 84 },
    [CV_GGML_Q3_K] = { "q3_K", 256, 110 },
    [CV_GGML_Q4_K] = { "q4_K", 256, 144 },
    [CV_GGML_Q5_K] = { "q5_K", 256, 176 },
    [CV_GGML_Q6_K] = { "q6_K", 256, 210 },
    [CV_GGML_Q8_K] = { "q8_K", 256, 292 },
    [16] = { "iq2_xxs", 256, 66 },
    [17] = { "iq2_xs", 256, 74 },
    [18] = { "iq3_xxs", 256, 98 },
    [19] = { "iq1_s", 256, 50 },
    [CV_GGML_IQ4_NL] = { "iq4_nl", 32, 18 },
    [21] = { "iq3_s", 256, 110 },
    [22] = { "iq2_s", 256, 82 },
    [CV_GGML_IQ4_XS] = { "iq4_xs", 256, 136 },
    [CV_GGML_I8] = { "i8", 1, 1 },
    [CV_GGML_I16] = { "i16", 1, 2 },
    [CV_GGML_I32] = { "i32", 1, 4 },
    [CV_GGML_I64] = { "i64", 1, 8 },
    [CV_GGML_F64] = { "f64", 1, 8 },
    [29] = { "iq1_m", 256, 56 },
    [CV_GGML_BF16] = { "bf16", 1, 2 },
    [34] = { "tq1_0", 256, 54 },
    [35] = { "tq2_0", 256, 66 },
    [CV_GGML_MXFP4] = { "mxfp4", 32, 17 },
};

bool cv_ggml_type_info_get(uint32_t type, cv_ggml_type_info *out)
{
    if (type >= CV_GGML_TYPE_COUNT || !type_table[type].name)
        return false;
    if (out)
        *out = type_table[type];
    return true;
}

size_t cv_ggml_row_bytes(uint32_t type, int64_t n)
{
    cv_ggml_type_info ti;
    if (n < 0 || !cv_ggml_type_info_get(type, &ti) || n % ti.block_elems != 0)
        return 0;
    return (size_t)(n / ti.block_elems) * ti.block_bytes;
}
