/* jinja_parse.c — the recursive-descent parser from tokens to the AST, with
 * Jinja2's grammar and operator precedence (parser.py): condexpr < or < and
 * < not < compare < + - < ~ < * / // % < ** < unary - + < postfix (. [] ())
 * and filter/test chains. Statements: if/elif/else, for (else, inline if,
 * recursive), set (plain, tuple, namespace attribute, block with filters),
 * macro, call, filter, with, generation (Hugging Face's AssistantTracker tag:
 * its body renders in a fresh scope, like the CallBlock it becomes), break,
 * continue. Unknown filters and tests are compile errors unless they sit in
 * a conditional branch, where Jinja2 defers the error to run time; the check
 * runs after parsing. Names are interned to small integers for scope
 * lookups. Evaluation is jinja_eval.c's. */
#include <stdio.h>
#include <stdlib.h>

#include "chat/jinja/jinja_int.h"

typedef struct parser {
    cv_jinja_tmpl *t;
    jtok *tk;
    int n, pos;
    int depth;
    int loop_depth;
    jnode *macro_stack[64];
    int n_macro;
    cv_err *err;
    jmp_buf jmp;
    int cap_syms;
} parser;

_Noreturn static void pfail(parser *P, int code, const char *fmt, ...) CV_PRINTF(3, 4);
static void pfail(parser *P, int code, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cv_err_set(P->err, code, "template line %d: %s", P->tk[P->pos].line, msg);
    longjmp(P->jmp, 1);
}

static jtok *cur(parser *P) { return &P->tk[P->pos]; }
static jtok *peek(parser *P, int k) { return P->pos + k < P->n ? &P->tk[P->pos + k] : &P->tk[P->n - 1]; }
static void next(parser *P) { if (P->pos < P->n - 1) P->pos++; }

static bool is_op(jtok *t, int op) { return t->type == TK_OP && t->op == op; }
static bool is_name(jtok *t, const char *s) { return t->type == TK_NAME && t->n == strlen(s) && !memcmp(t->p, s, t->n); }

static const char *tok_desc(jtok *t)
{
    switch (t->type) {
    case TK_EOF: return "end of template";
    case TK_DATA: return "template data";
    case TK_VAR_BEGIN: return "'{{'";
    case TK_VAR_END: return "'}}'";
    case TK_BLOCK_BEGIN: return "'{%'";
    case TK_BLOCK_END: return "'%}'";
    case TK_NAME: return "a name";
    case TK_STRING: return "a string";
    case TK_INT: return "an integer";
    case TK_FLOAT: return "a float";
    default: return "an operator";
    }
}

static void expect_op(parser *P, int op, const char *what)
{
    if (!is_op(cur(P), op))
        pfail(P, CV_EINVAL, "expected %s, got %s", what, tok_desc(cur(P)));
    next(P);
}

static void expect_name(parser *P, const char *s)
{
    if (!is_name(cur(P), s))
        pfail(P, CV_EINVAL, "expected '%s', got %s", s, tok_desc(cur(P)));
    next(P);
}

static void expect_block_end(parser *P)
{
    if (cur(P)->type != TK_BLOCK_END)
        pfail(P, CV_EINVAL, "expected end of statement '%%}', got %s", tok_desc(cur(P)));
    next(P);
}

static jnode *node(parser *P, int kind)
{
    jnode *x = cv_arena_alloc(&P->t->arena, sizeof *x);
    x->kind = (uint8_t)kind;
    x->line = cur(P)->line;
    x->fid = -1;
    P->t->n_nodes++;
    return x;
}

static const char *dup_name(parser *P, const char *p, size_t n)
{
    return cv_arena_strndup(&P->t->arena, p, n);
}

static int intern(parser *P, const char *name)
{
    cv_jinja_tmpl *t = P->t;
    for (int i = 0; i < t->n_syms; i++)
        if (!strcmp(t->syms[i], name))
            return i;
    if (t->n_syms == P->cap_syms) {
        P->cap_syms = P->cap_syms ? P->cap_syms * 2 : 64;
        const char **ns = cv_arena_alloc(&t->arena, (size_t)P->cap_syms * sizeof *ns);
        if (t->n_syms)
            memcpy(ns, t->syms, (size_t)t->n_syms * sizeof *ns);
        t->syms = ns;
    }
    t->syms[t->n_syms] = name;
    return t->n_syms++;
}

/* Growable node list during parsing, in the template arena (a parse error
 * longjmps out, so nothing here may need freeing). Growth doubles, so the
 * abandoned copies cost at most as much as the final list. */
typedef struct nlist {
    jnode **v;
    int n, cap;
} nlist;

static void nl_grow(cv_arena *a, nlist *l)
{
    int cap = l->cap ? l->cap * 2 : 8;
    jnode **v = cv_arena_alloc(a, (size_t)cap * sizeof *v);
    if (l->n)
        memcpy(v, l->v, (size_t)l->n * sizeof *v);
    l->v = v;
    l->cap = cap;
}

