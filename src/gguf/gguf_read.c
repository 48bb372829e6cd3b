/* gguf_read.c — the validating GGUF v2/v3 reader. The file is mapped
 * read-only and parsed once with a bounds-checked cursor; nothing read from
 * it is used (as a length, a count, an offset) before it is checked against
 * the bytes that remain and against base/limits.h. After cv_gguf_open
 * succeeds, every key, value and tensor is known to lie inside the file,
 * tensors do not overlap, and their sizes match their dims and types, so
 * callers may use them without further checks. The layout is written out in
 * gguf.h. Invariant: a failure leaves nothing allocated and names the file. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gguf/gguf.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" read as a little-endian u32 */
#define GGUF_DEFAULT_ALIGNMENT 32

typedef struct kv {
    cv_str key;
    cv_gguf_value value;
} kv;

struct cv_gguf {
    char *path;
    const uint8_t *base; /* the mapping (or the caller's buffer) */
    size_t size;
    bool mapped;
    uint32_t version;
    uint32_t alignment;
    size_t data_start;

    kv *kvs;
    int64_t n_kv;
    cv_gguf_tensor *tensors;
    int64_t n_tensors;
    char *tensor_names; /* one block holding every NUL-terminated name */

    /* Open-addressing hash tables of indices (+1; 0 = empty). */
    uint32_t *kv_hash, *tensor_hash;
    uint32_t kv_hash_cap, tensor_hash_cap;
};

/* ---- bounds-checked cursor ---- */

typedef struct cursor {
    const uint8_t *p, *end, *base;
    const char *name; /* file name for messages */
    cv_err *err;
} cursor;

static size_t cur_offset(const cursor *c) { return (size_t)(c->p - c->base); }
static size_t cur_left(const cursor *c) { return (size_t)(c->end - c->p); }

static int truncated(cursor *c, const char *what, size_t need)
{
    return CV_CORRUPT(c->err, "%s: truncated: %s needs %zu bytes at offset %zu but only %zu remain", c->name, what,
                      need, cur_offset(c), cur_left(c));
}

static int take(cursor *c, size_t n, const char *what, const uint8_t **out)
{
    if (n > cur_left(c))
        return truncated(c, what, n);
    *out = c->p;
    c->p += n;
    return 0;
}

static int rd_u32(cursor *c, const char *what, uint32_t *v)
{
    const uint8_t *p = NULL;
    int rc = take(c, 4, what, &p);
    if (rc) return rc;
    memcpy(v, p, 4);
    return 0;
}

static int rd_u64(cursor *c, const char *what, uint64_t *v)
{
    const uint8_t *p = NULL;
    int rc = take(c, 8, what, &p);
    if (rc) return rc;
    memcpy(v, p, 8);
    return 0;
}

static int rd_str(cursor *c, const char *what, cv_str *s)
{
    uint64_t len;
    int rc = rd_u64(c, what, &len);
    if (rc) return rc;
    if (len > CV_MAX_GGUF_STRING)
        return CV_CORRUPT(c->err, "%s: %s at offset %zu has length %llu, more than the %u allowed", c->name, what,
                          cur_offset(c) - 8, (unsigned long long)len, CV_MAX_GGUF_STRING);
    const uint8_t *p = NULL;
    rc = take(c, (size_t)len, what, &p);
    if (rc) return rc;
    s->ptr = (const char *)p;
    s->len = (size_t)len;
    return 0;
}

static size_t scalar_size(cv_gguf_type t)
{
    switch (t) {
    case CV_GGUF_UINT8: case CV_GGUF_INT8: case CV_GGUF_BOOL: return 1;
    case CV_GGUF_UINT16: case CV_GGUF_INT16: return 2;
    case CV_GGUF_UINT32: case CV_GGUF_INT32: case CV_GGUF_FLOAT32: return 4;
    case CV_GGUF_UINT64: case CV_GGUF_INT64: case CV_GGUF_FLOAT64: return 8;
    default: return 0;
    }
}

