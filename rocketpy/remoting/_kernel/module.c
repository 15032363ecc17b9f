/* rocketpy.remoting._kernel: the header kernel (kernel.h) for the Python codec.
 *
 * read_header builds the RemotingCommand of a usual header, request_key and peek read a whole
 * request frame for the answer cache and the overload answer; each answers None for anything the
 * kernel leaves to the Python codec (rocketpy.remoting.frame, rocketpy.remoting.layout), which
 * then reads it as before.  HitPath (hits.c) is the answer cache's hit path. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "hits.h"
#include "kernel.h"
#include "cost_module.h"
#include "languages.h"

static PyObject *COMMAND;                      /* RemotingCommand */
static PyObject *LANGUAGE_OBJECTS[RK_MAX_LANGUAGES];  /* LanguageCode members by value */
static rk_languages_t LANGUAGES;
static PyObject *SERIALIZE[2];                 /* the ints JSON, ROCKETMQ */
static rk_header_t SCRATCH;                    /* used with the GIL held only */
/* past this, the scratch's buffers are given back after the header (a stranger's 16 MiB header
 * is not kept for the life of the process) */
#define KEEP_TEXT (1 << 20)
#define KEEP_EXT 4096

static PyObject *configure(PyObject *self, PyObject *args) {
    PyObject *command, *languages;
    if (!PyArg_ParseTuple(args, "OO!", &command, &PyDict_Type, &languages))
        return NULL;
    if (rk_languages_set(&LANGUAGES, languages, LANGUAGE_OBJECTS) < 0)
        return NULL;
    Py_INCREF(command);
    Py_XSETREF(COMMAND, command);
    Py_RETURN_NONE;
}

static PyObject *text(str_t s) {
    return s.p ? PyUnicode_DecodeUTF8(s.p, s.n, NULL) : Py_NewRef(Py_None);
}

/* 1 read, 0 not the kernel's, -1 error (set) */
static int read_into(int stype, const uint8_t *p, size_t n, rk_header_t *h) {
    int r = stype == SER_JSON ? rk_read_json(p, n, h, LANGUAGES.table, LANGUAGES.n)
          : stype == SER_ROCKETMQ ? rk_read_rocketmq(p, n, h) : 0;
    if (r < 0) {
        PyErr_NoMemory();
        return -1;
    }
    return r && !h->raw_controls;      /* the codec remembers how such strings were written */
}

static void trim(rk_header_t *h) {
    if (h->text_cap > KEEP_TEXT || h->cap_ext > KEEP_EXT)
        rk_header_free(h);
}

static PyObject *command_of(int stype, rk_header_t *h) {
    PyObject *args[10] = {NULL};
    PyObject *out = NULL;
    args[0] = PyLong_FromLong(h->code);
    args[1] = stype == SER_JSON ? Py_NewRef(LANGUAGE_OBJECTS[h->language])
                                : PyLong_FromLong(h->language);
    args[2] = PyLong_FromLong(h->version);
    args[3] = PyLong_FromLong(h->opaque);
    args[4] = PyLong_FromLong(h->flag);
    args[5] = text(h->remark);
    args[6] = h->has_ext ? PyDict_New() : Py_NewRef(Py_None);
    args[7] = Py_NewRef(Py_None);
    args[8] = Py_NewRef(SERIALIZE[stype]);
    args[9] = Py_NewRef(Py_None);
    for (int i = 0; i < 10; i++)
        if (!args[i])
            goto done;
    for (size_t i = 0; i < h->n_ext; i++) {
        PyObject *k = text(h->ext[i].key), *v = k ? text(h->ext[i].value) : NULL;
        int bad = !v || PyDict_SetItem(args[6], k, v) < 0;
        Py_XDECREF(k);
        Py_XDECREF(v);
        if (bad)
            goto done;
    }
    out = PyObject_Vectorcall(COMMAND, args, 10, NULL);
done:
    for (int i = 0; i < 10; i++)
        Py_XDECREF(args[i]);
    if (!out && PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
        PyErr_Clear();                 /* (never: the kernel checked) the codec's to judge */
        Py_RETURN_NONE;
    }
    return out;
}

static PyObject *read_header(PyObject *self, PyObject *args) {
    int stype;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "iy*", &stype, &b))
        return NULL;
    PyObject *out = NULL;
    if (!COMMAND) {
        PyErr_SetString(PyExc_RuntimeError, "rocketpy.remoting._kernel is not configured");
    } else {
        int r = read_into(stype, b.buf, (size_t)b.len, &SCRATCH);
        out = r < 0 ? NULL : r ? command_of(stype, &SCRATCH) : Py_NewRef(Py_None);
        trim(&SCRATCH);
    }
    PyBuffer_Release(&b);
    return out;
}

/* a whole frame (decode_frame): its command with the body, or None for anything irregular (a
 * length that is not the frame's, over the limit, a header past the frame, an unusual header):
 * the Python codec then reads it and names what is wrong */
static PyObject *read_frame(PyObject *self, PyObject *args) {
    Py_buffer b;
    long long max_frame_length;
    if (!PyArg_ParseTuple(args, "y*L", &b, &max_frame_length))
        return NULL;
    const uint8_t *f = b.buf;
    size_t n = (size_t)b.len;
    PyObject *out = Py_NewRef(Py_None);
    if (n >= PREFIX_SIZE && (size_t)rk_frame_total(f) == n && (long long)n <= max_frame_length) {
        int stype = rk_frame_type(f);
        size_t hlen = (size_t)rk_frame_header_length(f);
        int r = hlen <= n - PREFIX_SIZE ? read_into(stype, f + PREFIX_SIZE, hlen, &SCRATCH) : 0;
        if (r) {
            Py_DECREF(out);
            out = r < 0 ? NULL : command_of(stype, &SCRATCH);
        }
        size_t body = n - PREFIX_SIZE - hlen;
        if (r > 0 && out && out != Py_None && body) {
            PyObject *bytes = PyBytes_FromStringAndSize((const char *)f + PREFIX_SIZE + hlen, (Py_ssize_t)body);
            if (!bytes || PyObject_SetAttrString(out, "body", bytes) < 0)
                Py_CLEAR(out);
            Py_XDECREF(bytes);
        }
        trim(&SCRATCH);
    }
    PyBuffer_Release(&b);
    return out;
}

