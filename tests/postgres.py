"""A private PostgreSQL server for one test session: `initdb` and `pg_ctl` from Debian's
`postgresql` package, a data directory in a temporary folder, a free port on 127.0.0.1.

PostgreSQL refuses to run as root: as root the server runs as the `postgres` user (which the
package creates), and the folder is theirs.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from kvadmin.redis_server import free_port

DATABASE = "kvadmin"


def server_bindir() -> Path:
    """Where Debian keeps initdb and pg_ctl: off PATH, named by `pg_config --bindir`."""
    if found := shutil.which("initdb"):
        return Path(found).resolve().parent  # a link on PATH, beside its pg_ctl
    pg_config = shutil.which("pg_config")
    if pg_config:
        bindir = subprocess.run(
            [pg_config, "--bindir"], capture_output=True, text=True, check=True
        ).stdout.strip()
        if (Path(bindir) / "initdb").exists():
            return Path(bindir)
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    raise RuntimeError(
        "No PostgreSQL server programs (initdb, pg_ctl): install Debian's postgresql package "
        "(bin/system-deps --postgres does)."
    )


class PostgresServer:
    def __init__(self) -> None:
        self.port = free_port()
        self.scratch = tempfile.mkdtemp(prefix="kvadmin-postgres-")
        self.data = Path(self.scratch) / "data"
        self.bindir = server_bindir()

    @property
    def url(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{DATABASE}"

    def _run(self, *args: str) -> None:
        command = [str(self.bindir / args[0]), *args[1:]]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode:
            raise RuntimeError(f"{args[0]} failed: {done.stdout}{done.stderr}")

    def start(self) -> "PostgresServer":
        if os.geteuid() == 0:
            shutil.chown(self.scratch, "postgres", "postgres")
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        options = f"-p {self.port} -k {self.scratch} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-o", options, "-w", "-t", "60", "start",
                  "-l", str(Path(self.scratch) / "log"))  # fmt: skip
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", DATABASE)
        return self

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.scratch, ignore_errors=True)
