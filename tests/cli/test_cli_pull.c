/* test_cli_pull.c — cv_model_pull against a local fake hub (hub_fake.h)
 * serving real GGUF files (the reference models under shared/testdata):
 * the redirect with X-Linked-Etag/Size, sha256 and GGUF validation, resume
 * with Range after a dropped connection and after an interrupted pull, a
 * server that ignores Range, a remote file that changed under a partial, a
 * corrupted body and a non-GGUF body (both rejected, nothing left behind),
 * 401/403/404 with the hub's error codes, HF_TOKEN sent to the hub but not
 * to the CDN, quant picking from the repo's file list (hostile names
 * refused), the lock between two pulls, and cancellation. Every check is on
 * files, bytes and the request log; nothing is timed. */
#include <fcntl.h>
#include <pthread.h>
#include <limits.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "test.h"

#include "cli/models.h"
#include "hub_fake.h"

static cv_buf q4, q8, llama;  /* real GGUF files */
static char tmp_root[256];
static int store_seq;
static hub_fake *hub;

enum { F_Q4, F_Q8, F_MMPROJ, F_DROP, F_GATED, F_CORRUPT, F_NOTGGUF, F_DIRECT, F_NORANGE, F_CHANGE, F_STALL, F_SPLIT,
       F_HOSTILE, N_FILES };
static hub_file files[N_FILES];
static const char *TOKEN = "hf_test_token_1234";
static const char *NOT_GGUF = "This is not a GGUF file: it is what a proxy's error page looks like.\n";

static void new_store(void)
{
    char d[300];
    snprintf(d, sizeof d, "%s/store%d", tmp_root, ++store_seq);
    setenv("CORVID_MODELS", d, 1);
}

static const char *store_dir(void) { return getenv("CORVID_MODELS"); }

static bool file_equals(const char *path, const cv_buf *want)
{
    cv_buf b = { 0 };
    bool ok = cv_read_file(path, &b, 64u << 20, NULL) == 0 && b.len == want->len && !memcmp(b.data, want->data, b.len);
    cv_buf_free(&b);
    return ok;
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int64_t file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (int64_t)st.st_size : -1;
}

static cv_pull_opts opts(void)
{
    return (cv_pull_opts){ .progress = 0, .retry_delay_ms = 1 };
}

static int pull(const char *spec, cv_model_ref *ref, const cv_pull_opts *o, cv_pull_result *res, cv_err *err)
{
    int rc = cv_model_resolve(spec, ref, err);
    return rc ? rc : cv_model_pull(ref, o, res, err);
}

static int count_requests(const char *prefix, int *with_range, long *first_range)
{
    int n = 0;
    if (with_range) *with_range = 0;
    if (first_range) *first_range = -1;
    for (int i = 0; i < hub_fake_n_requests(hub); i++) {
        hub_req r = hub_fake_request(hub, i);
        if (strncmp(r.path, prefix, strlen(prefix)))
            continue;
        n++;
        if (r.range_start >= 0) {
            if (with_range) (*with_range)++;
            if (first_range && *first_range < 0) *first_range = r.range_start;
        }
    }
    return n;
}

/* ---- the happy path ---- */