/* Decodes one scalar of type t at p into v (the type is already valid). */
static void decode_scalar(cv_gguf_type t, const uint8_t *p, cv_gguf_value *v)
{
    v->type = t;
    switch (t) {
    case CV_GGUF_UINT8: v->u64 = p[0]; break;
    case CV_GGUF_INT8: v->i64 = (int8_t)p[0]; break;
    case CV_GGUF_BOOL: v->b = p[0] != 0; break;
    case CV_GGUF_UINT16: { uint16_t x; memcpy(&x, p, 2); v->u64 = x; break; }
    case CV_GGUF_INT16: { int16_t x; memcpy(&x, p, 2); v->i64 = x; break; }
    case CV_GGUF_UINT32: { uint32_t x; memcpy(&x, p, 4); v->u64 = x; break; }
    case CV_GGUF_INT32: { int32_t x; memcpy(&x, p, 4); v->i64 = x; break; }
    case CV_GGUF_FLOAT32: { float x; memcpy(&x, p, 4); v->f64 = x; break; }
    case CV_GGUF_UINT64: { uint64_t x; memcpy(&x, p, 8); v->u64 = x; break; }
    case CV_GGUF_INT64: { int64_t x; memcpy(&x, p, 8); v->i64 = x; break; }
    case CV_GGUF_FLOAT64: { double x; memcpy(&x, p, 8); v->f64 = x; break; }
    default: break;
    }
}

static int rd_value(cursor *c, cv_str key, uint32_t type, cv_gguf_value *v)
{
    if (type >= CV_GGUF_TYPE_COUNT)
        return CV_CORRUPT(c->err, "%s: key '%.*s' has value type %u; valid types are 0..%d", c->name, (int)key.len,
                          key.ptr, type, CV_GGUF_TYPE_COUNT - 1);
    if (type == CV_GGUF_STRING) {
        v->type = CV_GGUF_STRING;
        return rd_str(c, "a string value", &v->str);
    }
    if (type != CV_GGUF_ARRAY) {
        const uint8_t *p = NULL;
        int rc = take(c, scalar_size(type), "a value", &p);
        if (rc) return rc;
        decode_scalar(type, p, v);
        if (type == CV_GGUF_BOOL && p[0] > 1)
            return CV_CORRUPT(c->err, "%s: key '%.*s' is a bool stored as %u; must be 0 or 1", c->name,
                              (int)key.len, key.ptr, p[0]);
        return 0;
    }
    uint32_t et;
    uint64_t n;
    int rc = rd_u32(c, "an array element type", &et);
    if (!rc) rc = rd_u64(c, "an array length", &n);
    if (rc) return rc;
    if (et >= CV_GGUF_TYPE_COUNT)
        return CV_CORRUPT(c->err, "%s: array '%.*s' has element type %u; valid types are 0..%d", c->name,
                          (int)key.len, key.ptr, et, CV_GGUF_TYPE_COUNT - 1);
    if (et == CV_GGUF_ARRAY)
        return cv_err_set(c->err, CV_EUNSUPPORTED, "%s: array '%.*s' holds arrays, which corvid does not read",
                          c->name, (int)key.len, key.ptr);
    if (n > CV_MAX_GGUF_ARRAY)
        return CV_CORRUPT(c->err, "%s: array '%.*s' has %llu elements, more than the %u allowed", c->name,
                          (int)key.len, key.ptr, (unsigned long long)n, CV_MAX_GGUF_ARRAY);
    v->type = CV_GGUF_ARRAY;
    v->arr.type = (cv_gguf_type)et;
    v->arr.n = n;
    v->arr.data = NULL;
    v->arr.strs = NULL;
    if (et != CV_GGUF_STRING) {
        const uint8_t *p = NULL;
        rc = take(c, (size_t)n * scalar_size((cv_gguf_type)et), "array data", &p);
        if (rc) return rc;
        v->arr.data = p;
        if (et == CV_GGUF_BOOL)
            for (uint64_t i = 0; i < n; i++)
                if (p[i] > 1)
                    return CV_CORRUPT(c->err, "%s: array '%.*s' element %llu is a bool stored as %u", c->name,
                                      (int)key.len, key.ptr, (unsigned long long)i, p[i]);
        return 0;
    }
    /* Each string takes at least its 8-byte length: check before allocating. */
    if (n > cur_left(c) / 8)
        return truncated(c, "a string array", (size_t)n * 8);
    cv_str *strs = malloc((size_t)(n ? n : 1) * sizeof *strs);
    if (!strs)
        return cv_err_set(c->err, CV_ENOMEM, "%s: no memory for %llu strings of '%.*s'", c->name,
                          (unsigned long long)n, (int)key.len, key.ptr);
    for (uint64_t i = 0; i < n; i++) {
        rc = rd_str(c, "a string array element", &strs[i]);
        if (rc) {
            free(strs);
            return rc;
        }
    }
    v->arr.strs = strs;
    return 0;
}

