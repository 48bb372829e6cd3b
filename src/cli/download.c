/* download.c — `corvid pull`'s engine: fetches one GGUF from a Hugging Face
 * style hub (or a plain URL) into the store with libcurl, and never leaves
 * an unchecked file under a model's name.
 *
 * What the hub sends (huggingface.co; mirrors and $HF_ENDPOINT servers copy
 * it): GET /ORG/REPO/resolve/REV/FILE answers a large (LFS or Xet) file with
 * a 302 to a CDN URL, and that redirect carries
 *   X-Linked-Etag: "<sha256 of the file, 64 hex>"   (quoted; W/ possible)
 *   X-Linked-Size: <bytes>
 *   X-Repo-Commit: <commit sha1>
 * while the CDN's own response carries none of them (only its own ETag and
 * Content-Length). A small file stored in git is served directly, with an
 * ETag that is the git blob sha1 (40 hex), not a sha256. So: X-Linked-* are
 * read from whichever response in the redirect chain has them, a sha256 is
 * checked only when the etag is 64 hex digits, and the size is checked
 * whenever one is known. Errors carry X-Error-Code (RepoNotFound,
 * EntryNotFound, RevisionNotFound, GatedRepo) and X-Error-Message; a 401 is
 * also what an anonymous request for a missing or private repo gets.
 * (Sources: huggingface_hub's file_download.get_hf_file_metadata and
 * utils._http.hf_raise_for_status; the hub's maintainers on X-Linked-Etag in
 * asteroid-team/asteroid#377; hf-hub#212 on the CDN answer lacking them.)
 *
 * HF_TOKEN is sent as `Authorization: Bearer` to the hub only: libcurl drops
 * a custom Authorization header when a redirect changes host, so the token
 * never reaches the CDN. The repo file list for ORG/REPO:QUANT comes from
 * GET /api/models/ORG/REPO (`siblings[].rfilename`).
 *
 * On disk: DEST.part receives the bytes (resumed with Range after a dropped
 * connection, up to CV_DOWNLOAD_ATTEMPTS transfers, and by a later pull),
 * DEST.part.json says what they belong to (URL, size, etag), an flock on the
 * .part keeps two pulls apart, and DEST appears only by rename after the
 * size, the sha256 and the GGUF reader's full validation passed. A file that
 * fails a check is deleted. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "cli/cli_int.h"
#include "cli/models.h"
#include "gguf/gguf.h"

#ifndef CV_VERSION
#define CV_VERSION "dev"
#endif

/* ---- small helpers ---- */

static int mkdirs(const char *dir, cv_err *err)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            if (mkdir(p, 0755) != 0 && errno != EEXIST)
                return cv_err_set(err, CV_EIO, "cannot create folder %s: %s", p, strerror(errno));
            *s = c;
            if (!c)
                break;
        }
    }
    return 0;
}

/* Percent-encodes what a URL path cannot carry; keeps '/'. */
static void url_path_append(cv_buf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("-._~/", c))
            cv_buf_putc(b, (char)c);
        else
            cv_buf_printf(b, "%%%02X", c);
    }
}

/* Copies at most n-1 bytes and terminates (header values may be long). */
static void scopy(char *dst, size_t n, const char *src)
{
    size_t len = strlen(src);
    if (len >= n)
        len = n - 1;
    memcpy(dst, src, len);
    dst[len] = 0;
}

/* "W/\"abc\"" -> "abc". */
static void etag_norm(const char *in, char *out, size_t n)
{
    if (!strncmp(in, "W/", 2))
        in += 2;
    size_t len = strlen(in);
    if (len >= 2 && in[0] == '"' && in[len - 1] == '"')
        in++, len -= 2;
    snprintf(out, n, "%.*s", (int)CV_MIN(len, n - 1), in);
}

static bool is_sha256_hex(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (; *s; s++)
        if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
            return false;
    return true;
}

/* ---- progress ---- */

typedef struct progress {
    int mode;           /* 0 quiet, 1 bar, 2 lines */
    const char *label;
    double t_start, t_last;
    int64_t start_bytes; /* on disk when this attempt began */
    int last_decile;
    bool drawn;
} progress;

