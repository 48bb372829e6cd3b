/* pretok.c — byte-level BPE pre-tokenizers: the table of regex sequences per
 * `tokenizer.ggml.pre` name, their compilation with PCRE2 (UTF + Unicode
 * properties + JIT), and the splitter that cuts text into the words BPE
 * runs on.
 *
 * Semantics (Hugging Face tokenizers `Split` with behavior "Isolated", and
 * the ByteLevel pre-tokenizer's own regex): a regex cuts a piece into its
 * matches and the gaps between them, each kept as its own piece, in order;
 * the next regex of the sequence then cuts each of those pieces. The regexes
 * are the ones in each model's tokenizer.json (facts of the format, not
 * code); `\p{N}` stands for the Digits pre-tokenizer, whose test is
 * Unicode's numeric categories. The invariant is that the pieces concatenate
 * back to the input exactly. */
#include "tokenizer/tok_int.h"

#include <stdio.h>

/* GPT-2's ByteLevel regex (use_regex = true). */
#define RX_GPT2 "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+"
/* Llama 3 / Qwen 2 share this shape; they differ in the digit run length. */
#define RX_LLAMA3                                                                                   \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_QWEN2                                                                                    \
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" \
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_GPT4O                                                                                              \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" \
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|" \
    "\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"
#define RX_DEEPSEEK3_TAIL                                                                          \
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|" \
    " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"
/* CJK blocks as the DeepSeek tokenizers spell them: 一-龥, ࠀ-一 and 가-퟿. */
#define RX_DEEPSEEK_CJK "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"

