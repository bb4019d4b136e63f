"""The only package that imports Ray: it schedules plain-Python work from the rest of arag."""
