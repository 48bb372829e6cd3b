/* test_jinja.c — the interpreter, case by case: a table of templates whose
 * expected output (or failure) is what Jinja2 3.1 produces in Hugging Face's
 * environment (each row was rendered once with tests/chat/jinja/
 * jinja_oracle.py's environment and pasted here; NULL means Jinja2 raises),
 * then the sandbox: infinite loops, huge outputs, deep recursion, memory
 * bombs and Python internals all stop with a clear error, and hostile
 * sources fail to compile without crashing. */
#include <time.h>

#include "chat/chat.h"
#include "chat/jinja/jinja.h"
#include "test.h"

typedef struct jcase {
    const char *name;
    const char *tmpl;
    const char *vars; /* JSON object */
    const char *want; /* NULL: must fail */
} jcase;

static const jcase cases[] = {
    { "whitespace_control_strips_both_sides", "a  {%- if true -%}  b  {%- endif -%}  c", "{}", "abc" },
    { "trim_blocks_eats_the_newline_after_a_block", "{% if true %}\nx\n{% endif %}\ny", "{}", "x\ny" },
    { "lstrip_blocks_drops_indentation_before_blocks", "  {% if true %}\n  x\n  {% endif %}\n  y\n", "{}", "  x\n  y" },
    { "plus_disables_lstrip", "  {%+ if true %}x{% endif %}", "{}", "  x" },
    { "comments_vanish_and_trim", "a\n  {# note #}\nb", "{}", "a\nb" },
    { "raw_blocks_are_verbatim", "{% raw %}{{ not evaluated }}{% endraw %}", "{}", "{{ not evaluated }}" },
    { "one_trailing_newline_is_dropped", "x\n\n", "{}", "x\n" },
    { "crlf_is_normalised", "a\r\nb\rc", "{}", "a\nb\nc" },
    { "python_str_of_values", "{{ none }} {{ true }} {{ 1.0 }} {{ 1e20 }} {{ 0.00001 }} {{ [1,'a',\"b'\"] }} {{ {'k': none} }} {{ (1,) }}", "{}", "None True 1.0 1e+20 1e-05 [1, 'a', \"b'\"] {'k': None} (1,)" },
    { "integer_and_float_arithmetic", "{{ 7//2 }} {{ -7//2 }} {{ -7%3 }} {{ 7/2 }} {{ 2**10 }} {{ 2**-1 }} {{ 3*'ab' }} {{ [1]*2 }}", "{}", "3 -4 2 3.5 1024 0.5 ababab [1, 1]" },
    { "string_concat_and_tilde", "{{ 'a' + 'b' }}{{ 'n' ~ 1 ~ none }}", "{}", "abn1None" },
    { "chained_comparisons", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }}", "{}", "True False True True" },
    { "in_and_not_in", "{{ 'b' in 'abc' }} {{ 2 in [1,2] }} {{ 'k' in {'k':1} }} {{ 3 not in [1] }}", "{}", "True True True True" },
    { "and_or_return_operands", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ none or [] }}", "{}", "x b []" },
    { "inline_if_without_else_is_undefined", "[{{ 'y' if false }}]", "{}", "[]" },
    { "slicing_lists_and_strings", "{{ [1,2,3,4][1:3] }} {{ 'h\xc3""\xa9""llo'[::-1] }} {{ 'abc'[-1] }} {{ [1,2,3][::2] }}", "{}", "[2, 3] oll\xc3""\xa9""h c [1, 3]" },
    { "len_counts_code_points", "{{ 'h\xc3""\xa9""llo\xf0""\x9f""\x98""\x80""'|length }}", "{}", "6" },
    { "for_loop_variables", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.previtem }}{{ loop.nextitem }};{% endfor %}", "{}", "103TrueFalse3b;212FalseFalse3ac;321FalseTrue3b;" },
    { "for_else_and_inline_filter", "{% for x in [1,2,3,4] if x is even %}{{ x }}{{ loop.length }}{% else %}none{% endfor %}|{% for x in [] %}{% else %}empty{% endfor %}", "{}", "2242|empty" },
    { "for_unpacks_items", "{% for k, v in {'a':1,'b':2}.items() %}{{k}}={{v}};{% endfor %}", "{}", "a=1;b=2;" },
    { "loop_cycle_and_changed", "{% for x in [1,1,2] %}{{ loop.cycle('a','b') }}{{ loop.changed(x) }}{% endfor %}", "{}", "aTruebFalseaTrue" },
    { "break_and_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", "{}", "0134" },
    { "loop_body_assignments_do_not_leak", "{% set x = 'out' %}{% for i in [1,2] %}[{{ x }}]{% set x = i %}{% endfor %}{{ x }}", "{}", "[out][out]out" },
    { "namespace_carries_state_out_of_loops", "{% set ns = namespace(n=0, s='') %}{% for i in [1,2,3] %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}", "{}", "6" },
    { "set_block_with_filter", "{% set x | upper %}hi {{ 'there' }}{% endset %}{{ x }}", "{}", "HI THERE" },
    { "tuple_assignment", "{% set a, b = 1, 2 %}{{ a }}{{ b }}", "{}", "12" },
    { "macro_defaults_kwargs_and_closure", "{% macro m(a, b='B') %}{{ a }}{{ b }}{{ x }}{% endmacro %}{% set x = 'X' %}{{ m(1) }}{{ m(1, b=2) }}{{ m(b=3, a=4) }}", "{}", "1BX12X43X" },
    { "macro_varargs_and_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, k=4) }}", "{}", "1(2, 3){'k': 4}" },
    { "call_block_passes_caller", "{% macro box(t) %}[{{ t }}:{{ caller('arg') }}]{% endmacro %}{% call(v) box('T') %}body {{ v }}{% endcall %}", "{}", "[T:body arg]" },
    { "recursive_macro", "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(5) }}", "{}", "54321" },
    { "recursive_loop", "{% for n in tree recursive %}{{ n.name }}{% if n.children %}({{ loop(n.children) }}){% endif %}{% endfor %}", "{\"tree\": [{\"name\": \"a\", \"children\": [{\"name\": \"b\", \"children\": []}, {\"name\": \"c\"}]}]}", "a(bc)" },
    { "filter_block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}", "{}", "ABC D" },
    { "with_block_scopes", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", "{}", "3[]" },
    { "generation_block_renders_its_body", "{% generation %}gen {{ 1 }}{% set z = 1 %}{% endgeneration %}[{{ z }}]", "{}", "gen 1[]" },
    { "undefined_tests_and_defaults", "{{ x is defined }}{{ x is undefined }}{{ x|default('d') }}{{ ''|default('e', true) }}{{ none is none }}{{ x }}", "{}", "FalseTruedeTrue" },
    { "attribute_then_item_lookup", "{{ d.items is defined }}{{ d['items'] }}{{ d.k }}{{ d.missing is defined }}", "{\"d\": {\"items\": \"I\", \"k\": \"K\"}}", "TrueIKFalse" },
    { "type_tests", "{{ 'a' is string }}{{ 1 is integer }}{{ true is integer }}{{ 1.0 is float }}{{ true is number }}{{ {} is mapping }}{{ [] is sequence }}{{ {} is sequence }}{{ 1 is iterable }}{{ x is iterable }}{{ none is mapping }}", "{}", "TrueTrueFalseTrueTrueTrueTrueTrueFalseTrueFalse" },
    { "string_methods", "{{ ' a b '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'a,b,c'.rsplit(',', 1) }}|{{ 'abc'.startswith('ab') }}{{ 'abc'.endswith(('x','c')) }}|{{ 'aXa'.replace('a','b') }}|{{ 'Hello World'.lower() }}{{ 'hi'.upper() }}|{{ 'hello wORLD 1st'.title() }}|{{ 'aBC'.capitalize() }}|{{ 'abcabc'.find('c') }}{{ 'abc'.count('') }}", "{}", "a b|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b,c']|['a,b', 'c']|TrueTrue|bXb|hello worldHI|Hello World 1St|Abc|24" },
    { "str_format_and_percent", "{{ '{0}-{x}-{0}'.format(1, x=2) }}|{{ '{:>5}|{:<4}|{:^5}|{:05d}|{:.2f}'.format('a','b','c',42,3.14159) }}|{{ '%s=%d (%r)' % ('k', 3, 'v') }}|{{ '%05.1f%%' % 2.25 }}", "{}", "1-2-1|    a|b   |  c  |00042|3.14|k=3 ('v')|002.2%" },
    { "dict_methods", "{{ d.get('a') }}{{ d.get('z', 'dflt') }}{{ d.keys()|list }}{{ d.values()|list }}{{ d.items()|list }}", "{\"d\": {\"a\": 1, \"b\": [2]}}", "1dflt['a', 'b'][1, [2]][('a', 1), ('b', [2])]" },
    { "filters_text", "{{ '  x  '|trim }}|{{ 'ab'|upper }}|{{ 'AB'|lower }}|{{ 'hello world-x(y'|title }}|{{ 'aBc'|capitalize }}|{{ 'a<b>&\"\\''|e }}|{{ 'aXbX'|replace('X', '-') }}|{{ 'abc'|reverse }}|{{ 'x'|center(5) }}|{{ 'a b c'|wordcount }}|{{ 'hello world foo'|truncate(9, leeway=0) }}", "{}", "x|AB|ab|Hello World-X(Y|Abc|a&lt;b&gt;&amp;&#34;&#39;|a-b-|cba|  x  |3|hello..." },
    { "filters_lists", "{{ [3,1,2]|sort }}{{ ['b','A','a']|sort }}{{ [3,1,2]|sort(reverse=true) }}{{ [1,2,3]|first }}{{ [1,2,3]|last }}{{ [1,2,3]|length }}{{ [1,2]|join(',') }}{{ ['a','A','b']|unique|list }}{{ [1,2,3]|sum }}{{ [1,5,3]|max }}{{ [4,2]|min }}{{ 'ab'|list }}{{ [1,2,3,4,5]|batch(2)|list }}", "{}", "[1, 2, 3]['A', 'a', 'b'][3, 2, 1]1331,2['a', 'b']652['a', 'b'][[1, 2], [3, 4], [5]]" },
    { "filters_dicts", "{{ {'b':1,'a':2,'C':0}|dictsort }}{{ {'b':1,'a':2}|dictsort(by='value') }}{{ {'a':1}|items|list }}", "{}", "[('a', 2), ('b', 1), ('C', 0)][('b', 1), ('a', 2)][('a', 1)]" },
    { "select_map_and_attrs", "{{ [1,2,3,4]|select('odd')|list }}{{ [1,2,3]|reject('equalto', 2)|list }}{{ us|selectattr('on')|map(attribute='n')|join(',') }}{{ us|rejectattr('n', 'in', ['a'])|map(attribute='n')|list }}{{ us|map(attribute='x', default='D')|list }}{{ ['a','b']|map('upper')|list }}{{ us|map(attribute='n')|list|length }}", "{\"us\": [{\"n\": \"a\", \"on\": true}, {\"n\": \"b\", \"on\": false}]}", "[1, 3][1, 3]a['b']['D', 'D']['A', 'B']2" },
    { "generators_are_truthy_and_have_no_length", "{{ 'yes' if []|select else 'no' }}", "{}", "yes" },
    { "numbers_filters", "{{ '42'|int }}{{ '4.7'|int }}{{ 'x'|int(7) }}{{ '0x1A'|int(0, 16) }}{{ 3|float }}{{ '2.5'|float }}{{ -3|abs }}{{ 2.5|round }}{{ 3.14159|round(2) }}{{ 2.1|round(0, 'ceil') }}{{ 5|string + 'x' }}", "{}", "4247263.02.532.03.143.05x" },
    { "indent_filter", "{{ 'a\nb\n\nc'|indent(2) }}|{{ 'a\nb'|indent(2, true) }}|{{ 'a\n\nb'|indent('> ', blank=true) }}", "{}", "a\n  b\n\n  c|  a\n  b|a\n> \n> b" },
    { "tojson_as_hugging_face_defines_it", "{{ {'a': [1, 2.5, '\xc3""\xa9""\"\\n\x01""'], 'b': none, 'c': true}|tojson }}|{{ [1, {'x': []}]|tojson(indent=2) }}|{{ {'b':1,'a':2}|tojson(sort_keys=true) }}|{{ {'a':[1,2]}|tojson(separators=(',', ':')) }}|{{ '\xc3""\xa9""'|tojson(ensure_ascii=true) }}|{{ {1: 'i', none: 'n'}|tojson }}", "{}", "{\"a\": [1, 2.5, \"\xc3""\xa9""\\\"\\n\\u0001\"], \"b\": null, \"c\": true}|[\n  1,\n  {\n    \"x\": []\n  }\n]|{\"a\": 2, \"b\": 1}|{\"a\":[1,2]}|\"\\u00e9\"|{\"1\": \"i\", \"null\": \"n\"}" },
    { "tojson_keeps_context_key_order", "{{ d|tojson }}", "{\"d\": {\"z\": 1, \"a\": {\"y\": [1.5, 1e-07, 12345678901234]}, \"m\": \"\xf0""\x9f""\x98""\x80""\"}}", "{\"z\": 1, \"a\": {\"y\": [1.5, 1e-07, 12345678901234]}, \"m\": \"\xf0""\x9f""\x98""\x80""\"}" },
    { "markup_escapes_the_other_operand", "{{ 'x'|safe + '<' }}{{ '<' + 'y'|safe }}", "{}", "x&lt;&lt;y" },
    { "range_and_dict_globals", "{{ range(3)|list }}{{ range(1, 10, 3)|list }}{{ range(5, 0, -2)|list }}{{ dict(a=1, b=2) }}{{ namespace(a=1).a }}", "{}", "[0, 1, 2][1, 4, 7][5, 3, 1]{'a': 1, 'b': 2}1" },
    { "strftime_now_formats_the_given_time", "{{ strftime_now('%Y-%m-%d %H:%M %b %A') }}", "{}", "2025-01-06 10:30 Jan Monday" },
    { "escapes_in_string_literals", "{{ 'tab\\there\\nnew \\u00e9 \\x41 \\\\ \\'q\\'' }}|{{ \"it's\" }}|{{ 'a' 'b' }}", "{}", "tab\there\nnew \xc3""\xa9"" A \\ 'q'|it's|ab" },
    { "unsafe_attributes_print_nothing", "[{{ ''.__class__ }}][{{ d._x }}]", "{\"d\": {\"_x\": \"kept\"}}", "[][kept]" },
    { "error_undefined_attribute_of_undefined", "{{ x.y }}", "{}", NULL },
    { "error_attribute_chain_past_a_missing_key", "{{ d.a.b }}", "{\"d\": {}}", NULL },
    { "error_raise_exception", "{{ raise_exception('bad role') }}", "{}", NULL },
    { "error_type_mismatch_in_add", "{{ 'a' + 1 }}", "{}", NULL },
    { "error_ordering_across_types", "{{ 'a' < 1 }}", "{}", NULL },
    { "error_tojson_of_undefined", "{{ x|tojson }}", "{}", NULL },
    { "error_mutating_a_list", "{% set l = [1] %}{{ l.append(2) }}", "{}", NULL },
    { "error_blocked_attribute_chain", "{{ ''.__class__.__mro__ }}", "{}", NULL },
    { "error_namespace_assignment_on_dict", "{% set d = {} %}{% set d.a = 1 %}", "{}", NULL },
    { "error_unknown_filter", "{{ 1|nosuchfilter }}", "{}", NULL },
    { "unknown_filter_in_untaken_branch_is_fine", "{% if false %}{{ 1|nosuchfilter }}{% endif %}ok", "{}", "ok" },
    { "error_unknown_filter_in_taken_branch", "{% if true %}{{ 1|nosuchfilter }}{% endif %}ok", "{}", NULL },
    { "error_division_by_zero", "{{ 1/0 }}", "{}", NULL },
    { "error_range_too_big", "{{ range(200000)|length }}", "{}", NULL },
    { "error_len_of_generator", "{{ [1]|map('string')|length }}", "{}", NULL },
    { "error_undefined_int", "{{ x|int }}", "{}", NULL },
    { "error_macro_extra_argument", "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}", "{}", NULL },
    { "error_syntax_unclosed_if", "{% if true %}x", "{}", NULL },
    { "error_syntax_bad_expression", "{{ 1 + }}", "{}", NULL },
    { "error_syntax_unknown_tag", "{% include 'x.html' %}", "{}", NULL },
};

