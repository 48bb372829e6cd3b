/* models_dir.c — the model store on disk and the resolver that every command
 * taking a MODEL argument goes through (the forms are listed in models.h).
 * Nothing here touches the network: resolving a remote form says where its
 * file belongs in the store and whether it is there; download.c fetches it.
 *
 * Every store path is built from parts that were checked one by one (no
 * "..", no empty or hidden segments, no control characters), whether they
 * came from the user or from a hub's file list, so a hostile name cannot
 * point outside the store. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>

#include "cli/models.h"
#include "gguf/gguf.h"

/* ---- the store folder ---- */

int cv_models_dir(char *out, size_t n, cv_err *err)
{
    const char *env = getenv("CORVID_MODELS");
    int len;
    if (env && *env) {
        if (env[0] != '/')
            return cv_err_set(err, CV_EINVAL, "CORVID_MODELS='%s' must be an absolute path", env);
        len = snprintf(out, n, "%s", env);
    } else if ((env = getenv("XDG_DATA_HOME")) && env[0] == '/') {
        /* The XDG spec says a relative XDG_DATA_HOME is invalid and ignored. */
        len = snprintf(out, n, "%s/corvid/models", env);
    } else if ((env = getenv("HOME")) && env[0] == '/') {
        len = snprintf(out, n, "%s/.local/share/corvid/models", env);
    } else {
        return cv_err_set(err, CV_EINVAL,
                          "cannot place the model store: set CORVID_MODELS (or HOME) to an absolute path");
    }
    if (len < 0 || (size_t)len >= n)
        return cv_err_set(err, CV_ELIMIT, "the model store path is longer than %zu bytes", n - 1);
    while (len > 1 && out[len - 1] == '/')
        out[--len] = 0;
    return 0;
}

/* ---- names ---- */

/* One path segment of a repo or file name: what Hugging Face allows in repo
 * ids ([A-Za-z0-9._-]) for org and repo; for file segments anything
 * printable but '/' and '\\'. Never "", ".", ".." or hidden (".x"), so a
 * segment cannot climb out of the store or hide from `ls`. */
static bool segment_ok(const char *s, size_t len, bool repo_id)
{
    if (len == 0 || len > 255 || s[0] == '.')
        return false;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (repo_id) {
            if (!(c == '.' || c == '_' || c == '-' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                  (c >= 'A' && c <= 'Z')))
                return false;
        } else if (c < 0x20 || c == 0x7f || c == '/' || c == '\\') {
            return false;
        }
    }
    return true;
}

/* A relative path of file segments ("sub/dir/x.gguf"). */
static bool rel_path_ok(const char *p)
{
    if (!*p)
        return false;
    for (;;) {
        const char *slash = strchr(p, '/');
        size_t len = slash ? (size_t)(slash - p) : strlen(p);
        if (!segment_ok(p, len, false))
            return false;
        if (!slash)
            return true;
        p = slash + 1;
    }
}

/* Copies at most n-1 bytes and terminates; callers checked the lengths that
 * matter, this only keeps a long input from overrunning a field. */
static void scopy(char *dst, size_t n, const char *src)
{
    size_t len = strlen(src);
    if (len >= n)
        len = n - 1;
    memcpy(dst, src, len);
    dst[len] = 0;
}

static bool ends_with_ci(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcasecmp(s + a - b, suffix);
}

static void upper(char *s)
{
    for (; *s; s++)
        if (*s >= 'a' && *s <= 'z')
            *s = (char)(*s - 'a' + 'A');
}

static bool is_sep(char c) { return c == '-' || c == '.' || c == '_' || c == '/'; }

/* Whether name (upper case, without .gguf) holds quant as a whole token:
 * preceded by a separator or the start and followed by '-', '.' or the end
 * (not '_', so Q4_K does not match Q4_K_M). */
static bool has_quant_token(const char *name, const char *quant)
{
    size_t q = strlen(quant);
    for (const char *p = name; (p = strstr(p, quant)); p++) {
        bool pre = p == name || is_sep(p[-1]);
        char after = p[q];
        bool post = after == 0 || after == '-' || after == '.';
        if (pre && post)
            return true;
    }
    return false;
}

