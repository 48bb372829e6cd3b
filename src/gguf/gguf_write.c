/* gguf_write.c — the GGUF v3 writer used by `synth`, the importers and
 * tests. Metadata is serialized into memory as it is set (keys keep their
 * insertion order; setting a key again replaces its bytes in place); tensor
 * data stays in the caller's buffers, or is produced by the caller's fill
 * function one tensor at a time, and is streamed at write time, so a
 * multi-GB model is never copied or held whole. The file is written to a temp name,
 * fsynced and renamed, so a reader never sees half a file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "gguf/gguf.h"

typedef struct wkv {
    char *key;
    cv_buf value; /* type (u32) + serialized value */
} wkv;

typedef struct wtensor {
    char *name;
    uint32_t type, n_dims;
    int64_t ne[CV_MAX_TENSOR_DIMS];
    const void *data;      /* NULL: produced by fill */
    cv_gguf_fill_fn fill;
    void *fill_ctx;
    size_t n_bytes;
} wtensor;

struct cv_gguf_writer {
    wkv *kvs;
    size_t n_kv, cap_kv;
    wtensor *tensors;
    size_t n_tensors, cap_tensors;
    uint32_t alignment;
};

cv_gguf_writer *cv_gguf_writer_create(void)
{
    cv_gguf_writer *w = cv_xcalloc(1, sizeof *w);
    w->alignment = 32;
    return w;
}

void cv_gguf_writer_destroy(cv_gguf_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_kv; i++) {
        free(w->kvs[i].key);
        cv_buf_free(&w->kvs[i].value);
    }
    for (size_t i = 0; i < w->n_tensors; i++)
        free(w->tensors[i].name);
    free(w->kvs);
    free(w->tensors);
    free(w);
}

void cv_gguf_writer_set_alignment(cv_gguf_writer *w, uint32_t alignment)
{
    if (alignment && !(alignment & (alignment - 1)))
        w->alignment = alignment;
}

/* Returns the (emptied) value buffer of key, creating the entry if needed. */
static cv_buf *slot(cv_gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kvs[i].key, key)) {
            cv_buf_reset(&w->kvs[i].value);
            return &w->kvs[i].value;
        }
    if (w->n_kv == w->cap_kv) {
        w->cap_kv = w->cap_kv ? w->cap_kv * 2 : 32;
        w->kvs = cv_xrealloc(w->kvs, w->cap_kv * sizeof *w->kvs);
    }
    wkv *e = &w->kvs[w->n_kv++];
    e->key = cv_xstrdup(key);
    memset(&e->value, 0, sizeof e->value);
    return &e->value;
}

static void put_u32(cv_buf *b, uint32_t v) { cv_buf_append(b, &v, 4); }
static void put_u64(cv_buf *b, uint64_t v) { cv_buf_append(b, &v, 8); }
static void put_str(cv_buf *b, cv_str s) { put_u64(b, s.len); cv_buf_append(b, s.ptr, s.len); }

void cv_gguf_writer_set_u32(cv_gguf_writer *w, const char *key, uint32_t v)
{
    cv_buf *b = slot(w, key);
    put_u32(b, CV_GGUF_UINT32);
    put_u32(b, v);
}

void cv_gguf_writer_set_i32(cv_gguf_writer *w, const char *key, int32_t v)
{
    cv_buf *b = slot(w, key);
    put_u32(b, CV_GGUF_INT32);
    cv_buf_append(b, &v, 4);
}

void cv_gguf_writer_set_u64(cv_gguf_writer *w, const char *key, uint64_t v)
{
    cv_buf *b = slot(w, key);
    put_u32(b, CV_GGUF_UINT64);
    put_u64(b, v);
}

void cv_gguf_writer_set_f32(cv_gguf_writer *w, const char *key, float v)
{
    cv_buf *b = slot(w, key);
    put_u32(b, CV_GGUF_FLOAT32);
    cv_buf_append(b, &v, 4);
}

