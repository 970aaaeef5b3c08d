/* The per-launch fast path of nbxtensor.runtime.cuda_launch.launch, in C.
 *
 * Built at first use by nbxtensor/runtime/fastlaunch.py with Triton's own compile_module_from_src (the compiler
 * and Python headers Triton uses for its launchers). It does exactly the bookkeeping of the Python fast path in
 * cuda_launch.launch, no more: the cache key (kernel id, device, per argument: a tensor's id(dtype) + 16-byte
 * alignment, an int's width class, -1 for a float, "b" / "n" / (type, value) for other scalars; then the planned
 * tail itself or the meta dict as one (names..., values...) tuple), the lookup in cuda_launch._cache, the checks
 * (tensor on the launch device and not freed, hook chains empty, grid in CUDA's limits, current context) and the
 * call of the cached entry's function with the SAME argument tuple the Python path builds:
 *     fn(g0, g1, g2, stream, *head, *call, *tail)
 * (fn: Triton's compiled C `launch`, which takes its arguments as one tuple: METH_VARARGS).
 *
 * fast(kernel, dev_index, grid, args, planned, meta) (dev_index None: launcher.launch / launch_tail, which take the
 * device of the first tensor argument; here it must be a cuda tensor, else PYTHON_PATH) returns
 *   None         the kernel was launched (a hit; counted in hits());
 *   a tuple      the cache key, on a miss or while a launch hook is installed: the caller runs its slow path
 *                (Triton's) with this key;
 *   PYTHON_PATH  anything this code does not handle exactly as Python does (a tensor on another device or freed,
 *                an unhashable or unusual argument, a scratch entry, a grid that is not 1-3 ints in range, another
 *                current context, the Tensor class not yet known, ...): the caller runs the Python fast path,
 *                which raises, launches or goes to Triton as it always did. Nothing was launched.
 * Any surprise goes to PYTHON_PATH, so this code can be slower than it could be but never differ.
 *
 * Speed (host_proxy.py's null CUDA tier): __slots__ members are read by offset once resolved per (type, version),
 * thread-locals through their __dict__ (a missing attribute would raise and clear an AttributeError per launch),
 * the module's globals are remembered while its dict's version tag holds (Python < 3.12), dtype itemsizes and key
 * ints are remembered per dtype, and a tensor without offset passes its storage's own pointer int.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include "structmember.h"

#define MAXCALL 256 /* per-call arguments handled here (tensors and scalars before the tail) */

static PyObject *G;           /* cuda_launch's module globals (bind) */
static PyObject *PYPATH;      /* the PYTHON_PATH sentinel */
static unsigned long long n_hits;
static PyObject *k_cache, *k_Tensor, *k_ENTER, *k_EXIT, *k_ctx_tls, *k_stream_tls;
static PyObject *a_storage, *a_dtype, *a_offset, *a_ptr, *a_itemsize, *a_handle, *a_state, *a_device, *a_index,
    *a_args, *a_calls, *a_ctx, *a_streams, *a_cuda_stream, *a_data_ptr, *a_dict, *a_type;
static PyObject *s_b, *s_n, *s_cuda, *i_m1, *i_0, *i_1;

static int lookup(PyObject *o, PyObject *name, PyObject **res) { /* 1 found, 0 absent, -1 error */
#if PY_VERSION_HEX >= 0x030D0000
  return PyObject_GetOptionalAttr(o, name, res);
#else
  return _PyObject_LookupAttr(o, name, res);
#endif
}

static PyObject *python_path(void) {
  Py_INCREF(PYPATH);
  return PYPATH;
}

/* Attribute reads of __slots__ members (Tensor, Storage, device, Block), as CPython's specialising interpreter does
 * them: the member's offset is resolved once per (type, type version) at each read site; any other kind of
 * attribute, or a type changed since, takes PyObject_GetAttr. Returns a new reference, or NULL with an error. */
typedef struct {
  PyTypeObject *tp;
  unsigned int tag;
  Py_ssize_t off;
} slotc;

static int tag_valid(PyTypeObject *tp) {
#ifdef Py_TPFLAGS_VALID_VERSION_TAG
  if (!PyType_HasFeature(tp, Py_TPFLAGS_VALID_VERSION_TAG))
    return 0;
#endif
  return tp->tp_version_tag != 0;
}