/* "x-00001-of-00003.gguf": llama.cpp's split files. */
static bool is_split(const char *name)
{
    const char *of = strstr(name, "-of-");
    if (!of || of - name < 6)
        return false;
    for (int i = 1; i <= 5; i++)
        if (of[-i] < '0' || of[-i] > '9')
            return false;
    return of[-6] == '-' && of[4] >= '0' && of[4] <= '9';
}

static bool is_side_file(const char *name)
{
    return strcasestr(name, "mmproj") != NULL || strcasestr(name, "imatrix") != NULL;
}

void cv_model_quant_of_name(const char *name, char *out, size_t n)
{
    out[0] = 0;
    if (n < 2)
        return;
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    char tmp[512];
    snprintf(tmp, sizeof tmp, "%s", base);
    if (ends_with_ci(tmp, ".gguf"))
        tmp[strlen(tmp) - 5] = 0;
    upper(tmp);
    /* Scan '-'/'.'-separated tokens from the end: the quant is the last
     * token shaped like one (Q4_K_M, IQ3_XXS, Q8_0, F16, BF16, MXFP4, TQ1_0). */
    char *tok_end = tmp + strlen(tmp);
    while (tok_end > tmp) {
        char *tok = tok_end;
        while (tok > tmp && tok[-1] != '-' && tok[-1] != '.')
            tok--;
        size_t len = (size_t)(tok_end - tok);
        char t[64];
        if (len > 0 && len < sizeof t) {
            memcpy(t, tok, len);
            t[len] = 0;
            const char *d = t;
            if (d[0] == 'I' && d[1] == 'Q') d += 2;
            else if (d[0] == 'T' && d[1] == 'Q') d += 2;
            else if (d[0] == 'Q') d += 1;
            else d = NULL;
            bool ok = false;
            if (d && d[0] >= '1' && d[0] <= '8' && (d[1] == '_' || d[1] == 0))
                ok = true;
            if (!strcmp(t, "F16") || !strcmp(t, "BF16") || !strcmp(t, "F32") || !strcmp(t, "MXFP4"))
                ok = true;
            if (ok) {
                snprintf(out, n, "%s", t);
                return;
            }
        }
        tok_end = tok > tmp ? tok - 1 : tmp;
    }
}

/* Whether the ", "-separated list holds item. */
static bool list_has(const char *list, const char *item)
{
    size_t n = strlen(item);
    for (const char *p = list; p && (p = strstr(p, item)); p++)
        if ((p == list || p[-1] == ' ') && (p[n] == 0 || p[n] == ','))
            return true;
    return false;
}

int cv_model_pick_file(const char *const *names, int n, const char *quant, const char *repo, cv_err *err)
{
    static const char *const prefer[] = { "Q4_K_M", "Q4_K_S", "Q5_K_M", "Q8_0", "Q6_K", "Q4_0", "MXFP4" };
    char want[64];
    snprintf(want, sizeof want, "%s", quant ? quant : "");
    upper(want);
    int n_gguf = 0, only = -1, split_hit = -1;
    int hits[8], n_hits = 0;
    cv_buf have = { 0 };
    for (int i = 0; i < n; i++) {
        const char *nm = names[i];
        if (!ends_with_ci(nm, ".gguf") || is_side_file(nm))
            continue;
        n_gguf++;
        only = i;
        char q[32];
        cv_model_quant_of_name(nm, q, sizeof q);
        if (q[0] && !list_has(have.data, q)) {
            if (have.len) cv_buf_puts(&have, ", ");
            cv_buf_puts(&have, q);
        }
        if (!want[0])
            continue;
        char up[1024];
        snprintf(up, sizeof up, "%s", nm);
        upper(up);
        up[strlen(up) - 5] = 0;
        if (has_quant_token(up, want)) {
            if (is_split(nm)) {
                split_hit = i;
                continue;
            }
            if (n_hits < (int)CV_ARRAY_LEN(hits))
                hits[n_hits] = i;
            n_hits++;
        }
    }
    int rc;
    if (want[0]) {
        if (n_hits == 1) {
            rc = hits[0];
        } else if (n_hits > 1) {
            cv_buf list = { 0 };
            for (int k = 0; k < CV_MIN(n_hits, (int)CV_ARRAY_LEN(hits)); k++)
                cv_buf_printf(&list, "%s%s", k ? ", " : "", names[hits[k]]);
            rc = cv_err_set(err, CV_EINVAL, "%s has %d files of quant %s (%s%s): name one as %s/FILE.gguf", repo,
                            n_hits, want, list.data, n_hits > (int)CV_ARRAY_LEN(hits) ? ", ..." : "", repo);
            cv_buf_free(&list);
        } else if (split_hit >= 0) {
            rc = cv_err_set(err, CV_EUNSUPPORTED,
                            "%s has %s only as a split GGUF (%s); corvid reads single-file GGUF: pick another quant",
                            repo, want, names[split_hit]);
        } else {
            rc = cv_err_set(err, CV_ENOTFOUND, "%s has no GGUF of quant %s%s%s%s", repo, want,
                            have.len ? " (it has " : " (it has no GGUF files)", have.len ? have.data : "",
                            have.len ? ")" : "");
        }
        cv_buf_free(&have);
        return rc;
    }
    if (n_gguf == 1 && !is_split(names[only])) {
        cv_buf_free(&have);
        return only;
    }
    for (size_t p = 0; p < CV_ARRAY_LEN(prefer); p++) {
        cv_err e2;
        int k = cv_model_pick_file(names, n, prefer[p], repo, &e2);
        if (k >= 0) {
            cv_buf_free(&have);
            return k;
        }
        if (e2.code == CV_EINVAL) { /* several files of the preferred quant */
            if (err) *err = e2;
            cv_buf_free(&have);
            return e2.code;
        }
    }
    if (n_gguf == 0)
        rc = cv_err_set(err, CV_ENOTFOUND, "%s has no GGUF files", repo);
    else
        rc = cv_err_set(err, CV_ENOTFOUND, "%s has %d GGUF files and none of the usual quants: name one as %s:QUANT "
                        "(it has %s)", repo, n_gguf, repo, have.len ? have.data : "no recognizable quant");
    cv_buf_free(&have);
    return rc;
}

