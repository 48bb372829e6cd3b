/* jinja_eval.c — the tree-walking evaluator and cv_jinja_render. It owns
 * Jinja2's scoping (a for-loop iteration, macro call, caller, with and
 * generation block each get a child scope; if and set do not; macros see
 * their defining scope at call time), the loop object, macro/caller calls,
 * the sandboxed attribute and item lookup (attributes that start with '_'
 * and the mutating list/dict methods give an "unsafe" Undefined that fails
 * when used), Python's arithmetic and comparison rules, and the sandbox
 * limits. Errors longjmp to cv_jinja_render, which frees everything. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/jinja/jinja_int.h"

/* ---- scopes ---- */

static jscope *scope_new(jrender *R, jscope *parent)
{
    jscope *s = jalloc(R, sizeof *s);
    s->parent = parent;
    return s;
}

static void scope_set(jrender *R, jscope *s, int sym, jv v)
{
    for (int i = 0; i < s->n; i++)
        if (s->sym[i] == sym) {
            s->val[i] = v;
            return;
        }
    if (s->n == s->cap) {
        int cap = s->cap ? s->cap * 2 : 8;
        int *ns = jalloc(R, (size_t)cap * sizeof *ns);
        jv *nv = jalloc(R, (size_t)cap * sizeof *nv);
        if (s->n) {
            memcpy(ns, s->sym, (size_t)s->n * sizeof *ns);
            memcpy(nv, s->val, (size_t)s->n * sizeof *nv);
        }
        s->sym = ns;
        s->val = nv;
        s->cap = cap;
    }
    s->sym[s->n] = sym;
    s->val[s->n++] = v;
}

static bool scope_get(const jscope *s, int sym, jv *out)
{
    for (; s; s = s->parent)
        for (int i = 0; i < s->n; i++)
            if (s->sym[i] == sym) {
                *out = s->val[i];
                return true;
            }
    return false;
}

static const char *hintf(jrender *R, const char *fmt, const char *a, const char *b)
{
    char tmp[300];
    snprintf(tmp, sizeof tmp, fmt, a, b);
    return jv_str_copy(R, tmp, strlen(tmp)).s;
}

static jv eval(jrender *R, jscope *S, const jnode *x);
static void exec(jrender *R, jscope *S, const jnode *x);

static jv lookup(jrender *R, jscope *S, const jnode *x)
{
    jv v;
    if (scope_get(S, x->sym, &v))
        return v;
    if (jglobal(R, x->name, &v))
        return v;
    return jv_undef(hintf(R, "'%s'%s", x->name, ""));
}

/* ---- attribute and item access (the sandbox's getattr/getitem) ---- */

static bool is_dunder(const char *name, uint32_t len) { return len >= 1 && name[0] == '_'; }

static jv loop_attr(jrender *R, jloop *L, const char *name);

jv jgetattr(jrender *R, jv obj, const char *name, uint32_t len)
{
    if (obj.t == JV_UNDEF)
        jfail_undef(R, obj);
    bool dunder = len >= 4 && name[0] == '_' && name[1] == '_' && name[len - 1] == '_' && name[len - 2] == '_';
    if (dunder) {
        jv u = jv_undef(hintf(R, "%s' of '%s", name, jv_type_name(obj)));
        u.flags = JF_UNSAFE;
        return u;
    }
    if (obj.t == JV_FUNC && obj.fn->kind == FN_LOOP)
        return loop_attr(R, obj.fn->loop, name);
    if (obj.t == JV_NS) {
        bool found;
        jv v = jv_dict_get(R, obj, jv_strn(name, len), &found);
        if (found)
            return v;
        return jv_undef(hintf(R, "'Namespace object' has no attribute '%s'%s", name, ""));
    }
    /* a real Python attribute (method) wins over a key, as getattr() does */
    if (!is_dunder(name, len)) {
        jv m = jmethod(R, obj, name);
        if (m.t != JV_UNDEF || (m.flags & JF_UNSAFE))
            return m;
    }
    if (jv_is_dict(obj)) {
        bool found;
        jv v = jv_dict_get(R, obj, jv_strn(name, len), &found);
        if (found)
            return v;
    }
    return jv_undef(hintf(R, "'%s object' has no attribute '%s'", jv_type_name(obj), name));
}