static PyObject *attr(PyObject *o, PyObject *name, slotc *c) { /* c: two entries */
  PyTypeObject *tp = Py_TYPE(o);
  PyObject *d, *v;
  for (int k = 0; k < 2; k++) {
    if (c[k].tp == tp && c[k].tag == tp->tp_version_tag && tag_valid(tp)) {
      v = *(PyObject **)((char *)o + c[k].off);
      if (!v)
        break; /* an unset slot: PyObject_GetAttr raises its AttributeError */
      Py_INCREF(v);
      return v;
    }
  }
  if (tp->tp_getattro == PyObject_GenericGetAttr && (d = _PyType_Lookup(tp, name)) != NULL &&
      Py_TYPE(d) == &PyMemberDescr_Type && ((PyMemberDescrObject *)d)->d_member->type == T_OBJECT_EX &&
      tag_valid(tp)) {
    c[1] = c[0];
    c[0].tp = tp;
    c[0].tag = tp->tp_version_tag;
    c[0].off = ((PyMemberDescrObject *)d)->d_member->offset;
  }
  return PyObject_GetAttr(o, name);
}

static slotc c_storage[2], c_dtype[2], c_offset[2], c_ptr[2], c_device[2], c_index[2], c_handle[2], c_state[2],
    c_type[2];

/* a dtype's itemsize, remembered per dtype object (dtypes are frozen; the table holds a reference to each) */
#define NDT 32
static PyObject *dt_obj[NDT];
static unsigned long long dt_isz[NDT];
static PyObject *dt_key[NDT][2]; /* its key ints: id(dtype) + 0 and + 1 (the same objects in every key) */
static int n_dt;

/* an exact int in [lo, hi] as a C long long; 0 when not */
static int exact_in(PyObject *o, long long lo, long long hi, long long *v) {
  int ovf;
  if (!PyLong_CheckExact(o))
    return 0;
  *v = PyLong_AsLongLongAndOverflow(o, &ovf);
  if (ovf || (*v == -1 && PyErr_Occurred())) {
    PyErr_Clear();
    return 0;
  }
  return lo <= *v && *v <= hi;
}

/* an exact int in [0, 2**63) as a C unsigned long long; 0 when not */
static int exact_u64(PyObject *o, unsigned long long *v) {
  long long w;
  if (!exact_in(o, 0, 0x7FFFFFFFFFFFFFFFLL, &w))
    return 0;
  *v = (unsigned long long)w;
  return 1;
}

/* a dtype's itemsize; returns its row in the table (NDT: not remembered), -1 when not an int */
static int itemsize(PyObject *dt, unsigned long long *isz) {
  PyObject *o, *k0, *k1;
  int k, ok;
  for (k = 0; k < n_dt; k++) {
    if (dt_obj[k] == dt) {
      *isz = dt_isz[k];
      return k;
    }
  }
  if (!(o = PyObject_GetAttr(dt, a_itemsize)))
    return -1;
  ok = exact_u64(o, isz);
  Py_DECREF(o);
  if (!ok)
    return -1;
  if (n_dt == NDT)
    return NDT;
  k0 = PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)dt);
  k1 = PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)dt + 1);
  if (!k0 || !k1) {
    Py_XDECREF(k0);
    Py_XDECREF(k1);
    return -1;
  }
  Py_INCREF(dt);
  dt_obj[n_dt] = dt;
  dt_isz[n_dt] = *isz;
  dt_key[n_dt][0] = k0;
  dt_key[n_dt][1] = k1;
  return n_dt++;
}

/* Triton's specialization class of an exact int, as cuda_launch.arg_spec */
static long int_class(PyObject *a) {
  int ovf;
  long long v = PyLong_AsLongLongAndOverflow(a, &ovf);
  unsigned long long low = PyLong_AsUnsignedLongLongMask(a); /* the value mod 2**64: its low bits, as a & 15 */
  long c;
  if (!ovf && v == 1)
    return 1;
  if (ovf)
    c = 6;
  else
    c = (-0x80000000LL <= v && v <= 0x7FFFFFFFLL) ? 2 : 4;
  return c + ((low & 15) == 0);
}

