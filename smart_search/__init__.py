"""Quota-aware web search for OpenClaw agents (see README.md)."""

__version__ = "0.1.0"


def distribution_name() -> str | None:
    """The name this code is distributed under (`openclaw-smart-search`), written down only in
    pyproject.toml: read from the source checkout's pyproject when there is one, else from the
    installed metadata. For install hints (`pip install '<name>[redis]'`)."""
    import os

    pyproject = os.path.join(os.path.dirname(os.path.dirname(__file__)), "pyproject.toml")
    try:
        import tomllib

        with open(pyproject, "rb") as fh:
            return str(tomllib.load(fh)["project"]["name"])
    except (OSError, KeyError, ValueError):
        pass
    from importlib import metadata

    try:
        names = metadata.packages_distributions().get(__package__ or "smart_search", [])
    except Exception:  # noqa: BLE001 - a broken site-packages must not hide the hint
        names = []
    return names[0] if names else None
