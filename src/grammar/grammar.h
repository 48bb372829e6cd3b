/* grammar — the face of the constrained-decoding layer: JSON Schema and
 * tool-call syntaxes compiled to a grammar, and per-sequence states that say,
 * at every decoding step, which vocabulary tokens keep the output a valid
 * prefix (docs/grammar.md is the design).
 *
 * Three objects, three lifetimes:
 *   cv_grammar        compiled once per request (or cached by the caller);
 *                     immutable except for its token-mask cache, which is
 *                     filled lazily under a lock: any number of sequences may
 *                     share one grammar from any threads.
 *   cv_grammar_vocab  the model's tokens as bytes plus a byte trie; built once
 *                     per model, read-only afterwards.
 *   cv_grammar_state  one per sequence; not shared between threads.
 *
 * The grammar works on bytes: a token is allowed when its bytes (as the
 * tokenizer decodes them, partial UTF-8 included) continue a valid prefix.
 * Special tokens (control tokens such as <|im_end|>) never match as text;
 * end-of-generation tokens are allowed exactly when the grammar is complete,
 * and a grammar can name a special token as a literal (Mistral's [TOOL_CALLS]).
 *
 * Errors follow base.h: 0 or a negative CV_E*, with a sentence in cv_err. A
 * schema corvid cannot compile fails with CV_EUNSUPPORTED (a construct it does
 * not know), CV_EINVAL (a schema that is malformed or admits no value) or
 * CV_ELIMIT (too deep, too large, a pattern whose automaton explodes), and
 * the message names the construct and its JSON pointer; servers answer 400. */
#ifndef CV_GRAMMAR_H
#define CV_GRAMMAR_H

#include "base/base.h"

typedef struct cv_grammar cv_grammar;
typedef struct cv_grammar_vocab cv_grammar_vocab;
typedef struct cv_grammar_state cv_grammar_state;

/* ---- compiling ---- */

typedef struct cv_grammar_opts {
    /* Receives one line per schema keyword that was ignored (the grammar is
     * then looser than the schema there, never stricter). May be NULL: the
     * lines then go to cv_warn. */
    cv_buf *warnings;
    /* Reasoning models (added for the server's wiring, issue 8): as in
     * cv_grammar_tools_opts below, a reasoning block may come before the
     * document: "think_open ... think_close" when think_open is set (the
     * block is then optional), or, when only think_close is set, the output
     * starts inside the block (the prompt ended with the opening tag). */
    const char *think_open;
    const char *think_close;
} cv_grammar_opts;

/* Compiles a JSON Schema (draft 4 to 2020-12 subset; docs/grammar.md lists
 * what is enforced) into a grammar for one JSON document. Output is JSON with
 * object keys in the schema's declared order, optional properties allowed
 * and extra properties only where additionalProperties is a schema or true on
 * an object without declared properties; between tokens up to two blanks,
 * then optionally a line break and up to 32 blanks of indent. opts may be
 * NULL. The caller destroys *out. */
int cv_grammar_from_schema(const json_t *schema, const cv_grammar_opts *opts, cv_grammar **out, cv_err *err);
/* Parses text as JSON first (CV_EINVAL naming line and column if it is not). */
int cv_grammar_from_schema_text(const char *text, size_t len, const cv_grammar_opts *opts, cv_grammar **out,
                                cv_err *err);
/* A grammar for a whole string matched by a regular expression of the subset
 * documented in docs/grammar.md (anchors are implied). */
int cv_grammar_from_regex(const char *re, size_t len, cv_grammar **out, cv_err *err);

/* ---- tool-call syntaxes ---- */

/* How one tool-call syntax writes a call: the descriptor that a forced-call
 * grammar is built from and that the syntax's parser row carries
 * (src/chat/toolcall/tc_<name>.c, cv_tc_format_syntax), so that what the
 * grammar writes is what that parser reads back and the grammar knows no
 * syntax by name. A call list is
 *
 *   open  call_open CALL call_close  [sep call_open CALL call_close ...]  close
 *
 * and CALL, by name:
 *   CV_TS_NAME_MEMBER  {"name_key": "N", "args_key": ARGS}
 *   CV_TS_NAME_KEY     {"N": ARGS}
 *   CV_TS_NAME_BARE    name_pre N name_post [digits, when index] args_pre ARGS args_post
 * with ARGS, by args:
 *   CV_TS_ARGS_JSON    the arguments object, following the tool's schema
 *   CV_TS_ARGS_XML     per property, in declared order (optional ones may be
 *                      left out): param_open K param_mid V param_close
 *                      [K param_tail]; V is a string's raw text (no
 *                      param_close inside), other types as JSON; all JSON
 *                      with values_json
 *   CV_TS_ARGS_PYTHON  K=V, K=V with JSON values
 * NULL texts are empty. Whitespace at either end of a text, and next to a
 * special token, is any short blank run (what the parsers skip), except at
 * the start of name_post, which ends a bare name, and at the end of
 * param_mid and the start of param_close, which border a raw value. Texts in specials are matched as special tokens too (a
 * vocabulary's control token, or its bytes). BARE names must be
 * identifiers ([A-Za-z_][A-Za-z0-9_.-]*), Python keys too (no dots). */
