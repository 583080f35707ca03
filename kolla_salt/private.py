"""What only its owner may see. Files (passwords, rendered configs, client files,
state records) are written whole, as a temporary file beside them renamed over, so
that a reader or a process killed half way never sees part of one, and mode 0600
from their first byte; text for output (a command's, a container's log) has the
secrets it holds blanked out; the secrets some data holds are found in it."""
import os
from pathlib import Path


def write_private(path, text, durable=False):
    """Writes `text` to `path` (mode 0600); `durable`: on disk before the rename (a
    journal that must outlive a power cut)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
        if durable:
            f.flush()
            os.fsync(f.fileno())
    os.chmod(tmp, 0o600)   # an old temporary file left with another mode
    os.replace(tmp, path)


def redact(text, secrets):
    """`text` with each of `secrets` (4 characters and more; the longest first, so that
    one holding another goes whole) replaced by asterisks."""
    for secret in sorted((s for s in secrets if s and len(s) >= 4), key=len, reverse=True):
        text = text.replace(secret, "********")
    return text


def redacted_lines(chunks, secrets):
    """The text of a stream of byte `chunks` (a followed log), line by line, each
    redacted: a secret split between two chunks is whole in its line before it is
    looked for."""
    rest = b""
    for chunk in chunks:
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            yield redact(line.decode(errors="replace") + "\n", secrets)
    if rest:
        yield redact(rest.decode(errors="replace"), secrets)


def used_passwords(passwords, services):
    """The passwords a host's services use (their values appear in its specs or files):
    its pillar holds no other secret (a compute host gets no database root password)."""
    texts = list(_strings(services))
    return {key: value for key, value in passwords.items() if any(value in text for text in texts)}


def _strings(data):
    if isinstance(data, str):
        yield data
    elif isinstance(data, dict):
        for value in data.values():
            yield from _strings(value)
    elif isinstance(data, (list, tuple)):
        for value in data:
            yield from _strings(value)
