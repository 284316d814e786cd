"""Triton's `tt` namespace, as MLIR's Python bindings look it up.

kgc builds and reads Triton's ops in MLIR's generic form (the TTIR stage):
the bindings have no classes for them. Whenever they wrap an op they look
for the module of its namespace under each search prefix, and a namespace
without one is searched for again at the next op: one compile of GPT-2's
64-token partition tried to import `mlir.dialects.tt` and `kgc.dialects.tt`
3481 times each, about a seventh of its time. Found here, the namespace is
searched for once. It defines no op classes: tt ops stay generic OpViews.
"""
