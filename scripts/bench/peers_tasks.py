"""scripts/bench/peers_tasks.py: the functions the Dask workers of scripts/bench/peers.py run,
the counterparts of our kernels: echo (bench:noop "echo"), touch (bench:touch) and blur and oil
(filters:blur and filters:oil), the last two our own C code from liblt_filters_plain.so called
through ctypes. They live in a module of their own so that Dask pickles them by reference and
each worker process imports them (and loads the library) once, where functions of the driver's
__main__ would travel by value with every graph. ctypes releases the GIL during the C call, so
a worker with several threads runs filters side by side."""

import ctypes

import numpy as np

_libs = {}


def echo(data):
    """echo answers a task with its own bytes (bench:noop "echo")."""
    return data


def touch(value):
    """touch makes a new value of its input's size: a copy with the first byte one more
    (bench:touch)."""
    out = value.copy()
    out[0] += 1  # uint8: wraps at 256 as the C kernel's unsigned char does
    return out


def _filters(path):
    lib = _libs.get(path)
    if lib is None:
        lib = ctypes.CDLL(path)
        for fn in (lib.img_filter_blur, lib.img_filter_oil):
            fn.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_uint32, ctypes.c_uint32,
                           ctypes.c_uint32, ctypes.c_void_p]
            fn.restype = ctypes.c_int
        _libs[path] = lib
    return lib


def _run_filter(name, pixels, width, height, radius, lib):
    pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
    if pixels.size != width * height * 3:
        raise ValueError(f"{name}: {pixels.size} bytes for a {width}x{height} RGB image")
    out = np.empty_like(pixels)
    if getattr(_filters(lib), name)(pixels.ctypes.data, width, height, 3, radius,
                                    out.ctypes.data) != 0:
        raise MemoryError(f"{name}: out of memory")
    return out


def blur(pixels, width, height, radius, lib):
    """blur is filters:blur on the RGB bytes `pixels` (a uint8 array), by img_filter_blur of
    the plain library at path `lib`."""
    return _run_filter("img_filter_blur", pixels, width, height, radius, lib)


def oil(pixels, width, height, radius, lib):
    """oil is filters:oil, by img_filter_oil."""
    return _run_filter("img_filter_oil", pixels, width, height, radius, lib)
