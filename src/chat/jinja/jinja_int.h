/* jinja_int.h — guts shared by the interpreter's files: tokens, AST nodes,
 * values and the render state. Nothing outside src/chat/jinja/ (and the
 * jinja tests) includes it.
 *
 * Values (jv) are 16 bytes, passed by value. Strings are (pointer, byte
 * length) slices that live in the template (literals), in the caller's JSON
 * (context strings, never copied) or in the render arena. JSON arrays and
 * objects from the context are wrapped, not converted (JV_JSON), so a 40-turn
 * conversation costs nothing until the template looks at it; lists and dicts
 * built by the template are native (JV_LIST, JV_DICT). Nothing is ever
 * mutated after it is built except namespace() objects, exactly as in the
 * immutable sandbox, so sharing slices is safe. */
#ifndef CV_CHAT_JINJA_INT_H
#define CV_CHAT_JINJA_INT_H

#include <setjmp.h>

#include "chat/jinja/jinja.h"

/* ---- values ---- */

typedef enum {
    JV_UNDEF, /* uname: the name or hint for the error when it is used */
    JV_NONE,
    JV_BOOL,  /* i */
    JV_INT,   /* i */
    JV_FLOAT, /* f */
    JV_STR,   /* s, n; flag JF_SAFE for Markup */
    JV_LIST,  /* l (flag JF_TUPLE prints as a tuple) */
    JV_DICT,  /* d */
    JV_JSON,  /* j: a JSON array or object from the context */
    JV_NS,    /* d: a namespace() */
    JV_FUNC,  /* fn */
} jv_type;

enum {
    JF_SAFE = 1,   /* a Markup string */
    JF_TUPLE = 2,  /* a tuple: prints as one, immutable */
    JF_UNSAFE = 4, /* an Undefined from a blocked attribute */
    JF_GEN = 8,    /* a generator (map, select, unique, reverse...): always true, no len(), not JSON */
};

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;

typedef struct jv {
    uint8_t t;
    uint8_t flags;
    uint16_t pad;
    uint32_t n; /* JV_STR: byte length */
    union {
        int64_t i;
        double f;
        const char *s;
        jlist *l;
        jdict *d;
        json_t *j;
        jfunc *fn;
    };
} jv;

struct jlist {
    uint32_t n, cap;
    jv *v;
};

struct jdict {
    uint32_t n, cap;
    jv *k, *v;
};

/* ---- tokens ---- */

typedef enum {
    TK_EOF, TK_DATA, TK_VAR_BEGIN, TK_VAR_END, TK_BLOCK_BEGIN, TK_BLOCK_END,
    TK_NAME, TK_STRING, TK_INT, TK_FLOAT, TK_OP,
} tk_type;

typedef struct jtok {
    uint8_t type;
    uint8_t op;   /* TK_OP: one of the OP_* below */
    int line;
    const char *p; /* TK_DATA, TK_NAME: source slice; TK_STRING: decoded bytes (owned by the token array) */
    uint32_t n;
    int64_t i;
    double f;
} jtok;

enum {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW, OP_TILDE,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_ASSIGN, OP_DOT, OP_COMMA,
    OP_COLON, OP_PIPE, OP_LPAREN, OP_RPAREN, OP_LBRACKET, OP_RBRACKET,
    OP_LBRACE, OP_RBRACE,
    /* expression-only operators (not lexed) */
    OP_IN, OP_NOTIN, OP_AND, OP_OR, OP_NOT, OP_NEG, OP_POS,
};

/* Splits src into tokens (jinja_lex.c), applying Jinja's newline
 * normalisation, trailing-newline drop, whitespace control, trim_blocks and
 * lstrip_blocks. Tokens and decoded strings live in a. */
int jlex(const char *src, size_t len, cv_arena *a, jtok **out, int *n_out, cv_err *err);

/* ---- AST ---- */

typedef enum {
    /* statements */
    N_BODY,      /* kids: statements */
    N_DATA,      /* val: the text */
    N_OUTPUT,    /* a: expression */
    N_IF,        /* a: test, b: body, c: else (N_IF for elif, or N_BODY) */
    N_FOR,       /* a: target, b: iterable, c: body, d: else body, e: filter test; flag: recursive */
    N_SET,       /* a: target, b: value */
    N_SETBLOCK,  /* a: target, c: body, kids: filters (N_FILTER with a == NULL) */
    N_MACRO,     /* name, sym; c: body; kids: params (N_NAME); defs: defaults (NULL = none) */
    N_CALLBLOCK, /* a: the call (N_CALL), c: body, kids/defs: caller params */
    N_FILTERBLOCK, /* c: body, kids: filters */
    N_WITH,      /* kids: targets, defs: values, c: body */
    N_SCOPE,     /* c: body run in a new scope ({% generation %}) */
    N_BREAK, N_CONTINUE,
    /* expressions */
    N_CONST,     /* val */
    N_NAME,      /* name, sym */
    N_TUPLE,     /* kids */
    N_LIST,      /* kids */
    N_DICT,      /* kids: keys, defs: values */
    N_GETATTR,   /* a: object, name */
    N_GETITEM,   /* a: object, b: index */
    N_SLICE,     /* a: object, b: start, c: stop, d: step (each may be NULL) */
    N_CALL,      /* a: callee, kids: positional, defs: keyword values, kwn: keyword names; e: *args, f: **kwargs */
    N_FILTER,    /* a: operand, name, fid; kids/defs/kwn: args */
    N_TEST,      /* a: operand, name, fid; kids/defs/kwn: args; flag: negated */
    N_BINOP,     /* op, a, b */
    N_UNOP,      /* op, a */
    N_AND, N_OR, /* a, b */
    N_COMPARE,   /* a: first, kids: operands, ops: operators */
    N_CONCAT,    /* kids */
    N_CONDEXPR,  /* a: test, b: then, c: else (may be NULL) */
    N_NS_ASSIGN, /* set target ns.attr: a: object, name */
} jnode_kind;

