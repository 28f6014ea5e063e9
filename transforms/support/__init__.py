"""What every package of the project leans on and none of them is about: configuration errors told in one line
(:mod:`~transforms.support.config_errors`) and the one retry wait (:mod:`~transforms.support.backoff`). It sits in
``transforms``, the lowest layer, so ``detectors`` and ``gateway`` import it from below."""
