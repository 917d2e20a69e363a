/* The key index's per-record walk in C: (offset delta, key) of each record of a batch's records area
 * that has a key. store/records.py's walk_keys is the same walk in Python, kept, and used when this
 * module is not built; tests/store/test_keywalk.py checks that both give the same answer on the same
 * batches. Written in C because Python is the bound of this loop: 0.33 us a keyless record, and on 2
 * cores the key worker walking a backlog just produced took 8-10% of a librdkafka consumer's rate,
 * even under SCHED_IDLE (docs/notes/produce-path.md). Built by the project's setup (setup.py,
 * setuptools from PyPI); optional: without a compiler, Gregor runs the Python walk. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* A zigzag varint of at most `most` bytes at *pos, below `end`: 0, or -1 when it runs past `end`
 * or is longer. */
static int varint(const unsigned char *b, Py_ssize_t end, Py_ssize_t *pos, int most, long long *out)
{
    unsigned long long v = 0;
    for (int i = 0, shift = 0; i < most; i++, shift += 7) {
        if (*pos >= end)
            return -1;
        unsigned char c = b[(*pos)++];
        v |= (unsigned long long)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *out = (long long)(v >> 1) ^ -(long long)(v & 1);
            return 0;
        }
    }
    return -1;
}

static PyObject *record_keys(PyObject *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos, count;
    if (!PyArg_ParseTuple(args, "y*nn", &view, &pos, &count))
        return NULL;
    const unsigned char *b = view.buf;
    Py_ssize_t n = view.len;
    PyObject *out = PyList_New(0);
    if (out == NULL)
        goto fail;
    if (pos < 0 || pos > n)
        goto malformed;
    for (Py_ssize_t i = 0; i < count; i++) {
        long long length, ignored, delta, key_length;
        if (varint(b, n, &pos, 5, &length) < 0 || length < 0 || length > n - pos)
            goto malformed;
        Py_ssize_t end = pos + (Py_ssize_t)length;
        pos += 1; /* attributes */
        if (varint(b, end, &pos, 10, &ignored) < 0 /* timestamp delta */
            || varint(b, end, &pos, 5, &delta) < 0 || varint(b, end, &pos, 5, &key_length) < 0)
            goto malformed;
        if (key_length >= 0) {
            if (key_length > end - pos)
                goto malformed;
            PyObject *item = Py_BuildValue("(Ly#)", delta, (const char *)b + pos, (Py_ssize_t)key_length);
            if (item == NULL)
                goto fail;
            int failed = PyList_Append(out, item);
            Py_DECREF(item);
            if (failed)
                goto fail;
        }
        pos = end;
    }
    PyBuffer_Release(&view);
    return out;
malformed:
    PyErr_SetString(PyExc_ValueError, "a record runs past the end of its batch");
fail:
    Py_XDECREF(out);
    PyBuffer_Release(&view);
    return NULL;
}

static PyMethodDef methods[] = {
    {"record_keys", record_keys, METH_VARARGS,
     "record_keys(records, pos, count): [(offset delta, key)] of the records with a key, from `pos`."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "store._keywalk", NULL, -1, methods};

PyMODINIT_FUNC PyInit__keywalk(void) { return PyModule_Create(&module); }
