/* jinja.h — the chat layer's private interface to its Jinja interpreter:
 * compile a template source once into an immutable AST, render it many times
 * (from any number of threads at once) against a JSON context. Only
 * src/chat/template.c, the tests and the fuzz target include this header;
 * other layers see chat/chat_template.h.
 *
 * Semantics follow Jinja2 3.1 as Hugging Face configures it for chat
 * templates: ImmutableSandboxedEnvironment(trim_blocks=True,
 * lstrip_blocks=True, extensions=[loopcontrols, generation]), default
 * Undefined, no autoescape, `tojson` replaced by json.dumps(ensure_ascii=False)
 * and the globals raise_exception and strftime_now. There is no loader: no
 * include/import/extends, no file or environment access. Attributes starting
 * with '_' and the methods that mutate lists and dicts are unsafe, as in the
 * sandbox.
 *
 * Internal layout (for the jinja_*.c files): a template is an AST of jnode;
 * rendering walks it with values jv allocated from a per-render arena, and
 * reports errors by longjmp to the render entry, so no evaluation path
 * allocates outside that arena or the renderer's tracked buffers. */
#ifndef CV_CHAT_JINJA_H
#define CV_CHAT_JINJA_H

#include "base/base.h"

typedef struct cv_jinja_tmpl cv_jinja_tmpl;

/* Per-render limits; zero fields take the defaults from base/limits.h. */
typedef struct cv_jinja_limits {
    uint64_t max_steps;     /* loop iterations + macro calls + filter calls */
    size_t max_output;      /* bytes of output (also of any captured block) */
    size_t max_memory;      /* bytes of scratch values */
    int max_depth;          /* nested macro/caller/recursive-loop calls */
    uint64_t max_ns;        /* wall time */
} cv_jinja_limits;

typedef struct cv_jinja_opts {
    cv_jinja_limits limits;
    /* Unix time used by strftime_now; 0 means the real clock. Times are
     * formatted in local time, as Python's datetime.now() does; tests set
     * TZ=UTC and a fixed time so that renders are reproducible. */
    int64_t now;
} cv_jinja_opts;

/* Compiles src[0..len) (need not be NUL-terminated). On a syntax error
 * returns CV_EINVAL with "line N: what was expected, what was found"; a
 * source or nesting beyond the limits gives CV_ELIMIT. The result is
 * immutable and may be rendered concurrently; free it with cv_jinja_free. */
int cv_jinja_compile(const char *src, size_t len, cv_jinja_tmpl **out, cv_err *err);
void cv_jinja_free(cv_jinja_tmpl *t);

/* Renders with the members of the JSON object `vars` as template variables
 * (a JSON null becomes None). Output is appended to out. Fails with CV_EINVAL
 * for a template runtime error (undefined used, type error,
 * raise_exception: the message says which and where), CV_ELIMIT when a
 * sandbox limit stops it. On failure out holds whatever partial output was
 * produced up to the error; callers drop it. vars is only read. */
int cv_jinja_render(const cv_jinja_tmpl *t, json_t *vars, const cv_jinja_opts *opts, cv_buf *out, cv_err *err);

/* Number of AST nodes (for tests and `corvid template --stats`). */
size_t cv_jinja_n_nodes(const cv_jinja_tmpl *t);

#endif
