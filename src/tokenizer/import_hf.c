/* import_hf.c — Hugging Face tokenizer.json (+ tokenizer_config.json) to a
 * vocabulary-only GGUF, so corvid can load real Qwen3 / Llama 3 / DeepSeek /
 * gpt-oss vocabularies and `corvid synth --vocab` can build models on them.
 *
 * What is read (tokenizer.json, the `tokenizers` serialization format):
 *   model {type "BPE" | "WordPiece", vocab {text: id}, merges ["a b"] or [["a","b"]],
 *          ignore_merges, unk_token}
 *   added_tokens [{id, content, special}] — special ones become CONTROL,
 *          others USER_DEFINED (matched in text even without parse_special)
 *   pre_tokenizer — Sequence / Split{Regex} / ByteLevel / Digits / Punctuation,
 *          flattened to a regex list and recognised against pretok.c's table
 *   normalizer, decoder — checked, not stored (the pre-tokenizer row carries
 *          the normalizer; ByteLevel decoding is implied by model gpt2)
 * and from tokenizer_config.json: bos/eos/pad/unk_token (a string or an
 * AddedToken object), add_bos_token, add_eos_token, chat_template.
 *
 * What is written: the `tokenizer.ggml.*` keys llama.cpp's converter writes
 * (model, pre, tokens, token_type, merges, *_token_id, add_*_token) plus
 * tokenizer.chat_template. Ids missing from the vocabulary become
 * "[PAD<id>]" of type UNUSED, which never matches text. */
#include "tokenizer/tok_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* The GPT-2 ByteLevel regex as tokenizers spells it (use_regex = true). */
#define HF_BYTELEVEL_RX "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
#define HF_PUNCT_RX "[\\p{P}\\x{21}-\\x{2f}\\x{3a}-\\x{40}\\x{5b}-\\x{60}\\x{7b}-\\x{7e}]+"

typedef struct pre_list {
    const char *rx[TOK_MAX_REGEX];
    int n;
    bool byte_level;
} pre_list;

static int add_rx(pre_list *pl, const char *rx, cv_err *err)
{
    if (pl->n == TOK_MAX_REGEX)
        return cv_err_set(err, CV_EUNSUPPORTED, "pre_tokenizer has more than %d splitting steps", TOK_MAX_REGEX);
    pl->rx[pl->n++] = rx;
    return 0;
}

static int walk_pre(json_t *p, pre_list *pl, cv_err *err)
{
    if (!p || json_is_null(p))
        return 0;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!type)
        return cv_err_set(err, CV_EINVAL, "pre_tokenizer entry has no \"type\"");
    if (!strcmp(type, "Sequence")) {
        json_t *arr = json_object_get(p, "pretokenizers");
        size_t i;
        json_t *v;
        json_array_foreach(arr, i, v)
        {
            int rc = walk_pre(v, pl, err);
            if (rc)
                return rc;
        }
        return 0;
    }
    if (!strcmp(type, "Split")) {
        json_t *pat = json_object_get(p, "pattern");
        const char *rx = json_string_value(json_object_get(pat, "Regex"));
        const char *beh = json_string_value(json_object_get(p, "behavior"));
        if (!rx || json_is_true(json_object_get(p, "invert")) || !beh || strcmp(beh, "Isolated"))
            return cv_err_set(err, CV_EUNSUPPORTED,
                              "pre_tokenizer Split is supported only with a Regex pattern, behavior Isolated and no invert");
        return add_rx(pl, rx, err);
    }
    if (!strcmp(type, "ByteLevel")) {
        pl->byte_level = true;
        json_t *ur = json_object_get(p, "use_regex");
        if (!ur || json_is_true(ur))
            return add_rx(pl, HF_BYTELEVEL_RX, err);
        if (json_is_true(json_object_get(p, "add_prefix_space")))
            return cv_err_set(err, CV_EUNSUPPORTED, "pre_tokenizer ByteLevel with add_prefix_space is not supported");
        return 0;
    }
    if (!strcmp(type, "Digits"))
        return add_rx(pl, json_is_true(json_object_get(p, "individual_digits")) ? "\\p{N}" : "\\p{N}+", err);
    if (!strcmp(type, "Punctuation"))
        return add_rx(pl, HF_PUNCT_RX, err);
    return cv_err_set(err, CV_EUNSUPPORTED, "pre_tokenizer type \"%s\" is not supported", type);
}

