"""The command-line front ends: `kgc` (compile, tune) and `kgc-opt`.

They sit on top of every other layer: they parse arguments, call the
Python API, the pipeline or the search, and turn a KgcError into
`file:line:col: error: ...` on stderr and exit status 1.
"""