static void progress_draw(progress *p, int64_t have, int64_t total, bool final)
{
    if (p->mode == 0)
        return;
    double now = cv_now_s();
    if (!final && now - p->t_last < (p->mode == 1 ? 0.1 : 15.0)) {
        if (p->mode != 2 || total <= 0 || (int)(have * 10 / total) == p->last_decile)
            return;
    }
    p->t_last = now;
    double dt = now - p->t_start;
    double rate = dt > 0.05 ? (double)(have - p->start_bytes) / dt : 0;
    char hv[32], tv[32], rv[32];
    cv_human_bytes(have, hv, sizeof hv);
    cv_human_bytes(total, tv, sizeof tv);
    cv_human_bytes((int64_t)rate, rv, sizeof rv);
    int pct = total > 0 ? (int)(have * 100 / total) : -1;
    if (p->mode == 1) {
        char bar[31];
        int fill = pct >= 0 ? pct * 30 / 100 : 0;
        for (int i = 0; i < 30; i++)
            bar[i] = i < fill ? '=' : (i == fill && pct >= 0 && pct < 100 ? '>' : ' ');
        bar[30] = 0;
        char eta[32] = "";
        if (rate > 0 && total > have) {
            int64_t s = (int64_t)((double)(total - have) / rate);
            snprintf(eta, sizeof eta, "  ETA %d:%02d:%02d", (int)(s / 3600), (int)(s / 60 % 60), (int)(s % 60));
        }
        if (pct >= 0)
            fprintf(stderr, "\r%s %3d%% [%s] %s / %s  %s/s%s\033[K", p->label, pct, bar, hv, tv, rv, eta);
        else
            fprintf(stderr, "\r%s %s  %s/s\033[K", p->label, hv, rv);
        if (final)
            fputc('\n', stderr);
        p->drawn = !final;
    } else {
        if (pct >= 0)
            fprintf(stderr, "%s: %s / %s (%d%%), %s/s\n", p->label, hv, tv, pct, rv);
        else
            fprintf(stderr, "%s: %s, %s/s\n", p->label, hv, rv);
        if (total > 0)
            p->last_decile = (int)(have * 10 / total);
    }
    fflush(stderr);
}

/* Ends a half-drawn bar line before another message is printed. */
static void progress_break(progress *p)
{
    if (p->mode == 1 && p->drawn) {
        fputc('\n', stderr);
        p->drawn = false;
    }
}

/* ---- the partial file's record ---- */

typedef struct part_meta {
    char url[2048];
    int64_t total;
    char etag[256];
} part_meta;

static void meta_read(const char *meta_path, part_meta *m)
{
    memset(m, 0, sizeof *m);
    m->total = -1;
    cv_buf b = { 0 };
    if (cv_read_file(meta_path, &b, 1 << 16, NULL) == 0) {
        json_t *j = cv_json_parse(b.data, b.len, NULL);
        const char *s;
        if (j && (s = json_string_value(json_object_get(j, "url"))))
            snprintf(m->url, sizeof m->url, "%s", s);
        if (j && (s = json_string_value(json_object_get(j, "etag"))))
            snprintf(m->etag, sizeof m->etag, "%s", s);
        if (j && json_is_integer(json_object_get(j, "total")))
            m->total = json_integer_value(json_object_get(j, "total"));
        json_decref(j);
    }
    cv_buf_free(&b);
}

static int meta_write(const char *meta_path, const part_meta *m, cv_err *err)
{
    json_t *j = json_pack("{s:s, s:I, s:s}", "url", m->url, "total", (json_int_t)m->total, "etag", m->etag);
    cv_buf b = { 0 };
    cv_json_dump(&b, j);
    json_decref(j);
    int rc = cv_write_file_atomic(meta_path, b.data, b.len, err);
    cv_buf_free(&b);
    return rc;
}

/* ---- one HTTP exchange ---- */

/* Per-response header state: curl calls the header callback for every
 * response of a redirect chain, so fields of the final response are reset at
 * each status line while the hub's X-Linked-* are kept from whichever
 * response had them. */
typedef struct xfer {
    CURL *curl;
    /* final response */
    long status;
    int64_t content_length;   /* -1: none */
    int64_t range_start, range_total; /* Content-Range; -1: none */
    char etag[256];
    char err_code[64];
    char err_msg[512];
    /* any response in the chain */
    char linked_etag[256];
    int64_t linked_size;      /* -1: none */
    char commit[64];
    /* body */
    cv_buf mem;               /* small bodies: API JSON, error text */
    size_t mem_max;
    bool to_file;
    int fd;                   /* .part, positioned at its end */
    int64_t offset;           /* bytes on disk before this transfer */
    int64_t written;          /* bytes written by this transfer */
    int64_t expect_total;     /* from an earlier attempt; -1: unknown */
    char expect_etag[256];    /* from an earlier attempt */
    bool started;             /* the body callback has decided what to do */
    part_meta *pm;            /* written once the file's identity is known */
    const char *meta_path;
    const char *dir;          /* for the free-space check */
    int64_t need_bytes, free_bytes; /* V_NOSPACE */
    int verdict;              /* 0 ok, else why the body was refused (see body_cb) */
    cv_sha256 *sha;
    progress *prog;
    const volatile int *cancel;
    int write_errno;
} xfer;

enum { V_OK = 0, V_RESTART, V_BAD_RANGE, V_TOO_LONG, V_WRITE, V_NOSPACE };