static int64_t norm_index(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

jv jgetitem(jrender *R, jv obj, jv key)
{
    if (obj.t == JV_UNDEF)
        jfail_undef(R, obj);
    if (obj.t == JV_LIST && (obj.flags & JF_GEN))
        jfail(R, CV_EINVAL, "'generator' object is not subscriptable");
    if (jv_is_list(obj)) {
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t n = jv_len(R, obj), i = norm_index(key.i, n);
            if (i < 0 || i >= n)
                return jv_undef("list index out of range");
            return jv_list_at(obj, i);
        }
    } else if (jv_is_dict(obj)) {
        bool found;
        jv v = jv_dict_get(R, obj, key, &found);
        if (found)
            return v;
        if (key.t == JV_INT || key.t == JV_BOOL || key.t == JV_FLOAT || key.t == JV_NONE) {
            /* numeric keys: jansson keys are strings, so only native dicts hold them */
            return jv_undef("dict has no such key");
        }
    } else if (obj.t == JV_STR) {
        if (key.t == JV_INT || key.t == JV_BOOL) {
            int64_t n = (int64_t)utf8_count(obj.s, obj.n), i = norm_index(key.i, n);
            if (i < 0 || i >= n)
                return jv_undef("string index out of range");
            size_t a = utf8_offset(obj.s, obj.n, i), b = utf8_offset(obj.s, obj.n, i + 1);
            return jv_strn(obj.s + a, b - a);
        }
    }
    if (key.t == JV_STR) {
        char *nm = jalloc(R, key.n + 1);
        memcpy(nm, key.s, key.n);
        return jgetattr(R, obj, nm, key.n);
    }
    return jv_undef("no such item");
}

/* Python slice indices for length n. */
static void slice_indices(jrender *R, jv start, jv stop, jv step, int64_t n, int64_t *a, int64_t *b, int64_t *st)
{
    *st = 1;
    if (step.t != JV_NONE && step.t != JV_UNDEF) {
        if (step.t != JV_INT && step.t != JV_BOOL)
            jfail(R, CV_EINVAL, "slice indices must be integers or None");
        *st = step.i;
        if (*st == 0)
            jfail(R, CV_EINVAL, "slice step cannot be zero");
    }
    int64_t lo = *st < 0 ? -1 : 0, hi = *st < 0 ? n - 1 : n;
    for (int k = 0; k < 2; k++) {
        jv v = k ? stop : start;
        int64_t *out = k ? b : a;
        if (v.t == JV_NONE || v.t == JV_UNDEF) {
            *out = (*st < 0) ? (k ? lo : hi) : (k ? hi : lo);
            continue;
        }
        if (v.t != JV_INT && v.t != JV_BOOL)
            jfail(R, CV_EINVAL, "slice indices must be integers or None");
        int64_t i = v.i;
        if (i < 0) {
            i += n;
            if (i < lo)
                i = lo;
        } else if (i > hi) {
            i = hi;
        }
        *out = i;
    }
}

static jv do_slice(jrender *R, jv obj, jv start, jv stop, jv step)
{
    if (obj.t == JV_UNDEF)
        jfail_undef(R, obj);
    if (obj.t == JV_STR) {
        int64_t n = (int64_t)utf8_count(obj.s, obj.n), a, b, st;
        slice_indices(R, start, stop, step, n, &a, &b, &st);
        if (st == 1) {
            if (b <= a)
                return jv_strn("", 0);
            size_t pa = utf8_offset(obj.s, obj.n, a), pb = utf8_offset(obj.s, obj.n, b);
            return jv_strn(obj.s + pa, pb - pa);
        }
        jv *chars;
        int64_t nc;
        jv_iter(R, obj, &chars, &nc);
        cv_buf *buf = jbuf_get(R);
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st)
            cv_buf_append(buf, chars[i].s, chars[i].n);
        jv r = jv_str_copy(R, buf->data ? buf->data : "", buf->len);
        jbuf_put(R, buf);
        return r;
    }
    if (jv_is_list(obj)) {
        if (obj.flags & JF_GEN)
            jfail(R, CV_EINVAL, "'generator' object is not subscriptable");
        int64_t n = jv_len(R, obj), a, b, st;
        slice_indices(R, start, stop, step, n, &a, &b, &st);
        jlist *l = jlist_new(R, 4);
        for (int64_t i = a; st > 0 ? i < b : i > b; i += st)
            jlist_push(R, l, jv_list_at(obj, i));
        jv r = jv_list(l);
        if (obj.t == JV_LIST)
            r.flags = obj.flags & JF_TUPLE;
        return r;
    }
    jfail(R, CV_EINVAL, "'%s' object is not subscriptable", jv_type_name(obj));
}

/* ---- arithmetic ---- */

static bool numeric(jv v) { return v.t == JV_INT || v.t == JV_BOOL || v.t == JV_FLOAT; }
static double fnum(jv v) { return v.t == JV_FLOAT ? v.f : (double)v.i; }

_Noreturn static void bad_operands(jrender *R, const char *op, jv a, jv b)
{
    if (a.t == JV_UNDEF)
        jfail_undef(R, a);
    if (b.t == JV_UNDEF)
        jfail_undef(R, b);
    jfail(R, CV_EINVAL, "unsupported operand type(s) for %s: '%s' and '%s'", op, jv_type_name(a), jv_type_name(b));
}

