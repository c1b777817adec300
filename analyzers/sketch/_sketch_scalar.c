/* The C fast path of QuantileSketch.add(float): a base class that buffers finite floats.
 *
 * Why C: the target is 10 M scalar adds/s (../shared/sketches.md). On CPython 3.11 an empty Python
 * method is called about 14.7 M times/s, so no Python body for `add` can get there. A method
 * written in C is called the way list.append is, and its body here is a few instructions.
 *
 * How it works: QuantileSketch (analyzers/sketch/core.py) subclasses ScalarBuffer. `add(value)` keeps
 * the common case in C: when `value` is exactly a float (not a subclass such as numpy.float64) and
 * finite, its double goes into a buffer; when SCALAR_BUFFER doubles are there, it calls the Python
 * method `self._flush()`, which takes them with `_take_scalars()` (as bytes) and ingests them in one
 * vectorized pass. Any other value (NaN, inf, int, numpy scalars, arrays, wrong types) goes to the
 * Python method `self._add_other(value)`, which keeps every rule of the sketch (NaN counted, inf
 * refused, ints converted). analyzers/sketch/scalar.py is this same type in pure Python, used where
 * this file could not be compiled; tests prove the two give bit-identical sketches.
 *
 * This file must never decide anything about values beyond "exact float and finite": every other
 * rule lives in Python, once. Plain CPython C API only (no numpy C API): it builds with a compiler
 * and the Python headers alone.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* PyMemberDef and T_PYSSIZET on Python 3.11 */
#include <math.h>

#define SCALAR_BUFFER 4096 /* values per flush; must equal sketch_scalar.py's (a test checks) */
#define FIRST_CAPACITY 16  /* the buffer grows 16, 32, ..., 4096 doubles, so a sketch given one
                              scalar holds 128 bytes, not 32 KiB (pane sketches hold few values) */

typedef struct {
    PyObject_HEAD
    Py_ssize_t count;    /* values buffered, not yet ingested */
    Py_ssize_t capacity; /* doubles allocated; 0 while there is no buffer */
    double *values;      /* from PyMem_Realloc; NULL while there is no buffer */
} ScalarBuffer;

static PyObject *flush_name;     /* "_flush", interned once at import */
static PyObject *add_other_name; /* "_add_other" */

static PyObject *
ScalarBuffer_new(PyTypeObject *type, PyObject *Py_UNUSED(args), PyObject *Py_UNUSED(kwds))
{
    /* Arguments are the subclass's (its __init__ reads them). tp_alloc zero-fills the object, so
       every instance starts with count 0 and no buffer, including QuantileSketch.__new__(cls). */
    return type->tp_alloc(type, 0);
}