/* the header of a whole frame, read: 1, 0 not the kernel's (or not all there), -1 error */
static int frame_header(const uint8_t *f, size_t n, int *stype, size_t *hlen) {
    if (n < PREFIX_SIZE)
        return 0;
    *stype = rk_frame_type(f);
    *hlen = (size_t)rk_frame_header_length(f);
    if (*hlen > n - PREFIX_SIZE)
        return 0;
    return read_into(*stype, f + PREFIX_SIZE, *hlen, &SCRATCH);
}

static PyObject *request_key(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    const uint8_t *f = b.buf;
    int stype;
    size_t hlen;
    PyObject *out = NULL;
    int r = frame_header(f, (size_t)b.len, &stype, &hlen);
    if (r > 0 && stype == SER_JSON && !SCRATCH.opaque_end)
        r = 0;                         /* no opaque written: nothing to cut out */
    if (r > 0) {
        size_t at = PREFIX_SIZE + SCRATCH.opaque_at, end = PREFIX_SIZE + SCRATCH.opaque_end;
        PyObject *opaque = stype == SER_JSON
            ? PyBytes_FromStringAndSize((const char *)f + at, (Py_ssize_t)(end - at))
            : PyLong_FromLong(SCRATCH.opaque);
        /* "-0" is not how the opaque's number is written back */
        if (opaque && stype == SER_JSON && end - at == 2 && f[at] == '-') {
            Py_DECREF(opaque);
            r = 0;
        } else if (opaque) {
            out = Py_BuildValue("((y#y#)N)", (const char *)f + PREFIX_SIZE, (Py_ssize_t)(at - PREFIX_SIZE),
                                (const char *)f + end, (Py_ssize_t)((size_t)b.len - end), opaque);
        }
    }
    PyBuffer_Release(&b);
    trim(&SCRATCH);
    if (r < 0)
        return NULL;
    return r ? out : Py_NewRef(Py_None);
}

static PyObject *peek(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    int stype;
    size_t hlen;
    int r = frame_header(b.buf, (size_t)b.len, &stype, &hlen);
    PyBuffer_Release(&b);
    int written = SCRATCH.opaque_end != 0;
    int32_t code = SCRATCH.code, opaque = SCRATCH.opaque, flag = SCRATCH.flag;
    trim(&SCRATCH);
    if (r < 0)
        return NULL;
    if (!r || !written)                /* no opaque written: nothing to answer to */
        Py_RETURN_NONE;
    return Py_BuildValue("(iii)", code, opaque, flag);
}

static PyObject *repeated_keys(PyObject *self, PyObject *arg) {
    Py_buffer b;
    if (PyObject_GetBuffer(arg, &b, PyBUF_SIMPLE) < 0)
        return NULL;
    int r;
    Py_BEGIN_ALLOW_THREADS
    r = rk_repeated_keys(b.buf, (size_t)b.len);
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    if (r == RK_KEYS_NO_MEMORY)
        return PyErr_NoMemory();
    if (r == RK_KEYS_UNKNOWN)
        Py_RETURN_NONE;
    return PyBool_FromLong(r);
}

static PyMethodDef METHODS[] = {
    {"configure", configure, METH_VARARGS,
     "configure(command_class, {language name: LanguageCode}): what read_header builds"},
    {"read_header", read_header, METH_VARARGS,
     "read_header(serialize_type, header): the RemotingCommand of a usual header, or None"},
    {"read_frame", read_frame, METH_VARARGS,
     "read_frame(frame, max_frame_length): the RemotingCommand of a whole usual frame, or None"},
    {"request_key", request_key, METH_O,
     "request_key(frame): ((header before the opaque, frame after it), opaque), or None"},
    {"peek", peek, METH_O,
     "peek(frame): (code, opaque, flag) of a usual header that writes its opaque, or None"},
    {"repeated_keys", repeated_keys, METH_O,
     "repeated_keys(json bytes): whether an object writes a key twice (bytes compared), or None"},
    COST_METHODS
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "rocketpy.remoting._kernel",
                                    "The compiled header kernel (kernel.h).", -1, METHODS};

PyMODINIT_FUNC PyInit__kernel(void) {
    uint64_t key[3];
    PyObject *os = PyImport_ImportModule("os");
    PyObject *random = os ? PyObject_CallMethod(os, "urandom", "i", (int)sizeof key) : NULL;
    Py_XDECREF(os);
    if (!random)
        return NULL;
    memcpy(key, PyBytes_AS_STRING(random), sizeof key);
    Py_DECREF(random);
    for (int i = 0; i < 3; i++)
        RK_HASH_KEY[i] = key[i] | 1;
    SERIALIZE[0] = PyLong_FromLong(SER_JSON);
    SERIALIZE[1] = PyLong_FromLong(SER_ROCKETMQ);
    if (!SERIALIZE[0] || !SERIALIZE[1])
        return NULL;
    PyObject *module = PyModule_Create(&MODULE);
    if (module && rk_hits_add_type(module) < 0)
        Py_CLEAR(module);
    return module;
}