#define nl_push(l, x)                                  \
    do {                                               \
        if ((l)->n == (l)->cap)                        \
            nl_grow(&P->t->arena, (l));                \
        (l)->v[(l)->n++] = (x);                        \
    } while (0)

static jnode **nl_finish(parser *P, nlist *l, int *n)
{
    (void)P;
    *n = l->n;
    return l->n ? l->v : NULL;
}

#define DEEPER(P)                                                                       \
    do {                                                                                \
        if (++(P)->depth > CV_JINJA_MAX_PARSE_DEPTH)                                    \
            pfail(P, CV_ELIMIT, "template nests deeper than %d levels", CV_JINJA_MAX_PARSE_DEPTH); \
    } while (0)
#define SHALLOWER(P) ((P)->depth--)

static jnode *parse_expression(parser *P, bool with_condexpr);
static jnode *parse_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_paren);
static jnode *parse_primary(parser *P);
static jnode *parse_postfix(parser *P, jnode *x);
static jnode *parse_filter_expr(parser *P, jnode *x);
static jnode *parse_unary(parser *P, bool with_filter);

/* ---- expressions ---- */

static void mark_name_use(parser *P, const char *name)
{
    if (!P->n_macro)
        return;
    jnode *m = P->macro_stack[P->n_macro - 1];
    if (!strcmp(name, "varargs"))
        m->uses_varargs = 1;
    else if (!strcmp(name, "kwargs"))
        m->uses_kwargs = 1;
    else if (!strcmp(name, "caller"))
        m->uses_caller = 1;
}

static jnode *make_name(parser *P, jtok *t)
{
    jnode *x = node(P, N_NAME);
    x->name = dup_name(P, t->p, t->n);
    x->name_len = t->n;
    x->sym = intern(P, x->name);
    mark_name_use(P, x->name);
    return x;
}

static void parse_call_args(parser *P, jnode *call)
{
    nlist pos = { 0 }, kwv = { 0 };
    const char *kwn[256];
    int n_kw = 0;
    expect_op(P, OP_LPAREN, "'('");
    bool first = true;
    while (!is_op(cur(P), OP_RPAREN)) {
        if (!first) {
            expect_op(P, OP_COMMA, "','");
            if (is_op(cur(P), OP_RPAREN))
                break;
        }
        first = false;
        if (is_op(cur(P), OP_MUL)) {
            next(P);
            call->e = parse_expression(P, true);
        } else if (is_op(cur(P), OP_POW)) {
            next(P);
            call->f = parse_expression(P, true);
        } else if (cur(P)->type == TK_NAME && is_op(peek(P, 1), OP_ASSIGN)) {
            if (n_kw == (int)CV_ARRAY_LEN(kwn))
                pfail(P, CV_ELIMIT, "more than %d keyword arguments", (int)CV_ARRAY_LEN(kwn));
            kwn[n_kw++] = dup_name(P, cur(P)->p, cur(P)->n);
            next(P);
            next(P);
            nl_push(&kwv, parse_expression(P, true));
        } else {
            if (n_kw)
                pfail(P, CV_EINVAL, "positional argument follows keyword argument");
            nl_push(&pos, parse_expression(P, true));
        }
    }
    next(P);
    call->kids = nl_finish(P, &pos, &call->n_kids);
    call->defs = nl_finish(P, &kwv, &call->n_defs);
    if (n_kw) {
        call->kwn = cv_arena_alloc(&P->t->arena, (size_t)n_kw * sizeof *call->kwn);
        memcpy(call->kwn, kwn, (size_t)n_kw * sizeof *kwn);
    }
}

/* name(.name)* as filters and tests spell them */
static void parse_dotted_name(parser *P, jnode *x)
{
    if (cur(P)->type != TK_NAME)
        pfail(P, CV_EINVAL, "expected a filter or test name, got %s", tok_desc(cur(P)));
    cv_buf b = { 0 };
    cv_buf_append(&b, cur(P)->p, cur(P)->n);
    next(P);
    while (is_op(cur(P), OP_DOT) && peek(P, 1)->type == TK_NAME) {
        next(P);
        cv_buf_putc(&b, '.');
        cv_buf_append(&b, cur(P)->p, cur(P)->n);
        next(P);
    }
    x->name = dup_name(P, b.data, b.len);
    x->name_len = (uint32_t)b.len;
    cv_buf_free(&b);
}

static jnode *parse_filter(parser *P, jnode *operand)
{
    /* at '|' */
    next(P);
    jnode *x = node(P, N_FILTER);
    x->a = operand;
    parse_dotted_name(P, x);
    x->fid = (int16_t)jfilter_find(x->name);
    if (is_op(cur(P), OP_LPAREN))
        parse_call_args(P, x);
    return x;
}

