/* fuzz_jinja.c — libFuzzer target for the chat-template interpreter: the
 * input is template source; it is compiled and, when it compiles, rendered
 * against a small fixed conversation under tight sandbox limits, so parser
 * and evaluator bugs (crashes, sanitizer reports, hangs past the limits)
 * surface. Seeds: the real templates in ../shared/testdata/templates. */
#include <stdint.h>
#include <stdlib.h>

#include "chat/jinja/jinja.h"

static json_t *vars;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!vars)
        vars = json_loads("{\"messages\":[{\"role\":\"system\",\"content\":\"S\"},{\"role\":\"user\",\"content\":\"hi\"},"
                          "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\","
                          "\"function\":{\"name\":\"f\",\"arguments\":{\"a\":[1,2.5,null]}}}]},"
                          "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}],"
                          "\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\"}}}],"
                          "\"add_generation_prompt\":true,\"bos_token\":\"<s>\",\"eos_token\":\"</s>\"}",
                          0, NULL);
    cv_jinja_tmpl *t = NULL;
    if (cv_jinja_compile((const char *)data, size, &t, NULL) != 0)
        return 0;
    cv_jinja_opts o = { .limits = { .max_steps = 20000, .max_output = 1u << 20, .max_memory = 32u << 20,
                                    .max_depth = 30, .max_ns = 1000000000ull },
                        .now = 1736159400 };
    cv_buf out = { 0 };
    cv_jinja_render(t, vars, &o, &out, NULL);
    cv_buf_free(&out);
    cv_jinja_free(t);
    return 0;
}