static int render(const char *tmpl, const char *vars, const cv_jinja_limits *lim, cv_buf *out, cv_err *err)
{
    cv_jinja_tmpl *t = NULL;
    int rc = cv_jinja_compile(tmpl, strlen(tmpl), &t, err);
    if (rc != 0)
        return rc;
    json_t *v = vars ? json_loads(vars, 0, NULL) : json_object();
    cv_jinja_opts o = { .now = 1736159400 };
    if (lim)
        o.limits = *lim;
    rc = cv_jinja_render(t, v, &o, out, err);
    json_decref(v);
    cv_jinja_free(t);
    return rc;
}

TEST(each_case_renders_as_jinja2_or_fails_where_it_fails)
{
    setenv("TZ", "UTC", 1);
    tzset();
    for (size_t i = 0; i < CV_ARRAY_LEN(cases); i++) {
        const jcase *c = &cases[i];
        cv_buf out = { 0 };
        cv_err err = { 0 };
        int rc = render(c->tmpl, c->vars, NULL, &out, &err);
        if (c->want) {
            CHECK_MSG(rc == 0 && !strcmp(out.data ? out.data : "", c->want), "%s: rc %d (%s)\n  want: %s\n  got:  %s",
                      c->name, rc, err.msg, c->want, out.data ? out.data : "");
        } else {
            CHECK_MSG(rc < 0 && err.msg[0], "%s: should fail, rendered \"%s\"", c->name, out.data ? out.data : "");
            CHECK_MSG(strstr(err.msg, "line ") != NULL, "%s: error should name the template line: %s", c->name, err.msg);
        }
        cv_buf_free(&out);
    }
}