typedef struct jnode jnode;
struct jnode {
    uint8_t kind;
    uint8_t op;
    uint8_t flag;
    int16_t fid;   /* filter/test index, -1 unknown */
    int line;
    int sym;       /* N_NAME, N_MACRO: interned symbol */
    const char *name; /* NUL-terminated */
    uint32_t name_len;
    jv val;
    jnode *a, *b, *c, *d, *e, *f;
    jnode **kids;
    jnode **defs;
    const char **kwn;
    uint8_t *ops;
    int n_kids, n_defs;
    uint8_t uses_varargs, uses_kwargs, uses_caller; /* N_MACRO */
};

struct cv_jinja_tmpl {
    cv_arena arena;      /* AST, strings, symbol names */
    jnode *root;
    const char **syms;   /* symbol id -> name */
    int n_syms;
    size_t n_nodes;
    int sym_loop, sym_caller, sym_varargs, sym_kwargs; /* -1 when the template never names them */
};

/* ---- render state ---- */

typedef struct jscope jscope;
struct jscope {
    jscope *parent;
    int n, cap;
    int *sym;
    jv *val;
};

/* A callable: macro, caller, builtin global, bound method, loop(). */
typedef enum { FN_MACRO, FN_BUILTIN, FN_METHOD, FN_LOOP } jfunc_kind;
typedef struct jrender jrender;
typedef struct jcallargs {
    jv *pos;
    int n_pos;
    const char **kwn;
    jv *kwv;
    int n_kw;
} jcallargs;
typedef jv (*jbuiltin_fn)(jrender *R, jv self, jcallargs *a);

struct jfunc {
    uint8_t kind;
    const char *name;
    /* FN_MACRO */
    const jnode *macro; /* N_MACRO or N_CALLBLOCK */
    jscope *closure;
    jv caller;          /* the caller passed to it, or undefined */
    /* FN_BUILTIN / FN_METHOD */
    jbuiltin_fn call;
    jv self;
    /* FN_LOOP */
    struct jloop *loop;
};

typedef struct jloop {
    const jnode *node;
    jv *items;
    int64_t n, i;
    int depth;
    jv last_changed;
    bool has_changed;
    jscope *scope; /* where the for statement runs: loop(...) recurses there */
} jloop;

/* Buffers for captured output and temporary strings, used LIFO; all are
 * freed when the render ends, error or not, so longjmp leaks nothing. */
#define J_MAX_BUFS 512

struct jrender {
    const cv_jinja_tmpl *t;
    cv_arena arena;
    cv_buf *out;           /* current output (top or a capture) */
    cv_buf bufs[J_MAX_BUFS];
    int n_bufs;
    cv_jinja_limits lim;
    int64_t now;
    uint64_t steps;
    uint64_t t0;
    int depth;
    int line;              /* line of the node being evaluated, for errors */
    jmp_buf jmp;
    cv_err *err;
    int code;              /* the CV_E* code of the failure being unwound */
    int brk;               /* 1 break, 2 continue pending */
};

/* ---- shared helpers (jinja_value.c) ---- */

_Noreturn void jfail(jrender *R, int code, const char *fmt, ...) CV_PRINTF(3, 4);
void *jalloc(jrender *R, size_t n);
void jstep(jrender *R);
cv_buf *jbuf_get(jrender *R);      /* an empty scratch buffer */
void jbuf_put(jrender *R, cv_buf *b); /* releases the most recent jbuf_get */
/* Appends to the render output (or current capture) under the output limit. */
void jout(jrender *R, const char *s, size_t n);