/* ---- hash tables over names ---- */

static uint32_t hash_str(const char *s, size_t n)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static uint32_t table_cap(int64_t n)
{
    uint32_t cap = 16;
    while (cap < (uint64_t)n * 2)
        cap *= 2;
    return cap;
}

/* ---- validation helpers ---- */

static bool is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

static int parse_tensors(cursor *c, cv_gguf *g)
{
    /* Each tensor info takes at least 8 (name len) + 4 + 8 + 4 + 8 bytes. */
    if ((uint64_t)g->n_tensors > cur_left(c) / 32)
        return truncated(c, "the tensor index", (size_t)g->n_tensors * 32);
    g->tensors = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *g->tensors);
    cv_str *names = calloc((size_t)(g->n_tensors ? g->n_tensors : 1), sizeof *names);
    if (!g->tensors || !names) {
        free(names);
        return cv_err_set(c->err, CV_ENOMEM, "%s: no memory for %lld tensors", c->name, (long long)g->n_tensors);
    }
    size_t names_bytes = 0;
    int rc = 0;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        cv_gguf_tensor *t = &g->tensors[i];
        if ((rc = rd_str(c, "a tensor name", &names[i])))
            goto out;
        cv_str nm = names[i];
        if (nm.len == 0 || memchr(nm.ptr, 0, nm.len)) {
            rc = CV_CORRUPT(c->err, "%s: tensor %lld has an empty name or one with a NUL byte", c->name, (long long)i);
            goto out;
        }
        names_bytes += nm.len + 1;
        if ((rc = rd_u32(c, "a tensor rank", &t->n_dims)))
            goto out;
        if (t->n_dims < 1 || t->n_dims > CV_MAX_TENSOR_DIMS) {
            rc = CV_CORRUPT(c->err, "%s: tensor '%.*s' has %u dims, must be 1..%d", c->name, (int)nm.len, nm.ptr,
                            t->n_dims, CV_MAX_TENSOR_DIMS);
            goto out;
        }
        int64_t n_elems = 1;
        for (uint32_t d = 0; d < CV_MAX_TENSOR_DIMS; d++) {
            uint64_t ne = 1;
            if (d < t->n_dims && (rc = rd_u64(c, "a tensor dim", &ne)))
                goto out;
            if (ne > (uint64_t)INT64_MAX) {
                rc = CV_CORRUPT(c->err, "%s: tensor '%.*s' dim %u = %llu is negative as int64", c->name,
                                (int)nm.len, nm.ptr, d, (unsigned long long)ne);
                goto out;
            }
            t->ne[d] = (int64_t)ne;
            if (ne != 0 && n_elems > INT64_MAX / (int64_t)ne) {
                rc = CV_CORRUPT(c->err, "%s: tensor '%.*s' has more elements than fit in 64 bits", c->name,
                                (int)nm.len, nm.ptr);
                goto out;
            }
            n_elems *= (int64_t)ne;
        }
        if ((rc = rd_u32(c, "a tensor type", &t->type)))
            goto out;
        cv_ggml_type_info ti;
        if (!cv_ggml_type_info_get(t->type, &ti)) {
            rc = CV_CORRUPT(c->err, "%s: tensor '%.*s' has unknown type id %u", c->name, (int)nm.len, nm.ptr,
                            t->type);
            goto out;
        }
        if (t->ne[0] % ti.block_elems != 0) {
            rc = CV_CORRUPT(c->err, "%s: tensor '%.*s' (%s) has rows of %lld elements, not a multiple of its block "
                            "of %u", c->name, (int)nm.len, nm.ptr, ti.name, (long long)t->ne[0], ti.block_elems);
            goto out;
        }
        /* n_elems fits int64; bytes = n_elems / block * block_bytes fits too
         * unless absurd, which the file-size check below rejects. */
        uint64_t blocks = (uint64_t)n_elems / ti.block_elems;
        if (blocks > UINT64_MAX / ti.block_bytes) {
            rc = CV_CORRUPT(c->err, "%s: tensor '%.*s' is too large", c->name, (int)nm.len, nm.ptr);
            goto out;
        }
        uint64_t bytes = blocks * ti.block_bytes;
        if (bytes > SIZE_MAX) {
            rc = CV_CORRUPT(c->err, "%s: tensor '%.*s' is too large", c->name, (int)nm.len, nm.ptr);
            goto out;
        }
        t->n_bytes = (size_t)bytes;
        if ((rc = rd_u64(c, "a tensor offset", &t->offset)))
            goto out;
    }

    /* Names: one block of NUL-terminated copies, then uniqueness via hash. */
    g->tensor_names = malloc(names_bytes ? names_bytes : 1);
    g->tensor_hash_cap = table_cap(g->n_tensors);
    g->tensor_hash = calloc(g->tensor_hash_cap, sizeof *g->tensor_hash);
    if (!g->tensor_names || !g->tensor_hash) {
        rc = cv_err_set(c->err, CV_ENOMEM, "%s: no memory for the tensor index", c->name);
        goto out;
    }
    char *np = g->tensor_names;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        memcpy(np, names[i].ptr, names[i].len);
        np[names[i].len] = 0;
        g->tensors[i].name = np;
        np += names[i].len + 1;
        uint32_t mask = g->tensor_hash_cap - 1, h = hash_str(names[i].ptr, names[i].len) & mask;
        while (g->tensor_hash[h]) {
            cv_gguf_tensor *o = &g->tensors[g->tensor_hash[h] - 1];
            if (!strcmp(o->name, g->tensors[i].name)) {
                rc = CV_CORRUPT(c->err, "%s: tensor '%s' appears twice", c->name, o->name);
                goto out;
            }
            h = (h + 1) & mask;
        }
        g->tensor_hash[h] = (uint32_t)i + 1;
    }