/* A token named in tokenizer_config.json: a string or {"content": ...}. */
static const char *config_token(json_t *cfg, const char *key)
{
    json_t *v = json_object_get(cfg, key);
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_object(v))
        return json_string_value(json_object_get(v, "content"));
    return NULL;
}

/* lenient: tokenizer_config.json holds integers past 64 bits
 * (model_max_length = 1e30) that strict parsing rejects; only strings and
 * booleans are read from it. */
static int read_json(const char *path, bool lenient, json_t **out, cv_err *err)
{
    cv_buf b = { 0 };
    int rc = cv_read_file(path, &b, CV_MAX_TOK_JSON_BYTES, err);
    if (rc == 0 && lenient) {
        json_error_t je;
        *out = json_loadb(b.data, b.len, JSON_DECODE_INT_AS_REAL, &je);
        if (!*out)
            rc = cv_err_set(err, CV_EINVAL, "%s: invalid JSON at line %d column %d: %s", path, je.line, je.column,
                            je.text);
    } else if (rc == 0) {
        *out = cv_json_parse(b.data, b.len, err);
        if (!*out) {
            cv_err_prefix(err, "%s: ", path);
            rc = CV_EINVAL;
        }
    }
    cv_buf_free(&b);
    return rc;
}

static bool is_dir(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

typedef struct vocab_build {
    int64_t n;
    cv_str *text;
    int32_t *type;
    char **owned; /* strings we built ([PAD..], WordPiece respellings) */
    int64_t n_owned;
} vocab_build;

static char *own(vocab_build *vb, char *s)
{
    vb->owned[vb->n_owned++] = s;
    return s;
}

static int32_t find_text(const vocab_build *vb, const char *z)
{
    if (!z)
        return -1;
    size_t n = strlen(z);
    for (int64_t i = 0; i < vb->n; i++)
        if (vb->text[i].len == n && memcmp(vb->text[i].ptr, z, n) == 0)
            return (int32_t)i;
    return -1;
}

/* ---- the import, phase by phase ---- */

/* Everything one import holds; freed by import_fini whatever phase failed. */
typedef struct hf_import {
    char tj[4096], tc[4096]; /* tokenizer.json and tokenizer_config.json */
    json_t *root, *cfg;
    json_t *model;
    bool wordpiece;
    vocab_build vb;
    cv_str *merges;
    char **merge_owned;      /* merges rebuilt from ["a", "b"] pairs */
    size_t n_merges;
    cv_gguf_writer *w;
} hf_import;

static void import_fini(hf_import *im)
{
    if (im->merge_owned)
        for (size_t i = 0; i < im->n_merges; i++)
            free(im->merge_owned[i]);
    free(im->merge_owned);
    free(im->merges);
    for (int64_t i = 0; i < im->vb.n_owned; i++)
        free(im->vb.owned[i]);
    free(im->vb.owned);
    free(im->vb.text);
    free(im->vb.type);
    cv_gguf_writer_destroy(im->w);
    json_decref(im->root);
    json_decref(im->cfg);
}

/* path is a folder or its tokenizer.json; tokenizer_config.json beside it
 * is optional. Checks the model type. */
static int read_files(hf_import *im, const char *path, cv_err *err)
{
    if (is_dir(path)) {
        snprintf(im->tj, sizeof im->tj, "%s/tokenizer.json", path);
        snprintf(im->tc, sizeof im->tc, "%s/tokenizer_config.json", path);
    } else {
        snprintf(im->tj, sizeof im->tj, "%s", path);
        const char *slash = strrchr(path, '/');
        int dl = slash ? (int)(slash - path) : 1;
        snprintf(im->tc, sizeof im->tc, "%.*s/tokenizer_config.json", dl, slash ? path : ".");
    }
    int rc;
    if ((rc = read_json(im->tj, false, &im->root, err)) != 0)
        return rc;
    if (exists(im->tc) && (rc = read_json(im->tc, true, &im->cfg, err)) != 0)
        return rc;
    if (!im->cfg)
        im->cfg = json_object();
    im->model = json_object_get(im->root, "model");
    const char *mtype = json_string_value(json_object_get(im->model, "type"));
    if (!mtype || !json_is_object(json_object_get(im->model, "vocab")))
        return cv_err_set(err, CV_EINVAL, "%s: model.type or model.vocab is missing", im->tj);
    im->wordpiece = !strcmp(mtype, "WordPiece");
    if (strcmp(mtype, "BPE") && !im->wordpiece)
        return cv_err_set(err, CV_EUNSUPPORTED, "%s: model type \"%s\" is not supported (BPE, WordPiece)", im->tj,
                          mtype);
    return 0;
}

/* Every id's text and type: the vocabulary and the added tokens together,
 * WordPiece pieces respelled as llama.cpp does, holes as [PAD<id>]. */
static int build_vocab(hf_import *im, cv_err *err)
{
    vocab_build *vb = &im->vb;
    json_t *vocab = json_object_get(im->model, "vocab");
    int64_t max_id = -1;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val)
    {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= CV_MAX_TOK_VOCAB)
            return cv_err_set(err, CV_EINVAL, "%s: vocab entry \"%.40s\" has id outside [0, %u)", im->tj, key,
                              CV_MAX_TOK_VOCAB);
        max_id = CV_MAX(max_id, json_integer_value(val));
    }
    json_t *added = json_object_get(im->root, "added_tokens");
    size_t ai;
    json_t *at;
    json_array_foreach(added, ai, at)
    {
        json_int_t id = json_integer_value(json_object_get(at, "id"));
        if (id < 0 || id >= CV_MAX_TOK_VOCAB || !json_is_string(json_object_get(at, "content")))
            return cv_err_set(err, CV_EINVAL, "%s: added_tokens[%zu] has a bad id or content", im->tj, ai);
        max_id = CV_MAX(max_id, id);
    }
    vb->n = max_id + 1;
    vb->text = cv_xcalloc((size_t)vb->n, sizeof(cv_str));
    vb->type = cv_xcalloc((size_t)vb->n, sizeof(int32_t));
    vb->owned = cv_xcalloc((size_t)vb->n * 2 + 1, sizeof(char *));
    json_object_foreach(vocab, key, val)
    {
        int64_t id = json_integer_value(val);
        const char *k = key;
        if (im->wordpiece) {
            /* llama.cpp's spelling: "##x" -> "x", a word start gets ▁ */
            char *s;
            if (!strncmp(key, "##", 2))
                s = cv_xstrdup(key + 2);
            else if (key[0] == '[' && key[strlen(key) - 1] == ']')
                s = cv_xstrdup(key);
            else {
                s = cv_xmalloc(strlen(key) + 4);
                memcpy(s, "\xE2\x96\x81", 3);
                strcpy(s + 3, key);
            }
            k = own(vb, s);
        }
        vb->text[id] = cv_str_of(k);
        vb->type[id] = CV_TOKTYPE_NORMAL;
    }
    json_array_foreach(added, ai, at)
    {
        json_int_t id = json_integer_value(json_object_get(at, "id"));
        vb->text[id] = cv_str_of(json_string_value(json_object_get(at, "content")));
        vb->type[id] = json_is_true(json_object_get(at, "special")) ? CV_TOKTYPE_CONTROL : CV_TOKTYPE_USER_DEFINED;
    }
    for (int64_t i = 0; i < vb->n; i++) {
        if (vb->type[i] == 0) {
            char *s = cv_xmalloc(32);
            snprintf(s, 32, "[PAD%lld]", (long long)i);
            vb->text[i] = cv_str_of(own(vb, s));
            vb->type[i] = CV_TOKTYPE_UNUSED;
        }
    }
    return 0;
}