typedef enum cv_ts_name { CV_TS_NAME_MEMBER, CV_TS_NAME_KEY, CV_TS_NAME_BARE } cv_ts_name;
typedef enum cv_ts_args { CV_TS_ARGS_JSON, CV_TS_ARGS_XML, CV_TS_ARGS_PYTHON } cv_ts_args;

typedef struct cv_tool_syntax {
    const char *name;          /* the parser format's name (errors, cache keys) */
    const char *trigger;       /* the first text of every call list, NULL if unmarked: lazy grammars wait for it */
    const char *open, *close;  /* around all the calls */
    const char *call_open, *call_close; /* around each call */
    const char *sep;           /* between calls */
    bool single;               /* one call at most (the syntax ends the turn after it) */
    const char *const *specials; /* NULL-terminated */
    cv_ts_name name_as;
    const char *name_key, *args_key; /* NAME_MEMBER */
    const char *name_pre, *name_post; /* NAME_BARE */
    bool name_post_opt;        /* name_post may be left out (Mistral's [ARGS]) */
    bool index;                /* digits after name_post: the call's index (Kimi) */
    cv_ts_args args_as;
    const char *args_pre, *args_post; /* around ARGS (NAME_BARE) */
    const char *param_open, *param_mid, *param_close, *param_tail; /* ARGS_XML */
    bool values_json;          /* ARGS_XML: every value as JSON */
} cv_tool_syntax;

/* Tool calls forced in a model's own syntax (the tool-call parser formats of
 * testdata/toolcalls/<format>.jsonl, each row's descriptor). Arguments
 * follow each tool's parameters schema. */
typedef struct cv_grammar_tools_opts {
    const cv_tool_syntax *syntax;
    const json_t *tools;    /* neutral tools array: [{type:function, function:{name, parameters}}] */
    const char *force_name; /* one tool by name (tool_choice named / Anthropic "tool"); NULL: any tool */
    bool parallel;          /* allow more than one call */
    /* tool_choice "auto": free text until the syntax's opening marker, then
     * the grammar holds; ending without any call stays allowed. */
    bool lazy;
    /* Reasoning models: when think_close is set ("</think>"), a reasoning
     * block may come first: "think_open ... think_close" when think_open is
     * set, or, when think_open is NULL, the output starts inside the block
     * (the prompt ended with the opening tag). */
    const char *think_open;
    const char *think_close;
    cv_buf *warnings;       /* as in cv_grammar_opts */
} cv_grammar_tools_opts;

/* Fails with CV_EUNSUPPORTED for a NULL syntax, and for lazy with a syntax
 * whose trigger is missing or not ASCII; CV_EINVAL for a tool or parameter
 * name the syntax cannot write; CV_ENOTFOUND when force_name is not among
 * the tools; schema errors as cv_grammar_from_schema. */
int cv_grammar_from_tools(const cv_grammar_tools_opts *o, cv_grammar **out, cv_err *err);

void cv_grammar_destroy(cv_grammar *g);

/* Size facts for logs and tests. */
typedef struct cv_grammar_info {
    int n_rules;
    int n_states;
    int n_cached;  /* token-mask cache entries filled so far */
} cv_grammar_info;
void cv_grammar_get_info(const cv_grammar *g, cv_grammar_info *out);
/* Human-readable dump of the rules' automata (debugging, `corvid grammar`). */
void cv_grammar_dump(const cv_grammar *g, cv_buf *out);

/* ---- vocabulary ---- */

enum {
    CV_GRAMMAR_TOK_SPECIAL = 1u << 0, /* never matched as text (control/unused/unknown tokens) */
    CV_GRAMMAR_TOK_EOG = 1u << 1,     /* ends generation: allowed when the grammar is complete */
};

/* Builds the byte trie over n_vocab tokens: pieces[i] are the bytes token i
 * decodes to (copied), flags[i] a CV_GRAMMAR_TOK_* mask (flags may be NULL).
 * Fails with CV_ELIMIT past CV_MAX_GRAMMAR_VOCAB tokens or a piece longer than
 * CV_MAX_GRAMMAR_TOKEN_BYTES. The caller destroys *out. */