static const tok_pre_def pre_defs[] = {
    { "gpt-2 default gpt2 mpt olmo jais trillion gpt-neox phi-2 roberta-bpe", { RX_GPT2 }, false, TOK_NORM_NONE, 0 },
    { "llama-bpe llama3 dbrx smaug-bpe falcon3 pixtral", { RX_LLAMA3 }, true, TOK_NORM_NONE, 3 },
    { "qwen2 deepseek-r1-qwen stablelm2 hunyuan megrez", { RX_QWEN2 }, false, TOK_NORM_NFC, 1 },
    /* Qwen 3.5 dropped the NFC normalizer (vocab/no-gguf/ggml-vocab-qwen35
     * keeps decomposed accents apart) */
    { "qwen35", { RX_QWEN2 }, false, TOK_NORM_NONE, 1 },
    { "gpt-4o gpt-oss o200k", { RX_GPT4O }, true, TOK_NORM_NONE, 0 },
    { "starcoder refact command-r smollm codeshell exaone minerva-7b", { "\\p{N}", RX_GPT2 }, false, TOK_NORM_NONE, 0 },
    { "falcon",
      { "[\\p{P}\\x{21}-\\x{2f}\\x{3a}-\\x{40}\\x{5b}-\\x{60}\\x{7b}-\\x{7e}]+", RX_GPT2, "[0-9]+", "[0-9][0-9][0-9]" },
      false, TOK_NORM_NONE, 0 },
    /* DeepSeek LLM's cased-letter class, as \x{} escapes: it holds canonical
     * singletons (U+1F7D, U+1FBE, U+2126, U+212A, ...) that an editor saving
     * NFC would silently turn into other characters. */
    { "deepseek-llm",
      { "[\r\n]",
        "\\s?["
        "A-Za-z\\x{b5}\\x{c0}-\\x{d6}\\x{d8}-\\x{f6}\\x{f8}-\\x{1ba}\\x{1bc}-\\x{1bf}"
        "\\x{1c4}-\\x{293}\\x{295}-\\x{2af}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37b}-\\x{37d}\\x{37f}"
        "\\x{386}\\x{388}-\\x{38a}\\x{38c}\\x{38e}-\\x{3a1}\\x{3a3}-\\x{3f5}\\x{3f7}-\\x{481}"
        "\\x{48a}-\\x{52f}\\x{531}-\\x{556}\\x{10a0}-\\x{10c5}\\x{13a0}-\\x{13f5}\\x{13f8}-\\x{13fd}"
        "\\x{1c90}-\\x{1cba}\\x{1cbd}-\\x{1cbf}\\x{1d00}-\\x{1d2b}\\x{1d6b}-\\x{1d77}"
        "\\x{1d79}-\\x{1d9a}\\x{1e00}-\\x{1f15}\\x{1f18}-\\x{1f1d}\\x{1f20}-\\x{1f45}"
        "\\x{1f48}-\\x{1f4d}\\x{1f50}-\\x{1f57}\\x{1f59}\\x{1f5b}\\x{1f5d}\\x{1f5f}-\\x{1f7d}"
        "\\x{1f80}-\\x{1fb4}\\x{1fb6}-\\x{1fbc}\\x{1fbe}\\x{1fc2}-\\x{1fc4}\\x{1fc6}-\\x{1fcc}"
        "\\x{1fd0}-\\x{1fd3}\\x{1fd6}-\\x{1fdb}\\x{1fe0}-\\x{1fec}\\x{1ff2}-\\x{1ff4}"
        "\\x{1ff6}-\\x{1ffc}\\x{2102}\\x{2107}\\x{210a}-\\x{2113}\\x{2115}\\x{2119}-\\x{211d}"
        "\\x{2124}\\x{2126}\\x{2128}\\x{212a}-\\x{212d}\\x{212f}-\\x{2134}\\x{2139}"
        "\\x{213c}-\\x{213f}\\x{2145}-\\x{2149}\\x{214e}\\x{2183}\\x{2184}\\x{2c00}-\\x{2c7b}"
        "\\x{2c7e}-\\x{2ce4}\\x{2ceb}-\\x{2cee}\\x{2cf2}\\x{2cf3}\\x{a640}-\\x{a66d}"
        "\\x{a680}-\\x{a69b}\\x{a722}-\\x{a76f}\\x{a771}-\\x{a787}\\x{a78b}-\\x{a78e}"
        "\\x{ab70}-\\x{abbf}\\x{fb00}-\\x{fb06}\\x{fb13}-\\x{fb17}\\x{ff21}-\\x{ff3a}"
        "\\x{ff41}-\\x{ff5a}\\x{10400}-\\x{1044f}\\x{104b0}-\\x{104d3}\\x{104d8}-\\x{104fb}"
        "\\x{10c80}-\\x{10cb2}\\x{10cc0}-\\x{10cf2}\\x{118a0}-\\x{118df}\\x{1e900}-\\x{1e943}"
        "]+",
        "\\s?[!-/:-~！-／：-～‘-‟　-。]+", "\\s+$", RX_DEEPSEEK_CJK, "\\p{N}+" },
      false, TOK_NORM_NONE, 0 },
    { "deepseek-coder", { "[\r\n]", "\\s?\\p{L}+", "\\s?\\p{P}+", RX_DEEPSEEK_CJK, "\\p{N}" }, false, TOK_NORM_NONE, 0 },
    { "deepseek-v3 deepseek3-llm hunyuan-dense kimi-k2",
      { "\\p{N}{1,3}", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+", RX_DEEPSEEK3_TAIL },
      false, TOK_NORM_NONE, 0 },
};

static bool name_in(const char *names, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = names; *p;) {
        const char *e = strchr(p, ' ');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && memcmp(p, name, n) == 0)
            return true;
        if (!e)
            break;
        p = e + 1;
    }
    return false;
}

const tok_pre_def *tok_pre_find(const char *name)
{
    for (size_t i = 0; i < CV_ARRAY_LEN(pre_defs); i++)
        if (name_in(pre_defs[i].names, name))
            return &pre_defs[i];
    return NULL;
}

const tok_pre_def *tok_pre_match(const char *const *regex, int n)
{
    for (size_t i = 0; i < CV_ARRAY_LEN(pre_defs); i++) {
        const tok_pre_def *d = &pre_defs[i];
        int k = 0;
        while (k < TOK_MAX_REGEX && d->regex[k])
            k++;
        if (k != n)
            continue;
        bool same = true;
        for (int j = 0; j < n && same; j++)
            same = strcmp(d->regex[j], regex[j]) == 0;
        if (same)
            return d;
    }
    return NULL;
}

int tok_pre_compile(cv_tok *t, cv_err *err)
{
    for (int i = 0; i < TOK_MAX_REGEX && t->pre->regex[i]; i++) {
        int ec;
        PCRE2_SIZE off;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)t->pre->regex[i], PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec,
                                       &off, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(ec, msg, sizeof msg);
            /* Our own table failed to compile: a build of PCRE2 without
             * Unicode support is the only way here. */
            return cv_err_set(err, CV_EUNSUPPORTED, "pre-tokenizer %s regex %d does not compile at offset %zu: %s",
                              t->pre_name, i, (size_t)off, (const char *)msg);
        }
        /* JIT is an optimisation: without it (a platform PCRE2 lacks it for)
         * the interpreter gives the same matches. */
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
        t->re[t->n_re++] = re;
    }
    return 0;
}

