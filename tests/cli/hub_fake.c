/* hub_fake.c — the fake Hugging Face hub of hub_fake.h over libmicrohttpd
 * (one thread per connection). Test-only. */
#include "hub_fake.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cli/models.h"

#define MAX_LOG 512

struct hub_fake {
    struct MHD_Daemon *d;
    int port;
    hub_file *files;
    int n_files;
    char token[256];
    pthread_mutex_t mu;
    hub_req log[MAX_LOG];
    int n_log;
    int cdn_gets[64]; /* per file */
    volatile int stopping;
    char extra[512];
};

static void log_req(hub_fake *h, struct MHD_Connection *c, const char *method, const char *url)
{
    pthread_mutex_lock(&h->mu);
    if (h->n_log < MAX_LOG) {
        hub_req *r = &h->log[h->n_log++];
        memset(r, 0, sizeof *r);
        snprintf(r->method, sizeof r->method, "%s", method);
        snprintf(r->path, sizeof r->path, "%s", url);
        const char *rg = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
        r->range_start = -1;
        if (rg && !strncmp(rg, "bytes=", 6))
            r->range_start = strtol(rg + 6, NULL, 10);
        const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
        if (a)
            snprintf(r->auth, sizeof r->auth, "%s", a);
    }
    pthread_mutex_unlock(&h->mu);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *body, const char *err_code,
                             const char *err_msg)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
    MHD_add_response_header(r, "Content-Type", "application/json");
    if (err_code)
        MHD_add_response_header(r, "X-Error-Code", err_code);
    if (err_msg)
        MHD_add_response_header(r, "X-Error-Message", err_msg);
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

/* A body streamed by callback so it can stop (drop) or slow down mid-way. */
typedef struct body_src {
    hub_fake *h;
    const unsigned char *data;
    size_t start, len;  /* bytes [start, start+len) of the file */
    size_t drop_after;  /* 0: never; else close the connection after this many bytes of the file */
    long flip_at;       /* -1: none; else a byte offset whose value is flipped */
    size_t stall_at;    /* 0: never */
} body_src;

static ssize_t body_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    body_src *b = cls;
    size_t abs = b->start + (size_t)pos;
    if (pos >= b->len)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (b->drop_after && abs >= b->drop_after)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    size_t n = CV_MIN(max, b->len - (size_t)pos);
    n = CV_MIN(n, (size_t)16384);
    if (b->drop_after && abs + n > b->drop_after)
        n = b->drop_after - abs;
    if (b->stall_at && abs >= b->stall_at) {
        if (b->h->stopping)
            return MHD_CONTENT_READER_END_WITH_ERROR;
        usleep(10000);
        return 0; /* nothing yet: MHD asks again */
    }
    if (b->stall_at && abs + n > b->stall_at)
        n = b->stall_at - abs;
    memcpy(buf, b->data + abs, n);
    if (b->flip_at >= 0 && (size_t)b->flip_at >= abs && (size_t)b->flip_at < abs + n)
        buf[(size_t)b->flip_at - abs] ^= 0x5a;
    return (ssize_t)n;
}

static void body_free(void *cls) { free(cls); }