static jnode *parse_test(parser *P, jnode *operand)
{
    /* at 'is' */
    next(P);
    jnode *x = node(P, N_TEST);
    x->a = operand;
    if (is_name(cur(P), "not")) {
        x->flag = 1;
        next(P);
    }
    parse_dotted_name(P, x);
    x->fid = (int16_t)jtest_find(x->name);
    jtok *c = cur(P);
    if (is_op(c, OP_LPAREN)) {
        parse_call_args(P, x);
    } else if ((c->type == TK_NAME || c->type == TK_STRING || c->type == TK_INT || c->type == TK_FLOAT ||
                is_op(c, OP_LPAREN) || is_op(c, OP_LBRACKET) || is_op(c, OP_LBRACE)) &&
               !is_name(c, "else") && !is_name(c, "or") && !is_name(c, "and")) {
        if (is_name(c, "is"))
            pfail(P, CV_EINVAL, "you cannot chain multiple tests with 'is'");
        jnode *arg = parse_postfix(P, parse_primary(P));
        x->kids = cv_arena_alloc(&P->t->arena, sizeof(jnode *));
        x->kids[0] = arg;
        x->n_kids = 1;
    }
    return x;
}

static jnode *parse_filter_expr(parser *P, jnode *x)
{
    for (;;) {
        if (is_op(cur(P), OP_PIPE)) {
            x = parse_filter(P, x);
        } else if (is_name(cur(P), "is")) {
            x = parse_test(P, x);
        } else if (is_op(cur(P), OP_LPAREN)) {
            jnode *c = node(P, N_CALL);
            c->a = x;
            parse_call_args(P, c);
            x = c;
        } else {
            return x;
        }
    }
}

static jnode *parse_subscribed(parser *P)
{
    jnode *args[3] = { 0 };
    if (is_op(cur(P), OP_COLON)) {
        next(P);
    } else {
        jnode *x = parse_expression(P, true);
        if (!is_op(cur(P), OP_COLON))
            return x;
        next(P);
        args[0] = x;
    }
    jnode *s = node(P, N_SLICE);
    if (!is_op(cur(P), OP_RBRACKET) && !is_op(cur(P), OP_COMMA) && !is_op(cur(P), OP_COLON))
        args[1] = parse_expression(P, true);
    if (is_op(cur(P), OP_COLON)) {
        next(P);
        if (!is_op(cur(P), OP_RBRACKET) && !is_op(cur(P), OP_COMMA))
            args[2] = parse_expression(P, true);
    }
    s->b = args[0];
    s->c = args[1];
    s->d = args[2];
    return s;
}

static jnode *parse_postfix(parser *P, jnode *x)
{
    for (;;) {
        if (is_op(cur(P), OP_DOT)) {
            next(P);
            jtok *t = cur(P);
            if (t->type == TK_NAME) {
                jnode *g = node(P, N_GETATTR);
                g->a = x;
                g->name = dup_name(P, t->p, t->n);
                g->name_len = t->n;
                next(P);
                x = g;
            } else if (t->type == TK_INT) {
                jnode *g = node(P, N_GETITEM);
                g->a = x;
                g->b = node(P, N_CONST);
                g->b->val = jv_int(t->i);
                next(P);
                x = g;
            } else {
                pfail(P, CV_EINVAL, "expected a name after '.', got %s", tok_desc(t));
            }
        } else if (is_op(cur(P), OP_LBRACKET)) {
            next(P);
            nlist args = { 0 };
            while (!is_op(cur(P), OP_RBRACKET)) {
                if (args.n)
                    expect_op(P, OP_COMMA, "','");
                nl_push(&args, parse_subscribed(P));
            }
            next(P);
            if (!args.n)
                pfail(P, CV_EINVAL, "expected a subscript inside '[]'");
            jnode *sub;
            if (args.n == 1) {
                sub = args.v[0];
            } else {
                sub = node(P, N_TUPLE);
                sub->kids = nl_finish(P, &args, &sub->n_kids);
            }
            if (sub->kind == N_SLICE) {
                sub->a = x;
                x = sub;
            } else {
                jnode *g = node(P, N_GETITEM);
                g->a = x;
                g->b = sub;
                x = g;
            }
        } else if (is_op(cur(P), OP_LPAREN)) {
            jnode *c = node(P, N_CALL);
            c->a = x;
            parse_call_args(P, c);
            x = c;
        } else {
            return x;
        }
    }
}

