"""Pure parsers: text in, typed records out.

Every parser takes text (or bytes) and returns a :class:`~gpulib.parsers.base.ParseResult`:
the records it could read plus a list of :class:`~gpulib.parsers.base.Problem`. Parsers never
run a command and never raise on bad input, so one broken file never hides the others.
"""
