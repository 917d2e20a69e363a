/* The answers of Fetch and Produce encoded in C, each the twin of a Python encoder that is kept, used
 * when this module is not built, and checked against this one on the same answers (both against
 * kafka-python's encoder too):
 * - fetch_topics: a FetchResponse's topics and partitions, protocol/fetch_response.py's `_topics`
 *   (tests/protocol/test_fetch_response.py). Same output: a list of buffers, the fixed fields as bytes
 *   and each partition's batches as the objects handed in (memoryviews over the commitlog), never copied.
 * - produce: a ProduceResponse of partitions without an error message (nearly all),
 *   protocol/produce_response.py's encode_produce_response (tests/protocol/test_produce_response.py);
 *   None for any other, which the Python encoder then answers.
 * Written in C because Python is the bound of these loops: once per partition of every fetch or
 * produce, 0.7 us (fetch) and 0.3 us (produce) a partition (docs/notes/produce-path.md). Built by the
 * project's setup (setup.py, setuptools from PyPI); optional: without a compiler the Python runs. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

typedef struct {
    unsigned char *buf;
    Py_ssize_t len, cap;
} Head;

static int grow(Head *h, Py_ssize_t more)
{
    if (h->len + more <= h->cap)
        return 0;
    Py_ssize_t cap = h->cap ? h->cap : 256;
    while (cap < h->len + more)
        cap *= 2;
    unsigned char *buf = PyMem_Realloc(h->buf, cap);
    if (buf == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    h->buf = buf;
    h->cap = cap;
    return 0;
}

static int put(Head *h, const void *data, Py_ssize_t n)
{
    if (grow(h, n) < 0)
        return -1;
    memcpy(h->buf + h->len, data, n);
    h->len += n;
    return 0;
}

static int put_be(Head *h, unsigned long long v, int bytes)
{
    if (grow(h, bytes) < 0)
        return -1;
    for (int i = bytes - 1; i >= 0; i--) {
        h->buf[h->len + i] = (unsigned char)(v & 0xFF);
        v >>= 8;
    }
    h->len += bytes;
    return 0;
}

static int put_uvarint(Head *h, unsigned long long v)
{
    if (grow(h, 10) < 0)
        return -1;
    while (v > 0x7F) {
        h->buf[h->len++] = (unsigned char)((v & 0x7F) | 0x80);
        v >>= 7;
    }
    h->buf[h->len++] = (unsigned char)v;
    return 0;
}

/* An int field: in range for its width, else an error (OverflowError), as struct.pack raises. */
static int put_int(Head *h, PyObject *o, int bytes)
{
    long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred())
        return -1;
    long long lo = bytes == 8 ? LLONG_MIN : -(1LL << (bytes * 8 - 1));
    long long hi = bytes == 8 ? LLONG_MAX : (1LL << (bytes * 8 - 1)) - 1;
    if (v < lo || v > hi) {
        PyErr_Format(PyExc_OverflowError, "%lld does not fit %d bytes", v, bytes);
        return -1;
    }
    return put_be(h, (unsigned long long)v, bytes);
}

static int put_count(Head *h, Py_ssize_t n, int flexible)
{
    return flexible ? put_uvarint(h, (unsigned long long)n + 1) : put_be(h, (unsigned long long)n, 4);
}

static int put_string(Head *h, PyObject *s, int flexible)
{
    if (s == Py_None)
        return flexible ? put_uvarint(h, 0) : put_be(h, 0xFFFF, 2);
    Py_ssize_t n;
    const char *raw = PyUnicode_AsUTF8AndSize(s, &n);
    if (raw == NULL)
        return -1;
    if (flexible ? put_uvarint(h, (unsigned long long)n + 1) : put_be(h, (unsigned long long)n, 2))
        return -1;
    return put(h, raw, n);
}

/* The pending fixed fields as one bytes object at the end of `out`; the head starts again empty. */
static int flush(Head *h, PyObject *out)
{
    PyObject *b = PyBytes_FromStringAndSize((const char *)h->buf, h->len);
    if (b == NULL)
        return -1;
    int failed = PyList_Append(out, b);
    Py_DECREF(b);
    h->len = 0;
    return failed;
}

