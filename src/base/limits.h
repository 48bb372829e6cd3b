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

/* ---- grammar (constrained decoding) ---- */
/* Automaton states of one rule before determinising (Thompson NFA). A schema
 * string with maxLength 10000 needs ~40 per character; past this the schema is
 * rejected rather than compiled for seconds. */
#define CV_MAX_GRAMMAR_NFA_STATES 400000
/* Deterministic states of one rule, and of a whole grammar. Subset
 * construction can explode (a pattern like (a|b)*a(a|b){20} needs 2^20
 * states): these bounds make such a schema fail fast with CV_ELIMIT. Real
 * tool schemas compile to a few thousand states. */
#define CV_MAX_GRAMMAR_RULE_STATES 20000
#define CV_MAX_GRAMMAR_STATES 200000
/* Rules of one grammar: one per object/array schema, $ref target and
 * constrained primitive; Claude Code's 40-odd tools need a few hundred. */
#define CV_MAX_GRAMMAR_RULES 20000
/* Counted repetition ({m,n}, minLength/maxLength, minItems/maxItems) is
 * expanded into copies; bounds above this are treated as unbounded (the
 * grammar is then looser there, with a warning). */
#define CV_MAX_GRAMMAR_REPEAT 2000
/* Nested frames in one stack: the JSON depth of a generated document plus
 * helper rules. Deeper continuations are not allowed (a recursive schema then
 * stops nesting), which bounds the work per byte. */
#define CV_MAX_GRAMMAR_STACK_DEPTH 256
/* Stacks alive at once in one state (ambiguity, e.g. anyOf branches that
 * share a prefix). Past this the extra stacks are dropped with a warning;
 * JSON Schema grammars keep a handful. */
#define CV_MAX_GRAMMAR_STACKS 4096
/* Values of one enum and alternatives of one anyOf/oneOf. */
#define CV_MAX_GRAMMAR_ALTS 10000
/* Bytes of one regular expression (pattern). */
#define CV_MAX_GRAMMAR_PATTERN 4096
/* Vocabulary size and the longest token piece, for the token trie. */
#define CV_MAX_GRAMMAR_VOCAB (1u << 21)
#define CV_MAX_GRAMMAR_TOKEN_BYTES 4096
/* Compiled grammars a served model keeps (sched/constrain.c, least recently
 * used out): an agent resends the same tools every turn, a few agents at
 * once fit; each grammar holds its token-mask cache (a few MiB with a 151k
 * vocabulary at most). */
#define CV_MAX_GRAMMAR_CACHE 16
/* Key text (schema or tools JSON) past which a grammar is compiled for its
 * request only and not cached: the key is compared on every lookup. */
#define CV_MAX_GRAMMAR_CACHE_KEY (1u << 20)

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

/* ---- HTTP server (server/) ---- */
/* Request body: Claude Code's bodies are 76-89 kB and agent sessions grow with
 * history; 32 MiB holds a very long session with room to spare while bounding
 * what one request can make us buffer. Over it: 413. */
#define CV_MAX_HTTP_BODY (32u << 20)
/* Per-connection memory libmicrohttpd uses for the request line and headers;
 * real clients send < 4 kB of headers. Over it MHD answers 431. */
#define CV_HTTP_CONN_MEMORY (64u << 10)
/* Concurrent connections (one thread each): agents open tens; the cap bounds
 * threads and memory under a connection flood. */
#define CV_MAX_HTTP_CONNECTIONS 256
/* SSE keep-alive interval while nothing else is sent (long prefill, queue):
 * at most 15 s apart, since proxies and SDKs time out idle reads at 30-600 s. */
#define CV_SSE_KEEPALIVE_MS 10000
/* A connection idle this long (no request, no bytes) is closed. Agents keep
 * connections between turns for seconds to minutes. */
#define CV_HTTP_IDLE_TIMEOUT_S 300
/* A request body still arriving after this long gets 408: a slow-loris upload
 * must not hold a thread forever. 60 s covers 32 MiB at ~4 Mbit/s. */
