/* ProduceRequest v3-v11 body decoding in C: the body (the bytes after the request header) into the named
 * tuples of protocol/produce_request.py (ProduceRequestBody, TopicData, PartitionData), each partition's
 * records a zero-copy memoryview slice of the body. Its twin is the Python walk of that module, _fixed
 * (v3-v8) and _flexible (v9+), kept and used when this module is not built; tests/protocol/
 * test_produce_request_c.py checks that both give the same fields, or both refuse, on the same bytes.
 * Written in C because Python was the bound: the walk took 57 us for a request of 100 partitions, on
 * the broker's produce path, once per request. Built by the project's setup (setup.py); optional.
 *
 * It accepts exactly what the Python walk accepts and refuses exactly what it refuses, with its
 * DecodeError (a ValueError): a truncated body, a null topic name, a negative array count or one larger
 * than the bytes left, a field running past the end, an unsigned varint longer than 5 bytes (up to 35
 * bits are read, as Python does), a name that is not UTF-8. Null transactional id and null records are
 * None; tagged fields are skipped by their size; trailing bytes after the body are ignored. Never reads
 * past the end of the buffer.
 *
 * The body is a memoryview of bytes (the broker's case: records are then views of the same buffer, with
 * the same .obj as Python's slices) or any other bytes-like object, whose records are then its own
 * slices, as in Python (bytes for bytes). A memoryview of another format or shape is a TypeError. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_named_tuple.h"

/* Set once by set_classes: protocol.produce_request's DecodeError and the named tuples to build. */
static PyObject *decode_error;
static PyTypeObject *body_cls, *topic_cls, *partition_cls;

/* The least bytes an array element takes (fixed, flexible): a list is allocated for at most as many
 * elements as the bytes left can hold, whatever count the request claims. */
enum { FIXED_TOPIC = 6, FIXED_PARTITION = 8, FLEXIBLE_TOPIC = 3, FLEXIBLE_PARTITION = 6 };

typedef struct {
    const unsigned char *b;
    Py_ssize_t pos, end;
    PyObject *source; /* the body: records are its slices */
    int is_view;      /* source is a memoryview of bytes: its slices are made here (see records) */
    long version;
} Reader;

static int refuse(const char *format, ...)
{
    va_list va;
    va_start(va, format);
    PyErr_FormatV(decode_error, format, va);
    va_end(va);
    return -1;
}

/* What the Python walk's struct.error and IndexError become. */
static int truncated(const Reader *r)
{
    return refuse("truncated or malformed ProduceRequest v%ld: a field runs past the end of the %zd bytes",
                  r->version, r->end);
}

static inline uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline int rd_i16(Reader *r, int *out)
{
    if (r->end - r->pos < 2) {
        truncated(r);
        return -1; /* written out (not truncated()'s value): gcc then sees *out is set when 0 */
    }
    *out = (int16_t)(r->b[r->pos] << 8 | r->b[r->pos + 1]);
    r->pos += 2;
    return 0;
}

static inline int rd_i32(Reader *r, int32_t *out)
{
    if (r->end - r->pos < 4) {
        truncated(r);
        return -1;
    }
    *out = (int32_t)be32(r->b + r->pos);
    r->pos += 4;
    return 0;
}

/* _uvarint: at most 5 bytes, 35 bits. */
static int rd_uvarint_long(Reader *r, int64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
        if (r->pos >= r->end) {
            truncated(r);
            return -1;
        }
        unsigned char c = r->b[r->pos++];
        v |= (uint64_t)(c & 0x7F) << shift;
        if (!(c & 0x80)) {
            *out = (int64_t)v;
            return 0;
        }
        if (shift + 7 > 28) {
            refuse("unsigned varint longer than 5 bytes");
            return -1;
        }
    }
}

static inline int rd_uvarint(Reader *r, int64_t *out)
{
    if (r->pos < r->end && r->b[r->pos] < 0x80) {
        *out = r->b[r->pos++];
        return 0;
    }
    return rd_uvarint_long(r, out);
}

/* _take's check. */
static inline int check_field(const Reader *r, int64_t n)
{
    if (n > r->end - r->pos)
        return refuse("a field of %lld bytes runs past the end of the request", (long long)n);
    return 0;
}

/* _check_count. */
static inline int check_count(const Reader *r, int64_t n)
{
    if (n < 0)
        return refuse("null where an array is required");
    if (n > r->end - r->pos)
        return refuse("array of %lld elements in %zd bytes", (long long)n, r->end - r->pos);
    return 0;
}