/* one tensor argument: the pointer (new ref in *p) and its key part (new ref in *k); 0: not for this path */
static int tensor_arg(PyObject *a, long long dev, PyObject **p, PyObject **k) {
  PyObject *st = NULL, *dt = NULL, *o = NULL, *h = NULL, *d = NULL, *po = NULL;
  unsigned long long ptr, isz, off, addr;
  long long v;
  int ok = 0, row, al;
  if (!(st = attr(a, a_storage, c_storage)) || !(dt = attr(a, a_dtype, c_dtype)))
    goto done;
  if (!(po = attr(st, a_ptr, c_ptr)) || !exact_u64(po, &ptr))
    goto done;
  if (!(o = attr(a, a_offset, c_offset)) || !exact_u64(o, &off))
    goto done;
  Py_CLEAR(o);
  if ((row = itemsize(dt, &isz)) < 0)
    goto done;
  if (__builtin_mul_overflow(off, isz, &off) || __builtin_add_overflow(ptr, off, &addr))
    goto done;
  if (!(d = attr(st, a_device, c_device)) || !(o = attr(d, a_index, c_index)) || !exact_in(o, dev, dev, &v))
    goto done; /* another device (or not an int): Python's validate names it */
  Py_CLEAR(o);
  if (!(h = attr(st, a_handle, c_handle)))
    goto done;
  if (h != Py_None) {
    if (!(o = attr(h, a_state, c_state)) || !PyLong_CheckExact(o))
      goto done;
    v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred())
      goto done;
    if (v == 3) /* RETIRED: use after free, which Python's validate names */
      goto done;
  }
  if (addr == ptr) { /* no offset: the storage's own int */
    Py_INCREF(po);
    *p = po;
  } else if (!(*p = PyLong_FromUnsignedLongLong(addr))) {
    goto done;
  }
  /* id(dtype) + aligned: ids are multiples of 8, so one int holds both */
  al = (addr & 15) == 0;
  if (row < NDT) {
    *k = dt_key[row][al];
    Py_INCREF(*k);
  } else if (!(*k = PyLong_FromUnsignedLongLong((unsigned long long)(uintptr_t)dt + al))) {
    Py_CLEAR(*p);
    goto done;
  }
  ok = 1;
done:
  Py_XDECREF(po);
  if (!ok)
    PyErr_Clear();
  Py_XDECREF(st);
  Py_XDECREF(dt);
  Py_XDECREF(o);
  Py_XDECREF(h);
  Py_XDECREF(d);
  return ok;
}

/* getattr(tls, name, None) for a threading.local, through its per-thread __dict__ (a missing name raises no
 * AttributeError inside, which costs more than the rest of a launch): 1 found (new ref), 0 absent, -1 error */
static int tls_get(PyObject *tls, PyObject *name, PyObject **res) {
  PyObject *d = PyObject_GetAttr(tls, a_dict), *v;
  *res = NULL;
  if (!d)
    return -1;
  if (!PyDict_Check(d)) {
    Py_DECREF(d);
    return -1;
  }
  v = PyDict_GetItemWithError(d, name);
  Py_XINCREF(v);
  Py_DECREF(d);
  if (!v)
    return PyErr_Occurred() ? -1 : 0;
  *res = v;
  return 1;
}

static PyObject *global(PyObject *name) { /* borrowed; NULL (no error set) when absent */
  PyObject *v = PyDict_GetItemWithError(G, name);
  if (!v)
    PyErr_Clear();
  return v;
}

/* The six module globals a launch reads (borrowed). Python < 3.12: remembered while the module dict's version tag
 * stays the same (any assignment to a module global changes it), else looked up on every launch. */
enum { G_CACHE, G_TENSOR, G_ENTER, G_EXIT, G_CTX, G_STREAM, NG };
static PyObject *gv[NG];
#if PY_VERSION_HEX < 0x030C0000
static uint64_t gv_tag;
#endif

static void load_globals(void) {
  PyObject *names[NG] = {k_cache, k_Tensor, k_ENTER, k_EXIT, k_ctx_tls, k_stream_tls};
#if PY_VERSION_HEX < 0x030C0000
  uint64_t tag = ((PyDictObject *)G)->ma_version_tag;
  if (tag == gv_tag && tag != 0)
    return;
#endif
  for (int k = 0; k < NG; k++)
    gv[k] = global(names[k]);
#if PY_VERSION_HEX < 0x030C0000
  gv_tag = ((PyDictObject *)G)->ma_version_tag; /* a lookup never changes it, but take the one after */
  if (gv_tag != tag)
    gv_tag = 0;
#endif
}

