/* FetchRequest v4-v18 body decoding in C: the body (no header) into the named tuples of
 * protocol/fetch_request.py (FetchRequestBody, FetchTopic, FetchPartition, ForgottenTopic, ReplicaState),
 * with the same field values as kafka-python's decoder, FetchRequest[version].decode, which is its twin:
 * protocol/fetch_request.py falls back to it when this module is not built, and
 * tests/protocol/test_fetch_request.py checks that both give the same fields for the same bodies.
 * Written in C because the request is decoded on every fetch, a consumer's hot path: kafka-python took
 * 4.4 us for one partition and 31.5 us for 100. Built by the project's setup (setup.py); optional.
 *
 * The layout is Kafka's FetchRequest.json: from v12 (flexible) compact strings and arrays and a tagged
 * field section at the end of every struct; the body's known tags are 0 ClusterId (v12+) and
 * 1 ReplicaState (v15+), every other tag is skipped by its size. As in kafka-python, a null string is
 * None and trailing bytes after the body are ignored; unlike it, a null or negative array count, a
 * count larger than the bytes left, a string that is not UTF-8 and a truncated body raise ValueError.
 * Never reads past the end of the buffer. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

#include "_named_tuple.h"

/* Set once by set_classes: the named tuples to build. */
static PyTypeObject *body_cls, *topic_cls, *partition_cls, *forgotten_cls, *replica_cls;
/* uuid.UUID, uuid.SafeUUID.unknown, "int", "is_safe", "" */
static PyObject *uuid_cls, *uuid_unknown, *str_int, *str_is_safe, *empty_str, *empty_tuple;

typedef struct {
    const unsigned char *b;
    Py_ssize_t pos, end;
} Reader;

static int malformed(const char *what)
{
    PyErr_SetString(PyExc_ValueError, what);
    return -1;
}

static int truncated(void) { return malformed("the FetchRequest body is truncated"); }

static inline uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static inline int64_t be64(const unsigned char *p) { return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4)); }

static int rd_i32(Reader *r, int32_t *out)
{
    if (r->end - r->pos < 4)
        return truncated();
    *out = (int32_t)be32(r->b + r->pos);
    r->pos += 4;
    return 0;
}

/* An unsigned varint of at most 5 bytes that fits 32 bits (Java's readUnsignedVarint). */
static int rd_uvarint(Reader *r, uint32_t *out)
{
    uint64_t v = 0;
    for (int i = 0; i < 5; i++) {
        if (r->pos >= r->end)
            return truncated();
        unsigned char c = r->b[r->pos++];
        v |= (uint64_t)(c & 0x7F) << (7 * i);
        if (!(c & 0x80)) {
            if (v > 0xFFFFFFFFu)
                return malformed("a varint does not fit 32 bits");
            *out = (uint32_t)v;
            return 0;
        }
    }
    return malformed("a varint is longer than 5 bytes");
}

/* A string: int16 length, or from v12 uvarint length+1. A null (negative) length gives None, as in
 * kafka-python. */
static int rd_string(Reader *r, int flexible, PyObject **out)
{
    long long n;
    if (flexible) {
        uint32_t u;
        if (rd_uvarint(r, &u) < 0)
            return -1;
        n = (long long)u - 1;
    } else {
        if (r->end - r->pos < 2)
            return truncated();
        n = (int16_t)(r->b[r->pos] << 8 | r->b[r->pos + 1]);
        r->pos += 2;
    }
    if (n < 0) {
        *out = Py_NewRef(Py_None);
        return 0;
    }
    if (n > (long long)(r->end - r->pos))
        return truncated();
    *out = n == 0 ? Py_NewRef(empty_str) : PyUnicode_DecodeUTF8((const char *)r->b + r->pos, (Py_ssize_t)n, NULL);
    if (*out == NULL)
        return -1; /* UnicodeDecodeError, a ValueError */
    r->pos += (Py_ssize_t)n;
    return 0;
}

/* An array's count: int32, or from v12 uvarint count+1. Null and negative counts are refused, and so is
 * a count of items of at least `least` bytes each that the bytes left cannot hold. */
static int rd_count(Reader *r, int flexible, Py_ssize_t least, Py_ssize_t *out)
{
    long long n;
    if (flexible) {
        uint32_t u;
        if (rd_uvarint(r, &u) < 0)
            return -1;
        n = (long long)u - 1;
    } else {
        int32_t s;
        if (rd_i32(r, &s) < 0)
            return -1;
        n = s;
    }
    if (n < 0)
        return malformed("a null or negative array count");
    if (n > (long long)((r->end - r->pos) / least))
        return malformed("an array count larger than the bytes left");
    *out = (Py_ssize_t)n;
    return 0;
}