#define CV_HTTP_BODY_TIMEOUT_MS 60000
/* Messages and tools in one request: long agent sessions stay under a few
 * thousand messages; Claude Code sends 24-27 tools. Bounds the walkers. */
#define CV_MAX_MESSAGES 8192
#define CV_MAX_TOOLS 1024
/* Stop strings per request (OpenAI allows 4, Anthropic more) and their length. */
#define CV_MAX_STOP_STRINGS 32
#define CV_MAX_STOP_BYTES 1024
/* Tool calls in one response: parallel calls from real models are a
 * handful; bounds the encoder's table against a runaway parser. */
#define CV_MAX_TOOL_CALLS 256
/* logit_bias entries per request (OpenAI documents up to 300). The same
 * definition as the engine's sampler limit, so the two may meet. */
#define CV_MAX_LOGIT_BIAS 4096
/* Token ids in a raw completions prompt. */
#define CV_MAX_PROMPT_IDS (1 << 22)
/* /v1/responses kept in memory for previous_response_id (LRU). Each holds its
 * conversation, so the ceiling bounds memory. */
#define CV_RESPONSE_STORE_DEFAULT 256
#define CV_MAX_RESPONSE_STORE 65536
/* Several models in one server (server/models.c). A store holds tens of
 * models; the bound keeps the per-request name search and /v1/models short. */
#define CV_MAX_SERVED_MODELS 4096
#define CV_MAX_MODEL_NAME 512
/* --route rules: agents need two or three (Claude Code's small and large). */
#define CV_MAX_MODEL_ROUTES 256
/* How long a request for a model not loaded waits for room when every
 * loaded model is busy (one agent turn on a large model on CPU is minutes),
 * then 503 + Retry-After; and how often it looks at its client meanwhile. */
#define CV_MODEL_WAIT_MS (600 * 1000)
#define CV_MODEL_POLL_MS 200
/* /v1/embeddings: inputs in one request (OpenAI's own limit), and how many
 * of them are in the scheduler at once (the rest wait their turn in the
 * handler, so one large batch never fills the queue other clients need). */
#define CV_MAX_EMBED_INPUTS 2048
#define CV_EMBED_IN_FLIGHT 64

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
/* Experts per MoE layer and experts one token uses (real: 8..512 experts,
 * 1..16 used); bounds the router rows and the per-token route tables. */
#define CV_MAX_EXPERTS 1024
#define CV_MAX_EXPERTS_USED 64
/* Gated DeltaNet layers (hybrid models): the causal conv's taps (real: 4)
 * and a head's key/value size d (real: 128). Every sequence holds d x d
 * floats of state per value head and layer, so d bounds that memory; the
 * taps bound the conv state, (taps - 1) rows of the conv's channels. */
#define CV_MAX_SSM_CONV 64
#define CV_MAX_SSM_STATE 1024

/* ---- engine (engine/) ---- */
/* Positions one sequence may hold (context window). 1M tokens is beyond
 * any model corvid runs on CPU; it bounds block tables. */
#define CV_MAX_CONTEXT (1 << 20)
/* Sequences one engine serves at once (slots in the KV cache). */
#define CV_MAX_SEQS 4096
/* Tokens in one forward call: bounds the activation scratch, which is sized
 * once at engine creation (a prefill longer than this is split in chunks). */
#define CV_MAX_BATCH_TOKENS 8192

/* ---- scheduler (sched/) ---- */
/* Requests waiting for the engine thread; beyond it submit says CV_EBUSY so
 * the server answers "overloaded" instead of queueing without bound. */
#define CV_MAX_SCHED_QUEUE 256
/* Stop token ids per request (EOS, EOT, <|im_end|>, ...: a handful). */
#define CV_MAX_STOP_TOKENS 64
/* Tokens one scheduler step computes (every running sequence's next token
 * plus prefill chunks of new ones): a long prompt delays running streams by
 * at most one such step. Measured in docs/PERF.md (scheduler section). */
