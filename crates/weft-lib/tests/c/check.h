/*
 * The C tests' checks: CHECK(cond, fmt, ...) stops the program with exit status 1, naming
 * the file, the line, the condition and libweft's last error; OK(call) checks that a call
 * returned no negative errno.
 */
#ifndef WEFT_TEST_CHECK_H
#define WEFT_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include "weft.h"

#define CHECK(cond, ...)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);      \
            fprintf(stderr, __VA_ARGS__);                                                 \
            fprintf(stderr, " (last error: %s)\n", weft_strerror());                      \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

#define OK(call) CHECK((call) >= 0, "%s", #call)

#endif