/* A list for `count` elements of at least `least` bytes each, `count` checked: as long as the bytes left
 * allow (*room). A request claiming more fails by the element at *room, as the Python walk fails there
 * (and with its error); put appends from there all the same, should it not. */
static PyObject *new_list(const Reader *r, int64_t count, int least, Py_ssize_t *room)
{
    Py_ssize_t fits = (r->end - r->pos) / least;
    *room = count < fits ? (Py_ssize_t)count : fits;
    return PyList_New(*room);
}

/* Element i of a list from new_list, whose reference it takes; a NULL item is a failure, the error set. */
static inline int put(PyObject *list, Py_ssize_t i, Py_ssize_t room, PyObject *item)
{
    if (item == NULL)
        return -1;
    if (i < room) {
        PyList_SET_ITEM(list, i, item);
        return 0;
    }
    int failed = PyList_Append(list, item);
    Py_DECREF(item);
    return failed;
}

/* str(buf[pos:pos + n], "utf-8"), n checked; a UnicodeDecodeError becomes a DecodeError as in
 * decode_produce_request. */
static PyObject *text(Reader *r, Py_ssize_t n)
{
    PyObject *s = PyUnicode_DecodeUTF8((const char *)r->b + r->pos, n, NULL);
    if (s == NULL) {
        if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
#if PY_VERSION_HEX >= 0x030C0000
            PyObject *exc = PyErr_GetRaisedException();
#else
            PyObject *type, *exc, *tb;
            PyErr_Fetch(&type, &exc, &tb);
            PyErr_NormalizeException(&type, &exc, &tb);
            Py_XDECREF(type);
            Py_XDECREF(tb);
#endif
            PyErr_Format(decode_error, "truncated or malformed ProduceRequest v%ld: %R", r->version, exc);
            Py_XDECREF(exc);
        }
        return NULL;
    }
    r->pos += n;
    return s;
}

/* buf[pos:pos + n], n checked. For a memoryview, what its slicing does (memory_subscript: mbuf_add_view,
 * then init_slice, init_len and init_flags), without making a slice object and two ints for it: a new
 * view of the same managed buffer, then its start and length moved. The view is 1-D, of bytes, with
 * stride 1 (see decode): so is the slice, contiguous, and its flags are those of the whole. Measured on
 * 100 partitions: 5.8 us a request, 10.2 us with PySequence_GetSlice. */
static PyObject *records(Reader *r, Py_ssize_t n)
{
    PyObject *out;
    if (r->is_view) {
        out = PyMemoryView_FromObject(r->source);
        if (out == NULL)
            return NULL;
        Py_buffer *v = PyMemoryView_GET_BUFFER(out);
        v->buf = (char *)v->buf + r->pos;
        v->len = n;
        v->shape[0] = n;
    } else {
        out = PySequence_GetSlice(r->source, r->pos, r->pos + n);
        if (out == NULL)
            return NULL;
    }
    r->pos += n;
    return out;
}

static PyObject *pair(PyTypeObject *cls, PyObject *a, PyObject *b)
{
    PyObject *items[2] = {a, b};
    return record(cls, items, 2);
}

/* The topics of v3-v8 (_fixed): int16-prefixed strings, int32-prefixed arrays and bytes. */
static PyObject *fixed_topics(Reader *r)
{
    int32_t count, parts;
    Py_ssize_t room, part_room;
    int n;
    if (rd_i32(r, &count) || check_count(r, count))
        return NULL;
    PyObject *topics = new_list(r, count, FIXED_TOPIC, &room);
    if (topics == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (rd_i16(r, &n))
            goto fail;
        if (n < 0) {
            refuse("null where a string is required");
            goto fail;
        }
        if (check_field(r, n))
            goto fail;
        PyObject *name = text(r, n);
        if (name == NULL)
            goto fail;
        if (rd_i32(r, &parts) || check_count(r, parts)) {
            Py_DECREF(name);
            goto fail;
        }
        PyObject *partitions = new_list(r, parts, FIXED_PARTITION, &part_room);
        if (partitions == NULL) {
            Py_DECREF(name);
            goto fail;
        }
        for (Py_ssize_t j = 0; j < parts; j++) {
            if (r->end - r->pos < 8) {
                truncated(r);
                goto fail_topic;
            }
            int32_t index = (int32_t)be32(r->b + r->pos), size = (int32_t)be32(r->b + r->pos + 4);
            r->pos += 8;
            PyObject *batch;
            if (size >= 0) {
                if (check_field(r, size))
                    goto fail_topic;
                batch = records(r, size);
            } else {
                batch = Py_NewRef(Py_None);
            }
            if (put(partitions, j, part_room, pair(partition_cls, PyLong_FromLong(index), batch)))
                goto fail_topic;
            continue;
        fail_topic:
            Py_DECREF(name);
            Py_DECREF(partitions);
            goto fail;
        }
        if (put(topics, i, room, pair(topic_cls, name, partitions)))
            goto fail;
    }
    return topics;
fail:
    Py_DECREF(topics);
    return NULL;
}