/* The model and pre-tokenizer keys: bert for WordPiece; for byte-level
 * BPE, the pre-tokenizer recognised from its regexes, and the merges. */
static int model_keys(hf_import *im, cv_err *err)
{
    if (im->wordpiece) {
        cv_gguf_writer_set_str(im->w, "tokenizer.ggml.model", CV_STR("bert"));
        cv_gguf_writer_set_str(im->w, "tokenizer.ggml.pre", CV_STR("default"));
        return 0;
    }
    pre_list pl = { 0 };
    int rc;
    if ((rc = walk_pre(json_object_get(im->root, "pre_tokenizer"), &pl, err)) != 0) {
        cv_err_prefix(err, "%s: ", im->tj);
        return rc;
    }
    if (!pl.byte_level)
        return cv_err_set(err, CV_EUNSUPPORTED,
                          "%s: only byte-level BPE tokenizer.json files are supported (SentencePiece-style BPE "
                          "comes from GGUF files)", im->tj);
    const tok_pre_def *d = tok_pre_match(pl.rx, pl.n);
    if (!d)
        return cv_err_set(err, CV_EUNSUPPORTED,
                          "%s: the pre-tokenizer (%d regexes, first \"%.80s\") is not one corvid knows", im->tj, pl.n,
                          pl.n ? pl.rx[0] : "");
    char pre[64];
    const char *sp = strchr(d->names, ' ');
    snprintf(pre, sizeof pre, "%.*s", sp ? (int)(sp - d->names) : (int)strlen(d->names), d->names);
    bool ig = json_is_true(json_object_get(im->model, "ignore_merges"));
    if (ig != d->ignore_merges)
        cv_warn("import: %s says ignore_merges=%d but pre-tokenizer %s implies %d; using %d", im->tj, ig, pre,
                d->ignore_merges, d->ignore_merges);
    const char *norm = json_string_value(json_object_get(json_object_get(im->root, "normalizer"), "type"));
    bool nfc = norm && !strcmp(norm, "NFC");
    if (nfc != (d->norm == TOK_NORM_NFC))
        cv_warn("import: %s normalizer %s differs from what pre-tokenizer %s applies", im->tj, norm ? norm : "none",
                pre);
    cv_gguf_writer_set_str(im->w, "tokenizer.ggml.model", CV_STR("gpt2"));
    cv_gguf_writer_set_str(im->w, "tokenizer.ggml.pre", cv_str_of(pre));

    json_t *jm = json_object_get(im->model, "merges");
    im->n_merges = json_array_size(jm);
    im->merges = cv_xcalloc(im->n_merges + 1, sizeof(cv_str));
    im->merge_owned = cv_xcalloc(im->n_merges + 1, sizeof(char *));
    for (size_t i = 0; i < im->n_merges; i++) {
        json_t *m = json_array_get(jm, i);
        if (json_is_string(m)) {
            im->merges[i] = cv_str_of(json_string_value(m));
        } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                   json_is_string(json_array_get(m, 1))) {
            cv_buf b = { 0 };
            cv_buf_printf(&b, "%s %s", json_string_value(json_array_get(m, 0)), json_string_value(json_array_get(m, 1)));
            im->merge_owned[i] = cv_buf_steal(&b);
            im->merges[i] = cv_str_of(im->merge_owned[i]);
        } else {
            return cv_err_set(err, CV_EINVAL, "%s: model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", im->tj,
                              i);
        }
    }
    return 0;
}

