/* A named tuple built in C, for the request decoders protocol/_fetch_request.c and
 * protocol/_produce_request.c (included by both; each is one extension module of its own). */
#ifndef GREGOR_NAMED_TUPLE_H
#define GREGOR_NAMED_TUPLE_H
#include <Python.h>

/* An instance of the named tuple `cls` holding items[0..n), whose references it takes (also on failure;
 * a NULL item means its making failed, and the error is set). */
static inline PyObject *record(PyTypeObject *cls, PyObject **items, Py_ssize_t n)
{
    PyObject *t = NULL;
    for (Py_ssize_t i = 0; i < n; i++)
        if (items[i] == NULL)
            goto fail;
#if PY_VERSION_HEX < 0x030E0000
    /* What tuple.__new__(cls, items) does (tuple_subtype_new), without the intermediate tuple. */
    t = cls->tp_alloc(cls, n);
    if (t == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, i, items[i]);
    return t;
#else /* 3.14 tuples cache their hash: let tuple.__new__ set them up */
    t = PyTuple_New(n);
    if (t == NULL)
        goto fail;
    for (Py_ssize_t i = 0; i < n; i++)
        PyTuple_SET_ITEM(t, i, items[i]);
    PyObject *args = PyTuple_Pack(1, t);
    Py_DECREF(t);
    if (args == NULL)
        return NULL;
    PyObject *out = PyTuple_Type.tp_new(cls, args, NULL);
    Py_DECREF(args);
    return out;
#endif
fail:
    for (Py_ssize_t i = 0; i < n; i++)
        Py_XDECREF(items[i]);
    return NULL;
}

#endif
