/* fuzz_tokenizer.c — libFuzzer target for the tokenizer layer. The first
 * input byte picks a vocabulary from ../shared/testdata/vocab (run from the
 * repository root, as scripts/run-fuzz.sh does) and the flags; the rest is
 * text. Any bytes must encode without crashing, byte-level BPE must give the
 * bytes back exactly (when the vocabulary can spell them), and streaming
 * decode must equal one-shot decode and be valid UTF-8. With the top bit of
 * the first byte set, the rest is a GGUF file for cv_tok_load instead. */
#include <stdio.h>
#include <stdlib.h>

#include "tokenizer/tokenizer.h"

static const char *const names[] = { "gpt-2", "llama-spm", "bert-bge", "deepseek-llm", "deepseek-coder",
                                     "falcon", "starcoder", "mpt", "phi-3", "refact" };

/* Loaded once per process: libFuzzer calls the target millions of times. */
static cv_tok *vocab(size_t i)
{
    static cv_tok *loaded[CV_ARRAY_LEN(names)];
    static bool tried[CV_ARRAY_LEN(names)];
    if (!tried[i]) {
        tried[i] = true;
        char path[256];
        snprintf(path, sizeof path, "../shared/testdata/vocab/ggml-vocab-%s.gguf", names[i]);
        if (cv_tok_load_file(path, &loaded[i], NULL) != 0)
            loaded[i] = NULL;
    }
    return loaded[i];
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] & 0x80) {
        cv_gguf *g = NULL;
        cv_tok *t = NULL;
        if (cv_gguf_open_memory(text, len, "fuzz", &g, NULL) == 0 && cv_tok_load(g, &t, NULL) == 0) {
            cv_tok_ids ids = { 0 };
            cv_tok_encode(t, "Hello <s> wörld 123", 20, CV_TOK_ADD_SPECIAL | CV_TOK_PARSE_SPECIAL, &ids, NULL);
            cv_buf out = { 0 };
            cv_tok_decode(t, ids.ids, ids.n, 0, &out, NULL);
            cv_buf_free(&out);
            cv_tok_ids_free(&ids);
        }
        cv_tok_destroy(t);
        cv_gguf_close(g);
        return 0;
    }
    cv_tok *t = vocab((data[0] & 0x0F) % CV_ARRAY_LEN(names));
    if (!t)
        return 0;
    unsigned flags = (data[0] & 0x10 ? CV_TOK_ADD_SPECIAL : 0) | (data[0] & 0x20 ? CV_TOK_PARSE_SPECIAL : 0);
    cv_tok_ids ids = { 0 };
    if (cv_tok_encode(t, text, len, flags, &ids, NULL) != 0)
        abort();
    cv_buf one = { 0 }, streamed = { 0 }, raw = { 0 };
    unsigned dflags = data[0] & 0x40 ? CV_TOK_SKIP_SPECIAL : 0;
    cv_tok_decode(t, ids.ids, ids.n, dflags, &one, NULL);
    cv_tok_stream st;
    cv_tok_stream_init(&st, t, dflags);
    for (size_t i = 0; i < ids.n; i++) {
        size_t before = streamed.len;
        cv_tok_stream_feed(&st, ids.ids[i], &streamed, NULL);
        if (streamed.len > before && !cv_utf8_valid(streamed.data + before, streamed.len - before))
            abort();
        cv_tok_piece(t, ids.ids[i], 0, &raw, NULL);
    }
    cv_tok_stream_flush(&st, &streamed);
    if (streamed.len != one.len || (one.len && memcmp(streamed.data, one.data, one.len)))
        abort();
    if (cv_tok_get_kind(t) == CV_TOK_BPE && !(flags & CV_TOK_PARSE_SPECIAL) && !(flags & CV_TOK_ADD_SPECIAL)) {
        /* every byte of gpt-2's alphabet is a token (and its vocabulary has
         * no USER_DEFINED entries), so its bytes come back exactly */
        if (!strcmp(cv_tok_pre_name(t), "gpt-2") &&
            (raw.len != len || (len && memcmp(raw.data, text, len))))
            abort();
    }
    cv_buf_free(&one);
    cv_buf_free(&streamed);
    cv_buf_free(&raw);
    cv_tok_ids_free(&ids);
    return 0;
}
