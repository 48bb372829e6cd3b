/* fuzz_toolcall_python_calls.c — libFuzzer target for the python_calls family of tool-call
 * parsers: random model output in random options and chunkings must give the
 * same result whole and in pieces, a well-formed event stream, and JSON-object
 * arguments (see toolcall_fuzz.h, which lists the family). */
#include "toolcall_fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fz_one(fz_python_calls, data, size);
}
