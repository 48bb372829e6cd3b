/* cuda_rtc.c — the kernels, compiled at run time. The build embeds the
 * .cu/.cuh text of kernels/ (cuda_embed.cmake -> cv_cuda_sources); here
 * NVRTC compiles a program for the device's architecture the first time a
 * process needs it, and the image goes to a disk cache so the next start
 * loads it in milliseconds.
 *
 * The cache is a directory of files named
 *   <source>[-<defines>]-<sm|compute>_<NN>-<key16>.<cubin|ptx>
 * where key16 starts the SHA-256 of everything that decides the image: a
 * format version (CACHE_FORMAT), NVRTC's version, the target, the options
 * and the text of the program and of every header in the table. Editing a
 * kernel, upgrading NVRTC or moving to another card changes the key, so a
 * stale image is never loaded; writing a new image removes the files of
 * the same program and target with other keys. Files are written whole
 * (cv_write_file_atomic), so a crash leaves no torn image. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/cuda/cuda_int.h"

/* Raised when the naming or contents of cache files change meaning. */
#define CACHE_FORMAT 1
/* Every program: C++17 (if constexpr), device code only, no fast-math (the
 * matmul pins its rounding). */
static const char *const base_options[] = { "-std=c++17", "-default-device" };

int cv_cuda_target_for(const cv_cuda_nvrtc *n, int sm, cv_cuda_target *out, cv_err *err)
{
    if (sm < CV_CUDA_MIN_SM)
        return cv_err_set(err, CV_EUNSUPPORTED,
                          "compute capability %d.%d is too old: corvid's kernels need %d.%d or newer (dp4a int8 dot "
                          "products)",
                          sm / 10, sm % 10, CV_CUDA_MIN_SM / 10, CV_CUDA_MIN_SM % 10);
    int best = -1;
    for (int i = 0; i < n->n_archs; i++) {
        if (n->archs[i] == sm) {
            *out = (cv_cuda_target){ .sm = sm, .ptx = false };
            return 0;
        }
        if (n->archs[i] < sm && n->archs[i] > best)
            best = n->archs[i];
    }
    if (best < 0)
        return cv_err_set(err, CV_EUNSUPPORTED,
                          "NVRTC %d.%d (%s) compiles for sm_%d and newer; this GPU is sm_%d: install the NVRTC of an "
                          "older CUDA toolkit that still supports it (CUDA 12 does from sm_50), or point "
                          "CORVID_LIBNVRTC at one",
                          n->major, n->minor, n->path, n->archs[0], sm);
    /* A card newer than this NVRTC: PTX of the newest architecture it
     * knows, which the driver compiles for the card at load. */
    *out = (cv_cuda_target){ .sm = best, .ptx = true };
    return 0;
}

static const cv_cuda_source *source_find(const char *name)
{
    for (int i = 0; i < cv_cuda_n_sources; i++)
        if (!strcmp(cv_cuda_sources[i].name, name))
            return &cv_cuda_sources[i];
    return NULL;
}

static bool is_header(const cv_cuda_source *s)
{
    const size_t n = strlen(s->name);
    return n > 4 && !strcmp(s->name + n - 4, ".cuh");
}

void cv_cuda_rtc_key_in(const cv_cuda_source *srcs, int n_srcs, const cv_cuda_nvrtc *n, const cv_cuda_target *t,
                        const char *source, const char *defines, char key[65])
{
    cv_sha256 h;
    cv_sha256_init(&h);
    char head[160];
    const int len = snprintf(head, sizeof head, "corvid-cuda-cache %d nvrtc %d.%d sm_%d %s", CACHE_FORMAT, n->major,
                             n->minor, t->sm, t->ptx ? "ptx" : "cubin");
    cv_sha256_update(&h, head, (size_t)len);
    for (size_t i = 0; i < CV_ARRAY_LEN(base_options); i++)
        cv_sha256_update(&h, base_options[i], strlen(base_options[i]) + 1);
    cv_sha256_update(&h, defines, strlen(defines) + 1);
    cv_sha256_update(&h, source, strlen(source) + 1);
    /* The program and every header, each as name and text: a program may
     * include any header, and a header may include another. */
    for (int i = 0; i < n_srcs; i++) {
        const cv_cuda_source *s = &srcs[i];
        if (strcmp(s->name, source) && !is_header(s))
            continue;
        cv_sha256_update(&h, s->name, strlen(s->name) + 1);
        cv_sha256_update(&h, s->text, s->len);
    }
    cv_sha256_final(&h, key);
}

void cv_cuda_rtc_key(const cv_cuda_nvrtc *n, const cv_cuda_target *t, const char *source, const char *defines,
                     char key[65])
{
    cv_cuda_rtc_key_in(cv_cuda_sources, cv_cuda_n_sources, n, t, source, defines, key);
}

