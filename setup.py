"""Build the C engine as a plain shared library (libgittune.so) for ctypes.

setup.cfg cannot declare C code; everything else lives there.
"""
import glob
import os

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext


class build_plain_library(build_ext):
    """A ctypes library, not a CPython extension: no ABI tag, no PyInit_*."""

    def get_ext_filename(self, ext_name):
        return os.path.join(*ext_name.split(".")) + ".so"

    def get_export_symbols(self, ext):
        return ext.export_symbols


engine_sources = sorted(
    path for path in glob.glob("engine/*.c")
)

setup(
    ext_modules=[
        Extension(
            "git_tune.engine.libgittune",
            sources=engine_sources,
            depends=glob.glob("engine/*.h"),
            extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-O2", "-pthread", "-Wall"],
            extra_link_args=["-pthread"],
        )
    ],
    cmdclass={"build_ext": build_plain_library},
)