/* From tokenizer_config.json (and the post-processor): the special token
 * ids, add_bos / add_eos, and the chat template. */
static void config_keys(hf_import *im)
{
    static const struct {
        const char *cfg_key, *gguf_key;
    } specials[] = {
        { "bos_token", "tokenizer.ggml.bos_token_id" },
        { "eos_token", "tokenizer.ggml.eos_token_id" },
        { "pad_token", "tokenizer.ggml.padding_token_id" },
        { "unk_token", "tokenizer.ggml.unknown_token_id" },
        { "sep_token", "tokenizer.ggml.seperator_token_id" },
        { "cls_token", "tokenizer.ggml.cls_token_id" },
        { "mask_token", "tokenizer.ggml.mask_token_id" },
    };
    cv_gguf_writer *w = im->w;
    for (size_t i = 0; i < CV_ARRAY_LEN(specials); i++) {
        int32_t id = find_text(&im->vb, config_token(im->cfg, specials[i].cfg_key));
        if (id >= 0)
            cv_gguf_writer_set_u32(w, specials[i].gguf_key, (uint32_t)id);
    }
    json_t *ab = json_object_get(im->cfg, "add_bos_token");
    bool add_bos = false;
    if (json_is_boolean(ab)) {
        add_bos = json_is_true(ab);
    } else {
        /* TemplateProcessing whose single-sequence template starts with a
         * special token: the tokenizer prepends BOS itself. */
        json_t *pp = json_object_get(im->root, "post_processor");
        json_t *single = json_object_get(pp, "single");
        if (!single && json_is_array(json_object_get(pp, "processors"))) {
            size_t k;
            json_t *sub;
            json_array_foreach(json_object_get(pp, "processors"), k, sub)
            if (json_object_get(sub, "single"))
                single = json_object_get(sub, "single");
        }
        add_bos = json_object_get(json_array_get(single, 0), "SpecialToken") != NULL;
    }
    if (im->wordpiece && !json_is_boolean(ab))
        add_bos = true;
    cv_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
    cv_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", json_is_true(json_object_get(im->cfg, "add_eos_token")));
    json_t *ct = json_object_get(im->cfg, "chat_template");
    if (json_is_array(ct)) {
        size_t k;
        json_t *e;
        json_t *pick = NULL;
        json_array_foreach(ct, k, e)
        if (!pick || !strcmp(json_string_value(json_object_get(e, "name")) ? json_string_value(json_object_get(e, "name")) : "", "default"))
            pick = e;
        ct = json_object_get(pick, "template");
    }
    if (json_is_string(ct))
        cv_gguf_writer_set_str(w, "tokenizer.chat_template", cv_str_of(json_string_value(ct)));
}

int cv_tok_import_hf(const char *path, const char *out_path, cv_err *err)
{
    hf_import im = { 0 };
    int rc;
    if ((rc = read_files(&im, path, err)) || (rc = build_vocab(&im, err)))
        goto done;
    im.w = cv_gguf_writer_create();
    const char *name = strrchr(path, '/');
    cv_gguf_writer_set_str(im.w, "general.name", cv_str_of(name && name[1] ? name + 1 : path));
    if ((rc = model_keys(&im, err)))
        goto done;
    cv_gguf_writer_set_str_arr(im.w, "tokenizer.ggml.tokens", (uint64_t)im.vb.n, im.vb.text);
    cv_gguf_writer_set_arr(im.w, "tokenizer.ggml.token_type", CV_GGUF_INT32, (uint64_t)im.vb.n, im.vb.type);
    if (im.merges)
        cv_gguf_writer_set_str_arr(im.w, "tokenizer.ggml.merges", im.n_merges, im.merges);
    config_keys(&im);
    rc = cv_gguf_writer_write(im.w, out_path, err);
done:
    import_fini(&im);
    return rc;
}