static jv repeat(jrender *R, jv seq, int64_t k)
{
    if (k < 0)
        k = 0;
    if (seq.t == JV_STR) {
        if (seq.n && (uint64_t)k > R->lim.max_output / seq.n)
            jfail(R, CV_ELIMIT, "string repetition exceeds the template output limit of %zu bytes", R->lim.max_output);
        char *p = jalloc(R, seq.n * (size_t)k + 1);
        for (int64_t i = 0; i < k; i++)
            memcpy(p + (size_t)i * seq.n, seq.s, seq.n);
        return jv_strn(p, seq.n * (size_t)k);
    }
    int64_t n = jv_len(R, seq);
    if (n && (uint64_t)k > R->lim.max_steps / (uint64_t)n)
        jfail(R, CV_ELIMIT, "list repetition exceeds the template step limit");
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, n * k));
    for (int64_t i = 0; i < k; i++)
        for (int64_t j = 0; j < n; j++)
            jlist_push(R, l, jv_list_at(seq, j));
    return jv_list(l);
}

static jv binop(jrender *R, int op, jv a, jv b)
{
    if (numeric(a) && numeric(b)) {
        bool ints = a.t != JV_FLOAT && b.t != JV_FLOAT;
        int64_t r;
        switch (op) {
        case OP_ADD:
            if (ints && !__builtin_add_overflow(a.i, b.i, &r)) return jv_int(r);
            return jv_float(fnum(a) + fnum(b));
        case OP_SUB:
            if (ints && !__builtin_sub_overflow(a.i, b.i, &r)) return jv_int(r);
            return jv_float(fnum(a) - fnum(b));
        case OP_MUL:
            if (ints && !__builtin_mul_overflow(a.i, b.i, &r)) return jv_int(r);
            return jv_float(fnum(a) * fnum(b));
        case OP_DIV:
            if (fnum(b) == 0)
                jfail(R, CV_EINVAL, "division by zero");
            return jv_float(fnum(a) / fnum(b));
        case OP_FLOORDIV:
            if (fnum(b) == 0)
                jfail(R, CV_EINVAL, "integer division or modulo by zero");
            if (ints) {
                if (a.i == INT64_MIN && b.i == -1)
                    return jv_float(-(double)INT64_MIN);
                int64_t q = a.i / b.i;
                if ((a.i % b.i != 0) && ((a.i < 0) != (b.i < 0)))
                    q--;
                return jv_int(q);
            }
            return jv_float(floor(fnum(a) / fnum(b)));
        case OP_MOD:
            if (fnum(b) == 0)
                jfail(R, CV_EINVAL, "integer division or modulo by zero");
            if (ints) {
                if (b.i == -1)
                    return jv_int(0);
                int64_t m = a.i % b.i;
                if (m != 0 && ((m < 0) != (b.i < 0)))
                    m += b.i;
                return jv_int(m);
            } else {
                double m = fmod(fnum(a), fnum(b));
                if (m != 0 && ((m < 0) != (fnum(b) < 0)))
                    m += fnum(b);
                return jv_float(m);
            }
        case OP_POW:
            if (ints && b.i >= 0) {
                int64_t acc = 1, base = a.i, e = b.i;
                bool of = false;
                while (e > 0 && !of) {
                    if (e & 1)
                        of |= __builtin_mul_overflow(acc, base, &acc);
                    e >>= 1;
                    if (e)
                        of |= __builtin_mul_overflow(base, base, &base);
                }
                if (!of)
                    return jv_int(acc);
            }
            if (fnum(a) == 0 && fnum(b) < 0)
                jfail(R, CV_EINVAL, "0.0 cannot be raised to a negative power");
            return jv_float(pow(fnum(a), fnum(b)));
        }
    }
    switch (op) {
    case OP_ADD:
        if (a.t == JV_STR && b.t == JV_STR)
            return jstr_concat(R, a, b);
        if (jv_is_list(a) && jv_is_list(b) && !(a.flags & JF_GEN) && !(b.flags & JF_GEN)) {
            int64_t na = jv_len(R, a), nb = jv_len(R, b);
            jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, na + nb));
            for (int64_t i = 0; i < na; i++)
                jlist_push(R, l, jv_list_at(a, i));
            for (int64_t i = 0; i < nb; i++)
                jlist_push(R, l, jv_list_at(b, i));
            jv r = jv_list(l);
            if (a.t == JV_LIST)
                r.flags = a.flags & JF_TUPLE;
            return r;
        }
        bad_operands(R, "+", a, b);
    case OP_MUL:
        if ((a.t == JV_STR || jv_is_list(a)) && (b.t == JV_INT || b.t == JV_BOOL))
            return repeat(R, a, b.i);
        if ((b.t == JV_STR || jv_is_list(b)) && (a.t == JV_INT || a.t == JV_BOOL))
            return repeat(R, b, a.i);
        bad_operands(R, "*", a, b);
    case OP_MOD:
        if (a.t == JV_STR)
            return jstr_percent(R, a, b);
        bad_operands(R, "%", a, b);
    default:
        bad_operands(R, op == OP_SUB ? "-" : op == OP_DIV ? "/" : op == OP_FLOORDIV ? "//" : "**", a, b);
    }
}

