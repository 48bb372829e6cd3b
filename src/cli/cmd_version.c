/* cmd_version.c — `corvid version`. */
#include <stdio.h>

#include "cli/cli.h"

#ifndef CV_VERSION
#define CV_VERSION "0.0.0"
#endif

static const cv_cli_spec spec = { .name = "version" };

int cv_cmd_version(int argc, char **argv)
{
    int n, st;
    if (!cv_cli_parse(&spec, NULL, argc, argv, &n, &st))
        return st;
    printf("corvid %s\n", CV_VERSION);
    return 0;
}
