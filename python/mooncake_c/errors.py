"""Error codes (include/mooncake/errors.h, upstream's ErrorCode values) and MooncakeError."""

from ._native import strerror


class MooncakeError(Exception):
    """A call failed: .code is the negative error code, .name its name ("OBJECT_NOT_FOUND")."""

    def __init__(self, code, op="", key=None):
        self.code = int(code)
        self.name = strerror(self.code)
        self.op = op
        self.key = key
        where = op + ("(%r)" % (key,) if key is not None else "")
        super().__init__("%s%s%s (%d)" % (where, ": " if where else "", self.name, self.code))


class ObjectNotFound(MooncakeError, KeyError):
    """OBJECT_NOT_FOUND; also a KeyError, so `except KeyError` works."""

    def __str__(self):
        return Exception.__str__(self)


def error_for(code, op="", key=None):
    cls = ObjectNotFound if strerror(code) == "OBJECT_NOT_FOUND" else MooncakeError
    return cls(code, op, key)


def check(rc, op="", key=None):
    """rc when it is >= 0; raises the matching MooncakeError otherwise."""
    if rc < 0:
        raise error_for(rc, op, key)
    return rc