static bool contains(jrender *R, jv item, jv seq)
{
    if (seq.t == JV_STR) {
        if (item.t != JV_STR) {
            if (item.t == JV_UNDEF)
                jfail_undef(R, item);
            jfail(R, CV_EINVAL, "'in <string>' requires string as left operand, not %s", jv_type_name(item));
        }
        if (item.n == 0)
            return true;
        return item.n <= seq.n && memmem(seq.s, seq.n, item.s, item.n) != NULL;
    }
    if (jv_is_dict(seq) || seq.t == JV_NS) {
        if (seq.t == JV_NS)
            jfail(R, CV_EINVAL, "argument of type 'Namespace' is not iterable");
        bool found;
        jv_dict_get(R, seq, item, &found);
        return found;
    }
    if (jv_is_list(seq)) {
        int64_t n = jv_len(R, seq);
        for (int64_t i = 0; i < n; i++)
            if (jv_eq(jv_list_at(seq, i), item))
                return true;
        return false;
    }
    if (seq.t == JV_UNDEF)
        return false;
    jfail(R, CV_EINVAL, "argument of type '%s' is not iterable", jv_type_name(seq));
}

static bool compare(jrender *R, int op, jv a, jv b)
{
    switch (op) {
    case OP_EQ: return jv_eq(a, b);
    case OP_NE: return !jv_eq(a, b);
    case OP_LT: return jv_cmp(R, a, b) < 0;
    case OP_LE: return jv_cmp(R, a, b) <= 0;
    case OP_GT: return jv_cmp(R, a, b) > 0;
    case OP_GE: return jv_cmp(R, a, b) >= 0;
    case OP_IN: return contains(R, a, b);
    case OP_NOTIN: return !contains(R, a, b);
    }
    return false;
}

/* ---- calls ---- */

static void eval_args(jrender *R, jscope *S, const jnode *x, jcallargs *a, int extra_kw)
{
    int n_pos = x->n_kids, n_kw = x->n_defs;
    jv star = jv_undef(NULL), dstar = jv_undef(NULL);
    jv *star_items = NULL;
    int64_t n_star = 0;
    if (x->e) {
        star = eval(R, S, x->e);
        jv_iter(R, star, &star_items, &n_star);
    }
    jv *dk = NULL, *dv = NULL;
    int64_t n_dstar = 0;
    if (x->f) {
        dstar = eval(R, S, x->f);
        if (!jv_is_dict(dstar))
            jfail(R, CV_EINVAL, "argument after ** must be a mapping, not %s", jv_type_name(dstar));
        jv_dict_items(R, dstar, &dk, &dv, &n_dstar);
    }
    a->n_pos = n_pos + (int)n_star;
    a->pos = jalloc(R, (size_t)(a->n_pos + 1) * sizeof(jv));
    for (int i = 0; i < n_pos; i++)
        a->pos[i] = eval(R, S, x->kids[i]);
    for (int64_t i = 0; i < n_star; i++)
        a->pos[n_pos + i] = star_items[i];
    a->n_kw = n_kw + (int)n_dstar;
    a->kwn = jalloc(R, (size_t)(a->n_kw + extra_kw + 1) * sizeof(char *));
    a->kwv = jalloc(R, (size_t)(a->n_kw + extra_kw + 1) * sizeof(jv));
    for (int i = 0; i < n_kw; i++) {
        a->kwn[i] = x->kwn[i];
        a->kwv[i] = eval(R, S, x->defs[i]);
    }
    for (int64_t i = 0; i < n_dstar; i++) {
        if (dk[i].t != JV_STR)
            jfail(R, CV_EINVAL, "keywords must be strings");
        a->kwn[n_kw + i] = jv_str_copy(R, dk[i].s, dk[i].n).s;
        a->kwv[n_kw + i] = dv[i];
    }
}

static jv capture_body(jrender *R, jscope *S, const jnode *body)
{
    cv_buf *saved = R->out;
    cv_buf *b = jbuf_get(R);
    R->out = b;
    exec(R, S, body);
    R->out = saved;
    jv r = jv_str_copy(R, b->data ? b->data : "", b->len);
    jbuf_put(R, b);
    return r;
}

