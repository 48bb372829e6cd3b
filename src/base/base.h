/* base — the face of corvid's lowest layer: errors, logging, strings and
 * growable buffers, arenas, UTF-8, clocks, a seeded RNG, a persistent thread
 * pool and JSON helpers over jansson. Every other layer may include this
 * header; it includes nothing of corvid's.
 *
 * Conventions used throughout corvid (STYLE.md "Errors"): a function that can
 * fail returns int, 0 on success or a negative CV_E* code, and fills the
 * cv_err* passed as its last parameter (which may be NULL) with one sentence a
 * user can act on, naming the thing, the value and the allowed range. */
#ifndef CV_BASE_H
#define CV_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <jansson.h>

#include "base/limits.h"

#define CV_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define CV_MIN(a, b) ((a) < (b) ? (a) : (b))
#define CV_MAX(a, b) ((a) > (b) ? (a) : (b))
#define CV_UNUSED(x) ((void)(x))
#define CV_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define CV_MUST_USE __attribute__((warn_unused_result))

/* ---- errors ---- */

enum {
    CV_OK = 0,
    CV_EINVAL = -1,       /* bad input: a flag, a request, an argument */
    CV_ECORRUPT = -2,     /* a file is malformed or truncated */
    CV_ELIMIT = -3,       /* a limit from base/limits.h was exceeded */
    CV_ENOMEM = -4,
    CV_EIO = -5,          /* the OS refused: open, read, mmap, socket */
    CV_ECANCELED = -6,    /* the caller asked to stop */
    CV_EUNSUPPORTED = -7, /* valid but not implemented (a dtype, an arch) */
    CV_ENOTFOUND = -8,    /* a named thing does not exist */
    CV_EBUSY = -9,        /* overloaded; retry later */
};

typedef struct cv_err {
    int code;          /* 0 or a CV_E* code */
    const char *file;  /* where the failure was first recorded */
    int line;
    char msg[512];
} cv_err;

/* Records a failure and returns code, so callers can `return cv_err_set(...)`.
 * Safe with err == NULL. */
int cv_err_set(cv_err *err, int code, const char *fmt, ...) CV_PRINTF(3, 4);
int cv_err_at(cv_err *err, int code, const char *file, int line, const char *fmt, ...)
    CV_PRINTF(5, 6);
/* Prepends context ("loading x.gguf: ") to an already-set message. */
void cv_err_prefix(cv_err *err, const char *fmt, ...) CV_PRINTF(2, 3);
void cv_err_clear(cv_err *err);
/* A short name for a code: "invalid input", "corrupt file", ... */
const char *cv_err_name(int code);

/* A malformed file: records __FILE__:__LINE__ (like SQLITE_CORRUPT_BKPT), so
 * a debugger breakpoint on cv_err_at catches the first sighting. */
#define CV_CORRUPT(err, ...) cv_err_at((err), CV_ECORRUPT, __FILE__, __LINE__, __VA_ARGS__)

/* ---- logging ---- */

typedef enum { CV_LOG_DEBUG, CV_LOG_INFO, CV_LOG_WARN, CV_LOG_ERROR, CV_LOG_OFF } cv_log_level;

/* The logger is the one mutable global: lines go to stderr with a timestamp.
 * The level starts from $CORVID_LOG (debug|info|warn|error|off), default info. */
void cv_log_set_level(cv_log_level level);
cv_log_level cv_log_get_level(void);
void cv_log(cv_log_level level, const char *fmt, ...) CV_PRINTF(2, 3);
#define cv_debug(...) cv_log(CV_LOG_DEBUG, __VA_ARGS__)
#define cv_info(...) cv_log(CV_LOG_INFO, __VA_ARGS__)
#define cv_warn(...) cv_log(CV_LOG_WARN, __VA_ARGS__)
#define cv_error(...) cv_log(CV_LOG_ERROR, __VA_ARGS__)

/* ---- memory ---- */

/* Allocation that aborts with a message when the OS has no memory: used for
 * sizes corvid chose itself. Sizes that come from input are checked against
 * base/limits.h first and use the plain allocator with an error path. */
void *cv_xmalloc(size_t n);
void *cv_xcalloc(size_t n, size_t size);
void *cv_xrealloc(void *p, size_t n);
char *cv_xstrdup(const char *s);
char *cv_xstrndup(const char *s, size_t n);
/* 64-byte aligned (cache line and AVX); free with cv_aligned_free. */
void *cv_aligned_alloc(size_t n);
/* The same, its pages committed now: a buffer every forward pass writes
 * (activation rows, scratch) pays its first touch (a fault and a zeroed
 * page each, ~5 ms a MiB on a VM whose host backs pages on first use) when
 * the model loads, not in its first request (docs/PERF.md "Several models
 * in one server"). Its bytes are unspecified, as cv_aligned_alloc's. */
