/* tokenizer — the face of the tokenizer layer: text <-> token ids for every
 * vocabulary family corvid serves, byte-identical to the model's reference
 * tokenizer (Hugging Face `tokenizers` / SentencePiece).
 *
 * Families (GGUF `tokenizer.ggml.model`):
 *   "llama" — SentencePiece-style BPE over Unicode characters with scores,
 *             ▁ for spaces, the leading-space rule and <0xXX> byte fallback;
 *   "gpt2"  — byte-level BPE with ranked merges, after a pre-tokenizer chosen
 *             by `tokenizer.ggml.pre` (gpt-2, llama-bpe, qwen2, deepseek-*,
 *             starcoder, falcon, mpt, refact, gpt-4o, ...);
 *   "bert"  — WordPiece (greedy longest match, lower-cased, accents stripped).
 *
 * A cv_tok is built once from an open GGUF and is read-only afterwards: any
 * number of threads may encode and decode with one shared cv_tok at the same
 * time (each call allocates its own scratch). Ids are int32 in [0, n_vocab).
 *
 * Special tokens: a vocabulary token of type CONTROL (GGUF token_type 3, e.g.
 * `<|im_start|>`) is produced from text only when the caller passes
 * CV_TOK_PARSE_SPECIAL (rendered chat templates do; user text must not).
 * USER_DEFINED tokens (type 4, e.g. Qwen's `<think>`) are always matched, as
 * the reference tokenizers do. */
#ifndef CV_TOKENIZER_H
#define CV_TOKENIZER_H

#include "base/base.h"
#include "gguf/gguf.h"

typedef struct cv_tok cv_tok;

typedef enum cv_tok_kind {
    CV_TOK_SPM = 1, /* "llama" */
    CV_TOK_BPE = 2, /* "gpt2" */
    CV_TOK_WPM = 3, /* "bert" */
} cv_tok_kind;

/* GGUF token types (tokenizer.ggml.token_type), as llama.cpp writes them. */
enum {
    CV_TOKTYPE_NORMAL = 1,
    CV_TOKTYPE_UNKNOWN = 2,
    CV_TOKTYPE_CONTROL = 3,
    CV_TOKTYPE_USER_DEFINED = 4,
    CV_TOKTYPE_UNUSED = 5,
    CV_TOKTYPE_BYTE = 6,
};

/* ---- loading ---- */

/* Builds a tokenizer from the `tokenizer.ggml.*` metadata of g (g may be
 * closed afterwards: everything is copied). Fails with CV_ECORRUPT naming the
 * key when arrays disagree in length or ids are out of range, CV_EUNSUPPORTED
 * for an unknown model or pre-tokenizer name, CV_ELIMIT past the limits in
 * base/limits.h. The caller destroys *out. */
int cv_tok_load(const cv_gguf *g, cv_tok **out, cv_err *err);
/* Opens path, loads its vocabulary and closes it. */
int cv_tok_load_file(const char *path, cv_tok **out, cv_err *err);
void cv_tok_destroy(cv_tok *t);

/* ---- vocabulary facts ---- */

cv_tok_kind cv_tok_get_kind(const cv_tok *t);
int32_t cv_tok_n_vocab(const cv_tok *t);
/* The pre-tokenizer name in use ("qwen2", "llama-bpe", "default", ...). */
const char *cv_tok_pre_name(const cv_tok *t);
/* Raw vocabulary text of id (as stored: byte-level "Ġ" form for gpt2, "▁"
 * for llama); an empty slice for an id out of range. */
cv_str cv_tok_text(const cv_tok *t, int32_t id);
/* GGUF token type of id, 0 when out of range. */
int cv_tok_type(const cv_tok *t, int32_t id);
/* The id whose raw vocabulary text is exactly s, or -1. */
int32_t cv_tok_find(const cv_tok *t, cv_str s);

/* Special ids, -1 when the vocabulary has none. EOT is the end-of-turn token
 * (`<|im_end|>`, `<|eot_id|>`, ...), from tokenizer.ggml.eot_token_id or, when
 * absent, found by its well-known text. */
int32_t cv_tok_bos(const cv_tok *t);
int32_t cv_tok_eos(const cv_tok *t);
int32_t cv_tok_eot(const cv_tok *t);
int32_t cv_tok_pad(const cv_tok *t);
int32_t cv_tok_unk(const cv_tok *t);
/* Whether encode with CV_TOK_ADD_SPECIAL prepends BOS / appends EOS. */
bool cv_tok_adds_bos(const cv_tok *t);
bool cv_tok_adds_eos(const cv_tok *t);
/* True when generating id ends the turn: EOS, EOT, EOM and the well-known
 * end tokens of the vocabulary (`<|endoftext|>`, `<|return|>`, `<|call|>`,
 * ...). The server stops a sequence on any of them. */