/* ---- the Llama 3 / Qwen 2 regex by hand, for ASCII ----
 *
 * Most of what agents send is ASCII source code, and the regex engine spends
 * ~350 instructions a match on it. For ASCII the classes are simple (\p{L}
 * = [A-Za-z], \p{N} = [0-9], \s = [\t\n\v\f\r ]) and every character
 * starts a match, so the alternatives can be tried in order by hand. The
 * moment an answer could depend on a non-ASCII character (a letter run
 * running into one, a lookahead landing on one, 'ſ after an apostrophe),
 * fast_llama3 returns -1 and PCRE2 decides that match: the split is the
 * regex's, only cheaper. tests/tokenizer/diff.sh holds it to the reference. */

enum { C_L = 1, C_N = 2, C_S = 4, C_NL = 8 };
static const uint8_t ascii_class[128] = {
    ['\t'] = C_S, ['\n'] = C_S | C_NL, ['\v'] = C_S, ['\f'] = C_S, ['\r'] = C_S | C_NL, [' '] = C_S,
    ['0'] = C_N, ['1'] = C_N, ['2'] = C_N, ['3'] = C_N, ['4'] = C_N,
    ['5'] = C_N, ['6'] = C_N, ['7'] = C_N, ['8'] = C_N, ['9'] = C_N,
    ['A'] = C_L, ['B'] = C_L, ['C'] = C_L, ['D'] = C_L, ['E'] = C_L, ['F'] = C_L, ['G'] = C_L, ['H'] = C_L,
    ['I'] = C_L, ['J'] = C_L, ['K'] = C_L, ['L'] = C_L, ['M'] = C_L, ['N'] = C_L, ['O'] = C_L, ['P'] = C_L,
    ['Q'] = C_L, ['R'] = C_L, ['S'] = C_L, ['T'] = C_L, ['U'] = C_L, ['V'] = C_L, ['W'] = C_L, ['X'] = C_L,
    ['Y'] = C_L, ['Z'] = C_L,
    ['a'] = C_L, ['b'] = C_L, ['c'] = C_L, ['d'] = C_L, ['e'] = C_L, ['f'] = C_L, ['g'] = C_L, ['h'] = C_L,
    ['i'] = C_L, ['j'] = C_L, ['k'] = C_L, ['l'] = C_L, ['m'] = C_L, ['n'] = C_L, ['o'] = C_L, ['p'] = C_L,
    ['q'] = C_L, ['r'] = C_L, ['s'] = C_L, ['t'] = C_L, ['u'] = C_L, ['v'] = C_L, ['w'] = C_L, ['x'] = C_L,
    ['y'] = C_L, ['z'] = C_L,
};

#define BAIL (-1)