out:
    free(names);
    return rc;
}

static int cmp_offset(const void *a, const void *b)
{
    const cv_gguf_tensor *x = *(const cv_gguf_tensor *const *)a, *y = *(const cv_gguf_tensor *const *)b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Places every tensor in the data section and checks alignment, bounds and
 * overlap. */
static int place_tensors(cursor *c, cv_gguf *g)
{
    size_t after_index = cur_offset(c);
    size_t a = g->alignment;
    size_t data_start = (after_index + a - 1) / a * a;
    if (data_start > g->size) {
        /* A vocab-only file may end right after its header (no padding). */
        if (g->n_tensors == 0) {
            g->data_start = g->size;
            return 0;
        }
        return truncated(c, "padding before tensor data", data_start - after_index);
    }
    g->data_start = data_start;
    size_t data_bytes = g->size - data_start;
    for (int64_t i = 0; i < g->n_tensors; i++) {
        cv_gguf_tensor *t = &g->tensors[i];
        if (t->offset % a != 0)
            return CV_CORRUPT(c->err, "%s: tensor '%s' offset %llu is not a multiple of the alignment %zu", c->name,
                              t->name, (unsigned long long)t->offset, a);
        if (t->offset > data_bytes || t->n_bytes > data_bytes - t->offset)
            return CV_CORRUPT(c->err, "%s: tensor '%s' (%zu bytes at data offset %llu) ends past the end of the file "
                              "(%zu bytes of data): the file is truncated or corrupt", c->name, t->name,
                              t->n_bytes, (unsigned long long)t->offset, data_bytes);
        t->data = g->base + data_start + t->offset;
    }
    if (g->n_tensors > 1) {
        const cv_gguf_tensor **order = malloc((size_t)g->n_tensors * sizeof *order);
        if (!order)
            return cv_err_set(c->err, CV_ENOMEM, "%s: no memory to check tensor overlap", c->name);
        for (int64_t i = 0; i < g->n_tensors; i++)
            order[i] = &g->tensors[i];
        qsort(order, (size_t)g->n_tensors, sizeof *order, cmp_offset);
        for (int64_t i = 1; i < g->n_tensors; i++) {
            if (order[i - 1]->offset + order[i - 1]->n_bytes > order[i]->offset) {
                int rc = CV_CORRUPT(c->err, "%s: tensors '%s' and '%s' overlap", c->name, order[i - 1]->name,
                                    order[i]->name);
                free(order);
                return rc;
            }
        }
        free(order);
    }
    return 0;
}

static int parse(cv_gguf *g, cv_err *err)
{
    cursor c = { g->base, g->base + g->size, g->base, g->path, err };
    uint32_t magic;
    int rc = rd_u32(&c, "the magic", &magic);
    if (rc) return rc;
    if (magic != GGUF_MAGIC)
        return CV_CORRUPT(err, "%s: not a GGUF file (magic %02x %02x %02x %02x, expected 'GGUF')", g->path,
                          g->base[0], g->base[1], g->base[2], g->base[3]);
    if ((rc = rd_u32(&c, "the version", &g->version)))
        return rc;
    if (g->version == 1)
        return cv_err_set(err, CV_EUNSUPPORTED, "%s: GGUF version 1 is obsolete; convert the file to v3", g->path);
    if (g->version != 2 && g->version != 3)
        return CV_CORRUPT(err, "%s: GGUF version %u; corvid reads versions 2 and 3", g->path, g->version);
    uint64_t n_tensors, n_kv;
    if ((rc = rd_u64(&c, "the tensor count", &n_tensors)) || (rc = rd_u64(&c, "the metadata count", &n_kv)))
        return rc;
    if (n_tensors > CV_MAX_GGUF_TENSORS)
        return CV_CORRUPT(err, "%s: %llu tensors, more than the %u allowed", g->path, (unsigned long long)n_tensors,
                          CV_MAX_GGUF_TENSORS);
    if (n_kv > CV_MAX_GGUF_KV)
        return CV_CORRUPT(err, "%s: %llu metadata keys, more than the %u allowed", g->path,
                          (unsigned long long)n_kv, CV_MAX_GGUF_KV);
    /* Each key/value takes at least 8 (key len) + 4 (type) + 1 bytes. */
    if (n_kv > cur_left(&c) / 13)
        return truncated(&c, "the metadata", (size_t)n_kv * 13);
    g->n_kv = (int64_t)n_kv;
    g->n_tensors = (int64_t)n_tensors;
    g->kvs = calloc((size_t)(n_kv ? n_kv : 1), sizeof *g->kvs);
    g->kv_hash_cap = table_cap(g->n_kv);
    g->kv_hash = calloc(g->kv_hash_cap, sizeof *g->kv_hash);
    if (!g->kvs || !g->kv_hash)
        return cv_err_set(err, CV_ENOMEM, "%s: no memory for %llu keys", g->path, (unsigned long long)n_kv);

    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    for (int64_t i = 0; i < g->n_kv; i++) {
        kv *e = &g->kvs[i];
        uint32_t type;
        if ((rc = rd_str(&c, "a metadata key", &e->key)) || (rc = rd_u32(&c, "a value type", &type)))
            return rc;
        if ((rc = rd_value(&c, e->key, type, &e->value)))
            return rc;
        uint32_t mask = g->kv_hash_cap - 1, h = hash_str(e->key.ptr, e->key.len) & mask;
        while (g->kv_hash[h]) {
            if (cv_str_eq(g->kvs[g->kv_hash[h] - 1].key, e->key))
                return CV_CORRUPT(err, "%s: metadata key '%.*s' appears twice", g->path, (int)e->key.len,
                                  e->key.ptr);
            h = (h + 1) & mask;
        }
        g->kv_hash[h] = (uint32_t)i + 1;
        if (cv_str_eqz(e->key, "general.alignment")) {
            if (e->value.type != CV_GGUF_UINT32 || !is_pow2(e->value.u64) || e->value.u64 > (1u << 20))
                return CV_CORRUPT(err, "%s: general.alignment must be a uint32 power of two up to 1 MiB", g->path);
            g->alignment = (uint32_t)e->value.u64;
        }
    }
    if ((rc = parse_tensors(&c, g)))
        return rc;
    return place_tensors(&c, g);
}

static int open_common(cv_gguf *g, cv_gguf **out, cv_err *err)
{
    int rc = parse(g, err);
    if (rc) {
        cv_gguf_close(g);
        return rc;
    }
    *out = g;
    return 0;
}

int cv_gguf_open(const char *path, cv_gguf **out, cv_err *err)
{
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cv_err_set(err, errno == ENOENT ? CV_ENOTFOUND : CV_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return cv_err_set(err, CV_EIO, "%s: not a regular file", path);
    }
    if (st.st_size < 24) {
        close(fd);
        return CV_CORRUPT(err, "%s: %lld bytes is too small for a GGUF header (24 bytes)", path,
                          (long long)st.st_size);
    }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (m == MAP_FAILED)
        return cv_err_set(err, CV_EIO, "%s: mmap: %s", path, strerror(e));
    cv_gguf *g = cv_xcalloc(1, sizeof *g);
    g->path = cv_xstrdup(path);
    g->base = m;
    g->size = (size_t)st.st_size;
    g->mapped = true;
    return open_common(g, out, err);
}

int cv_gguf_open_memory(const void *data, size_t len, const char *name, cv_gguf **out, cv_err *err)
{
    *out = NULL;
    if (len < 24)
        return CV_CORRUPT(err, "%s: %zu bytes is too small for a GGUF header (24 bytes)", name, len);
    cv_gguf *g = cv_xcalloc(1, sizeof *g);
    g->path = cv_xstrdup(name);
    g->base = data;
    g->size = len;
    return open_common(g, out, err);
}

void cv_gguf_close(cv_gguf *g)
{
    if (!g)
        return;
    if (g->kvs)
        for (int64_t i = 0; i < g->n_kv; i++)
            if (g->kvs[i].value.type == CV_GGUF_ARRAY)
                free((void *)g->kvs[i].value.arr.strs);
    free(g->kvs);
    free(g->kv_hash);
    free(g->tensors);
    free(g->tensor_names);
    free(g->tensor_hash);
    if (g->mapped)
        munmap((void *)g->base, g->size);
    free(g->path);
    free(g);
}

/* ---- accessors ---- */

const char *cv_gguf_path(const cv_gguf *g) { return g->path; }
uint32_t cv_gguf_version(const cv_gguf *g) { return g->version; }
uint32_t cv_gguf_alignment(const cv_gguf *g) { return g->alignment; }
size_t cv_gguf_file_bytes(const cv_gguf *g) { return g->size; }
int64_t cv_gguf_n_kv(const cv_gguf *g) { return g->n_kv; }
cv_str cv_gguf_kv_key(const cv_gguf *g, int64_t i) { return g->kvs[i].key; }
const cv_gguf_value *cv_gguf_kv_value(const cv_gguf *g, int64_t i) { return &g->kvs[i].value; }
int64_t cv_gguf_n_tensors(const cv_gguf *g) { return g->n_tensors; }
const cv_gguf_tensor *cv_gguf_tensor_at(const cv_gguf *g, int64_t i) { return &g->tensors[i]; }

const cv_gguf_value *cv_gguf_get(const cv_gguf *g, const char *key)
{
    size_t n = strlen(key);
    uint32_t mask = g->kv_hash_cap - 1, h = hash_str(key, n) & mask;
    while (g->kv_hash[h]) {
        const kv *e = &g->kvs[g->kv_hash[h] - 1];
        if (e->key.len == n && !memcmp(e->key.ptr, key, n))
            return &e->value;
        h = (h + 1) & mask;
    }
    return NULL;
}

const cv_gguf_tensor *cv_gguf_find_tensor(const cv_gguf *g, const char *name)
{
    if (!g->tensor_hash)
        return NULL;
    uint32_t mask = g->tensor_hash_cap - 1, h = hash_str(name, strlen(name)) & mask;
    while (g->tensor_hash[h]) {
        const cv_gguf_tensor *t = &g->tensors[g->tensor_hash[h] - 1];
        if (!strcmp(t->name, name))
            return t;
        h = (h + 1) & mask;
    }
    return NULL;
}

static int wrong_type(const cv_gguf *g, const char *key, const cv_gguf_value *v, const char *want, cv_err *err)
{
    return CV_CORRUPT(err, "%s: metadata '%s' is %s, expected %s", g->path, key, cv_gguf_type_name(v->type), want);
}

static bool is_unsigned(cv_gguf_type t)
{
    return t == CV_GGUF_UINT8 || t == CV_GGUF_UINT16 || t == CV_GGUF_UINT32 || t == CV_GGUF_UINT64;
}

static bool is_signed(cv_gguf_type t)
{
    return t == CV_GGUF_INT8 || t == CV_GGUF_INT16 || t == CV_GGUF_INT32 || t == CV_GGUF_INT64;
}

int cv_gguf_get_int(const cv_gguf *g, const char *key, int64_t *out, cv_err *err)
{
    const cv_gguf_value *v = cv_gguf_get(g, key);
    if (!v) return CV_ENOTFOUND;
    if (is_unsigned(v->type)) {
        if (v->u64 > (uint64_t)INT64_MAX)
            return CV_CORRUPT(err, "%s: metadata '%s' = %llu does not fit in int64", g->path, key,
                              (unsigned long long)v->u64);
        *out = (int64_t)v->u64;
        return 0;
    }
    if (is_signed(v->type)) {
        *out = v->i64;
        return 0;
    }
    return wrong_type(g, key, v, "an integer", err);
}

int cv_gguf_get_float(const cv_gguf *g, const char *key, double *out, cv_err *err)
{
    const cv_gguf_value *v = cv_gguf_get(g, key);
    if (!v) return CV_ENOTFOUND;
    if (v->type == CV_GGUF_FLOAT32 || v->type == CV_GGUF_FLOAT64) { *out = v->f64; return 0; }
    if (is_unsigned(v->type)) { *out = (double)v->u64; return 0; }
    if (is_signed(v->type)) { *out = (double)v->i64; return 0; }
    return wrong_type(g, key, v, "a number", err);
}

int cv_gguf_get_bool(const cv_gguf *g, const char *key, bool *out, cv_err *err)
{
    const cv_gguf_value *v = cv_gguf_get(g, key);
    if (!v) return CV_ENOTFOUND;
    if (v->type != CV_GGUF_BOOL) return wrong_type(g, key, v, "a bool", err);
    *out = v->b;
    return 0;
}

int cv_gguf_get_str(const cv_gguf *g, const char *key, cv_str *out, cv_err *err)
{
    const cv_gguf_value *v = cv_gguf_get(g, key);
    if (!v) return CV_ENOTFOUND;
    if (v->type != CV_GGUF_STRING) return wrong_type(g, key, v, "a string", err);
    *out = v->str;
    return 0;
}

int cv_gguf_get_arr(const cv_gguf *g, const char *key, int elem, const cv_gguf_value **out, cv_err *err)
{
    const cv_gguf_value *v = cv_gguf_get(g, key);
    if (!v) return CV_ENOTFOUND;
    if (v->type != CV_GGUF_ARRAY) return wrong_type(g, key, v, "an array", err);
    if (elem >= 0 && (int)v->arr.type != elem)
        return CV_CORRUPT(err, "%s: metadata '%s' is an array of %s, expected %s", g->path, key,
                          cv_gguf_type_name(v->arr.type), cv_gguf_type_name((cv_gguf_type)elem));
    *out = v;
    return 0;
}

int64_t cv_gguf_arr_int(const cv_gguf_value *arr, uint64_t i)
{
    size_t sz = scalar_size(arr->arr.type);
    cv_gguf_value v;
    decode_scalar(arr->arr.type, (const uint8_t *)arr->arr.data + i * sz, &v);
    if (is_unsigned(v.type)) return (int64_t)v.u64;
    if (is_signed(v.type)) return v.i64;
    if (v.type == CV_GGUF_BOOL) return v.b;
    return (int64_t)v.f64;
}

double cv_gguf_arr_float(const cv_gguf_value *arr, uint64_t i)
{
    size_t sz = scalar_size(arr->arr.type);
    cv_gguf_value v;
    decode_scalar(arr->arr.type, (const uint8_t *)arr->arr.data + i * sz, &v);
    if (v.type == CV_GGUF_FLOAT32 || v.type == CV_GGUF_FLOAT64) return v.f64;
    if (is_unsigned(v.type)) return (double)v.u64;
    if (is_signed(v.type)) return (double)v.i64;
    return v.b;
}