static jnode *parse_primary(parser *P)
{
    DEEPER(P);
    jtok *t = cur(P);
    jnode *x;
    if (t->type == TK_NAME) {
        x = node(P, N_CONST);
        if (is_name(t, "true") || is_name(t, "True"))
            x->val = jv_bool(true);
        else if (is_name(t, "false") || is_name(t, "False"))
            x->val = jv_bool(false);
        else if (is_name(t, "none") || is_name(t, "None"))
            x->val = jv_none();
        else
            x = make_name(P, t);
        next(P);
    } else if (t->type == TK_STRING) {
        cv_buf b = { 0 };
        while (cur(P)->type == TK_STRING) {
            cv_buf_append(&b, cur(P)->p, cur(P)->n);
            next(P);
        }
        x = node(P, N_CONST);
        x->line = t->line;
        x->val = jv_strn(dup_name(P, b.data ? b.data : "", b.len), b.len);
        cv_buf_free(&b);
    } else if (t->type == TK_INT || t->type == TK_FLOAT) {
        x = node(P, N_CONST);
        x->val = t->type == TK_INT ? jv_int(t->i) : jv_float(t->f);
        next(P);
    } else if (is_op(t, OP_LPAREN)) {
        next(P);
        x = parse_tuple(P, false, true, NULL, true);
        expect_op(P, OP_RPAREN, "')'");
    } else if (is_op(t, OP_LBRACKET)) {
        next(P);
        nlist items = { 0 };
        while (!is_op(cur(P), OP_RBRACKET)) {
            if (items.n)
                expect_op(P, OP_COMMA, "','");
            if (is_op(cur(P), OP_RBRACKET))
                break;
            nl_push(&items, parse_expression(P, true));
        }
        next(P);
        x = node(P, N_LIST);
        x->kids = nl_finish(P, &items, &x->n_kids);
    } else if (is_op(t, OP_LBRACE)) {
        next(P);
        nlist keys = { 0 }, vals = { 0 };
        while (!is_op(cur(P), OP_RBRACE)) {
            if (keys.n)
                expect_op(P, OP_COMMA, "','");
            if (is_op(cur(P), OP_RBRACE))
                break;
            nl_push(&keys, parse_expression(P, true));
            expect_op(P, OP_COLON, "':'");
            nl_push(&vals, parse_expression(P, true));
        }
        next(P);
        x = node(P, N_DICT);
        x->kids = nl_finish(P, &keys, &x->n_kids);
        x->defs = nl_finish(P, &vals, &x->n_defs);
    } else {
        pfail(P, CV_EINVAL, "unexpected %s in an expression", tok_desc(t));
    }
    SHALLOWER(P);
    return x;
}

static jnode *parse_unary(parser *P, bool with_filter)
{
    DEEPER(P);
    jnode *x;
    if (is_op(cur(P), OP_SUB) || is_op(cur(P), OP_ADD)) {
        int op = cur(P)->op == OP_SUB ? OP_NEG : OP_POS;
        x = node(P, N_UNOP);
        next(P);
        x->op = (uint8_t)op;
        x->a = parse_unary(P, false);
    } else {
        x = parse_primary(P);
    }
    x = parse_postfix(P, x);
    if (with_filter)
        x = parse_filter_expr(P, x);
    SHALLOWER(P);
    return x;
}

static jnode *binop(parser *P, int op, jnode *a, jnode *b)
{
    jnode *x = node(P, N_BINOP);
    x->op = (uint8_t)op;
    x->a = a;
    x->b = b;
    return x;
}

static jnode *parse_pow(parser *P)
{
    jnode *x = parse_unary(P, true);
    while (is_op(cur(P), OP_POW)) {
        next(P);
        x = binop(P, OP_POW, x, parse_unary(P, true));
    }
    return x;
}

static jnode *parse_math2(parser *P)
{
    jnode *x = parse_pow(P);
    while (cur(P)->type == TK_OP && (cur(P)->op == OP_MUL || cur(P)->op == OP_DIV || cur(P)->op == OP_FLOORDIV ||
                                      cur(P)->op == OP_MOD)) {
        int op = cur(P)->op;
        next(P);
        x = binop(P, op, x, parse_pow(P));
    }
    return x;
}

static jnode *parse_concat(parser *P)
{
    jnode *x = parse_math2(P);
    if (!is_op(cur(P), OP_TILDE))
        return x;
    nlist l = { 0 };
    nl_push(&l, x);
    while (is_op(cur(P), OP_TILDE)) {
        next(P);
        nl_push(&l, parse_math2(P));
    }
    jnode *c = node(P, N_CONCAT);
    c->kids = nl_finish(P, &l, &c->n_kids);
    return c;
}

static jnode *parse_math1(parser *P)
{
    jnode *x = parse_concat(P);
    while (is_op(cur(P), OP_ADD) || is_op(cur(P), OP_SUB)) {
        int op = cur(P)->op;
        next(P);
        x = binop(P, op, x, parse_concat(P));
    }
    return x;
}