static jv call_macro(jrender *R, jfunc *fn, jcallargs *a)
{
    const jnode *m = fn->macro;
    if (++R->depth > R->lim.max_depth)
        jfail(R, CV_ELIMIT, "macro calls nest deeper than %d", R->lim.max_depth);
    jstep(R);
    jscope *C = scope_new(R, fn->closure);
    int n_params = m->n_kids;
    bool *bound = jalloc(R, (size_t)(n_params + 1));
    for (int i = 0; i < a->n_pos && i < n_params; i++) {
        scope_set(R, C, m->kids[i]->sym, a->pos[i]);
        bound[i] = true;
    }
    jv caller = fn->caller;
    jdict *kwargs = NULL;
    for (int k = 0; k < a->n_kw; k++) {
        int i;
        for (i = 0; i < n_params; i++)
            if (!strcmp(m->kids[i]->name, a->kwn[k]))
                break;
        if (i < n_params) {
            if (bound[i])
                jfail(R, CV_EINVAL, "macro '%s' got multiple values for argument '%s'", fn->name, a->kwn[k]);
            scope_set(R, C, m->kids[i]->sym, a->kwv[k]);
            bound[i] = true;
        } else if (!strcmp(a->kwn[k], "caller") && m->uses_caller) {
            caller = a->kwv[k];
        } else if (m->uses_kwargs) {
            if (!kwargs)
                kwargs = jdict_new(R, 4);
            jdict_set(R, kwargs, jv_strn(a->kwn[k], strlen(a->kwn[k])), a->kwv[k]);
        } else {
            jfail(R, CV_EINVAL, "macro '%s' takes no keyword argument '%s'", fn->name, a->kwn[k]);
        }
    }
    if (a->n_pos > n_params && !m->uses_varargs)
        jfail(R, CV_EINVAL, "macro '%s' takes not more than %d argument(s)", fn->name, n_params);
    for (int i = 0; i < n_params; i++) {
        if (bound[i])
            continue;
        if (m->defs && m->defs[i])
            scope_set(R, C, m->kids[i]->sym, eval(R, C, m->defs[i]));
        else
            scope_set(R, C, m->kids[i]->sym, jv_undef(hintf(R, "parameter '%s' was not provided%s", m->kids[i]->name, "")));
    }
    if (m->uses_varargs && R->t->sym_varargs >= 0) {
        jlist *l = jlist_new(R, 4);
        for (int i = n_params; i < a->n_pos; i++)
            jlist_push(R, l, a->pos[i]);
        jv lv = jv_list(l);
        lv.flags = JF_TUPLE;
        scope_set(R, C, R->t->sym_varargs, lv);
    }
    if (m->uses_kwargs && R->t->sym_kwargs >= 0)
        scope_set(R, C, R->t->sym_kwargs, jv_dict(kwargs ? kwargs : jdict_new(R, 1)));
    if (m->uses_caller && R->t->sym_caller >= 0)
        scope_set(R, C, R->t->sym_caller, caller.t == JV_UNDEF ? jv_undef("'caller'") : caller);
    jv r = capture_body(R, C, m->c);
    R->depth--;
    return r;
}

static void exec_for(jrender *R, jscope *S, const jnode *x, jv iterable, int depth, jscope *loop_scope);

jv jcall(jrender *R, jv callee, jcallargs *a)
{
    if (callee.t == JV_UNDEF)
        jfail_undef(R, callee);
    if (callee.t != JV_FUNC)
        jfail(R, CV_EINVAL, "'%s' object is not callable", jv_type_name(callee));
    jfunc *fn = callee.fn;
    switch (fn->kind) {
    case FN_MACRO:
        return call_macro(R, fn, a);
    case FN_BUILTIN:
    case FN_METHOD:
        jstep(R);
        return fn->call(R, fn->self, a);
    case FN_LOOP: {
        jloop *L = fn->loop;
        if (!(L->node->flag & 1))
            jfail(R, CV_EINVAL, "loop() can only be called in a loop marked 'recursive'");
        if (a->n_pos != 1 || a->n_kw)
            jfail(R, CV_EINVAL, "loop() takes exactly one argument");
        if (++R->depth > R->lim.max_depth)
            jfail(R, CV_ELIMIT, "recursive loop calls nest deeper than %d", R->lim.max_depth);
        cv_buf *saved = R->out;
        cv_buf *b = jbuf_get(R);
        R->out = b;
        exec_for(R, L->scope, L->node, a->pos[0], L->depth + 1, L->scope);
        R->out = saved;
        jv r = jv_str_copy(R, b->data ? b->data : "", b->len);
        jbuf_put(R, b);
        R->depth--;
        return r;
    }
    }
    jfail(R, CV_EINVAL, "object is not callable");
}

/* ---- the loop object ---- */

static jv loop_cycle(jrender *R, jv self, jcallargs *a)
{
    jloop *L = self.fn->loop;
    if (!a->n_pos)
        jfail(R, CV_EINVAL, "no items for cycling given");
    return a->pos[L->i % a->n_pos];
}

static jv loop_changed(jrender *R, jv self, jcallargs *a)
{
    jloop *L = self.fn->loop;
    jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, a->n_pos));
    for (int i = 0; i < a->n_pos; i++)
        jlist_push(R, l, a->pos[i]);
    jv v = jv_list(l);
    if (L->has_changed && jv_eq(L->last_changed, v))
        return jv_bool(false);
    L->has_changed = true;
    L->last_changed = v;
    return jv_bool(true);
}

