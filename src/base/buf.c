/* buf.c — cv_buf, the growable byte buffer used for every string corvid
 * builds (SSE frames, prompts, JSON). Invariant: when data != NULL, data[len]
 * is 0 and cap > len. Growth doubles, so appends are amortized O(1). */
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"

int cv_buf_try_reserve(cv_buf *b, size_t extra)
{
    if (extra > SIZE_MAX / 2 - b->len)
        return CV_ENOMEM;
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 64;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (!p)
        return CV_ENOMEM;
    if (!b->data)
        p[0] = 0;
    b->data = p;
    b->cap = cap;
    return 0;
}

void cv_buf_reserve(cv_buf *b, size_t extra)
{
    if (cv_buf_try_reserve(b, extra) != 0) {
        fprintf(stderr, "corvid: out of memory growing a buffer of %zu bytes by %zu\n", b->len, extra);
        abort();
    }
}

void cv_buf_append(cv_buf *b, const void *p, size_t n)
{
    cv_buf_reserve(b, n);
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
}

void cv_buf_vprintf(cv_buf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        cv_buf_append(b, small, (size_t)n);
        return;
    }
    cv_buf_reserve(b, (size_t)n);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void cv_buf_printf(cv_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cv_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

void cv_buf_put_json_chars(cv_buf *b, const char *s, size_t len, bool ascii)
{
    static const char hex[] = "0123456789abcdef";
    cv_buf_reserve(b, len);
    size_t i = 0;
    while (i < len) {
        /* Plain runs (most of a message or a schema: ASCII, and valid UTF-8
         * when it is written raw) are copied whole. */
        size_t run = i;
        while (i < len) {
            unsigned char c = (unsigned char)s[i];
            if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
                i++;
                continue;
            }
            uint32_t cp;
            int n = c >= 0x80 && !ascii ? cv_utf8_decode(s + i, len - i, &cp) : -1;
            if (n < 0)
                break;
            i += (size_t)n;
        }
        cv_buf_append(b, s + run, i - run);
        if (i >= len)
            break;
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            uint32_t cp;
            int n = cv_utf8_decode(s + i, len - i, &cp);
            if (n < 0)
                cv_buf_append(b, ascii ? "\\ufffd" : "\xEF\xBF\xBD", ascii ? 6 : 3);
            else if (cp >= 0x10000)
                cv_buf_printf(b, "\\u%04x\\u%04x", 0xD800 + ((cp - 0x10000) >> 10), 0xDC00 + ((cp - 0x10000) & 0x3FF));
            else
                cv_buf_printf(b, "\\u%04x", cp);
            i += n < 0 ? 1 : (size_t)n;
            continue;
        }
        switch (c) {
        case '"': cv_buf_append(b, "\\\"", 2); break;
        case '\\': cv_buf_append(b, "\\\\", 2); break;
        case '\n': cv_buf_append(b, "\\n", 2); break;
        case '\r': cv_buf_append(b, "\\r", 2); break;
        case '\t': cv_buf_append(b, "\\t", 2); break;
        case '\b': cv_buf_append(b, "\\b", 2); break;
        case '\f': cv_buf_append(b, "\\f", 2); break;
        default: {
            char u[6] = { '\\', 'u', '0', '0', hex[c >> 4], hex[c & 15] };
            cv_buf_append(b, u, 6);
        }
        }
        i++;
    }
}

void cv_buf_put_json_str(cv_buf *b, const char *s, size_t len)
{
    cv_buf_reserve(b, len + 2);
    cv_buf_putc(b, '"');
    cv_buf_put_json_chars(b, s, len, false);
    cv_buf_putc(b, '"');
}

void cv_buf_consume(cv_buf *b, size_t n)
{
    if (n >= b->len) {
        cv_buf_reset(b);
        return;
    }
    memmove(b->data, b->data + n, b->len - n);
    b->len -= n;
    b->data[b->len] = 0;
}

char *cv_buf_steal(cv_buf *b)
{
    char *p = b->data ? b->data : cv_xstrdup("");
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

void cv_buf_free(cv_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
