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

int cv_tok_import_hf(const char *path, const char *out_path, cv_err *err)
{
    char tj[4096], tc[4096];
    if (is_dir(path)) {
        snprintf(tj, sizeof tj, "%s/tokenizer.json", path);
        snprintf(tc, sizeof tc, "%s/tokenizer_config.json", path);
    } else {
        snprintf(tj, sizeof tj, "%s", path);
        const char *slash = strrchr(path, '/');
        int dl = slash ? (int)(slash - path) : 1;
        snprintf(tc, sizeof tc, "%.*s/tokenizer_config.json", dl, slash ? path : ".");
    }
    json_t *root = NULL, *cfg = NULL;
    vocab_build vb = { 0 };
    cv_gguf_writer *w = NULL;
    cv_str *merges = NULL;
    char **merge_owned = NULL;
    size_t n_merges = 0;
    int rc;
    if ((rc = read_json(tj, false, &root, err)) != 0)
        goto fail;
    if (exists(tc) && (rc = read_json(tc, true, &cfg, err)) != 0)
        goto fail;
    if (!cfg)
        cfg = json_object();

    json_t *model = json_object_get(root, "model");
    const char *mtype = json_string_value(json_object_get(model, "type"));
    json_t *vocab = json_object_get(model, "vocab");
    if (!mtype || !json_is_object(vocab)) {
        rc = cv_err_set(err, CV_EINVAL, "%s: model.type or model.vocab is missing", tj);
        goto fail;
    }
    bool wordpiece = !strcmp(mtype, "WordPiece");
    if (strcmp(mtype, "BPE") && !wordpiece) {
        rc = cv_err_set(err, CV_EUNSUPPORTED, "%s: model type \"%s\" is not supported (BPE, WordPiece)", tj, mtype);
        goto fail;
    }

    /* ids: the vocabulary and the added tokens together */
    int64_t max_id = -1;
    const char *key;
    json_t *val;
    json_object_foreach(vocab, key, val)
    {
        if (!json_is_integer(val) || json_integer_value(val) < 0 || json_integer_value(val) >= CV_MAX_TOK_VOCAB) {
            rc = cv_err_set(err, CV_EINVAL, "%s: vocab entry \"%.40s\" has id outside [0, %u)", tj, key, CV_MAX_TOK_VOCAB);
            goto fail;
        }
        max_id = CV_MAX(max_id, json_integer_value(val));
    }
    json_t *added = json_object_get(root, "added_tokens");
    size_t ai;
    json_t *at;
    json_array_foreach(added, ai, at)
    {
        json_int_t id = json_integer_value(json_object_get(at, "id"));
        if (id < 0 || id >= CV_MAX_TOK_VOCAB || !json_is_string(json_object_get(at, "content"))) {
            rc = cv_err_set(err, CV_EINVAL, "%s: added_tokens[%zu] has a bad id or content", tj, ai);
            goto fail;
        }
        max_id = CV_MAX(max_id, id);
    }
    vb.n = max_id + 1;
    vb.text = cv_xcalloc((size_t)vb.n, sizeof(cv_str));
    vb.type = cv_xcalloc((size_t)vb.n, sizeof(int32_t));
    vb.owned = cv_xcalloc((size_t)vb.n * 2 + 1, sizeof(char *));
    json_object_foreach(vocab, key, val)
    {
        int64_t id = json_integer_value(val);
        const char *k = key;
        if (wordpiece) {
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
            k = own(&vb, s);
        }
        vb.text[id] = cv_str_of(k);
        vb.type[id] = CV_TOKTYPE_NORMAL;
    }
    json_array_foreach(added, ai, at)
    {
        json_int_t id = json_integer_value(json_object_get(at, "id"));
        vb.text[id] = cv_str_of(json_string_value(json_object_get(at, "content")));
        vb.type[id] = json_is_true(json_object_get(at, "special")) ? CV_TOKTYPE_CONTROL : CV_TOKTYPE_USER_DEFINED;
    }
    for (int64_t i = 0; i < vb.n; i++) {
        if (vb.type[i] == 0) {
            char *s = cv_xmalloc(32);
            snprintf(s, 32, "[PAD%lld]", (long long)i);
            vb.text[i] = cv_str_of(own(&vb, s));
            vb.type[i] = CV_TOKTYPE_UNUSED;
        }
    }

    w = cv_gguf_writer_create();
    const char *name = strrchr(path, '/');
    cv_gguf_writer_set_str(w, "general.name", cv_str_of(name && name[1] ? name + 1 : path));

    if (wordpiece) {
        cv_gguf_writer_set_str(w, "tokenizer.ggml.model", CV_STR("bert"));
        cv_gguf_writer_set_str(w, "tokenizer.ggml.pre", CV_STR("default"));
    } else {
        pre_list pl = { 0 };
        if ((rc = walk_pre(json_object_get(root, "pre_tokenizer"), &pl, err)) != 0) {
            cv_err_prefix(err, "%s: ", tj);
            goto fail;
        }
        if (!pl.byte_level) {
            rc = cv_err_set(err, CV_EUNSUPPORTED,
                            "%s: only byte-level BPE tokenizer.json files are supported (SentencePiece-style BPE "
                            "comes from GGUF files)", tj);
            goto fail;
        }
        const tok_pre_def *d = tok_pre_match(pl.rx, pl.n);
        if (!d) {
            rc = cv_err_set(err, CV_EUNSUPPORTED, "%s: the pre-tokenizer (%d regexes, first \"%.80s\") is not one corvid knows",
                            tj, pl.n, pl.n ? pl.rx[0] : "");
            goto fail;
        }
        char pre[64];
        const char *sp = strchr(d->names, ' ');
        snprintf(pre, sizeof pre, "%.*s", sp ? (int)(sp - d->names) : (int)strlen(d->names), d->names);
        bool im = json_is_true(json_object_get(model, "ignore_merges"));
        if (im != d->ignore_merges)
            cv_warn("import: %s says ignore_merges=%d but pre-tokenizer %s implies %d; using %d", tj, im, pre,
                    d->ignore_merges, d->ignore_merges);
        const char *norm = json_string_value(json_object_get(json_object_get(root, "normalizer"), "type"));
        bool nfc = norm && !strcmp(norm, "NFC");
        if (nfc != (d->norm == TOK_NORM_NFC))
            cv_warn("import: %s normalizer %s differs from what pre-tokenizer %s applies", tj, norm ? norm : "none", pre);
        cv_gguf_writer_set_str(w, "tokenizer.ggml.model", CV_STR("gpt2"));
        cv_gguf_writer_set_str(w, "tokenizer.ggml.pre", cv_str_of(pre));

        json_t *jm = json_object_get(model, "merges");
        n_merges = json_array_size(jm);
        merges = cv_xcalloc(n_merges + 1, sizeof(cv_str));
        merge_owned = cv_xcalloc(n_merges + 1, sizeof(char *));
        for (size_t i = 0; i < n_merges; i++) {
            json_t *m = json_array_get(jm, i);
            if (json_is_string(m)) {
                merges[i] = cv_str_of(json_string_value(m));
            } else if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
                       json_is_string(json_array_get(m, 1))) {
                cv_buf b = { 0 };
                cv_buf_printf(&b, "%s %s", json_string_value(json_array_get(m, 0)), json_string_value(json_array_get(m, 1)));
                merge_owned[i] = cv_buf_steal(&b);
                merges[i] = cv_str_of(merge_owned[i]);
            } else {
                rc = cv_err_set(err, CV_EINVAL, "%s: model.merges[%zu] is neither \"a b\" nor [\"a\", \"b\"]", tj, i);
                goto fail;
            }
        }
    }
    cv_gguf_writer_set_str_arr(w, "tokenizer.ggml.tokens", (uint64_t)vb.n, vb.text);
    cv_gguf_writer_set_arr(w, "tokenizer.ggml.token_type", CV_GGUF_INT32, (uint64_t)vb.n, vb.type);
    if (merges)
        cv_gguf_writer_set_str_arr(w, "tokenizer.ggml.merges", n_merges, merges);

    struct {
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
    for (size_t i = 0; i < CV_ARRAY_LEN(specials); i++) {
        int32_t id = find_text(&vb, config_token(cfg, specials[i].cfg_key));
        if (id >= 0)
            cv_gguf_writer_set_u32(w, specials[i].gguf_key, (uint32_t)id);
    }
    json_t *ab = json_object_get(cfg, "add_bos_token");
    bool add_bos = false;
    if (json_is_boolean(ab)) {
        add_bos = json_is_true(ab);
    } else {
        /* TemplateProcessing whose single-sequence template starts with a
         * special token: the tokenizer prepends BOS itself. */
        json_t *pp = json_object_get(root, "post_processor");
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
    if (wordpiece && !json_is_boolean(ab))
        add_bos = true;
    cv_gguf_writer_set_bool(w, "tokenizer.ggml.add_bos_token", add_bos);
    cv_gguf_writer_set_bool(w, "tokenizer.ggml.add_eos_token", json_is_true(json_object_get(cfg, "add_eos_token")));
    json_t *ct = json_object_get(cfg, "chat_template");
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

    rc = cv_gguf_writer_write(w, out_path, err);
fail:
    if (merge_owned)
        for (size_t i = 0; i < n_merges; i++)
            free(merge_owned[i]);
    free(merge_owned);
    free(merges);
    for (int64_t i = 0; i < vb.n_owned; i++)
        free(vb.owned[i]);
    free(vb.owned);
    free(vb.text);
    free(vb.type);
    cv_gguf_writer_destroy(w);
    json_decref(root);
    json_decref(cfg);
    return rc;
}
