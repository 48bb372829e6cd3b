/* models.h — the part of the cli layer that other commands call: where
 * models live on disk (the store), the alias table, the resolver that turns
 * any MODEL argument into a file, the downloader behind `corvid pull`, and
 * the table of agent clients behind `corvid recipe` and `corvid launch`.
 *
 * A MODEL argument is, in the order the resolver tries them:
 *   1. a path to an existing file (`./m.gguf`, `/data/m.gguf`);
 *   2. an alias from the table (`qwen3-0.6b`), optionally `ALIAS:QUANT`;
 *   3. a Hugging Face URL (`https://huggingface.co/ORG/REPO/resolve/REV/F.gguf`)
 *      or any other http(s) URL of a GGUF file;
 *   4. `ORG/REPO/FILE.gguf` (one file of a repo) or `ORG/REPO[:QUANT]`
 *      (the repo's GGUF of that quant, Q4_K_M when none is named);
 *   5. a name already in the store: `FILE`, `FILE.gguf` or `ORG/REPO`.
 * Remote forms map to a fixed place in the store, STORE/ORG/REPO/FILE, so
 * resolving twice gives the same path and a pulled model is found offline.
 *
 * The store is $CORVID_MODELS, else $XDG_DATA_HOME/corvid/models, else
 * ~/.local/share/corvid/models. A download is written to FILE.part beside
 * its destination (with FILE.part.json recording what is being fetched, so a
 * later pull resumes it only if the remote file is still the same), checked,
 * validated as GGUF, and renamed into place: the store never holds a half
 * or unchecked file under a model's name. */
#ifndef CV_CLI_MODELS_H
#define CV_CLI_MODELS_H

#include <limits.h>

#include "base/base.h"

/* ---- aliases (aliases.c) ---- */

/* One row of the alias table: a short name for a model that runs well as a
 * coding agent's backend, the GGUF that `corvid pull NAME` fetches (a
 * sensible default quant), and what its authors recommend for context and
 * sampling (0 = not stated, leave the server's default). */
typedef struct cv_model_alias {
    const char *name;    /* "qwen3-0.6b" */
    const char *repo;    /* "Qwen/Qwen3-0.6B-GGUF" */
    const char *file;    /* "Qwen3-0.6B-Q8_0.gguf" */
    const char *summary; /* one line for `corvid ls --aliases` */
    int32_t n_ctx;       /* recommended context (tokens) */
    float temperature, top_p, min_p, repeat_penalty;
    int32_t top_k;
    const char *arch;    /* the file's general.architecture: a row corvid cannot run is refused
                            before its download (cv_model_alias_runnable) */
    const char *shape;   /* the `corvid synth --shape` of the same dimensions, or NULL */
    /* An embedding model: its pooling (sched.h cv_pooling), which `serve`
     * gives the file when it lacks {arch}.pooling_type, and the shortest
     * its vectors may be cut to (Matryoshka-trained; 0: not at all). */
    int32_t pooling, min_dims;
} cv_model_alias;

extern const cv_model_alias cv_model_aliases[];
extern const int cv_n_model_aliases;

/* 0 when corvid runs the row's architecture; else CV_EUNSUPPORTED with one
 * line saying so (which architecture, which ones corvid runs). */
int cv_model_alias_runnable(const cv_model_alias *a, cv_err *err);

/* The row named name (exact, case-insensitive), or NULL. */
const cv_model_alias *cv_model_alias_find(const char *name);
/* The row whose repo and file are these (case-insensitive), or NULL: `ls`
 * shows a pulled file under its alias. */
const cv_model_alias *cv_model_alias_by_file(const char *repo, const char *file);

/* ---- the store and the resolver (models_dir.c) ---- */

/* Writes the store folder into out (not created). Fails with CV_EINVAL when
 * neither $CORVID_MODELS, $XDG_DATA_HOME nor $HOME gives an absolute path,
 * CV_ELIMIT when the path does not fit. */
int cv_models_dir(char *out, size_t n, cv_err *err);

typedef enum cv_model_kind {
    CV_MODEL_FILE,   /* a path the user gave */
    CV_MODEL_STORE,  /* found in the store by name */
    CV_MODEL_REMOTE, /* an alias, repo or URL: fetchable */
} cv_model_kind;

