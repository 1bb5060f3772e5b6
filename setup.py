"""The part of the build pyproject.toml cannot say: what is found rather than listed. The packages
(every folder of app/, widgets/ and probes/, and resources/ installed as app.resources, which
discovery cannot express) and the probes' C files (probes/build.py), so adding a probe edits neither."""
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
from probes.build import HEADER, native_sources  # noqa: E402  (the checkout's own, before it is installed)

setup(
    packages=[*find_packages(include=["app", "app.*", "widgets", "widgets.*", "probes", "probes.*"]), "app.resources"],
    ext_modules=[Extension("probes._native", [str(p.relative_to(ROOT)) for p in native_sources(ROOT)],
                           depends=[f"probes/{HEADER}"], extra_compile_args=["-O2"])],
)