/* A uuid: None for the all-zero one, as in kafka-python; else a uuid.UUID, made the way UUID(bytes=...)
 * makes it (its two slots, int and is_safe=SafeUUID.unknown) without the Python call (0.67 us). */
static int rd_uuid(Reader *r, PyObject **out)
{
    if (r->end - r->pos < 16)
        return truncated();
    const unsigned char *p = r->b + r->pos;
    r->pos += 16;
    if ((be64(p) | be64(p + 8)) == 0) {
        *out = Py_NewRef(Py_None);
        return 0;
    }
#if PY_VERSION_HEX >= 0x030D0000
    PyObject *i = PyLong_FromUnsignedNativeBytes(p, 16, Py_ASNATIVEBYTES_BIG_ENDIAN);
#else
    PyObject *i = _PyLong_FromByteArray(p, 16, 0, 0);
#endif
    if (i == NULL)
        return -1;
    PyObject *u = ((PyTypeObject *)uuid_cls)->tp_new((PyTypeObject *)uuid_cls, empty_tuple, NULL);
    if (u == NULL || PyObject_GenericSetAttr(u, str_int, i) < 0
        || PyObject_GenericSetAttr(u, str_is_safe, uuid_unknown) < 0) {
        Py_DECREF(i);
        Py_XDECREF(u);
        return -1;
    }
    Py_DECREF(i);
    *out = u;
    return 0;
}

/* A tagged field section (v12+). With `cluster_id` and `replica_state` (the body's), tag 0 is ClusterId
 * and from v15 tag 1 is ReplicaState, each read within its size; every other tag is skipped by its size. */
static int rd_tags(Reader *r, int v, PyObject **cluster_id, PyObject **replica_state)
{
    if (r->pos < r->end && r->b[r->pos] == 0) { /* no tags: the common case */
        r->pos++;
        return 0;
    }
    uint32_t count, tag, size;
    if (rd_uvarint(r, &count) < 0)
        return -1;
    for (uint32_t i = 0; i < count; i++) { /* each one takes at least 2 bytes: bounded by the buffer */
        if (rd_uvarint(r, &tag) < 0 || rd_uvarint(r, &size) < 0)
            return -1;
        if (size > (uint64_t)(r->end - r->pos))
            return truncated();
        Reader sub = {r->b, r->pos, r->pos + (Py_ssize_t)size};
        if (cluster_id != NULL && tag == 0) {
            PyObject *s;
            if (rd_string(&sub, 1, &s) < 0)
                return -1;
            Py_SETREF(*cluster_id, s);
        } else if (replica_state != NULL && tag == 1 && v >= 15) {
            int32_t replica_id;
            if (rd_i32(&sub, &replica_id) < 0)
                return -1;
            if (sub.end - sub.pos < 8)
                return truncated();
            int64_t epoch = be64(sub.b + sub.pos);
            sub.pos += 8;
            if (rd_tags(&sub, v, NULL, NULL) < 0)
                return -1;
            PyObject *items[2] = {PyLong_FromLong(replica_id), PyLong_FromLongLong(epoch)};
            PyObject *state = record(replica_cls, items, 2);
            if (state == NULL)
                return -1;
            Py_SETREF(*replica_state, state);
        }
        r->pos += (Py_ssize_t)size;
    }
    return 0;
}

static PyObject *rd_partitions(Reader *r, int v)
{
    int flexible = v >= 12;
    /* partition, [current_leader_epoch v9+], fetch_offset, [last_fetched_epoch v12+],
     * [log_start_offset v5+], partition_max_bytes */
    Py_ssize_t fixed = 16 + (v >= 9 ? 4 : 0) + (v >= 12 ? 4 : 0) + (v >= 5 ? 8 : 0);
    Py_ssize_t n;
    if (rd_count(r, flexible, fixed + flexible, &n) < 0)
        return NULL;
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (r->end - r->pos < fixed) {
            truncated();
            goto fail;
        }
        const unsigned char *p = r->b + r->pos;
        int32_t partition = (int32_t)be32(p), leader_epoch = -1, last_fetched_epoch = -1;
        int64_t log_start_offset = -1;
        p += 4;
        if (v >= 9) {
            leader_epoch = (int32_t)be32(p);
            p += 4;
        }
        int64_t fetch_offset = be64(p);
        p += 8;
        if (v >= 12) {
            last_fetched_epoch = (int32_t)be32(p);
            p += 4;
        }
        if (v >= 5) {
            log_start_offset = be64(p);
            p += 8;
        }
        int32_t max_bytes = (int32_t)be32(p);
        r->pos += fixed;
        if (flexible && rd_tags(r, v, NULL, NULL) < 0)
            goto fail;
        PyObject *items[6] = {PyLong_FromLong(partition),        PyLong_FromLong(leader_epoch),
                              PyLong_FromLongLong(fetch_offset),  PyLong_FromLong(last_fetched_epoch),
                              PyLong_FromLongLong(log_start_offset), PyLong_FromLong(max_bytes)};
        PyObject *item = record(partition_cls, items, 6);
        if (item == NULL)
            goto fail;
        PyList_SET_ITEM(list, i, item);
    }
    return list;