static size_t header_cb(char *p, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    if (len >= 5 && !strncasecmp(p, "HTTP/", 5)) {
        x->status = 0;
        x->content_length = -1;
        x->range_start = x->range_total = -1;
        x->etag[0] = x->err_code[0] = x->err_msg[0] = 0;
        const char *sp = memchr(p, ' ', len);
        if (sp)
            x->status = strtol(sp + 1, NULL, 10);
        return len;
    }
    const char *colon = memchr(p, ':', len);
    if (!colon)
        return len;
    size_t klen = (size_t)(colon - p);
    const char *v = colon + 1;
    size_t vlen = len - klen - 1;
    while (vlen && (*v == ' ' || *v == '\t'))
        v++, vlen--;
    while (vlen && (v[vlen - 1] == '\r' || v[vlen - 1] == '\n' || v[vlen - 1] == ' '))
        vlen--;
    if (vlen >= CV_MAX_HTTP_HEADER_VALUE)
        return len; /* ignored: no header we use is this long */
    char val[CV_MAX_HTTP_HEADER_VALUE];
    memcpy(val, v, vlen);
    val[vlen] = 0;
#define KEY(k) (klen == sizeof(k) - 1 && !strncasecmp(p, k, klen))
    if (KEY("content-length")) x->content_length = strtoll(val, NULL, 10);
    else if (KEY("etag")) etag_norm(val, x->etag, sizeof x->etag);
    else if (KEY("x-linked-etag")) etag_norm(val, x->linked_etag, sizeof x->linked_etag);
    else if (KEY("x-linked-size")) x->linked_size = strtoll(val, NULL, 10);
    else if (KEY("x-repo-commit")) scopy(x->commit, sizeof x->commit, val);
    else if (KEY("x-error-code")) scopy(x->err_code, sizeof x->err_code, val);
    else if (KEY("x-error-message")) scopy(x->err_msg, sizeof x->err_msg, val);
    else if (KEY("content-range")) {
        long long a = -1, b = -1, t = -1;
        if (sscanf(val, "bytes %lld-%lld/%lld", &a, &b, &t) == 3) {
            x->range_start = a;
            x->range_total = t;
        } else if (sscanf(val, "bytes */%lld", &t) == 1) {
            x->range_total = t;
        }
    }
#undef KEY
    return len;
}

/* The size the finished file must have, as far as this response says. */
static int64_t response_total(const xfer *x)
{
    if (x->linked_size > 0)
        return x->linked_size;
    if (x->status == 206 && x->range_total > 0)
        return x->range_total;
    if (x->status == 200 && x->content_length >= 0)
        return x->content_length;
    return -1;
}

static size_t body_cb(char *p, size_t size, size_t n, void *ud)
{
    xfer *x = ud;
    size_t len = size * n;
    if (!x->to_file || x->status < 200 || x->status >= 300) {
        /* API JSON or an error body: keep a bounded amount in memory. */
        if (x->mem.len + len > x->mem_max) {
            if (x->to_file)
                return len; /* error text beyond the bound is dropped */
            x->verdict = V_TOO_LONG;
            return 0;
        }
        cv_buf_append(&x->mem, p, len);
        return len;
    }
    if (!x->started) {
        x->started = true;
        int64_t total = response_total(x);
        char etag[256];
        snprintf(etag, sizeof etag, "%s", x->linked_etag[0] ? x->linked_etag : x->etag);
        /* The remote file changed since the partial was written: start over. */
        bool changed = (x->expect_total > 0 && total > 0 && total != x->expect_total) ||
                       (x->expect_etag[0] && etag[0] && strcmp(etag, x->expect_etag));
        if (x->offset > 0 && (changed || x->status == 200)) {
            /* A 200 to a Range request is the whole file again. */
            if (changed) {
                x->verdict = V_RESTART;
                return 0;
            }
            if (ftruncate(x->fd, 0) != 0 || lseek(x->fd, 0, SEEK_SET) != 0) {
                x->write_errno = errno;
                x->verdict = V_WRITE;
                return 0;
            }
            x->offset = 0;
            cv_sha256_init(x->sha);
        } else if (x->status == 206 && x->range_start != x->offset) {
            x->verdict = V_BAD_RANGE;
            return 0;
        }
        x->prog->start_bytes = x->offset;
        /* Record what these bytes belong to before writing any, so a pull
         * killed at any point resumes only against the same file. */
        if (total > 0) {
            struct statvfs vs;
            if (statvfs(x->dir, &vs) == 0 && (int64_t)vs.f_bavail * (int64_t)vs.f_frsize < total - x->offset) {
                x->need_bytes = total - x->offset;
                x->free_bytes = (int64_t)vs.f_bavail * (int64_t)vs.f_frsize;
                x->verdict = V_NOSPACE;
                return 0;
            }
        }
        if (x->pm) {
            x->pm->total = total;
            snprintf(x->pm->etag, sizeof x->pm->etag, "%s", etag);
            meta_write(x->meta_path, x->pm, NULL); /* best effort: without it a later pull starts over */
        }
    }
    int64_t total = response_total(x);
    if (total > 0 && x->offset + x->written + (int64_t)len > total) {
        x->verdict = V_TOO_LONG;
        return 0;
    }
    const char *q = p;
    size_t left = len;
    while (left) {
        ssize_t w = write(x->fd, q, left);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            x->write_errno = errno;
            x->verdict = V_WRITE;
            return 0;
        }
        q += w;
        left -= (size_t)w;
    }
    cv_sha256_update(x->sha, p, len);
    x->written += (int64_t)len;
    return len;
}

static int xferinfo_cb(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow)
{
    xfer *x = ud;
    if (x->cancel && *x->cancel)
        return 1;
    if (x->to_file && x->started && x->status >= 200 && x->status < 300) {
        int64_t total = response_total(x);
        if (total <= 0 && dltotal > 0)
            total = x->offset + dltotal;
        progress_draw(x->prog, x->offset + x->written, total, false);
    }
    return 0;
}

