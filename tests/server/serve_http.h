/* serve_http.h — for the tests that drive a `corvid serve` process over
 * HTTP with libcurl: one request, its status and its body parsed as JSON.
 * Test-only; static functions, one copy per test. */
#ifndef CV_TEST_SERVE_HTTP_H
#define CV_TEST_SERVE_HTTP_H

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>

#include "base/base.h"

static size_t serve_http_body(char *p, size_t sz, size_t n, void *ud)
{
    cv_buf_append(ud, p, sz * n);
    return sz * n;
}

/* A request to 127.0.0.1:port (POST of the JSON body when it is set, else
 * GET) with an optional bearer key; *status is the HTTP status (0: no
 * answer), raw (may be NULL) receives the body as sent, and the body
 * parsed as JSON is returned (NULL when it is not JSON). */
static json_t *serve_http(int port, const char *path, const char *body, const char *key, long *status, cv_buf *raw)
{
    char url[256], auth[300];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    CURL *c = curl_easy_init();
    cv_buf out = { 0 };
    struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
    h = curl_slist_append(h, "anthropic-version: 2023-06-01");
    if (key) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", key);
        h = curl_slist_append(h, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, serve_http_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);
    *status = 0;
    if (curl_easy_perform(c) == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, status);
    json_t *v = json_loadb(out.data ? out.data : "", out.len, 0, NULL);
    if (raw)
        cv_buf_append(raw, out.data ? out.data : "", out.len);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    cv_buf_free(&out);
    return v;
}

#endif
