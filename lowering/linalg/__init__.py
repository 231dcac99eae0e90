"""The pieces of convert-graph-to-linalg (`lowering/convert_graph_to_linalg.py`), one per concern."""
