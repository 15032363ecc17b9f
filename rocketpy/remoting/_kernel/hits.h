/* hits.c: the answer cache's hit path for rocketpy.remoting._kernel (the HitPath type). */
#ifndef ROCKETPY_HITS_H
#define ROCKETPY_HITS_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* adds HitPath to the module: 0, or -1 (error set) */
int rk_hits_add_type(PyObject *module);

#define RK_HITPATH_DOC \
    "HitPath(entries, version_of, versions, max_request): the answer cache's hit path over its\n" \
    "entries dict; versions is None or has a generation that moves whenever any version_of\n" \
    "value may"

#define RK_HITPATH_RUN_DOC \
    "run(data, pos, most, room, max_frame_length, fd=-1): the cached answers of the whole\n" \
    "frames at data[pos:] up to the first that is not a hit, as (answers not sent, pos after\n" \
    "them, count, bytes sent), or None when the first is not; with fd >= 0 a run of the whole\n" \
    "of data is sent on that socket first, once"

#endif
