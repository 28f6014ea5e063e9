"""The augmentation as a PyTorch ``Dataset`` (extra ``train``: the one module of ``transforms`` that imports torch).

Each item is one clip's drawn variant: its frames, the clip's label, and the draw. The dataset holds paths (or
bytes) and the configuration only; each ``DataLoader`` worker runs its own codecs on its own copy, so nothing is
shared between processes, and an item depends on ``(seed, index, epoch)`` alone, whichever worker makes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import Dataset

from transforms.augment import AugmentConfig, Augmenter
from transforms.sampling import SamplingPolicy


class AugmentedVideos(Dataset):
    """``clips[i]`` under the condition drawn for ``(seed, i, epoch)``.

    ``dataset[i]`` uses the epoch :meth:`set_epoch` set (call it before each epoch's ``DataLoader`` iteration;
    workers that persist across epochs keep the epoch they were started with, so index with ``(i, epoch)``
    through a sampler then). An item is a dict: ``frames`` (uint8 tensor ``[N, H, W, 3]``), ``label`` (the
    given label, -1 when none), ``condition``, ``index``, ``epoch``.
    """

    def __init__(
        self,
        clips: Sequence[str | Path | bytes],
        labels: Sequence[int] | None = None,
        config: AugmentConfig | None = None,
        seed: int = 0,
        sampling: SamplingPolicy | None = None,
    ) -> None:
        if labels is not None and len(labels) != len(clips):
            raise ValueError(f"{len(labels)} labels for {len(clips)} clips")
        self.clips = [c if isinstance(c, bytes) else str(c) for c in clips]
        self.labels = list(labels) if labels is not None else None
        self.config = config or AugmentConfig()
        self.seed = seed
        self.sampling = sampling
        self.epoch = 0
        self._augmenter: Augmenter | None = None

    def __len__(self) -> int:
        return len(self.clips)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __getitem__(self, key: int | tuple[int, int]) -> dict[str, Any]:
        index, epoch = key if isinstance(key, tuple) else (key, self.epoch)
        if not 0 <= index < len(self.clips):
            raise IndexError(f"index {index} out of range for {len(self.clips)} clips")
        # made in the process that asks first: each worker's own
        if self._augmenter is None:
            self._augmenter = Augmenter(self.config, self.seed)
        frames, drawn = self._augmenter.frames(self.clips[index], index, epoch, self.sampling)
        return {
            "frames": torch.from_numpy(frames),
            "label": self.labels[index] if self.labels is not None else -1,
            "condition": drawn.condition.name,
            "index": index,
            "epoch": epoch,
        }

    def __getstate__(self) -> dict[str, Any]:
        # a worker gets the configuration, not the parent's augmenter
        return {**self.__dict__, "_augmenter": None}
