/* constrain.h — the constrained-decoding section of the scheduler layer
 * (constrain.c), the glue between a request, the grammar layer and the
 * scheduler's sampling hook that the server's backend and a command
 * generating without HTTP (`corvid run --json-schema`) both use:
 * response_format (json_object, json_schema), a forced tool_choice
 * (required / named, Anthropic any / tool) and, optionally, tool_choice
 * auto become a grammar (src/grammar/) enforced token by token through the
 * scheduler's sampling hook. One cv_constrain per model: it builds the grammar vocabulary at the
 * first constrained request and caches compiled grammars
 * (CV_MAX_GRAMMAR_CACHE, least recently used out). Thread-safe. */
#ifndef CV_CONSTRAIN_H
#define CV_CONSTRAIN_H

#include "base/base.h"
#include "chat/chat.h"
#include "sched/sched.h"

typedef struct cv_constrain cv_constrain;

typedef struct cv_constrain_opts {
    /* The model's tool-call syntax (cv_tc_format_name): its row's
     * cv_tool_syntax (cv_tc_format_syntax) is what a forced call's grammar
     * writes; a row without one (plain_content) leaves tool_choice
     * unenforced. */
    const char *syntax;
    /* The model may open a <think> block on its own (its template knows
     * one): grammars then allow "<think>...</think>" first, unless the
     * request switched thinking off. */
    bool reasoning;
    /* tool_choice auto with tools: free text until the syntax's call marker,
     * then the call's grammar (`corvid serve --grammar-lazy`). */
    bool lazy;
} cv_constrain_opts;

/* tok is borrowed and must outlive the object. Fails only without a tokenizer. */
struct cv_tok;
int cv_constrain_create(const struct cv_tok *tok, const cv_constrain_opts *o, cv_constrain **out, cv_err *err);
/* After every request using it has ended. */
void cv_constrain_destroy(cv_constrain *c);

/* The sampling hook for one constrained generation of a request: *hook_ud
 * is NULL (and 0 returned) when the request asks for nothing to enforce.
 * opener is encode_chat's (generation starts inside reasoning when it is
 * not empty); max_tokens the scheduler's limit for the request (the budget
 * rule ends the output complete within it). Errors are the request's
 * (400): a schema corvid cannot compile (CV_EUNSUPPORTED, CV_EINVAL,
 * CV_ELIMIT, the message naming the construct and its JSON pointer), a
 * named tool that is not among the tools, a forced tool_choice without
 * tools (CV_EINVAL). Hand hook_ud with cv_constrain_hook to the scheduler,
 * which then owns it. */
int cv_constrain_for_request(cv_constrain *c, const cv_chat_request *req, cv_str opener, int32_t max_tokens,
                             void **hook_ud, cv_err *err);
/* The same for one JSON Schema document (`corvid run --json-schema`). */
int cv_constrain_for_schema(cv_constrain *c, const json_t *schema, cv_str opener, int32_t max_tokens,
                            void **hook_ud, cv_err *err);
extern const cv_sched_hook cv_constrain_hook;

/* What one hook did (logs, tests, `corvid bench`). */
typedef struct cv_constrain_stats {
    int64_t n_tokens;   /* tokens chosen */
    int64_t n_masked;   /* of which the first draw was refused and the full mask computed */
    int64_t n_budget;   /* of which under the max_tokens budget rule */
    uint64_t ns;        /* time in the hook */
    uint64_t ns_grammar; /* of which in the grammar (the hook less the sampler) */
    uint64_t ns_mask;    /* of which in full masks (cv_grammar_state_mask) */
    uint64_t ns_budget;  /* of which in budget masks (cv_grammar_state_mask_budget) */
} cv_constrain_stats;
void cv_constrain_hook_stats(const void *hook_ud, cv_constrain_stats *out);
/* The output so far is complete (the grammar could end here). */
bool cv_constrain_hook_done(const void *hook_ud);

typedef struct cv_constrain_info {
    int n_cached;          /* grammars in the cache */
    int64_t hits, misses;  /* lookups */
    bool vocab_built;
} cv_constrain_info;
void cv_constrain_get_info(cv_constrain *c, cv_constrain_info *out);

#endif
