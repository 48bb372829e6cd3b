/* cmd_version.c — `corvid version`. */
#include <stdio.h>

#include "cli/cli.h"

#ifndef CV_VERSION
#define CV_VERSION "0.0.0"
#endif

int cv_cmd_version(int argc, char **argv)
{
    printf("corvid %s\n", CV_VERSION);
    return 0;
}
