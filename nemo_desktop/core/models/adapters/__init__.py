"""Adapter families. Importing this package imports every module in it; each registers its families
with `registry.register_family`. Add a family by adding a module here."""
import importlib
import pkgutil

for _m in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_m.name}")
