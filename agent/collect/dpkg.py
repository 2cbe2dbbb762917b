"""Installed package versions from the host's dpkg database (/var/lib/dpkg/status).

Debian and Ubuntu hosts keep it as text; RPM hosts keep a binary database the agent does not
parse, so facts that need a package version are not_supported there.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["installed", "upstream"]

_STATUS = "var/lib/dpkg/status"


def installed(root: Path) -> dict[str, str] | None:
    """Package name -> version of every installed package; None without a dpkg database."""
    status = root / _STATUS
    if not status.exists():
        return None
    out: dict[str, str] = {}
    for stanza in status.read_text().split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in stanza.splitlines() if ": " in line and line[0] != " "
        )
        if "installed" in fields.get("Status", "").split(" ") and "Package" in fields:
            out[fields["Package"]] = fields.get("Version", "")
    return out


def upstream(version: str) -> str:
    """The upstream part of a Debian version: epoch and revision dropped (5:27.3.1-1~jammy is
    27.3.1), so it compares with what the software itself reports."""
    version = version.split(":", 1)[-1]
    return version.rpartition("-")[0] if "-" in version else version