fail:
    Py_DECREF(list); /* the items not yet set are NULL */
    return NULL;
}

/* A topic's name (v4-v12; from v13 "") and id (v13+, else None). */
static int rd_topic_key(Reader *r, int v, PyObject **name, PyObject **id)
{
    if (v >= 13) {
        *name = Py_NewRef(empty_str);
        return rd_uuid(r, id);
    }
    *id = Py_NewRef(Py_None);
    return rd_string(r, v >= 12, name);
}

static PyObject *rd_int32s(Reader *r, int v)
{
    int flexible = v >= 12;
    Py_ssize_t n;
    if (rd_count(r, flexible, 4, &n) < 0)
        return NULL;
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *x = PyLong_FromLong((int32_t)be32(r->b + r->pos));
        if (x == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, x);
        r->pos += 4;
    }
    return list;
}

/* An array of topics, each its name or id, then its partitions as `partitions` reads them, as `cls`:
 * the request's topics (FetchTopic, each partition's fields) and its forgotten topics
 * (ForgottenTopic, partition indexes). */
static PyObject *rd_topic_list(Reader *r, int v, PyTypeObject *cls, PyObject *(*partitions)(Reader *, int))
{
    int flexible = v >= 12;
    Py_ssize_t n;
    if (rd_count(r, flexible, flexible ? 3 : 6, &n) < 0)
        return NULL;
    PyObject *list = PyList_New(n);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *items[3] = {NULL, NULL, NULL};
        if (rd_topic_key(r, v, &items[0], &items[1]) == 0 && (items[2] = partitions(r, v)) != NULL
            && flexible && rd_tags(r, v, NULL, NULL) < 0)
            Py_CLEAR(items[2]);
        PyObject *item = record(cls, items, 3);
        if (item == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, item);
    }
    return list;
}

static PyObject *rd_body(Reader *r, int v)
{
    int flexible = v >= 12;
    int32_t replica_id = -1, max_wait_ms, min_bytes, max_bytes, session_id = 0, session_epoch = -1;
    PyObject *topics = NULL, *forgotten = NULL, *rack_id = NULL;
    PyObject *cluster_id = Py_NewRef(Py_None), *replica_state = Py_NewRef(Py_None);
    if ((v <= 14 && rd_i32(r, &replica_id) < 0) || rd_i32(r, &max_wait_ms) < 0 || rd_i32(r, &min_bytes) < 0
        || rd_i32(r, &max_bytes) < 0)
        goto fail;
    if (r->pos >= r->end) {
        truncated();
        goto fail;
    }
    int8_t isolation_level = (int8_t)r->b[r->pos++];
    if (v >= 7 && (rd_i32(r, &session_id) < 0 || rd_i32(r, &session_epoch) < 0))
        goto fail;
    if ((topics = rd_topic_list(r, v, topic_cls, rd_partitions)) == NULL)
        goto fail;
    if ((forgotten = v >= 7 ? rd_topic_list(r, v, forgotten_cls, rd_int32s) : PyList_New(0)) == NULL)
        goto fail;
    if (v >= 11 ? rd_string(r, flexible, &rack_id) < 0 : (rack_id = Py_NewRef(empty_str)) == NULL)
        goto fail;
    if (flexible && rd_tags(r, v, &cluster_id, &replica_state) < 0)
        goto fail;
    PyObject *items[12] = {PyLong_FromLong(replica_id), PyLong_FromLong(max_wait_ms), PyLong_FromLong(min_bytes),
                           PyLong_FromLong(max_bytes), PyLong_FromLong(isolation_level),
                           PyLong_FromLong(session_id), PyLong_FromLong(session_epoch), topics, forgotten,
                           rack_id, replica_state, cluster_id};
    return record(body_cls, items, 12);
fail:
    Py_XDECREF(topics);
    Py_XDECREF(forgotten);
    Py_XDECREF(rack_id);
    Py_DECREF(cluster_id);
    Py_DECREF(replica_state);
    return NULL;
}

