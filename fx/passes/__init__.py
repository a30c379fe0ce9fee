"""Graph passes, one per file: each takes an `fx.Graph` (or `GraphModule`) and rewrites or
annotates it in place. ``dce`` removes dead pure nodes; the others (cse, constant folding, shape
propagation, ...) live next to it. Import the pass you need: ``from fx.passes.dce import ...``.
"""
