"""What every bundled model reports about itself, kept in one place."""

from __future__ import annotations

from typing import ClassVar


class ModelIdentity:
    """The Embedder port's descriptive half: a model id and dimension per class, a version per install."""

    MODEL_ID: ClassVar[str]
    DIMENSION: ClassVar[int] = 384

    _version: str

    @property
    def model_id(self) -> str:
        return self.MODEL_ID

    @property
    def model_version(self) -> str:
        return self._version

    @property
    def dimension(self) -> int:
        return self.DIMENSION
