/* cmd_info.c — `onnxtrain info MODEL`: placeholder until the importer lands. */
#include <stdio.h>

#include "cli.h"

int ot_cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fputs("onnxtrain info: not implemented yet\n", stderr);
    return 6;
}