/* ---- the store listing ---- */

typedef struct walk {
    const char *root;
    size_t root_len;
    cv_store_entry *v;
    int n, cap;
    cv_err *err;
} walk;

static int64_t part_total(const char *part_path)
{
    char meta[PATH_MAX + 8];
    snprintf(meta, sizeof meta, "%s.json", part_path);
    cv_buf b = { 0 };
    int64_t total = 0;
    if (cv_read_file(meta, &b, 1 << 16, NULL) == 0) {
        json_t *j = cv_json_parse(b.data, b.len, NULL);
        if (j && json_is_integer(json_object_get(j, "total")))
            total = json_integer_value(json_object_get(j, "total"));
        json_decref(j);
    }
    cv_buf_free(&b);
    return total > 0 ? total : 0;
}

static int walk_dir(walk *w, const char *dir, int depth)
{
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT && depth == 0 ? 0 : cv_err_set(w->err, CV_EIO, "%s: %s", dir, strerror(errno));
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue; /* ".", "..", and hidden temp files */
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path)
            continue;
        struct stat lst, st;
        if (lstat(path, &lst) != 0 || stat(path, &st) != 0)
            continue;
        if (S_ISDIR(st.st_mode)) {
            /* A symlinked folder could loop back; symlinked files are fine. */
            if (!S_ISLNK(lst.st_mode) && depth + 1 < CV_STORE_MAX_DEPTH && (rc = walk_dir(w, path, depth + 1)))
                break;
            continue;
        }
        bool partial = ends_with_ci(e->d_name, ".gguf.part");
        if (!S_ISREG(st.st_mode) || (!partial && !ends_with_ci(e->d_name, ".gguf")))
            continue;
        if (w->n >= CV_STORE_MAX_FILES) {
            rc = cv_err_set(w->err, CV_ELIMIT, "%s holds more than %d model files", w->root, CV_STORE_MAX_FILES);
            break;
        }
        if (w->n == w->cap) {
            w->cap = w->cap ? 2 * w->cap : 16;
            w->v = cv_xrealloc(w->v, (size_t)w->cap * sizeof *w->v);
        }
        cv_store_entry *s = &w->v[w->n++];
        memset(s, 0, sizeof *s);
        snprintf(s->path, sizeof s->path, "%s", path);
        snprintf(s->rel, sizeof s->rel, "%s", path + w->root_len + 1);
        s->bytes = (int64_t)st.st_size;
        s->mtime = (int64_t)st.st_mtime;
        s->partial = partial;
        if (partial)
            s->part_total = part_total(path);
    }
    closedir(d);
    return rc;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const cv_store_entry *)a)->rel, ((const cv_store_entry *)b)->rel);
}

