/* hits.c: the answer cache's hit path for rocketpy.remoting._kernel (answer_hits). */
#ifndef ROCKETPY_HITS_H
#define ROCKETPY_HITS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

PyObject *rk_answer_hits(PyObject *self, PyObject *const *args, Py_ssize_t nargs);

#define RK_ANSWER_HITS_DOC \
    "answer_hits(data, pos, most, room, max_frame_length, max_request, entries, version_of):\n" \
    "the cached answers of the whole frames at data[pos:] up to the first that is not a hit,\n" \
    "as (answers, pos after them, count), or None when the first is not"

#endif
