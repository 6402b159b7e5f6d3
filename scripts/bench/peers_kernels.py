"""scripts/bench/peers_kernels.py: our kernels, called from Python. The Dask side of the
data-heavy workloads of scripts/bench/peers (msort, bigpipe, wordcount) runs the very kernels
our servers run: the `data` module (examples/bench/datak.c and wordk.c, built as
BUILD/modules/libdata.so), loaded with ctypes and called through their entry points
lt_kernel_NAME(lt_call_t *). A kernel sees its call only through the table of functions of
lithium/kernel.h (struct lt_call_ops: ninputs, input, param, output, answer, fail); this
module fills that table with ctypes callbacks, so no C of ours is changed or built for it.

Inputs are numpy uint8 arrays (or bytes), borrowed for the call; each output is a fresh numpy
uint8 array that the kernel writes into (lt_call_output hands out new memory, as the
sequential evaluator's malloc does: no pool). ctypes releases the GIL while the kernel runs
and takes it again in each callback (a few per call), so the threads of a Dask worker run
kernels side by side as the threads of one of our servers do. Workers import this module by
name, and load each library once per process."""

import ctypes
import itertools
import threading

import numpy as np

ABI = 2  # lithium/kernel.h's LT_KERNEL_ABI: output_from_input is in the table

_CallP = ctypes.c_void_p
_NINPUTS = ctypes.CFUNCTYPE(ctypes.c_int, _CallP)
_INPUT = ctypes.CFUNCTYPE(ctypes.c_void_p, _CallP, ctypes.c_int, ctypes.POINTER(ctypes.c_size_t))
_PARAM = ctypes.CFUNCTYPE(ctypes.c_void_p, _CallP, ctypes.POINTER(ctypes.c_size_t))
_OUTPUT = ctypes.CFUNCTYPE(ctypes.c_void_p, _CallP, ctypes.c_size_t)
_ANSWER = ctypes.CFUNCTYPE(ctypes.c_int, _CallP, ctypes.c_int)
_FAIL = ctypes.CFUNCTYPE(ctypes.c_int, _CallP, ctypes.c_char_p)
_FROM_INPUT = ctypes.CFUNCTYPE(ctypes.c_void_p, _CallP, ctypes.c_int, ctypes.c_size_t)


class _Ops(ctypes.Structure):
    """struct lt_call_ops of lithium/kernel.h."""
    _fields_ = [("abi", ctypes.c_int), ("ninputs", _NINPUTS), ("input", _INPUT),
                ("param", _PARAM), ("output", _OUTPUT), ("answer", _ANSWER),
                ("fail", _FAIL), ("output_from_input", _FROM_INPUT)]


class _Call(ctypes.Structure):
    """struct lt_call (its ops first, as the kernels read it), then the key of its state."""
    _fields_ = [("ops", ctypes.POINTER(_Ops)), ("key", ctypes.c_size_t)]


class KernelError(RuntimeError):
    """A kernel failed its call (lt_call_fail), with the kernel's message."""


class _State:
    """One call in progress: its inputs (kept alive), parameter, outputs and answer."""

    def __init__(self, inputs, param):
        self.inputs = [np.frombuffer(x, dtype=np.uint8) if isinstance(x, bytes)
                       else np.ascontiguousarray(x).view(np.uint8).reshape(-1) for x in inputs]
        self.param = param
        self.outputs = []
        self.answer = None
        self.error = None


_live = {}
_keys = itertools.count(1)


def _state(c):
    return _live[ctypes.cast(c, ctypes.POINTER(_Call)).contents.key]


def _ninputs(c):
    return len(_state(c).inputs)


def _input(c, i, length):
    s = _state(c)
    if not 0 <= i < len(s.inputs):
        length[0] = 0
        return None
    length[0] = s.inputs[i].size
    return s.inputs[i].ctypes.data


def _param(c, length):
    s = _state(c)
    length[0] = len(s.param) if s.param else 0
    return ctypes.cast(ctypes.c_char_p(s.param), ctypes.c_void_p).value if s.param else None


def _new_output(s, size):
    # numpy gives a 0-byte array a valid pointer too, which is all a kernel may ask of it
    out = np.empty(size, dtype=np.uint8)
    s.outputs.append(out)
    return out.ctypes.data


def _output(c, size):
    return _new_output(_state(c), size)


def _from_input(c, i, size):
    # Dask's values are immutable: a copy of the input, as lithium/kernel.h's fallback makes
    s = _state(c)
    ptr = _new_output(s, size)
    if 0 <= i < len(s.inputs):
        n = min(size, s.inputs[i].size)
        s.outputs[-1][:n] = s.inputs[i][:n]
    return ptr


def _answer(c, truth):
    _state(c).answer = bool(truth)
    return 0


def _fail(c, msg):
    _state(c).error = msg.decode(errors="replace")
    return 1


_OPS = _Ops(ABI, _NINPUTS(_ninputs), _INPUT(_input), _PARAM(_param), _OUTPUT(_output),
            _ANSWER(_answer), _FAIL(_fail), _FROM_INPUT(_from_input))
_libs = {}
_libs_lock = threading.Lock()


def kernel(lib, name):
    """kernel returns the entry point of kernel `name` of the module at path `lib`, loading
    the module once per process."""
    with _libs_lock:
        fn = _libs.get((lib, name))
        if fn is None:
            fn = getattr(ctypes.CDLL(lib), "lt_kernel_" + name)
            fn.argtypes = [ctypes.POINTER(_Call)]
            fn.restype = ctypes.c_int
            _libs[(lib, name)] = fn
        return fn


def call(lib, name, *inputs, param=None):
    """call runs kernel `name` of module `lib` on `inputs` (uint8 arrays or bytes) with the
    text parameter `param` (bytes or None) and returns (outputs, answer): the list of its
    output arrays and its condition answer (None when it gave none). Raises KernelError when
    the kernel fails its call."""
    fn = kernel(lib, name)
    key = next(_keys)
    state = _State(inputs, param)
    _live[key] = state
    try:
        rc = fn(ctypes.byref(_Call(ctypes.pointer(_OPS), key)))
    finally:
        del _live[key]
    if rc != 0 or state.error is not None:
        raise KernelError(f"data:{name}: {state.error or f'returned {rc}'}")
    return state.outputs, state.answer


def one(lib, name, *inputs, param=None):
    """one runs a kernel that makes exactly one output, and returns it."""
    outputs, _ = call(lib, name, *inputs, param=param)
    if len(outputs) != 1:
        raise KernelError(f"data:{name}: {len(outputs)} outputs, not 1")
    return outputs[0]


def many(lib, name, *inputs):
    """many runs a kernel that makes several outputs (a divide, a split), and returns them as
    a tuple."""
    return tuple(call(lib, name, *inputs)[0])


def load(lib, names):
    """load loads the module and the entry points `names` in this process (untimed warm-up
    of a worker, as the servers load a module on first use)."""
    for name in names:
        kernel(lib, name)
    return len(names)
