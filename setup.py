"""Build hook: `pip install .` runs the C build (make) and ships libdattn.so inside the
`dattn` package, so the installed package needs no source tree. Metadata lives in
pyproject.toml. Set DATTN_MAKE_ARGS (e.g. "CUDA=0" or "-j8") to pass options to make."""

import os
import shlex
import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # older setuptools
    from wheel.bdist_wheel import bdist_wheel

ROOT = Path(__file__).resolve().parent


class BuildWithLibrary(build_py):
    def run(self):
        super().run()
        build_dir = ROOT / "build"
        args = ["make", "-C", str(ROOT), "lib"] + shlex.split(os.environ.get("DATTN_MAKE_ARGS", ""))
        subprocess.check_call(args)
        dest = Path(self.build_lib) / "dattn"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(build_dir / "libdattn.so", dest / "libdattn.so")


class BinaryDistribution(Distribution):
    """The wheel carries a native library: tag it for the platform."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """libdattn.so is loaded through ctypes, not imported as a CPython extension: the
    wheel fits any Python 3 on this platform (py3-none-<platform>)."""

    def get_tag(self):
        _, _, plat = super().get_tag()
        return "py3", "none", plat


setup(cmdclass={"build_py": BuildWithLibrary, "bdist_wheel": PlatformWheel},
      distclass=BinaryDistribution,
      # setuptools' own staging stays out of the make tree's top level
      options={"build": {"build_base": "build/python"}})
