"""A request refused: a name with nothing behind it (404), a value the viewer does not take (400); own
classes, so a LookupError or ValueError from a bug in a page is a 500, never "the request was wrong"."""


class NotFound(LookupError):
    pass


class Refused(ValueError):
    pass