/* _skip_tags: a tagged field section (a count, then each field's tag and size-prefixed data). */
static int skip_tags(Reader *r)
{
    int64_t count, ignored, size;
    if (rd_uvarint(r, &count))
        return -1;
    for (int64_t i = 0; i < count; i++) { /* each takes 2 bytes or more: ends with the buffer at the latest */
        if (rd_uvarint(r, &ignored) || rd_uvarint(r, &size) || check_field(r, size))
            return -1;
        r->pos += (Py_ssize_t)size;
    }
    return 0;
}

/* The topics of v9+ (_flexible): compact (uvarint n + 1) strings, arrays and bytes, and tagged fields. */
static PyObject *flexible_topics(Reader *r)
{
    int64_t count, parts, n;
    Py_ssize_t room, part_room;
    if (rd_uvarint(r, &count) || check_count(r, count - 1))
        return NULL;
    count -= 1;
    PyObject *topics = new_list(r, count, FLEXIBLE_TOPIC, &room);
    if (topics == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (rd_uvarint(r, &n))
            goto fail;
        if (n == 0) {
            refuse("null where a string is required");
            goto fail;
        }
        if (check_field(r, n - 1))
            goto fail;
        PyObject *name = text(r, (Py_ssize_t)(n - 1));
        if (name == NULL)
            goto fail;
        if (rd_uvarint(r, &parts) || check_count(r, parts - 1)) {
            Py_DECREF(name);
            goto fail;
        }
        parts -= 1;
        PyObject *partitions = new_list(r, parts, FLEXIBLE_PARTITION, &part_room);
        if (partitions == NULL) {
            Py_DECREF(name);
            goto fail;
        }
        for (Py_ssize_t j = 0; j < parts; j++) {
            int32_t index;
            if (rd_i32(r, &index) || rd_uvarint(r, &n))
                goto fail_topic;
            PyObject *batch;
            if (n > 0) {
                if (check_field(r, n - 1))
                    goto fail_topic;
                batch = records(r, (Py_ssize_t)(n - 1));
            } else {
                batch = Py_NewRef(Py_None);
            }
            if (batch == NULL)
                goto fail_topic;
            if (skip_tags(r)) {
                Py_DECREF(batch);
                goto fail_topic;
            }
            if (put(partitions, j, part_room, pair(partition_cls, PyLong_FromLong(index), batch)))
                goto fail_topic;
            continue;
        fail_topic:
            Py_DECREF(name);
            Py_DECREF(partitions);
            goto fail;
        }
        if (skip_tags(r)) {
            Py_DECREF(name);
            Py_DECREF(partitions);
            goto fail;
        }
        if (put(topics, i, room, pair(topic_cls, name, partitions)))
            goto fail;
    }
    return topics;
fail:
    Py_DECREF(topics);
    return NULL;
}

static PyObject *decode_body(Reader *r)
{
    int flexible = r->version >= 9;
    PyObject *txn = NULL, *topics;
    int64_t n;
    if (flexible) {
        if (rd_uvarint(r, &n))
            return NULL;
        n -= 1; /* compact: 0 is null */
    } else {
        int n16;
        if (rd_i16(r, &n16))
            return NULL;
        n = n16;
    }
    if (n >= 0) {
        if (check_field(r, n))
            return NULL;
        txn = text(r, (Py_ssize_t)n);
        if (txn == NULL)
            return NULL;
    } else {
        txn = Py_NewRef(Py_None);
    }
    if (r->end - r->pos < 6) {
        Py_DECREF(txn);
        truncated(r);
        return NULL;
    }
    const unsigned char *p = r->b + r->pos;
    int acks = (int16_t)(p[0] << 8 | p[1]);
    int32_t timeout_ms = (int32_t)be32(p + 2);
    r->pos += 6;
    topics = flexible ? flexible_topics(r) : fixed_topics(r);
    if (topics == NULL || (flexible && skip_tags(r))) {
        Py_DECREF(txn);
        Py_XDECREF(topics);
        return NULL;
    }
    PyObject *items[4] = {txn, PyLong_FromLong(acks), PyLong_FromLong(timeout_ms), topics};
    return record(body_cls, items, 4);
}