typedef struct cv_model_ref {
    cv_model_kind kind;
    bool local;               /* path exists as a regular file */
    char path[PATH_MAX];      /* the file; for REMOTE its place in the store ("" until file is known) */
    char repo[520];           /* REMOTE from a hub: "ORG/REPO" (two segments of <= 255 bytes) */
    char file[512];           /* REMOTE: the file in the repo ("" = choose by quant) */
    char quant[32];           /* REMOTE without file: wanted quant, upper case ("" = default) */
    char revision[128];       /* REMOTE: branch, tag or commit ("main") */
    char url[2048];           /* REMOTE from a plain URL (not a hub repo) */
    const cv_model_alias *alias; /* the alias row it came from, or NULL */
} cv_model_ref;

/* Resolves MODEL (see the file comment) without touching the network. A
 * REMOTE ref whose file is in the store already has local = true; one named
 * by quant only has local = true when the store holds exactly one matching
 * file of that repo. Fails with CV_EINVAL for a malformed argument and
 * CV_ENOTFOUND (the message lists the accepted forms) when nothing matches. */
int cv_model_resolve(const char *spec, cv_model_ref *out, cv_err *err);

/* For commands that read a model but never download one (info, tokenize,
 * template): the local file MODEL names when it resolves to one (an alias
 * or repo already pulled, a name in the store), else spec itself unchanged,
 * so an existing path, and the error a missing one gets, stay as they were.
 * Returns buf or spec. */
const char *cv_model_local_or_self(const char *spec, char *buf, size_t n);

/* Picks the GGUF of a quant among a repo's file names: a name that contains
 * the quant as a whole token (Q4_K_M matches "x-Q4_K_M.gguf", not
 * "x-IQ4_K_M.gguf"), ignoring mmproj/draft side files; for quant "" the
 * first of Q4_K_M, Q4_K_S, Q5_K_M, Q8_0, Q6_K, Q4_0 present, else the only
 * GGUF. Split models (-00001-of-0000N) are refused with CV_EUNSUPPORTED.
 * Returns the index into names, or CV_ENOTFOUND naming the quants the repo
 * has. */
int cv_model_pick_file(const char *const *names, int n, const char *quant, const char *repo, cv_err *err);

/* The quant a file name carries ("Q4_K_M", "F16", "MXFP4"), written upper
 * case into out; "" when none is recognized. */
void cv_model_quant_of_name(const char *name, char *out, size_t n);

/* One GGUF in the store, as `corvid ls` shows it. */
typedef struct cv_store_entry {
    char path[PATH_MAX];
    char rel[PATH_MAX]; /* path below the store: ORG/REPO/FILE.gguf */
    int64_t bytes;
    int64_t mtime;
    bool partial;       /* a .part download, not a model yet */
    int64_t part_total; /* partial: the size being fetched (0: unknown) */
} cv_store_entry;

/* Lists the store's *.gguf and *.gguf.part files (sorted by rel), walking at
 * most CV_STORE_MAX_DEPTH folders deep and CV_STORE_MAX_FILES files. *out is
 * malloc'd (caller frees); an absent store gives 0 entries. */
int cv_store_list(const char *dir, cv_store_entry **out, int *n, cv_err *err);

/* The name `ls` shows and `serve` (with no MODEL) serves an entry under:
 * the alias when the file is an alias's, else its path in the store
 * without .gguf (which the resolver accepts back as ORG/REPO/FILE.gguf or
 * FILE). */
void cv_store_entry_name(const cv_store_entry *e, char *out, size_t n);

/* What a GGUF file says about itself, for `corvid ls` and `launch`. */
typedef struct cv_model_facts {
    char arch[64];    /* general.architecture */
    char quant[32];   /* from general.file_type, else the dominant tensor type */
    char name[128];   /* general.name */
    int64_t n_params; /* elements over all tensors */
    int64_t n_ctx;    /* ARCH.context_length, 0 if absent */
} cv_model_facts;

/* Opens the file with the GGUF reader (full validation) and fills facts. */
int cv_model_facts_read(const char *path, cv_model_facts *out, cv_err *err);
/* The name llama.cpp gives a general.file_type value ("Q4_K_M"), or NULL. */
const char *cv_model_ftype_name(int64_t file_type);

