"""Package layout only (all metadata is in pyproject.toml): the repository's top-level `resources/` ships inside the
package as `nemo_desktop/resources/`, and `packaging/desktop/` and `packaging/icons/` as its `desktop/` and `icons/`
sub-folders, so an installed copy reads one folder through importlib.resources (nemo_desktop/core/resources.py).
pyproject.toml cannot map folders outside the package into it, hence this file. Each data folder is named as a
package of its own (setuptools warns about data folders that are not). tests/test_packaging.py builds the wheel and
the sdist and checks that every file is in them."""
import os

from setuptools import find_packages, setup

RESOURCES = "nemo_desktop.resources"
MAPPED = {RESOURCES: "resources", f"{RESOURCES}.desktop": "packaging/desktop", f"{RESOURCES}.icons": "packaging/icons"}
for folder, subfolders, _ in os.walk("resources"):
    subfolders[:] = sorted(d for d in subfolders if d != "__pycache__")
    for d in subfolders:
        path = f"{folder}/{d}"
        MAPPED[RESOURCES + "." + path.split("/", 1)[1].replace("/", ".")] = path

FONTS = "nemo_desktop.core.reports.fonts"  # the PDF reports' fonts and their license, a data folder in the package

setup(
    packages=[*find_packages(include=["nemo_desktop", "nemo_desktop.*"]), FONTS, *MAPPED],
    package_dir=MAPPED,
    package_data={**{package: ["*"] for package in MAPPED},
                  FONTS: ["*.ttf", "LICENSE-DejaVu.txt"]},
    exclude_package_data={"": ["*.py[co]"]},
)