static int put_partition(Head *h, PyObject *out, PyObject *p, int version)
{
    int flexible = version >= 12;
    if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) < 9) {
        PyErr_SetString(PyExc_TypeError, "a partition's answer is a PartitionResult");
        return -1;
    }
    PyObject *aborted = PyTuple_GET_ITEM(p, 5), *records = PyTuple_GET_ITEM(p, 7);
    PyObject *leader = PyTuple_GET_ITEM(p, 8);
    if (put_int(h, PyTuple_GET_ITEM(p, 0), 4) || put_int(h, PyTuple_GET_ITEM(p, 1), 2)
        || put_int(h, PyTuple_GET_ITEM(p, 2), 8))
        return -1;
    if (version >= 4) {
        if (put_int(h, PyTuple_GET_ITEM(p, 3), 8))
            return -1;
        if (version >= 5 && put_int(h, PyTuple_GET_ITEM(p, 4), 8))
            return -1;
        if (aborted == Py_None) {
            if (flexible ? put_uvarint(h, 0) : put_be(h, 0xFFFFFFFFULL, 4))
                return -1;
        } else {
            PyObject *seq = PySequence_Fast(aborted, "aborted transactions are a list");
            if (seq == NULL)
                return -1;
            Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
            int failed = put_count(h, n, flexible);
            for (Py_ssize_t i = 0; i < n && !failed; i++) {
                PyObject *a = PySequence_Fast_GET_ITEM(seq, i);
                if (!PyTuple_Check(a) || PyTuple_GET_SIZE(a) != 2) {
                    PyErr_SetString(PyExc_TypeError, "an aborted transaction is (producer_id, first_offset)");
                    failed = -1;
                    break;
                }
                failed = put_int(h, PyTuple_GET_ITEM(a, 0), 8) || put_int(h, PyTuple_GET_ITEM(a, 1), 8)
                         || (flexible && put_uvarint(h, 0));
            }
            Py_DECREF(seq);
            if (failed)
                return -1;
        }
        if (version >= 11 && put_int(h, PyTuple_GET_ITEM(p, 6), 4))
            return -1;
    }
    if (records == Py_None) {
        if (flexible ? put_uvarint(h, 0) : put_be(h, 0xFFFFFFFFULL, 4))
            return -1;
    } else {
        PyObject *seq = PySequence_Fast(records, "records are a list of buffers");
        if (seq == NULL)
            return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), size = 0;
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t len = PyObject_Length(PySequence_Fast_GET_ITEM(seq, i));
            if (len < 0) {
                Py_DECREF(seq);
                return -1;
            }
            size += len;
        }
        int failed = flexible ? put_uvarint(h, (unsigned long long)size + 1)
                              : put_be(h, (unsigned long long)size, 4);
        if (!failed && size) {
            failed = flush(h, out);
            for (Py_ssize_t i = 0; i < n && !failed; i++)
                failed = PyList_Append(out, PySequence_Fast_GET_ITEM(seq, i));
        }
        Py_DECREF(seq);
        if (failed)
            return -1;
    }
    if (flexible && leader != Py_None) {  /* tagged fields holding tag 1, CurrentLeader (9 bytes) */
        if (!PyTuple_Check(leader) || PyTuple_GET_SIZE(leader) != 2) {
            PyErr_SetString(PyExc_TypeError, "a current leader is (leader_id, leader_epoch)");
            return -1;
        }
        return put_be(h, 0x010109, 3) || put_int(h, PyTuple_GET_ITEM(leader, 0), 4)
               || put_int(h, PyTuple_GET_ITEM(leader, 1), 4) || put_uvarint(h, 0);
    }
    return flexible ? put_uvarint(h, 0) : 0;
}

/* fetch_topics(version, head, topics, trailer) -> list: `head` (the fields before the topics), the
 * topics array, `trailer` (the fields after it), as buffers whose concatenation is the body. */
static PyObject *fetch_topics(PyObject *self, PyObject *args)
{
    (void)self;
    int version;
    Py_buffer head_in, trailer;
    PyObject *topics_in;
    if (!PyArg_ParseTuple(args, "iy*Oy*", &version, &head_in, &topics_in, &trailer))
        return NULL;
    int flexible = version >= 12, by_id = version >= 13;
    Head h = {NULL, 0, 0};
    PyObject *out = PyList_New(0), *seq = NULL;
    if (out == NULL || put(&h, head_in.buf, head_in.len))
        goto fail;
    seq = PySequence_Fast(topics_in, "topics are a list");
    if (seq == NULL)
        goto fail;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (put_count(&h, n, flexible))
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) {
            PyErr_SetString(PyExc_TypeError, "a topic's answer is (topic, partitions)");
            goto fail;
        }
        PyObject *key = PyTuple_GET_ITEM(t, 0);
        if (by_id) {  /* a uuid.UUID: its 16 bytes */
            PyObject *raw = PyObject_GetAttrString(key, "bytes");
            if (raw == NULL)
                goto fail;
            int failed = !PyBytes_Check(raw) || PyBytes_GET_SIZE(raw) != 16
                         || put(&h, PyBytes_AS_STRING(raw), 16);
            Py_DECREF(raw);
            if (failed) {
                if (!PyErr_Occurred())
                    PyErr_SetString(PyExc_TypeError, "a topic id is a UUID");
                goto fail;
            }
        } else if (put_string(&h, key, flexible)) {
            goto fail;
        }
        PyObject *parts = PySequence_Fast(PyTuple_GET_ITEM(t, 1), "partitions are a list");
        if (parts == NULL)
            goto fail;
        Py_ssize_t m = PySequence_Fast_GET_SIZE(parts);
        int failed = put_count(&h, m, flexible);
        for (Py_ssize_t j = 0; j < m && !failed; j++)
            failed = put_partition(&h, out, PySequence_Fast_GET_ITEM(parts, j), version);
        Py_DECREF(parts);
        if (failed || (flexible && put_uvarint(&h, 0)))
            goto fail;
    }
    if (put(&h, trailer.buf, trailer.len) || flush(&h, out))
        goto fail;
    Py_DECREF(seq);
    PyMem_Free(h.buf);
    PyBuffer_Release(&head_in);
    PyBuffer_Release(&trailer);
    return out;