int cv_grammar_vocab_create(int32_t n_vocab, const cv_str *pieces, const uint8_t *flags, cv_grammar_vocab **out,
                            cv_err *err);
/* The same from a loaded tokenizer: pieces as cv_tok_piece decodes them
 * (special tokens as their text), CONTROL/UNKNOWN/UNUSED ids special, the
 * tokenizer's end-of-generation ids EOG. */
struct cv_tok;
int cv_grammar_vocab_from_tok(const struct cv_tok *t, cv_grammar_vocab **out, cv_err *err);
void cv_grammar_vocab_destroy(cv_grammar_vocab *v);
int32_t cv_grammar_vocab_n(const cv_grammar_vocab *v);
cv_str cv_grammar_vocab_piece(const cv_grammar_vocab *v, int32_t id);
/* The CV_GRAMMAR_TOK_* flags of id (0 when out of range). */
unsigned cv_grammar_vocab_flags(const cv_grammar_vocab *v, int32_t id);

/* ---- per-sequence state: the sampler's hook ---- */

/* Starts a sequence at the beginning of the grammar. v may be NULL for a
 * byte-only state (accept_bytes, tests); mask/allows/accept need it. A
 * grammar's token cache serves one vocabulary: binding a second one fails
 * with CV_EINVAL. g and v must outlive the state. */
int cv_grammar_state_create(cv_grammar *g, const cv_grammar_vocab *v, cv_grammar_state **out, cv_err *err);
void cv_grammar_state_destroy(cv_grammar_state *s);
/* A copy at the same position (speculation, beam search, tests). */
int cv_grammar_state_clone(const cv_grammar_state *s, cv_grammar_state **out, cv_err *err);

/* Fills allowed (ceil(n_vocab / 64) words, bit i of word i/64 = token i)
 * with the tokens that keep the output a valid prefix; EOG tokens are set
 * when the output may end here. At least one bit is set unless the state is
 * done. Thread: the state's owner; the grammar cache is locked inside. */
int cv_grammar_state_mask(cv_grammar_state *s, uint64_t *allowed, cv_err *err);
/* Whether one token is allowed (the sampler's fast path: check the sampled
 * token first and compute the whole mask only when it is refused). */
bool cv_grammar_state_allows(cv_grammar_state *s, int32_t token);
/* Advances by an accepted token. Fails with CV_EINVAL (state unchanged) when
 * the token is not allowed. Accepting an EOG token marks the state done. */
int cv_grammar_state_accept(cv_grammar_state *s, int32_t token, cv_err *err);
/* Advances by raw bytes (forced text, tests). CV_EINVAL when they are not a
 * valid continuation (state unchanged). */
int cv_grammar_state_accept_bytes(cv_grammar_state *s, const char *p, size_t n, cv_err *err);
/* Advances by the special token whose text is literal (no vocabulary needed). */
int cv_grammar_state_accept_special(cv_grammar_state *s, const char *text, cv_err *err);
/* The fewest bytes that complete the output from here (0 when it may end
 * now). Special-token literals count as one byte. */
int32_t cv_grammar_state_min_bytes(cv_grammar_state *s);
/* Narrows allowed (a mask just filled by cv_grammar_state_mask) to the
 * tokens after which the shortest completion is at most max_bytes (EOG
 * tokens are kept). This is how structured output ends within max_tokens
 * instead of being cut off: a sampler with n tokens left, this one
 * included, calls it with max_bytes = n - 1 once n <= min_bytes +
 * CV_GRAMMAR_BUDGET_WINDOW; since every byte has a token, the output then
 * completes in time unless one token commits to more than the window.
 * Tokens that stay inside the top rule are priced on its automaton alone;
 * the rest are simulated. */
#define CV_GRAMMAR_BUDGET_WINDOW 128
/* The shortest completion after one allowed token (what mask_budget
 * checks), or -1 when the token is not allowed. A sampler can draw first and
 * check only the drawn token, redrawing without it when it is over budget:
 * the same distribution as filtering the whole mask, at a fraction of the cost. */
int32_t cv_grammar_state_min_bytes_after(cv_grammar_state *s, int32_t token);
int cv_grammar_state_mask_budget(cv_grammar_state *s, uint64_t *allowed, int32_t max_bytes, cv_err *err);
/* The output so far is a complete document (an EOG token would be allowed). */
bool cv_grammar_state_can_end(const cv_grammar_state *s);
/* Nothing but the end can follow: complete with no possible continuation, or
 * an EOG token was accepted. */
bool cv_grammar_state_done(const cv_grammar_state *s);

#endif
