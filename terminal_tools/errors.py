"""Errors the agent caused and can fix; tool adapters turn them into clear tool errors."""


class UserError(ValueError):
    """Bad input or a state the caller must change (unknown id, cap reached, ...)."""