static inline jv jv_undef(const char *hint) { jv v = { .t = JV_UNDEF }; v.s = hint; return v; }
static inline jv jv_none(void) { jv v = { .t = JV_NONE }; return v; }
static inline jv jv_bool(bool b) { jv v = { .t = JV_BOOL }; v.i = b; return v; }
static inline jv jv_int(int64_t i) { jv v = { .t = JV_INT }; v.i = i; return v; }
static inline jv jv_float(double f) { jv v = { .t = JV_FLOAT }; v.f = f; return v; }
static inline jv jv_strn(const char *s, size_t n) { jv v = { .t = JV_STR }; v.s = s; v.n = (uint32_t)n; return v; }
jv jv_str_copy(jrender *R, const char *s, size_t n);
jv jv_from_json(json_t *j);
jlist *jlist_new(jrender *R, uint32_t cap);
void jlist_push(jrender *R, jlist *l, jv v);
jv jv_list(jlist *l);
jdict *jdict_new(jrender *R, uint32_t cap);
void jdict_set(jrender *R, jdict *d, jv k, jv v);
jv jv_dict(jdict *d);
bool jv_is_list(jv v);   /* list, tuple or JSON array */
bool jv_is_dict(jv v);   /* dict or JSON object */
bool jv_truthy(jrender *R, jv v);
bool jv_eq(jv a, jv b);
int jv_cmp(jrender *R, jv a, jv b); /* Python ordering; fails on unorderable types */
int64_t jv_len(jrender *R, jv v);     /* Python len(); fails on scalars */
/* Materialises an iterable: list items, dict keys, string characters. */
void jv_iter(jrender *R, jv v, jv **items, int64_t *n);
/* Dict lookup by key (string keys for JSON objects); found=false when absent. */
jv jv_dict_get(jrender *R, jv d, jv key, bool *found);
/* Dict items (keys and values arrays). */
void jv_dict_items(jrender *R, jv d, jv **keys, jv **vals, int64_t *n);
jv jv_list_at(jv v, int64_t i);      /* i in range */
/* str(x) as Python prints it; appended to b. */
void jv_str_append(jrender *R, cv_buf *b, jv v);
void jv_repr_append(jrender *R, cv_buf *b, jv v, int depth);
jv jv_to_str(jrender *R, jv v);  /* str(x) as a string value */
const char *jv_type_name(jv v);
void jfail_undef(jrender *R, jv v) __attribute__((noreturn));
void py_float_repr(double f, char *out, size_t cap);
size_t utf8_count(const char *s, size_t n);
/* Byte offset of code point index ci (clamped to n). */
size_t utf8_offset(const char *s, size_t n, int64_t ci);

/* ---- eval (jinja_eval.c) ---- */

jv jcall(jrender *R, jv callee, jcallargs *a);
jv jgetattr(jrender *R, jv obj, const char *name, uint32_t len);
jv jgetitem(jrender *R, jv obj, jv key);
bool jtest_by_name(jrender *R, const char *name, jv v, jcallargs *a);
jv jfilter_by_name(jrender *R, const char *name, jv v, jcallargs *a);

/* ---- builtins (filters and tests: jinja_filters.c; methods: jinja_methods.c) ---- */

typedef jv (*jfilter_fn)(jrender *R, jv v, jcallargs *a);
typedef bool (*jtest_fn)(jrender *R, jv v, jcallargs *a);
typedef struct jfilter_def { const char *name; jfilter_fn fn; } jfilter_def;
typedef struct jtest_def { const char *name; jtest_fn fn; } jtest_def;
extern const jfilter_def jfilters[];
extern const int jn_filters;
extern const jtest_def jtests[];
extern const int jn_tests;
int jfilter_find(const char *name);
int jtest_find(const char *name);
/* A method of a str, list or dict value, bound; undefined if none. */
jv jmethod(jrender *R, jv self, const char *name);
/* Globals: range, namespace, dict, raise_exception, strftime_now, lipsum... */
bool jglobal(jrender *R, const char *name, jv *out);

/* Argument helpers for builtins. */
jv jarg(jcallargs *a, int pos, const char *kw, jv dflt);
bool jarg_has(jcallargs *a, int pos, const char *kw);
void jargs_max(jrender *R, jcallargs *a, int max_pos, const char *what);

/* Stable merge sort (Python's sort is stable); cmp may jfail. */
typedef int (*jcmp_fn)(jrender *R, const void *a, const void *b, void *ctx);
void jsort(jrender *R, void *base, size_t n, size_t size, jcmp_fn cmp, void *ctx);

/* tojson (jinja_json.c). */
void jv_tojson(jrender *R, cv_buf *b, jv v, const char *indent, int indent_len, bool have_indent,
               const char *item_sep, const char *key_sep, bool sort_keys, bool ensure_ascii, int depth);

/* String helpers (jinja_methods.c). */
bool py_isspace(uint32_t cp);
jv jstr_strip(jrender *R, jv s, jv chars, int which); /* which: 1 left, 2 right, 3 both */
jv jstr_lower(jrender *R, jv s);
jv jstr_upper(jrender *R, jv s);
jv jstr_capitalize(jrender *R, jv s);
jv jstr_replace(jrender *R, jv s, jv old, jv neu, int64_t count);
jv jstr_split(jrender *R, jv s, jv sep, int64_t maxsplit, bool right);
jv jstr_escape(jrender *R, jv s);
jv jstr_percent(jrender *R, jv fmt, jv args);
jv jstr_concat(jrender *R, jv a, jv b);

#endif
