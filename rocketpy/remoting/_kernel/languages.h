/* The kernel's language table (name -> LanguageCode value, which rk_read_json takes) built from
 * the codec's {name: LanguageCode} dict: one set-up for both modules that link the kernel, the
 * codec's (module.c) and the capture decoder's (rocketpy/capture/_native/header.c). */
#ifndef ROCKETPY_KERNEL_LANGUAGES_H
#define ROCKETPY_KERNEL_LANGUAGES_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "kernel.h"

/* values a language may take (a LanguageCode is one byte of the binary header; Java's run 0..13) */
#define RK_MAX_LANGUAGES 128

typedef struct {
    rk_language_t *table;
    size_t n;
} rk_languages_t;

/* Replace *langs with the table of by_name ({str: int}); objects, if not NULL, is an array of
 * RK_MAX_LANGUAGES slots that gets a new reference to each value at its index. 0, or -1 with a
 * Python exception set and *langs unchanged. */
int rk_languages_set(rk_languages_t *langs, PyObject *by_name, PyObject **objects);

#endif