static void xfer_setup(xfer *x, const char *url, const char *token, struct curl_slist **hdrs, const char *range)
{
    CURL *c = x->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_USERAGENT, "corvid/" CV_VERSION);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)CV_DOWNLOAD_STALL_S);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, body_cb);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, x);
    /* Models are already compressed; identity keeps Content-Length and
     * Range offsets about the file's own bytes. */
    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, NULL);
    *hdrs = NULL;
    if (token && *token) {
        char h[4096];
        snprintf(h, sizeof h, "Authorization: Bearer %s", token);
        *hdrs = curl_slist_append(*hdrs, h);
    }
    if (range)
        curl_easy_setopt(c, CURLOPT_RANGE, range);
    if (*hdrs)
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
    x->status = 0;
    x->content_length = x->range_start = x->range_total = -1;
    x->linked_size = -1;
    x->etag[0] = x->linked_etag[0] = x->commit[0] = x->err_code[0] = x->err_msg[0] = 0;
    x->started = false;
    x->verdict = V_OK;
    x->written = 0;
    x->write_errno = 0;
    cv_buf_reset(&x->mem);
}

/* An HTTP error status as one sentence a user can act on. */
static int status_error(const xfer *x, const char *url, const char *what, bool have_token, cv_err *err)
{
    char detail[600] = "";
    if (x->err_msg[0])
        snprintf(detail, sizeof detail, " (%s)", x->err_msg);
    const char *code = x->err_code;
    if (!strcmp(code, "GatedRepo") || (x->status == 403 && have_token))
        return cv_err_set(err, CV_EINVAL,
                          "%s is gated and HF_TOKEN %s: accept its terms on the model's page, then set HF_TOKEN to "
                          "a token of that account%s [HTTP %ld from %s]",
                          what, have_token ? "was sent but has no access to it" : "is not set", detail, x->status, url);
    if (x->status == 401 || x->status == 403)
        return cv_err_set(err, CV_EINVAL,
                          "%s: access denied: the repo is private, gated or does not exist%s%s [HTTP %ld from %s]",
                          what, have_token ? " (HF_TOKEN was sent: check it can read this repo)"
                                           : "; if it is private or gated, set HF_TOKEN (sent as a Bearer token)",
                          detail, x->status, url);
    if (x->status == 404) {
        const char *which = !strcmp(code, "RepoNotFound")       ? "the repo does not exist"
                            : !strcmp(code, "RevisionNotFound") ? "the revision does not exist"
                            : !strcmp(code, "EntryNotFound")    ? "the repo has no such file"
                                                                : "not found";
        return cv_err_set(err, CV_ENOTFOUND, "%s: %s%s [HTTP 404 from %s]", what, which, detail, url);
    }
    if (x->status == 429)
        return cv_err_set(err, CV_EBUSY, "%s: the server is rate-limiting requests%s; retry later [HTTP 429 from %s]",
                          what, detail, url);
    return cv_err_set(err, CV_EIO, "%s: HTTP %ld%s from %s", what, x->status, detail, url);
}

/* ---- the hub's file list ---- */

static const char *endpoint_of(const cv_pull_opts *o, char *buf, size_t n)
{
    const char *e = o && o->endpoint ? o->endpoint : getenv("HF_ENDPOINT");
    if (!e || !*e)
        e = "https://huggingface.co";
    snprintf(buf, n, "%s", e);
    size_t len = strlen(buf);
    while (len && buf[len - 1] == '/')
        buf[--len] = 0;
    return buf;
}

static const char *token_of(const cv_pull_opts *o)
{
    const char *t = o && o->token ? o->token : getenv("HF_TOKEN");
    if (!t || !*t)
        t = getenv("HUGGING_FACE_HUB_TOKEN");
    return t && *t ? t : NULL;
}

