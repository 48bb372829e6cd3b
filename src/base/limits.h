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

/* ---- chat templates (chat/jinja/) ----
 * Templates arrive inside downloaded model files, so they are untrusted
 * programs: every resource a render can consume is bounded, and hitting a
 * bound is a CV_ELIMIT error naming the limit, never a hang or a crash. */
/* Template source: the largest real chat templates are ~40 KB. */
#define CV_JINJA_MAX_SOURCE (4u << 20)
/* Nesting of the recursive-descent parser (brackets, operators, blocks):
 * real templates nest < 20 deep; this keeps a hostile "((((..." from
 * exhausting the C stack. */
#define CV_JINJA_MAX_PARSE_DEPTH 200
/* Loop iterations + calls + filter applications in one render: a 40-turn,
 * 24-tool agent conversation takes ~20k; 5M is ~0.5 s of work. */
#define CV_JINJA_MAX_STEPS 5000000u
/* Rendered bytes, and bytes of any captured block or macro result: prompts
 * beyond a million tokens (~4 MB) exceed every context window. */
#define CV_JINJA_MAX_OUTPUT (32u << 20)
/* Scratch bytes allocated by values during one render. */
#define CV_JINJA_MAX_MEMORY (256u << 20)
/* Nested macro / caller / recursive-loop calls: real templates recurse only
 * over JSON-schema depth (< 20); Python's own recursion limit stops Jinja2
 * itself at a few hundred. */
#define CV_JINJA_MAX_DEPTH 100
/* Wall time of one render, a backstop behind the step limit. */
#define CV_JINJA_MAX_NS (2000000000ull)
/* range() length: Jinja2's sandbox MAX_RANGE. */
#define CV_JINJA_MAX_RANGE 100000

#endif
