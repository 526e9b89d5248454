"""The example kernels upstream's compiled extension: 24 C++ translation units and the setup.py that builds them.

It makes the example's wheel build a real one, so a compiler cache has something to do: `vllm_xpu_kernels._kernels`
is an abi3 extension module whose kernels are small templated host routines (a blocked reduction, a pair rotation,
a histogram), each translation unit instantiating them for its own types and constants. Like the real upstreams'
setup.py, this one puts `sccache` (else `ccache`) in front of the compiler when it is on PATH, and compiles the
sources in parallel (MAX_JOBS, default: every CPU).
"""

from __future__ import annotations

TRANSLATION_UNITS = 24
_TYPES = ("float", "double", "int", "long", "short", "unsigned")

_KERNEL = """\
// Kernel {n:02d} of the example extension: templated host routines, instantiated for this unit's types.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "kernels.h"

namespace kernels {{
namespace {{

template <typename T, int Unroll>
T blocked_reduce(const std::vector<T>& values) {{
  std::array<T, Unroll> partial{{}};
  for (std::size_t i = 0; i < values.size(); ++i) partial[i % Unroll] += values[i];
  return std::accumulate(partial.begin(), partial.end(), T{{}});
}}

template <typename T>
std::vector<T> rotate_pairs(std::vector<T> values, double angle) {{
  const double c = std::cos(angle), s = std::sin(angle);
  for (std::size_t i = 0; i + 1 < values.size(); i += 2) {{
    const double x = static_cast<double>(values[i]), y = static_cast<double>(values[i + 1]);
    values[i] = static_cast<T>(x * c - y * s);
    values[i + 1] = static_cast<T>(x * s + y * c);
  }}
  return values;
}}

template <typename K, typename V>
std::map<K, V> histogram(const std::vector<K>& keys, const std::vector<V>& weights) {{
  std::map<K, V> out;
  for (std::size_t i = 0; i < keys.size(); ++i) out[keys[i]] += weights[i % weights.size()];
  return out;
}}

template <typename T>
std::int64_t body(int seed) {{
  std::vector<T> values({size} + seed % 7);
  std::iota(values.begin(), values.end(), static_cast<T>(seed % 5));
  values = rotate_pairs(values, {angle} * seed);
  std::sort(values.begin(), values.end(), std::greater<T>());
  std::vector<int> keys(values.size());
  std::transform(values.begin(), values.end(), keys.begin(), [](T v) {{ return static_cast<int>(v) % {buckets}; }});
  std::map<std::string, T> named;
  for (const auto& [key, weight] : histogram(keys, values)) named[std::to_string(key)] = weight;
  const T total = blocked_reduce<T, 4>(values) + blocked_reduce<T, 8>(values);
  return static_cast<std::int64_t>(total) + static_cast<std::int64_t>(named.size());
}}

}}  // namespace

std::int64_t kernel_{n:02d}(int seed) {{ return body<{first}>(seed) + body<{second}>(seed + {n}); }}

}}  // namespace kernels
"""

_MODULE = """\
// The Python module: checksum(seed) runs every kernel (abi3: the limited API of Python 3.8).
#define Py_LIMITED_API 0x03080000
#include <Python.h>

#include "kernels.h"

static PyObject* checksum(PyObject*, PyObject* args) {{
  int seed = 0;
  if (!PyArg_ParseTuple(args, "i", &seed)) return nullptr;
  long long total = 0;
{calls}
  return PyLong_FromLongLong(total);
}}

static PyMethodDef methods[] = {{
    {{"checksum", checksum, METH_VARARGS, "Sum of every kernel's result for seed."}},
    {{nullptr, nullptr, 0, nullptr}},
}};

static PyModuleDef module = {{PyModuleDef_HEAD_INIT, "_kernels", nullptr, -1, methods}};

PyMODINIT_FUNC PyInit__kernels(void) {{ return PyModule_Create(&module); }}
"""

SETUP_PY = """\
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# Like the real upstreams: a compiler cache in front of the compiler when one is on PATH.
LAUNCHER = shutil.which("sccache") or shutil.which("ccache")
JOBS = int(os.environ.get("MAX_JOBS") or os.cpu_count() or 1)


class BuildExt(build_ext):
    def build_extensions(self):
        compiler = self.compiler
        if LAUNCHER:
            for attr in ("compiler_so", "compiler_so_cxx"):  # compiles only: links stay as they are
                command = getattr(compiler, attr, None)
                if isinstance(command, list) and command[:1] != [LAUNCHER]:
                    setattr(compiler, attr, [LAUNCHER, *command])
        serial = compiler._compile

        def compile_all(sources, output_dir=None, macros=None, include_dirs=None, debug=0, extra_preargs=None,
                        extra_postargs=None, depends=None):
            macros, objects, extra_postargs, pp_opts, build = compiler._setup_compile(
                output_dir, macros, include_dirs, sources, depends, extra_postargs)
            cc_args = compiler._get_cc_args(pp_opts, debug, extra_preargs)
            with ThreadPoolExecutor(JOBS) as pool:
                list(pool.map(lambda obj: serial(obj, *build[obj], cc_args, extra_postargs, pp_opts), objects))
            return objects

        compiler.compile = compile_all
        super().build_extensions()


kernels = Extension("vllm_xpu_kernels._kernels", sources=sorted(glob("csrc/ext/*.cpp")), include_dirs=["csrc/ext"],
                    extra_compile_args=["-std=c++17", "-O2", "-g0"], language="c++", py_limited_api=True,
                    define_macros=[("Py_LIMITED_API", "0x03080000")])
setup(name="vllm-xpu-kernels", version=os.environ.get("SETUPTOOLS_SCM_PRETEND_VERSION", "0.0.0"),
      packages=["vllm_xpu_kernels"], ext_modules=[kernels], cmdclass={"build_ext": BuildExt})
"""


def kernel_source(n: int) -> str:
    """Translation unit `n`: its own two types, sizes and constants, so no two hash alike in a compiler cache."""
    return _KERNEL.format(n=n, first=_TYPES[n % len(_TYPES)], second=_TYPES[(n + 2) % len(_TYPES)],
                          size=48 + n, angle=0.25 + n / 100, buckets=7 + n % 5)


def files() -> dict[str, str]:
    """Every file the extension adds to the example kernels upstream (setup.py included, replacing its own)."""
    header = "// The example extension's kernels.\n#pragma once\n#include <cstdint>\n\nnamespace kernels {\n" + "".join(
        f"std::int64_t kernel_{n:02d}(int seed);\n" for n in range(TRANSLATION_UNITS)) + "}  // namespace kernels\n"
    calls = "".join(f"  total += kernels::kernel_{n:02d}(seed);\n" for n in range(TRANSLATION_UNITS))
    sources = {f"csrc/ext/kernel_{n:02d}.cpp": kernel_source(n) for n in range(TRANSLATION_UNITS)}
    return {**sources, "csrc/ext/kernels.h": header, "csrc/ext/module.cpp": _MODULE.format(calls=calls),
            "setup.py": SETUP_PY}
