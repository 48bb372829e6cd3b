/* gvocab.h — test helper: a cv_grammar_vocab from a GGUF file's tokenizer
 * metadata, decoding the pieces itself (byte-level BPE's byte-to-unicode map,
 * SentencePiece's ▁ and <0xXX>), so grammar tests do not depend on the
 * tokenizer layer. Token types CONTROL/UNKNOWN/UNUSED are special; EOS/EOT
 * and the usual end tokens are end-of-generation. */
#ifndef CV_TEST_GVOCAB_H
#define CV_TEST_GVOCAB_H

#include "gguf/gguf.h"
#include "grammar/grammar.h"

static int gv_byte_of_cp(uint32_t cp)
{
    /* GPT-2 bytes_to_unicode inverse */
    if ((cp >= '!' && cp <= '~') || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    static int table[512];
    static int init;
    if (!init) {
        int n = 0;
        for (int b = 0; b < 256; b++)
            if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)))
                table[256 + n++] = b;
        init = 1;
    }
    if (cp >= 256 && cp < 256 + 68)
        return table[cp];
    return -1;
}

static bool gv_is_eog_text(cv_str t)
{
    static const char *const names[] = { "<|endoftext|>", "<|im_end|>", "<|eot_id|>", "<|eom_id|>", "</s>",
                                         "<|end|>", "<end_of_turn>", "<|return|>", "<|call|>" };
    for (size_t i = 0; i < CV_ARRAY_LEN(names); i++)
        if (cv_str_eqz(t, names[i]))
            return true;
    return false;
}

/* Builds the vocab; returns NULL (and prints why) on failure. */
static cv_grammar_vocab *gv_load(const char *path)
{
    cv_gguf *g = NULL;
    cv_err err;
    if (cv_gguf_open(path, &g, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        return NULL;
    }
    const cv_gguf_value *toks = NULL, *types = NULL;
    cv_str model = { 0 };
    cv_gguf_get_arr(g, "tokenizer.ggml.tokens", CV_GGUF_STRING, &toks, &err);
    cv_gguf_get_arr(g, "tokenizer.ggml.token_type", -1, &types, NULL);
    cv_gguf_get_str(g, "tokenizer.ggml.model", &model, NULL);
    int64_t eos = -1, eot = -1;
    cv_gguf_get_int(g, "tokenizer.ggml.eos_token_id", &eos, NULL);
    cv_gguf_get_int(g, "tokenizer.ggml.eot_token_id", &eot, NULL);
    if (!toks) {
        cv_gguf_close(g);
        return NULL;
    }
    int32_t n = (int32_t)toks->arr.n;
    cv_str *pieces = calloc((size_t)n, sizeof *pieces);
    uint8_t *flags = calloc((size_t)n, 1);
    char *store = malloc(toks->arr.n * 64 + 1024);
    size_t at = 0;
    bool spm = cv_str_eqz(model, "llama");
    for (int32_t i = 0; i < n; i++) {
        cv_str t = toks->arr.strs[i];
        int type = types ? (int)cv_gguf_arr_int(types, (uint64_t)i) : 1;
        if (type == 3 || type == 2 || type == 5)
            flags[i] |= CV_GRAMMAR_TOK_SPECIAL;
        if (i == eos || i == eot || ((type == 3 || type == 4) && gv_is_eog_text(t)))
            flags[i] = CV_GRAMMAR_TOK_EOG;
        char *out = store + at;
        size_t len = 0;
        if (type == 6 && t.len == 6 && !memcmp(t.ptr, "<0x", 3)) {
            unsigned v;
            sscanf(t.ptr + 3, "%2x", &v);
            out[len++] = (char)v;
        } else if (spm || type == 3 || type == 4) {
            for (size_t k = 0; k < t.len && len < 60; k++) {
                if (spm && k + 2 < t.len && (unsigned char)t.ptr[k] == 0xE2 && (unsigned char)t.ptr[k + 1] == 0x96 &&
                    (unsigned char)t.ptr[k + 2] == 0x81) {
                    out[len++] = ' ';
                    k += 2;
                } else {
                    out[len++] = t.ptr[k];
                }
            }
        } else {
            for (size_t k = 0; k < t.len && len < 60;) {
                uint32_t cp;
                int m = cv_utf8_decode(t.ptr + k, t.len - k, &cp);
                if (m < 0)
                    break;
                int b = gv_byte_of_cp(cp);
                if (b < 0)
                    break;
                out[len++] = (char)b;
                k += (size_t)m;
            }
        }
        pieces[i] = (cv_str){ out, len };
        at += len;
    }
    cv_grammar_vocab *v = NULL;
    if (cv_grammar_vocab_create(n, pieces, flags, &v, &err))
        fprintf(stderr, "%s\n", err.msg);
    free(pieces);
    free(flags);
    free(store);
    cv_gguf_close(g);
    return v;
}

#endif
