/* gguf — the face of the formats layer: a validating GGUF v2/v3 reader over
 * mmap, a writer, the table of ggml tensor types (the format's block sizes),
 * and importers that turn other formats into GGUF.
 *
 * File layout (GGUF spec, little-endian throughout):
 *   u32 magic "GGUF" | u32 version (2 or 3) | u64 n_tensors | u64 n_kv
 *   n_kv × { string key | u32 value_type | value }
 *   n_tensors × { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml_type | u64 offset }
 *   padding to `general.alignment` (default 32)
 *   tensor data; each tensor at data_start + offset, offset a multiple of the alignment
 * where string = u64 len + bytes (no NUL) and an array value is
 * u32 elem_type + u64 n + n elements. (v1 used u32 counts; it is rejected.)
 *
 * Everything read from the file is validated before use; a bad file gives
 * one CV_ECORRUPT line naming the file and what is wrong. */
#ifndef CV_GGUF_H
#define CV_GGUF_H

#include "base/base.h"

/* ---- metadata value types (GGUF spec) ---- */

typedef enum cv_gguf_type {
    CV_GGUF_UINT8 = 0,
    CV_GGUF_INT8 = 1,
    CV_GGUF_UINT16 = 2,
    CV_GGUF_INT16 = 3,
    CV_GGUF_UINT32 = 4,
    CV_GGUF_INT32 = 5,
    CV_GGUF_FLOAT32 = 6,
    CV_GGUF_BOOL = 7,
    CV_GGUF_STRING = 8,
    CV_GGUF_ARRAY = 9,
    CV_GGUF_UINT64 = 10,
    CV_GGUF_INT64 = 11,
    CV_GGUF_FLOAT64 = 12,
    CV_GGUF_TYPE_COUNT
} cv_gguf_type;

const char *cv_gguf_type_name(cv_gguf_type t);

/* ---- tensor types (ggml ids, as stored in GGUF) ---- */

typedef enum cv_ggml_type {
    CV_GGML_F32 = 0,
    CV_GGML_F16 = 1,
    CV_GGML_Q4_0 = 2,
    CV_GGML_Q4_1 = 3,
    CV_GGML_Q5_0 = 6,
    CV_GGML_Q5_1 = 7,
    CV_GGML_Q8_0 = 8,
    CV_GGML_Q8_1 = 9,
    CV_GGML_Q2_K = 10,
    CV_GGML_Q3_K = 11,
    CV_GGML_Q4_K = 12,
    CV_GGML_Q5_K = 13,
    CV_GGML_Q6_K = 14,
    CV_GGML_Q8_K = 15,
    CV_GGML_IQ4_NL = 20,
    CV_GGML_IQ4_XS = 23,
    CV_GGML_I8 = 24,
    CV_GGML_I16 = 25,
    CV_GGML_I32 = 26,
    CV_GGML_I64 = 27,
    CV_GGML_F64 = 28,
    CV_GGML_BF16 = 30,
    CV_GGML_MXFP4 = 39,
    CV_GGML_TYPE_COUNT = 40 /* ids are < this; the table says which are known */
} cv_ggml_type;

/* Block geometry of a tensor type: a row of ne[0] elements takes
 * ne[0] / block_elems * block_bytes bytes, and ne[0] must be a multiple of
 * block_elems. Returns false for an id this table does not know. */
typedef struct cv_ggml_type_info {
    const char *name; /* "q4_K", as ggml names it */
    uint32_t block_elems;
    uint32_t block_bytes;
} cv_ggml_type_info;

bool cv_ggml_type_info_get(uint32_t type, cv_ggml_type_info *out);
/* Bytes of one row of n elements, or 0 if n is not a multiple of the block. */
size_t cv_ggml_row_bytes(uint32_t type, int64_t n);

/* ---- reader ---- */

typedef struct cv_gguf cv_gguf; /* an opened, validated file (read-only mmap) */

/* A metadata value. Scalars are decoded; strings point into the mapping
 * (not NUL-terminated); arrays give the element type, count and, for numeric
 * elements, the packed little-endian bytes (possibly unaligned: read them
 * with the cv_gguf_arr_* helpers), for string elements a table of slices. */
typedef struct cv_gguf_value {
    cv_gguf_type type;
    union {
        uint64_t u64; /* UINT8..UINT64 */
        int64_t i64;  /* INT8..INT64 */
        double f64;   /* FLOAT32, FLOAT64 */
        bool b;
        cv_str str;
        struct {
            cv_gguf_type type;
            uint64_t n;
            const void *data;   /* numeric elements */
            const cv_str *strs; /* string elements (array of n) */
        } arr;
    };
} cv_gguf_value;

typedef struct cv_gguf_tensor {
    const char *name; /* NUL-terminated copy */
    uint32_t n_dims;
    int64_t ne[CV_MAX_TENSOR_DIMS]; /* ne[0] is the row length; unused dims are 1 */
    uint32_t type;                  /* cv_ggml_type */
    uint64_t offset;                /* from the start of the data section */
    size_t n_bytes;
    const void *data;               /* inside the mapping, aligned as the file says */
} cv_gguf_tensor;

/* Opens and validates the file: header, every key and value, every tensor's
 * dims, type, offset, size, alignment and overlap, all against the file size.
 * On failure returns CV_ECORRUPT (or CV_EIO/CV_ENOTFOUND/CV_ELIMIT) and a
 * message that starts with the path. */
int cv_gguf_open(const char *path, cv_gguf **out, cv_err *err);
/* The same over a caller-owned buffer (tests, fuzzing); it must outlive g. */
int cv_gguf_open_memory(const void *data, size_t len, const char *name, cv_gguf **out, cv_err *err);
void cv_gguf_close(cv_gguf *g);

