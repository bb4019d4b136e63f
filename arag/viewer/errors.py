"""What a request can be refused with: a name with nothing behind it (404) and a value the viewer
does not take (400). Classes of their own, so that a LookupError or ValueError from a bug in a page
is a server error (500), never a page saying the request was wrong."""


class NotFound(LookupError):
    pass


class Refused(ValueError):
    pass