static jv loop_attr(jrender *R, jloop *L, const char *name)
{
    int64_t i = L->i, n = L->n;
    if (!strcmp(name, "index")) return jv_int(i + 1);
    if (!strcmp(name, "index0")) return jv_int(i);
    if (!strcmp(name, "revindex")) return jv_int(n - i);
    if (!strcmp(name, "revindex0")) return jv_int(n - i - 1);
    if (!strcmp(name, "first")) return jv_bool(i == 0);
    if (!strcmp(name, "last")) return jv_bool(i == n - 1);
    if (!strcmp(name, "length")) return jv_int(n);
    if (!strcmp(name, "depth")) return jv_int(L->depth);
    if (!strcmp(name, "depth0")) return jv_int(L->depth - 1);
    if (!strcmp(name, "previtem")) return i > 0 ? L->items[i - 1] : jv_undef("there is no previous item");
    if (!strcmp(name, "nextitem")) return i + 1 < n ? L->items[i + 1] : jv_undef("there is no next item");
    if (!strcmp(name, "cycle") || !strcmp(name, "changed")) {
        jfunc *f = jalloc(R, sizeof *f);
        f->kind = FN_METHOD;
        f->name = name;
        f->call = name[1] == 'y' ? loop_cycle : loop_changed;
        f->self.t = JV_FUNC;
        jfunc *lf = jalloc(R, sizeof *lf);
        lf->kind = FN_LOOP;
        lf->loop = L;
        f->self.fn = lf;
        jv v = { .t = JV_FUNC };
        v.fn = f;
        return v;
    }
    return jv_undef(hintf(R, "'LoopContext object' has no attribute '%s'%s", name, ""));
}

/* ---- assignment ---- */

static void assign(jrender *R, jscope *S, const jnode *target, jv v)
{
    if (target->kind == N_NAME) {
        scope_set(R, S, target->sym, v);
        return;
    }
    if (target->kind == N_TUPLE) {
        jv *items;
        int64_t n;
        jv_iter(R, v, &items, &n);
        if (n != target->n_kids)
            jfail(R, CV_EINVAL, n > target->n_kids ? "too many values to unpack (expected %d)" : "not enough values to unpack (expected %d)",
                  target->n_kids);
        for (int i = 0; i < target->n_kids; i++)
            scope_set(R, S, target->kids[i]->sym, items[i]);
        return;
    }
    if (target->kind == N_NS_ASSIGN) {
        jv ns = lookup(R, S, target->a);
        if (ns.t != JV_NS)
            jfail(R, CV_EINVAL, "cannot assign attribute on non-namespace object");
        jdict_set(R, ns.d, jv_strn(target->name, target->name_len), v);
        return;
    }
    jfail(R, CV_EINVAL, "cannot assign to this target");
}

/* ---- expressions ---- */

static jv apply_filter(jrender *R, jscope *S, const jnode *f, jv v)
{
    if (f->fid < 0)
        jfail(R, CV_EINVAL, "no filter named '%s' found", f->name);
    jcallargs a = { 0 };
    eval_args(R, S, f, &a, 0);
    jstep(R);
    return jfilters[f->fid].fn(R, v, &a);
}

static jv eval(jrender *R, jscope *S, const jnode *x)
{
    R->line = x->line;
    switch (x->kind) {
    case N_CONST:
        return x->val;
    case N_NAME:
        return lookup(R, S, x);
    case N_TUPLE:
    case N_LIST: {
        jlist *l = jlist_new(R, (uint32_t)CV_MAX(1, x->n_kids));
        for (int i = 0; i < x->n_kids; i++)
            jlist_push(R, l, eval(R, S, x->kids[i]));
        jv v = jv_list(l);
        if (x->kind == N_TUPLE)
            v.flags = JF_TUPLE;
        return v;
    }
    case N_DICT: {
        jdict *d = jdict_new(R, (uint32_t)CV_MAX(1, x->n_kids));
        for (int i = 0; i < x->n_kids; i++) {
            jv k = eval(R, S, x->kids[i]);
            if (jv_is_list(k) && !(k.t == JV_LIST && (k.flags & JF_TUPLE)))
                jfail(R, CV_EINVAL, "unhashable type: 'list'");
            if (jv_is_dict(k) || k.t == JV_NS)
                jfail(R, CV_EINVAL, "unhashable type: '%s'", jv_type_name(k));
            jdict_set(R, d, k, eval(R, S, x->defs[i]));
        }
        return jv_dict(d);
    }
    case N_GETATTR: {
        jv o = eval(R, S, x->a);
        R->line = x->line;
        return jgetattr(R, o, x->name, x->name_len);
    }
    case N_GETITEM: {
        jv o = eval(R, S, x->a);
        jv k = eval(R, S, x->b);
        R->line = x->line;
        return jgetitem(R, o, k);
    }
    case N_SLICE: {
        jv o = eval(R, S, x->a);
        jv a = x->b ? eval(R, S, x->b) : jv_none();
        jv b = x->c ? eval(R, S, x->c) : jv_none();
        jv c = x->d ? eval(R, S, x->d) : jv_none();
        R->line = x->line;
        return do_slice(R, o, a, b, c);
    }
    case N_CALL: {
        jv callee = eval(R, S, x->a);
        jcallargs a = { 0 };
        eval_args(R, S, x, &a, 0);
        R->line = x->line;
        return jcall(R, callee, &a);
    }
    case N_FILTER: {
        jv v = eval(R, S, x->a);
        R->line = x->line;
        return apply_filter(R, S, x, v);
    }
    case N_TEST: {
        jv v = eval(R, S, x->a);
        R->line = x->line;
        if (x->fid < 0)
            jfail(R, CV_EINVAL, "no test named '%s' found", x->name);
        jcallargs a = { 0 };
        eval_args(R, S, x, &a, 0);
        bool r = jtests[x->fid].fn(R, v, &a);
        return jv_bool(x->flag ? !r : r);
    }
    case N_BINOP: {
        jv a = eval(R, S, x->a);
        jv b = eval(R, S, x->b);
        R->line = x->line;
        return binop(R, x->op, a, b);
    }
    case N_UNOP: {
        jv a = eval(R, S, x->a);
        R->line = x->line;
        if (x->op == OP_NOT)
            return jv_bool(!jv_truthy(R, a));
        if (a.t == JV_INT || a.t == JV_BOOL)
            return x->op == OP_NEG ? (a.i == INT64_MIN ? jv_float(-(double)a.i) : jv_int(-a.i)) : jv_int(a.i);
        if (a.t == JV_FLOAT)
            return jv_float(x->op == OP_NEG ? -a.f : a.f);
        if (a.t == JV_UNDEF)
            jfail_undef(R, a);
        jfail(R, CV_EINVAL, "bad operand type for unary %s: '%s'", x->op == OP_NEG ? "-" : "+", jv_type_name(a));
    }
    case N_AND: {
        jv a = eval(R, S, x->a);
        return jv_truthy(R, a) ? eval(R, S, x->b) : a;
    }
    case N_OR: {
        jv a = eval(R, S, x->a);
        return jv_truthy(R, a) ? a : eval(R, S, x->b);
    }
    case N_COMPARE: {
        jv a = eval(R, S, x->a);
        for (int i = 0; i < x->n_kids; i++) {
            jv b = eval(R, S, x->kids[i]);
            R->line = x->line;
            if (!compare(R, x->ops[i], a, b))
                return jv_bool(false);
            a = b;
        }
        return jv_bool(true);
    }
    case N_CONCAT: {
        cv_buf *b = jbuf_get(R);
        for (int i = 0; i < x->n_kids; i++) {
            jv v = eval(R, S, x->kids[i]);
            jv_str_append(R, b, v);
        }
        jv r = jv_str_copy(R, b->data ? b->data : "", b->len);
        jbuf_put(R, b);
        return r;
    }
    case N_CONDEXPR:
        if (jv_truthy(R, eval(R, S, x->a)))
            return eval(R, S, x->b);
        return x->c ? eval(R, S, x->c) : jv_undef("the inline if-expression evaluated to false and no else section was defined");
    default:
        jfail(R, CV_EINVAL, "statement used as an expression");
    }
}