/* End of the match that starts at i, or BAIL. */
static long fast_llama3(const unsigned char *s, size_t n, size_t i, int max_digits)
{
    unsigned c = s[i];
    if (c >= 0x80)
        return BAIL;
    unsigned k = ascii_class[c];
    /* (?i:'s|'t|'re|'ve|'m|'ll|'d) */
    if (c == '\'' && i + 1 < n) {
        unsigned a = s[i + 1];
        if (a >= 0x80)
            return BAIL; /* 'ſ matches 's case-insensitively */
        a |= 0x20;
        if (a == 's' || a == 't' || a == 'm' || a == 'd')
            return (long)i + 2;
        if ((a == 'r' || a == 'v' || a == 'l') && i + 2 < n) {
            unsigned b = s[i + 2];
            if (b >= 0x80)
                return BAIL;
            b |= 0x20;
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
                return (long)i + 3;
        }
    }
    /* [^\r\n\p{L}\p{N}]?\p{L}+ */
    size_t j = i;
    if (!(k & (C_L | C_N | C_NL))) {
        j = i + 1;
        if (j < n && s[j] >= 0x80)
            return BAIL;
    }
    if (j < n && (ascii_class[s[j]] & C_L)) {
        while (j < n && s[j] < 0x80 && (ascii_class[s[j]] & C_L))
            j++;
        return j < n && s[j] >= 0x80 ? BAIL : (long)j;
    }
    /* \p{N}{1,max} */
    if (k & C_N) {
        j = i;
        while (j < n && (int)(j - i) < max_digits && s[j] < 0x80 && (ascii_class[s[j]] & C_N))
            j++;
        if ((int)(j - i) < max_digits && j < n && s[j] >= 0x80)
            return BAIL;
        return (long)j;
    }
    /* ` ?[^\s\p{L}\p{N}]+[\r\n]*` */
    j = c == ' ' ? i + 1 : i;
    if (j < n) {
        if (s[j] >= 0x80)
            return BAIL;
        if (!ascii_class[s[j]]) {
            while (j < n && s[j] < 0x80 && !ascii_class[s[j]])
                j++;
            if (j < n && s[j] >= 0x80)
                return BAIL;
            while (j < n && s[j] < 0x80 && (ascii_class[s[j]] & C_NL))
                j++;
            return (long)j;
        }
    }
    /* what is left starts with whitespace */
    if (!(k & C_S))
        return BAIL;
    size_t e = i, last_nl = (size_t)-1;
    while (e < n && s[e] < 0x80 && (ascii_class[s[e]] & C_S)) {
        if (ascii_class[s[e]] & C_NL)
            last_nl = e;
        e++;
    }
    if (e < n && s[e] >= 0x80)
        return BAIL;
    /* \s*[\r\n]+ : the whitespace up to and including the last newline */
    if (last_nl != (size_t)-1)
        return (long)last_nl + 1;
    /* \s+(?!\S) : all of it at the end, else all but the last */
    if (e == n)
        return (long)e;
    if (e - i >= 2)
        return (long)e - 1;
    /* \s+ */
    return (long)e;
}

/* ---- splitting ---- */

static void split_level(const cv_tok *t, tok_scratch *s, int level, const char *text, size_t len, tok_piece_fn fn,
                        cv_tok_ids *out)
{
    if (len == 0)
        return;
    if (level == t->n_re) {
        fn(t, s, text, len, out);
        return;
    }
    pcre2_match_data *md = s->md[level];
    if (!md)
        md = s->md[level] = pcre2_match_data_create(1, NULL);
    size_t pos = 0, gap = 0;
    int fast = level == 0 ? t->pre->fast_digits : 0;
    while (pos < len) {
        if (fast) {
            long e = fast_llama3((const unsigned char *)text, len, pos, fast);
            if (e != BAIL) {
                s->work++;
                split_level(t, s, level + 1, text + pos, (size_t)e - pos, fn, out);
                gap = pos = (size_t)e;
                continue;
            }
        }
        /* The text was validated once by the caller, so each match skips
         * PCRE2's own UTF check (which would make the loop quadratic). */
        int rc = pcre2_match(t->re[level], (PCRE2_SPTR)text, len, pos, PCRE2_NO_UTF_CHECK, md, s->mctx);
        s->work++;
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT && !s->jit) {
            /* A long run of one class outgrew PCRE2's 32 KiB default JIT
             * stack: give this call one that grows to 8 MiB and retry.
             * Made lazily because most texts never need it. */
            s->jit = pcre2_jit_stack_create(32 << 10, 8 << 20, NULL);
            s->mctx = pcre2_match_context_create(NULL);
            if (s->jit && s->mctx) {
                pcre2_jit_stack_assign(s->mctx, NULL, s->jit);
                continue;
            }
        }
        if (rc < 0)
            break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t ms = ov[0], me = ov[1];
        if (me == ms) {
            /* An empty match (none of our regexes has one, but the loop must
             * advance whatever the pattern): step one character. */
            pos = ms + 1;
            while (pos < len && ((unsigned char)text[pos] & 0xC0) == 0x80)
                pos++;
            continue;
        }
        if (ms > gap)
            split_level(t, s, level + 1, text + gap, ms - gap, fn, out);
        split_level(t, s, level + 1, text + ms, me - ms, fn, out);
        gap = pos = me;
    }
    if (gap < len)
        split_level(t, s, level + 1, text + gap, len - gap, fn, out);
}

void tok_pre_split(const cv_tok *t, tok_scratch *s, const char *text, size_t len, tok_piece_fn fn, cv_tok_ids *out)
{
    split_level(t, s, 0, text, len, fn, out);
}