void cv_gguf_writer_set_bool(cv_gguf_writer *w, const char *key, bool v)
{
    cv_buf *b = slot(w, key);
    put_u32(b, CV_GGUF_BOOL);
    cv_buf_putc(b, v ? 1 : 0);
}

void cv_gguf_writer_set_str(cv_gguf_writer *w, const char *key, cv_str v)
{
    cv_buf *b = slot(w, key);
    put_u32(b, CV_GGUF_STRING);
    put_str(b, v);
}

static size_t elem_size(cv_gguf_type t)
{
    switch (t) {
    case CV_GGUF_UINT8: case CV_GGUF_INT8: case CV_GGUF_BOOL: return 1;
    case CV_GGUF_UINT16: case CV_GGUF_INT16: return 2;
    case CV_GGUF_UINT32: case CV_GGUF_INT32: case CV_GGUF_FLOAT32: return 4;
    case CV_GGUF_UINT64: case CV_GGUF_INT64: case CV_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

void cv_gguf_writer_set_arr(cv_gguf_writer *w, const char *key, cv_gguf_type elem, uint64_t n, const void *data)
{
    cv_buf *b = slot(w, key);
    put_u32(b, CV_GGUF_ARRAY);
    put_u32(b, elem);
    put_u64(b, n);
    cv_buf_append(b, data, (size_t)n * elem_size(elem));
}

void cv_gguf_writer_set_str_arr(cv_gguf_writer *w, const char *key, uint64_t n, const cv_str *strs)
{
    cv_buf *b = slot(w, key);
    put_u32(b, CV_GGUF_ARRAY);
    put_u32(b, CV_GGUF_STRING);
    put_u64(b, n);
    for (uint64_t i = 0; i < n; i++)
        put_str(b, strs[i]);
}

void cv_gguf_writer_set_value(cv_gguf_writer *w, const char *key, const cv_gguf_value *v)
{
    switch (v->type) {
    case CV_GGUF_STRING: cv_gguf_writer_set_str(w, key, v->str); return;
    case CV_GGUF_ARRAY:
        if (v->arr.type == CV_GGUF_STRING)
            cv_gguf_writer_set_str_arr(w, key, v->arr.n, v->arr.strs);
        else
            cv_gguf_writer_set_arr(w, key, v->arr.type, v->arr.n, v->arr.data);
        return;
    default: break;
    }
    /* Scalars: re-encode in their own width. */
    cv_buf *b = slot(w, key);
    put_u32(b, v->type);
    size_t sz = elem_size(v->type);
    uint8_t raw[8] = { 0 };
    switch (v->type) {
    case CV_GGUF_BOOL: raw[0] = v->b; break;
    case CV_GGUF_FLOAT32: { float f = (float)v->f64; memcpy(raw, &f, 4); break; }
    case CV_GGUF_FLOAT64: memcpy(raw, &v->f64, 8); break;
    case CV_GGUF_INT8: case CV_GGUF_INT16: case CV_GGUF_INT32: case CV_GGUF_INT64:
        memcpy(raw, &v->i64, sz); /* little-endian: the low bytes */
        break;
    default: memcpy(raw, &v->u64, sz); break;
    }
    cv_buf_append(b, raw, sz);
}

void cv_gguf_writer_remove(cv_gguf_writer *w, const char *key)
{
    for (size_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->kvs[i].key, key)) {
            free(w->kvs[i].key);
            cv_buf_free(&w->kvs[i].value);
            memmove(&w->kvs[i], &w->kvs[i + 1], (w->n_kv - i - 1) * sizeof *w->kvs);
            w->n_kv--;
            return;
        }
}

static int add_tensor(cv_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims, const int64_t *ne,
                      const void *data, size_t n_bytes, cv_gguf_fill_fn fill, void *fill_ctx, cv_err *err)
{
    cv_ggml_type_info ti;
    if (!cv_ggml_type_info_get(type, &ti))
        return cv_err_set(err, CV_EINVAL, "tensor '%s': unknown type id %u", name, type);
    if (n_dims < 1 || n_dims > CV_MAX_TENSOR_DIMS)
        return cv_err_set(err, CV_EINVAL, "tensor '%s': %u dims, must be 1..%d", name, n_dims, CV_MAX_TENSOR_DIMS);
    int64_t n = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
        if (ne[d] < 0)
            return cv_err_set(err, CV_EINVAL, "tensor '%s': dim %u = %lld, must be >= 0", name, d, (long long)ne[d]);
        n *= ne[d];
    }
    if (ne[0] % ti.block_elems != 0)
        return cv_err_set(err, CV_EINVAL, "tensor '%s': row of %lld is not a multiple of the %s block (%u)", name,
                          (long long)ne[0], ti.name, ti.block_elems);
    size_t want = (size_t)(n / ti.block_elems) * ti.block_bytes;
    if (fill)
        n_bytes = want;
    if (want != n_bytes)
        return cv_err_set(err, CV_EINVAL, "tensor '%s': %zu bytes given, %s of that shape takes %zu", name, n_bytes,
                          ti.name, want);
    for (size_t i = 0; i < w->n_tensors; i++)
        if (!strcmp(w->tensors[i].name, name))
            return cv_err_set(err, CV_EINVAL, "tensor '%s' added twice", name);
    if (w->n_tensors == w->cap_tensors) {
        w->cap_tensors = w->cap_tensors ? w->cap_tensors * 2 : 64;
        w->tensors = cv_xrealloc(w->tensors, w->cap_tensors * sizeof *w->tensors);
    }
    wtensor *t = &w->tensors[w->n_tensors++];
    memset(t, 0, sizeof *t);
    t->name = cv_xstrdup(name);
    t->type = type;
    t->n_dims = n_dims;
    for (uint32_t d = 0; d < CV_MAX_TENSOR_DIMS; d++)
        t->ne[d] = d < n_dims ? ne[d] : 1;
    t->data = data;
    t->fill = fill;
    t->fill_ctx = fill_ctx;
    t->n_bytes = n_bytes;
    return 0;
}