#define CV_SCHED_BATCH_TOKENS_DEFAULT 256
/* Speculative decoding by prompt lookup (sched/draft.c): tokens drafted
 * per step for a decoding sequence by default (--draft), and at most. One
 * forward call of 1..4 tokens costs about what one token does on a CPU
 * (the weights are read once either way), 5 and more cost ~1.2x and up
 * (docs/PERF.md, "Speculative decoding"). A draft needs a match of
 * NGRAM_MIN..NGRAM_MAX of the sequence's last tokens earlier in it. */
#define CV_SCHED_DRAFT_DEFAULT 3
#define CV_SCHED_DRAFT_MAX 16
#define CV_SCHED_DRAFT_NGRAM_MIN 2
#define CV_SCHED_DRAFT_NGRAM_MAX 4
/* The chance that a drafted token is taken (given the one before it was)
 * assumed for a request that has not verified a draft yet. Deep in a
 * context a drafted token costs its attention over every position, so a
 * step drafts only the tokens likely enough to be taken to pay for that
 * (cv_sched_draft_worth); each request's own figure then follows its
 * drafts' outcomes, recent ones weighing most. */
#define CV_SCHED_DRAFT_PRIOR 0.6f
/* The prefix-cache file's size at most, by default (--cache-max): it is
 * read back whole at start, so it bounds start-up time and disk use. */
#define CV_SCHED_CACHE_FILE_DEFAULT (4ll << 30)
/* Share of the KV pool a cache file may fill at start (percent): the rest
 * stays free for the first requests. */
#define CV_SCHED_CACHE_LOAD_PERCENT 75
/* KV positions `corvid serve` sizes by default (a share of free memory):
 * for a tiny model that share is tens of millions of positions, whose block
 * tables alone (8 bytes a block) would be hundreds of MiB; 16M positions is
 * far beyond what agent traffic reuses. An explicit --kv-mem is not capped. */
#define CV_SERVE_MAX_KV_TOKENS (1 << 24)
/* Context per sequence `corvid serve` gives by default: the model's trained
 * context up to this (agents send 20k-100k-token prompts, so the engine's
 * 4096 default would refuse Claude Code's first turn), and never more than
 * the KV pool holds. Memory does not grow with it: the pool is shared and
 * paged, a sequence's block table is 4 bytes per 16 positions. */
#define CV_SERVE_DEFAULT_CTX 131072
/* Sequences at once for an embedding model (at least; --parallel may give
 * more): /v1/embeddings batches are tens of short inputs, and a step should
 * hold enough of them to fill its token budget. An embedding holds its KV
 * only while it is computed. */
#define CV_SERVE_EMBED_PARALLEL 32

/* ---- model store, downloads and launchers (cli/) ---- */
/* A MODEL argument (path, alias, org/repo[:QUANT], URL): real ones are < 300
 * bytes; the bound keeps every derived path inside PATH_MAX. */
#define CV_MAX_MODEL_SPEC 1024
/* A Hugging Face API answer (/api/models/ORG/REPO lists every file of a
 * repo): repos with thousands of quantized files answer < 2 MiB. */
#define CV_MAX_HUB_JSON_BYTES (16u << 20)
/* One response header line we keep (ETag, Location, X-Error-Message). */
#define CV_MAX_HTTP_HEADER_VALUE 8192
/* Attempts of one download before giving up: each attempt after the first
 * resumes with a Range request where the partial file was left, so a flaky
 * connection costs only the bytes in flight. */
#define CV_DOWNLOAD_ATTEMPTS 6
/* A transfer slower than 1 KiB/s for this long is abandoned (and retried):
 * a stalled connection must not hang `corvid pull` forever. */
#define CV_DOWNLOAD_STALL_S 60
/* Folders below the store that `corvid ls` walks (store/ORG/REPO/FILE is 3)
 * and the files it lists: bounds the walk over a hostile or huge folder. */
#define CV_STORE_MAX_DEPTH 6
#define CV_STORE_MAX_FILES 100000
/* `corvid launch` waits this long for a server it started to answer
 * /readyz with 200 (loading and warming a large model from a cold disk). */
#define CV_LAUNCH_READY_TIMEOUT_S 600

#endif