static jnode *parse_compare(parser *P)
{
    jnode *x = parse_math1(P);
    nlist rhs = { 0 };
    uint8_t ops[64];
    for (;;) {
        jtok *t = cur(P);
        int op = 0;
        if (t->type == TK_OP && (t->op == OP_EQ || t->op == OP_NE || t->op == OP_LT || t->op == OP_LE ||
                                 t->op == OP_GT || t->op == OP_GE)) {
            op = t->op;
            next(P);
        } else if (is_name(t, "in")) {
            op = OP_IN;
            next(P);
        } else if (is_name(t, "not") && is_name(peek(P, 1), "in")) {
            op = OP_NOTIN;
            next(P);
            next(P);
        } else {
            break;
        }
        if (rhs.n == (int)sizeof ops)
            pfail(P, CV_ELIMIT, "more than %d chained comparisons", (int)sizeof ops);
        ops[rhs.n] = (uint8_t)op;
        nl_push(&rhs, parse_math1(P));
    }
    if (!rhs.n)
        return x;
    jnode *c = node(P, N_COMPARE);
    c->a = x;
    int n = rhs.n;
    c->kids = nl_finish(P, &rhs, &c->n_kids);
    c->ops = cv_arena_alloc(&P->t->arena, (size_t)n);
    memcpy(c->ops, ops, (size_t)n);
    return c;
}

static jnode *parse_not(parser *P)
{
    if (is_name(cur(P), "not")) {
        DEEPER(P);
        jnode *x = node(P, N_UNOP);
        next(P);
        x->op = OP_NOT;
        x->a = parse_not(P);
        SHALLOWER(P);
        return x;
    }
    return parse_compare(P);
}

static jnode *parse_and(parser *P)
{
    jnode *x = parse_not(P);
    while (is_name(cur(P), "and")) {
        next(P);
        jnode *y = node(P, N_AND);
        y->a = x;
        y->b = parse_not(P);
        x = y;
    }
    return x;
}

static jnode *parse_or(parser *P)
{
    jnode *x = parse_and(P);
    while (is_name(cur(P), "or")) {
        next(P);
        jnode *y = node(P, N_OR);
        y->a = x;
        y->b = parse_and(P);
        x = y;
    }
    return x;
}

static jnode *parse_expression(parser *P, bool with_condexpr)
{
    DEEPER(P);
    jnode *x = parse_or(P);
    if (with_condexpr) {
        while (is_name(cur(P), "if")) {
            next(P);
            jnode *c = node(P, N_CONDEXPR);
            c->b = x;
            c->a = parse_or(P);
            if (is_name(cur(P), "else")) {
                next(P);
                c->c = parse_expression(P, true);
            }
            x = c;
        }
    }
    SHALLOWER(P);
    return x;
}

static bool tuple_end(parser *P, const char *extra_end)
{
    jtok *t = cur(P);
    if (t->type == TK_VAR_END || t->type == TK_BLOCK_END || t->type == TK_EOF || is_op(t, OP_RPAREN))
        return true;
    return extra_end && is_name(t, extra_end);
}

static jnode *parse_tuple(parser *P, bool simplified, bool with_condexpr, const char *extra_end, bool explicit_paren)
{
    nlist args = { 0 };
    bool is_tuple = false;
    int line = cur(P)->line;
    for (;;) {
        if (args.n)
            expect_op(P, OP_COMMA, "','");
        if (tuple_end(P, extra_end))
            break;
        jnode *x = simplified ? parse_primary(P) : parse_expression(P, with_condexpr);
        nl_push(&args, x);
        if (is_op(cur(P), OP_COMMA))
            is_tuple = true;
        else
            break;
    }
    if (!is_tuple) {
        if (args.n) {
            jnode *x = args.v[0];
            return x;
        }
        if (!explicit_paren)
            pfail(P, CV_EINVAL, "expected an expression, got %s", tok_desc(cur(P)));
    }
    jnode *t = node(P, N_TUPLE);
    t->line = line;
    t->kids = nl_finish(P, &args, &t->n_kids);
    return t;
}

/* ---- statements ---- */

static jnode *parse_assign_target(parser *P, bool with_namespace, const char *extra_end)
{
    if (with_namespace && cur(P)->type == TK_NAME && is_op(peek(P, 1), OP_DOT) && peek(P, 2)->type == TK_NAME) {
        jnode *x = node(P, N_NS_ASSIGN);
        x->a = make_name(P, cur(P));
        next(P);
        next(P);
        x->name = dup_name(P, cur(P)->p, cur(P)->n);
        x->name_len = cur(P)->n;
        next(P);
        return x;
    }
    jnode *x = parse_tuple(P, true, true, extra_end, false);
    if (x->kind == N_NAME)
        return x;
    if (x->kind == N_TUPLE) {
        for (int i = 0; i < x->n_kids; i++)
            if (x->kids[i]->kind != N_NAME)
                pfail(P, CV_EINVAL, "can only assign to names");
        return x;
    }
    pfail(P, CV_EINVAL, "can't assign to this expression");
}

