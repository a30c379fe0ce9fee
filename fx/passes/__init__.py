"""Graph passes, one per file: each takes an `fx.Graph` (or `GraphModule`) and rewrites or
annotates it in place: cse, constant folding, ``ufunc.outer`` expansion, shape propagation.
Import the pass you need: ``from fx.passes.cse import ...``. Dead code elimination is a method
of the graph itself (`Graph.eliminate_dead_code`).
"""
