/* A produced batch's header checks in C: protocol/record_batch.py's `_validate` for a batch that
 * passes them, which is kept as this loop's twin: where this finds anything wrong it answers None and
 * the Python checks run, so a refused batch gets their error, word for word
 * (tests/protocol/test_record_batch_c.py gives both the same batches, good and bad). Written in C
 * because Python is the bound here: the checks ran once per partition of every produce, 0.8 us of a
 * partition's 6.5 (docs/notes/produce-path.md). The CRC-32C is the crc32c package's, called from here.
 * Built by the project's setup (setup.py, setuptools from PyPI); optional: without a compiler the
 * Python checks run alone. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#define HEADER_SIZE 61
#define LOG_OVERHEAD 12
#define CRC_START 21
#define CONTROL_BIT 0x20

static PyObject *header_type; /* protocol.record_batch.BatchHeader */
static PyObject *crc32c_fn;   /* crc32c.crc32c */

static long long be(const unsigned char *b, int bytes)
{
    unsigned long long v = 0;
    for (int i = 0; i < bytes; i++)
        v = (v << 8) | b[i];
    int shift = 64 - 8 * bytes;
    return shift ? (long long)(v << shift) >> shift : (long long)v; /* sign-extended */
}

/* init(BatchHeader, crc32c.crc32c): what the checks build and call. */
static PyObject *init(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *cls, *fn;
    if (!PyArg_ParseTuple(args, "O!O", &PyType_Type, &cls, &fn))
        return NULL;
    Py_XSETREF(header_type, Py_NewRef(cls));
    Py_XSETREF(crc32c_fn, Py_NewRef(fn));
    Py_RETURN_NONE;
}

/* header(records, size, max_message_bytes, check_crc) -> BatchHeader, or None: `records` (at least
 * its first HEADER_SIZE bytes; all `size` of them when check_crc) fails a check, or this cannot tell. */
static PyObject *header(PyObject *self, PyObject *args)
{
    (void)self;
    Py_buffer view;
    Py_ssize_t size;
    long long max_bytes;
    int check_crc;
    if (!PyArg_ParseTuple(args, "y*nLp", &view, &size, &max_bytes, &check_crc))
        return NULL;
    PyObject *out = NULL;
    const unsigned char *b = view.buf;
    if (header_type == NULL || view.len < HEADER_SIZE || size < HEADER_SIZE || (check_crc && view.len != size))
        goto none;
    long long f[13];
    static const int widths[13] = {8, 4, 4, 1, 4, 2, 4, 8, 8, 8, 2, 4, 4};
    for (int i = 0, at = 0; i < 13; at += widths[i], i++)
        f[i] = be(b + at, widths[i]);
    f[4] = (long long)(unsigned int)f[4]; /* the CRC is unsigned (struct's "I") */
    long long base_offset = f[0], length = f[1], magic = f[3], crc = f[4], attributes = f[5];
    long long last_offset_delta = f[6], producer_id = f[9], base_sequence = f[11], count = f[12];
    if (magic != 2 || length + LOG_OVERHEAD != size || size > max_bytes || base_offset != 0 || count <= 0
        || last_offset_delta + 1 != count || (attributes & CONTROL_BIT) || (producer_id >= 0 && base_sequence < 0))
        goto none;
    if (check_crc) {
        PyObject *area = PyMemoryView_FromMemory((char *)b + CRC_START, size - CRC_START, PyBUF_READ);
        if (area == NULL)
            goto done;
        PyObject *got = PyObject_CallOneArg(crc32c_fn, area);
        Py_DECREF(area);
        if (got == NULL)
            goto done;
        unsigned long long value = PyLong_AsUnsignedLongLong(got);
        Py_DECREF(got);
        if (value == (unsigned long long)-1 && PyErr_Occurred())
            goto done;
        if (value != (unsigned long long)crc)
            goto none;
    }
    out = ((PyTypeObject *)header_type)->tp_alloc((PyTypeObject *)header_type, 13);
    if (out == NULL)
        goto done;
    for (int i = 0; i < 13; i++) {
        PyObject *item = PyLong_FromLongLong(f[i]);
        if (item == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyTuple_SET_ITEM(out, i, item);
    }
    goto done;
none:
    out = Py_NewRef(Py_None);
done:
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef methods[] = {
    {"init", init, METH_VARARGS, "init(BatchHeader, crc32c.crc32c): what header() builds and calls."},
    {"header", header, METH_VARARGS,
     "header(records, size, max_message_bytes, check_crc) -> BatchHeader of a batch that passes a produced "
     "batch's checks, else None (the Python checks then say why)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_record_batch", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__record_batch(void)
{
    return PyModule_Create(&module);
}