/* ---- the sandbox ---- */

typedef struct sandbox_case {
    const char *name;
    const char *tmpl;
    int code;         /* expected CV_E* */
    const char *says; /* a phrase the error must contain */
} sandbox_case;

static const sandbox_case sandbox[] = {
    { "nested_loops_hit_the_step_limit", "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
      CV_ELIMIT, "loop iterations" },
    { "string_doubling_hits_the_output_limit",
      "{% set ns = namespace(s='xxxxxxxxxxxxxxxx') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s }}",
      CV_ELIMIT, "exceeds" },
    { "output_flood_hits_the_output_limit", "{% for i in range(100000) %}{{ 'y' * 100000 }}{% endfor %}", CV_ELIMIT, "exceeds" },
    { "unbounded_recursion_hits_the_depth_limit", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", CV_ELIMIT, "deeper than" },
    { "recursive_loop_hits_the_depth_limit", "{% set l = [[]] %}{% for x in l recursive %}{{ loop(l) }}{% endfor %}", CV_ELIMIT, "deeper than" },
    { "huge_range_is_refused", "{{ range(1000000000)|length }}", CV_ELIMIT, "range" },
    { "huge_repetition_is_refused", "{{ 'x' * 10000000000 }}", CV_ELIMIT, "exceeds" },
    { "python_internals_are_unreachable", "{{ ''.__class__.__mro__[1].__subclasses__() }}", CV_EINVAL, "unsafe" },
    { "globals_of_a_macro_are_unreachable", "{% macro m() %}{% endmacro %}{{ m.__globals__.os }}", CV_EINVAL, "unsafe" },
    { "list_mutation_is_refused", "{% set l = [] %}{{ l.append(1) }}", CV_EINVAL, "unsafe" },
    { "dict_mutation_is_refused", "{% set d = {} %}{{ d.update({'a': 1}) }}", CV_EINVAL, "unsafe" },
    { "no_file_access_through_include", "{% include '/etc/passwd' %}", CV_EINVAL, "unsupported tag" },
    { "no_environment_access", "{{ self.__init__.__globals__ }}", CV_EINVAL, "undefined" },
};

TEST(sandbox_limits_stop_hostile_templates_with_clear_errors)
{
    /* small limits keep the suite fast under sanitizers; the defaults are
     * the same mechanism with larger numbers */
    cv_jinja_limits lim = { .max_steps = 200000, .max_output = 1u << 20, .max_memory = 64u << 20, .max_depth = 50 };
    for (size_t i = 0; i < CV_ARRAY_LEN(sandbox); i++) {
        const sandbox_case *c = &sandbox[i];
        cv_buf out = { 0 };
        cv_err err = { 0 };
        int rc = render(c->tmpl, NULL, &lim, &out, &err);
        CHECK_MSG(rc == c->code, "%s: rc %d, want %d (%s)", c->name, rc, c->code, err.msg);
        CHECK_MSG(strstr(err.msg, c->says) != NULL, "%s: error \"%s\" should say \"%s\"", c->name, err.msg, c->says);
        CHECK_MSG(out.len <= lim.max_output, "%s: %zu bytes escaped the output limit", c->name, out.len);
        cv_buf_free(&out);
    }
}

TEST(default_limits_stop_an_infinite_loop)
{
    /* with the production limits: a loop that would run 10^10 iterations
     * stops at the step limit, or at the time limit first on a slow
     * (sanitizer, loaded) machine: either way a CV_ELIMIT naming it */
    cv_buf out = { 0 };
    cv_err err = { 0 };
    int rc = render("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}", NULL, NULL, &out, &err);
    CHECK_EQ_INT(rc, CV_ELIMIT);
    CHECK_MSG(strstr(err.msg, "loop iterations") || strstr(err.msg, "took longer"), "%s", err.msg);
    cv_buf_free(&out);
}

TEST(deeply_nested_source_is_refused_at_compile_time)
{
    cv_buf src = { 0 };
    cv_buf_puts(&src, "{{ ");
    for (int i = 0; i < 100000; i++)
        cv_buf_putc(&src, '(');
    cv_buf_puts(&src, "1");
    for (int i = 0; i < 100000; i++)
        cv_buf_putc(&src, ')');
    cv_buf_puts(&src, " }}");
    cv_jinja_tmpl *t = NULL;
    cv_err err = { 0 };
    CHECK_EQ_INT(cv_jinja_compile(src.data, src.len, &t, &err), CV_ELIMIT);
    CHECK(t == NULL);
    CHECK(strstr(err.msg, "deeper than") != NULL);
    cv_buf_reset(&src);
    for (int i = 0; i < 5000; i++)
        cv_buf_puts(&src, "{% if true %}");
    CHECK_EQ_INT(cv_jinja_compile(src.data, src.len, &t, &err), CV_ELIMIT);
    cv_buf_free(&src);
}

TEST(truncated_and_garbled_sources_fail_without_crashing)
{
    /* every prefix of a real template either compiles or fails cleanly */
    struct stat st;
    if (stat(test_data("templates"), &st) != 0)
        TEST_SKIP("%s is absent", test_data("templates"));
    cv_buf src = { 0 };
    cv_err err = { 0 };
    CHECK(cv_read_file(test_data("templates/Qwen-Qwen3-0.6B.jinja"), &src, 1u << 20, &err) == 0);
    int n_ok = 0, n_fail = 0;
    for (size_t cut = 0; cut <= src.len; cut += 7) {
        cv_jinja_tmpl *t = NULL;
        cv_err e = { 0 };
        if (cv_jinja_compile(src.data, cut, &t, &e) == 0) {
            n_ok++;
            cv_jinja_free(t);
        } else {
            n_fail++;
            CHECK_MSG(e.msg[0] != 0, "cut at %zu failed without a message", cut);
        }
    }
    CHECK(n_ok > 0 && n_fail > 0);
    static const char *garbage[] = {
        "{{", "{%", "{#", "{{ 'unterminated }}", "{% for %}", "{% for x in %}{% endfor %}", "{% set %}",
        "{% macro %}", "{{ a[ }}", "{{ a. }}", "{{ } }}", "{% endif %}", "{% if x %}{% else %}{% else %}{% endif %}",
        "{{ 1 if }}", "{% raw %}never closed", "{{ x|}}", "{{ x is }}", "{% call x %}{% endcall %}",
        "{% break %}", "\xff\xfe{{ \xc0\x80 }}", "{{ 99999999999999999999999 }}",
    };
    for (size_t i = 0; i < CV_ARRAY_LEN(garbage); i++) {
        cv_jinja_tmpl *t = NULL;
        cv_err e = { 0 };
        int rc = cv_jinja_compile(garbage[i], strlen(garbage[i]), &t, &e);
        if (rc == 0) {
            cv_buf out = { 0 };
            cv_jinja_render(t, NULL, NULL, &out, &e);
            cv_buf_free(&out);
            cv_jinja_free(t);
        } else {
            CHECK_MSG(e.msg[0] != 0, "garbage %zu failed without a message", i);
        }
    }
    cv_buf_free(&src);
}

TEST(missing_template_falls_back_to_chatml)
{
    cv_chat_template *t = NULL;
    cv_err err = { 0 };
    CHECK(cv_chat_template_create(NULL, 0, "test.gguf", &t, &err) == 0);
    CHECK(cv_chat_template_is_fallback(t));
    json_t *msgs = json_loads("[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"U\"}]},"
                              "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":{\"a\":1}}}]}]",
                              0, NULL);
    cv_chat_render_opts o = { .messages = msgs, .add_generation_prompt = true };
    cv_buf out = { 0 };
    CHECK(cv_chat_template_render(t, &o, &out, &err) == 0);
    CHECK_EQ_STR(out.data, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n"
                           "\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call><|im_end|>\n<|im_start|>assistant\n");
    cv_buf_free(&out);
    json_decref(msgs);
    cv_chat_template_destroy(t);
}

TEST(render_rejects_a_conversation_that_is_not_an_array)
{
    cv_chat_template *t = NULL;
    cv_err err = { 0 };
    CHECK(cv_chat_template_create("{{ messages }}", 14, NULL, &t, &err) == 0);
    json_t *obj = json_object();
    cv_chat_render_opts o = { .messages = obj };
    cv_buf out = { 0 };
    CHECK_EQ_INT(cv_chat_template_render(t, &o, &out, &err), CV_EINVAL);
    CHECK(strstr(err.msg, "messages") != NULL);
    json_decref(obj);
    cv_buf_free(&out);
    cv_chat_template_destroy(t);
}

TEST(keyword_switches_reach_the_template_and_win)
{
    cv_chat_template *t = NULL;
    cv_err err = { 0 };
    const char *src = "{{ enable_thinking }}|{{ reasoning_effort }}|{{ bos_token }}|{{ tools }}|{{ documents }}";
    CHECK(cv_chat_template_create(src, strlen(src), NULL, &t, &err) == 0);
    json_t *msgs = json_array(), *kw = json_loads("{\"enable_thinking\":false,\"reasoning_effort\":\"low\",\"bos_token\":\"B\"}", 0, NULL);
    cv_chat_render_opts o = { .messages = msgs, .bos_token = "<s>", .kwargs = kw };
    cv_buf out = { 0 };
    CHECK(cv_chat_template_render(t, &o, &out, &err) == 0);
    CHECK_EQ_STR(out.data, "False|low|B|None|None");
    json_decref(msgs);
    json_decref(kw);
    cv_buf_free(&out);
    cv_chat_template_destroy(t);
}

int main(void)
{
    RUN(each_case_renders_as_jinja2_or_fails_where_it_fails);
    RUN(sandbox_limits_stop_hostile_templates_with_clear_errors);
    RUN(default_limits_stop_an_infinite_loop);
    RUN(deeply_nested_source_is_refused_at_compile_time);
    RUN(truncated_and_garbled_sources_fail_without_crashing);
    RUN(missing_template_falls_back_to_chatml);
    RUN(render_rejects_a_conversation_that_is_not_an_array);
    RUN(keyword_switches_reach_the_template_and_win);
    return test_report();
}
