"""autoresearch: keep a change only if the number really got better."""

__version__ = "0.1.0"