int cv_gguf_writer_add_tensor(cv_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                              const int64_t *ne, const void *data, size_t n_bytes, cv_err *err)
{
    return add_tensor(w, name, type, n_dims, ne, data, n_bytes, NULL, NULL, err);
}

int cv_gguf_writer_add_tensor_fn(cv_gguf_writer *w, const char *name, uint32_t type, uint32_t n_dims,
                                 const int64_t *ne, cv_gguf_fill_fn fill, void *ctx, cv_err *err)
{
    return add_tensor(w, name, type, n_dims, ne, NULL, 0, fill, ctx, err);
}

/* Tensor i's bytes: its caller's buffer, or *tmp filled now (free it). */
static const void *tensor_bytes(const wtensor *t, void **tmp)
{
    *tmp = NULL;
    if (t->data || !t->fill)
        return t->data;
    *tmp = cv_xmalloc(t->n_bytes ? t->n_bytes : 1);
    t->fill(t->fill_ctx, *tmp, t->n_bytes);
    return *tmp;
}

static size_t align_up(size_t x, size_t a) { return (x + a - 1) / a * a; }

/* Header, metadata and tensor index, padded to the alignment. The general.alignment
 * key is written when it differs from the default. */
static void write_head(cv_gguf_writer *w, cv_buf *h)
{
    if (w->alignment != 32)
        cv_gguf_writer_set_u32(w, "general.alignment", w->alignment);
    put_u32(h, 0x46554747u);
    put_u32(h, 3);
    put_u64(h, w->n_tensors);
    put_u64(h, w->n_kv);
    for (size_t i = 0; i < w->n_kv; i++) {
        put_str(h, cv_str_of(w->kvs[i].key));
        cv_buf_append(h, w->kvs[i].value.data, w->kvs[i].value.len);
    }
    size_t off = 0;
    for (size_t i = 0; i < w->n_tensors; i++) {
        wtensor *t = &w->tensors[i];
        put_str(h, cv_str_of(t->name));
        put_u32(h, t->n_dims);
        for (uint32_t d = 0; d < t->n_dims; d++)
            put_u64(h, (uint64_t)t->ne[d]);
        put_u32(h, t->type);
        put_u64(h, off);
        off = align_up(off + t->n_bytes, w->alignment);
    }
    size_t pad = align_up(h->len, w->alignment) - h->len;
    static const char zeros[64] = { 0 };
    while (pad) {
        size_t k = CV_MIN(pad, sizeof zeros);
        cv_buf_append(h, zeros, k);
        pad -= k;
    }
}