bool cv_tok_is_eog(const cv_tok *t, int32_t id);
/* All end-of-generation ids (sorted ascending); *n receives the count. */
const int32_t *cv_tok_eog_ids(const cv_tok *t, size_t *n);
/* True for CONTROL, UNKNOWN and UNUSED ids (what decoding may skip). */
bool cv_tok_is_special(const cv_tok *t, int32_t id);

/* ---- encoding ---- */

enum {
    CV_TOK_ADD_SPECIAL = 1u << 0,   /* BOS/EOS as the vocabulary says (add_bos_token, add_eos_token) */
    CV_TOK_PARSE_SPECIAL = 1u << 1, /* CONTROL tokens written in the text become their ids */
};

/* A growable id array; a zeroed value is empty. */
typedef struct cv_tok_ids {
    int32_t *ids;
    size_t n, cap;
} cv_tok_ids;
void cv_tok_ids_free(cv_tok_ids *v);

/* Appends the ids of text[0..len) to out. Any bytes are accepted: invalid
 * UTF-8 and NUL bytes are encoded byte by byte (byte tokens, or UNK where the
 * vocabulary has no way to spell a byte) and never fail. Fails only with
 * CV_ELIMIT when len exceeds CV_MAX_TOK_INPUT (out untouched). Work is
 * O(len log len) whatever the input. Thread-safe. */
int cv_tok_encode(const cv_tok *t, const char *text, size_t len, unsigned flags, cv_tok_ids *out, cv_err *err);
/* The number of ids cv_tok_encode would produce (count_tokens). */
int cv_tok_count(const cv_tok *t, const char *text, size_t len, unsigned flags, size_t *n, cv_err *err);

/* ---- decoding ---- */

enum {
    CV_TOK_SKIP_SPECIAL = 1u << 0, /* CONTROL/UNKNOWN/UNUSED ids produce no text */
    /* The ids start a text (nothing was decoded before them): for a vocabulary
     * that adds a leading space when encoding (SentencePiece), the first space
     * is dropped again, as the reference decoders do. */
    CV_TOK_AT_START = 1u << 1,
};

/* Appends the bytes of one token: byte-level and ▁ unescaped, <0xXX> as the
 * raw byte, CONTROL tokens as their text unless CV_TOK_SKIP_SPECIAL. The bytes
 * may be a partial UTF-8 sequence; use the stream below for text. Returns
 * CV_EINVAL for an id out of range. */
int cv_tok_piece(const cv_tok *t, int32_t id, unsigned flags, cv_buf *out, cv_err *err);

/* One-shot decode: appends the text of ids to out, always valid UTF-8
 * (ill-formed byte sequences become U+FFFD, one per maximal ill-formed
 * subpart, as Python's errors="replace" and WHATWG TextDecoder do). Equal to
 * feeding every id to a cv_tok_stream with the same flags and then flushing.
 * Returns CV_EINVAL for an id out of range (out holds the text before it). */
int cv_tok_decode(const cv_tok *t, const int32_t *ids, size_t n, unsigned flags, cv_buf *out, cv_err *err);

/* Streaming detokenizer for generated tokens: each feed appends only whole,
 * valid UTF-8 characters and holds back a trailing partial sequence until the
 * token that completes it arrives. A caller-owned value; one per sequence;
 * not shared between threads. */
typedef struct cv_tok_stream {
    const cv_tok *tok;
    unsigned flags;
    bool at_start;
    uint8_t n_held;
    char held[4]; /* the start of a UTF-8 sequence (at most 3 bytes) awaiting the rest */
} cv_tok_stream;

void cv_tok_stream_init(cv_tok_stream *s, const cv_tok *t, unsigned flags);
/* Appends the text made complete by id to out (possibly nothing). Returns
 * CV_EINVAL for an id out of range (state unchanged). */
int cv_tok_stream_feed(cv_tok_stream *s, int32_t id, cv_buf *out, cv_err *err);
/* End of generation: held bytes that never completed become U+FFFD. */
void cv_tok_stream_flush(cv_tok_stream *s, cv_buf *out);

/* ---- import ---- */

/* Turns a Hugging Face tokenizer (a folder holding tokenizer.json and
 * optionally tokenizer_config.json, or the path of a tokenizer.json) into a
 * vocabulary-only GGUF at out_path: tokens, token types, merges, scores (SPM),
 * the pre-tokenizer name recognised from its regexes, special ids, add_bos /
 * add_eos and the chat template. Fails with CV_EUNSUPPORTED naming what it
 * does not know (a model type, a pre-tokenizer regex). */
int cv_tok_import_hf(const char *path, const char *out_path, cv_err *err);

#endif
