"""A kernel's build configuration (/boot/config-RELEASE, or /proc/config.gz decompressed) as
{option: value}.

Format: the `.config` that scripts/kconfig writes (Documentation/kbuild/kconfig.rst): one
`CONFIG_NAME=value` per line (value y, m, a number or a quoted string), `# CONFIG_NAME is not set`
for a bool or tristate turned off, other `#` lines are comments. Options a build never saw (another
architecture's, or a later kernel's) are simply absent, which says nothing either way.
"""
from __future__ import annotations

import re

_SET = re.compile(r"^(CONFIG_[A-Za-z0-9_]+)=(.*)$")
_UNSET = re.compile(r"^# (CONFIG_[A-Za-z0-9_]+) is not set$")


def parse_kernel_config(text: str) -> dict[str, str]:
    """Every option the file names: its value as written ("y", "m", "250", '"string"'), or "n" for
    `# CONFIG_X is not set`. Lines of any other shape are skipped: the file is the kernel's own."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        m = _SET.match(line)
        if m:
            out[m.group(1)] = m.group(2)
            continue
        m = _UNSET.match(line)
        if m:
            out[m.group(1)] = "n"
    return out


def config_enabled(config: dict[str, str], option: str) -> bool | None:
    """True for `=y` or `=m`, False for "is not set" or absent from a configuration that was read
    (a build that never offered the option does not have it), None for no configuration at all."""
    if not config:
        return None
    return config.get(option, "n") in ("y", "m")
