/* A commitlog entry framed in C: store/entry.py's `frame_into`, which is kept as its twin, used when
 * this module is not built, and given the same entries by tests/store/test_entry_c.py. Writes the
 * entry header, the batch with its baseOffset, batchLength and partitionLeaderEpoch rewritten as
 * Kafka's leader sets them, the topic name, and the CRC-32C of bytes [8, length) (the crc32c
 * package's, called from here), into the write buffer. Written in C because Python is the bound of
 * this step: once per partition of every produce, about 0.75 us in Python, a slice copy, a pack of
 * sixteen fields, a CRC call and a pack (docs/notes/produce-path.md). Built by the project's setup
 * (setup.py, setuptools from PyPI); optional: without a compiler the Python framing runs. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

#define HEADER_SIZE 60
#define CRC_FROM 8
#define MAGIC_DATA 0xC1
#define REWRITTEN 16 /* the batch's baseOffset, batchLength, partitionLeaderEpoch */

static PyObject *crc32c_fn; /* crc32c.crc32c */

static void put_be(unsigned char *b, unsigned long long v, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--) {
        b[i] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
}

static PyObject *init(PyObject *self, PyObject *fn)
{
    (void)self;
    Py_XSETREF(crc32c_fn, Py_NewRef(fn));
    Py_RETURN_NONE;
}

/* frame_into(buffer, at, batch, topic, topic_id, partition, base_offset, record_count, store_ts,
 * max_ts, leader_epoch, flags): the entry, HEADER_SIZE + len(batch) + len(topic) bytes at `at`. */
static PyObject *frame_into(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 12) {
        PyErr_SetString(PyExc_TypeError, "frame_into takes 12 arguments");
        return NULL;
    }
    long long n[8]; /* at, partition, base_offset, record_count, store_ts, max_ts, leader_epoch, flags */
    static const int which[8] = {1, 5, 6, 7, 8, 9, 10, 11};
    for (int i = 0; i < 8; i++) {
        n[i] = PyLong_AsLongLong(args[which[i]]);
        if (n[i] == -1 && PyErr_Occurred())
            return NULL;
    }
    long long at = n[0];
    Py_buffer out, batch, topic, topic_id;
    if (PyObject_GetBuffer(args[0], &out, PyBUF_WRITABLE) < 0)
        return NULL;
    PyObject *result = NULL;
    int have_batch = 0, have_topic = 0, have_id = 0;
    if (PyObject_GetBuffer(args[2], &batch, PyBUF_SIMPLE) < 0)
        goto done;
    have_batch = 1;
    if (PyObject_GetBuffer(args[3], &topic, PyBUF_SIMPLE) < 0)
        goto done;
    have_topic = 1;
    if (PyObject_GetBuffer(args[4], &topic_id, PyBUF_SIMPLE) < 0)
        goto done;
    have_id = 1;
    Py_ssize_t length = HEADER_SIZE + batch.len + topic.len;
    if (topic_id.len != 16 || batch.len < REWRITTEN || topic.len > 0xFFFF || length > 0xFFFFFFFFLL) {
        PyErr_SetString(PyExc_ValueError, "a topic id of 16 bytes, a batch of at least 16, a topic of at most 65535");
        goto done;
    }
    if (at < 0 || at > out.len || length > out.len - at) {
        PyErr_SetString(PyExc_ValueError, "the entry does not fit the buffer");
        goto done;
    }
    unsigned char *e = (unsigned char *)out.buf + at;
    memcpy(e + HEADER_SIZE + REWRITTEN, (const char *)batch.buf + REWRITTEN, batch.len - REWRITTEN);
    memcpy(e + HEADER_SIZE + batch.len, topic.buf, topic.len);
    put_be(e + 0, (unsigned long long)length, 4);
    e[8] = MAGIC_DATA;
    e[9] = (unsigned char)n[7];
    put_be(e + 10, (unsigned long long)topic.len, 2);
    memcpy(e + 12, topic_id.buf, 16);
    put_be(e + 28, (unsigned long long)n[1], 4);
    put_be(e + 32, (unsigned long long)n[2], 8);
    put_be(e + 40, (unsigned long long)n[3], 4);
    put_be(e + 44, (unsigned long long)n[4], 8);
    put_be(e + 52, (unsigned long long)n[5], 8);
    put_be(e + 60, (unsigned long long)n[2], 8);             /* the batch's baseOffset */
    put_be(e + 68, (unsigned long long)(batch.len - 12), 4); /* batchLength */
    put_be(e + 72, (unsigned long long)n[6], 4);             /* partitionLeaderEpoch */
    PyObject *area = PyMemoryView_FromMemory((char *)e + CRC_FROM, length - CRC_FROM, PyBUF_READ);
    if (area == NULL)
        goto done;
    PyObject *crc = PyObject_CallOneArg(crc32c_fn, area);
    Py_DECREF(area);
    if (crc == NULL)
        goto done;
    unsigned long value = PyLong_AsUnsignedLong(crc);
    Py_DECREF(crc);
    if (value == (unsigned long)-1 && PyErr_Occurred())
        goto done;
    put_be(e + 4, value, 4);
    result = Py_NewRef(Py_None);
done:
    if (have_id)
        PyBuffer_Release(&topic_id);
    if (have_topic)
        PyBuffer_Release(&topic);
    if (have_batch)
        PyBuffer_Release(&batch);
    PyBuffer_Release(&out);
    return result;
}

static PyMethodDef methods[] = {
    {"init", init, METH_O, "init(crc32c.crc32c): the CRC frame_into calls."},
    {"frame_into", (PyCFunction)(void (*)(void))frame_into, METH_FASTCALL,
     "frame_into(buffer, at, batch, topic, topic_id, partition, base_offset, record_count, store_ts, max_ts, "
     "leader_epoch, flags): a commitlog entry written into buffer at `at`."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_entry", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__entry(void)
{
    return PyModule_Create(&module);
}