/* ---- downloads (download.c) ---- */

typedef struct cv_pull_opts {
    const char *endpoint; /* hub base URL; NULL: $HF_ENDPOINT, else https://huggingface.co */
    const char *token;    /* bearer token; NULL: $HF_TOKEN (then $HUGGING_FACE_HUB_TOKEN) */
    int progress;         /* -1: a bar when stderr is a TTY, else lines; 0: quiet; 1: bar; 2: lines */
    int attempts;         /* 0: CV_DOWNLOAD_ATTEMPTS */
    int retry_delay_ms;   /* before each resume; 0: 1000 doubling; tests set 1 */
    const volatile int *cancel; /* when non-NULL and *cancel != 0 the transfer stops with CV_ECANCELED */
} cv_pull_opts;

/* What a finished pull fetched and checked. */
typedef struct cv_pull_result {
    int64_t bytes;          /* size of the file */
    int64_t resumed_from;   /* bytes already on disk when the first attempt started */
    int attempts;           /* transfers made (1 when nothing failed) */
    bool sha256_checked;    /* the hub's X-Linked-Etag was a sha256 and it matched */
    bool already_present;   /* nothing was fetched: the file was in the store */
    char sha256[65];        /* hex digest of the whole file (when computed) */
} cv_pull_result;

/* Makes ref local: for a REMOTE ref with no file, asks the hub's API for the
 * repo's files and picks one by quant; then downloads into the store (see
 * the file comment) unless the file is there already. On success ref->path
 * is the model and ref->local is true. Errors name the URL and what to do:
 * a 401/403 says to set HF_TOKEN (or that the token lacks access), a 404
 * names the repo or file that does not exist, a size or sha256 mismatch and
 * a file the GGUF reader rejects are deleted and reported. */
int cv_model_pull(cv_model_ref *ref, const cv_pull_opts *o, cv_pull_result *res, cv_err *err);

/* Resolves spec and pulls it when it is remote and not in the store yet:
 * what serve, run, chat and launch call. path receives the local file. */
int cv_model_ensure(const char *spec, const cv_pull_opts *o, char *path, size_t n, cv_err *err);

/* ---- agent clients (clients.c) ---- */

/* How `recipe` and `launch` reach a corvid server. */
typedef struct cv_client_params {
    const char *host;     /* "127.0.0.1" */
    int32_t port;         /* 8000 */
    const char *model;    /* the served model id clients should ask for */
    const char *small_model; /* a second model for background work (Claude Code's haiku requests,
                                opencode's small_model); NULL: model */
    const char *api_key;  /* the server's key, or NULL: clients get a placeholder */
    int64_t n_ctx;        /* the served context (0: unknown) */
} cv_client_params;

/* The configuration of one client for one server: environment to set and
 * unset, arguments to put before the user's, and (recipe only) the
 * persistent config file a user may prefer over the environment. Strings are
 * owned by the setup. */
#define CV_CLIENT_MAX_ITEMS 24
typedef struct cv_client_setup {
    int n_env;
    char *env_name[CV_CLIENT_MAX_ITEMS];
    char *env_value[CV_CLIENT_MAX_ITEMS];
    const char *env_note[CV_CLIENT_MAX_ITEMS]; /* why, for the recipe; may be NULL */
    int n_unset;
    const char *unset[8];
    int n_args;
    char *args[CV_CLIENT_MAX_ITEMS];
    char *file_path;  /* NULL or "~/.codex/config.toml" */
    char *file_body;
} cv_client_setup;

typedef struct cv_client {
    const char *name;     /* "claude-code" */
    const char *aka;      /* other accepted names, space-separated ("claude") */
    const char *title;    /* "Claude Code" */
    const char *exe;      /* what launch runs; NULL: the command after `--` (SDKs) */
    const char *install;  /* how to get it */
    const char *run_hint; /* another way to run it (headless), or for SDKs how launch runs a program */
    void (*setup)(const cv_client_params *p, cv_client_setup *s);
    const char *notes;    /* details that matter, printed by the recipe */
} cv_client;

extern const cv_client cv_clients[];
extern const int cv_n_clients;

const cv_client *cv_client_find(const char *name);
void cv_client_setup_fini(cv_client_setup *s);

#endif
