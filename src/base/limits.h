/* limits.h — every limit corvid enforces on input, with the reason it exists.
 * Limits are checked at the edge (file reader, HTTP handler, parser) before
 * anything is allocated from an untrusted count (STYLE.md "Limits"). A layer
 * that adds a limit adds it here, not as a magic number in its code. */
#ifndef CV_LIMITS_H
#define CV_LIMITS_H

/* ---- files (gguf/) ---- */
/* Longest GGUF string (key, tensor name, metadata value). Real chat templates
 * reach ~40 KB and merges entries are short; 64 MiB bounds a hostile length
 * field without rejecting any real file. */
#define CV_MAX_GGUF_STRING (64u << 20)
/* Metadata entries and tensors: real files hold < 100 keys and < 2k tensors
 * (a 405B model has ~1.1k); 1M bounds the allocation for the index. */
#define CV_MAX_GGUF_KV (1u << 20)
#define CV_MAX_GGUF_TENSORS (1u << 20)
/* Array elements in one metadata value: vocabularies reach ~260k tokens and
 * merges ~500k; 16M leaves headroom while bounding hostile counts. */
#define CV_MAX_GGUF_ARRAY (16u << 20)
/* Tensor rank: GGUF defines at most 4 dimensions. */
#define CV_MAX_TENSOR_DIMS 4

/* ---- JSON ---- */
/* Nesting depth of any JSON document we parse: deep enough for real tool
 * schemas (which rarely pass 20), shallow enough that recursive walkers over
 * the tree cannot exhaust the stack. */
#define CV_MAX_JSON_DEPTH 128

/* ---- tokenizer ---- */
/* Bytes of text in one encode call. A 1M-token prompt is ~4 MiB of text;
 * per-call scratch is ~30 bytes per input byte in the worst case (one long
 * word), so 64 MiB bounds one call near 2 GiB. */
#define CV_MAX_TOK_INPUT (64u << 20)
/* Vocabulary entries: real vocabularies reach ~260k; 4M bounds hash tables. */
#define CV_MAX_TOK_VOCAB (4u << 20)
/* Bytes of one token's text: real tokens are < 256 bytes (whitespace runs,
 * long special names); 4 KiB rejects garbage without rejecting a real file. */
#define CV_MAX_TOK_TEXT 4096u
/* A tokenizer.json (+ tokenizer_config.json) to import: the largest real ones
 * (gpt-oss, Gemma) are ~30 MiB. */
#define CV_MAX_TOK_JSON_BYTES (256u << 20)

#endif
