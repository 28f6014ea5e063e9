"""The reference detectors, rebuilt from their papers (no weights can be downloaded): each a hand-written ONNX
graph with its preprocessing inside, a numpy or torch reference implementation it is tested against, and the
data of its model card. :mod:`detectors.reference.build` trains and exports them (extra ``train``)."""