void *cv_aligned_alloc_committed(size_t n);
/* Commits the pages under [p, p + n) now (the kernel maps them, a zeroed
 * page each for fresh memory), so that the request that first writes them
 * does not fault. Under a hypervisor that shadows page tables (this VM)
 * each page's first write still traps, ~5 us a 4 KiB page, and that stays
 * in the first request: paid at load it cost more than it saves there
 * (docs/PERF.md "A model's first request"). */
void cv_pages_commit(void *p, size_t n);
void cv_aligned_free(void *p);

/* ---- strings and buffers ---- */

/* A borrowed slice; never relies on a NUL. */
typedef struct cv_str {
    const char *ptr;
    size_t len;
} cv_str;

#define CV_STR(lit) ((cv_str){ (lit), sizeof(lit) - 1 })
static inline cv_str cv_str_of(const char *z) { return (cv_str){ z, z ? strlen(z) : 0 }; }
static inline bool cv_str_eq(cv_str a, cv_str b) { return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0); }
static inline bool cv_str_eqz(cv_str a, const char *z) { return cv_str_eq(a, cv_str_of(z)); }
static inline bool cv_str_starts(cv_str a, cv_str prefix) { return a.len >= prefix.len && memcmp(a.ptr, prefix.ptr, prefix.len) == 0; }

/* Growable bytes, always NUL-terminated past len so data can be used as a C
 * string when it holds no NUL. A zeroed cv_buf is an empty buffer. */
typedef struct cv_buf {
    char *data;
    size_t len;
    size_t cap;
} cv_buf;

void cv_buf_reserve(cv_buf *b, size_t extra);  /* aborts on OOM */
int cv_buf_try_reserve(cv_buf *b, size_t extra) CV_MUST_USE; /* CV_ENOMEM */
void cv_buf_append(cv_buf *b, const void *p, size_t n);
static inline void cv_buf_puts(cv_buf *b, const char *z) { cv_buf_append(b, z, strlen(z)); }
static inline void cv_buf_putc(cv_buf *b, char c) { cv_buf_append(b, &c, 1); }
static inline void cv_buf_put_str(cv_buf *b, cv_str s) { cv_buf_append(b, s.ptr, s.len); }
void cv_buf_printf(cv_buf *b, const char *fmt, ...) CV_PRINTF(2, 3);
void cv_buf_vprintf(cv_buf *b, const char *fmt, va_list ap);
/* Appends s as a JSON string literal with quotes; invalid UTF-8 bytes become U+FFFD. */
void cv_buf_put_json_str(cv_buf *b, const char *s, size_t len);
/* The one JSON string escaper: appends s as the inside of a JSON string
 * literal (no quotes): '"', '\\' and controls escaped (\b \f \n \r \t,
 * else \u00xx), invalid UTF-8 bytes as U+FFFD, other characters raw or,
 * with ascii (Python's ensure_ascii), as \uxxxx (surrogate pairs above
 * U+FFFF). */
void cv_buf_put_json_chars(cv_buf *b, const char *s, size_t len, bool ascii);
/* Drops the first n bytes. */
void cv_buf_consume(cv_buf *b, size_t n);
static inline void cv_buf_reset(cv_buf *b) { b->len = 0; if (b->data) b->data[0] = 0; }
/* Returns the heap string (caller frees) and leaves b empty. */
char *cv_buf_steal(cv_buf *b);
void cv_buf_free(cv_buf *b);

/* ---- arena: per-request scratch, freed all at once ---- */

typedef struct cv_arena_chunk cv_arena_chunk;
typedef struct cv_arena {
    cv_arena_chunk *head;
    size_t used_bytes;  /* total handed out, for limits */
} cv_arena;

void *cv_arena_alloc(cv_arena *a, size_t n);  /* 16-byte aligned, zeroed; aborts on OOM */
char *cv_arena_strndup(cv_arena *a, const char *s, size_t n);
void cv_arena_reset(cv_arena *a);  /* frees all chunks */

/* ---- UTF-8 ---- */

/* Decodes one code point from s[0..len). Returns its byte length (1..4) and
 * stores it in *cp, or returns -1 for an invalid or incomplete sequence
 * (overlongs, surrogates and > U+10FFFF are invalid) and stores 0xFFFD. */
int cv_utf8_decode(const char *s, size_t len, uint32_t *cp);
/* Encodes cp into out (>= 4 bytes); returns the length, 0 if cp is invalid. */
int cv_utf8_encode(uint32_t cp, char *out);
bool cv_utf8_valid(const char *s, size_t len);
/* Length of the longest prefix of s that ends on a code-point boundary, where
 * a trailing incomplete (but so far valid) sequence is excluded. Streaming
 * detokenizers emit this prefix and hold the rest. */
size_t cv_utf8_complete_prefix(const char *s, size_t len);
/* Copies s into b with every invalid sequence replaced by U+FFFD. */
void cv_utf8_sanitize(cv_buf *b, const char *s, size_t len);

