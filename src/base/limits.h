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

/* ---- kernels/ ---- */
/* Rows and row length of one matmul weight: the largest real matrices are
 * output layers of ~256k rows and FFNs of ~50k inputs; 16M keeps every
 * element index and packed offset far inside int64 and every per-row block
 * count inside int32. */
#define CV_MAX_MATMUL_DIM (1 << 24)
/* Rotated dimensions per attention head (RoPE): real heads are <= 256 wide;
 * 1024 sizes the on-stack angle tables. Model loaders reject a head_dim
 * above it. */
#define CV_MAX_ROPE_DIMS 1024

/* ---- JSON ---- */
/* Nesting depth of any JSON document we parse: deep enough for real tool
 * schemas (which rarely pass 20), shallow enough that recursive walkers over
 * the tree cannot exhaust the stack. */
#define CV_MAX_JSON_DEPTH 128

#endif
