/* fuzz_toolcall_channels.c — libFuzzer target for the channels family of tool-call
 * parsers: random model output in random options and chunkings must give the
 * same result whole and in pieces, a well-formed event stream, and JSON-object
 * arguments (see toolcall_fuzz.h). Built by make fuzz. */
#include "toolcall_fuzz.h"

static const char *const formats[] = { "gpt_oss_harmony", "functionary_v3_2", "kimi_k2", "deepseek_v3", "deepseek_v31", "gemma4", "plain_content" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_one(formats, (int)(sizeof formats / sizeof formats[0]), data, size);
}