TEST(pull_of_repo_file_follows_redirect_checks_sha256_and_renames_into_store)
{
    new_store();
    hub_fake_reset_log(hub);
    cv_model_ref ref;
    cv_pull_result res;
    cv_err err = { 0 };
    cv_pull_opts o = opts();
    int rc = pull("test/tiny-qwen3-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK_MSG(rc == 0, "pull failed: %s", err.msg);
    CHECK(ref.local);
    CHECK(res.sha256_checked);
    CHECK_EQ_INT(res.bytes, (int64_t)q4.len);
    CHECK_EQ_INT(res.attempts, 1);
    CHECK(file_equals(ref.path, &q4));
    char expect[600];
    snprintf(expect, sizeof expect, "%s/test/tiny-qwen3-GGUF/tiny-qwen3-Q4_K_M.gguf", store_dir());
    CHECK_EQ_STR(ref.path, expect);
    char part[PATH_MAX + 16];
    snprintf(part, sizeof part, "%s.part", ref.path);
    CHECK(!exists(part));
    snprintf(part, sizeof part, "%s.part.json", ref.path);
    CHECK(!exists(part));
    /* One resolve (the 302) and one CDN GET, neither a Range request. */
    int ranged;
    CHECK_EQ_INT(count_requests("/test/tiny-qwen3-GGUF/resolve/main/", NULL, NULL), 1);
    CHECK_EQ_INT(count_requests("/cdn/test/tiny-qwen3-GGUF/", &ranged, NULL), 1);
    CHECK_EQ_INT(ranged, 0);
    /* A second pull finds it in the store and asks nothing. */
    hub_fake_reset_log(hub);
    rc = pull("test/tiny-qwen3-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK(rc == 0 && res.already_present);
    CHECK_EQ_INT(hub_fake_n_requests(hub), 0);
}

TEST(pull_by_quant_asks_the_file_list_and_picks_that_quant)
{
    new_store();
    static const struct { const char *spec; const char *file; int code; } cases[] = {
        { "test/tiny-qwen3-GGUF", "tiny-qwen3-Q4_K_M.gguf", 0 },          /* default: Q4_K_M */
        { "test/tiny-qwen3-GGUF:q8_0", "tiny-qwen3-Q8_0.gguf", 0 },        /* case-insensitive */
        { "hf.co/test/tiny-qwen3-GGUF:Q4_K_M", "tiny-qwen3-Q4_K_M.gguf", 0 },
        { "test/tiny-qwen3-GGUF:Q5_K_M", NULL, CV_ENOTFOUND },            /* not in the repo */
        { "test/tiny-qwen3-GGUF:Q4_K", NULL, CV_ENOTFOUND },              /* Q4_K is not Q4_K_M */
        { "test/split-GGUF:Q4_K_M", NULL, CV_EUNSUPPORTED },              /* split files only */
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        cv_model_ref ref;
        cv_pull_result res;
        cv_err err = { 0 };
        cv_pull_opts o = opts();
        int rc = pull(cases[i].spec, &ref, &o, &res, &err);
        CHECK_MSG(rc == cases[i].code, "%s: rc %d (%s), want %d", cases[i].spec, rc, err.msg, cases[i].code);
        if (cases[i].file && rc == 0) {
            const char *base = strrchr(ref.path, '/') + 1;
            CHECK_EQ_STR(base, cases[i].file);
            CHECK(file_equals(ref.path, strstr(cases[i].file, "Q8_0") ? &q8 : &q4));
        }
        if (cases[i].code == CV_ENOTFOUND)
            CHECK_MSG(strstr(err.msg, "Q4_K_M") && strstr(err.msg, "Q8_0"), "error should list the quants: %s",
                      err.msg);
    }
    /* Once pulled, ORG/REPO:QUANT resolves offline to the stored file. */
    cv_model_ref ref;
    cv_err err = { 0 };
    CHECK(cv_model_resolve("test/tiny-qwen3-GGUF:Q8_0", &ref, &err) == 0 && ref.local);
    CHECK(strstr(ref.path, "tiny-qwen3-Q8_0.gguf") != NULL);
}

/* ---- resume ---- */

TEST(connection_dropped_mid_transfer_is_resumed_with_range_and_completes)
{
    new_store();
    hub_fake_reset_log(hub);
    cv_model_ref ref;
    cv_pull_result res;
    cv_err err = { 0 };
    cv_pull_opts o = opts();
    int rc = pull("test/flaky-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK_MSG(rc == 0, "pull failed: %s", err.msg);
    CHECK_EQ_INT(res.attempts, 2);
    CHECK(res.sha256_checked);
    CHECK(file_equals(ref.path, &q4));
    int ranged;
    long first;
    CHECK_EQ_INT(count_requests("/cdn/test/flaky-GGUF/", &ranged, &first), 2);
    CHECK_EQ_INT(ranged, 1);
    /* The resume starts where the first transfer stopped writing: after at
     * least one chunk and no later than where the server dropped. */
    CHECK_MSG(first > 0 && first <= (long)files[F_DROP].drop_at, "resumed at %ld (dropped at %zu)", first,
              files[F_DROP].drop_at);
}

TEST(interrupted_pull_keeps_the_partial_and_the_next_pull_resumes_it)
{
    new_store();
    files[F_DROP].mode = HUB_DROP_ALWAYS;
    cv_model_ref ref;
    cv_pull_result res;
    cv_err err = { 0 };
    cv_pull_opts o = opts();
    o.attempts = 2;
    int rc = pull("test/flaky-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK_EQ_INT(rc, CV_EIO);
    CHECK_MSG(strstr(err.msg, "resume") != NULL, "message should say how to resume: %s", err.msg);
    CHECK(!exists(ref.path));
    char part[PATH_MAX + 16], meta[PATH_MAX + 16];
    snprintf(part, sizeof part, "%s.part", ref.path);
    snprintf(meta, sizeof meta, "%s.part.json", ref.path);
    int64_t kept = file_size(part);
    CHECK_MSG(kept > 0 && kept <= (int64_t)files[F_DROP].drop_at, "kept %lld bytes", (long long)kept);
    cv_buf m = { 0 };
    CHECK(cv_read_file(meta, &m, 1 << 16, NULL) == 0);
    json_t *j = cv_json_parse(m.data, m.len, NULL);
    CHECK(j && JSON_INT(j, "total") == (json_int_t)q4.len);
    json_decref(j);
    cv_buf_free(&m);
    /* `corvid ls` sees the partial with its target size. */
    cv_store_entry *v;
    int n;
    CHECK(cv_store_list(store_dir(), &v, &n, NULL) == 0);
    CHECK(n == 1 && v[0].partial && v[0].part_total == (int64_t)q4.len && v[0].bytes == kept);
    free(v);

    /* The server recovers; a new pull (a new process would do the same:
     * nothing is kept in memory) resumes from the partial. */
    files[F_DROP].mode = HUB_OK;
    hub_fake_reset_log(hub);
    rc = pull("test/flaky-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK_MSG(rc == 0, "resume failed: %s", err.msg);
    CHECK_EQ_INT(res.resumed_from, kept);
    CHECK(res.sha256_checked);
    CHECK(file_equals(ref.path, &q4));
    long first;
    count_requests("/cdn/test/flaky-GGUF/", NULL, &first);
    CHECK_EQ_INT(first, kept);
    CHECK(!exists(part) && !exists(meta));
    files[F_DROP].mode = HUB_DROP_ONCE;
}

TEST(server_that_ignores_range_restarts_the_file_from_zero)
{
    new_store();
    files[F_NORANGE].mode = HUB_DROP_ALWAYS; /* first leave a partial */
    cv_model_ref ref;
    cv_pull_result res;
    cv_err err = { 0 };
    cv_pull_opts o = opts();
    o.attempts = 1;
    CHECK(pull("test/norange-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err) == CV_EIO);
    files[F_NORANGE].mode = HUB_NO_RANGE;
    o.attempts = 0;
    int rc = pull("test/norange-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK_MSG(rc == 0, "pull failed: %s", err.msg);
    CHECK(res.resumed_from > 0);       /* it tried to resume */
    CHECK(file_equals(ref.path, &q4)); /* and got the whole file right */
    CHECK(res.sha256_checked);
}

TEST(partial_of_a_remote_file_that_changed_is_discarded)
{
    new_store();
    /* A partial of version 1 (the llama model)... */
    files[F_CHANGE].data = llama.data;
    files[F_CHANGE].len = llama.len;
    files[F_CHANGE].mode = HUB_DROP_ALWAYS;
    cv_model_ref ref;
    cv_pull_result res;
    cv_err err = { 0 };
    cv_pull_opts o = opts();
    o.attempts = 1;
    CHECK(pull("test/changing-GGUF/model-Q4_K_M.gguf", &ref, &o, &res, &err) == CV_EIO);
    /* ...then the repo is updated to version 2 (the qwen3 model). */
    files[F_CHANGE].data = q4.data;
    files[F_CHANGE].len = q4.len;
    files[F_CHANGE].mode = HUB_OK;
    o.attempts = 0;
    int rc = pull("test/changing-GGUF/model-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK_MSG(rc == 0, "pull failed: %s", err.msg);
    CHECK(file_equals(ref.path, &q4));
    CHECK(res.sha256_checked);
}

/* ---- rejected files ---- */

TEST(corrupted_body_fails_sha256_and_nothing_is_left_in_the_store)
{
    new_store();
    cv_model_ref ref;
    cv_pull_result res;
    cv_err err = { 0 };
    cv_pull_opts o = opts();
    int rc = pull("test/corrupt-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK_EQ_INT(rc, CV_ECORRUPT);
    CHECK_MSG(strstr(err.msg, "sha256 mismatch") != NULL, "%s", err.msg);
    cv_store_entry *v;
    int n;
    CHECK(cv_store_list(store_dir(), &v, &n, NULL) == 0);
    CHECK_EQ_INT(n, 0); /* neither the model nor a partial */
    free(v);
}

TEST(body_that_is_not_gguf_is_rejected_by_the_reader_and_deleted)
{
    new_store();
    cv_model_ref ref;
    cv_pull_result res;
    cv_err err = { 0 };
    cv_pull_opts o = opts();
    int rc = pull("test/notgguf-GGUF/model-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK_EQ_INT(rc, CV_ECORRUPT);
    CHECK_MSG(strstr(err.msg, "not a valid GGUF") != NULL, "%s", err.msg);
    CHECK(!exists(ref.path));
    cv_store_entry *v;
    int n;
    CHECK(cv_store_list(store_dir(), &v, &n, NULL) == 0);
    CHECK_EQ_INT(n, 0);
    free(v);
}

TEST(file_served_without_redirect_is_checked_by_size_only)
{
    new_store();
    cv_model_ref ref;
    cv_pull_result res;
    cv_err err = { 0 };
    cv_pull_opts o = opts();
    int rc = pull("test/direct-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK_MSG(rc == 0, "pull failed: %s", err.msg);
    CHECK(!res.sha256_checked); /* a git sha1 ETag is not a sha256 */
    CHECK(file_equals(ref.path, &q4));
}

/* ---- errors ---- */

TEST(hub_errors_say_what_is_wrong_and_what_to_do)
{
    static const struct {
        const char *spec;
        const char *token;
        int code;
        const char *says[2];
    } cases[] = {
        { "test/tiny-qwen3-GGUF/nope-Q4_K_M.gguf", NULL, CV_ENOTFOUND, { "no such file", "404" } },
        { "nobody/nothing-GGUF/x-Q4_K_M.gguf", NULL, CV_EINVAL, { "HF_TOKEN", "401" } },
        { "nobody/nothing-GGUF/x-Q4_K_M.gguf", "hf_other", CV_ENOTFOUND, { "repo does not exist", "404" } },
        { "nobody/nothing-GGUF:Q4_K_M", NULL, CV_EINVAL, { "HF_TOKEN", "401" } },
        { "test/gated-GGUF/tiny-qwen3-Q4_K_M.gguf", NULL, CV_EINVAL, { "gated", "set HF_TOKEN" } },
        { "test/gated-GGUF/tiny-qwen3-Q4_K_M.gguf", "hf_wrong", CV_EINVAL, { "gated", "no access" } },
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        new_store();
        cv_model_ref ref;
        cv_pull_result res;
        cv_err err = { 0 };
        cv_pull_opts o = opts();
        o.token = cases[i].token ? cases[i].token : "";
        int rc = pull(cases[i].spec, &ref, &o, &res, &err);
        CHECK_MSG(rc == cases[i].code, "%s: rc %d (%s)", cases[i].spec, rc, err.msg);
        for (int k = 0; k < 2; k++)
            CHECK_MSG(strstr(err.msg, cases[i].says[k]) != NULL, "%s: '%s' missing from: %s", cases[i].spec,
                      cases[i].says[k], err.msg);
        cv_store_entry *v;
        int n;
        CHECK(cv_store_list(store_dir(), &v, &n, NULL) == 0 && n == 0);
        free(v);
    }
}

TEST(hf_token_goes_to_the_hub_as_bearer_and_not_to_the_cdn)
{
    new_store();
    hub_fake_reset_log(hub);
    cv_model_ref ref;
    cv_pull_result res;
    cv_err err = { 0 };
    setenv("HF_TOKEN", TOKEN, 1); /* the environment is where users put it */
    cv_pull_opts o = opts();
    int rc = pull("test/gated-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err);
    unsetenv("HF_TOKEN");
    CHECK_MSG(rc == 0, "pull failed: %s", err.msg);
    CHECK(file_equals(ref.path, &q4));
    char want[128];
    snprintf(want, sizeof want, "Bearer %s", TOKEN);
    int hub_auth = 0, cdn = 0, cdn_auth = 0;
    for (int i = 0; i < hub_fake_n_requests(hub); i++) {
        hub_req r = hub_fake_request(hub, i);
        if (strstr(r.path, "/resolve/main/"))
            hub_auth += !strcmp(r.auth, want);
        if (!strncmp(r.path, "/cdn/", 5)) {
            cdn++;
            cdn_auth += r.auth[0] != 0;
        }
    }
    CHECK_EQ_INT(hub_auth, 1);
    CHECK_EQ_INT(cdn, 1);
    CHECK_EQ_INT(cdn_auth, 0);
}

TEST(unreachable_hub_fails_after_one_retry_and_leaves_nothing)
{
    new_store();
    cv_model_ref ref;
    cv_pull_result res;
    cv_err err = { 0 };
    cv_pull_opts o = opts();
    o.endpoint = "http://127.0.0.1:1"; /* nothing listens on port 1 */
    int rc = pull("test/tiny-qwen3-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK_EQ_INT(rc, CV_EIO);
    CHECK_EQ_INT(res.attempts, 2);
    CHECK_MSG(strstr(err.msg, "127.0.0.1:1") != NULL, "%s", err.msg);
    cv_store_entry *v;
    int n;
    CHECK(cv_store_list(store_dir(), &v, &n, NULL) == 0 && n == 0);
    free(v);
}

/* ---- hostile and concurrent ---- */

TEST(file_list_with_a_path_outside_the_repo_is_refused)
{
    static const char *const hostile[] = { "../../escape-Q4_K_M.gguf", "/etc/evil-Q4_K_M.gguf",
                                           "sub/../../../x-Q4_K_M.gguf" };
    for (size_t i = 0; i < CV_ARRAY_LEN(hostile); i++) {
        new_store();
        hub_fake_set_extra_sibling(hub, hostile[i]);
        cv_model_ref ref;
        cv_pull_result res;
        cv_err err = { 0 };
        cv_pull_opts o = opts();
        /* Its quant is unique in the repo, so the picker chooses it. */
        int rc = pull("test/hostile-GGUF", &ref, &o, &res, &err);
        CHECK_MSG(rc == CV_ECORRUPT, "%s: rc %d (%s)", hostile[i], rc, err.msg);
        cv_store_entry *v;
        int n;
        CHECK(cv_store_list(store_dir(), &v, &n, NULL) == 0 && n == 0);
        free(v);
    }
    hub_fake_set_extra_sibling(hub, NULL);
}

TEST(second_pull_of_the_same_file_is_refused_while_the_first_runs)
{
    new_store();
    cv_model_ref ref;
    cv_err err = { 0 };
    CHECK(cv_model_resolve("test/tiny-qwen3-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &err) == 0);
    char dir[PATH_MAX + 16], part[PATH_MAX + 16];
    snprintf(dir, sizeof dir, "%s/test/tiny-qwen3-GGUF", store_dir());
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    CHECK(system(cmd) == 0);
    snprintf(part, sizeof part, "%s.part", ref.path);
    int fd = open(part, O_RDWR | O_CREAT, 0644);
    CHECK(fd >= 0 && flock(fd, LOCK_EX) == 0); /* what the first pull holds */
    cv_pull_result res;
    cv_pull_opts o = opts();
    int rc = cv_model_pull(&ref, &o, &res, &err);
    CHECK_EQ_INT(rc, CV_EBUSY);
    CHECK_MSG(strstr(err.msg, "another corvid pull") != NULL, "%s", err.msg);
    close(fd);
}

/* Sets *cancel once the partial file holds `at` bytes: the fake hub stalls
 * there, so the pull is mid-transfer when it sees the flag. */
typedef struct watcher {
    const char *part;
    int64_t at;
    volatile int *cancel;
} watcher;

static void *watch(void *ud)
{
    watcher *w = ud;
    for (int i = 0; i < 30000 && file_size(w->part) < w->at; i++)
        usleep(2000);
    *w->cancel = 1;
    return NULL;
}

TEST(cancel_stops_the_transfer_and_keeps_the_partial_for_later)
{
    new_store();
    volatile int cancel = 0;
    cv_model_ref ref;
    cv_pull_result res;
    cv_err err = { 0 };
    CHECK(cv_model_resolve("test/stall-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &err) == 0);
    char part[PATH_MAX + 16];
    snprintf(part, sizeof part, "%s.part", ref.path);
    watcher w = { part, (int64_t)files[F_STALL].drop_at, &cancel };
    pthread_t th;
    pthread_create(&th, NULL, watch, &w);
    cv_pull_opts o = opts();
    o.cancel = &cancel;
    int rc = cv_model_pull(&ref, &o, &res, &err);
    pthread_join(th, NULL);
    CHECK_EQ_INT(rc, CV_ECANCELED);
    CHECK_MSG(strstr(err.msg, "resume") != NULL, "%s", err.msg);
    CHECK_EQ_INT(file_size(part), (int64_t)files[F_STALL].drop_at);
    CHECK(!exists(ref.path));
    files[F_STALL].mode = HUB_OK;
    o.cancel = NULL;
    rc = pull("test/stall-GGUF/tiny-qwen3-Q4_K_M.gguf", &ref, &o, &res, &err);
    CHECK_MSG(rc == 0 && res.resumed_from == (int64_t)files[F_STALL].drop_at, "rc %d resumed_from %lld: %s", rc,
              (long long)res.resumed_from, err.msg);
    CHECK(file_equals(ref.path, &q4));
}

int main(void)
{
    test_require_data();
    if (cv_read_file(test_data("reference/models/tiny-qwen3-gpt2-Q4_K_M.gguf"), &q4, 64u << 20, NULL) ||
        cv_read_file(test_data("reference/models/tiny-qwen3-gpt2-Q8_0.gguf"), &q8, 64u << 20, NULL) ||
        cv_read_file(test_data("reference/models/tiny-llama-spm-Q4_0.gguf"), &llama, 64u << 20, NULL)) {
        fprintf(stderr, "cannot read the reference models\n");
        return 1;
    }
    snprintf(tmp_root, sizeof tmp_root, "/tmp/cv_test_pull_XXXXXX");
    if (!mkdtemp(tmp_root))
        return 1;
    unsetenv("HF_TOKEN");
    unsetenv("HUGGING_FACE_HUB_TOKEN");
    size_t third = q4.len / 3;
    files[F_Q4] = (hub_file){ "test/tiny-qwen3-GGUF", "tiny-qwen3-Q4_K_M.gguf", q4.data, q4.len, HUB_OK, 0, false };
    files[F_Q8] = (hub_file){ "test/tiny-qwen3-GGUF", "tiny-qwen3-Q8_0.gguf", q8.data, q8.len, HUB_OK, 0, false };
    files[F_MMPROJ] = (hub_file){ "test/tiny-qwen3-GGUF", "mmproj-tiny-qwen3-Q4_K_M.gguf", NULL, 0, HUB_OK, 0, false };
    files[F_DROP] = (hub_file){ "test/flaky-GGUF", "tiny-qwen3-Q4_K_M.gguf", q4.data, q4.len, HUB_DROP_ONCE, third,
                                false };
    files[F_GATED] = (hub_file){ "test/gated-GGUF", "tiny-qwen3-Q4_K_M.gguf", q4.data, q4.len, HUB_OK, 0, true };
    files[F_CORRUPT] = (hub_file){ "test/corrupt-GGUF", "tiny-qwen3-Q4_K_M.gguf", q4.data, q4.len, HUB_CORRUPT, 0,
                                   false };
    files[F_NOTGGUF] = (hub_file){ "test/notgguf-GGUF", "model-Q4_K_M.gguf", NOT_GGUF, strlen(NOT_GGUF), HUB_NO_SHA,
                                   0, false };
    files[F_DIRECT] = (hub_file){ "test/direct-GGUF", "tiny-qwen3-Q4_K_M.gguf", q4.data, q4.len, HUB_DIRECT, 0, false };
    files[F_NORANGE] = (hub_file){ "test/norange-GGUF", "tiny-qwen3-Q4_K_M.gguf", q4.data, q4.len, HUB_NO_RANGE,
                                   third, false };
    files[F_CHANGE] = (hub_file){ "test/changing-GGUF", "model-Q4_K_M.gguf", llama.data, llama.len, HUB_OK,
                                  llama.len / 2, false };
    files[F_STALL] = (hub_file){ "test/stall-GGUF", "tiny-qwen3-Q4_K_M.gguf", q4.data, q4.len, HUB_STALL_AT, third,
                                 false };
    files[F_SPLIT] = (hub_file){ "test/split-GGUF", "big-Q4_K_M-00001-of-00002.gguf", q4.data, q4.len, HUB_OK, 0,
                                 false };
    files[F_HOSTILE] = (hub_file){ "test/hostile-GGUF", "notes.txt", NULL, 0, HUB_OK, 0, false };
    hub = hub_fake_start(files, N_FILES, TOKEN);
    if (!hub) {
        fprintf(stderr, "cannot start the fake hub\n");
        return 1;
    }
    char ep[64];
    snprintf(ep, sizeof ep, "http://127.0.0.1:%d", hub_fake_port(hub));
    setenv("HF_ENDPOINT", ep, 1);

    RUN(pull_of_repo_file_follows_redirect_checks_sha256_and_renames_into_store);
    RUN(pull_by_quant_asks_the_file_list_and_picks_that_quant);
    RUN(connection_dropped_mid_transfer_is_resumed_with_range_and_completes);
    RUN(interrupted_pull_keeps_the_partial_and_the_next_pull_resumes_it);
    RUN(server_that_ignores_range_restarts_the_file_from_zero);
    RUN(partial_of_a_remote_file_that_changed_is_discarded);
    RUN(corrupted_body_fails_sha256_and_nothing_is_left_in_the_store);
    RUN(body_that_is_not_gguf_is_rejected_by_the_reader_and_deleted);
    RUN(file_served_without_redirect_is_checked_by_size_only);
    RUN(hub_errors_say_what_is_wrong_and_what_to_do);
    RUN(hf_token_goes_to_the_hub_as_bearer_and_not_to_the_cdn);
    RUN(unreachable_hub_fails_after_one_retry_and_leaves_nothing);
    RUN(file_list_with_a_path_outside_the_repo_is_refused);
    RUN(second_pull_of_the_same_file_is_refused_while_the_first_runs);
    RUN(cancel_stops_the_transfer_and_keeps_the_partial_for_later);

    hub_fake_stop(hub);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmp_root);
    cv_buf_free(&q4);
    cv_buf_free(&q8);
    cv_buf_free(&llama);
    return test_report();
}