static jnode *parse_body(parser *P, const char *const *ends);

static jnode *parse_filters_only(parser *P, jnode *holder)
{
    /* {% filter f|g(x) %} / {% set x | f %}: a chain applied to the body */
    nlist l = { 0 };
    bool first = true;
    while (first || is_op(cur(P), OP_PIPE)) {
        jnode *f = node(P, N_FILTER);
        if (!first)
            next(P);
        first = false;
        parse_dotted_name(P, f);
        f->fid = (int16_t)jfilter_find(f->name);
        if (is_op(cur(P), OP_LPAREN))
            parse_call_args(P, f);
        nl_push(&l, f);
    }
    holder->kids = nl_finish(P, &l, &holder->n_kids);
    return holder;
}

static void parse_params(parser *P, jnode *m)
{
    nlist params = { 0 }, defs = { 0 };
    expect_op(P, OP_LPAREN, "'('");
    while (!is_op(cur(P), OP_RPAREN)) {
        if (params.n)
            expect_op(P, OP_COMMA, "','");
        if (is_op(cur(P), OP_RPAREN))
            break;
        if (cur(P)->type != TK_NAME)
            pfail(P, CV_EINVAL, "expected a parameter name, got %s", tok_desc(cur(P)));
        jnode *nm = make_name(P, cur(P));
        next(P);
        nl_push(&params, nm);
        if (is_op(cur(P), OP_ASSIGN)) {
            next(P);
            nl_push(&defs, parse_expression(P, true));
        } else {
            if (defs.n && defs.v[defs.n - 1])
                pfail(P, CV_EINVAL, "non-default argument follows default argument");
            nl_push(&defs, NULL);
        }
    }
    next(P);
    m->kids = nl_finish(P, &params, &m->n_kids);
    m->defs = nl_finish(P, &defs, &m->n_defs);
}

/* ---- statements: one function per tag, dispatched by the table below ----
 * As Jinja2's Parser.parse_statement looks up parse_<tag>: each function is
 * called with its tag name as the current token and returns the node with
 * the whole statement consumed, its end tag included. */

/* A block's body up to its end tag, which is consumed. */
static jnode *body_until(parser *P, const char *end)
{
    const char *const ends[] = { end, NULL };
    jnode *body = parse_body(P, ends);
    expect_name(P, end);
    expect_block_end(P);
    return body;
}

/* The same for a body that break/continue cannot leave (macro, call block,
 * generation): a loop around it is not theirs. */
static jnode *scope_until(parser *P, const char *end)
{
    int saved_loop = P->loop_depth;
    P->loop_depth = 0;
    jnode *body = body_until(P, end);
    P->loop_depth = saved_loop;
    return body;
}

/* After if / for: an optional {% else %} body (NULL without one), then the
 * end tag, consumed. */
static jnode *else_until(parser *P, const char *end)
{
    jnode *body = NULL;
    if (is_name(cur(P), "else")) {
        next(P);
        expect_block_end(P);
        const char *const ends[] = { end, NULL };
        body = parse_body(P, ends);
    }
    expect_name(P, end);
    expect_block_end(P);
    return body;
}

static jnode *parse_if(parser *P, jtok *t)
{
    next(P);
    jnode *top = node(P, N_IF), *n = top;
    n->a = parse_tuple(P, false, false, NULL, false);
    expect_block_end(P);
    static const char *const ends[] = { "elif", "else", "endif", NULL };
    for (;;) {
        n->b = parse_body(P, ends);
        if (!is_name(cur(P), "elif"))
            break;
        next(P);
        jnode *e = node(P, N_IF);
        e->a = parse_tuple(P, false, false, NULL, false);
        expect_block_end(P);
        n->c = e;
        n = e;
    }
    n->c = else_until(P, "endif");
    return top;
}

static jnode *parse_for(parser *P, jtok *t)
{
    next(P);
    jnode *x = node(P, N_FOR);
    x->a = parse_assign_target(P, false, "in");
    expect_name(P, "in");
    x->b = parse_tuple(P, false, false, "recursive", false);
    if (is_name(cur(P), "if")) {
        next(P);
        x->e = parse_expression(P, true);
    }
    if (is_name(cur(P), "recursive")) {
        next(P);
        x->flag = 1;
    }
    expect_block_end(P);
    static const char *const ends[] = { "endfor", "else", NULL };
    P->loop_depth++;
    x->c = parse_body(P, ends);
    P->loop_depth--;
    x->d = else_until(P, "endfor");
    return x;
}