fail:
    Py_XDECREF(seq);
    Py_XDECREF(out);
    PyMem_Free(h.buf);
    PyBuffer_Release(&head_in);
    PyBuffer_Release(&trailer);
    return NULL;
}

/* produce(version, results, throttle_time_ms) -> bytes, or None when a partition carries an error
 * message. `results`: [(topic, [(index, error_code, base_offset, log_append_time, log_start, message)])]. */
static PyObject *produce(PyObject *self, PyObject *args)
{
    (void)self;
    int version, throttle;
    PyObject *results;
    if (!PyArg_ParseTuple(args, "iOi", &version, &results, &throttle))
        return NULL;
    int flexible = version >= 9;
    Head h = {NULL, 0, 0};
    PyObject *seq = PySequence_Fast(results, "results are a list"), *out = NULL;
    if (seq == NULL)
        return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    if (put_count(&h, n, flexible))
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PySequence_Fast_GET_ITEM(seq, i);
        if (!PyTuple_Check(t) || PyTuple_GET_SIZE(t) != 2) {
            PyErr_SetString(PyExc_TypeError, "a topic's results are (topic, partitions)");
            goto done;
        }
        if (put_string(&h, PyTuple_GET_ITEM(t, 0), flexible))
            goto done;
        PyObject *parts = PySequence_Fast(PyTuple_GET_ITEM(t, 1), "partitions are a list");
        if (parts == NULL)
            goto done;
        Py_ssize_t m = PySequence_Fast_GET_SIZE(parts);
        int failed = put_count(&h, m, flexible), other = 0;
        for (Py_ssize_t j = 0; j < m && !failed; j++) {
            PyObject *p = PySequence_Fast_GET_ITEM(parts, j);
            if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 6) {
                PyErr_SetString(PyExc_TypeError, "a partition's result has six fields");
                failed = -1;
                break;
            }
            if (PyTuple_GET_ITEM(p, 5) != Py_None) {  /* an error message: the Python encoder's */
                other = 1;
                break;
            }
            failed = put_int(&h, PyTuple_GET_ITEM(p, 0), 4) || put_int(&h, PyTuple_GET_ITEM(p, 1), 2)
                     || put_int(&h, PyTuple_GET_ITEM(p, 2), 8)
                     || (version >= 2 && put_int(&h, PyTuple_GET_ITEM(p, 3), 8))
                     || (version >= 5 && put_int(&h, PyTuple_GET_ITEM(p, 4), 8));
            if (!failed && version >= 8)  /* no record errors, a null message */
                failed = flexible ? put_be(&h, 0x010000, 3) : put_be(&h, 0x00000000FFFFULL, 6);
            else if (!failed && flexible)
                failed = put_uvarint(&h, 0);
        }
        Py_DECREF(parts);
        if (failed)
            goto done;
        if (other) {
            out = Py_NewRef(Py_None);
            goto done;
        }
        if (flexible && put_uvarint(&h, 0))
            goto done;
    }
    if ((version >= 1 && put_be(&h, (unsigned long long)(unsigned int)throttle, 4))
        || (flexible && put_uvarint(&h, 0)))
        goto done;
    out = PyBytes_FromStringAndSize((const char *)h.buf, h.len);
done:
    Py_DECREF(seq);
    PyMem_Free(h.buf);
    return out;
}

static PyMethodDef methods[] = {
    {"fetch_topics", fetch_topics, METH_VARARGS,
     "fetch_topics(version, head, topics, trailer) -> list of buffers: a FetchResponse body's topics array "
     "between `head` and `trailer`, each partition's batches left as the buffers handed in."},
    {"produce", produce, METH_VARARGS,
     "produce(version, results, throttle_time_ms) -> a ProduceResponse body, or None when a partition "
     "carries an error message (the Python encoder's to answer)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_answers", NULL, -1, methods, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__answers(void)
{
    return PyModule_Create(&module);
}