static int pick_remote_file(CURL *c, cv_model_ref *ref, const cv_pull_opts *o, cv_err *err)
{
    char ep[1024];
    endpoint_of(o, ep, sizeof ep);
    cv_buf url = { 0 };
    cv_buf_printf(&url, "%s/api/models/%s", ep, ref->repo);
    if (strcmp(ref->revision, "main")) {
        cv_buf_puts(&url, "/revision/");
        url_path_append(&url, ref->revision);
    }
    xfer x = { .curl = c, .mem_max = CV_MAX_HUB_JSON_BYTES };
    progress quiet = { 0 };
    x.prog = &quiet;
    x.cancel = o ? o->cancel : NULL;
    struct curl_slist *h;
    const char *token = token_of(o);
    xfer_setup(&x, url.data, token, &h, NULL);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 1L);
    CURLcode cc = curl_easy_perform(c);
    curl_slist_free_all(h);
    int rc = 0;
    json_t *j = NULL;
    const char **names = NULL;
    if (cc != CURLE_OK) {
        if (x.verdict == V_TOO_LONG)
            rc = cv_err_set(err, CV_ELIMIT, "%s: the file list is larger than %u bytes", url.data,
                            CV_MAX_HUB_JSON_BYTES);
        else
            rc = cv_err_set(err, CV_EIO, "cannot list the files of %s: %s (%s)", ref->repo, curl_easy_strerror(cc),
                            url.data);
        goto fail;
    }
    if (x.status != 200) {
        rc = status_error(&x, url.data, ref->repo, token != NULL, err);
        goto fail;
    }
    cv_err jerr;
    if (!(j = cv_json_parse(x.mem.data, x.mem.len, &jerr))) {
        rc = cv_err_set(err, CV_ECORRUPT, "%s: the file list is not JSON: %s", url.data, jerr.msg);
        goto fail;
    }
    json_t *sib = json_object_get(j, "siblings");
    if (!json_is_array(sib)) {
        rc = cv_err_set(err, CV_ECORRUPT, "%s: the answer has no \"siblings\" file list", url.data);
        goto fail;
    }
    size_t n = json_array_size(sib);
    names = cv_xcalloc(n + 1, sizeof *names);
    int m = 0;
    for (size_t i = 0; i < n; i++) {
        const char *f = json_string_value(json_object_get(json_array_get(sib, i), "rfilename"));
        if (f)
            names[m++] = f;
    }
    int k = cv_model_pick_file(names, m, ref->quant, ref->repo, err);
    if (k < 0) {
        rc = k;
        goto fail;
    }
    /* The name came from the network: it must be a plain relative path. */
    const char *f = names[k];
    bool ok = *f && f[0] != '/' && !strstr(f, "..") && strlen(f) < sizeof ref->file;
    for (const char *s = f; ok && *s; s++)
        ok = (unsigned char)*s >= 0x20 && *s != '\\';
    if (!ok) {
        rc = cv_err_set(err, CV_ECORRUPT, "%s lists a file name corvid will not store: '%.200s'", ref->repo, f);
        goto fail;
    }
    snprintf(ref->file, sizeof ref->file, "%s", f);
    char store[PATH_MAX];
    if ((rc = cv_models_dir(store, sizeof store, err)))
        goto fail;
    if (snprintf(ref->path, sizeof ref->path, "%s/%s/%s", store, ref->repo, ref->file) >= (int)sizeof ref->path) {
        rc = cv_err_set(err, CV_ELIMIT, "model path for %s/%s is too long", ref->repo, ref->file);
        goto fail;
    }
    struct stat st;
    ref->local = stat(ref->path, &st) == 0 && S_ISREG(st.st_mode);
fail:
    free(names);
    json_decref(j);
    cv_buf_free(&x.mem);
    cv_buf_free(&url);
    return rc;
}

/* Hashes the first n bytes already in the .part (a resumed pull). */
static int hash_existing(int fd, int64_t n, cv_sha256 *sha, progress *p, cv_err *err)
{
    cv_sha256_init(sha);
    if (n <= 0)
        return 0;
    if (p->mode)
        fprintf(stderr, "%s: checking the %lld bytes already downloaded\n", p->label, (long long)n);
    char *buf = cv_xmalloc(1 << 20);
    int64_t done = 0;
    while (done < n) {
        ssize_t r = pread(fd, buf, (size_t)CV_MIN((int64_t)(1 << 20), n - done), done);
        if (r <= 0) {
            free(buf);
            return cv_err_set(err, CV_EIO, "reading the partial download: %s", r < 0 ? strerror(errno) : "short");
        }
        cv_sha256_update(sha, buf, (size_t)r);
        done += r;
    }
    free(buf);
    return 0;
}

/* ---- the pull ---- */

static bool retryable(CURLcode cc)
{
    switch (cc) {
    case CURLE_PARTIAL_FILE: case CURLE_RECV_ERROR: case CURLE_SEND_ERROR: case CURLE_OPERATION_TIMEDOUT:
    case CURLE_COULDNT_CONNECT: case CURLE_GOT_NOTHING: case CURLE_HTTP2: case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR: case CURLE_COULDNT_RESOLVE_HOST:
        return true;
    default:
        return false;
    }
}

static void sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* One file's download, phase by phase: dl_open (the .part, locked, and
 * what of it can be resumed), dl_transfer (attempts until the bytes are all
 * there), dl_commit (size, sha256, GGUF validation, rename). A failed phase
 * says whether its .part is worth keeping for a later resume (keep) or is
 * known bad (drop); fetch cleans up accordingly. */
typedef struct dl {
    CURL *curl;
    const cv_model_ref *ref;
    const char *url;
    const cv_pull_opts *o;
    cv_pull_result *res;
    const char *token;     /* hub token, never for a plain URL */
    char part[PATH_MAX + 16], meta[PATH_MAX + 32], dir[PATH_MAX];
    int fd;
    part_meta pm;
    cv_sha256 sha;
    progress prog;
    xfer x;
    int64_t have;          /* bytes on disk */
    int64_t total;         /* the file's size once known; -1: unknown */
    char linked_etag[256]; /* the hub's sha256 (or another etag) once known */
    int rc;                /* why an attempt failed (dl_attempt) */
    bool drop;             /* a failure leaves a .part that must go */
} dl;

