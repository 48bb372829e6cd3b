/* fuzz_gguf.c — libFuzzer target for the GGUF reader: any bytes must either
 * open (and then every value and tensor must be safe to touch) or fail with
 * an error, never crash or read out of bounds. Seeds: the files in
 * ../shared/testdata/vocab and reference/models (scripts/run-fuzz.sh). */
#include "gguf/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cv_gguf *g = NULL;
    cv_err err;
    if (cv_gguf_open_memory(data, size, "fuzz", &g, &err) != 0)
        return 0;
    volatile char sink = 0;
    for (int64_t i = 0; i < cv_gguf_n_kv(g); i++) {
        const cv_gguf_value *v = cv_gguf_kv_value(g, i);
        if (v->type == CV_GGUF_STRING && v->str.len)
            sink ^= v->str.ptr[v->str.len - 1];
        if (v->type == CV_GGUF_ARRAY && v->arr.type == CV_GGUF_STRING)
            for (uint64_t j = 0; j < v->arr.n; j++)
                if (v->arr.strs[j].len)
                    sink ^= v->arr.strs[j].ptr[v->arr.strs[j].len - 1];
        if (v->type == CV_GGUF_ARRAY && v->arr.type != CV_GGUF_STRING && v->arr.n)
            sink ^= (char)cv_gguf_arr_int(v, v->arr.n - 1);
    }
    for (int64_t i = 0; i < cv_gguf_n_tensors(g); i++) {
        const cv_gguf_tensor *t = cv_gguf_tensor_at(g, i);
        if (t->n_bytes)
            sink ^= ((const char *)t->data)[t->n_bytes - 1];
        (void)cv_gguf_find_tensor(g, t->name);
    }
    (void)sink;
    cv_gguf_close(g);
    return 0;
}