static void
ScalarBuffer_dealloc(ScalarBuffer *self)
{
    PyMem_Free(self->values);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* Make room for one more value. The buffer is only ever full here if an earlier `_flush()` raised
   (for example MemoryError): flush again first, as the Python fallback does. */
static int
make_room(ScalarBuffer *self)
{
    if (self->count == SCALAR_BUFFER) {
        PyObject *result = PyObject_CallMethodNoArgs((PyObject *)self, flush_name);
        if (result == NULL) {
            return -1;
        }
        Py_DECREF(result);
        if (self->count == SCALAR_BUFFER) {
            PyErr_SetString(PyExc_RuntimeError, "_flush() left the scalar buffer full");
            return -1;
        }
    }
    if (self->count < self->capacity) {
        return 0;
    }
    Py_ssize_t capacity = self->capacity ? 2 * self->capacity : FIRST_CAPACITY;
    double *values = PyMem_Realloc(self->values, (size_t)capacity * sizeof(double));
    if (values == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->values = values;
    self->capacity = capacity;
    return 0;
}

static PyObject *
ScalarBuffer_add(ScalarBuffer *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    /* One argument, by position or as `values=` (the signature of the Python fallback). */
    PyObject *value;
    if (nargs == 1 && kwnames == NULL) {
        value = args[0];
    }
    else if (nargs == 0 && kwnames != NULL && PyTuple_GET_SIZE(kwnames) == 1 &&
             PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "values") == 0) {
        value = args[0];
    }
    else {
        PyErr_SetString(PyExc_TypeError, "add() takes exactly one argument, values");
        return NULL;
    }
    /* The fast path: exactly a float, and finite (NaN and inf fail isfinite). */
    if (PyFloat_CheckExact(value) && isfinite(PyFloat_AS_DOUBLE(value))) {
        if (self->count == self->capacity && make_room(self) < 0) {
            return NULL;
        }
        self->values[self->count++] = PyFloat_AS_DOUBLE(value);
        if (self->count == SCALAR_BUFFER) {
            PyObject *result = PyObject_CallMethodNoArgs((PyObject *)self, flush_name);
            if (result == NULL) {
                return NULL;
            }
            Py_DECREF(result);
        }
        Py_RETURN_NONE;
    }
    /* Everything else keeps its Python semantics. */
    return PyObject_CallMethodOneArg((PyObject *)self, add_other_name, value);
}

static PyObject *
ScalarBuffer_take_scalars(ScalarBuffer *self, PyObject *Py_UNUSED(ignored))
{
    PyObject *taken = PyBytes_FromStringAndSize(
        (const char *)self->values, self->count * (Py_ssize_t)sizeof(double));
    if (taken == NULL) {
        return NULL;
    }
    /* A full buffer means a caller streaming scalars: keep it for the next SCALAR_BUFFER values.
       Any other take (a read, a merge, a copy) frees it, so sketches at rest hold no buffer. */
    if (self->count < SCALAR_BUFFER) {
        PyMem_Free(self->values);
        self->values = NULL;
        self->capacity = 0;
    }
    self->count = 0;
    return taken;
}

static PyMethodDef ScalarBuffer_methods[] = {
    {"add", (PyCFunction)(void (*)(void))ScalarBuffer_add, METH_FASTCALL | METH_KEYWORDS,
     "add($self, values)\n--\n\n"
     "Add one value or an array of values (see the class doc for NaN and infinities)."},
    {"_take_scalars", (PyCFunction)ScalarBuffer_take_scalars, METH_NOARGS,
     "The buffered values as native float64 bytes, in the order added; the buffer is emptied."},
    {NULL, NULL, 0, NULL},
};

static PyMemberDef ScalarBuffer_members[] = {
    {"_scalar_count", T_PYSSIZET, offsetof(ScalarBuffer, count), READONLY,
     "Values buffered by add(float), not yet ingested."},
    {NULL, 0, 0, 0, NULL},
};

static PyTypeObject ScalarBufferType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "analyzers.sketch._sketch_scalar.ScalarBuffer",
    .tp_doc = "Buffers finite floats given to add() in C; the subclass defines _flush and _add_other.",
    .tp_basicsize = sizeof(ScalarBuffer),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_new = ScalarBuffer_new,
    .tp_dealloc = (destructor)ScalarBuffer_dealloc,
    .tp_methods = ScalarBuffer_methods,
    .tp_members = ScalarBuffer_members,
};

static struct PyModuleDef sketch_scalar_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "analyzers.sketch._sketch_scalar",
    .m_doc = "The C fast path of QuantileSketch.add(float); see analyzers/sketch/_sketch_scalar.c.",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__sketch_scalar(void)
{
    flush_name = PyUnicode_InternFromString("_flush");
    add_other_name = PyUnicode_InternFromString("_add_other");
    if (flush_name == NULL || add_other_name == NULL || PyType_Ready(&ScalarBufferType) < 0) {
        return NULL;
    }
    PyObject *module = PyModule_Create(&sketch_scalar_module);
    if (module == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(module, "ScalarBuffer", (PyObject *)&ScalarBufferType) < 0 ||
        PyModule_AddIntConstant(module, "SCALAR_BUFFER", SCALAR_BUFFER) < 0) {
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
