"""The replay benchmark: a labelled manifest through the conditions and detectors into a results file, in
process or through a real broker and gateway (``--via kafka``)."""