static enum MHD_Result serve_bytes(hub_fake *h, struct MHD_Connection *c, int fi, bool cdn)
{
    hub_file *f = &h->files[fi];
    pthread_mutex_lock(&h->mu);
    int nth = fi < 64 ? h->cdn_gets[fi]++ : 0;
    pthread_mutex_unlock(&h->mu);
    size_t start = 0, len = f->len;
    unsigned status = 200;
    const char *rg = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Range");
    char crange[96] = "";
    if (rg && f->mode != HUB_NO_RANGE && !strncmp(rg, "bytes=", 6)) {
        long long a = strtoll(rg + 6, NULL, 10);
        if (a < 0 || (size_t)a >= f->len) {
            char cr[64];
            snprintf(cr, sizeof cr, "bytes */%zu", f->len);
            struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
            MHD_add_response_header(r, "Content-Range", cr);
            enum MHD_Result ok = MHD_queue_response(c, 416, r);
            MHD_destroy_response(r);
            return ok;
        }
        start = (size_t)a;
        len = f->len - start;
        status = 206;
        snprintf(crange, sizeof crange, "bytes %zu-%zu/%zu", start, f->len - 1, f->len);
    }
    body_src *b = calloc(1, sizeof *b);
    b->h = h;
    b->data = f->data;
    b->start = start;
    b->len = len;
    b->flip_at = -1;
    if ((f->mode == HUB_DROP_ONCE && nth == 0) || f->mode == HUB_DROP_ALWAYS)
        b->drop_after = f->drop_at;
    if (f->mode == HUB_CORRUPT)
        b->flip_at = (long)(f->len / 2);
    if (f->mode == HUB_STALL_AT)
        b->stall_at = f->drop_at;
    struct MHD_Response *r = MHD_create_response_from_callback(len, 16384, body_read, b, body_free);
    MHD_add_response_header(r, "Content-Type", "application/octet-stream");
    MHD_add_response_header(r, "Accept-Ranges", "bytes");
    if (crange[0])
        MHD_add_response_header(r, "Content-Range", crange);
    if (cdn) {
        MHD_add_response_header(r, "ETag", "\"cdn-object-etag-1\"");
    } else {
        /* A file kept in git: its ETag is the blob's sha1 (40 hex). */
        MHD_add_response_header(r, "ETag", "\"0123456789abcdef0123456789abcdef01234567\"");
    }
    enum MHD_Result ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

static bool repo_known(hub_fake *h, const char *repo, bool *gated)
{
    *gated = false;
    bool k = false;
    for (int i = 0; i < h->n_files; i++)
        if (!strcmp(h->files[i].repo, repo)) {
            k = true;
            *gated |= h->files[i].gated;
        }
    return k;
}

/* The hub's answers for a gated or unknown repo; NULL when access is fine. */
static enum MHD_Result access_check(hub_fake *h, struct MHD_Connection *c, const char *repo, bool *handled)
{
    *handled = true;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    char want[300];
    snprintf(want, sizeof want, "Bearer %s", h->token);
    bool good = auth && h->token[0] && !strcmp(auth, want);
    bool gated;
    if (!repo_known(h, repo, &gated)) {
        if (!auth) /* anonymous: the hub does not say whether it exists */
            return reply(c, 401, "{\"error\":\"Invalid username or password.\"}", "RepoNotFound",
                         "Repository not found");
        return reply(c, 404, "{\"error\":\"Repository not found\"}", "RepoNotFound", "Repository not found");
    }
    if (gated && !good) {
        if (!auth)
            return reply(c, 401, "{\"error\":\"Access to model is restricted.\"}", "GatedRepo",
                         "Access to model is restricted. You must have access to it and be authenticated.");
        return reply(c, 403, "{\"error\":\"Access to model is restricted.\"}", "GatedRepo",
                     "Access to model is restricted and you are not in the authorized list.");
    }
    *handled = false;
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_len, void **state)
{
    hub_fake *h = cls;
    if (!*state) { /* first call: headers only */
        *state = h;
        return MHD_YES;
    }
    log_req(h, c, method, url);
    char org[128], repo[128], rest[512];
    if (sscanf(url, "/api/models/%127[^/]/%127[^/?]", org, repo) == 2) {
        char full[300];
        snprintf(full, sizeof full, "%s/%s", org, repo);
        bool handled;
        enum MHD_Result r = access_check(h, c, full, &handled);
        if (handled)
            return r;
        json_t *sib = json_array();
        for (int i = 0; i < h->n_files; i++)
            if (!strcmp(h->files[i].repo, full))
                json_array_append_new(sib, json_pack("{s:s}", "rfilename", h->files[i].name));
        if (h->extra[0])
            json_array_append_new(sib, json_pack("{s:s}", "rfilename", h->extra));
        json_array_append_new(sib, json_pack("{s:s}", "rfilename", "README.md"));
        json_t *j = json_pack("{s:s, s:o}", "id", full, "siblings", sib);
        char *s = json_dumps(j, JSON_COMPACT);
        enum MHD_Result ok = reply(c, 200, s, NULL, NULL);
        free(s);
        json_decref(j);
        return ok;
    }
    bool cdn = !strncmp(url, "/cdn/", 5);
    int off = 0;
    if ((cdn && sscanf(url, "/cdn/%127[^/]/%127[^/]/%n", org, repo, &off) == 2) ||
        (!cdn && sscanf(url, "/%127[^/]/%127[^/]/resolve/main/%n", org, repo, &off) == 2)) {
        snprintf(rest, sizeof rest, "%s", url + off);
        char full[300];
        snprintf(full, sizeof full, "%s/%s", org, repo);
        if (!cdn) {
            bool handled;
            enum MHD_Result r = access_check(h, c, full, &handled);
            if (handled)
                return r;
        }
        int fi = -1;
        for (int i = 0; i < h->n_files; i++)
            if (!strcmp(h->files[i].repo, full) && !strcmp(h->files[i].name, rest) && h->files[i].data)
                fi = i;
        if (fi < 0)
            return reply(c, 404, "{\"error\":\"Entry not found\"}", "EntryNotFound", "Entry not found");
        hub_file *f = &h->files[fi];
        if (cdn || f->mode == HUB_DIRECT)
            return serve_bytes(h, c, fi, cdn);
        char loc[1024], size[32], etag[80];
        snprintf(loc, sizeof loc, "http://localhost:%d/cdn/%s/%s?X-Amz-Signature=fake", h->port, full, rest);
        snprintf(size, sizeof size, "%zu", f->len);
        cv_sha256 sh;
        cv_sha256_init(&sh);
        cv_sha256_update(&sh, f->data, f->len);
        char hex[65];
        cv_sha256_final(&sh, hex);
        snprintf(etag, sizeof etag, "\"%s\"", hex);
        struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        MHD_add_response_header(r, "Location", loc);
        if (f->mode != HUB_NO_SHA)
            MHD_add_response_header(r, "X-Linked-Etag", etag);
        MHD_add_response_header(r, "X-Linked-Size", size);
        MHD_add_response_header(r, "X-Repo-Commit", "89abcdef0123456789abcdef0123456789abcdef");
        MHD_add_response_header(r, "ETag", "W/\"redirect-etag\"");
        enum MHD_Result ok = MHD_queue_response(c, 302, r);
        MHD_destroy_response(r);
        return ok;
    }
    return reply(c, 404, "{\"error\":\"Sorry, we can't find the page you are looking for.\"}", NULL, NULL);
}

hub_fake *hub_fake_start(hub_file *files, int n_files, const char *token)
{
    hub_fake *h = calloc(1, sizeof *h);
    h->files = files;
    h->n_files = n_files;
    snprintf(h->token, sizeof h->token, "%s", token ? token : "");
    pthread_mutex_init(&h->mu, NULL);
    struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = 0 };
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    h->d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION, 0, NULL, NULL,
                            on_request, h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_END);
    if (!h->d) {
        free(h);
        return NULL;
    }
    h->port = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT)->port;
    return h;
}

int hub_fake_port(const hub_fake *h) { return h->port; }

void hub_fake_stop(hub_fake *h)
{
    if (!h)
        return;
    h->stopping = 1;
    MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

int hub_fake_n_requests(hub_fake *h)
{
    pthread_mutex_lock(&h->mu);
    int n = h->n_log;
    pthread_mutex_unlock(&h->mu);
    return n;
}

hub_req hub_fake_request(hub_fake *h, int i)
{
    pthread_mutex_lock(&h->mu);
    hub_req r = h->log[i];
    pthread_mutex_unlock(&h->mu);
    return r;
}

void hub_fake_reset_log(hub_fake *h)
{
    pthread_mutex_lock(&h->mu);
    h->n_log = 0;
    memset(h->cdn_gets, 0, sizeof h->cdn_gets);
    pthread_mutex_unlock(&h->mu);
}

void hub_fake_set_extra_sibling(hub_fake *h, const char *name)
{
    snprintf(h->extra, sizeof h->extra, "%s", name ? name : "");
}
