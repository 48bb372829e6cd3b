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

#endif