int cv_cuda_rtc_compile(const cv_cuda_nvrtc *n, const cv_cuda_target *t, const char *source, const char *defines,
                        cv_buf *image, cv_err *err)
{
    const cv_cuda_source *src = source_find(source);
    if (!src || is_header(src))
        return cv_err_set(err, CV_EINVAL, "cuda: no kernel program '%s' in the embedded sources", source);
    const char *hdr[64], *hdr_names[64];
    int n_hdr = 0;
    for (int i = 0; i < cv_cuda_n_sources && n_hdr < 64; i++)
        if (is_header(&cv_cuda_sources[i])) {
            hdr[n_hdr] = cv_cuda_sources[i].text;
            hdr_names[n_hdr++] = cv_cuda_sources[i].name;
        }
    char arch[32];
    snprintf(arch, sizeof arch, "--gpu-architecture=%s_%d", t->ptx ? "compute" : "sm", t->sm);
    const char *opts[8];
    int n_opts = 0;
    for (size_t i = 0; i < CV_ARRAY_LEN(base_options); i++)
        opts[n_opts++] = base_options[i];
    opts[n_opts++] = arch;
    if (*defines)
        opts[n_opts++] = defines;

    nvrtc_program prog = NULL;
    nvrtc_result r = n->nvrtcCreateProgram(&prog, src->text, src->name, n_hdr, hdr, hdr_names);
    if (r != 0)
        return cv_err_set(err, CV_EUNSUPPORTED, "NVRTC: creating %s: %s", source, n->nvrtcGetErrorString(r));
    int rc = 0;
    r = n->nvrtcCompileProgram(prog, n_opts, opts);
    if (r != 0) {
        size_t log_len = 0;
        cv_buf log = { 0 };
        if (n->nvrtcGetProgramLogSize(prog, &log_len) == 0 && log_len > 1) {
            cv_buf_reserve(&log, log_len + 1);
            if (n->nvrtcGetProgramLog(prog, log.data) == 0)
                log.len = strlen(log.data);
        }
        rc = cv_err_set(err, CV_EUNSUPPORTED, "NVRTC %d.%d cannot compile %s %s for %s_%d: %s: %.300s", n->major,
                        n->minor, source, defines, t->ptx ? "compute" : "sm", t->sm, n->nvrtcGetErrorString(r),
                        log.len ? log.data : "(no log)");
        cv_buf_free(&log);
        goto out;
    }
    size_t len = 0;
    r = t->ptx ? n->nvrtcGetPTXSize(prog, &len) : n->nvrtcGetCUBINSize(prog, &len);
    if (r != 0 || len == 0) {
        rc = cv_err_set(err, CV_EUNSUPPORTED, "NVRTC compiled %s but returned no %s", source,
                        t->ptx ? "PTX" : "cubin");
        goto out;
    }
    cv_buf_reset(image);
    cv_buf_reserve(image, len + 1);
    r = t->ptx ? n->nvrtcGetPTX(prog, image->data) : n->nvrtcGetCUBIN(prog, image->data);
    if (r != 0) {
        rc = cv_err_set(err, CV_EUNSUPPORTED, "NVRTC: reading %s's image: %s", source, n->nvrtcGetErrorString(r));
        goto out;
    }
    image->len = len;
    image->data[len] = 0;
out:
    n->nvrtcDestroyProgram(&prog);
    return rc;
}

/* "mm.cu-DCV_WTYPE=12-sm_90" (the defines with their spaces and dashes
 * squeezed; compute_NN for PTX): the part of a cache file's name before
 * its key. */
static void cache_stem(const cv_cuda_target *t, const char *source, const char *defines, char *out, size_t n)
{
    char d[96] = "";
    size_t k = 0;
    for (const char *c = defines; *c && k + 1 < sizeof d; c++)
        if ((*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_' ||
            *c == '=')
            d[k++] = *c;
    d[k] = 0;
    snprintf(out, n, "%s%s%s-%s_%d", source, k ? "-" : "", d, t->ptx ? "compute" : "sm", t->sm);
}

/* Removes dir's files that start with stem + "-" but are not keep. */
static void cache_prune(const char *dir, const char *stem, const char *keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    const size_t n = strlen(stem);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, stem, n) || e->d_name[n] != '-' || !strcmp(e->d_name, keep))
            continue;
        char path[PATH_MAX];
        if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) < (int)sizeof path)
            unlink(path);
    }
    closedir(d);
}

/* mkdir -p of dir (0700: the images are the user's). */
static int make_dirs(const char *dir)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return -1;
    for (char *c = p + 1; *c; c++) {
        if (*c != '/')
            continue;
        *c = 0;
        if (mkdir(p, 0700) && errno != EEXIST)
            return -1;
        *c = '/';
    }
    return mkdir(p, 0700) && errno != EEXIST ? -1 : 0;
}

int cv_cuda_rtc_get(const cv_cuda_nvrtc *n, const cv_cuda_target *t, const char *dir, const char *source,
                    const char *defines, cv_buf *image, bool *hit, cv_err *err)
{
    *hit = false;
    if (!dir || !*dir)
        return cv_cuda_rtc_compile(n, t, source, defines, image, err);
    char key[65], stem[160], name[256], path[PATH_MAX];
    cv_cuda_rtc_key(n, t, source, defines, key);
    cache_stem(t, source, defines, stem, sizeof stem);
    snprintf(name, sizeof name, "%s-%.16s.%s", stem, key, t->ptx ? "ptx" : "cubin");
    if (snprintf(path, sizeof path, "%s/%s", dir, name) >= (int)sizeof path)
        return cv_cuda_rtc_compile(n, t, source, defines, image, err);
    cv_buf_reset(image);
    if (cv_read_file(path, image, (size_t)1 << 30, NULL) == 0 && image->len > 0) {
        *hit = true;
        return 0;
    }
    int rc = cv_cuda_rtc_compile(n, t, source, defines, image, err);
    if (rc)
        return rc;
    cv_err werr = { 0 };
    if (make_dirs(dir) != 0)
        cv_warn("cuda: cannot create the kernel cache %s (%s); kernels will be compiled at every start", dir,
                strerror(errno));
    else if (cv_write_file_atomic(path, image->data, image->len, &werr) != 0)
        cv_warn("cuda: cannot write the kernel cache: %s", werr.msg);
    else
        cache_prune(dir, stem, name);
    return 0;
}
