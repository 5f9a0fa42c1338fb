"""What pyproject.toml cannot say (all other metadata is there):

1. The package layout: the repository's top-level `resources/` ships inside the package as `nemo_desktop/resources/`,
   and `packaging/desktop/` and `packaging/icons/` as its `desktop/` and `icons/` sub-folders, so an installed copy
   reads one folder through importlib.resources (nemo_desktop/core/base/resources.py). Each data folder is named as a
   package of its own (setuptools warns about data folders that are not). tests/test_packaging.py builds the wheel
   and the sdist and checks that every file is in them.
2. The long description (pyproject's `dynamic = ["readme"]`): README.md, with its relative links and images made
   absolute when NEMO_README_BASE_URL is set (a release build: packaging/README.md), so that the screenshots
   resolve on a package index page, where a relative `docs/screenshots/x.png` does not.
"""
import os
import re
from pathlib import Path

from setuptools import find_packages, setup

_RELATIVE_LINK = re.compile(r"(\]\()(?!https?://|mailto:|#)([^)\s]+)(\))")


def long_description(base_url: str | None = None) -> str:
    text = Path(__file__).with_name("README.md").read_text(encoding="utf-8")
    base = (os.environ.get("NEMO_README_BASE_URL", "") if base_url is None else base_url).strip()
    if base:
        text = _RELATIVE_LINK.sub(lambda m: m.group(1) + base.rstrip("/") + "/" + m.group(2) + m.group(3), text)
    return text


RESOURCES = "nemo_desktop.resources"
MAPPED = {RESOURCES: "resources", f"{RESOURCES}.desktop": "packaging/desktop", f"{RESOURCES}.icons": "packaging/icons"}
for folder, subfolders, _ in os.walk("resources"):  # run from the project's folder, as build backends do
    subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
    for d in subfolders:
        path = f"{folder}/{d}"
        MAPPED[RESOURCES + "." + path.split("/", 1)[1].replace("/", ".")] = path

FONTS = "nemo_desktop.core.reports.fonts"  # the PDF reports' fonts and their license, a data folder in the package

if __name__ == "__main__":  # how setuptools' build backend runs this file (tests import long_description)
    setup(
        packages=[*find_packages(include=["nemo_desktop", "nemo_desktop.*"]), FONTS, *MAPPED],
        package_dir=MAPPED,
        package_data={**{package: ["*"] for package in MAPPED},
                      "nemo_desktop": ["py.typed", "__init__.pyi"],  # the typed Python API (nemo_desktop/api.py)
                      FONTS: ["*.ttf", "LICENSE-DejaVu.txt"]},
        exclude_package_data={"": ["*.py[co]"]},
        long_description=long_description(),
        long_description_content_type="text/markdown",
    )
