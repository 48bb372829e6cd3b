/* fuzz_toolcall_json_calls.c — libFuzzer target for the json_calls family of tool-call
 * parsers: random model output in random options and chunkings must give the
 * same result whole and in pieces, a well-formed event stream, and JSON-object
 * arguments (see toolcall_fuzz.h). Built by make fuzz. */
#include "toolcall_fuzz.h"

static const char *const formats[] = { "hermes", "longcat", "llama3_json", "mistral_v11", "mistral_pre_v11", "xlam", "granite", "granite_20b_fc", "phi4_mini", "firefunction_v2", "command_r7b", "command_r_plus", "internlm2", "apertus", "gigachat3", "jamba", "hunyuan_a13b", "minimax_m1", "apriel", "nemotron_nano_v2" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_one(formats, (int)(sizeof formats / sizeof formats[0]), data, size);
}
