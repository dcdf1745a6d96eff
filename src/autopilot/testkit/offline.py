"""Run a command against the scripted model server, offline, in a private network.

``python -m autopilot.testkit.offline --script NAME [--netns] [--set-env K=V]…
[--template SRC=DEST]… [--fail-for-seconds N] -- CMD…``

With ``--netns`` the whole thing runs in a fresh network namespace that has only
loopback (``unshare -n`` as root, ``unshare -rn`` otherwise), so nothing the agent
CLI tries can leave the machine; the model server is started inside it on
127.0.0.1. ``{port}`` and ``{base_url}`` in ``--set-env`` values are replaced with the
server's, and so are they in each ``--template`` file ``SRC``, copied to ``DEST``
before the command starts (for CLIs that read the base URL only from a config file).
``--fail-for-seconds N`` gives the server a recovery window: 429s for N seconds from
the first model request, then the script. The requests the server answered are written as JSON
lines to ``--requests-file``. Exits with the command's exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
from pathlib import Path

from autopilot.testkit.model_server import ModelServer

_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_INSIDE_ENV = "AUTOPILOT_OFFLINE_NETNS"


def bring_loopback_up() -> None:
    """Set ``lo`` up in the current network namespace (a new one starts down).

    Raises:
        OSError: the ioctl was refused.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH", b"lo", 0)
        flags = struct.unpack("16sH", fcntl.ioctl(sock, _SIOCGIFFLAGS, request)[:18])[1]
        fcntl.ioctl(sock, _SIOCSIFFLAGS, struct.pack("16sH", b"lo", flags | _IFF_UP))


def netns_prefix() -> list[str] | None:
    """The ``unshare`` argv that gives a private network namespace here, or None."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    for flags in (["-n"], ["-r", "-n"]):
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            done = subprocess.run(
                [unshare, *flags, "true"], capture_output=True, timeout=10, check=False
            )
            if done.returncode == 0:
                return [unshare, *flags]
    return None


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, (re)enter a namespace if asked, serve, run, return its code."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" not in args:
        print(
            "usage: offline [--netns] --script NAME [--set-env K=V]... "
            "[--template SRC=DEST]... [--fail-for-seconds N] -- CMD...",
            file=sys.stderr,
        )
        return 2
    split = args.index("--")
    parser = argparse.ArgumentParser(prog="autopilot.testkit.offline")
    parser.add_argument("--script", default="default")
    parser.add_argument("--netns", action="store_true")
    parser.add_argument("--set-env", action="append", default=[])
    parser.add_argument("--template", action="append", default=[])
    parser.add_argument("--fail-for-seconds", type=float)
    parser.add_argument("--requests-file")
    options = parser.parse_args(args[:split])
    command = args[split + 1 :]
    if options.netns and os.environ.get(_INSIDE_ENV) != "1":
        prefix = netns_prefix()
        if prefix is None:
            print("offline: no private network namespace available here", file=sys.stderr)
            return 3
        env = dict(os.environ, **{_INSIDE_ENV: "1"})
        return subprocess.call([*prefix, sys.executable, "-m", __spec__.name, *args], env=env)
    if os.environ.get(_INSIDE_ENV) == "1":
        bring_loopback_up()
    with ModelServer(options.script, fail_for_seconds=options.fail_for_seconds) as server:

        def substitute(text: str) -> str:
            return text.replace("{port}", str(server.port)).replace("{base_url}", server.base_url)

        env = dict(os.environ)
        env.pop(_INSIDE_ENV, None)
        for item in options.set_env:
            key, _, value = item.partition("=")
            env[key] = substitute(value)
        for item in options.template:
            source, _, destination = item.partition("=")
            target = Path(destination)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(substitute(Path(source).read_text(encoding="utf-8")), "utf-8")
        code = subprocess.call(command, env=env)
        if options.requests_file:
            with Path(options.requests_file).open("w") as handle:
                for request in server.requests:
                    record = {"method": request.method, "path": request.path, "body": request.body}
                    handle.write(json.dumps(record, default=str) + "\n")
    return code


if __name__ == "__main__":
    sys.exit(main())
