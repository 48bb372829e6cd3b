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

/* ---- tool-call parsing (chat/toolcall/) ---- */
/* Text held while the parser cannot yet tell a tool call from prose (a
 * marker followed by a body not yet recognised, a bare JSON object or
 * Python list that is a call only once complete, a call inside unclosed
 * reasoning). Real calls that must be held whole are small (bare Llama 3
 * JSON); 1 MiB covers a large file write, and beyond it the text is
 * released as text, which bounds memory per stream. */
#define CV_TC_MAX_HOLD (1u << 20)
/* One non-string argument value held for typing by the schema (an XML
 * parameter that must become a number, object or array). Larger values go
 * out as the string they are. */
#define CV_TC_MAX_VALUE (1u << 20)
/* Tool names and call ids: real ones are < 64 bytes; 256 bounds the header
 * a reader must hold before it can commit to a call. */
#define CV_TC_MAX_NAME 256
/* Whitespace held at the end of the text in case markup follows it. */
#define CV_TC_MAX_WS_HOLD 4096
/* Calls in one response: agents issue a handful; more is a runaway loop. */
#define CV_TC_MAX_CALLS 128
/* Tools declared in one request (also what a parser indexes). */
#define CV_TC_MAX_TOOLS 1024
/* A Harmony message header (<|start|>role<|channel|>.. to=.. <|message|>). */
#define CV_TC_MAX_HEADER 1024

#endif