int cv_store_list(const char *dir, cv_store_entry **out, int *n, cv_err *err)
{
    walk w = { .root = dir, .root_len = strlen(dir), .err = err };
    int rc = walk_dir(&w, dir, 0);
    if (rc) {
        free(w.v);
        *out = NULL;
        *n = 0;
        return rc;
    }
    if (w.n > 1)
        qsort(w.v, (size_t)w.n, sizeof *w.v, cmp_entry);
    *out = w.v;
    *n = w.n;
    return 0;
}

/* ---- the resolver ---- */

static bool is_regular(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

static int set_store_path(cv_model_ref *r, const char *store, const char *a, const char *b, cv_err *err)
{
    int len = snprintf(r->path, sizeof r->path, "%s/%s/%s", store, a, b);
    if (len < 0 || (size_t)len >= sizeof r->path)
        return cv_err_set(err, CV_ELIMIT, "model path %s/%s/%s is longer than %zu bytes", store, a, b,
                          sizeof r->path - 1);
    r->local = is_regular(r->path);
    return 0;
}

/* For ORG/REPO[:QUANT] with no file: the store's files of that repo, picked
 * by quant the way a pull would pick them. Finds nothing (quietly) when the
 * store has no match, so the ref stays remote. */
static void find_local_by_quant(cv_model_ref *r, const char *store)
{
    char dir[PATH_MAX];
    if (snprintf(dir, sizeof dir, "%s/%s", store, r->repo) >= (int)sizeof dir)
        return;
    cv_store_entry *v;
    int n;
    if (cv_store_list(dir, &v, &n, NULL) != 0)
        return;
    const char **names = cv_xcalloc((size_t)n + 1, sizeof *names);
    int m = 0;
    for (int i = 0; i < n; i++)
        if (!v[i].partial)
            names[m++] = v[i].rel;
    int k = m ? cv_model_pick_file(names, m, r->quant, r->repo, NULL) : -1;
    if (k >= 0) {
        snprintf(r->file, sizeof r->file, "%s", names[k]);
        set_store_path(r, store, r->repo, r->file, NULL);
    }
    free(names);
    free(v);
}

/* "https://HOST/ORG/REPO/resolve/REV/FILE[?query]" (any host: a mirror or
 * $HF_ENDPOINT serves the same paths) or a plain URL of a file. */
static int resolve_url(const char *spec, const char *store, cv_model_ref *r, cv_err *err)
{
    const char *p = strstr(spec, "://") + 3;
    const char *host_end = strchr(p, '/');
    if (!host_end || host_end == p)
        return cv_err_set(err, CV_EINVAL, "URL '%s' has no path", spec);
    char path[2048];
    size_t plen = strcspn(host_end + 1, "?#");
    if (plen >= sizeof path)
        return cv_err_set(err, CV_ELIMIT, "URL '%.80s...' is longer than %zu bytes", spec, sizeof path);
    memcpy(path, host_end + 1, plen);
    path[plen] = 0;
    char org[256], repo[256], rev[128];
    int off = 0;
    if (sscanf(path, "%255[^/]/%255[^/]/resolve/%127[^/]/%n", org, repo, rev, &off) == 3 && off > 0) {
        const char *file = path + off;
        if (!segment_ok(org, strlen(org), true) || !segment_ok(repo, strlen(repo), true) || !rel_path_ok(file) ||
            !segment_ok(rev, strlen(rev), true))
            return cv_err_set(err, CV_EINVAL, "URL '%s' names a repo or file corvid cannot store (bad characters)",
                              spec);
        r->kind = CV_MODEL_REMOTE;
        snprintf(r->repo, sizeof r->repo, "%s/%s", org, repo);
        snprintf(r->file, sizeof r->file, "%s", file);
        snprintf(r->revision, sizeof r->revision, "%s", rev);
        return set_store_path(r, store, r->repo, r->file, err);
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char host[256];
    size_t hlen = (size_t)(host_end - p);
    const char *at = memchr(p, '@', hlen); /* user:pass@host */
    if (at) {
        hlen -= (size_t)(at + 1 - p);
        p = at + 1;
    }
    if (hlen >= sizeof host)
        return cv_err_set(err, CV_ELIMIT, "URL host in '%s' is too long", spec);
    memcpy(host, p, hlen);
    host[hlen] = 0;
    for (char *c = host; *c; c++)
        if (*c == ':')
            *c = '_'; /* host:port as a folder name */
    if (!segment_ok(host, strlen(host), true) || !segment_ok(base, strlen(base), false))
        return cv_err_set(err, CV_EINVAL, "URL '%s' does not end in a file name corvid can store", spec);
    r->kind = CV_MODEL_REMOTE;
    snprintf(r->url, sizeof r->url, "%s", spec);
    if (strlen(base) >= sizeof r->file)
        return cv_err_set(err, CV_ELIMIT, "URL file name in '%s' is too long", spec);
    scopy(r->file, sizeof r->file, base);
    return set_store_path(r, store, host, base, err);
}

/* A QUANT as written after ':' — letters, digits, '_' and '-', and short
 * (the longest real ones, like UD-Q4_K_XL, are ~12 bytes). */
static int check_quant(const char *spec, const char *q, cv_err *err)
{
    size_t n = strlen(q);
    if (n >= sizeof(((cv_model_ref *)0)->quant))
        return cv_err_set(err, CV_EINVAL, "'%s': QUANT '%s' is too long", spec, q);
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)q[i]) || q[i] == '_' || q[i] == '-'))
            return cv_err_set(err, CV_EINVAL, "'%s': QUANT '%s' may hold only letters, digits, '_' and '-'", spec, q);
    return 0;
}

