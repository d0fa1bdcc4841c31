"""The exceptions a page may show to a user: each carries a one-line reason."""


class ModelUnavailable(Exception):
    """A model cannot be had: unknown id, unreachable hub, missing or broken files."""


class CheckpointError(ModelUnavailable):
    """The files are there but are not a BERT checkpoint this project can read."""


class EmptyInput(ValueError):
    """The text holds nothing to tokenize (empty, whitespace, or only control characters)."""


class ModelTooLarge(ModelUnavailable):
    """The model would take more memory than this server gives one model (known before any
    tensor is read)."""