static int dl_open(dl *d, cv_err *err)
{
    snprintf(d->part, sizeof d->part, "%s.part", d->ref->path);
    snprintf(d->meta, sizeof d->meta, "%s.part.json", d->ref->path);
    snprintf(d->dir, sizeof d->dir, "%s", d->ref->path);
    char *sl = strrchr(d->dir, '/');
    if (sl)
        *sl = 0;
    int rc = mkdirs(d->dir, err);
    if (rc)
        return rc;
    d->prog.mode = d->o ? d->o->progress : -1;
    if (d->prog.mode < 0)
        d->prog.mode = isatty(STDERR_FILENO) ? 1 : 2;
    const char *base = strrchr(d->ref->path, '/');
    d->prog.label = base ? base + 1 : d->ref->path;

    d->fd = open(d->part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (d->fd < 0)
        return cv_err_set(err, CV_EIO, "cannot create %s: %s", d->part, strerror(errno));
    if (flock(d->fd, LOCK_EX | LOCK_NB) != 0) {
        close(d->fd);
        d->fd = -1;
        return cv_err_set(err, CV_EBUSY, "another corvid pull is downloading %s (it holds %s)", d->ref->path,
                          d->part);
    }
    meta_read(d->meta, &d->pm);
    struct stat st;
    fstat(d->fd, &st);
    d->have = (int64_t)st.st_size;
    if (d->have > 0 && strcmp(d->pm.url, d->url)) {
        /* Bytes of something else (or of unknown origin): start over. */
        if (ftruncate(d->fd, 0) != 0)
            return cv_err_set(err, CV_EIO, "%s: %s", d->part, strerror(errno));
        d->have = 0;
        d->pm.total = -1;
        d->pm.etag[0] = 0;
    }
    snprintf(d->pm.url, sizeof d->pm.url, "%s", d->url);
    d->res->resumed_from = d->have;
    if ((rc = hash_existing(d->fd, d->have, &d->sha, &d->prog, err)))
        return rc;
    lseek(d->fd, 0, SEEK_END);
    d->total = d->pm.total;
    snprintf(d->linked_etag, sizeof d->linked_etag, "%s", d->pm.etag);
    return 0;
}

/* Empties the .part for a fresh start (its bytes are not the file's). */
static int dl_restart(dl *d, cv_err *err)
{
    if (ftruncate(d->fd, 0) != 0 || lseek(d->fd, 0, SEEK_SET) != 0)
        return cv_err_set(err, CV_EIO, "%s: %s", d->part, strerror(errno));
    d->have = 0;
    cv_sha256_init(&d->sha);
    return 0;
}

/* What one attempt came to. */
enum { STEP_DONE, STEP_RETRY, STEP_FAIL };

/* One transfer from d->have on; on STEP_RETRY last says why, on STEP_FAIL
 * err does (and d->drop whether the .part goes). */
static int dl_attempt(dl *d, int a, cv_err *last, cv_err *err)
{
    xfer *x = &d->x;
    char range[48];
    snprintf(range, sizeof range, "%lld-", (long long)d->have);
    struct curl_slist *h;
    xfer_setup(x, d->url, d->token, &h, d->have > 0 ? range : NULL);
    x->offset = d->have;
    x->expect_total = d->total;
    snprintf(x->expect_etag, sizeof x->expect_etag, "%s", d->linked_etag);
    d->prog.t_start = d->prog.t_last = cv_now_s();
    d->prog.start_bytes = d->have;
    d->prog.last_decile = d->total > 0 ? (int)(d->have * 10 / d->total) : 0;
    CURLcode cc = curl_easy_perform(d->curl);
    curl_slist_free_all(h);
    struct stat st;
    fstat(d->fd, &st);
    d->have = (int64_t)st.st_size; /* what is on disk is what counts */

    if (x->verdict == V_NOSPACE) {
        char need[32], free_[32];
        cv_human_bytes(x->need_bytes, need, sizeof need);
        cv_human_bytes(x->free_bytes, free_, sizeof free_);
        progress_break(&d->prog);
        d->rc = cv_err_set(err, CV_EIO, "not enough disk space for %s: it needs %s more and %s has %s free",
                           d->prog.label, need, d->dir, free_);
        return STEP_FAIL;
    }
    if (x->verdict == V_WRITE) {
        d->rc = cv_err_set(err, CV_EIO, "writing %s: %s", d->part, strerror(x->write_errno));
        return STEP_FAIL;
    }
    if (cc == CURLE_ABORTED_BY_CALLBACK && x->cancel && *x->cancel) {
        progress_break(&d->prog);
        d->rc = cv_err_set(err, CV_ECANCELED,
                           "interrupted: %lld bytes are kept in %s; run the same command to resume",
                           (long long)d->have, d->part);
        return STEP_FAIL;
    }
    /* What this response says about the file: the next attempt must resume
     * against the same one. */
    if (x->status >= 200 && x->status < 300) {
        int64_t t = response_total(x);
        const char *e = x->linked_etag[0] ? x->linked_etag : x->etag;
        if (x->verdict == V_RESTART) {
            progress_break(&d->prog);
            if (d->prog.mode)
                fprintf(stderr, "%s: the remote file changed since the partial download; starting over\n",
                        d->prog.label);
            if ((d->rc = dl_restart(d, err)))
                return STEP_FAIL;
            d->total = -1;
            d->linked_etag[0] = 0;
            snprintf(last->msg, sizeof last->msg, "the remote file changed");
            return STEP_RETRY;
        }
        if (t > 0)
            d->total = t;
        if (e[0])
            snprintf(d->linked_etag, sizeof d->linked_etag, "%s", e);
    }
    if (x->status == 416 && d->have > 0) {
        /* Range past the end: the partial is complete if it is as long as
         * the file, else it is not ours to trust. */
        if (x->range_total == d->have || (d->total > 0 && d->total == d->have)) {
            d->total = d->have;
            return STEP_DONE;
        }
        if ((d->rc = dl_restart(d, err)))
            return STEP_FAIL;
        snprintf(last->msg, sizeof last->msg, "the server refused the resume range");
        return STEP_RETRY;
    }
    const char *what = d->ref->repo[0] ? d->ref->repo : d->url;
    if (x->status >= 300 || (cc == CURLE_OK && x->status < 200)) {
        progress_break(&d->prog);
        if (x->status >= 500 || x->status == 408 || x->status == 429) {
            status_error(x, d->url, what, d->token != NULL, last);
            return STEP_RETRY;
        }
        d->rc = status_error(x, d->url, what, d->token != NULL, err);
        d->drop = true;
        return STEP_FAIL;
    }
    if (x->verdict == V_BAD_RANGE) {
        snprintf(last->msg, sizeof last->msg, "the server answered bytes from %lld, not %lld",
                 (long long)x->range_start, (long long)x->offset);
        return (d->rc = dl_restart(d, err)) ? STEP_FAIL : STEP_RETRY;
    }
    if (x->verdict == V_TOO_LONG) {
        progress_break(&d->prog);
        d->rc = cv_err_set(err, CV_ECORRUPT, "%s: the server sent more than the %lld bytes it announced", d->url,
                           (long long)d->total);
        d->drop = true;
        return STEP_FAIL;
    }
    if (cc != CURLE_OK) {
        cv_err_set(last, CV_EIO, "%s", curl_easy_strerror(cc));
        /* Nothing answering at all (no route, no DNS, a wrong HF_ENDPOINT)
         * is rarely a blip: one retry, not six. */
        bool unreachable = (cc == CURLE_COULDNT_CONNECT || cc == CURLE_COULDNT_RESOLVE_HOST) && !x->started;
        if (retryable(cc) && !(unreachable && a >= 1))
            return STEP_RETRY;
        progress_break(&d->prog);
        d->rc = cv_err_set(err, CV_EIO, "downloading %s: %s", d->url, curl_easy_strerror(cc));
        return STEP_FAIL;
    }
    if (d->total > 0 && d->have < d->total) {
        snprintf(last->msg, sizeof last->msg, "the connection ended at %lld of %lld bytes", (long long)d->have,
                 (long long)d->total);
        return STEP_RETRY;
    }
    progress_draw(&d->prog, d->have, d->total > 0 ? d->total : d->have, true);
    return STEP_DONE;
}

/* Attempts (resuming, with a growing delay) until the bytes are all there. */
static int dl_transfer(dl *d, cv_err *err)
{
    const cv_pull_opts *o = d->o;
    d->x = (xfer){ .curl = d->curl, .mem_max = 4096, .to_file = true, .fd = d->fd, .sha = &d->sha,
                   .prog = &d->prog, .cancel = o ? o->cancel : NULL, .pm = &d->pm, .meta_path = d->meta,
                   .dir = d->dir };
    int attempts = o && o->attempts > 0 ? o->attempts : CV_DOWNLOAD_ATTEMPTS;
    int delay = o && o->retry_delay_ms > 0 ? o->retry_delay_ms : 1000;
    cv_err last = { 0 };
    for (int a = 0; a < attempts; a++) {
        if (a > 0) {
            progress_break(&d->prog);
            if (d->prog.mode) {
                if (d->have)
                    fprintf(stderr, "%s: %s; resuming at %lld bytes (attempt %d of %d)\n", d->prog.label, last.msg,
                            (long long)d->have, a + 1, attempts);
                else
                    fprintf(stderr, "%s: %s; retrying (attempt %d of %d)\n", d->prog.label, last.msg, a + 1,
                            attempts);
            }
            sleep_ms(delay);
            if (!(o && o->retry_delay_ms > 0))
                delay = CV_MIN(delay * 2, 30000);
        }
        d->res->attempts = a + 1;
        int step = dl_attempt(d, a, &last, err);
        if (step == STEP_DONE)
            return 0;
        if (step == STEP_FAIL)
            return d->rc;
    }
    progress_break(&d->prog);
    if (d->have)
        return cv_err_set(err, CV_EIO,
                          "downloading %s failed %d times (last: %s); %lld bytes are kept in %s: run the same "
                          "command to resume",
                          d->url, d->res->attempts, last.msg, (long long)d->have, d->part);
    return cv_err_set(err, CV_EIO, "downloading %s failed %d times (last: %s)", d->url, d->res->attempts, last.msg);
}

/* The checks, then the file under its name: size, the hub's sha256 when it
 * gave one, the GGUF reader's validation, fsync and rename. */
static int dl_commit(dl *d, cv_err *err)
{
    cv_pull_result *res = d->res;
    res->bytes = d->have;
    d->drop = true;
    if (d->total > 0 && d->have != d->total)
        return cv_err_set(err, CV_ECORRUPT,
                          "%s: downloaded %lld bytes but the file has %lld; the download was deleted", d->url,
                          (long long)d->have, (long long)d->total);
    cv_sha256_final(&d->sha, res->sha256);
    if (is_sha256_hex(d->linked_etag)) {
        if (strcmp(res->sha256, d->linked_etag))
            return cv_err_set(err, CV_ECORRUPT,
                              "%s: sha256 mismatch: the hub says %s, the download is %s; the download was deleted, "
                              "run the same command to fetch it again",
                              d->url, d->linked_etag, res->sha256);
        res->sha256_checked = true;
    }
    cv_gguf *g;
    cv_err gerr;
    if (cv_gguf_open(d->part, &g, &gerr) != 0)
        return cv_err_set(err, CV_ECORRUPT, "%s is not a valid GGUF file (%s); the download was deleted", d->url,
                          gerr.msg);
    cv_gguf_close(g);
    d->drop = false;
    if (fsync(d->fd) != 0 || rename(d->part, d->ref->path) != 0)
        return cv_err_set(err, CV_EIO, "cannot move %s into place: %s", d->part, strerror(errno));
    unlink(d->meta);
    int dfd = open(d->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd); /* the rename itself is durable */
        close(dfd);
    }
    return 0;
}

