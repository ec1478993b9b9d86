"""SpaTeC: spatio-temporal composite events over GPS positions."""


def compile(path, text=None):  # noqa: A001 - the API's verb
    """Parse, check and plan a program: see :func:`spatec.api.compile`."""
    from spatec.api import compile as _compile

    return _compile(path, text)


__all__ = ["compile"]