/* {% set x = v %}, or the block form {% set x [| filters] %}...{% endset %}. */
static jnode *parse_set(parser *P, jtok *t)
{
    next(P);
    jnode *target = parse_assign_target(P, true, NULL);
    jnode *x;
    if (is_op(cur(P), OP_ASSIGN)) {
        next(P);
        x = node(P, N_SET);
        x->a = target;
        x->b = parse_tuple(P, false, true, NULL, false);
        expect_block_end(P);
        return x;
    }
    x = node(P, N_SETBLOCK);
    x->a = target;
    if (is_op(cur(P), OP_PIPE)) {
        next(P);
        parse_filters_only(P, x);
    }
    expect_block_end(P);
    x->c = body_until(P, "endset");
    return x;
}

/* A macro or call block: its body sees caller() and its own parameters. */
static void macro_body(parser *P, jnode *x, const char *end)
{
    if (P->n_macro == (int)CV_ARRAY_LEN(P->macro_stack))
        pfail(P, CV_ELIMIT, "macros nested deeper than %d", (int)CV_ARRAY_LEN(P->macro_stack));
    P->macro_stack[P->n_macro++] = x;
    x->c = scope_until(P, end);
    P->n_macro--;
}

static jnode *parse_macro(parser *P, jtok *t)
{
    next(P);
    jnode *x = node(P, N_MACRO);
    if (cur(P)->type != TK_NAME)
        pfail(P, CV_EINVAL, "expected a macro name, got %s", tok_desc(cur(P)));
    x->name = dup_name(P, cur(P)->p, cur(P)->n);
    x->name_len = cur(P)->n;
    x->sym = intern(P, x->name);
    next(P);
    parse_params(P, x);
    expect_block_end(P);
    macro_body(P, x, "endmacro");
    return x;
}

static jnode *parse_call_block(parser *P, jtok *t)
{
    next(P);
    jnode *x = node(P, N_CALLBLOCK);
    x->name = "caller";
    if (is_op(cur(P), OP_LPAREN))
        parse_params(P, x);
    x->a = parse_expression(P, true);
    if (x->a->kind != N_CALL)
        pfail(P, CV_EINVAL, "expected a call after {%% call %%}");
    expect_block_end(P);
    macro_body(P, x, "endcall");
    return x;
}

static jnode *parse_filter_block(parser *P, jtok *t)
{
    next(P);
    jnode *x = node(P, N_FILTERBLOCK);
    parse_filters_only(P, x);
    expect_block_end(P);
    x->c = body_until(P, "endfilter");
    return x;
}

static jnode *parse_with(parser *P, jtok *t)
{
    next(P);
    jnode *x = node(P, N_WITH);
    nlist targets = { 0 }, vals = { 0 };
    while (cur(P)->type != TK_BLOCK_END) {
        if (targets.n)
            expect_op(P, OP_COMMA, "','");
        nl_push(&targets, parse_assign_target(P, false, NULL));
        expect_op(P, OP_ASSIGN, "'='");
        nl_push(&vals, parse_expression(P, true));
    }
    x->kids = nl_finish(P, &targets, &x->n_kids);
    x->defs = nl_finish(P, &vals, &x->n_defs);
    expect_block_end(P);
    x->c = body_until(P, "endwith");
    return x;
}

/* Hugging Face's {% generation %}: marks the assistant's own text. */
static jnode *parse_generation(parser *P, jtok *t)
{
    next(P);
    jnode *x = node(P, N_SCOPE);
    expect_block_end(P);
    x->c = scope_until(P, "endgeneration");
    return x;
}

/* {% break %} and {% continue %} (the loopcontrols extension). */
static jnode *parse_loop_control(parser *P, jtok *t)
{
    bool brk = is_name(t, "break");
    jnode *x = node(P, brk ? N_BREAK : N_CONTINUE);
    if (!P->loop_depth)
        pfail(P, CV_EINVAL, "'%s' outside of a loop", brk ? "break" : "continue");
    next(P);
    expect_block_end(P);
    return x;
}

static const struct {
    const char *tag;
    jnode *(*parse)(parser *P, jtok *t);
} statements[] = {
    { "if", parse_if },
    { "for", parse_for },
    { "set", parse_set },
    { "macro", parse_macro },
    { "call", parse_call_block },
    { "filter", parse_filter_block },
    { "with", parse_with },
    { "generation", parse_generation },
    { "break", parse_loop_control },
    { "continue", parse_loop_control },
};

static jnode *parse_statement(parser *P)
{
    jtok *t = cur(P);
    if (t->type != TK_NAME)
        pfail(P, CV_EINVAL, "expected a tag name after '{%%', got %s", tok_desc(t));
    DEEPER(P);
    for (size_t i = 0; i < CV_ARRAY_LEN(statements); i++) {
        if (is_name(t, statements[i].tag)) {
            jnode *x = statements[i].parse(P, t);
            SHALLOWER(P);
            return x;
        }
    }
    char nm[64];
    snprintf(nm, sizeof nm, "%.*s", (int)CV_MIN(t->n, 60u), t->p);
    pfail(P, CV_EINVAL, "unknown or unsupported tag '%s'", nm);
}