/* decode(body, version) */
static PyObject *decode(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "decode(body, version) takes 2 arguments");
        return NULL;
    }
    if (body_cls == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "set_classes was not called");
        return NULL;
    }
    PyObject *source = args[0], *v = args[1];
    if (!PyLong_Check(v)) {
        PyErr_Format(PyExc_TypeError, "the ProduceRequest version is an int, not %.100s", Py_TYPE(v)->tp_name);
        return NULL;
    }
    int overflow;
    long version = PyLong_AsLongAndOverflow(v, &overflow);
    if (version == -1 && PyErr_Occurred())
        return NULL;
    if (overflow || version < 3 || version > 11) {
        PyErr_Format(PyExc_ValueError, "ProduceRequest v%S is not decoded here", v);
        return NULL;
    }
    int is_view = PyMemoryView_Check(source);
    if (is_view) {
        const Py_buffer *mv = PyMemoryView_GET_BUFFER(source);
        if (mv->ndim != 1 || mv->itemsize != 1 || (mv->format != NULL && strcmp(mv->format, "B") != 0)) {
            PyErr_SetString(PyExc_TypeError, "a ProduceRequest body is a memoryview of bytes (1-D, format B)");
            return NULL;
        }
        is_view = mv->strides[0] == 1; /* else (a reversed view of 1 byte at most) sliced by memoryview */
    }
    Py_buffer view; /* also refuses a released or non-contiguous memoryview */
    if (PyObject_GetBuffer(source, &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Reader r = {view.buf, 0, view.len, source, is_view, version};
    PyObject *out = decode_body(&r);
    PyBuffer_Release(&view);
    return out;
}

/* A plain named tuple of n fields: a tuple subtype adding no slots nor __dict__. */
static int named_tuple(PyObject *c, Py_ssize_t n)
{
    if (!PyType_Check(c) || !PyType_IsSubtype((PyTypeObject *)c, &PyTuple_Type)
        || ((PyTypeObject *)c)->tp_basicsize != PyTuple_Type.tp_basicsize
        || ((PyTypeObject *)c)->tp_itemsize != PyTuple_Type.tp_itemsize) {
        PyErr_SetString(PyExc_TypeError, "set_classes takes named tuple classes");
        return -1;
    }
    PyObject *fields = PyObject_GetAttrString(c, "_fields");
    if (fields == NULL)
        return -1;
    Py_ssize_t got = PyObject_Length(fields);
    Py_DECREF(fields);
    if (got != n) {
        if (!PyErr_Occurred())
            PyErr_Format(PyExc_TypeError, "%R has %zd fields, not %zd", c, got, n);
        return -1;
    }
    return 0;
}

/* set_classes(DecodeError, ProduceRequestBody, TopicData, PartitionData) */
static PyObject *set_classes(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *error, *body, *topic, *partition;
    if (!PyArg_ParseTuple(args, "OOOO:set_classes", &error, &body, &topic, &partition))
        return NULL;
    if (!PyType_Check(error) || !PyType_IsSubtype((PyTypeObject *)error, (PyTypeObject *)PyExc_ValueError)) {
        PyErr_SetString(PyExc_TypeError, "set_classes: DecodeError is a ValueError subclass");
        return NULL;
    }
    if (named_tuple(body, 4) || named_tuple(topic, 2) || named_tuple(partition, 2))
        return NULL;
    Py_XSETREF(decode_error, Py_NewRef(error));
    Py_XSETREF(body_cls, (PyTypeObject *)Py_NewRef(body));
    Py_XSETREF(topic_cls, (PyTypeObject *)Py_NewRef(topic));
    Py_XSETREF(partition_cls, (PyTypeObject *)Py_NewRef(partition));
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     "decode(body, version): the ProduceRequest v3-v11 body as a ProduceRequestBody; DecodeError when it is "
     "truncated or malformed."},
    {"set_classes", set_classes, METH_VARARGS,
     "set_classes(DecodeError, ProduceRequestBody, TopicData, PartitionData): what decode raises and builds."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._produce_request", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__produce_request(void) { return PyModule_Create(&module); }