static int not_found(const char *spec, const char *store, cv_err *err)
{
    return cv_err_set(err, CV_ENOTFOUND,
                      "no model '%s': it is not a file, not an alias (`corvid ls --aliases`), not ORG/REPO[:QUANT] "
                      "and not in the store (%s)",
                      spec, store);
}

int cv_model_resolve(const char *spec, cv_model_ref *r, cv_err *err)
{
    memset(r, 0, sizeof *r);
    snprintf(r->revision, sizeof r->revision, "main");
    size_t len = spec ? strlen(spec) : 0;
    if (len == 0)
        return cv_err_set(err, CV_EINVAL, "the MODEL argument is empty");
    if (len > CV_MAX_MODEL_SPEC)
        return cv_err_set(err, CV_ELIMIT, "MODEL is %zu bytes long, more than %d", len, CV_MAX_MODEL_SPEC);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)spec[i] < 0x20)
            return cv_err_set(err, CV_EINVAL, "MODEL contains a control character (byte %zu)", i);

    /* 1. A file. */
    struct stat st;
    if (stat(spec, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return cv_err_set(err, CV_EINVAL, "'%s' is %s, not a model file", spec,
                              S_ISDIR(st.st_mode) ? "a folder" : "not a regular file");
        r->kind = CV_MODEL_FILE;
        r->local = true;
        if (!realpath(spec, r->path))
            snprintf(r->path, sizeof r->path, "%s", spec);
        return 0;
    }
    if (spec[0] == '/' || spec[0] == '.' || spec[0] == '~')
        return cv_err_set(err, CV_ENOTFOUND, "no such file: %s", spec);

    char store[PATH_MAX];
    int rc = cv_models_dir(store, sizeof store, err);
    if (rc)
        return rc;

    /* 2. An alias, optionally ALIAS:QUANT. */
    char name[CV_MAX_MODEL_SPEC + 1];
    snprintf(name, sizeof name, "%s", spec);
    char *colon = strrchr(name, ':');
    if (!strstr(spec, "://")) {
        if (colon)
            *colon = 0;
        const cv_model_alias *a = cv_model_alias_find(name);
        if (a) {
            r->kind = CV_MODEL_REMOTE;
            r->alias = a;
            snprintf(r->repo, sizeof r->repo, "%s", a->repo);
            char aq[32];
            cv_model_quant_of_name(a->file, aq, sizeof aq);
            if (colon && colon[1]) {
                if ((rc = check_quant(spec, colon + 1, err)))
                    return rc;
                scopy(r->quant, sizeof r->quant, colon + 1);
                upper(r->quant);
            }
            if (!r->quant[0] || !strcmp(r->quant, aq)) {
                snprintf(r->file, sizeof r->file, "%s", a->file);
                return set_store_path(r, store, r->repo, r->file, err);
            }
            find_local_by_quant(r, store);
            return 0;
        }
        if (colon)
            *colon = ':';
    }

    /* 3. URLs. */
    if (!strncasecmp(spec, "https://", 8) || !strncasecmp(spec, "http://", 7))
        return resolve_url(spec, store, r, err);
    if (strstr(spec, "://"))
        return cv_err_set(err, CV_EINVAL, "'%s': only http:// and https:// URLs can be pulled", spec);

    /* 4. ORG/REPO[:QUANT] and ORG/REPO/FILE.gguf ("hf.co/" prefix allowed,
     * as Ollama and llama.cpp write it). */
    const char *s = name;
    if (!strncasecmp(s, "hf.co/", 6)) s += 6;
    else if (!strncasecmp(s, "huggingface.co/", 15)) s += 15;
    const char *slash = strchr(s, '/');
    if (slash) {
        const char *slash2 = strchr(slash + 1, '/');
        char org[256], repo[256];
        size_t olen = (size_t)(slash - s);
        const char *rp = slash + 1;
        size_t rlen = slash2 ? (size_t)(slash2 - rp) : strlen(rp);
        char quant[64] = "";
        if (!slash2) {
            const char *c = memchr(rp, ':', rlen);
            if (c) {
                snprintf(quant, sizeof quant, "%.*s", (int)(rlen - (size_t)(c + 1 - rp)), c + 1);
                rlen = (size_t)(c - rp);
            }
        }
        if (olen >= sizeof org || rlen >= sizeof repo || !segment_ok(s, olen, true) || !segment_ok(rp, rlen, true))
            return cv_err_set(err, CV_EINVAL,
                              "'%s' is not ORG/REPO[:QUANT]: org and repo are letters, digits, '.', '_' and '-'",
                              spec);
        memcpy(org, s, olen);
        org[olen] = 0;
        memcpy(repo, rp, rlen);
        repo[rlen] = 0;
        r->kind = CV_MODEL_REMOTE;
        snprintf(r->repo, sizeof r->repo, "%s/%s", org, repo);
        if (slash2) {
            const char *file = slash2 + 1;
            if (!rel_path_ok(file) || !ends_with_ci(file, ".gguf"))
                return cv_err_set(err, CV_EINVAL, "'%s': the file part must be a .gguf name inside the repo", spec);
            snprintf(r->file, sizeof r->file, "%s", file);
            return set_store_path(r, store, r->repo, r->file, err);
        }
        if (quant[0]) {
            if ((rc = check_quant(spec, quant, err)))
                return rc;
            scopy(r->quant, sizeof r->quant, quant);
            upper(r->quant);
        }
        find_local_by_quant(r, store);
        return 0;
    }

    /* 5. A name in the store: FILE or FILE.gguf, anywhere below it. */
    cv_store_entry *v;
    int n;
    if ((rc = cv_store_list(store, &v, &n, err)))
        return rc;
    int found = -1, n_found = 0;
    for (int i = 0; i < n; i++) {
        if (v[i].partial)
            continue;
        const char *base = strrchr(v[i].rel, '/');
        base = base ? base + 1 : v[i].rel;
        size_t bl = strlen(base);
        bool eq = !strcasecmp(base, spec) || (bl == len + 5 && !strncasecmp(base, spec, len) &&
                                              !strcasecmp(base + len, ".gguf"));
        if (eq) {
            if (n_found++ == 0)
                found = i;
        }
    }
    if (n_found == 1) {
        r->kind = CV_MODEL_STORE;
        r->local = true;
        snprintf(r->path, sizeof r->path, "%s", v[found].path);
        free(v);
        return 0;
    }
    if (n_found > 1) {
        rc = cv_err_set(err, CV_EINVAL, "'%s' names %d files in the store (one is %s): give ORG/REPO/FILE.gguf", spec,
                        n_found, v[found].rel);
        free(v);
        return rc;
    }
    free(v);
    return not_found(spec, store, err);
}

