"""componentize-py looks up the class of an exported resource in a module named after the
exported interface (`adapter`, for `session`): this module is only that name."""

from app import Session  # noqa: F401
