"""Reference detectors, model cards, runtimes, and the paired proxy corpus."""