/* Statements until `{% <one of ends> ...`; leaves the position at that name.
 * ends == NULL parses to the end of the template. */
static jnode *parse_body(parser *P, const char *const *ends)
{
    DEEPER(P);
    jnode *body = node(P, N_BODY);
    nlist l = { 0 };
    for (;;) {
        jtok *t = cur(P);
        if (t->type == TK_EOF) {
            if (ends) {
                pfail(P, CV_EINVAL, "unexpected end of template, expected '{%% %s %%}'", ends[0]);
            }
            break;
        }
        if (t->type == TK_DATA) {
            jnode *d = node(P, N_DATA);
            d->val = jv_strn(t->p, t->n);
            nl_push(&l, d);
            next(P);
        } else if (t->type == TK_VAR_BEGIN) {
            next(P);
            jnode *o = node(P, N_OUTPUT);
            o->a = parse_tuple(P, false, true, NULL, false);
            if (cur(P)->type != TK_VAR_END) {
                pfail(P, CV_EINVAL, "expected end of print statement '}}', got %s", tok_desc(cur(P)));
            }
            next(P);
            nl_push(&l, o);
        } else if (t->type == TK_BLOCK_BEGIN) {
            next(P);
            bool is_end = false;
            for (int i = 0; ends && ends[i]; i++)
                if (is_name(cur(P), ends[i]))
                    is_end = true;
            if (is_end)
                break;
            jnode *s = parse_statement(P);
            nl_push(&l, s);
        } else {
            pfail(P, CV_EINVAL, "unexpected %s", tok_desc(t));
        }
    }
    body->kids = nl_finish(P, &l, &body->n_kids);
    SHALLOWER(P);
    return body;
}

/* ---- unknown filters and tests: compile-time outside conditionals ---- */

static const jnode *find_unknown(const jnode *x, bool cond)
{
    if (!x)
        return NULL;
    if ((x->kind == N_FILTER || x->kind == N_TEST) && x->fid < 0 && !cond)
        return x;
    const jnode *r;
    if (x->kind == N_IF) {
        if ((r = find_unknown(x->a, cond))) return r;
        if ((r = find_unknown(x->b, true))) return r;
        return find_unknown(x->c, true);
    }
    if (x->kind == N_CONDEXPR) {
        if ((r = find_unknown(x->a, cond))) return r;
        if ((r = find_unknown(x->b, true))) return r;
        return find_unknown(x->c, true);
    }
    const jnode *ch[6] = { x->a, x->b, x->c, x->d, x->e, x->f };
    for (int i = 0; i < 6; i++)
        if ((r = find_unknown(ch[i], cond)))
            return r;
    for (int i = 0; i < x->n_kids; i++)
        if ((r = find_unknown(x->kids[i], cond)))
            return r;
    for (int i = 0; i < x->n_defs; i++)
        if ((r = find_unknown(x->defs[i], cond)))
            return r;
    return NULL;
}

int cv_jinja_compile(const char *src, size_t len, cv_jinja_tmpl **out, cv_err *err)
{
    *out = NULL;
    cv_jinja_tmpl *t = cv_xcalloc(1, sizeof *t);
    jtok *toks;
    int n_toks;
    int rc = jlex(src, len, &t->arena, &toks, &n_toks, err);
    if (rc < 0)
        goto fail;
    parser *P = cv_xcalloc(1, sizeof *P);
    P->t = t;
    P->tk = toks;
    P->n = n_toks;
    P->err = err;
    if (setjmp(P->jmp)) {
        rc = err && err->code ? err->code : CV_EINVAL;
        free(P);
        goto fail;
    }
    t->root = parse_body(P, NULL);
    const jnode *u = find_unknown(t->root, false);
    if (u) {
        cv_err_set(err, CV_EINVAL, "template line %d: no %s named '%s'", u->line,
                   u->kind == N_FILTER ? "filter" : "test", u->name);
        rc = CV_EINVAL;
        free(P);
        goto fail;
    }
    free(P);
    t->sym_loop = t->sym_caller = t->sym_varargs = t->sym_kwargs = -1;
    for (int i = 0; i < t->n_syms; i++) {
        if (!strcmp(t->syms[i], "loop")) t->sym_loop = i;
        else if (!strcmp(t->syms[i], "caller")) t->sym_caller = i;
        else if (!strcmp(t->syms[i], "varargs")) t->sym_varargs = i;
        else if (!strcmp(t->syms[i], "kwargs")) t->sym_kwargs = i;
    }
    *out = t;
    return 0;
fail:
    cv_jinja_free(t);
    return rc;
}

void cv_jinja_free(cv_jinja_tmpl *t)
{
    if (!t)
        return;
    cv_arena_reset(&t->arena);
    free(t);
}

size_t cv_jinja_n_nodes(const cv_jinja_tmpl *t) { return t->n_nodes; }