/* the current stream handle of device `dev` (new ref), as cuda_launch: 0 unless this thread set one; NULL: not
 * handled here (no error set) */
static PyObject *current_stream(PyObject *dev) {
  PyObject *tls = gv[G_STREAM], *m = NULL, *s, *r = NULL;
  int f;
  if (!tls)
    return NULL;
  f = tls_get(tls, a_streams, &m);
  if (f < 0) {
    PyErr_Clear();
    return NULL;
  }
  if (f == 0 || m == Py_None || (PyDict_CheckExact(m) && PyDict_GET_SIZE(m) == 0)) {
    Py_XDECREF(m);
    Py_INCREF(i_0);
    return i_0;
  }
  if (PyDict_CheckExact(m)) {
    s = PyDict_GetItemWithError(m, dev);
    if (s == NULL || s == Py_None) {
      if (!PyErr_Occurred()) {
        Py_INCREF(i_0);
        r = i_0;
      }
    } else {
      r = PyObject_GetAttr(s, a_cuda_stream);
    }
  }
  PyErr_Clear();
  Py_DECREF(m);
  return r;
}

/* _ENTER.calls or _EXIT.calls: 1 set, 0 empty, -1 not handled here */
static int hooks_set(void) {
  for (int j = 0; j < 2; j++) {
    PyObject *chain = gv[j ? G_EXIT : G_ENTER], *calls;
    int t;
    if (!chain || !(calls = PyObject_GetAttr(chain, a_calls))) {
      PyErr_Clear();
      return -1;
    }
    t = PyObject_IsTrue(calls);
    Py_DECREF(calls);
    if (t < 0) {
      PyErr_Clear();
      return -1;
    }
    if (t)
      return 1;
  }
  return 0;
}

/* launcher.launch's choice of device: the first argument with a storage; here it must be a Tensor (scalars before it
 * are skipped as Python skips them) on a "cuda" device. Its index (new ref), or NULL (no error): the Python path */
static PyObject *first_cuda_index(PyObject *args, PyObject *T) {
  Py_ssize_t n = PyTuple_GET_SIZE(args), j;
  for (j = 0; j < n; j++) {
    PyObject *a = PyTuple_GET_ITEM(args, j), *st, *d = NULL, *ty = NULL, *r = NULL;
    if (PyLong_CheckExact(a) || PyFloat_CheckExact(a) || a == Py_True || a == Py_False || a == Py_None)
      continue;
    if (Py_TYPE(a) != (PyTypeObject *)T || !(st = attr(a, a_storage, c_storage)))
      break;
    if ((d = attr(st, a_device, c_device)) && (ty = attr(d, a_type, c_type)) && PyUnicode_CheckExact(ty) &&
        (ty == s_cuda || PyUnicode_Compare(ty, s_cuda) == 0))
      r = attr(d, a_index, c_index);
    Py_DECREF(st);
    Py_XDECREF(d);
    Py_XDECREF(ty);
    PyErr_Clear();
    return r;
  }
  PyErr_Clear();
  return NULL;
}

static PyObject *fast_impl(PyObject *const *argv);

static PyObject *fast(PyObject *self, PyObject *const *argv, Py_ssize_t argc) {
  PyObject *v[6], *T, *r;
  (void)self;
  if (argc != 6) {
    PyErr_SetString(PyExc_TypeError, "fast(kernel, dev_index, grid, args, planned, meta) takes 6 arguments");
    return NULL;
  }
  if (argv[1] != Py_None || !G)
    return fast_impl(argv);
  /* no device given (launcher.launch, launcher.launch_tail): the first tensor's, when it is a cuda device */
  load_globals();
  if (!PyTuple_CheckExact(argv[3]) || !(T = gv[G_TENSOR]) || !PyType_Check(T))
    return python_path();
  memcpy(v, argv, sizeof(v));
  if (!(v[1] = first_cuda_index(argv[3], T)))
    return python_path();
  r = fast_impl(v);
  Py_DECREF(v[1]);
  return r;
}