/* decode(body, version): any C-contiguous buffer, as "y*" takes it. */
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
    long version = PyLong_AsLong(args[1]);
    if (version == -1 && PyErr_Occurred())
        return NULL;
    if (version < 4 || version > 18) {
        PyErr_Format(PyExc_ValueError, "FetchRequest v%ld is not v4-v18", version);
        return NULL;
    }
    Py_buffer view;
    if (PyObject_GetBuffer(args[0], &view, PyBUF_SIMPLE) < 0)
        return NULL;
    Reader r = {view.buf, 0, view.len};
    PyObject *out = rd_body(&r, (int)version);
    PyBuffer_Release(&view);
    return out;
}

/* set_classes((FetchRequestBody, FetchTopic, FetchPartition, ForgottenTopic, ReplicaState)) */
static PyObject *set_classes(PyObject *self, PyObject *arg)
{
    (void)self;
    static const Py_ssize_t sizes[5] = {12, 3, 6, 3, 2};
    PyTypeObject *classes[5];
    if (!PyTuple_Check(arg) || PyTuple_GET_SIZE(arg) != 5) {
        PyErr_SetString(PyExc_TypeError, "set_classes takes a tuple of the 5 named tuple classes");
        return NULL;
    }
    for (int i = 0; i < 5; i++) {
        PyObject *c = PyTuple_GET_ITEM(arg, i);
        /* a plain named tuple: a tuple subtype adding no slots nor __dict__, with the expected fields */
        if (!PyType_Check(c) || !PyType_IsSubtype((PyTypeObject *)c, &PyTuple_Type)
            || ((PyTypeObject *)c)->tp_basicsize != PyTuple_Type.tp_basicsize
            || ((PyTypeObject *)c)->tp_itemsize != PyTuple_Type.tp_itemsize) {
            PyErr_SetString(PyExc_TypeError, "set_classes takes named tuple classes");
            return NULL;
        }
        PyObject *fields = PyObject_GetAttrString(c, "_fields");
        if (fields == NULL)
            return NULL;
        Py_ssize_t n = PyObject_Length(fields);
        Py_DECREF(fields);
        if (n != sizes[i]) {
            if (!PyErr_Occurred())
                PyErr_Format(PyExc_TypeError, "class %d of set_classes has %zd fields, not %zd", i, n, sizes[i]);
            return NULL;
        }
        classes[i] = (PyTypeObject *)c;
    }
    PyTypeObject **slots[5] = {&body_cls, &topic_cls, &partition_cls, &forgotten_cls, &replica_cls};
    for (int i = 0; i < 5; i++) {
        Py_INCREF(classes[i]);
        Py_XSETREF(*slots[i], classes[i]);
    }
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode", (PyCFunction)(void (*)(void))decode, METH_FASTCALL,
     "decode(body, version): the FetchRequest v4-v18 body as a FetchRequestBody; ValueError when malformed."},
    {"set_classes", set_classes, METH_O,
     "set_classes((FetchRequestBody, FetchTopic, FetchPartition, ForgottenTopic, ReplicaState)): the named "
     "tuples decode builds."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._fetch_request", NULL, -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__fetch_request(void)
{
    PyObject *uuid = PyImport_ImportModule("uuid");
    if (uuid == NULL)
        return NULL;
    PyObject *safe = PyObject_GetAttrString(uuid, "SafeUUID");
    uuid_cls = PyObject_GetAttrString(uuid, "UUID");
    Py_DECREF(uuid);
    if (safe == NULL || uuid_cls == NULL || !PyType_Check(uuid_cls)) {
        Py_XDECREF(safe);
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ImportError, "uuid.UUID is not a class");
        return NULL;
    }
    uuid_unknown = PyObject_GetAttrString(safe, "unknown");
    Py_DECREF(safe);
    str_int = PyUnicode_InternFromString("int");
    str_is_safe = PyUnicode_InternFromString("is_safe");
    empty_str = PyUnicode_FromStringAndSize(NULL, 0);
    empty_tuple = PyTuple_New(0);
    if (uuid_unknown == NULL || str_int == NULL || str_is_safe == NULL || empty_str == NULL || empty_tuple == NULL)
        return NULL;
    return PyModule_Create(&module);
}
