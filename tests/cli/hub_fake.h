/* hub_fake.h — a local stand-in for huggingface.co in the tests of `corvid
 * pull`: a libmicrohttpd server on 127.0.0.1 that speaks the parts of the
 * hub protocol corvid uses, as the real hub does (download.c's header has the
 * sources):
 *   GET /api/models/ORG/REPO            -> {"id", "siblings":[{"rfilename"}]}
 *   GET /ORG/REPO/resolve/main/FILE     -> 302 to http://localhost:PORT/cdn/...
 *        with X-Linked-Etag "<sha256>", X-Linked-Size, X-Repo-Commit
 *   GET /cdn/ORG/REPO/FILE              -> the bytes, with Range (206)
 * and its errors: 401 RepoNotFound for unknown repos (anonymous), 404
 * EntryNotFound, 401/403 GatedRepo. The redirect goes to "localhost" while
 * the hub is "127.0.0.1", so the client sees a change of host, as it does
 * from huggingface.co to its CDN; the log shows whether a token followed.
 * Per-file modes make the failures pull must survive. */
#ifndef CV_TEST_HUB_FAKE_H
#define CV_TEST_HUB_FAKE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum hub_mode {
    HUB_OK,          /* 302 + CDN with Range */
    HUB_DROP_ONCE,   /* the first CDN transfer closes the connection after drop_at bytes */
    HUB_DROP_ALWAYS, /* every CDN transfer does */
    HUB_CORRUPT,     /* one byte flipped in the body; the published sha256 is the true one */
    HUB_NO_RANGE,    /* the CDN ignores Range (always 200, whole file) */
    HUB_DIRECT,      /* no redirect: served at the resolve URL with a git-sha1 ETag (a non-LFS file) */
    HUB_NO_SHA,      /* 302 without X-Linked-Etag (size only) */
    HUB_STALL_AT,    /* sends drop_at bytes, then nothing until the client goes away */
} hub_mode;

typedef struct hub_file {
    const char *repo;  /* "org/repo" */
    const char *name;  /* file name in the repo */
    const void *data;  /* NULL: listed by the API only */
    size_t len;
    hub_mode mode;
    size_t drop_at;
    bool gated;        /* needs the hub's token */
} hub_file;

typedef struct hub_req {
    char method[8];
    char path[512];
    long range_start;  /* -1: no Range header */
    char auth[256];    /* the Authorization header, "" if none */
} hub_req;

typedef struct hub_fake hub_fake;

/* Serves files (the array must outlive the server; tests change a file's
 * data, len or mode between pulls). token: what gated files accept. */
hub_fake *hub_fake_start(hub_file *files, int n_files, const char *token);
int hub_fake_port(const hub_fake *h);
void hub_fake_stop(hub_fake *h);
/* The request log since the start or the last reset. */
int hub_fake_n_requests(hub_fake *h);
hub_req hub_fake_request(hub_fake *h, int i);
void hub_fake_reset_log(hub_fake *h);
/* Extra siblings listed by /api/models for every repo (hostile names). */
void hub_fake_set_extra_sibling(hub_fake *h, const char *name);

#endif