static PyObject *fast_impl(PyObject *const *argv) {
  PyObject *kernel, *devo, *grid, *args, *planned, *meta;
  PyObject *call[MAXCALL];
  PyObject *key = NULL, *res = NULL, *cache, *T, *entry, *fn, *head, *tail, *pargs = NULL, *stream = NULL;
  PyObject *g[3], *ct = NULL, *ctx = NULL;
  Py_ssize_t n, nc = 0, j, q, extra;
  long long dev, v;
  int f;
  kernel = argv[0], devo = argv[1], grid = argv[2], args = argv[3], planned = argv[4], meta = argv[5];
  if (!G || !exact_in(devo, 0, 0x7FFFFFFF, &dev) || !PyTuple_CheckExact(args))
    return python_path();
  load_globals();
  cache = gv[G_CACHE];
  T = gv[G_TENSOR];
  if (!cache || !PyDict_CheckExact(cache) || !T || !PyType_Check(T))
    return python_path(); /* the Tensor class is learnt by the Python path */
  n = PyTuple_GET_SIZE(args);
  if (n > MAXCALL)
    return python_path();
  extra = planned != Py_None || (PyDict_CheckExact(meta) && PyDict_GET_SIZE(meta) > 0);
  if (planned == Py_None && !PyDict_CheckExact(meta))
    return python_path();
  if (!(key = PyTuple_New(2 + n + extra)))
    return NULL;
  if (!(res = PyLong_FromVoidPtr(kernel)))
    goto fail;
  PyTuple_SET_ITEM(key, 0, res);
  Py_INCREF(devo);
  PyTuple_SET_ITEM(key, 1, devo);
  res = NULL;
  for (j = 0; j < n; j++) {
    PyObject *a = PyTuple_GET_ITEM(args, j), *k, *p, *found = NULL;
    if (Py_TYPE(a) == (PyTypeObject *)T) {
      if (!tensor_arg(a, dev, &p, &k))
        goto pypath;
    } else if (PyLong_CheckExact(a)) {
      if (!(k = PyLong_FromLong(int_class(a))))
        goto fail;
      Py_INCREF(a);
      p = a;
    } else if (PyFloat_CheckExact(a)) {
      Py_INCREF(i_m1);
      k = i_m1;
      Py_INCREF(a);
      p = a;
    } else if (a == Py_True || a == Py_False || a == Py_None) {
      k = a == Py_None ? s_n : s_b;
      Py_INCREF(k);
      Py_INCREF(a);
      p = a;
    } else {
      /* a tensor of a class not yet learnt, a pointer-like object (validated per launch): the Python path */
      if ((f = lookup(a, a_storage, &found)) != 0 || (f = lookup(a, a_data_ptr, &found)) != 0) {
        Py_XDECREF(found);
        PyErr_Clear();
        goto pypath;
      }
      if (!(k = PyTuple_Pack(2, (PyObject *)Py_TYPE(a), a)))
        goto fail;
      Py_INCREF(a);
      p = a;
    }
    PyTuple_SET_ITEM(key, 2 + j, k);
    call[nc++] = p;
  }
  if (planned != Py_None) {
    Py_INCREF(planned);
    PyTuple_SET_ITEM(key, 2 + n, planned);
  } else if (extra) { /* (*meta, *meta.values()): PyDict_Next walks the dict in iteration order */
    PyObject *mk, *mv, *t;
    Py_ssize_t pos = 0, m = PyDict_GET_SIZE(meta), i = 0;
    if (!(t = PyTuple_New(2 * m)))
      goto fail;
    while (PyDict_Next(meta, &pos, &mk, &mv)) {
      if (i >= m) {
        Py_DECREF(t);
        goto pypath;
      }
      Py_INCREF(mk);
      Py_INCREF(mv);
      PyTuple_SET_ITEM(t, i, mk);
      PyTuple_SET_ITEM(t, m + i, mv);
      i++;
    }
    if (i != m) {
      Py_DECREF(t);
      goto pypath;
    }
    PyTuple_SET_ITEM(key, 2 + n, t);
  }
  Py_INCREF(cache); /* hashing may run Python code */
  entry = PyDict_GetItemWithError(cache, key);
  Py_XINCREF(entry); /* fn, head, tail stay alive whatever runs next */
  Py_DECREF(cache);
  if (!entry) {
    if (PyErr_Occurred()) {
      if (!PyErr_ExceptionMatches(PyExc_TypeError))
        goto fail;
      PyErr_Clear(); /* unhashable: Python's path sends it to Triton every time */
      goto pypath;
    }
    goto miss;
  }
  if ((f = hooks_set()) < 0)
    goto pypath_entry;
  if (f) { /* a profiler's launch hooks: Triton's path, which calls them */
    Py_DECREF(entry);
    goto miss;
  }
  if (!PyTuple_CheckExact(entry) || PyTuple_GET_SIZE(entry) != 4)
    goto pypath_entry;
  fn = PyTuple_GET_ITEM(entry, 0);
  head = PyTuple_GET_ITEM(entry, 1);
  tail = PyTuple_GET_ITEM(entry, 2);
  if (PyTuple_GET_ITEM(entry, 3) != Py_False || !PyTuple_CheckExact(head) || !PyTuple_CheckExact(tail))
    goto pypath_entry; /* scratch entries: Triton's launcher object, set up by the Python path */
  /* the grid: an int or a tuple of 1 to 3 ints in CUDA's limits, as the Python path accepts it */
  if (PyLong_CheckExact(grid)) {
    g[0] = grid, g[1] = g[2] = i_1;
    if (!exact_in(grid, 0, 0x7FFFFFFF, &v))
      goto pypath_entry;
  } else if (PyTuple_CheckExact(grid) && (q = PyTuple_GET_SIZE(grid)) >= 1 && q <= 3) {
    static const long long lim[3] = {0x7FFFFFFF, 65535, 65535};
    for (j = 0; j < 3; j++) {
      g[j] = j < q ? PyTuple_GET_ITEM(grid, j) : i_1;
      if (!exact_in(g[j], 0, lim[j], &v))
        goto pypath_entry;
    }
  } else {
    goto pypath_entry;
  }
  /* getattr(_ctx_tls, "ctx", -1) != i: the Python path makes the context current */
  if (!(ct = gv[G_CTX]) || (f = tls_get(ct, a_ctx, &ctx)) <= 0 || !exact_in(ctx, dev, dev, &v)) {
    Py_XDECREF(ctx);
    PyErr_Clear();
    goto pypath_entry;
  }
  Py_DECREF(ctx);
  if (!(stream = current_stream(devo)))
    goto pypath_entry;
  if (planned != Py_None) {
    if (!(pargs = PyObject_GetAttr(planned, a_args)) || !PyTuple_CheckExact(pargs)) {
      PyErr_Clear();
      goto pypath_entry;
    }
  }
  {
    Py_ssize_t nh = PyTuple_GET_SIZE(head), nt = PyTuple_GET_SIZE(tail), np = pargs ? PyTuple_GET_SIZE(pargs) : 0;
    PyObject *t = PyTuple_New(4 + nh + nc + np + nt), *r, **out;
    if (!t)
      goto fail_entry;
    out = &PyTuple_GET_ITEM(t, 0);
    for (j = 0; j < 3; j++) {
      Py_INCREF(g[j]);
      *out++ = g[j];
    }
    *out++ = stream;
    stream = NULL;
    for (j = 0; j < nh; j++) {
      Py_INCREF(PyTuple_GET_ITEM(head, j));
      *out++ = PyTuple_GET_ITEM(head, j);
    }
    for (j = 0; j < nc; j++)
      *out++ = call[j]; /* the references move into the tuple */
    nc = 0;
    for (j = 0; j < np; j++) {
      Py_INCREF(PyTuple_GET_ITEM(pargs, j));
      *out++ = PyTuple_GET_ITEM(pargs, j);
    }
    for (j = 0; j < nt; j++) {
      Py_INCREF(PyTuple_GET_ITEM(tail, j));
      *out++ = PyTuple_GET_ITEM(tail, j);
    }
    r = PyObject_Call(fn, t, NULL);
    Py_DECREF(t);
    Py_XDECREF(pargs);
    Py_DECREF(entry);
    Py_DECREF(key);
    if (!r)
      return NULL;
    Py_DECREF(r);
    n_hits++;
    Py_RETURN_NONE;
  }
miss:
  for (j = 0; j < nc; j++)
    Py_DECREF(call[j]);
  return key;
pypath_entry:
  Py_DECREF(entry);
pypath:
  for (j = 0; j < nc; j++)
    Py_DECREF(call[j]);
  Py_XDECREF(key);
  Py_XDECREF(pargs);
  Py_XDECREF(stream);
  return python_path();
fail_entry:
  Py_DECREF(entry);
fail:
  for (j = 0; j < nc; j++)
    Py_DECREF(call[j]);
  Py_XDECREF(key);
  Py_XDECREF(pargs);
  Py_XDECREF(stream);
  return NULL;
}