/* ---- statements ---- */

static void exec_for(jrender *R, jscope *S, const jnode *x, jv iterable, int depth, jscope *loop_scope)
{
    jv *items;
    int64_t n;
    if (iterable.t == JV_UNDEF && (iterable.flags & JF_UNSAFE))
        jfail_undef(R, iterable);
    jv_iter(R, iterable, &items, &n);
    if (x->e) {
        /* `for x in xs if cond`: filter first, so loop.length counts the kept items */
        jv *kept = jalloc(R, (size_t)(n ? n : 1) * sizeof(jv));
        int64_t k = 0;
        jscope *F = scope_new(R, S);
        for (int64_t i = 0; i < n; i++) {
            jstep(R);
            F->n = 0;
            assign(R, F, x->a, items[i]);
            if (jv_truthy(R, eval(R, F, x->e)))
                kept[k++] = items[i];
        }
        items = kept;
        n = k;
    }
    if (n == 0) {
        if (x->d)
            exec(R, scope_new(R, S), x->d);
        return;
    }
    jloop *L = NULL;
    jv loopv = { 0 };
    if (R->t->sym_loop >= 0) {
        L = jalloc(R, sizeof *L);
        L->node = x;
        L->items = items;
        L->n = n;
        L->depth = depth;
        L->scope = loop_scope;
        jfunc *lf = jalloc(R, sizeof *lf);
        lf->kind = FN_LOOP;
        lf->loop = L;
        loopv.t = JV_FUNC;
        loopv.fn = lf;
    }
    jscope *C = scope_new(R, S);
    for (int64_t i = 0; i < n; i++) {
        jstep(R);
        C->n = 0; /* a fresh scope per iteration, reusing the arrays */
        if (L) {
            L->i = i;
            scope_set(R, C, R->t->sym_loop, loopv);
        }
        assign(R, C, x->a, items[i]);
        exec(R, C, x->c);
        if (R->brk) {
            int b = R->brk;
            R->brk = 0;
            if (b == 1)
                break;
        }
    }
}

