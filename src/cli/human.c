/* human.c — figures as a person reads them in the cli's tables and progress
 * lines: decimal units, as disk vendors and Hugging Face print file sizes. */
#include <stdio.h>

#include "cli/cli_int.h"

void cv_human_bytes(int64_t b, char *out, size_t n)
{
    const char *u[] = { "B", "kB", "MB", "GB", "TB" };
    double v = (double)b;
    int i = 0;
    while (v >= 1000 && i < 4)
        v /= 1000, i++;
    snprintf(out, n, i ? "%.1f %s" : "%.0f %s", v, u[i]);
}