const char *cv_gguf_path(const cv_gguf *g);
uint32_t cv_gguf_version(const cv_gguf *g);
uint32_t cv_gguf_alignment(const cv_gguf *g);
size_t cv_gguf_file_bytes(const cv_gguf *g);

int64_t cv_gguf_n_kv(const cv_gguf *g);
cv_str cv_gguf_kv_key(const cv_gguf *g, int64_t i);
const cv_gguf_value *cv_gguf_kv_value(const cv_gguf *g, int64_t i);
/* NULL when the key is absent. */
const cv_gguf_value *cv_gguf_get(const cv_gguf *g, const char *key);

/* Typed lookups. Return 0 and fill *out when present with a compatible type
 * (any integer type for _int when the value fits; FLOAT32/64 for _float),
 * CV_ENOTFOUND when absent (out untouched, err untouched), CV_ECORRUPT
 * with a message naming the key when the type is wrong. */
int cv_gguf_get_int(const cv_gguf *g, const char *key, int64_t *out, cv_err *err);
int cv_gguf_get_float(const cv_gguf *g, const char *key, double *out, cv_err *err);
int cv_gguf_get_bool(const cv_gguf *g, const char *key, bool *out, cv_err *err);
int cv_gguf_get_str(const cv_gguf *g, const char *key, cv_str *out, cv_err *err);
/* An array whose elements have type elem (or any type when elem < 0). */
int cv_gguf_get_arr(const cv_gguf *g, const char *key, int elem, const cv_gguf_value **out, cv_err *err);

/* Element i of a numeric array value, converted. */
int64_t cv_gguf_arr_int(const cv_gguf_value *arr, uint64_t i);
double cv_gguf_arr_float(const cv_gguf_value *arr, uint64_t i);

int64_t cv_gguf_n_tensors(const cv_gguf *g);
const cv_gguf_tensor *cv_gguf_tensor_at(const cv_gguf *g, int64_t i);
/* NULL when absent. */
const cv_gguf_tensor *cv_gguf_find_tensor(const cv_gguf *g, const char *name);

/* ---- writer ---- */

/* Builds a GGUF v3 file in memory (metadata) and streams tensor data from
 * caller-owned buffers at write time. Keys keep insertion order; setting a
 * key again replaces its value in place. Tensor data pointers must stay valid
 * until cv_gguf_writer_write returns. */
typedef struct cv_gguf_writer cv_gguf_writer;

cv_gguf_writer *cv_gguf_writer_create(void);
void cv_gguf_writer_destroy(cv_gguf_writer *w);
void cv_gguf_writer_set_alignment(cv_gguf_writer *w, uint32_t alignment); /* power of two; default 32 */

void cv_gguf_writer_set_u32(cv_gguf_writer *w, const char *key, uint32_t v);
void cv_gguf_writer_set_i32(cv_gguf_writer *w, const char *key, int32_t v);
void cv_gguf_writer_set_u64(cv_gguf_writer *w, const char *key, uint64_t v);
void cv_gguf_writer_set_f32(cv_gguf_writer *w, const char *key, float v);
void cv_gguf_writer_set_bool(cv_gguf_writer *w, const char *key, bool v);
void cv_gguf_writer_set_str(cv_gguf_writer *w, const char *key, cv_str v);
/* Numeric array: n elements of type elem, packed little-endian in data (copied). */
void cv_gguf_writer_set_arr(cv_gguf_writer *w, const char *key, cv_gguf_type elem, uint64_t n, const void *data);
void cv_gguf_writer_set_str_arr(cv_gguf_writer *w, const char *key, uint64_t n, const cv_str *strs);
/* Copies one value (any type, arrays included) from an open file. */
void cv_gguf_writer_set_value(cv_gguf_writer *w, const char *key, const cv_gguf_value *v);
void cv_gguf_writer_remove(cv_gguf_writer *w, const char *key);

/* Adds a tensor; ne[0] is the row length. Fails with CV_EINVAL on an unknown
 * type, a row length that is not a multiple of the block, a size that does
 * not match n_bytes, or a duplicate name. */
int cv_gguf_writer_add_tensor(cv_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                              const int64_t *ne, const void *data, size_t n_bytes, cv_err *err);
/* The same for data produced at write time: fill(ctx, dst, n_bytes) writes
 * the tensor's bytes into a buffer of the writer's (freed once written), so
 * a file larger than memory can be generated tensor by tensor. ctx must
 * stay valid until the write returns. */
typedef void (*cv_gguf_fill_fn)(void *ctx, void *dst, size_t n_bytes);
int cv_gguf_writer_add_tensor_fn(cv_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                 const int64_t *ne, cv_gguf_fill_fn fill, void *ctx, cv_err *err);

/* Writes the file atomically (temp file + rename). */
int cv_gguf_writer_write(cv_gguf_writer *w, const char *path, cv_err *err);
/* The same file with its tensor data left a hole (ftruncate): the reader
 * opens it and every tensor reads as zeros, while the disk holds only the
 * head. Sizing the full shapes of large models in tests (the fill
 * functions are never called). */
int cv_gguf_writer_write_sparse(cv_gguf_writer *w, const char *path, cv_err *err);
/* Serializes to a buffer (tests, fuzz seeds). */
int cv_gguf_writer_to_buf(cv_gguf_writer *w, cv_buf *out, cv_err *err);

/* ---- importers ---- */

/* llama2.c checkpoint (float32 "legacy" v0 header: dim, hidden_dim, n_layers,
 * n_heads, n_kv_heads, vocab_size (negative = separate classifier), seq_len)
 * plus its tokenizer.bin, written as an F32 `llama` GGUF with a SentencePiece
 * vocabulary. */
int cv_import_llama2c(const char *checkpoint_path, const char *tokenizer_path, const char *out_path, cv_err *err);

#endif
