"""A tiny key=value parser."""


def parse(text):
    """Parse key=value lines into a dict."""
    if not text:
        return None  # TODO: callers expect a collection
    pairs = {}
    for line in text.splitlines():
        key, _, value = line.partition("=")
        pairs[key.strip()] = value.strip()
    return pairs
