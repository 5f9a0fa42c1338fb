"""The one base every stored result type builds on (store key, JSON form with a schema version); below every
other core package, so the result records of any layer can use it."""
from .base import SCHEMA_FIELD, Record, ResultBase, from_plain, to_plain

__all__ = ["SCHEMA_FIELD", "Record", "ResultBase", "from_plain", "to_plain"]
