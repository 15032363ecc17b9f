/* The language table's set-up (languages.h), compiled into rocketpy.remoting._kernel and
 * rocketpy.capture._native alike (setup.py lists it for both). */
#include "languages.h"

static void free_table(rk_language_t *t, size_t n) {
    for (size_t i = 0; i < n; i++)
        PyMem_RawFree((void *)t[i].name);
    PyMem_RawFree(t);
}

int rk_languages_set(rk_languages_t *langs, PyObject *by_name, PyObject **objects) {
    if (!PyDict_Check(by_name)) {
        PyErr_SetString(PyExc_TypeError, "languages: expected a dict {name: LanguageCode}");
        return -1;
    }
    Py_ssize_t pos = 0, size = PyDict_Size(by_name);
    rk_language_t *t = PyMem_RawCalloc((size_t)size + 1, sizeof(rk_language_t));
    if (!t) {
        PyErr_NoMemory();
        return -1;
    }
    size_t n = 0;
    PyObject *key, *value;
    /* str keys and int values only: reading them runs no Python code (an __index__ could
     * change the dict while it is walked), so the dict holds still and n stays below size */
    while (n < (size_t)size && PyDict_Next(by_name, &pos, &key, &value)) {
        if (!PyUnicode_Check(key) || !PyLong_Check(value)) {
            PyErr_SetString(PyExc_TypeError, "languages: expected {str: int}");
            goto fail;
        }
        Py_ssize_t len;
        const char *s = PyUnicode_AsUTF8AndSize(key, &len);
        long v = s ? PyLong_AsLong(value) : -1;
        if (!s || (v == -1 && PyErr_Occurred()))
            goto fail;
        if (v < 0 || v >= RK_MAX_LANGUAGES) {
            PyErr_Format(PyExc_ValueError, "language %s = %ld is outside 0..%d", s, v,
                         RK_MAX_LANGUAGES - 1);
            goto fail;
        }
        char *copy = PyMem_RawMalloc((size_t)len + 1);
        if (!copy) {
            PyErr_NoMemory();
            goto fail;
        }
        memcpy(copy, s, (size_t)len + 1);
        t[n].name = copy;
        t[n].len = (size_t)len;
        t[n].value = (int32_t)v;
        n++;
    }
    if (objects) {   /* the same walk, in the same order: entry i is t[i] */
        pos = 0;
        for (size_t i = 0; i < n && PyDict_Next(by_name, &pos, &key, &value); i++) {
            Py_INCREF(value);
            Py_XSETREF(objects[t[i].value], value);
        }
    }
    free_table(langs->table, langs->n);
    langs->table = t;
    langs->n = n;
    return 0;
fail:
    free_table(t, n);
    return -1;
}