static PyObject *bind(PyObject *self, PyObject *globals) {
  (void)self;
  if (!PyDict_Check(globals)) {
    PyErr_SetString(PyExc_TypeError, "bind: expected the launcher module's globals (a dict)");
    return NULL;
  }
  Py_INCREF(globals);
  Py_XSETREF(G, globals);
#if PY_VERSION_HEX < 0x030C0000
  gv_tag = 0; /* what was remembered belongs to the dict bound before */
#endif
  Py_RETURN_NONE;
}

static PyObject *hits(PyObject *self, PyObject *unused) {
  (void)self, (void)unused;
  return PyLong_FromUnsignedLongLong(n_hits);
}

static PyObject *noop(PyObject *self, PyObject *args) { /* a launch function that launches nothing (benchmarks) */
  (void)self, (void)args;
  Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"fast", (PyCFunction)(void (*)(void))fast, METH_FASTCALL,
     "fast(kernel, dev_index, grid, args, planned, meta) -> None (launched) | key tuple (miss) | PYTHON_PATH; "
     "dev_index None: the device of the first tensor argument, which must be a cuda tensor"},
    {"bind", bind, METH_O, "bind(globals): the launcher module whose _cache, _Tensor, ... fast() reads"},
    {"hits", hits, METH_NOARGS, "launches made by fast()"},
    {"noop", noop, METH_VARARGS, "noop(*args) -> None: a launch function that launches nothing"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_nbx_fastlaunch", NULL, -1, methods, NULL, NULL, NULL, NULL};

#define INTERN(var, s)                                                                                               \
  if (!(var = PyUnicode_InternFromString(s)))                                                                      \
    return NULL;

PyMODINIT_FUNC PyInit__nbx_fastlaunch(void) {
  PyObject *m;
  INTERN(k_cache, "_cache");
  INTERN(k_Tensor, "_Tensor");
  INTERN(k_ENTER, "_ENTER");
  INTERN(k_EXIT, "_EXIT");
  INTERN(k_ctx_tls, "_ctx_tls");
  INTERN(k_stream_tls, "_stream_tls");
  INTERN(a_storage, "_storage");
  INTERN(a_dtype, "_dtype");
  INTERN(a_offset, "_offset");
  INTERN(a_ptr, "ptr");
  INTERN(a_itemsize, "itemsize");
  INTERN(a_handle, "handle");
  INTERN(a_state, "state");
  INTERN(a_device, "device");
  INTERN(a_index, "index");
  INTERN(a_args, "args");
  INTERN(a_calls, "calls");
  INTERN(a_ctx, "ctx");
  INTERN(a_streams, "streams");
  INTERN(a_cuda_stream, "cuda_stream");
  INTERN(a_data_ptr, "data_ptr");
  INTERN(a_dict, "__dict__");
  INTERN(a_type, "type");
  INTERN(s_cuda, "cuda");
  INTERN(s_b, "b");
  INTERN(s_n, "n");
  if (!(i_m1 = PyLong_FromLong(-1)) || !(i_0 = PyLong_FromLong(0)) || !(i_1 = PyLong_FromLong(1)))
    return NULL;
  if (!(m = PyModule_Create(&moddef)))
    return NULL;
  if (!PYPATH && !(PYPATH = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type)))
    return NULL;
  Py_INCREF(PYPATH);
  if (PyModule_AddObject(m, "PYTHON_PATH", PYPATH) < 0) {
    Py_DECREF(PYPATH);
    Py_DECREF(m);
    return NULL;
  }
  return m;
}