const char *cv_model_local_or_self(const char *spec, char *buf, size_t n)
{
    struct stat st;
    if (!spec || stat(spec, &st) == 0)
        return spec;
    cv_model_ref r;
    if (cv_model_resolve(spec, &r, NULL) != 0 || !r.local || strlen(r.path) >= n)
        return spec;
    memcpy(buf, r.path, strlen(r.path) + 1);
    return buf;
}

/* ---- what a GGUF says about itself ---- */

/* llama.cpp's llama_ftype values (general.file_type), by number; gaps are
 * values that were removed from the format. */
static const char *const ftype_names[] = {
    [0] = "F32",     [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",    [7] = "Q8_0",    [8] = "Q5_0",
    [9] = "Q5_1",    [10] = "Q2_K",   [11] = "Q3_K_S", [12] = "Q3_K_M", [13] = "Q3_K_L", [14] = "Q4_K_S",
    [15] = "Q4_K_M", [16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K",   [19] = "IQ2_XXS", [20] = "IQ2_XS",
    [21] = "Q2_K_S", [22] = "IQ3_XS", [23] = "IQ3_XXS", [24] = "IQ1_S", [25] = "IQ4_NL", [26] = "IQ3_S",
    [27] = "IQ3_M",  [28] = "IQ2_S",  [29] = "IQ2_M",  [30] = "IQ4_XS", [31] = "IQ1_M",  [32] = "BF16",
    [36] = "TQ1_0",  [37] = "TQ2_0",  [38] = "MXFP4",
};

const char *cv_model_ftype_name(int64_t t)
{
    if (t < 0 || t >= (int64_t)CV_ARRAY_LEN(ftype_names))
        return NULL;
    return ftype_names[t];
}

int cv_model_facts_read(const char *path, cv_model_facts *f, cv_err *err)
{
    memset(f, 0, sizeof *f);
    cv_gguf *g;
    int rc = cv_gguf_open(path, &g, err);
    if (rc)
        return rc;
    cv_str s;
    if (cv_gguf_get_str(g, "general.architecture", &s, NULL) == 0)
        snprintf(f->arch, sizeof f->arch, "%.*s", (int)CV_MIN(s.len, sizeof f->arch - 1), s.ptr);
    if (cv_gguf_get_str(g, "general.name", &s, NULL) == 0)
        snprintf(f->name, sizeof f->name, "%.*s", (int)CV_MIN(s.len, sizeof f->name - 1), s.ptr);
    int64_t v;
    if (cv_gguf_get_int(g, "general.file_type", &v, NULL) == 0 && cv_model_ftype_name(v))
        snprintf(f->quant, sizeof f->quant, "%s", cv_model_ftype_name(v));
    if (f->arch[0]) {
        char key[128];
        snprintf(key, sizeof key, "%s.context_length", f->arch);
        if (cv_gguf_get_int(g, key, &v, NULL) == 0 && v > 0)
            f->n_ctx = v;
    }
    /* Parameters and, without a file_type, the type holding the most bytes. */
    uint64_t by_type[CV_GGML_TYPE_COUNT] = { 0 };
    for (int64_t i = 0; i < cv_gguf_n_tensors(g); i++) {
        const cv_gguf_tensor *t = cv_gguf_tensor_at(g, i);
        int64_t ne = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            ne *= t->ne[d]; /* the reader bounded every product */
        f->n_params += ne;
        if (t->type < CV_GGML_TYPE_COUNT)
            by_type[t->type] += t->n_bytes;
    }
    if (!f->quant[0]) {
        int best = -1;
        for (int t = 0; t < CV_GGML_TYPE_COUNT; t++)
            if (by_type[t] && (best < 0 || by_type[t] > by_type[best]))
                best = t;
        cv_ggml_type_info ti;
        if (best >= 0 && cv_ggml_type_info_get((uint32_t)best, &ti)) {
            snprintf(f->quant, sizeof f->quant, "%s", ti.name);
            upper(f->quant);
        }
    }
    cv_gguf_close(g);
    return 0;
}

void cv_store_entry_name(const cv_store_entry *e, char *out, size_t n)
{
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "%s", e->rel);
    char *p1 = strchr(rel, '/'), *p2 = p1 ? strchr(p1 + 1, '/') : NULL;
    if (p2) {
        *p2 = 0;
        const char *file = p2 + 1;
        char f[512];
        snprintf(f, sizeof f, "%s", file);
        size_t fl = strlen(f);
        if (e->partial && fl > 5)
            f[fl - 5] = 0; /* drop ".part" */
        const cv_model_alias *a = cv_model_alias_by_file(rel, f);
        if (a) {
            snprintf(out, n, "%s", a->name);
            return;
        }
        *p2 = '/';
    }
    snprintf(out, n, "%s", e->rel);
    size_t len = strlen(out);
    if (e->partial && len > 5)
        out[len -= 5] = 0;
    if (len > 5 && !strcmp(out + len - 5, ".gguf"))
        out[len - 5] = 0;
}