int cv_gguf_writer_to_buf(cv_gguf_writer *w, cv_buf *out, cv_err *err)
{
    write_head(w, out);
    static const char zeros[64] = { 0 };
    for (size_t i = 0; i < w->n_tensors; i++) {
        void *tmp;
        cv_buf_append(out, tensor_bytes(&w->tensors[i], &tmp), w->tensors[i].n_bytes);
        free(tmp);
        /* Pad between tensors only, as the file writer does. */
        size_t pad = i + 1 < w->n_tensors ? align_up(w->tensors[i].n_bytes, w->alignment) - w->tensors[i].n_bytes : 0;
        while (pad) {
            size_t k = CV_MIN(pad, sizeof zeros);
            cv_buf_append(out, zeros, k);
            pad -= k;
        }
    }
    return 0;
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t k = write(fd, c, n > (1u << 30) ? (1u << 30) : n);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        c += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The file: the head, then each tensor's bytes, or with sparse a hole of
 * their size. */
static int write_file(cv_gguf_writer *w, const char *path, bool sparse, cv_err *err)
{
    cv_buf tmp = { 0 }, head = { 0 };
    cv_buf_printf(&tmp, "%s.tmp.%d", path, (int)getpid());
    int fd = open(tmp.data, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = 0;
    if (fd < 0) {
        rc = cv_err_set(err, CV_EIO, "%s: %s", tmp.data, strerror(errno));
        goto out;
    }
    write_head(w, &head);
    if (write_all(fd, head.data, head.len) != 0)
        goto io_fail;
    static const char zeros[64] = { 0 };
    if (sparse) {
        size_t end = 0;
        for (size_t i = 0; i < w->n_tensors; i++)
            end = (i + 1 < w->n_tensors ? align_up(end + w->tensors[i].n_bytes, w->alignment)
                                        : end + w->tensors[i].n_bytes);
        if (ftruncate(fd, (off_t)(head.len + end)) != 0)
            goto io_fail;
    }
    for (size_t i = 0; i < w->n_tensors && !sparse; i++) {
        void *tmp;
        const void *data = tensor_bytes(&w->tensors[i], &tmp);
        int wr = write_all(fd, data, w->tensors[i].n_bytes);
        free(tmp);
        if (wr != 0)
            goto io_fail;
        /* Pad between tensors only: the last one may end the file. */
        if (i + 1 < w->n_tensors) {
            size_t pad = align_up(w->tensors[i].n_bytes, w->alignment) - w->tensors[i].n_bytes;
            while (pad) {
                size_t k = CV_MIN(pad, sizeof zeros);
                if (write_all(fd, zeros, k) != 0)
                    goto io_fail;
                pad -= k;
            }
        }
    }
    if (fsync(fd) != 0)
        goto io_fail;
    if (close(fd) != 0) {
        fd = -1;
        goto io_fail;
    }
    fd = -1;
    if (rename(tmp.data, path) != 0)
        goto io_fail;
    goto out;
io_fail:
    rc = cv_err_set(err, CV_EIO, "writing %s: %s", path, strerror(errno));
    if (fd >= 0)
        close(fd);
    unlink(tmp.data);
out:
    cv_buf_free(&tmp);
    cv_buf_free(&head);
    return rc;
}

int cv_gguf_writer_write(cv_gguf_writer *w, const char *path, cv_err *err) { return write_file(w, path, false, err); }

int cv_gguf_writer_write_sparse(cv_gguf_writer *w, const char *path, cv_err *err)
{
    return write_file(w, path, true, err);
}
