"""Fusion as data: which ops of a function become one kernel.

`graph.FusionGraph` models a function's fusable ops (who uses them, what
escapes, which ops stay in place) and plans each candidate group once;
`partition.Partition` is a partition of those ops into kernels, with a text
form (`0,1,2;3`) and a check against a function; `greedy` partitions a
function greedily under `FusionDecisions` (which kinds of merges to make);
`proposals.propose_partitions` lists the distinct partitions worth trying.
The kg-fuse pass materializes a partition as kg.kernel ops.
"""

from kgc.fusion.graph import FusionGraph, NotFusable
from kgc.fusion.greedy import FusionDecisions, greedy_partition, merge_kind
from kgc.fusion.partition import InvalidPartition, Partition
from kgc.fusion.proposals import propose_partitions

__all__ = ["FusionDecisions", "FusionGraph", "InvalidPartition", "NotFusable", "Partition",
           "greedy_partition", "merge_kind", "propose_partitions"]
