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

/* ---- models (model/) ---- */
/* Transformer blocks: the largest open models have ~130; 1024 bounds the
 * per-layer tables a hostile block_count would size. */
#define CV_MAX_LAYERS 1024
/* Hidden size, FFN size, q/kv widths: 1M bounds every per-token scratch row
 * (real models stay under 64k for hidden and 256k for FFN). */
#define CV_MAX_MODEL_DIM (1 << 20)
/* Vocabulary: real ones reach ~260k; 4M bounds a logits row at 16 MiB. */
#define CV_MAX_VOCAB (1 << 22)
/* Attention heads per layer and the width of one head (real: <= 128 heads,
 * head_dim <= 256). */
#define CV_MAX_HEADS 4096
#define CV_MAX_HEAD_DIM 4096

/* ---- engine (engine/) ---- */
/* Positions one sequence may hold (context window). 1M tokens is beyond
 * any model corvid runs on CPU; it bounds block tables. */
#define CV_MAX_CONTEXT (1 << 20)
/* Sequences one engine serves at once (slots in the KV cache). */
#define CV_MAX_SEQS 4096
/* Tokens in one forward call: bounds the activation scratch, which is sized
 * once at engine creation (a prefill longer than this is split in chunks). */
#define CV_MAX_BATCH_TOKENS 8192
/* Logit-bias entries per request (OpenAI documents up to 300 tokens). */
#define CV_MAX_LOGIT_BIAS 4096

/* ---- scheduler (sched/) ---- */
/* Requests waiting for the engine thread; beyond it submit says CV_EBUSY so
 * the server answers "overloaded" instead of queueing without bound. */
#define CV_MAX_SCHED_QUEUE 256
/* Stop token ids per request (EOS, EOT, <|im_end|>, ...: a handful). */
#define CV_MAX_STOP_TOKENS 64

#endif