/* ---- clocks ---- */

uint64_t cv_now_ns(void);  /* monotonic */
double cv_now_s(void);     /* monotonic, seconds */
int64_t cv_unix_time(void); /* wall clock, seconds since the epoch */

/* ---- random numbers: xoshiro256**, seeded by splitmix64 ---- */

typedef struct cv_rng {
    uint64_t s[4];
} cv_rng;

void cv_rng_seed(cv_rng *r, uint64_t seed);
uint64_t cv_rng_u64(cv_rng *r);
float cv_rng_f32(cv_rng *r);         /* uniform in [0, 1) */
float cv_rng_normal(cv_rng *r);      /* standard normal */
uint64_t cv_rng_below(cv_rng *r, uint64_t n); /* uniform in [0, n), n > 0 */

/* ---- thread pool ---- */

/* A persistent pool of workers for data-parallel kernels. cv_pool_run calls
 * fn(ctx, ith, nth) once on each of nth threads, the caller being ith 0, and
 * returns when all have finished. Workers spin briefly between runs (a decode
 * step issues hundreds of runs) and then sleep on a futex, so an idle server
 * costs no CPU. Not reentrant: one run at a time per pool. */
typedef struct cv_pool cv_pool;
typedef void (*cv_pool_fn)(void *ctx, int ith, int nth);

cv_pool *cv_pool_create(int n_threads, cv_err *err);
void cv_pool_destroy(cv_pool *p);
/* Threads a run uses: the pool's own, or fewer after cv_pool_set_threads. */
int cv_pool_size(const cv_pool *p);
/* Runs from now on use the first n of the pool's threads (clamped to
 * 1..created); the others sleep through them. Several pools that share the
 * cores of one machine (several engines in one process) each take a part of
 * them this way. Call from the thread that runs the pool, between runs. */
void cv_pool_set_threads(cv_pool *p, int n);
void cv_pool_run(cv_pool *p, cv_pool_fn fn, void *ctx);
/* Items 0..n_items-1 as a work queue: each of the run's threads takes the
 * next item nobody has taken, fn(ctx, item, ith), until none is left, so a
 * thread that loses its core for a while delays the run by one item, not
 * by a fixed share (attention tiles, DeltaNet heads: items of uneven
 * cost). One item, or a pool of one thread, runs on the caller alone. */
typedef void (*cv_pool_item_fn)(void *ctx, int64_t item, int ith);
void cv_pool_run_items(cv_pool *p, int64_t n_items, cv_pool_item_fn fn, void *ctx);
/* Number of online CPUs (>= 1). */
int cv_cpu_count(void);
/* Splits [0, n) into nth nearly equal parts (aligned to `align` elements) and
 * gives part ith as [*lo, *hi). */
void cv_split_range(int64_t n, int ith, int nth, int64_t align, int64_t *lo, int64_t *hi);

/* ---- JSON (jansson) ---- */

/* Parses exactly len bytes; rejects NaN/Infinity, duplicate-key and depth
 * beyond CV_MAX_JSON_DEPTH; errors carry line and column. Caller owns the
 * result (json_decref). */
json_t *cv_json_parse(const char *s, size_t len, cv_err *err);
/* Typed getters for optional members: return the default when the key is
 * absent or null; fail with CV_EINVAL naming `what.key` when the type is wrong. */
int cv_json_get_str(json_t *obj, const char *key, const char *what, const char **out, cv_err *err);
int cv_json_get_int(json_t *obj, const char *key, const char *what, int64_t *out, cv_err *err);
int cv_json_get_num(json_t *obj, const char *key, const char *what, double *out, cv_err *err);
int cv_json_get_bool(json_t *obj, const char *key, const char *what, bool *out, cv_err *err);
/* Compact dump with key order kept, appended to b. */
void cv_json_dump(cv_buf *b, const json_t *v);
/* Reads a whole file into b (appending). */
int cv_read_file(const char *path, cv_buf *b, size_t max_bytes, cv_err *err);
/* Writes a file atomically: temp file in the same folder, fsync, rename. */
int cv_write_file_atomic(const char *path, const void *data, size_t len, cv_err *err);

/* ---- SHA-256 (sha256.c), FIPS 180-4: checks downloads and test fixtures ---- */

typedef struct cv_sha256 {
    uint32_t h[8];
    uint64_t n_bytes;
    uint8_t buf[64];
    size_t n_buf;
    bool use_ni; /* the CPU's SHA extensions (set by init; a test clears it to compare) */
} cv_sha256;

/* Picks the SHA-extension path when the CPU has it. */
void cv_sha256_init(cv_sha256 *s);
void cv_sha256_update(cv_sha256 *s, const void *p, size_t n);
/* Writes 64 lowercase hex digits and a NUL into hex. */
void cv_sha256_final(cv_sha256 *s, char hex[65]);

#endif