static int fetch(CURL *c, const cv_model_ref *ref, const char *url, const cv_pull_opts *o, cv_pull_result *res,
                 cv_err *err)
{
    dl d = { .curl = c, .ref = ref, .url = url, .o = o, .res = res, .fd = -1 };
    d.token = ref->url[0] ? NULL : token_of(o); /* never send a hub token to another host */
    int rc = dl_open(&d, err);
    if (!rc)
        rc = dl_transfer(&d, err);
    if (!rc)
        rc = dl_commit(&d, err);
    if (d.fd >= 0) {
        struct stat st;
        /* A .part known bad goes; an empty one is kept only by a pull that
         * is still running. */
        if (rc && (d.drop || (fstat(d.fd, &st) == 0 && st.st_size == 0))) {
            unlink(d.part);
            unlink(d.meta);
        }
        close(d.fd);
    }
    cv_buf_free(&d.x.mem);
    return rc;
}

int cv_model_pull(cv_model_ref *ref, const cv_pull_opts *o, cv_pull_result *res, cv_err *err)
{
    cv_pull_result dummy;
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof *res);
    if (ref->kind != CV_MODEL_REMOTE) {
        if (!ref->local)
            return cv_err_set(err, CV_ENOTFOUND, "%s does not exist", ref->path);
        res->already_present = true;
        return 0;
    }
    /* An alias says what the file is: one corvid cannot run is refused
     * before a byte of it is fetched. */
    cv_err why = { 0 };
    if (ref->alias && cv_model_alias_runnable(ref->alias, &why))
        return cv_err_set(err, CV_EUNSUPPORTED, "%s; nothing was downloaded", why.msg);
    /* Reference-counted, and thread-safe in the libcurl Debian 12 ships
     * (>= 7.84), so each pull takes and releases its own reference. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
        return cv_err_set(err, CV_EIO, "libcurl failed to initialize");
    CURL *c = curl_easy_init();
    if (!c) {
        curl_global_cleanup();
        return cv_err_set(err, CV_ENOMEM, "libcurl could not create a transfer");
    }
    int rc = 0;
    cv_buf url = { 0 };
    if (!ref->url[0] && !ref->file[0] && (rc = pick_remote_file(c, ref, o, err)))
        goto done;
    if (ref->local) {
        res->already_present = true;
        struct stat st;
        if (stat(ref->path, &st) == 0)
            res->bytes = (int64_t)st.st_size;
        goto done;
    }
    if (ref->url[0]) {
        cv_buf_puts(&url, ref->url);
    } else {
        char ep[1024];
        cv_buf_printf(&url, "%s/%s/resolve/", endpoint_of(o, ep, sizeof ep), ref->repo);
        url_path_append(&url, ref->revision[0] ? ref->revision : "main");
        cv_buf_putc(&url, '/');
        url_path_append(&url, ref->file);
    }
    if ((rc = fetch(c, ref, url.data, o, res, err)))
        goto done;
    ref->local = true;
done:
    cv_buf_free(&url);
    curl_easy_cleanup(c);
    curl_global_cleanup();
    return rc;
}

int cv_model_ensure(const char *spec, const cv_pull_opts *o, char *path, size_t n, cv_err *err)
{
    cv_model_ref ref;
    int rc = cv_model_resolve(spec, &ref, err);
    if (rc)
        return rc;
    if (!ref.local) {
        if ((rc = cv_model_pull(&ref, o, NULL, err)))
            return rc;
    }
    if (strlen(ref.path) >= n)
        return cv_err_set(err, CV_ELIMIT, "model path %s is longer than %zu bytes", ref.path, n - 1);
    snprintf(path, n, "%s", ref.path);
    return 0;
}