static void exec(jrender *R, jscope *S, const jnode *x)
{
    R->line = x->line;
    switch (x->kind) {
    case N_BODY:
        for (int i = 0; i < x->n_kids; i++) {
            exec(R, S, x->kids[i]);
            if (R->brk)
                return;
        }
        return;
    case N_DATA:
        jout(R, x->val.s, x->val.n);
        return;
    case N_OUTPUT: {
        jv v = eval(R, S, x->a);
        if (v.t == JV_STR) {
            jout(R, v.s, v.n);
        } else {
            cv_buf *b = jbuf_get(R);
            jv_str_append(R, b, v);
            jout(R, b->data ? b->data : "", b->len);
            jbuf_put(R, b);
        }
        return;
    }
    case N_IF:
        if (jv_truthy(R, eval(R, S, x->a)))
            exec(R, S, x->b);
        else if (x->c)
            exec(R, S, x->c);
        return;
    case N_FOR: {
        jv it = eval(R, S, x->b);
        exec_for(R, S, x, it, 1, S);
        return;
    }
    case N_SET:
        assign(R, S, x->a, eval(R, S, x->b));
        return;
    case N_SETBLOCK: {
        jv v = capture_body(R, S, x->c);
        for (int i = 0; i < x->n_kids; i++)
            v = apply_filter(R, S, x->kids[i], v);
        assign(R, S, x->a, v);
        return;
    }
    case N_MACRO: {
        jfunc *f = jalloc(R, sizeof *f);
        f->kind = FN_MACRO;
        f->name = x->name;
        f->macro = x;
        f->closure = S;
        f->caller = jv_undef(NULL);
        jv v = { .t = JV_FUNC };
        v.fn = f;
        scope_set(R, S, x->sym, v);
        return;
    }
    case N_CALLBLOCK: {
        jfunc *cf = jalloc(R, sizeof *cf);
        cf->kind = FN_MACRO;
        cf->name = "caller";
        cf->macro = x;
        cf->closure = S;
        cf->caller = jv_undef(NULL);
        jv cv = { .t = JV_FUNC };
        cv.fn = cf;
        const jnode *call = x->a;
        jv callee = eval(R, S, call->a);
        jcallargs a = { 0 };
        eval_args(R, S, call, &a, 1);
        a.kwn[a.n_kw] = "caller";
        a.kwv[a.n_kw++] = cv;
        R->line = x->line;
        jv r = jcall(R, callee, &a);
        jv_str_append(R, R->out, r);
        if (R->out->len > R->lim.max_output)
            jfail(R, CV_ELIMIT, "template output exceeds %zu bytes", R->lim.max_output);
        return;
    }
    case N_FILTERBLOCK: {
        jv v = capture_body(R, S, x->c);
        for (int i = 0; i < x->n_kids; i++)
            v = apply_filter(R, S, x->kids[i], v);
        cv_buf *b = jbuf_get(R);
        jv_str_append(R, b, v);
        jout(R, b->data ? b->data : "", b->len);
        jbuf_put(R, b);
        return;
    }
    case N_WITH: {
        jscope *C = scope_new(R, S);
        jv *vals = jalloc(R, (size_t)(x->n_defs + 1) * sizeof(jv));
        for (int i = 0; i < x->n_defs; i++)
            vals[i] = eval(R, S, x->defs[i]);
        for (int i = 0; i < x->n_kids; i++)
            assign(R, C, x->kids[i], vals[i]);
        exec(R, C, x->c);
        return;
    }
    case N_SCOPE:
        exec(R, scope_new(R, S), x->c);
        return;
    case N_BREAK:
        R->brk = 1;
        return;
    case N_CONTINUE:
        R->brk = 2;
        return;
    default:
        jfail(R, CV_EINVAL, "expression used as a statement");
    }
}

/* ---- entry ---- */

int cv_jinja_render(const cv_jinja_tmpl *t, json_t *vars, const cv_jinja_opts *opts, cv_buf *out, cv_err *err)
{
    jrender *R = cv_xcalloc(1, sizeof *R);
    R->t = t;
    R->err = err;
    R->lim = opts ? opts->limits : (cv_jinja_limits){ 0 };
    if (!R->lim.max_steps) R->lim.max_steps = CV_JINJA_MAX_STEPS;
    if (!R->lim.max_output) R->lim.max_output = CV_JINJA_MAX_OUTPUT;
    if (!R->lim.max_memory) R->lim.max_memory = CV_JINJA_MAX_MEMORY;
    if (!R->lim.max_depth) R->lim.max_depth = CV_JINJA_MAX_DEPTH;
    if (!R->lim.max_ns) R->lim.max_ns = CV_JINJA_MAX_NS;
    R->now = opts ? opts->now : 0;
    R->t0 = cv_now_ns();
    R->out = out;
    size_t out_start = out->len;
    R->lim.max_output += out_start;
    int rc = 0;
    if (setjmp(R->jmp)) {
        rc = R->code ? R->code : CV_EINVAL;
        goto done;
    }
    jscope *root = scope_new(R, NULL);
    if (vars && json_is_object(vars)) {
        for (int i = 0; i < t->n_syms; i++) {
            json_t *v = json_object_get(vars, t->syms[i]);
            if (v)
                scope_set(R, root, i, jv_from_json(v));
        }
    }
    exec(R, root, t->root);
done:
    for (int i = 0; i < J_MAX_BUFS; i++)
        cv_buf_free(&R->bufs[i]);
    cv_arena_reset(&R->arena);
    free(R);
    return rc;
}
